"""The eval runner's bookkeeping with a fake service: resume, index cache, scopes, verbatim recheck.

(The real pipeline end to end is in test_eval_e2e.py.)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from haystack import Document

from connectors.settings import Settings
from eval.cases import EvalSetError, load_cases
from eval.metrics import summarise
from eval.records import read_results
from eval.report_tables import run_summary_markdown
from eval.runner import EvalRunError, RunOptions, all_modes, run_eval, stratified
from pipelines.models import Answer, Citation, IngestResult, RetrievedChunk
from tests.helpers.pdfs import make_pdf


class FakeStore:
    def __init__(self) -> None:
        self.docs: list[Document] = []

    def fetch(self, *, scopes: Sequence[str], filters: dict[str, Any] | None = None, limit: int = 200
              ) -> list[Document]:
        out = [d for d in self.docs if d.meta["scope"] in scopes]
        if filters and filters.get("field") == "id":
            out = [d for d in out if d.id in filters["value"]]
        return out[:limit]


STORES: dict[Path, FakeStore] = {}  # one per index folder, like the SQLite file there


class FakeService:
    """Indexes 'PDFs' as three one-page chunks; answers by citing page 2 of the first file in scope.

    Like the real service, the store lives in the index folder (it outlives a service object) and ingesting
    a file already in its scope is ``unchanged``."""

    def __init__(self, settings: Settings, calls: dict[str, list[Any]], interrupt_after: int | None = None,
                 forge: str = "", interrupt_ingest_of: str = "") -> None:
        self.settings = settings
        self.store = STORES.setdefault(settings.data_dir, FakeStore())
        self.calls = calls
        self.interrupt_after = interrupt_after
        self.interrupt_ingest_of = interrupt_ingest_of
        self.forge = forge

    def ingest(self, data: bytes, *, file_name: str, scope: str) -> IngestResult:
        if file_name == self.interrupt_ingest_of:
            raise KeyboardInterrupt
        if data.startswith(b"%PDF-1 broken"):
            return IngestResult(file=file_name, scope=scope, status="failed", error="The PDF could not be read.")
        if any(d.meta["file_name"] == file_name and d.meta["scope"] == scope for d in self.store.docs):
            return IngestResult(file=file_name, doc_id=file_name, scope=scope, status="unchanged", pages=3, chunks=3)
        self.calls["ingest"].append((file_name, scope))
        for page in (1, 2, 3):
            self.store.docs.append(Document(id=f"{file_name}:{page:05d}", content=f"{file_name} page {page} text.",
                                            meta={"scope": scope, "file_name": file_name}))
        return IngestResult(file=file_name, doc_id=file_name, scope=scope, status="indexed", pages=3, chunks=3)

    def answer(self, question: str, scopes: list[str], history: Sequence[Any] = (), *, mode: str = "hybrid",
               k: int | None = None) -> Answer:
        self.calls["answer"].append((question, tuple(scopes), mode))
        self.calls.setdefault("fusion", []).append((question, mode, self.settings.fusion))
        if self.interrupt_after is not None and len(self.calls["answer"]) > self.interrupt_after:
            raise KeyboardInterrupt
        if "unknown" in question:
            return Answer(text="The PDFs here don't say.", refused=True, confidence=0.25)
        doc = next(d for d in self.store.docs if d.meta["scope"] in scopes and d.id.endswith(":00002"))
        file = doc.meta["file_name"]
        quote = "forged text" if question == self.forge else f"{file} page 2"
        return Answer(
            text=f"{quote} [1]",
            citations=[Citation(n=1, chunk_id=doc.id, doc_id=file, file=file, page_start=2, page_end=2, quote=quote)],
            retrieved=[RetrievedChunk(chunk_id=doc.id, doc_id=file, file=file, page_start=2, page_end=2, score=1.0)],
            confidence=0.5 + len(question) / 100,
        )


CASES = [
    {"id": "a", "question": "q a", "sources": [{"doc": "one.pdf", "pages": [2]}], "category": "lookup"},
    {"id": "b", "question": "q b", "sources": [{"doc": "two.pdf", "pages": [2]}], "category": "lookup"},
    {"id": "c", "question": "q unknown", "answerable": False, "category": "unanswerable"},
    {"id": "d", "question": "q d", "sources": [{"doc": "two.pdf", "pages": [3]}], "category": "table"},
]


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Settings, RunOptions, dict[str, list[Any]]]:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "one.pdf").write_bytes(b"%PDF-1 one")
    (docs / "two.pdf").write_bytes(b"%PDF-1 two")
    (docs / "notes.txt").write_text("not a pdf")
    set_path = tmp_path / "set.jsonl"
    set_path.write_text("".join(json.dumps(c) + "\n" for c in CASES))
    settings = Settings(data_dir=tmp_path / "data")
    return settings, RunOptions(set_path=set_path, docs_dir=docs, out_dir=tmp_path / "run"), {"ingest": [],
                                                                                              "answer": []}


def _quiet(_msg: str) -> None:
    pass


def test_interrupted_run_resumes_without_redoing_finished_cases(setup: Any) -> None:
    settings, opts, calls = setup
    with pytest.raises(KeyboardInterrupt):
        run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls, interrupt_after=2), log=_quiet)
    assert [r.id for r in read_results(opts.out_dir / "results.jsonl")] == ["a", "b"]
    # a torn, half-written line from the interruption is ignored and its case redone
    with (opts.out_dir / "results.jsonl").open("a") as f:
        f.write('{"id": "c", "question": "q unkn')
    calls["answer"].clear()
    runs = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    assert [q for q, _s, _m in calls["answer"]] == ["q unknown", "q d"]
    meta, results = runs["hybrid"]
    assert [r.id for r in results] == ["a", "b", "c", "d"]
    assert len((opts.out_dir / "results.jsonl").read_text().splitlines()) == 4
    assert meta["cases_run_now"] == 2
    assert results[2].refused and not results[2].answerable


def test_resume_refuses_a_different_run(setup: Any) -> None:
    settings, opts, calls = setup
    run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    opts.k = 3
    with pytest.raises(EvalRunError, match="different k"):
        run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    opts.fresh = True
    calls["answer"].clear()
    run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    assert len(calls["answer"]) == 4


def test_index_is_cached_by_content_and_records_metadata(setup: Any, tmp_path: Path) -> None:
    settings, opts, calls = setup
    meta, _ = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)["hybrid"]
    assert sorted(f for f, _scope in calls["ingest"]) == ["one.pdf", "two.pdf"]  # no .txt
    assert len({scope for _f, scope in calls["ingest"]}) == 2  # each PDF in its own scope
    assert meta["index_reused"] is False and len(meta["index_checksum"]) == 64
    assert {"git_commit", "settings", "embedding_model", "answer_model", "prompt_version", "set_sha256"} <= set(meta)
    assert meta["answer_model"] == "extractive"
    assert "openai_api_key" in meta["settings"] and meta["settings"]["openai_api_key"] is None

    opts.out_dir = tmp_path / "run2"
    store_file_index = []

    def factory(s: Settings) -> FakeService:
        store_file_index.append(s.data_dir)
        return FakeService(s, calls)

    calls["ingest"].clear()
    meta2, _ = run_eval(settings, opts, service_factory=factory, log=_quiet)["hybrid"]
    assert calls["ingest"] == [] and meta2["index_reused"] is True
    assert meta2["index_checksum"] == meta["index_checksum"]
    assert str(store_file_index[0]).startswith(str(settings.data_dir / "eval" / "index"))

    (opts.docs_dir / "two.pdf").write_bytes(b"%PDF-1 two, edited")
    opts.out_dir = tmp_path / "run3"
    meta3, _ = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)["hybrid"]
    assert len(calls["ingest"]) == 2 and meta3["index_key"] != meta["index_key"]


def test_one_index_serves_per_doc_and_all_pdf_runs(setup: Any, tmp_path: Path) -> None:
    settings, opts, calls = setup
    meta, _ = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)["hybrid"]
    scope_of = dict(calls["ingest"])
    # without --per-doc every case is asked across every PDF's scope: both files can be found
    asked = {q: set(scopes) for q, scopes, _m in calls["answer"]}
    assert asked["q a"] == asked["q b"] == set(scope_of.values())
    calls["answer"].clear()
    opts.per_doc, opts.out_dir = True, tmp_path / "per-doc"
    meta2, _ = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)["hybrid"]
    assert len(calls["ingest"]) == 2 and meta2["index_reused"] is True  # indexed once, for both runs
    assert meta2["index_key"] == meta["index_key"]
    assert {q: scopes for q, scopes, _m in calls["answer"]}["q a"] == (scope_of["one.pdf"],)


def test_an_interrupted_index_build_resumes_with_the_pdfs_not_yet_written(setup: Any) -> None:
    settings, opts, calls = setup
    with pytest.raises(KeyboardInterrupt):
        run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls, interrupt_ingest_of="two.pdf"),
                 log=_quiet)
    assert [f for f, _s in calls["ingest"]] == ["one.pdf"]
    messages: list[str] = []
    meta, results = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls),
                             log=messages.append)["hybrid"]
    assert [f for f, _s in calls["ingest"]] == ["one.pdf", "two.pdf"]  # one.pdf was not indexed again
    assert [(i["file"], i["status"]) for i in meta["ingest"]] == [("one.pdf", "unchanged"), ("two.pdf", "indexed")]
    assert any("resuming the interrupted index build" in m for m in messages)
    assert len(results) == 4 and not any(r.error for r in results)


def test_pdfs_that_failed_to_index_are_named_on_every_run_over_the_index(setup: Any, tmp_path: Path) -> None:
    settings, opts, calls = setup
    (opts.docs_dir / "two.pdf").write_bytes(b"%PDF-1 broken")
    for out in ("first", "second"):  # the second run reuses the index
        messages: list[str] = []
        opts.out_dir = tmp_path / out
        meta, _ = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls),
                           log=messages.append)["hybrid"]
        assert "warning: 1 PDF(s) failed to index: two.pdf: The PDF could not be read." in messages
    assert meta["index_reused"] is True


def test_per_doc_asks_each_case_in_its_source_scope(setup: Any) -> None:
    settings, opts, calls = setup
    opts.per_doc = True
    _, results = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)["hybrid"]
    scope_of = dict(calls["ingest"])
    assert scope_of["one.pdf"] != scope_of["two.pdf"]
    asked = {q: scopes for q, scopes, _m in calls["answer"]}
    assert asked["q a"] == (scope_of["one.pdf"],)
    assert asked["q b"] == (scope_of["two.pdf"],)
    assert set(asked["q unknown"]) == {scope_of["one.pdf"], scope_of["two.pdf"]}
    assert results[1].citations[0].file == "two.pdf"


def test_neutral_names_index_as_doc_nnn_map_the_set_and_change_the_index_key(setup: Any) -> None:
    settings, opts, calls = setup
    opts.per_doc = True
    named_meta, _ = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)["hybrid"]
    calls["ingest"].clear()
    opts.neutral_names, opts.out_dir = True, opts.out_dir.parent / "neutral"
    meta, results = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)["hybrid"]
    assert meta["neutral_names"] == {"one.pdf": "doc-001.pdf", "two.pdf": "doc-002.pdf"}
    assert sorted(f for f, _ in calls["ingest"]) == ["doc-001.pdf", "doc-002.pdf"]
    assert meta["index_key"] != named_meta["index_key"] and named_meta["neutral_names"] is None
    by_id = {r.id: r for r in results}
    assert [s.doc for s in by_id["b"].sources] == ["doc-002.pdf"]
    assert by_id["b"].citations[0].file == "doc-002.pdf"  # asked in the mapped document's scope, scored on it
    assert json.loads((opts.out_dir / "meta.json").read_text())["neutral_names"]["two.pdf"] == "doc-002.pdf"


def test_each_case_records_the_confidence_its_refusal_was_decided_on(setup: Any) -> None:
    settings, opts, calls = setup
    run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    rows = {r.id: r for r in read_results(opts.out_dir / "results.jsonl")}
    assert {i: r.confidence for i, r in rows.items()} == {"a": 0.53, "b": 0.53, "c": 0.25, "d": 0.53}


def test_per_doc_asks_unanswerable_cases_in_the_pdf_they_are_asked_in(setup: Any) -> None:
    settings, opts, calls = setup
    opts.per_doc = True
    lines = opts.set_path.read_text().splitlines()
    lines.append(json.dumps({"id": "e", "question": "q unknown e", "answerable": False, "asked_in": ["two.pdf"],
                             "category": "unanswerable"}))
    opts.set_path.write_text("\n".join(lines) + "\n")
    run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    scope_of = dict(calls["ingest"])
    asked = {q: scopes for q, scopes, _m in calls["answer"]}
    assert asked["q unknown e"] == (scope_of["two.pdf"],)
    assert set(asked["q unknown"]) == {scope_of["one.pdf"], scope_of["two.pdf"]}  # no asked_in: every PDF


def test_asked_in_is_read_from_the_file_beside_the_set(setup: Any) -> None:
    settings, opts, calls = setup
    opts.per_doc = True
    side = opts.set_path.parent / "unanswerable_asked_in.json"
    side.write_text(json.dumps({"c": "one.pdf"}))
    messages: list[str] = []
    meta, _ = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=messages.append)["hybrid"]
    scope_of = dict(calls["ingest"])
    asked = {q: scopes for q, scopes, _m in calls["answer"]}
    assert asked["q unknown"] == (scope_of["one.pdf"],)
    assert any("asked_in of 1 unanswerable case(s) read from" in m for m in messages)
    # editing it changes where cases are asked: the run directory is not resumed across that
    side.write_text(json.dumps({"c": ["two.pdf"]}))
    with pytest.raises(EvalRunError, match="different set_sha256"):
        run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    # a file naming a case the set lacks, or an answerable one, is an error naming the file and the case
    for bad, problem in (({"zz": "one.pdf"}, "zz: no case with this id"),
                         ({"a": "one.pdf"}, "a: the case is answerable")):
        side.write_text(json.dumps(bad))
        with pytest.raises(EvalSetError, match=f"unanswerable_asked_in.json: {problem}"):
            run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)


def test_quotes_are_rechecked_against_the_stored_chunk(setup: Any) -> None:
    settings, opts, calls = setup
    _, results = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls, forge="q b"),
                          log=_quiet)["hybrid"]
    by_id = {r.id: r for r in results}
    assert by_id["a"].citations[0].verbatim is True
    assert by_id["b"].citations[0].verbatim is False


def test_mode_all_writes_one_run_per_mode(setup: Any) -> None:
    settings, opts, calls = setup
    opts.modes = ("hybrid", "bm25", "dense")
    runs = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    assert list(runs) == ["hybrid", "bm25", "dense"]
    assert {m for _q, _s, m in calls["answer"]} == {"hybrid", "bm25", "dense"}
    assert all((opts.out_dir / m / "results.jsonl").exists() for m in runs)
    assert len(calls["ingest"]) == 2  # indexed once for all modes


def test_mode_all_runs_both_fusions_bm25_dense_and_the_naive_page_baseline(setup: Any) -> None:
    settings, opts, calls = setup
    one_line_pages = {"size": 12, "top": 760, "left": 72, "bold": None}
    one = [["Contents and foreword."], ["Gloves can be returned within 21 days."], ["The board met eleven times."]]
    two = [["Annual report cover."], ["Free cash flow was 3,282 million."],
           ["Hotels are paid up to 120 euros a night."]]
    (opts.docs_dir / "one.pdf").write_bytes(make_pdf(one, **one_line_pages))
    (opts.docs_dir / "two.pdf").write_bytes(make_pdf(two, **one_line_pages))
    cases = [{"id": "a", "question": "How long can gloves be returned?", "sources": [{"doc": "one.pdf", "pages": [2]}]},
             {"id": "b", "question": "What was the free cash flow?", "sources": [{"doc": "two.pdf", "pages": [2]}]},
             {"id": "d", "question": "How much may a hotel night cost?", "sources": [{"doc": "two.pdf", "pages": [3]}]}]
    opts.set_path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    opts.per_doc = True
    opts.modes = all_modes(settings)
    assert opts.modes == ["hybrid", "hybrid-rrf", "bm25", "dense", "pages"]
    runs = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    assert list(runs) == ["hybrid", "hybrid-rrf", "bm25", "dense", "pages"]
    # hybrid-rrf is hybrid retrieval on a service whose settings fuse by rank; the baseline asks no service
    asked = {(mode, fusion) for _q, mode, fusion in calls["fusion"]}
    assert asked == {("hybrid", "weighted"), ("hybrid", "rrf"), ("bm25", "weighted"), ("dense", "weighted")}
    assert len(calls["answer"]) == 4 * 3
    assert {m: meta["fusion"] for m, (meta, _r) in runs.items()} == {
        "hybrid": "weighted", "hybrid-rrf": "rrf", "bm25": None, "dense": None, "pages": None}

    _meta, pages = runs["pages"]
    assert [(r.hits[0].file, r.hits[0].page_start) for r in pages] == [("one.pdf", 2), ("two.pdf", 2), ("two.pdf", 3)]
    assert all({h.file for h in r.hits} == {r.sources[0].doc} for r in pages)  # scoped per document
    overall = summarise(pages, opts.k)["overall"]
    assert overall["page_hit@5"] == 1.0 and overall["answer_rate"] is None and overall["refusal_f1"] is None

    printed = run_summary_markdown(runs)
    rows = [line.split("|")[1].strip() for line in printed.split("\n\n")[0].splitlines()[2:]]
    assert rows == ["hybrid", "hybrid-rrf", "bm25", "dense", "pages"]
    # the fake service cites page 2 of the scope's first file: case d misses, so hybrid is a third below the floor
    assert ("vs naive (page_hit@5, our hybrid minus the one-vector-per-page baseline): "
            "hybrid -0.333 (0.667 vs 1.000); hybrid-rrf -0.333 (0.667 vs 1.000)") in printed


def test_resume_never_mixes_fusions(setup: Any) -> None:
    settings, opts, calls = setup
    run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    rrf = settings.model_copy(update={"fusion": "rrf"})
    with pytest.raises(EvalRunError, match="different fusion; pass a new --out or add --fresh"):
        run_eval(rrf, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    # a run made before fusion was a setting fused by weights: it resumes under weighted, not under rrf
    meta = json.loads((opts.out_dir / "meta.json").read_text())
    del meta["fusion"]
    (opts.out_dir / "meta.json").write_text(json.dumps(meta))
    calls["answer"].clear()
    run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    assert calls["answer"] == []  # resumed: every case already done
    with pytest.raises(EvalRunError, match="different fusion"):
        run_eval(rrf, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    # --mode all keeps each fusion in its own folder, so re-running it resumes both
    opts.out_dir = opts.out_dir.parent / "all"
    opts.modes = ["hybrid", "hybrid-rrf"]
    run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    calls["answer"].clear()
    runs = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    assert calls["answer"] == [] and runs["hybrid-rrf"][0]["fusion"] == "rrf"


def test_fresh_requeries_an_existing_run_without_reindexing(setup: Any) -> None:
    settings, opts, calls = setup
    run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    calls["answer"].clear()
    opts.fresh = True
    meta, results = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)["hybrid"]
    assert len(calls["ingest"]) == 2 and meta["index_reused"] is True  # indexed by the first run only
    assert len(calls["answer"]) == 4 and meta["cases_run_now"] == 4  # every case asked again
    assert len((opts.out_dir / "results.jsonl").read_text().splitlines()) == 4


def test_cases_and_category_filters(setup: Any, tmp_path: Path) -> None:
    settings, opts, calls = setup
    opts.case_ids = ["a", "d"]
    _, results = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)["hybrid"]
    assert [r.id for r in results] == ["a", "d"]
    opts.case_ids, opts.categories, opts.out_dir = None, ["lookup", "unanswerable"], tmp_path / "cat"
    _, results = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)["hybrid"]
    assert [r.id for r in results] == ["a", "b", "c"]
    # a filtered run is a different run: not resumed from an unfiltered one
    opts.categories = ["lookup"]
    with pytest.raises(EvalRunError, match="different categories_filter"):
        run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)


def test_a_misspelt_filter_stops_before_indexing(setup: Any, run_cli: Any,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    settings, opts, _calls = setup
    argv = ["eval", "run", "--set", str(opts.set_path), "--docs", str(opts.docs_dir)]
    assert run_cli([*argv, "--category", "lookups"], settings) == 2
    assert "the set has no lookups; it has lookup, table, unanswerable" in capsys.readouterr().err
    assert run_cli([*argv, "--cases", "a,zz"], settings) == 2
    assert "no case with id zz" in capsys.readouterr().err
    assert not (settings.data_dir / "eval" / "index").exists()


def test_with_k_10_the_answers_passages_are_the_recorded_ranking(setup: Any) -> None:
    settings, opts, calls = setup
    opts.k = 10
    _, results = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)["hybrid"]
    a = next(r for r in results if r.id == "a")
    assert a.ranking == a.retrieved and a.ranking[0].file == "one.pdf"


def test_stratified_limit_covers_categories(setup: Any) -> None:
    _settings, opts, _calls = setup
    picked = stratified(load_cases(opts.set_path), 3)
    assert [c.id for c in picked] == ["a", "c", "d"]


def test_judge_scores_are_recorded_per_case(setup: Any, fake_judge: Any) -> None:
    from pydantic import SecretStr

    settings, opts, calls = setup
    settings = settings.model_copy(update={"openai_base_url": fake_judge.base_url, "judge_model": "judge-model",
                                           "openai_api_key": SecretStr("sk-test")})
    opts.judge = True
    fake_judge.replies = ['{"score": 0.25, "explanation": "only part of it"}'] * 20
    meta, results = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)["hybrid"]
    by_id = {r.id: r for r in results}
    assert by_id["a"].judge["groundedness"].score == 0.25
    assert set(by_id["a"].judge) == {"groundedness", "completeness"}  # no expected answer: no correctness
    assert by_id["c"].judge == {}  # refused: not judged
    assert meta["judge_model"] == "judge-model" and meta["judge_prompt_version"]
    assert meta["settings"]["openai_api_key"] == "set" and "sk-test" not in json.dumps(meta)
    assert len(fake_judge.requests) == 3 * 2


def test_judge_without_a_judge_model_is_refused_before_indexing(setup: Any, run_cli: Any,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    settings, opts, _calls = setup
    code = run_cli(["eval", "run", "--set", str(opts.set_path), "--docs", str(opts.docs_dir), "--judge"], settings)
    assert code == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err
    assert not (settings.data_dir / "eval" / "index").exists()


def test_old_eval_indexes_are_pruned(setup: Any, tmp_path: Path) -> None:
    from eval.index import KEEP_INDEXES

    settings, opts, calls = setup
    for i in range(KEEP_INDEXES + 2):
        (opts.docs_dir / "one.pdf").write_bytes(f"%PDF-1 version {i}".encode())
        opts.out_dir = tmp_path / f"run{i}"
        run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    assert len(list((settings.data_dir / "eval" / "index").iterdir())) == KEEP_INDEXES


def test_the_index_in_use_is_kept_however_long_ago_it_was_built(setup: Any, tmp_path: Path) -> None:
    """A development set indexed first and asked again and again is not pruned by newer indexes of other sets."""
    from eval.index import KEEP_INDEXES

    settings, opts, calls = setup
    root = settings.data_dir / "eval" / "index"

    def run(i: int) -> None:
        (opts.docs_dir / "one.pdf").write_bytes(f"%PDF-1 version {i}".encode())
        opts.out_dir = tmp_path / f"run{i}-{len(list(tmp_path.iterdir()))}"
        run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)

    run(0)
    first = next(root.iterdir())
    (first / "kept").touch()  # gone if the folder is ever deleted and built again
    for i in range(1, KEEP_INDEXES + 2):
        run(0)  # the first set, asked again between the others
        run(i)
    assert (first / "kept").exists() and len(list(root.iterdir())) == KEEP_INDEXES


class TestIndexCode:
    """The index key follows the indexing code only, so tuning answers never forces a re-index."""

    QUERY_SIDE = ("pipelines/query.py", "pipelines/components/extractive_answerer.py",
                  "pipelines/components/refusal.py", "pipelines/components/structure_router.py",
                  "pipelines/components/query_rewriter.py", "pipelines/components/citation_validator.py",
                  "pipelines/components/llm_answerer.py", "connectors/scoped_retrievers.py",
                  "connectors/sqlite_store/fulltext.py", "connectors/sqlite_store/vectors.py",
                  "connectors/sqlite_store/filters.py")

    @pytest.fixture
    def repo(self, tmp_path: Path) -> Path:
        """A copy of the repository's indexing and query code, to edit."""
        import shutil

        from eval.index import INDEX_CODE, REPO

        for rel in (*INDEX_CODE, *self.QUERY_SIDE):
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / rel, tmp_path / rel)
        return tmp_path

    @staticmethod
    def edit(path: Path, old: str, new: str) -> None:
        text = path.read_text()
        assert old in text, f"{old!r} not in {path}"
        path.write_text(text.replace(old, new, 1))

    def test_query_side_edits_keep_the_key(self, repo: Path) -> None:
        from eval.index import _code_fingerprint

        before = _code_fingerprint(repo)
        assert before == _code_fingerprint()  # the copy is the real code
        for rel in self.QUERY_SIDE:
            (repo / rel).write_text((repo / rel).read_text() + "\nTUNED = 0.42\n")
        # the store's search side
        search = repo / "connectors/sqlite_store"
        self.edit(search / "fulltext.py", "    def _prune_terms(", "    def _prune_terms(  # tuned\n")
        self.edit(search / "fulltext.py", "_MAX_QUERY_TERMS = 64", "_MAX_QUERY_TERMS = 32")
        self.edit(search / "vectors.py", "    def embedding_search(", "    def embedding_search(  # x\n")
        self.edit(search / "store.py", "    def fetch(", "    def fetch(  # x\n")
        assert _code_fingerprint(repo) == before

    @pytest.mark.parametrize(("rel", "old", "new"), [
        ("pipelines/components/chunker.py", "from __future__", "CHUNK_TWEAK = 1\nfrom __future__"),
        ("pipelines/reading/ocr.py", "from __future__", "OCR_TWEAK = 1\nfrom __future__"),
        ("pipelines/indexing.py", "from __future__", "INDEXING_TWEAK = 1\nfrom __future__"),
        ("connectors/sqlite_store/schema.py", "CREATE TABLE IF NOT EXISTS chunks (",
         "CREATE TABLE IF NOT EXISTS chunks (\n"),
        ("connectors/sqlite_store/rows.py", "    def insert(", "    def insert(  # changed\n"),
        ("connectors/sqlite_store/store.py", "    def replace_document(",
         "    def replace_document(  # changed\n"),
        ("connectors/embedding.py", "from __future__", "EMBED_TWEAK = 1\nfrom __future__"),
    ])
    def test_indexing_side_edits_change_the_key(self, repo: Path, rel: str, old: str, new: str) -> None:
        from eval.index import _code_fingerprint

        before = _code_fingerprint(repo)
        self.edit(repo / rel, old, new)
        assert _code_fingerprint(repo) != before

    def test_query_only_names_exist(self) -> None:
        """A renamed search method would otherwise fall back into the hash (safe, but the list would lie)."""
        import ast

        from eval.index import QUERY_ONLY_DEFINITIONS, REPO

        for rel, names in QUERY_ONLY_DEFINITIONS.items():
            tree = ast.parse((REPO / rel).read_text())
            defined = set()
            for node in tree.body:
                if isinstance(node, ast.FunctionDef | ast.ClassDef):
                    defined.add(node.name)
                    if isinstance(node, ast.ClassDef):
                        defined |= {f"{node.name}.{m.name}" for m in node.body if isinstance(m, ast.FunctionDef)}
                elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                    defined.add(node.targets[0].id)
            assert set(names) <= defined, set(names) - defined

    def test_every_module_the_indexing_code_imports_is_accounted_for(self) -> None:
        """Adding an indexing component without listing it in INDEX_CODE fails here."""
        import ast

        from eval.index import INDEX_CODE, INDEX_CODE_IMPORTS_NOT_HASHED, REPO

        unaccounted = set()
        for rel in INDEX_CODE:
            for node in ast.walk(ast.parse((REPO / rel).read_text())):
                names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module else
                         [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                if isinstance(node, ast.ImportFrom) and node.module and (REPO / node.module.replace(".", "/")).is_dir():
                    names = [f"{node.module}.{a.name}" for a in node.names]  # `from connectors import uploads`
                for name in names:
                    if name.split(".")[0] not in ("pipelines", "connectors"):
                        continue
                    target = name.replace(".", "/") + ".py"
                    if target not in INDEX_CODE and target not in INDEX_CODE_IMPORTS_NOT_HASHED:
                        unaccounted.add(f"{rel} imports {target}")
        assert not unaccounted


def test_progress_on_a_terminal_counts_pdfs_and_cases_with_time_left(setup: Any) -> None:
    from bot.cli.progress import TerminalProgress

    class Terminal:
        text = ""

        def isatty(self) -> bool:
            return True

        def write(self, s: str) -> int:
            Terminal.text += s
            return len(s)

        def flush(self) -> None:
            pass

    settings, opts, calls = setup
    ticks = iter(range(0, 1000, 5))  # every reading of the clock is five seconds later
    logged: list[str] = []
    progress = TerminalProgress(Terminal(), clock=lambda: float(next(ticks)), print_log=logged.append)
    run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=progress.log, progress=progress)
    # each distinct line drawn, in order (a log line makes the progress line be drawn again)
    frames = list(dict.fromkeys(f.strip() for f in Terminal.text.replace("\n", "\r").split("\r") if f.strip()))
    assert frames[:3] == ["indexing PDFs 0/2", "indexing PDFs 1/2 · 5 s left", "indexing PDFs 2/2 · done"]
    cases = [f for f in frames if f.startswith("hybrid cases")]
    assert cases[0] == "hybrid cases 0/4" and cases[-1] == "hybrid cases 4/4 · done"
    assert "hybrid cases 2/4 · 10 s left" in cases
    assert any(m.startswith("indexed 1/2 one.pdf") for m in logged)  # log lines still go out, above the line


