"""The embedded store's own parts: FTS5 query sanitising, filter translation, caches shared across
processes, threads, reopening, schema upgrades and its retriever components."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from haystack import Document
from haystack.errors import FilterError

from connectors.sqlite_store import SQLiteBM25Retriever, SQLiteDocumentStore, SQLiteEmbeddingRetriever
from connectors.sqlite_store.filters import FILTER_INDEX_NAMES, filters_to_sql
from connectors.sqlite_store.fulltext import fts5_query, fts5_terms
from connectors.store_api import ScopeRequiredError, StoreError


def vec(axis: int, dim: int = 8) -> list[float]:
    v = [0.0] * dim
    v[axis % dim] = 1.0
    return v


def doc(i: int, text: str, scope: str = "local", dim: int = 8, **meta: Any) -> Document:
    return Document(
        id=f"d{i}:{i:05d}",
        content=text,
        meta={"scope": scope, "doc_id": f"d{i}", "file_name": f"f{i}.pdf", "chunk_index": 0, **meta},
        embedding=vec(i, dim),
    )


@pytest.fixture
def store(tmp_path: Path) -> SQLiteDocumentStore:
    s = SQLiteDocumentStore(tmp_path / "s.sqlite3", embedding_dim=8)
    yield s
    s.close()


# --------------------------------------------------------------------------------------------------
# FTS5 query sanitising
# --------------------------------------------------------------------------------------------------
SANITISE_CASES = [
    ('What\'s the "notice period"?', "d0"),
    ("notice-period: 3 months*", "d0"),
    ("(notice) AND OR NOT NEAR/3 period", "d0"),
    ("content: notice ^period", "d0"),
    ("Größe der Küche?", "d1"),
    ("grosse der kuche", "d1"),
    ("日本語のテキスト", "d2"),
    ("emoji 🙂 résumé naïve", "d3"),
    ("scope_tag : s6c6f63616c", None),
]


class TestFts5Sanitising:
    @pytest.mark.parametrize(("question", "expected"), SANITISE_CASES)
    def test_any_question_is_a_safe_query(self, store: SQLiteDocumentStore, question: str, expected: str) -> None:
        store.write_documents(
            [
                doc(0, "The notice period is 3 months for all staff."),
                doc(1, "Die Größe der Küche beträgt zwölf Quadratmeter."),
                doc(2, "日本語のテキスト"),
                doc(3, "Her résumé was naïve."),
            ]
        )
        hits = store.bm25_search(question, scopes=["local"], top_k=3)
        if expected is None:
            # the scope column can't be addressed from a question
            assert hits == []
        else:
            assert hits and hits[0].meta["doc_id"] == expected

    @pytest.mark.parametrize("question", ['"', "?!", "* : ( ) - ^", "", "   ", "___"])
    def test_questions_without_words_give_no_query(self, store: SQLiteDocumentStore, question: str) -> None:
        assert fts5_query(question) == ""
        store.write_documents([doc(0, "some text")])
        assert store.bm25_search(question, scopes=["local"], top_k=3) == []

    def test_terms_are_quoted_or_ed_deduplicated_and_capped(self) -> None:
        assert fts5_query('Notice "notice" NOTICE period') == '"notice" OR "period"'
        assert fts5_terms("a-b c_d") == ["a", "b", "c", "d"]
        assert len(fts5_terms(" ".join(f"w{i}" for i in range(500)))) == 64


# --------------------------------------------------------------------------------------------------
# filter translation
# --------------------------------------------------------------------------------------------------
class TestFilterTranslation:
    @pytest.mark.parametrize(
        "bad",
        [
            {"conditions": [{"field": "meta.a", "operator": "==", "value": 1}]},
            {"operator": "AND"},
            {"operator": "XOR", "conditions": []},
            {"field": "meta.a", "value": 1},
            {"field": "meta.a", "operator": "=="},
            {"field": "meta.a", "operator": "~", "value": 1},
            {"field": "meta.a", "operator": "in", "value": "x"},
            {"field": "meta.a", "operator": ">", "value": "not a date"},
            {"field": "meta.a", "operator": ">", "value": [1]},
            {"field": "meta.", "operator": "==", "value": 1},
        ],
    )
    def test_malformed_filters_raise_filter_error(self, bad: dict[str, Any]) -> None:
        with pytest.raises(FilterError):
            filters_to_sql(bad)

    def test_values_are_bound_and_field_names_quoted(self, store: SQLiteDocumentStore) -> None:
        store.write_documents([doc(0, "a", label="x"), doc(1, "b", **{"we'ird key": "v"})])
        sql, params = filters_to_sql({"field": "meta.label", "operator": "==", "value": "x' OR 1=1 --"})
        assert "1=1" not in sql and params == ["x' OR 1=1 --"]
        assert store.filter_documents({"field": "meta.label", "operator": "==", "value": "x' OR 1=1 --"}) == []
        got = store.filter_documents({"field": "meta.we'ird key", "operator": "==", "value": "v"})
        assert [d.id for d in got] == ["d1:00001"]

    def test_content_id_nested_list_and_legacy_fields(self, store: SQLiteDocumentStore) -> None:
        store.write_documents(
            [
                doc(0, "exact text", tags=["a", "b"], nested={"x": 2}),
                doc(1, "other text", tags=["c"], nested={"x": 3}),
            ]
        )

        def ids(f: dict[str, Any]) -> list[str]:
            return [d.id for d in store.filter_documents(f)]

        assert ids({"field": "content", "operator": "==", "value": "exact text"}) == ["d0:00000"]
        assert ids({"field": "id", "operator": "!=", "value": "d0:00000"}) == ["d1:00001"]
        assert ids({"field": "meta.nested.x", "operator": ">", "value": 2}) == ["d1:00001"]
        assert ids({"field": "meta.tags", "operator": "==", "value": ["c"]}) == ["d1:00001"]
        assert ids({"field": "doc_id", "operator": "==", "value": "d0"}) == ["d0:00000"]  # no "meta." prefix
        assert ids({"operator": "OR", "conditions": []}) == []
        assert ids({"operator": "AND", "conditions": []}) == ["d0:00000", "d1:00001"]


# --------------------------------------------------------------------------------------------------
# BM25 pruning of words in most chunks
# --------------------------------------------------------------------------------------------------
def _raw_fts5_ranking(store: SQLiteDocumentStore, question: str, k: int) -> list[str]:
    """FTS5's own BM25 ranking over every word of the question, without the store's pruning."""
    conn = sqlite3.connect(store.path)
    match = "content : (" + fts5_query(question) + ")"
    rows = conn.execute(
        "SELECT c.id FROM chunks_fts f JOIN chunks c ON c.rid = f.rowid WHERE chunks_fts MATCH ? "
        "ORDER BY bm25(chunks_fts, 1.0, 0.0) LIMIT ?",
        (match, k),
    ).fetchall()
    conn.close()
    return [r[0] for r in rows]


def test_dropping_words_in_most_chunks_keeps_the_ranking(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(300)]
    docs = [
        doc(i, f"the a of {' '.join(rng.choice(vocab, size=int(rng.integers(5, 40))))} the end") for i in range(400)
    ]
    store = SQLiteDocumentStore(tmp_path / "s.sqlite3", embedding_dim=8)
    store.write_documents(docs)
    for question in ["the w1 of the w2 w3", "what is the w17 of the end", "w5 w250 the a of"]:
        want = _raw_fts5_ranking(store, question, 10)
        assert [d.id for d in store.bm25_search(question, scopes=["local"], top_k=10)] == want, question
    # a question of nothing but such words still finds something
    assert len(store.bm25_search("the a of end", scopes=["local"], top_k=10)) == 10
    store.close()


def test_over_budget_questions_keep_their_rarest_word(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    vocab = [f"w{i}" for i in range(30)]
    docs = [doc(i, " ".join(rng.choice(vocab, size=20))) for i in range(300)]
    docs.append(doc(300, "w1 w2 rareword"))
    store = SQLiteDocumentStore(tmp_path / "s.sqlite3", embedding_dim=8, bm25_max_postings=100)
    store.write_documents(docs)
    hits = store.bm25_search("w1 w2 w3 w4 rareword", scopes=["local"], top_k=5)
    assert hits[0].id == "d300:00300"
    store.close()


# --------------------------------------------------------------------------------------------------
# caches, processes, threads, reopening
# --------------------------------------------------------------------------------------------------
class TestSharing:
    def test_another_store_instance_sees_writes_and_deletes(self, tmp_path: Path) -> None:
        writer = SQLiteDocumentStore(tmp_path / "s.sqlite3", embedding_dim=8)
        reader = SQLiteDocumentStore(tmp_path / "s.sqlite3", embedding_dim=8)
        writer.write_documents([doc(0, "first"), doc(1, "second", scope="slack:T:C1")])
        assert [d.id for d in reader.embedding_search(vec(2), scopes=["local"], top_k=5)] == ["d0:00000"]
        writer.write_documents([doc(2, "third")])
        assert [d.id for d in reader.embedding_search(vec(2), scopes=["local"], top_k=5)][0] == "d2:00002"
        writer.delete_document("d2", scopes=["local"])
        assert [d.id for d in reader.embedding_search(vec(2), scopes=["local"], top_k=5)] == ["d0:00000"]
        assert [d.id for d in reader.bm25_search("third first", scopes=["local"], top_k=5)] == ["d0:00000"]
        writer.close()
        reader.close()

    def test_a_reader_far_behind_the_pruned_change_log_reloads(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import connectors.sqlite_store.rows as mod

        monkeypatch.setattr(mod, "_KEEP_CHANGES", 2)
        writer = SQLiteDocumentStore(tmp_path / "s.sqlite3", embedding_dim=8)
        reader = SQLiteDocumentStore(tmp_path / "s.sqlite3", embedding_dim=8)
        writer.write_documents([doc(0, "zero")])
        assert [d.id for d in reader.embedding_search(vec(0), scopes=["local"], top_k=1)] == ["d0:00000"]
        for i in range(1, 12):
            # the local write comes first, so its change row is among the pruned ones
            writer.write_documents([doc(i, f"doc {i}", scope="local" if i == 1 else f"other:{i}")])
        conn = sqlite3.connect(tmp_path / "s.sqlite3")
        assert conn.execute("SELECT min(gen) FROM changes").fetchone()[0] > 2  # the log was pruned
        conn.close()
        assert [d.id for d in reader.embedding_search(vec(1), scopes=["local"], top_k=1)] == ["d1:00001"]
        writer.close()
        reader.close()

    def test_threads_search_while_one_writes(self, store: SQLiteDocumentStore) -> None:
        store.write_documents([doc(i, f"chunk number {i} of the handbook") for i in range(50)])
        errors: list[BaseException] = []
        stop = threading.Event()

        def search() -> None:
            try:
                while not stop.is_set():
                    assert store.bm25_search("handbook", scopes=["local"], top_k=5)
                    assert store.embedding_search(vec(3), scopes=["local"], top_k=5)
                    assert store.list_documents(scopes=["local"])
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=search) for _ in range(3)]
        for t in threads:
            t.start()
        for i in range(50, 80):
            store.replace_document([doc(i, f"added chunk {i} handbook")], scope="local")
        stop.set()
        for t in threads:
            t.join(timeout=30)
        assert errors == []
        assert len(store.list_documents(scopes=["local"])) == 80

    def test_reopened_store_answers_from_disk(self, tmp_path: Path) -> None:
        s = SQLiteDocumentStore(tmp_path / "s.sqlite3", embedding_dim=8)
        s.write_documents([doc(i, f"text {i}") for i in range(5)])
        s.close()
        s = SQLiteDocumentStore(tmp_path / "s.sqlite3")
        assert s.embedding_search(vec(4), scopes=["local"], top_k=1)[0].id == "d4:00004"
        assert s.bm25_search("text", scopes=["local"], top_k=10).__len__() == 5
        s.close()

    def test_wrong_embedding_dimension_says_what_to_do(self, tmp_path: Path) -> None:
        s = SQLiteDocumentStore(tmp_path / "s.sqlite3", embedding_dim=8)
        s.write_documents([doc(0, "x")])
        s.close()
        with pytest.raises(StoreError, match="CITEBOT_DATA_DIR"):
            SQLiteDocumentStore(tmp_path / "s.sqlite3", embedding_dim=384)
        s = SQLiteDocumentStore(tmp_path / "s.sqlite3")
        with pytest.raises(ValueError, match="dimensions"):
            s.embedding_search([1.0] * 5, scopes=["local"], top_k=1)
        s.close()

    def test_older_index_layout_is_rebuilt_on_open(self, tmp_path: Path) -> None:
        s = SQLiteDocumentStore(tmp_path / "s.sqlite3", embedding_dim=8)
        s.write_documents([doc(0, "rebuild me please")])
        s.close()
        conn = sqlite3.connect(tmp_path / "s.sqlite3")
        conn.execute("UPDATE store_info SET value='1' WHERE key='schema_version'")
        conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('delete-all')")  # an index that no longer matches
        conn.commit()
        conn.close()
        s = SQLiteDocumentStore(tmp_path / "s.sqlite3")
        assert [d.id for d in s.bm25_search("rebuild", scopes=["local"], top_k=5)] == ["d0:00000"]
        s.close()

    @staticmethod
    def _schema_4_file(path: Path, n: int) -> list[list[float]]:
        """A store as schema 4 left it: embeddings, no ``vector_codes``. Returns the vectors, chunk ``c{i}``'s."""
        rng = np.random.default_rng(3)
        vecs = rng.standard_normal((n, 16)).astype(np.float32).tolist()
        s = SQLiteDocumentStore(path, embedding_dim=16)
        s.write_documents([Document(id=f"c{i}", content=f"chunk {i}", embedding=v,
                                    meta={"scope": "a" if i % 2 else "b"}) for i, v in enumerate(vecs)])
        s.close()
        conn = sqlite3.connect(path)
        conn.execute("DROP TABLE vector_codes")
        conn.execute("UPDATE store_info SET value='4' WHERE key='schema_version'")
        conn.commit()
        conn.close()
        return vecs

    def test_a_schema_4_file_gains_its_vector_codes_on_open_and_says_so(self, tmp_path: Path) -> None:
        from structlog.testing import capture_logs

        from connectors.sqlite_store import set_vector_format

        vecs = self._schema_4_file(tmp_path / "s.sqlite3", 600)
        with capture_logs() as logs:
            s = SQLiteDocumentStore(tmp_path / "s.sqlite3")
        assert [(e["event"], e["chunks"]) for e in logs if e["event"].startswith("store_migrat")] == [
            ("store_migrating", 600), ("store_migrated", 600)]
        found = [d.id for d in s.embedding_search(vecs[7], scopes=["a"], top_k=3)]
        set_vector_format(s, "float32")
        assert found == [d.id for d in s.embedding_search(vecs[7], scopes=["a"], top_k=3)] and found[0] == "c7"
        s.close()
        with capture_logs() as logs:
            SQLiteDocumentStore(tmp_path / "s.sqlite3").close()  # once only
        assert not [e for e in logs if e["event"].startswith("store_migrat")]

    def test_a_failed_migration_leaves_the_file_as_it_was(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import connectors.sqlite_store.schema as schema

        vecs = self._schema_4_file(tmp_path / "s.sqlite3", 50)

        def broken(mat: Any) -> Any:
            raise OSError("disk went away")

        monkeypatch.setattr(schema, "sign_codes", broken)
        with pytest.raises(OSError, match="went away"):
            SQLiteDocumentStore(tmp_path / "s.sqlite3")
        conn = sqlite3.connect(tmp_path / "s.sqlite3")
        assert conn.execute("SELECT value FROM store_info WHERE key='schema_version'").fetchone() == ("4",)
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name='vector_codes'").fetchone() == (0,)
        conn.close()
        monkeypatch.undo()
        s = SQLiteDocumentStore(tmp_path / "s.sqlite3")
        assert s.embedding_search(vecs[4], scopes=["b"], top_k=1)[0].id == "c4"
        s.close()

    def test_deleted_and_replaced_chunks_take_their_codes_along(self, store: SQLiteDocumentStore) -> None:
        store.write_documents([doc(i, f"chunk {i}") for i in range(6)])
        store.replace_document([doc(1, "new one")], scope="local")
        store.delete_documents(["d2:00002"])
        store.delete_document("d3", scopes=["local"])
        conn = store._conn()  # noqa: SLF001 - the file's own tables
        pairs = conn.execute("SELECT e.rid, v.rid FROM embeddings e FULL JOIN vector_codes v ON v.rid = e.rid")
        assert all(e == v for e, v in pairs) and conn.execute("SELECT count(*) FROM vector_codes").fetchone() == (4,)

    def test_a_file_from_before_the_routing_columns_still_answers_page_and_table_lookups(
        self, tmp_path: Path
    ) -> None:
        s = SQLiteDocumentStore(tmp_path / "s.sqlite3", embedding_dim=8)
        s.write_documents([
            doc(0, "revenue table", page_start=9, page_end=9, label="Table 2", section_id="7"),
            doc(1, "leave rules", page_start=4, page_end=5, label="", section_id="4.2"),
        ])
        s.close()
        conn = sqlite3.connect(tmp_path / "s.sqlite3")  # what a schema-3 file looks like
        for name in FILTER_INDEX_NAMES:  # newer than schema 3
            conn.execute(f"DROP INDEX {name}")
        for col in ("page_start", "page_end", "section_id", "label"):
            conn.execute(f"ALTER TABLE chunks DROP COLUMN {col}")
        conn.execute("UPDATE store_info SET value='3' WHERE key='schema_version'")
        conn.commit()
        conn.close()
        s = SQLiteDocumentStore(tmp_path / "s.sqlite3")
        table = {"field": "meta.label", "operator": "in", "value": ["Table 2"]}
        pages = {
            "operator": "AND",
            "conditions": [
                {"field": "meta.page_start", "operator": "<=", "value": 5},
                {"field": "meta.page_end", "operator": ">=", "value": 5},
            ],
        }
        section = {"field": "meta.section_id", "operator": "==", "value": "4.2"}
        assert [d.id for d in s.fetch(scopes=["local"], filters=table)] == ["d0:00000"]
        assert [d.id for d in s.fetch(scopes=["local"], filters=pages)] == ["d1:00001"]
        assert [d.id for d in s.fetch(scopes=["local"], filters=section)] == ["d1:00001"]
        assert s.fetch(scopes=["other"], filters=table) == []
        s.close()

    def test_a_file_from_before_the_reference_indexes_gains_them_and_searches_by_them(self, tmp_path: Path) -> None:
        s = SQLiteDocumentStore(tmp_path / "s.sqlite3", embedding_dim=8)
        s.write_documents([doc(i, f"chunk {i}", page_start=i + 1, page_end=i + 1, section_id=f"{i % 7}.1",
                               label=f"Table {i}", page_label=str(i + 1)) for i in range(60)])
        queries = {
            "section": {"field": "meta.section_id", "operator": "in", "value": ["4.1"]},
            "label": {"field": "meta.label", "operator": "==", "value": "Table 7"},
            "printed page": {"operator": "OR", "conditions": [
                {"field": "meta.page_label", "operator": "in", "value": ["12"]},
                {"field": "meta.page_label_end", "operator": "in", "value": ["12"]}]},
        }
        before = {name: [d.id for d in s.fetch(scopes=["local"], filters=f)] for name, f in queries.items()}
        s.close()
        conn = sqlite3.connect(tmp_path / "s.sqlite3")  # what a file written before these indexes looks like
        for name in FILTER_INDEX_NAMES:
            conn.execute(f"DROP INDEX {name}")
        conn.commit()
        conn.close()
        s = SQLiteDocumentStore(tmp_path / "s.sqlite3")  # no re-indexing: opening adds them
        plans: list[str] = []
        s._conn().set_trace_callback(plans.append)
        after = {name: [d.id for d in s.fetch(scopes=["local"], filters=f)] for name, f in queries.items()}
        assert after == before
        assert before["section"] == ["d11:00011", "d18:00018", "d25:00025", "d32:00032", "d39:00039", "d4:00004",
                                     "d46:00046", "d53:00053"]  # by document id, as every fetch
        assert before["label"] == ["d7:00007"] and before["printed page"] == ["d11:00011"]
        s._conn().set_trace_callback(None)
        # each look-up reads its own index, not every chunk of the scope (what made "page 12" take 80 ms at 50k)
        used = [" ".join(r[3] for r in s._conn().execute("EXPLAIN QUERY PLAN " + sql)) for sql in plans]
        assert "chunks_section" in used[0] and "chunks_label" in used[1]
        assert "chunks_page_label" in used[2] and "chunks_page_label_end" in used[2]
        s.close()

    def test_odd_scope_strings_stay_apart(self, store: SQLiteDocumentStore) -> None:
        odd = ["slack:T\"1:C'2", "teams:tenant:19:abc@thread.v2", "teams:t:Ünïcode chat"]
        store.write_documents([doc(i, "same words here", scope=s) for i, s in enumerate(odd)])
        for s in odd:
            hits = store.bm25_search("same words", scopes=[s], top_k=10)
            assert [d.meta["scope"] for d in hits] == [s]


# --------------------------------------------------------------------------------------------------
# retriever components
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [SQLiteBM25Retriever, SQLiteEmbeddingRetriever])
class TestRetrieverComponents:
    def test_init_validates(self, cls: Any, store: SQLiteDocumentStore) -> None:
        with pytest.raises(ValueError, match="top_k"):
            cls(store, top_k=0)
        with pytest.raises(ValueError, match="SQLiteDocumentStore"):
            cls(object())

    def test_to_dict_and_from_dict(self, cls: Any, store: SQLiteDocumentStore) -> None:
        data = cls(store, top_k=7).to_dict()
        assert data == {
            "type": f"connectors.sqlite_store.{cls.__name__}",
            "init_parameters": {
                "document_store": {
                    "type": "connectors.sqlite_store.store.SQLiteDocumentStore",
                    "init_parameters": {"path": str(store.path), "embedding_dim": 8, "bm25_max_postings": 8000},
                },
                "top_k": 7,
                "return_embedding": False,
            },
        }
        again = cls.from_dict(data)
        assert again.top_k == 7 and again.document_store.path == store.path
        again.document_store.close()
        # pipelines saved before the store became a package name it by the package
        data["init_parameters"]["document_store"]["type"] = "connectors.sqlite_store.SQLiteDocumentStore"
        old = cls.from_dict(data)
        assert old.document_store.path == store.path
        old.document_store.close()

    def test_run(self, cls: Any, store: SQLiteDocumentStore) -> None:
        store.write_documents([doc(i, f"leave policy part {i}") for i in range(4)])
        inputs: dict[str, Any] = (
            {"query": "leave policy"} if cls is SQLiteBM25Retriever else {"query_embedding": vec(2)}
        )
        out = cls(store, top_k=3).run(scopes=["local"], **inputs)["documents"]
        assert len(out) == 3 and all(d.score is not None and d.embedding is None for d in out)
        assert len(cls(store).run(scopes=["local"], top_k=1, **inputs)["documents"]) == 1
        full = cls(store, return_embedding=True).run(scopes=["local"], **inputs)["documents"]
        assert all(d.embedding is not None and len(d.embedding) == 8 for d in full)
        only = {"field": "meta.doc_id", "operator": "==", "value": "d1"}
        assert [d.id for d in cls(store).run(scopes=["local"], filters=only, **inputs)["documents"]] == ["d1:00001"]
        assert cls(store).run(scopes=["elsewhere"], **inputs)["documents"] == []
        with pytest.raises(ScopeRequiredError):
            cls(store).run(scopes=[], **inputs)


