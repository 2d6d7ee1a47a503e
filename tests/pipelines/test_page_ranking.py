"""Finding the page in a long filing: the statement a question reads from, and pages ranked as pages."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.types import DuplicatePolicy

from connectors.embedding import embed
from connectors.settings import Settings
from connectors.sqlite_store import SQLiteDocumentStore
from pipelines.components.page_ranker import PageRanker
from pipelines.components.statements import (
    BALANCE,
    CASH_FLOW,
    INCOME,
    formula_for,
    is_line,
    statement_kind,
    wanted_statements,
)
from pipelines.query import QueryEngine


@pytest.mark.parametrize(
    ("question", "kinds"),
    [
        ("What is the FY2020 free cash flow for Acme?", (CASH_FLOW,)),
        ("What was FY2019 capital expenditure?", (CASH_FLOW,)),
        ("What is the FY2021 days payable outstanding (DPO)?", (BALANCE, INCOME)),
        ("What is the FY2018 COGS? Answer from the income statement.", (INCOME,)),
        # a named statement wins over the metrics' own statements
        ("Using the cash flow statement and the balance sheet, what is the operating cash flow ratio?",
         (BALANCE, CASH_FLOW)),
        ("Who is the chief executive officer?", ()),
    ],
)
def test_the_statements_a_question_reads_from(question, kinds):
    assert wanted_statements(question) == kinds


CASH_PAGE = ("ACME CORP.\nCONSOLIDATED STATEMENTS OF CASH FLOWS\n(in millions)\n2020 2019\n"
             "Net cash provided by operating activities 3,676 2,807\nPurchases of land and equipment (461) (538)")
TOC_PAGE = ("Index to Financial Statements\nConsolidated Statements of Operations 45\nConsolidated Balance Sheets 46\n"
            "Consolidated Statements of Cash Flows 47")
NOTE_PAGE = ("Note 7. Leases\nThe consolidated statements of cash flows include lease payments of the company "
             "under operating leases signed with landlords in several states.")


@pytest.mark.parametrize(
    ("question", "metric"),
    [
        ("What is the FY2019 fixed asset turnover ratio for Activision Blizzard?", "fixed asset turnover"),
        ("What is Amcor's FY2020 asset turnover ratio?", "asset turnover"),
        ("What is the FY2020 free cash flow (FCF) for General Mills?", "free cash flow"),
        ("What is 3M's FY2022 quick ratio?", "the quick ratio"),
        ("What is the FY2018 capital expenditure amount (in USD millions) for 3M?", None),  # a printed line
        ("Who is the CEO of Nike?", None),
    ],
)
def test_the_computed_metric_a_question_asks_for(question, metric):
    formula = formula_for(question)
    assert (formula.name if formula else None) == metric


@pytest.mark.parametrize(
    ("label", "line", "expected"),
    [
        ("Purchases of property, plant and equipment (PP&E)", "capital expenditure", True),
        ("Net cash provided by operating activities", "cash from operations", True),
        ("Net cash used for investing activities", "cash from operations", False),
        ("Total current liabilities", "total current liabilities", True),
        ("Total liabilities", "total current liabilities", False),
    ],
)
def test_a_statement_row_is_told_by_its_label(label, line, expected):
    assert is_line(label, line) is expected


def test_a_statement_page_is_told_by_its_title_and_its_numbers():
    assert statement_kind(CASH_PAGE[:200], CASH_PAGE) == CASH_FLOW
    assert statement_kind(TOC_PAGE[:200], TOC_PAGE) == ""  # names every statement: a table of contents
    assert statement_kind(NOTE_PAGE[:200], NOTE_PAGE) == ""  # mentions one, but is prose


SCOPE = "slack:T1:CFIL"


def _chunk(i: int, page: int, content: str) -> Document:
    return Document(id=f"acme:{i:05d}", content=content, meta={
        "scope": SCOPE, "doc_id": "acme", "file_name": "ACME_2020_10K.pdf", "page_start": page, "page_end": page,
        "section": "", "section_id": "", "element_type": "text", "label": "", "chunk_index": i, "sha256": "0" * 64,
        "uploaded_by": "", "uploaded_at": "2024-03-01T00:00:00Z"})


# a long filing in miniature: prose pages that talk about cash, and a cash flow statement split into chunks of
# numbers, only the first of which carries the title
FILING = [
    _chunk(0, 3, "Liquidity. We believe our cash flows from operations and available cash will be sufficient to "
                 "fund capital expenditures, dividends and share repurchases for the next twelve months."),
    _chunk(1, 4, "Capital expenditures are expected to be about $500 million in fiscal 2021, mainly for "
                 "manufacturing capacity and information technology."),
    _chunk(2, 5, "Free cash flow is a non-GAAP measure that management uses to evaluate cash generation."),
    _chunk(3, 47, "ACME CORP.\nCONSOLIDATED STATEMENTS OF CASH FLOWS\n(in millions)\nFiscal Year 2020 2019"),
    _chunk(4, 47, "Net earnings 2,181 1,752\nDepreciation and amortization 594 620\n"
                  "Net cash provided by operating activities 3,676 2,807"),
    _chunk(5, 47, "Purchases of land, buildings and equipment (461) (538)\nProceeds from disposal 1 1\n"
                  "Net cash used by investing activities (565) (612)"),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    settings = Settings(data_dir=tmp_path_factory.mktemp("pages"))
    vecs = embed([d.content for d in FILING], path=settings.resolved_model_path)
    s = SQLiteDocumentStore(settings.sqlite_path, embedding_dim=settings.embedding_dim)
    s.write_documents([replace(d, embedding=v) for d, v in zip(FILING, vecs, strict=True)], DuplicatePolicy.OVERWRITE)
    return settings, s


@pytest.mark.slow
def test_the_statement_page_leads_the_hits(store):
    settings, s = store
    question = "What is Acme's FY2020 free cash flow? FCF is cash from operations minus capital expenditures."
    off = QueryEngine(settings.model_copy(update={"page_weight": 0.0, "statement_boost": 0.0}), s)
    on = QueryEngine(settings, s)
    assert 47 not in [d.meta["page_start"] for d in off.passages(question, [SCOPE], k=2)]  # prose about cash wins
    assert [d.meta["page_start"] for d in on.passages(question, [SCOPE], k=2)][0] == 47


def test_page_ranker_round_trips_and_stays_in_scope(store):
    _, s = store
    ranker = PageRanker(document_store=s, page_weight=0.7, statement_boost=0.2, top_pages=3, page_vector="mean")
    again = PageRanker.from_dict(ranker.to_dict())
    assert (again.page_weight, again.statement_boost, again.top_pages, again.page_vector.value) == (0.7, 0.2, 3, "mean")
    with pytest.raises(ValueError, match="page_vector must be one of"):
        PageRanker(document_store=s, page_vector="tail")
    hit = replace(FILING[0], score=1.0)
    # a hit from a scope the question may not see brings none of its document's pages
    assert ranker.run(question="capex", query_embedding=[0.1] * 384, hits=[hit], scopes=["slack:T1:OTHER"]) == {
        "documents": [hit], "lead": []}


# --------------------------------------------------------------------------------------------------
# page ranking reads store.document_vectors: the same pages, ranks and scores as from fetched Documents
# --------------------------------------------------------------------------------------------------
def _fetched(store, scope: str, doc_id: str) -> list[Document]:
    return store.fetch(scopes=[scope], filters={"field": "meta.doc_id", "operator": "==", "value": doc_id},
                       limit=20_000, return_embedding=True)


def _ranked_from_fetched_documents(store, ranker: PageRanker, question: str, embedding: list[float],
                                   hits: list[Document], scopes: list[str]) -> list[Document]:
    """``PageRanker.run`` as it was before ``document_vectors``: each document's chunks fetched as Documents with
    their embeddings, a page's vector from its first chunk's, the lead chunk of a page the nearest of its chunks."""
    docs: list[tuple[str, str]] = []
    for h in hits:
        key = (h.meta["scope"], h.meta["doc_id"])
        if key[0] in scopes and key not in docs:
            docs.append(key)
    q = np.asarray(embedding, dtype=np.float32)
    q = q / (np.linalg.norm(q) or 1.0)
    wanted = set(wanted_statements(question))
    evidence: dict[tuple[str, int], float] = {}
    for h in hits:
        k = (h.meta["doc_id"], int(h.meta.get("page_start", 0) or 0))
        evidence[k] = max(evidence.get(k, 0.0), float(h.score or 0.0))
    top = max(evidence.values(), default=1.0) or 1.0
    scored: list[tuple[float, list[Document]]] = []
    for scope, doc_id in docs[: ranker.max_documents]:
        by_page: dict[int, list[Document]] = {}
        for c in sorted(_fetched(store, scope, doc_id), key=lambda c: int(c.meta.get("chunk_index", 0) or 0)):
            by_page.setdefault(int(c.meta.get("page_start", 0) or 0), []).append(c)
        pages = sorted(by_page)
        vectors = np.zeros((len(pages), len(embedding)), dtype=np.float32)
        for i, p in enumerate(pages):
            head = np.asarray(next(c.embedding for c in by_page[p] if c.embedding), dtype=np.float32)
            unit = head / (np.linalg.norm(head) or 1.0)
            vectors[i] = unit / (np.linalg.norm(unit) or 1.0)
        cos = vectors @ q
        for i, p in enumerate(pages):
            s = ranker.page_weight * float(cos[i]) + evidence.get((doc_id, p), 0.0) / top
            text = "\n".join(c.content or "" for c in by_page[p])
            if wanted and statement_kind(text[:400], text) in wanted:
                s += ranker.statement_boost
            scored.append((s, by_page[p]))
    scored.sort(key=lambda t: t[0], reverse=True)

    def cosine(c: Document) -> float:
        v = np.asarray(c.embedding, dtype=np.float32)
        return float(v @ q) / (float(np.linalg.norm(v)) or 1.0)

    lead = [replace(max(chunks, key=cosine), embedding=None, score=s) for s, chunks in scored[: ranker.top_pages]]
    ids = {d.id for d in lead}
    return lead + [h for h in hits if h.id not in ids]


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    from eval.sample_pdfs import CONTRACT, HANDBOOK, sample_bytes
    from pipelines.service import CitebotService

    service = CitebotService(Settings(data_dir=tmp_path_factory.mktemp("samples"), ocr_enabled=False))
    for name in (HANDBOOK, CONTRACT):
        assert service.ingest(sample_bytes(name), file_name=name, scope="local").status == "indexed"
    return service


@pytest.mark.slow
def test_document_vectors_are_the_fetched_chunks_of_the_sample_pdfs(samples):
    store = samples.store
    listed = store.list_documents(scopes=["local"])
    assert len(listed) == 2
    for info in listed:
        chunks = _fetched(store, "local", info.doc_id)
        got = store.document_vectors(info.doc_id, scope="local")
        assert got.ids == [c.id for c in chunks] and len(got) == info.chunks
        assert got.pages == [c.meta["page_start"] for c in chunks]
        assert got.chunk_indexes == [c.meta["chunk_index"] for c in chunks]
        assert got.contents == [c.content for c in chunks]
        assert got.has_vector.all()
        assert np.array_equal(got.vectors, np.asarray([c.embedding for c in chunks], dtype=np.float32))
        assert [got.document(i) for i in range(len(got))] == [replace(c, embedding=None) for c in chunks]
    assert len(store.document_vectors(listed[0].doc_id, scope="elsewhere")) == 0  # another scope's: nothing


@pytest.mark.slow
def test_page_ranking_ranks_and_scores_as_from_fetched_documents(samples, store):
    from eval.cases import load_cases

    questions = [c.question for c in load_cases(Path(__file__).resolve().parents[2] / "eval/sets/demo.jsonl")]
    filing_settings, filing_store = store
    runs = [(samples.query, samples.store, "local", q) for q in questions]
    runs += [(QueryEngine(filing_settings, filing_store), filing_store, SCOPE,
              "What is Acme's FY2020 free cash flow? FCF is cash from operations minus capital expenditures.")]
    reordered = 0
    for engine, chunk_store, scope, question in runs:
        engine.warm_up()
        hits, embedding = engine.search(question, [scope])
        ranked = engine.pages.run(question=question, query_embedding=embedding, hits=hits, scopes=[scope])
        expected = _ranked_from_fetched_documents(chunk_store, engine.pages, question, embedding, hits, [scope])
        assert ranked["documents"] == expected, question
        reordered += [d.id for d in expected] != [d.id for d in hits]
    assert reordered >= len(runs) // 2  # page ranking changed the order for most questions: this compared something