def test_the_index_key_follows_the_vectors_not_the_runtime(tmp_path: Path) -> None:
    """fp32 ONNX reproduces the torch vectors, so their indexes are one; an int8 index is another."""
    from eval.index import index_key

    pdf = tmp_path / "a.pdf"
    pdf.write_bytes(b"%PDF-1.4 test")
    backends = ("torch", "onnx", "onnx-int8")
    keys = {b: index_key([pdf], Settings(data_dir=tmp_path, embedding_backend=b)) for b in backends}
    assert keys["torch"] == keys["onnx"] != keys["onnx-int8"]


# --- issue 29: a new user's first eval runs ---------------------------------------------------------------------


def test_a_small_limit_includes_a_refusal_case_and_a_limit_of_the_categories_covers_them_all(tmp_path: Path) -> None:
    """Row 10: unanswerable cases come last in most sets; `--limit 2` still asks one."""
    cases = [{"id": f"{cat}{i}", "question": f"q {cat} {i}", "category": cat,
              **({"answerable": False} if cat == "unanswerable" else {"sources": [{"doc": "one.pdf", "pages": [1]}]})}
             for cat in ("lookup", "table", "summary", "unanswerable") for i in range(3)]
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    loaded = load_cases(path)
    assert any(not c.answerable for c in stratified(loaded, 2))
    assert {c.category for c in stratified(loaded, 4)} == {"lookup", "table", "summary", "unanswerable"}
    assert [c.id for c in stratified(loaded, 4)] == ["lookup0", "table0", "summary0", "unanswerable0"]  # file order


