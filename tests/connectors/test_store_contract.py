"""One contract for both document stores: the embedded SQLite store always, Elasticsearch when
``CITEBOT_TEST_ELASTICSEARCH_URL`` points at a running Elasticsearch 8 (``deploy/docker-compose.yml``).

Covers Haystack's DocumentStore protocol (Haystack's own test mix-ins), Citebot's ChunkStore additions,
scope isolation, all-or-nothing document writes and a second process reading while this one writes.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from haystack import Document, Pipeline
from haystack.components.joiners import DocumentJoiner
from haystack.document_stores.errors import DocumentStoreError, DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy
from haystack.testing.document_store import DocumentStoreBaseTests

from connectors.settings import Settings
from connectors.store_api import ScopeRequiredError, StoreError
from connectors.stores import make_retrievers, open_store
from tests.helpers.stores import DIM, STORE_KINDS, chunk, drop_store, store_settings, unit

# What a failed write may raise: the input was bad, an id clashed, or the store refused.
WRITE_ERRORS = (ValueError, DuplicateDocumentError, DocumentStoreError, StoreError)


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------
def snapshot(store: Any, scopes: list[str]) -> Any:
    """Everything a user could see of ``scopes``."""
    docs = store.fetch(scopes=scopes, limit=10_000)
    return (
        sorted((d.id, d.content, json.dumps(d.meta, sort_keys=True)) for d in docs),
        [d.model_dump() for d in store.list_documents(scopes=scopes)],
    )


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store_cfg(store_kind: str, tmp_path: Path) -> dict[str, Any]:
    return store_settings(store_kind, tmp_path)


@pytest.fixture
def store(store_cfg: dict[str, Any]) -> Any:
    s = open_store(Settings(**store_cfg))
    yield s
    drop_store(s)


# --------------------------------------------------------------------------------------------------
# Haystack's DocumentStore protocol, with Haystack's own tests
# --------------------------------------------------------------------------------------------------
class TestHaystackProtocol(DocumentStoreBaseTests):
    @pytest.fixture
    def document_store(self, store_kind: str, tmp_path: Path) -> Any:
        # Haystack's fixtures use 768-dimensional embeddings.
        s = open_store(Settings(**store_settings(store_kind, tmp_path, dim=768)))
        yield s
        drop_store(s)

    @staticmethod
    def assert_documents_are_equal(received: list[Document], expected: list[Document]) -> None:
        # Embeddings are stored as float32 and scores are set by some stores: compare the rest exactly.
        assert len(received) == len(expected)
        got = sorted(received, key=lambda d: d.id)
        want = sorted(expected, key=lambda d: d.id)
        for r, e in zip(got, want, strict=True):
            assert (r.id, r.content, r.meta) == (e.id, e.content, e.meta)
            if e.embedding is None:
                assert r.embedding is None
            else:
                assert r.embedding is not None
                np.testing.assert_allclose(r.embedding, e.embedding, rtol=1e-6)

    def test_write_documents(self, document_store: Any) -> None:
        doc = Document(content="test doc")
        assert document_store.write_documents([doc]) == 1
        self.assert_documents_are_equal(document_store.filter_documents(), [doc])
        # The default policy refuses duplicates, like DuplicatePolicy.FAIL.
        with pytest.raises(DuplicateDocumentError):
            document_store.write_documents([doc])


# --------------------------------------------------------------------------------------------------
# writes, overwrites, deletes
# --------------------------------------------------------------------------------------------------
class TestWrites:
    def test_write_skip_overwrite_fail_delete(self, store: Any) -> None:
        a0, a1 = chunk("a", 0, "first version"), chunk("a", 1, "second chunk")
        assert store.write_documents([a0, a1], policy=DuplicatePolicy.FAIL) == 2
        assert store.count_documents() == 2

        changed = Document(id=a0.id, content="rewritten text", meta=a0.meta, embedding=a0.embedding)
        assert store.write_documents([changed], policy=DuplicatePolicy.SKIP) == 0
        assert [d.content for d in store.fetch(scopes=["local"])] == ["first version", "second chunk"]

        assert store.write_documents([changed], policy=DuplicatePolicy.OVERWRITE) == 1
        assert [d.content for d in store.fetch(scopes=["local"])] == ["rewritten text", "second chunk"]
        assert [d.id for d in store.bm25_search("rewritten", scopes=["local"], top_k=5)] == [a0.id]
        assert store.bm25_search("first version", scopes=["local"], top_k=5) == []

        with pytest.raises(DuplicateDocumentError):
            store.write_documents([a1], policy=DuplicatePolicy.FAIL)
        assert store.count_documents() == 2

        store.delete_documents([a0.id, "no-such-id"])
        assert [d.id for d in store.fetch(scopes=["local"])] == [a1.id]
        assert store.bm25_search("rewritten", scopes=["local"], top_k=5) == []
        assert [d.id for d in store.embedding_search(a0.embedding, scopes=["local"], top_k=5)] == [a1.id]

    def test_delete_document_counts_and_scopes(self, store: Any) -> None:
        store.write_documents([chunk("a", i, f"text {i}") for i in range(3)] + [chunk("b", 0, "other")])
        assert store.has_document("a", scope="local")
        assert store.delete_document("a", scopes=["local"]) == 3
        assert not store.has_document("a", scope="local")
        assert store.delete_document("a", scopes=["local"]) == 0
        assert [d.doc_id for d in store.list_documents(scopes=["local"])] == ["b"]

    def test_list_documents_aggregates_per_document(self, store: Any) -> None:
        docs = [
            chunk("a", i, f"text {i}", file="Handbook.pdf", page_start=2 * i + 1, page_end=2 * i + 2) for i in range(4)
        ]
        docs.append(chunk("b", 0, "x", file="b.pdf", page_start=1, page_end=1, uploaded_at="2026-02-01T00:00:00+00:00",
                          source_url="https://acme.slack.com/files/U1/F1/b.pdf"))
        store.write_documents(docs)
        listed = {d.doc_id: d for d in store.list_documents(scopes=["local"])}
        assert set(listed) == {"a", "b"}
        assert (listed["a"].file, listed["a"].pages, listed["a"].chunks) == ("Handbook.pdf", 8, 4)
        assert (listed["a"].scope, listed["a"].sha256, listed["a"].uploaded_by) == ("local", "sha-a", "U1")
        assert (listed["b"].pages, listed["b"].chunks, listed["b"].uploaded_at) == (1, 1, "2026-02-01T00:00:00+00:00")
        assert (listed["a"].source_url, listed["b"].source_url) == ("", "https://acme.slack.com/files/U1/F1/b.pdf")

    def test_list_documents_gives_what_each_document_says_it_is(self, store: Any) -> None:
        ident = {"doc_issuer": "Brightwater Pumps, Inc.", "doc_form": "10-Q", "doc_period": "2024-06-30",
                 "doc_year": 2024, "doc_quarter": 2}
        store.write_documents([chunk("a", i, f"a{i}", file="filing-01.pdf", **ident) for i in range(2)]
                              + [chunk("b", 0, "b", file="b.pdf", doc_title="Staff handbook")])
        listed = {d.doc_id: d for d in store.list_documents(scopes=["local"])}
        a, b = listed["a"], listed["b"]
        assert (a.issuer, a.form, a.period, a.year, a.quarter, a.title) == (
            "Brightwater Pumps, Inc.", "10-Q", "2024-06-30", 2024, 2, "")
        assert (b.issuer, b.form, b.year, b.quarter, b.title) == ("", "", None, None, "Staff handbook")

    def test_fetch_orders_by_document_and_chunk_and_limits(self, store: Any) -> None:
        store.write_documents([chunk("b", i, f"b{i}") for i in (2, 0, 1)] + [chunk("a", i, f"a{i}") for i in (1, 0)])
        assert [d.id for d in store.fetch(scopes=["local"])] == ["a:00000", "a:00001", "b:00000", "b:00001", "b:00002"]
        assert len(store.fetch(scopes=["local"], limit=2)) == 2
        assert all(d.embedding is None for d in store.fetch(scopes=["local"]))


# --------------------------------------------------------------------------------------------------
# filters on chunk metadata
# --------------------------------------------------------------------------------------------------
FILTER_DOCS = [
    chunk("d", 0, "intro", section="1 Intro", element_type="text", uploaded_at="2026-01-01T10:00:00+00:00"),
    chunk(
        "d",
        1,
        "table",
        page_start=2,
        page_end=3,
        section="2 Leave > 2.1 Parental",
        element_type="table",
        label="Table 1",
        uploaded_at="2026-01-02T10:00:00+00:00",
    ),
    chunk(
        "d",
        2,
        "list",
        page_start=4,
        page_end=4,
        section="2 Leave > 2.2 Holiday",
        element_type="list",
        ocr_confidence=71.5,
        uploaded_at="2026-01-03T10:00:00+00:00",
    ),
    chunk(
        "d",
        3,
        "scan",
        page_start=5,
        page_end=5,
        element_type="ocr",
        ocr_confidence=88.0,
        uploaded_at="2026-01-04T10:00:00+00:00",
    ),
]


def _c(field: str, op: str, value: Any) -> dict[str, Any]:
    return {"field": field, "operator": op, "value": value}


FILTER_CASES = [
    ("eq", _c("meta.element_type", "==", "table"), [1]),
    ("eq-section", _c("meta.section", "==", "2 Leave > 2.1 Parental"), [1]),
    ("ne", _c("meta.element_type", "!=", "table"), [0, 2, 3]),
    ("gt", _c("meta.page_start", ">", 2), [2, 3]),
    ("ge", _c("meta.page_start", ">=", 2), [1, 2, 3]),
    ("lt", _c("meta.page_start", "<", 2), [0]),
    ("le", _c("meta.page_end", "<=", 4), [0, 1, 2]),
    ("gt-float", _c("meta.ocr_confidence", ">", 80.0), [3]),
    ("eq-none", _c("meta.ocr_confidence", "==", None), [0, 1]),
    ("ne-none", _c("meta.ocr_confidence", "!=", None), [2, 3]),
    ("gt-date", _c("meta.uploaded_at", ">", "2026-01-02T10:00:00+00:00"), [2, 3]),
    ("le-date", _c("meta.uploaded_at", "<=", "2026-01-02T10:00:00+00:00"), [0, 1]),
    ("in", _c("meta.element_type", "in", ["list", "ocr"]), [2, 3]),
    ("not-in", _c("meta.element_type", "not in", ["list", "ocr"]), [0, 1]),
    ("in-ints", _c("meta.chunk_index", "in", [0, 3]), [0, 3]),
    ("id-eq", _c("id", "==", "d:00002"), [2]),
    ("id-in", _c("id", "in", ["d:00000", "d:00003", "zz"]), [0, 3]),
    (
        "and",
        {
            "operator": "AND",
            "conditions": [_c("meta.element_type", "in", ["table", "list"]), _c("meta.page_start", ">=", 3)],
        },
        [2],
    ),
    (
        "or",
        {"operator": "OR", "conditions": [_c("meta.label", "==", "Table 1"), _c("meta.page_start", "==", 5)]},
        [1, 3],
    ),
    ("not", {"operator": "NOT", "conditions": [_c("meta.page_start", "<=", 2)]}, [2, 3]),
    (
        "not-and",
        {"operator": "NOT", "conditions": [_c("meta.element_type", "==", "ocr"), _c("meta.page_start", "==", 5)]},
        [0, 1, 2],
    ),
    (
        "nested",
        {
            "operator": "AND",
            "conditions": [
                {
                    "operator": "OR",
                    "conditions": [_c("meta.element_type", "==", "text"), _c("meta.page_start", ">", 3)],
                },
                {"operator": "NOT", "conditions": [_c("meta.element_type", "==", "ocr")]},
            ],
        },
        [0, 2],
    ),
]


class TestFilters:
    @pytest.mark.parametrize(("name", "filters", "expected"), FILTER_CASES, ids=[c[0] for c in FILTER_CASES])
    def test_filter_operators(self, store: Any, name: str, filters: dict[str, Any], expected: list[int]) -> None:
        store.write_documents(FILTER_DOCS)
        want = [f"d:{i:05d}" for i in expected]
        assert sorted(d.id for d in store.filter_documents(filters)) == want
        assert [d.id for d in store.fetch(scopes=["local"], filters=filters)] == want
        # the same filters narrow both searches
        assert (
            sorted(d.id for d in store.embedding_search(unit((0, 1.0)), scopes=["local"], top_k=10, filters=filters))
            == want
        )
        bm25 = store.bm25_search("intro table list scan", scopes=["local"], top_k=10, filters=filters)
        assert sorted(d.id for d in bm25) == want


# What an explicit reference in a question filters on (the structure router's filters: "page 12" by the page's
# printed label or its physical page, "section 4.2", "Figure 1", "table 2", a document's last page), over two files
# and a scope that must never show. The SQLite store answers these through indexes of their own; the hits must be
# exactly these, in this order.
REFERENCE_DOCS = [
    chunk("h", 0, "policy cover", file="handbook.pdf", page_start=1, page_end=1, page_label="i"),
    chunk("h", 1, "policy leave", file="handbook.pdf", page_start=11, page_end=12, page_label="9",
          page_label_end="10", section_id="4.2"),
    chunk("h", 2, "policy chart", file="handbook.pdf", page_start=12, page_end=12, page_label="10",
          section_id="4.2", label="Figure 1", element_type="figure"),
    chunk("h", 3, "policy fees", file="handbook.pdf", page_start=14, page_end=14, page_label="12",
          section_id="7.1", label="Table 2", element_type="table"),
    chunk("r", 0, "policy revenue", file="report.pdf", page_start=12, page_end=13, section_id="4",
          label="Table 2", element_type="table"),
    chunk("r", 1, "policy map", file="report.pdf", page_start=3, page_end=3, section_id="4.2", label="Figure 10",
          element_type="figure"),
    chunk("o", 0, "policy elsewhere", scope="other", file="handbook.pdf", page_start=12, page_end=12,
          page_label="12", section_id="4.2", label="Table 2"),
]


def _pages(a: int, b: int) -> dict[str, Any]:
    return {"operator": "AND", "conditions": [_c("meta.page_start", "<=", b), _c("meta.page_end", ">=", a)]}


def _labelled(*labels: str) -> dict[str, Any]:
    return {"operator": "OR", "conditions": [_c("meta.page_label", "in", list(labels)),
                                             _c("meta.page_label_end", "in", list(labels))]}


def _in_file(name: str, cond: dict[str, Any]) -> dict[str, Any]:
    return {"operator": "AND", "conditions": [_c("meta.file_name", "in", [name]), cond]}


REFERENCE_CASES = [
    ("printed-page", _labelled("12"), ["h:3"]),
    ("printed-pages-range", _labelled("9", "10"), ["h:1", "h:2"]),
    ("printed-page-in-file", _in_file("report.pdf", _labelled("12")), []),
    ("physical-page", _pages(12, 12), ["h:1", "h:2", "r:0"]),
    ("physical-pages-in-file", _in_file("handbook.pdf", _pages(12, 14)), ["h:1", "h:2", "h:3"]),
    ("section-in", _c("meta.section_id", "in", ["4.2"]), ["h:1", "h:2", "r:1"]),
    ("section-eq", _c("meta.section_id", "==", "7.1"), ["h:3"]),
    ("labels-in", _c("meta.label", "in", ["Figure 1", "Table 2"]), ["h:2", "h:3", "r:0"]),
    ("label-eq-in-file", _in_file("report.pdf", _c("meta.label", "==", "Table 2")), ["r:0"]),
    ("last-page", {"operator": "AND", "conditions": [_c("meta.doc_id", "==", "h"), _c("meta.page_end", ">=", 14)]},
     ["h:3"]),
    ("or-with-unindexed", {"operator": "OR", "conditions": [_c("meta.page_label", "in", ["i"]),
                                                            _c("meta.element_type", "==", "figure")]},
     ["h:0", "h:2", "r:1"]),
    ("or-label-or-document", {"operator": "OR", "conditions": [_c("meta.label", "==", "Figure 1"),
                                                               _c("meta.doc_id", "==", "r")]},
     ["h:2", "r:0", "r:1"]),
    ("section-and-not-label", {"operator": "AND", "conditions": [
        _c("meta.section_id", "in", ["4.2"]), {"operator": "NOT", "conditions": [_c("meta.label", "==", "Figure 1")]}]},
     ["h:1", "r:1"]),
]


class TestExplicitReferences:
    @pytest.mark.parametrize(("name", "filters", "expected"), REFERENCE_CASES, ids=[c[0] for c in REFERENCE_CASES])
    def test_reference_filters_find_exactly_their_chunks(
        self, store: Any, name: str, filters: dict[str, Any], expected: list[str]
    ) -> None:
        store.write_documents(REFERENCE_DOCS)
        want = [f"{e.split(':')[0]}:{int(e.split(':')[1]):05d}" for e in expected]
        assert [d.id for d in store.fetch(scopes=["local"], filters=filters)] == want
        assert [d.id for d in store.fetch(scopes=["local", "nobody"], filters=filters)] == want
        assert sorted(d.id for d in store.embedding_search(unit((0, 1.0)), scopes=["local"], top_k=10,
                                                           filters=filters)) == want
        assert sorted(d.id for d in store.bm25_search("policy", scopes=["local"], top_k=10, filters=filters)) == want
        assert all(d.meta["scope"] == "other" for d in store.fetch(scopes=["other"], filters=filters))


# --------------------------------------------------------------------------------------------------
# ranking and fusion
# --------------------------------------------------------------------------------------------------
TEXTS = [
    "The notice period for employees is three months.",
    "Parental leave lasts twelve weeks at full pay.",
    "Holiday entitlement is 25 days per year, plus public holidays.",
    "Employees must give notice of parental leave eight weeks before it starts.",
]


class TestRanking:
    def test_bm25_ranks_matching_chunks_first_with_positive_scores(self, store: Any) -> None:
        store.write_documents([chunk("h", i, t) for i, t in enumerate(TEXTS)])
        top = store.bm25_search("How long is parental leave?", scopes=["local"], top_k=2)
        assert {d.id for d in top} == {"h:00001", "h:00003"}
        res = store.bm25_search(
            'What\'s the "notice period" (in months)? -- e.g. 3: months*', scopes=["local"], top_k=4
        )
        assert res[0].id == "h:00000"
        scores = [d.score for d in res]
        assert all(s is not None and s > 0 for s in scores) and scores == sorted(scores, reverse=True)
        assert all(d.embedding is None for d in res)
        assert store.bm25_search("xylophone", scopes=["local"], top_k=4) == []
        assert store.bm25_search("?!", scopes=["local"], top_k=4) == []

    def test_bm25_matches_answers_whether_a_search_would_find_anything(self, store: Any) -> None:
        store.write_documents([chunk("h", i, t) for i, t in enumerate(TEXTS)])
        store.write_documents([chunk("o", 0, "The xylophone lessons start in March.", scope="other")])
        only_page_3 = {"field": "meta.page_start", "operator": "==", "value": 3}
        cases = [
            ("parental leave", ["local"], None),
            ("xylophone", ["local"], None),  # only in another scope
            ("xylophone", ["other"], None),
            ("xylophone", ["local", "other"], None),
            ("parental leave", ["local"], only_page_3),  # page 3 has neither word
            ("holiday", ["local"], only_page_3),
            ("?!", ["local"], None),
            ("notice", ["nobody"], None),
        ]
        for query, scopes, filters in cases:
            found = bool(store.bm25_search(query, scopes=scopes, top_k=1, filters=filters))
            assert store.bm25_matches(query, scopes=scopes, filters=filters) is found, (query, scopes, filters)
        assert [store.bm25_matches(q, scopes=s, filters=f) for q, s, f in cases] == [
            True, False, True, True, False, True, False, False,
        ]

    def test_bm25_matches_each_answers_as_one_look_up_per_query_within_the_asked_scopes(self, store: Any) -> None:
        """Term support asks for all of a question's terms at once: each answer is what ``bm25_matches`` says for
        that query alone, bounded by the same scopes and filters (a word only another scope holds is not found)."""
        store.write_documents([chunk("h", i, t) for i, t in enumerate(TEXTS)])
        store.write_documents([chunk("o", 0, "The xylophone lessons start in March.", scope="other")])
        only_page_3 = {"field": "meta.page_start", "operator": "==", "value": 3}
        queries = ["parental leave", "xylophone", "holiday", "?!", "march lessons", "notice", "xylophone"]
        for scopes, filters in [(["local"], None), (["other"], None), (["local", "other"], None),
                                (["local"], only_page_3), (["other"], only_page_3), (["nobody"], None)]:
            each = store.bm25_matches_each(queries, scopes=scopes, filters=filters)
            alone = {q: store.bm25_matches(q, scopes=scopes, filters=filters) for q in queries}
            assert each == alone, (scopes, filters)
        assert store.bm25_matches_each(queries, scopes=["local"]) == {
            "parental leave": True, "xylophone": False, "holiday": True, "?!": False, "march lessons": False,
            "notice": True,
        }
        assert store.bm25_matches_each(["xylophone", "holiday"], scopes=["other"]) == {
            "xylophone": True, "holiday": False,
        }
        assert store.bm25_matches_each([], scopes=["local"]) == {}
        with pytest.raises(ScopeRequiredError):
            store.bm25_matches_each(["notice"], scopes=[])

    def test_dense_ranks_nearest_first(self, store: Any) -> None:
        store.write_documents([chunk("h", i, t, embedding=unit((i, 1.0), (10, 0.3))) for i, t in enumerate(TEXTS)])
        res = store.embedding_search(unit((2, 0.9), (1, 0.4)), scopes=["local"], top_k=3)
        assert [d.id for d in res][:2] == ["h:00002", "h:00001"]
        assert len(res) == 3
        scores = [d.score for d in res]
        assert scores == sorted(scores, reverse=True)
        assert math.isclose(scores[0], float(np.dot(unit((2, 0.9), (1, 0.4)), unit((2, 1.0), (10, 0.3)))), abs_tol=1e-3)
        assert all(d.embedding is None for d in res)
        bm25, dense = make_retrievers(store, top_k=2)
        assert len(dense.run(query_embedding=unit((2, 1.0)), scopes=["local"])["documents"]) == 2
        assert len(bm25.run(query="parental leave notice", scopes=["local"], top_k=1)["documents"]) == 1

    def test_rrf_fusion_through_documentjoiner(self, store: Any) -> None:
        vectors = {0: unit((0, 0.2), (5, 1.0)), 1: unit((1, 1.0)), 2: unit((7, 1.0), (9, 0.5)), 3: unit((7, 1.0))}
        store.write_documents([chunk("h", i, t, embedding=vectors[i]) for i, t in enumerate(TEXTS)])
        bm25, dense = make_retrievers(store, top_k=20)
        pipe = Pipeline()
        pipe.add_component("bm25", bm25)
        pipe.add_component("dense", dense)
        pipe.add_component("joiner", DocumentJoiner(join_mode="reciprocal_rank_fusion"))
        pipe.connect("bm25.documents", "joiner.documents")
        pipe.connect("dense.documents", "joiner.documents")
        out = pipe.run(
            {
                "bm25": {"query": "notice employees", "scopes": ["local"]},
                "dense": {"query_embedding": unit((7, 1.0)), "scopes": ["local"]},
            }
        )
        fused = [d.id for d in out["joiner"]["documents"]]
        # h:3 is 1st in dense and in BM25's top 2; h:2 has no query word but is 2nd in dense.
        assert fused[0] == "h:00003"
        assert set(fused) == {"h:00000", "h:00001", "h:00002", "h:00003"}
        assert fused.index("h:00002") < fused.index("h:00001")


class TestDocumentVectors:
    def test_a_documents_chunks_in_reading_order_with_their_vectors_as_one_matrix(self, store: Any) -> None:
        from dataclasses import replace

        chunks = [chunk("h", i, t, page_start=1 + i // 2) for i, t in enumerate(TEXTS)]
        chunks[2] = replace(chunks[2], embedding=None)  # a chunk without a vector: a row of zeros
        store.write_documents(chunks[::-1])
        store.write_documents([chunk("k", 0, "Another file in the scope.", file="b.pdf"),
                               chunk("o", 0, "Another scope's chunk.", scope="other")])
        got = store.document_vectors("h", scope="local")
        assert got.ids == ["h:00000", "h:00001", "h:00002", "h:00003"]
        assert (got.chunk_indexes, got.pages, got.contents) == ([0, 1, 2, 3], [1, 1, 2, 2], TEXTS)
        assert got.has_vector.tolist() == [True, True, False, True]
        assert got.vectors.shape == (4, DIM) and not got.vectors[2].any()
        want = [np.asarray(c.embedding, dtype=np.float32) for c in chunks if c.embedding]
        assert np.array_equal(got.vectors[[0, 1, 3]], np.stack(want))
        fetched = store.fetch(scopes=["local"], filters={"field": "meta.doc_id", "operator": "==", "value": "h"})
        assert [got.document(i) for i in range(len(got))] == fetched  # the chunk as fetch returns it, no embedding
        assert len(store.document_vectors("o", scope="local")) == 0  # another scope's document
        assert len(store.document_vectors("h", scope="other")) == 0
        assert store.document_vectors("h", scope="local", limit=2).ids == ["h:00000", "h:00001"]
        with pytest.raises(ScopeRequiredError):
            store.document_vectors("h", scope=" ")


# --------------------------------------------------------------------------------------------------
# scopes
# --------------------------------------------------------------------------------------------------
SHARED_TEXT = "Quarterly budget: the secret figures for the board."


class TestScopes:
    def test_no_leak_across_many_scopes(self, store: Any) -> None:
        scopes = [f"slack:T1:C{i:02d}" for i in range(25)] + ["teams:tenant:19:abc@thread.v2", "local"]
        target = scopes[0]
        docs = []
        for s in scopes:
            n = 5 if s == target else 8
            for i in range(n):
                # other scopes hold vectors that match the query better than anything in the target scope
                emb = unit((3, 0.2), (i + 20, 1.0)) if s == target else unit((3, 1.0), (i + 40, 0.05))
                docs.append(chunk(f"doc-{s}", i, f"{SHARED_TEXT} part {i}", scope=s, file="budget.pdf", embedding=emb))
        store.write_documents(docs)
        q = unit((3, 1.0))

        for s in (target, scopes[7], "local"):
            n = 5 if s == target else 8
            hits = store.bm25_search("quarterly budget secret figures", scopes=[s], top_k=50)
            assert len(hits) == n and {d.meta["scope"] for d in hits} == {s}
            dense = store.embedding_search(q, scopes=[s], top_k=n)
            assert len(dense) == n and {d.meta["scope"] for d in dense} == {s}
            assert [d.scope for d in store.list_documents(scopes=[s])] == [s]
            assert {d.meta["scope"] for d in store.fetch(scopes=[s], limit=1000)} == {s}
            assert sum(d.chunks for d in store.list_documents(scopes=[s])) == n

        # a filter cannot widen the scope
        sneaky = {"operator": "OR", "conditions": [_c("meta.scope", "==", scopes[5]), _c("meta.scope", "!=", "x")]}
        assert {d.meta["scope"] for d in store.bm25_search("budget", scopes=[target], top_k=100, filters=sneaky)} == {
            target
        }
        assert {d.meta["scope"] for d in store.embedding_search(q, scopes=[target], top_k=100, filters=sneaky)} == {
            target
        }
        assert store.fetch(scopes=[target], filters=_c("meta.scope", "==", scopes[5])) == []

        # several scopes: exactly their union
        two = [scopes[1], scopes[2]]
        assert {d.meta["scope"] for d in store.embedding_search(q, scopes=two, top_k=100)} == set(two)
        assert len(store.bm25_search("budget", scopes=two, top_k=100)) == 16

        # another scope's document can't be seen, checked or deleted from here
        other = f"doc-{scopes[3]}"
        assert not store.has_document(other, scope=target)
        assert store.delete_document(other, scopes=[target]) == 0
        assert store.has_document(other, scope=scopes[3])
        assert set(store.all_scopes()) == set(scopes)

    @pytest.mark.parametrize("bad", [None, [], [""], ""])
    def test_every_search_and_listing_requires_a_scope(self, store: Any, bad: Any) -> None:
        store.write_documents([chunk("a", 0, "some text")])
        bm25, dense = make_retrievers(store, top_k=5)
        calls = [
            lambda: store.bm25_search("text", scopes=bad, top_k=5),
            lambda: store.embedding_search(unit((0, 1.0)), scopes=bad, top_k=5),
            lambda: store.list_documents(scopes=bad),
            lambda: store.fetch(scopes=bad),
            lambda: store.delete_document("a", scopes=bad),
            lambda: store.has_document("a", scope=bad),
            lambda: bm25.run(query="text", scopes=bad),
            lambda: dense.run(query_embedding=unit((0, 1.0)), scopes=bad),
        ]
        for call in calls:
            with pytest.raises(ScopeRequiredError):
                call()
        assert store.count_documents() == 1


# --------------------------------------------------------------------------------------------------
# replace_document: all or nothing, the versions it is told to replace go (and only those)
# --------------------------------------------------------------------------------------------------
def _version(doc_id: str, n: int, word: str, scope: str = "local", file: str = "policy.pdf") -> list[Document]:
    return [
        chunk(
            doc_id, i, f"{word} clause {i} of the policy", scope=scope, file=file, embedding=unit((i, 1.0), (50, 0.5))
        )
        for i in range(n)
    ]


def _bad_dim(docs: list[Document]) -> list[Document]:
    docs[4] = Document(id=docs[4].id, content=docs[4].content, meta=docs[4].meta, embedding=[0.1] * (DIM - 1))
    return docs


def _nan(docs: list[Document]) -> list[Document]:
    docs[4] = Document(id=docs[4].id, content=docs[4].content, meta=docs[4].meta, embedding=[float("nan")] * DIM)
    return docs


def _dup_in_batch(docs: list[Document]) -> list[Document]:
    docs[4] = Document(id=docs[1].id, content="dup", meta=docs[4].meta, embedding=docs[4].embedding)
    return docs


def _clash_other_scope(docs: list[Document]) -> list[Document]:
    docs[4] = Document(id="foreign:00000", content="steal", meta=docs[4].meta, embedding=docs[4].embedding)
    return docs


class TestReplaceDocument:
    @pytest.mark.parametrize("corrupt", [_bad_dim, _nan, _dup_in_batch, _clash_other_scope])
    def test_failure_midway_leaves_store_as_before(self, store: Any, corrupt: Any) -> None:
        store.replace_document(_version("v1", 3, "alpha"), scope="local")
        store.write_documents([chunk("foreign", 0, "another channel's text", scope="slack:T:C9")])
        before = snapshot(store, ["local"])
        foreign_before = snapshot(store, ["slack:T:C9"])

        with pytest.raises(WRITE_ERRORS):
            store.replace_document(corrupt(_version("v2", 8, "omega")), scope="local", replaces=["v1"])

        assert snapshot(store, ["local"]) == before
        assert snapshot(store, ["slack:T:C9"]) == foreign_before
        assert store.bm25_search("omega", scopes=["local"], top_k=10) == []
        assert {d.meta["doc_id"] for d in store.embedding_search(unit((6, 1.0)), scopes=["local"], top_k=10)} == {"v1"}
        assert store.count_documents() == 4

    def test_replace_removes_the_named_versions_only_in_its_scope(self, store: Any) -> None:
        assert store.replace_document(_version("v1", 3, "alpha"), scope="local") == []
        store.replace_document(_version("x1", 2, "alpha", scope="slack:T:C1"), scope="slack:T:C1")
        store.replace_document(_version("o1", 2, "other", file="other.pdf"), scope="local")

        # another scope's document is never removed, even when named; nor a document not named ("o1")
        assert store.replace_document(_version("v2", 2, "omega"), scope="local", replaces=["x1", "v1"]) == ["v1"]
        assert [(d.doc_id, d.chunks) for d in store.list_documents(scopes=["local"])] == [("o1", 2), ("v2", 2)]
        assert store.bm25_search("alpha", scopes=["local"], top_k=10) == []
        assert {d.meta["doc_id"] for d in store.bm25_search("omega", scopes=["local"], top_k=10)} == {"v2"}
        assert [(d.doc_id, d.chunks) for d in store.list_documents(scopes=["slack:T:C1"])] == [("x1", 2)]

        # re-indexing the same document with fewer chunks drops the stale ones
        assert store.replace_document(_version("v2", 1, "omega"), scope="local") == []
        assert [(d.doc_id, d.chunks) for d in store.list_documents(scopes=["local"])] == [("o1", 2), ("v2", 1)]
        assert len(store.embedding_search(unit((0, 1.0)), scopes=["local"], top_k=10)) == 3


# --------------------------------------------------------------------------------------------------
# a second process reads while this one writes
# --------------------------------------------------------------------------------------------------
READER = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    from connectors.settings import Settings
    from connectors.stores import open_store

    cfg, n = json.loads(sys.argv[1]), int(sys.argv[2])
    store = open_store(Settings(**cfg))
    q = np.zeros(384); q[77] = 1.0; q = q.tolist()
    seen = {"list": set(), "bm25": set(), "dense": set()}
    # warm every cache before the write starts
    store.embedding_search(q, scopes=["local"], top_k=5)
    store.bm25_search("zanzibar", scopes=["local"], top_k=5)
    print("ready", flush=True)
    deadline = time.time() + 90
    done = False
    while time.time() < deadline and not done:
        listed = {d.doc_id: d.chunks for d in store.list_documents(scopes=["local"])}
        bm = store.bm25_search("zanzibar", scopes=["local"], top_k=n + 10)
        de = [d for d in store.embedding_search(q, scopes=["local"], top_k=n + 10) if d.meta["doc_id"] == "new"]
        seen["list"].add(listed.get("new", 0))
        seen["bm25"].add(len(bm))
        seen["dense"].add(len(de))
        done = listed.get("new") == n and len(bm) == n and len(de) == n
        time.sleep(0.005)
    print(json.dumps({"done": done, **{k: sorted(v) for k, v in seen.items()}}), flush=True)
    """
)


@pytest.mark.slow
def test_second_process_sees_whole_documents_only(store: Any, store_cfg: dict[str, Any]) -> None:
    n = 60
    store.replace_document(_version("old", 5, "alpha"), scope="local")
    env = {**os.environ, "HAYSTACK_TELEMETRY_ENABLED": "False"}
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, json.dumps(store_cfg), str(n)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert reader.stdout is not None
        for line in reader.stdout:  # the reader may log to stdout before it is ready
            if line.strip() == "ready":
                break
        else:
            pytest.fail(f"reader did not start: {reader.stderr.read() if reader.stderr else ''}")
        new = [
            chunk("new", i, f"Zanzibar annex clause {i}", file="new.pdf", embedding=unit((77, 1.0), (100 + i, 0.1)))
            for i in range(n)
        ]
        store.replace_document(new, scope="local")
        out, err = reader.communicate(timeout=120)
    finally:
        if reader.poll() is None:
            reader.kill()
    result = json.loads(out.strip().splitlines()[-1])
    assert result["done"], (result, err[-2000:])
    # never a partial document: either nothing of it or all of it
    assert set(result["list"]) <= {0, n}
    assert set(result["bm25"]) <= {0, n}
    assert set(result["dense"]) <= {0, n}
