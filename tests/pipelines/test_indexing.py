"""The Indexer end to end on generated PDFs: structure in the store, idempotence, versions, refusals."""

from __future__ import annotations

import io
import json
import unicodedata
import zlib
from pathlib import Path

import pypdf
import pytest
from structlog.testing import capture_logs

from connectors.ocr import tesseract_available
from connectors.settings import Settings
from connectors.stores import open_store
from eval import sample_pdfs
from pipelines.components.chunker import StructureChunker
from pipelines.indexing import FAILED_INTERNAL, Indexer, make_doc_id
from pipelines.models import IngestProgress
from tests.helpers.pdfs import remapped_pdf, slide_deck_pdf, to_control_chars, to_math_bold


def _settings(tmp_path: Path, **kw: object) -> Settings:
    return Settings(data_dir=tmp_path / "data", **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def warm_model() -> None:
    """Load the embedding model once for the module (it is cached per process)."""
    from connectors.embedding import get_encoder

    get_encoder(Settings().resolved_model_path, 1, backend="torch")


@pytest.fixture
def indexer(tmp_path: Path, warm_model: None) -> Indexer:
    settings = _settings(tmp_path)
    return Indexer(settings, open_store(settings))


@pytest.fixture(scope="module")
def indexed_handbook(tmp_path_factory: pytest.TempPathFactory, warm_model: None) -> tuple[Indexer, object]:
    settings = _settings(tmp_path_factory.mktemp("hb"))
    ix = Indexer(settings, open_store(settings))
    events: list[IngestProgress] = []
    res = ix.ingest(
        sample_pdfs.sample_bytes(sample_pdfs.HANDBOOK), file_name=sample_pdfs.HANDBOOK, scope="local",
        uploaded_by="U1", progress=events.append,
    )
    return ix, (res, events)


@pytest.fixture(scope="module")
def contract_chunks(tmp_path_factory: pytest.TempPathFactory, warm_model: None) -> list:
    """The contract's chunks (with embeddings) indexed once, to seed stores quickly."""
    settings = _settings(tmp_path_factory.mktemp("contract"))
    ix = Indexer(settings, open_store(settings))
    res = ix.ingest(sample_pdfs.sample_bytes(sample_pdfs.CONTRACT), file_name="x.pdf", scope="local")
    assert res.status == "indexed"
    return ix.store.filter_documents()


def _snapshot(ix: Indexer) -> tuple[int, list[tuple[str, str, int]], list[str]]:
    docs = ix.store.list_documents(scopes=ix.store.all_scopes() or ["local"])
    ids = sorted(d.id for d in ix.store.filter_documents())
    return ix.store.count_documents(), sorted((d.doc_id, d.file, d.chunks) for d in docs), ids


def _encrypted(data: bytes, user_password: str) -> bytes:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=user_password, owner_password="owner-secret", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _bomb(megabytes: int) -> bytes:
    comp = zlib.compressobj(1)
    block = bytes(1024 * 1024)
    stream = b"".join(comp.compress(block) for _ in range(megabytes)) + comp.flush()
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n")
    offsets = []
    for i, body in enumerate(objs, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % i + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 5\n0000000000 65535 f \n" + b"".join(b"%010d 00000 n \n" % o for o in offsets))
    out.write(b"trailer\n<< /Size 5 /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % xref)
    return out.getvalue()


@pytest.mark.slow
class TestIngestSamples:
    def test_handbook_is_indexed_with_structure(self, indexed_handbook: tuple[Indexer, object]) -> None:
        ix, (res, _events) = indexed_handbook
        assert res.status == "indexed", res.error
        assert res.pages == 14 and res.ocr_pages == 1 and res.chunks > 20 and res.skipped_pages == []
        assert res.doc_id == make_doc_id("local", __import__("hashlib").sha256(
            sample_pdfs.sample_bytes(sample_pdfs.HANDBOOK)).hexdigest())
        chunks = ix.store.fetch(scopes=["local"], limit=500)
        assert len(chunks) == res.chunks
        # every chunk is stored with its vector, all of one length (dense retrieval can find each of them)
        vectors = [c.embedding for c in ix.store.fetch(scopes=["local"], limit=500, return_embedding=True)]
        assert len(vectors) == res.chunks and all(v is not None for v in vectors)
        assert len({len(v) for v in vectors if v is not None}) == 1 and len(vectors[0] or []) > 0
        by_label = [c for c in chunks if c.meta["label"] == "Table 2"]
        assert by_label and all(c.meta["element_type"] == "table" for c in by_label)
        sec = ix.store.fetch(scopes=["local"], filters={"field": "meta.section_id", "operator": "==", "value": "4.2"})
        assert sec and all(c.meta["section"] == "4 Leave > 4.2 Parental leave" for c in sec)
        assert any("26 weeks of parental leave" in (c.content or "") for c in sec)

    def test_every_fact_is_in_a_chunk_on_its_page(self, indexed_handbook: tuple[Indexer, object]) -> None:
        ix, _ = indexed_handbook
        chunks = ix.store.fetch(scopes=["local"], limit=500)
        for fact in sample_pdfs.facts():
            if fact.file != sample_pdfs.HANDBOOK:
                continue
            hits = [
                c for c in chunks
                if fact.answer.lower() in " ".join((c.content or "").split()).lower()
                and c.meta["page_start"] <= fact.pages[0] <= c.meta["page_end"]
            ]
            assert hits, f"{fact.id}: {fact.answer!r} not found on page {fact.pages[0]}"
            if fact.kind == "ocr":
                assert all(h.meta["element_type"] == "ocr" and h.meta["ocr_confidence"] > 50 for h in hits)

    def test_progress_reports_phases_in_order(self, indexed_handbook: tuple[Indexer, object]) -> None:
        _, (_res, events) = indexed_handbook
        phases = [e.phase for e in events]
        order = ["checking", "parsing", "ocr", "embedding", "writing", "done"]
        assert [p for p in order if p in phases] == order
        assert [phases.index(p) for p in order] == sorted(phases.index(p) for p in order)
        parsing = [e for e in events if e.phase == "parsing"]
        assert parsing[-1].pages_done == parsing[-1].pages_total == 14

    def test_reingest_is_unchanged_and_writes_nothing(self, indexed_handbook: tuple[Indexer, object]) -> None:
        ix, (res, _) = indexed_handbook
        before = _snapshot(ix)
        again = ix.ingest(sample_pdfs.sample_bytes(sample_pdfs.HANDBOOK), file_name=sample_pdfs.HANDBOOK,
                          scope="local")
        assert again.status == "unchanged" and again.doc_id == res.doc_id and again.chunks == res.chunks
        assert _snapshot(ix) == before

    def test_same_bytes_in_another_scope_is_another_document(self, indexer: Indexer) -> None:
        data = sample_pdfs.sample_bytes(sample_pdfs.CONTRACT)
        a = indexer.ingest(data, file_name="c.pdf", scope="slack:T1:C1")
        b = indexer.ingest(data, file_name="c.pdf", scope="slack:T1:C2")
        assert a.status == b.status == "indexed" and a.doc_id != b.doc_id
        assert [d.doc_id for d in indexer.store.list_documents(scopes=["slack:T1:C1"])] == [a.doc_id]

    def test_new_version_replaces_the_old_one_it_is_told_to(self, indexer: Indexer) -> None:
        """The service names the versions an upload replaces (tests/security/test_uploads_keep_owners.py); the
        write of the new version removes them in the same transaction."""
        v1 = sample_pdfs.sample_bytes(sample_pdfs.CONTRACT)
        writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(v1)))
        writer.remove_page(len(writer.pages) - 1)  # v2: the signature page is gone
        buf = io.BytesIO()
        writer.write(buf)
        first = indexer.ingest(v1, file_name="msa.pdf", scope="local")
        second = indexer.ingest(buf.getvalue(), file_name="msa.pdf", scope="local", replaces=[first.doc_id])
        assert first.status == second.status == "indexed"
        assert second.replaced_doc_id == first.doc_id
        docs = indexer.store.list_documents(scopes=["local"])
        assert [(d.doc_id, d.file) for d in docs] == [(second.doc_id, "msa.pdf")]
        contents = " ".join(c.content or "" for c in indexer.store.fetch(scopes=["local"], limit=500))
        assert "Dana Okafor" not in contents and "laws of Ireland" in contents

    def test_owner_only_encryption_is_read_with_the_empty_password(self, indexer: Indexer) -> None:
        data = _encrypted(sample_pdfs.sample_bytes(sample_pdfs.CONTRACT), user_password="")
        res = indexer.ingest(data, file_name="locked-for-editing.pdf", scope="local")
        assert res.status == "indexed", res.error


def _has_bad_chars(text: str) -> bool:
    return any(unicodedata.category(c) in ("Cc", "Cs") and c not in "\n\t" for c in text)


@pytest.mark.slow
class TestRealWorldText:
    def test_letters_outside_the_bmp_are_indexed_not_called_damaged(self, indexer: Indexer) -> None:
        # two dev-set papers set "Number of Conflicts" in mathematical bold; they used to fail as "damaged"
        data = remapped_pdf([["Inconsistency (LI) is the", "Number of Conflicts divided by all pairs."]],
                            to_math_bold, remap_pages={1})
        res = indexer.ingest(data, file_name="paper.pdf", scope="local")
        assert res.status == "indexed", res.error
        chunks = indexer.store.fetch(scopes=["local"], limit=50)
        assert not any(_has_bad_chars(c.content or "") for c in chunks)
        text = unicodedata.normalize("NFKC", " ".join(c.content or "" for c in chunks))
        assert "Number of Conflicts divided by all pairs." in text

    def test_unreadable_text_layer_is_read_by_ocr(self, indexer: Indexer) -> None:
        if not tesseract_available():
            pytest.skip("tesseract is not installed")
        data = remapped_pdf(
            [["Revenue grew by 2.4% in the year under review."] * 3, ["Dividends rose to 155.98 million."] * 3],
            to_control_chars, remap_pages={1},
        )
        res = indexer.ingest(data, file_name="annual.pdf", scope="local")
        assert res.status == "indexed" and res.ocr_pages == 1, res.error
        chunks = indexer.store.fetch(scopes=["local"], limit=50)
        assert not any(_has_bad_chars(c.content or "") for c in chunks)
        page1 = [c for c in chunks if c.meta["page_start"] == c.meta["page_end"] == 1]
        assert page1 and all(c.meta["element_type"] == "ocr" for c in page1)
        assert "Revenue grew by 2.4% in the year under review." in (page1[0].content or "")


    def test_each_slide_of_an_image_only_deck_is_cited_by_its_own_page(self, indexer: Indexer) -> None:
        if not tesseract_available():
            pytest.skip("tesseract is not installed")
        slides = [["Data culture", "Goals first"], ["Testing", "Run experiments"], ["Revenue", "Up 17.5% in 2015"],
                  ["Mobile", "Google Play store"], ["Thank you", "Questions"]]
        res = indexer.ingest(slide_deck_pdf(slides), file_name="deck.pdf", scope="local")
        assert res.status == "indexed" and res.ocr_pages == 5, res.error
        chunks = sorted(indexer.store.fetch(scopes=["local"], limit=50), key=lambda c: c.meta["chunk_index"])
        assert [(c.meta["page_start"], c.meta["page_end"]) for c in chunks] == [(n, n) for n in range(1, 6)]
        assert "Up 17.5% in 2015" in (chunks[2].content or "")


@pytest.mark.slow
class TestInternalErrors:
    def test_our_bug_is_reported_as_ours_and_logged_without_text(
        self, indexer: Indexer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def broken(self: StructureChunker, drafts: list) -> list:
            raise KeyError("Dana Okafor earns EUR 184,000")  # a message that carries document text

        monkeypatch.setattr(StructureChunker, "_merge_small", broken)
        with capture_logs() as logs:
            res = indexer.ingest(sample_pdfs.sample_bytes(sample_pdfs.CONTRACT), file_name="c.pdf", scope="local")
        assert res.status == "failed" and res.error == FAILED_INTERNAL
        assert "damaged" not in res.error
        assert indexer.store.count_documents() == 0
        event = next(e for e in logs if e["event"] == "ingest_internal_error")
        assert event["log_level"] == "error" and event["error"] == "KeyError"
        assert event["where"].startswith("pipelines/components/chunker.py:") and event["where"].endswith(" in run")
        assert event["raised_in"].startswith("tests/pipelines/test_indexing.py:")
        assert event["raised_in"].endswith(" in broken")
        assert "Okafor" not in json.dumps(logs, default=str)


@pytest.mark.slow
class TestRefusals:
    @pytest.mark.parametrize(
        ("kind", "reason_words"),
        [
            ("empty", "empty"),
            ("text", "not a PDF"),
            ("png", "not a PDF"),
            ("truncated", "truncated"),
            ("password", "password-protected"),
            ("too_large", "MB limit"),
            ("too_many_pages", "page limit"),
            ("bomb", "decompression bomb"),
            ("timeout", "longer than the time allowed"),
        ],
    )
    def test_bad_input_is_refused_and_the_store_is_unchanged(
        self, tmp_path: Path, contract_chunks: list, kind: str, reason_words: str
    ) -> None:
        overrides: dict[str, object] = {
            "too_large": {"max_file_mb": 0.05},
            "too_many_pages": {"max_pages": 5},
            "timeout": {"ingest_timeout_s": 0.001},
        }.get(kind, {})
        settings = _settings(tmp_path, **overrides)
        ix = Indexer(settings, open_store(settings))
        contract = sample_pdfs.sample_bytes(sample_pdfs.CONTRACT)
        # something already indexed under the same file name must survive the failed upload
        ix.store.replace_document(contract_chunks, scope="local")
        # seeded past the indexer, so record what made the vectors as an ingest would (else: a legacy store)
        ix.store.set_embedding_fingerprint(str(ix.pipeline.get_component("embedder").fingerprint))
        before = _snapshot(ix)
        assert before[0] == len(contract_chunks) > 0
        handbook = sample_pdfs.sample_bytes(sample_pdfs.HANDBOOK)
        make = {
            "empty": lambda: b"",
            "text": lambda: b"Quarterly report\nThis is plain text with a .pdf name.\n",
            "png": lambda: b"\x89PNG\r\n\x1a\n" + bytes(100),
            "truncated": lambda: handbook[: len(handbook) // 3],
            "password": lambda: _encrypted(contract, user_password="s3cret"),
            "too_large": lambda: handbook,
            "too_many_pages": lambda: handbook,
            "bomb": lambda: _bomb(300),
            "timeout": lambda: handbook,
        }
        data = make[kind]()
        res = ix.ingest(data, file_name="x.pdf", scope="local",
                        replaces=[contract_chunks[0].meta["doc_id"]])
        assert res.status == "failed"
        assert res.error and reason_words in res.error
        assert "Traceback" not in res.error and "Error(" not in res.error
        assert _snapshot(ix) == before