def test_a_per_doc_selection_indexes_only_the_pdfs_its_cases_ask_in(setup: Any) -> None:
    """Row 7b: one case of a many-PDF set indexes one PDF, not all of them."""
    settings, opts, calls = setup
    opts.per_doc, opts.case_ids = True, ["b"]
    meta, results = run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)["hybrid"]
    assert [f for f, _s in calls["ingest"]] == ["two.pdf"]
    assert [r.id for r in results] == ["b"] and results[0].retrieved[0].file == "two.pdf"
    # the whole set (or a case asked across every PDF) needs every PDF
    opts.case_ids, opts.out_dir = None, opts.out_dir.with_name("whole")
    run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    assert sorted(f for f, _s in calls["ingest"]) == ["one.pdf", "two.pdf", "two.pdf"]


def test_every_eval_index_uses_the_one_onnx_export_of_the_model(setup: Any) -> None:
    """Row 7: the machine's model cache (or CITEBOT_MODELS_DIR), not DATA_DIR/eval/index/<key>/models per index."""
    settings, opts, calls = setup
    settings = settings.model_copy(update={"models_dir": None})  # the default: CITEBOT_MODELS_DIR unset
    seen: list[Path] = []

    def factory(s: Settings) -> FakeService:
        seen.append(s.resolved_models_dir)
        return FakeService(s, calls)

    run_eval(settings, opts, service_factory=factory, log=_quiet)
    (opts.docs_dir / "three.pdf").write_bytes(b"%PDF-1 three")  # another folder of PDFs: another eval index
    opts.out_dir = opts.out_dir.with_name("other")
    run_eval(settings, opts, service_factory=factory, log=_quiet)
    assert seen and set(seen) == {settings.resolved_models_dir}
    assert settings.data_dir not in settings.resolved_models_dir.parents


