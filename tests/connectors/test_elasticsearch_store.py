"""The Elasticsearch store's parts that need no server: choice of store, mapping, secrets, errors, scopes (and
how it and the chat state take an index another replica created first).
Its behaviour against a real server is the contract suite (``test_store_contract.py``), run when
``CITEBOT_TEST_ELASTICSEARCH_URL`` is set."""

from __future__ import annotations

import json
import socket

import pytest
from haystack import Document

from connectors.elasticsearch_store import (
    CitebotElasticsearchStore,
    ScopedElasticsearchBM25Retriever,
    ScopedElasticsearchEmbeddingRetriever,
    chunk_mapping,
)
from connectors.settings import Settings
from connectors.sqlite_store import SQLiteDocumentStore
from connectors.store_api import ScopeRequiredError, StoreError
from connectors.stores import make_retrievers, open_store


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_open_store_picks_elasticsearch_only_when_its_url_is_set(tmp_path) -> None:
    sqlite = open_store(Settings(data_dir=tmp_path / "d"))
    assert isinstance(sqlite, SQLiteDocumentStore)
    assert (tmp_path / "d" / "chunks.sqlite3").exists()
    sqlite.close()
    es = open_store(Settings(data_dir=tmp_path / "d", elasticsearch_url="http://127.0.0.1:9200", embedding_dim=512))
    assert isinstance(es, CitebotElasticsearchStore)
    assert es.embedding_dim == 512 and es.index == "citebot-chunks"
    bm25, dense = make_retrievers(es, top_k=7)
    assert isinstance(bm25, ScopedElasticsearchBM25Retriever) and bm25.top_k == 7
    assert isinstance(dense, ScopedElasticsearchEmbeddingRetriever) and dense.top_k == 7


def test_mapping_is_explicit() -> None:
    props = chunk_mapping(384)["properties"]
    assert props["embedding"] == {"type": "dense_vector", "dims": 384, "index": True, "similarity": "cosine",
                                  "index_options": {"type": "bbq_hnsw"}}
    assert props["content"] == {"type": "text"}
    assert {props[f]["type"] for f in ("scope", "doc_id", "file_name", "element_type", "sha256")} == {"keyword"}
    assert {props[f]["type"] for f in ("page_start", "page_end", "chunk_index")} == {"integer"}


@pytest.mark.parametrize(("vectors", "dims", "index_type"), [
    ("binary", 384, "bbq_hnsw"), ("binary", 32, "int8_hnsw"), ("int8", 384, "int8_hnsw"), ("float32", 384, "hnsw")])
def test_the_vectors_setting_quantises_a_new_index_as_the_embedded_store_does(
    vectors: str, dims: int, index_type: str
) -> None:
    """CITEBOT_VECTORS picks Elasticsearch's quantisation of a new index (bbq needs 64 dimensions or more), and a
    saved store keeps it."""
    assert chunk_mapping(dims, vectors)["properties"]["embedding"]["index_options"] == {"type": index_type}
    settings = Settings(elasticsearch_url="https://es.internal:9243", vectors=vectors, embedding_dim=dims)
    store = CitebotElasticsearchStore.from_settings(settings)  # creates its index with chunk_mapping(dims, vectors)
    assert store.vectors == vectors and CitebotElasticsearchStore.from_dict(store.to_dict()).vectors == vectors
    with pytest.raises(ValueError, match="vectors must be one of"):
        CitebotElasticsearchStore(hosts="https://es.internal:9243", vectors="int4")


def test_secrets_are_saved_by_env_var_name_never_by_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITEBOT_ELASTICSEARCH_API_KEY", "c2VjcmV0LWtleQ==")
    store = CitebotElasticsearchStore.from_settings(Settings(elasticsearch_url="https://es.internal:9243"))
    data = store.to_dict()
    assert "c2VjcmV0LWtleQ==" not in json.dumps(data)
    assert data["init_parameters"]["api_key"] == {
        "type": "env_var",
        "env_vars": ["CITEBOT_ELASTICSEARCH_API_KEY"],
        "strict": True,
    }
    again = CitebotElasticsearchStore.from_dict(data)
    assert again.to_dict() == data
    retriever = ScopedElasticsearchBM25Retriever(store, top_k=3)
    assert ScopedElasticsearchBM25Retriever.from_dict(retriever.to_dict()).to_dict() == retriever.to_dict()


