"""`citebot ingest` and `citebot docs --stats` on the generated sample PDFs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from haystack import Document

from bot.cli.ingest_cmd import collect_files
from bot.cli.main import main
from connectors.settings import Settings
from connectors.stores import open_store
from eval import sample_pdfs
from pipelines.chunk_stats import chunk_stats
from tests.helpers.pdfs import make_pdf


def test_collect_files_walks_folders_and_reports_missing(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.pdf").write_bytes(b"%PDF-1.4")
    (tmp_path / "a" / "notes.txt").write_text("x")
    (tmp_path / "two.PDF").write_bytes(b"%PDF-1.4")
    files, missing = collect_files([str(tmp_path), str(tmp_path / "two.PDF"), str(tmp_path / "nope.pdf")])
    assert [f.name for f in files] == ["one.pdf", "two.PDF"]
    assert missing == [str(tmp_path / "nope.pdf")]


@pytest.mark.slow
def test_ingest_json_lines_exit_status_and_rerun(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    samples = sample_pdfs.write_samples(tmp_path / "pdfs")
    bad = tmp_path / "pdfs" / "report.pdf"
    bad.write_text("this is not a PDF")

    assert main(["ingest", str(tmp_path / "pdfs"), "--json", "--scope", "slack:T1:C1"]) == 1
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    by_name = {Path(r["file"]).name: r for r in rows}
    assert set(by_name) == {p.name for p in samples} | {"report.pdf"}
    for r in rows:
        assert set(r) == {"file", "doc_id", "status", "pages", "chunks", "ocr_pages", "seconds", "error",
                          "indexed_as", "renamed_from", "replaced_doc_id"}
    assert by_name["report.pdf"]["status"] == "failed" and "not a PDF" in by_name["report.pdf"]["error"]
    hb = by_name[sample_pdfs.HANDBOOK]
    assert hb["status"] == "indexed" and hb["pages"] == 14 and hb["ocr_pages"] == 1 and hb["chunks"] > 20

    bad.unlink()
    assert main(["ingest", str(tmp_path / "pdfs"), "--json", "--scope", "slack:T1:C1"]) == 0
    again = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["status"] for r in again} == {"unchanged"}

    # nothing leaked into the default scope
    assert main(["docs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["docs", "--scope", "slack:T1:C1", "--stats", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stats"]["tables_found"] == 3 and out["stats"]["ocr_pages"] == 1
    assert out["stats"]["tokens"]["max"] <= Settings().chunk_max_tokens


def _index(data_dir: Path) -> dict[str, tuple[str | None, dict[str, object], list[float] | None]]:
    """Every chunk in a data dir's store: id -> (content, metadata but the upload time, vector)."""
    store = open_store(Settings(data_dir=data_dir))
    return {d.id: (d.content, {k: v for k, v in d.meta.items() if k != "uploaded_at"}, d.embedding)
            for d in store.filter_documents()}


@pytest.mark.slow
def test_two_workers_index_exactly_what_one_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same folder indexed with one worker and with two: the same chunks, text, metadata and vectors, the same
    lines (in the order files finish), the broken file failing alone, and of two files named alike the first listed
    keeping the name, whichever finishes first."""
    folder = tmp_path / "pdfs"
    sample_pdfs.write_samples(folder)
    (folder / "a").mkdir()
    (folder / "b").mkdir()
    # b's report is the short one, so with two workers it is ready before a's
    (folder / "a" / "report.pdf").write_bytes(make_pdf(
        [[f"Report A, page {p}, line {i}: the notice period is {p + i} days." for i in range(30)] for p in range(8)],
        bold=None))
    (folder / "b" / "report.pdf").write_bytes(make_pdf([["Report B: the notice period is 90 days."]], bold=None))
    (folder / "broken.pdf").write_text("this is not a PDF")

    rows = {}
    for workers in ("1", "2"):
        monkeypatch.setenv("CITEBOT_DATA_DIR", str(tmp_path / f"data{workers}"))
        assert main(["ingest", str(folder), "--json", "--workers", workers]) == 1  # the broken file
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        rows[workers] = {r["file"]: {k: v for k, v in r.items() if k != "seconds"} for r in lines}

    assert rows["2"] == rows["1"]
    assert {r["status"] for r in rows["1"].values()} == {"indexed", "failed"}
    assert rows["1"][str(folder / "broken.pdf")]["status"] == "failed"
    assert rows["2"][str(folder / "b" / "report.pdf")]["indexed_as"] == "report (2).pdf"
    one, two = _index(tmp_path / "data1"), _index(tmp_path / "data2")
    assert len(one) > 40
    assert two == one


def test_workers_must_be_at_least_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["ingest", ".", "--workers", "0"])
    assert e.value.code == 2
    assert "--workers: must be a whole number of at least 1, not '0'" in capsys.readouterr().err


def test_chunk_stats_counts_only_the_given_scopes(tmp_path: Path) -> None:
    store = open_store(Settings(data_dir=tmp_path))
    vec = [1.0] + [0.0] * 383

    def chunk(doc: str, i: int, scope: str, **meta: object) -> Document:
        base = {"scope": scope, "doc_id": doc, "file_name": f"{doc}.pdf", "page_start": 1, "page_end": 1,
                "section": "", "section_id": "", "element_type": "text", "label": "", "chunk_index": i}
        return Document(id=f"{doc}:{i:05d}", content="word " * (10 + i), meta={**base, **meta}, embedding=vec)

    store.replace_document(
        [
            chunk("a", 0, "s1"),
            chunk("a", 1, "s1", page_end=2),
            chunk("a", 2, "s1", element_type="table", label="Table 1"),
            chunk("a", 3, "s1", element_type="ocr", page_start=3, page_end=3, ocr_confidence=80.0),
        ],
        scope="s1",
    )
    store.replace_document([chunk("b", 0, "s2", element_type="table", label="Table 9")], scope="s2")
    stats = chunk_stats(store, ["s1"], count_tokens=lambda t: len(t.split()))
    assert stats["chunks"] == 4 and stats["documents"] == 1
    assert stats["share_spanning_pages"] == 0.25
    assert stats["tables_found"] == 1 and stats["ocr_pages"] == 1 and stats["ocr_mean_confidence"] == 80.0
    assert stats["tokens"] == {"min": 10, "p50": 12, "p90": 13, "max": 13, "mean": 11.5}
    assert stats["element_types"] == {"ocr": 1, "table": 1, "text": 2}