def _citebot(*args: str, cwd: Path) -> Any:
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def test_compare_refuses_runs_that_share_no_case_and_names_a_mode_change(setup: Any, tmp_path: Path) -> None:
    """Rows 8 and 9, through the real `citebot eval compare`: two runs without a common case are an error, not
    `RESULT: all gates passed`; a hybrid run against a bm25 one names the mode and fails unless allowed."""
    settings, opts, calls = setup
    opts.case_ids, opts.out_dir = ["a"], tmp_path / "run-a"
    run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    opts.case_ids, opts.out_dir = ["b"], tmp_path / "run-b"
    run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    none = _citebot("eval", "compare", "run-a", "run-b", "--no-gates", cwd=tmp_path)
    assert none.returncode == 2
    assert "share no case" in none.stderr and "nothing was compared" in none.stderr
    assert "passed" not in none.stdout

    opts.case_ids, opts.modes = None, ["hybrid"]
    opts.out_dir = tmp_path / "hybrid"
    run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    opts.modes, opts.out_dir = ["bm25"], tmp_path / "bm25"
    run_eval(settings, opts, service_factory=lambda s: FakeService(s, calls), log=_quiet)
    differ = _citebot("eval", "compare", "hybrid", "bm25", "--no-gates", cwd=tmp_path)
    assert differ.returncode == 1
    assert "FAIL  same conditions: retrieval mode: base hybrid, new bm25" in differ.stdout
    allowed = _citebot("eval", "compare", "hybrid", "bm25", "--no-gates", "--allow-different", cwd=tmp_path)
    assert allowed.returncode == 0 and "retrieval mode: base hybrid, new bm25" in allowed.stdout