def test_password_needs_a_username() -> None:
    with pytest.raises(ValueError, match="USERNAME"):
        CitebotElasticsearchStore.from_settings(
            Settings(elasticsearch_url="http://127.0.0.1:9200", elasticsearch_password="pw")
        )


def test_unreachable_server_raises_a_store_error_saying_what_to_check() -> None:
    store = CitebotElasticsearchStore(hosts=f"http://127.0.0.1:{closed_port()}", index="x", request_timeout=2)
    with pytest.raises(StoreError, match="CITEBOT_ELASTICSEARCH_URL"):
        store.bm25_search("notice period", scopes=["local"], top_k=5)


def test_scope_and_input_checks_happen_before_any_request() -> None:
    store = CitebotElasticsearchStore(hosts=f"http://127.0.0.1:{closed_port()}", index="x", embedding_dim=4)
    with pytest.raises(ScopeRequiredError):
        store.bm25_search("q", scopes=[], top_k=5)
    with pytest.raises(ScopeRequiredError):
        store.list_documents(scopes=[""])
    with pytest.raises(ScopeRequiredError):
        ScopedElasticsearchEmbeddingRetriever(store).run(query_embedding=[1.0, 0, 0, 0], scopes=[])
    with pytest.raises(ValueError, match="dimensions"):
        store.embedding_search([1.0, 0.0], scopes=["local"], top_k=5)
    bad = Document(id="a:00000", content="x", meta={"scope": "local", "doc_id": "a"}, embedding=[0.1] * 3)
    with pytest.raises(ValueError, match="4"):
        store.replace_document([bad], scope="local")
    with pytest.raises(ValueError, match="scope"):
        store.replace_document(
            [Document(id="a:00000", content="x", meta={"scope": "slack:T:C", "doc_id": "a"})],
            scope="local",
        )


class _FakeElasticsearch:
    """A local server answering as Elasticsearch 8 does, for what the term look-up sends: the index exists, and each
    ``_msearch`` line pair gets the next scripted response. It keeps every request it was sent.

    ``created_elsewhere``: the first look at an index says it is missing and the first ``PUT`` (its create) is
    answered with that status and body, as when another replica creates it in between; later looks find it."""

    def __init__(
        self, responses: list[dict[str, object]], *, created_elsewhere: tuple[int, dict[str, object]] | None = None
    ) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        fake = self
        self.requests: list[tuple[str, str, str]] = []
        self.responses = responses
        self.missing = created_elsewhere is not None
        self.refusal = created_elsewhere

        class Handler(BaseHTTPRequestHandler):
            def _send(self, code: int, body: object | None) -> None:
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(code)
                self.send_header("X-Elastic-Product", "Elasticsearch")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def do_HEAD(self) -> None:
                fake.requests.append(("HEAD", self.path, ""))
                missing, fake.missing = fake.missing, False
                self._send(404 if missing else 200, None)

            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                fake.requests.append(("PUT", self.path, body))
                refusal, fake.refusal = fake.refusal, None
                self._send(*(refusal or (200, {"acknowledged": True})))

            def do_GET(self) -> None:
                fake.requests.append(("GET", self.path, ""))
                self._send(200, {"version": {"number": "8.15.0"}, "tagline": "You Know, for Search"})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                fake.requests.append(("POST", self.path, body))
                n = len([line for line in body.splitlines() if line.strip()]) // 2
                self._send(200, {"took": 1, "responses": fake.responses[:n]})

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        import threading

        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _hits(*scopes: str) -> dict[str, object]:
    return {"status": 200, "hits": {"hits": [{"_id": f"x{i}", "_source": {"scope": s}} for i, s in enumerate(scopes)]}}