class TestCompactVectors:
    """The compact matrices: binary (sign bits, the default) and int8 (a benchmark option) find the hits exact
    float32 search finds (int8 all of them; binary the nearest and nine in ten of random vectors' top 10, where real
    embeddings' neighbours stand out far more), with exact scores, within the scopes and filters asked."""

    @pytest.mark.parametrize(("fmt", "shared"), [("binary", 0.9), ("int8", 1.0)])
    def test_finds_what_float32_finds_with_exact_scores_within_the_scopes_and_filters(
        self, tmp_path: Path, fmt: str, shared: float
    ) -> None:
        from connectors.sqlite_store import set_vector_format
        from connectors.sqlite_store.vectors import RESCORE_BINARY

        n = 3 * RESCORE_BINARY  # per scope: the binary scan keeps a third of a scope's rows for rescoring
        rng = np.random.default_rng(5)
        vecs = rng.standard_normal((2 * n, 96)).astype(np.float32)
        s = SQLiteDocumentStore(tmp_path / "s.sqlite3", embedding_dim=96)
        for scope, rows in (("a", range(0, n)), ("b", range(n, 2 * n))):
            s.write_documents([Document(id=f"c{i}", content=f"chunk {i}", embedding=vecs[i].tolist(),
                                        meta={"scope": scope, "doc_id": f"d{i % 7}", "page_start": i % 5})
                               for i in rows])
        queries = [vecs[i] + rng.standard_normal(96).astype(np.float32) * 0.3 for i in (3, n + 50, 2 * n - 1)]
        cases: list[dict[str, Any]] = [{"scopes": ["a"]}, {"scopes": ["a", "b"]},
                                       {"scopes": ["b"], "filters": {"field": "meta.doc_id", "operator": "==",
                                                                     "value": "d2"}}]
        set_vector_format(s, "float32")
        exact = [[(d.id, d.score) for d in s.embedding_search(q.tolist(), top_k=10, **c)]
                 for q in queries for c in cases]
        set_vector_format(s, fmt)
        got = [[(d.id, d.score) for d in s.embedding_search(q.tolist(), top_k=10, **c)]
               for q in queries for c in cases]
        overlap = []
        for e, i in zip(exact, got, strict=True):
            overlap.append(len({d for d, _ in i} & {d for d, _ in e}) / len(e))
            assert [sc for _, sc in i] == sorted((sc for _, sc in i), reverse=True)
            cos = {d: float(vecs[int(d[1:])] @ q / np.linalg.norm(vecs[int(d[1:])]) / np.linalg.norm(q))
                   for d, _ in i for q in [queries[len(overlap[:-1]) // len(cases)]]}
            assert [sc for _, sc in i] == pytest.approx([cos[d] for d, _ in i], abs=1e-5)  # exact scores
        assert min(overlap) >= 0.8 and sum(overlap) / len(overlap) >= shared
        assert got[0][0][0] == "c3" and got[4][0][0] == f"c{n + 50}"  # the chunk each query was made near
        assert all(int(d[1:]) >= n for d, _ in got[2])  # scope b only
        with pytest.raises(ValueError, match="vector_format"):
            set_vector_format(s, "int4")
        s.close()

    @pytest.mark.parametrize("fmt", ["binary", "int8", "float32"])
    def test_the_vectors_setting_picks_the_format(self, tmp_path: Path, fmt: str) -> None:
        from connectors.settings import Settings
        from connectors.stores import open_store

        store = open_store(Settings(_env_file=None, data_dir=tmp_path, vectors=fmt))  # type: ignore[call-arg]
        assert store._vectors.vector_format == fmt  # type: ignore[attr-defined]  # noqa: SLF001
        store.close()  # type: ignore[attr-defined]

    def test_binary_never_ranks_another_scopes_identical_vectors(self, tmp_path: Path) -> None:
        """Another channel holds exact copies of the query's nearest vectors (Hamming distance 0): none surfaces,
        however few of the asked scope's rows are near."""
        from connectors.sqlite_store.vectors import RESCORE_BINARY

        rng = np.random.default_rng(9)
        mine = rng.standard_normal((2 * RESCORE_BINARY, 64)).astype(np.float32)
        q = rng.standard_normal(64).astype(np.float32)
        s = SQLiteDocumentStore(tmp_path / "s.sqlite3", embedding_dim=64)
        s.write_documents([Document(id=f"mine{i}", content="x", embedding=v.tolist(), meta={"scope": "C1"})
                           for i, v in enumerate(mine)])
        s.write_documents([Document(id=f"theirs{i}", content="x", embedding=(q * (1 + i)).tolist(),
                                    meta={"scope": "C2"}) for i in range(3 * RESCORE_BINARY)])
        hits = s.embedding_search(q.tolist(), scopes=["C1"], top_k=50)
        assert len(hits) == 50 and all(d.id.startswith("mine") for d in hits)
        assert {d.id for d in s.embedding_search(q.tolist(), scopes=["C2"], top_k=5)} <= {
            f"theirs{i}" for i in range(3 * RESCORE_BINARY)}
        s.close()
