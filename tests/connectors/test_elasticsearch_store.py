"""The Elasticsearch store's parts that need no server: choice of store, mapping, secrets, errors, scopes.
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