class TestTermLookUps:
    def test_all_queries_go_in_one_msearch_each_bounded_by_the_asked_scopes_and_filters(self) -> None:
        fake = _FakeElasticsearch([_hits("slack:T1:C1"), _hits(), _hits(), _hits("slack:T1:C9")])
        try:
            store = CitebotElasticsearchStore(hosts=fake.url, index="chunks", embedding_dim=4)
            only_a = {"field": "meta.file_name", "operator": "==", "value": "a.pdf"}
            found = store.bm25_matches_each(["leave", "osprey", "?!", "march", "  "], scopes=["slack:T1:C1"],
                                            filters=only_a)
            msearch = [r for r in fake.requests if r[0] == "POST"]
            assert len(msearch) == 1 and msearch[0][1].startswith("/_msearch")
            lines = [json.loads(line) for line in msearch[0][2].splitlines() if line.strip()]
            headers, bodies = lines[0::2], lines[1::2]
            assert all(h == {"index": "chunks"} for h in headers)
            sent = [b["query"]["bool"]["must"][0]["multi_match"] for b in bodies]
            assert [m["query"] for m in sent] == ["leave", "osprey", "?!", "march"]  # a blank query is not sent
            assert {m["fuzziness"] for m in sent} == {"0"}  # as the BM25 retriever searches
            for b in bodies:
                flt = json.dumps(b["query"]["bool"]["filter"])
                assert '"scope": ["slack:T1:C1"]' in flt and '"file_name": "a.pdf"' in flt, flt
                assert b["size"] == 1
            # a hit of another scope (which a server that ignored the filter might send) is not support
            assert found == {"leave": True, "osprey": False, "?!": False, "march": False, "  ": False}
        finally:
            fake.close()

    def test_a_failed_look_up_fails_the_call_as_a_failed_search_does(self) -> None:
        failed = {"status": 500, "error": {"type": "search_phase_execution_exception"}}
        fake = _FakeElasticsearch([_hits("local"), failed])
        try:
            store = CitebotElasticsearchStore(hosts=fake.url, index="chunks", embedding_dim=4)
            with pytest.raises(StoreError, match="term look-up"):
                store.bm25_matches_each(["leave", "osprey"], scopes=["local"])
            with pytest.raises(ScopeRequiredError):
                store.bm25_matches_each(["leave"], scopes=[])
        finally:
            fake.close()


def _create_refused(error_type: str, reason: str) -> tuple[int, dict[str, object]]:
    error = {"type": error_type, "reason": reason, "index": "chunks"}
    return 400, {"error": {**error, "root_cause": [error]}, "status": 400}


class TestIndexCreatedByAnotherReplica:
    """Two replicas starting together both find the index missing and both create it; the one that loses is told
    ``resource_already_exists_exception``, by the error's type, which the store reads (never the message's text)."""

    def test_the_store_takes_the_other_replicas_index(self) -> None:
        fake = _FakeElasticsearch([], created_elsewhere=_create_refused(
            "resource_already_exists_exception", "index [chunks/Xy1] already exists"))
        try:
            store = CitebotElasticsearchStore(hosts=fake.url, index="chunks", embedding_dim=4)
            assert store.client is not None
            assert [r[:2] for r in fake.requests if r[0] == "PUT"] == [("PUT", "/chunks")]
        finally:
            fake.close()

    def test_another_refusal_fails_even_when_its_text_names_that_error(self) -> None:
        fake = _FakeElasticsearch([], created_elsewhere=_create_refused(
            "mapper_parsing_exception", "unknown parameter [resource_already_exists_exception]"))
        try:
            store = CitebotElasticsearchStore(hosts=fake.url, index="chunks", embedding_dim=4)
            with pytest.raises(StoreError, match="BadRequestError"):
                store.client  # noqa: B018 - creating the index is what is tested
        finally:
            fake.close()

    def test_the_chat_state_takes_the_other_replicas_index(self) -> None:
        from connectors.elasticsearch_state import ElasticsearchState

        fake = _FakeElasticsearch([], created_elsewhere=_create_refused(
            "resource_already_exists_exception", "index [citebot-state-work/Xy1] already exists"))
        try:
            state = ElasticsearchState(hosts=fake.url)
            assert state.es is not None
            creates = [r[1] for r in fake.requests if r[0] == "PUT" and not r[1].endswith("/_mapping")]
            assert len(creates) == 1  # the first index; the others were found, and their mappings brought up to date
        finally:
            fake.close()

    def test_another_refusal_fails_the_chat_state_with_a_state_error(self) -> None:
        from connectors.elasticsearch_state import ElasticsearchState
        from connectors.state_api import StateError

        fake = _FakeElasticsearch([], created_elsewhere=_create_refused(
            "mapper_parsing_exception", "unknown parameter [resource_already_exists_exception]"))
        try:
            with pytest.raises(StateError, match="BadRequestError"):
                ElasticsearchState(hosts=fake.url).es  # noqa: B018 - creating the indices is what is tested
        finally:
            fake.close()
