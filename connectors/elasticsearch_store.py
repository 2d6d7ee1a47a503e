"""The production document store: Elasticsearch 8 through elasticsearch-haystack, with Citebot's scoping.

``CitebotElasticsearchStore`` wraps elasticsearch-haystack's ``ElasticsearchDocumentStore`` on an index with
an explicit mapping (``dense_vector`` of the model's dimension with cosine similarity, keyword metadata,
integer pages, text content) and implements the same :class:`~connectors.store_api.ChunkStore` contract as
the embedded SQLite store. Its BM25 and kNN retrievers are the integration's own, always given the scope
filter at run time; the query pipeline fuses them client-side (``ScoreFusion``: weighted scores, or Haystack's
``DocumentJoiner`` reciprocal rank fusion, as ``CITEBOT_FUSION`` says; Elasticsearch's own RRF needs a paid licence).

Visibility: the index is created with ``refresh_interval: -1`` and every write refreshes explicitly once it
is complete, so a reader sees a document's chunks all at once. ``replace_document`` writes the new chunks,
deletes the older versions of the file, and only then refreshes: readers switch from the old version to the
new one in one step. If anything fails midway, the chunks written so far are removed and overwritten ones
restored before the error is raised.

Scores: BM25 scores are Elasticsearch's; embedding scores are turned back into the cosine similarity
(Elasticsearch reports ``(1 + cos) / 2``), the same scale as the SQLite store.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.document_stores.errors import DocumentStoreError, DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy
from haystack.utils import Secret

from connectors.elasticsearch_client import index_exists_already, redact_url, tls_options
from connectors.log import get_logger
from connectors.scoped_retrievers import ScopedBM25Retriever, ScopedEmbeddingRetriever
from connectors.settings import Settings
from connectors.store_api import DocInfo, DocumentVectors, StoreError, require_scopes, scope_filter

log = get_logger(__name__)

_KEYWORD_FIELDS = (
    "id",
    "scope",
    "doc_id",
    "file_name",
    "section",
    "section_id",
    "element_type",
    "label",
    "sha256",
    "uploaded_by",
    "source_url",
    # ISO-8601 UTC strings: as keywords they sort and compare chronologically, and an empty value can't
    # make a whole document fail to index the way it would on a `date` field.
    "uploaded_at",
    # what the document says it is (pipelines/components/document_identity.py)
    "doc_issuer",
    "doc_form",
    "doc_period",
    "doc_title",
)
_INTEGER_FIELDS = ("page_start", "page_end", "chunk_index", "doc_year", "doc_quarter")


# ``Settings.vectors`` as Elasticsearch quantises an HNSW index's vectors: bbq (better binary quantisation: a bit a
# dimension, rescored), int8, or none. Elasticsearch keeps the float32 vectors beside them, as the embedded store does.
INDEX_OPTIONS = {"binary": "bbq_hnsw", "int8": "int8_hnsw", "float32": "hnsw"}
_BBQ_MIN_DIMS = 64  # Elasticsearch refuses bbq below this; int8 stands in for it there (small test models)


# BM25 matches words as written: its search and the term look-ups of bm25_matches_each send the same query
_BM25_FUZZINESS = "0"


def chunk_mapping(embedding_dim: int, vectors: str = "binary") -> dict[str, Any]:
    """The index mapping: the chunk-metadata contract of ``pipelines.models``, other strings as keywords, and the
    vectors quantised as ``vectors`` says (:data:`INDEX_OPTIONS`)."""
    if vectors not in INDEX_OPTIONS:
        raise ValueError(f"vectors must be one of {', '.join(INDEX_OPTIONS)}")
    props: dict[str, Any] = {
        "content": {"type": "text"},
        "embedding": {"type": "dense_vector", "dims": embedding_dim, "index": True, "similarity": "cosine",
                      "index_options": {"type": INDEX_OPTIONS[
                          "int8" if vectors == "binary" and embedding_dim < _BBQ_MIN_DIMS else vectors]}},
        "ocr_confidence": {"type": "float"},
    }
    props.update({f: {"type": "keyword"} for f in _KEYWORD_FIELDS})
    props.update({f: {"type": "integer"} for f in _INTEGER_FIELDS})
    return {
        "properties": props,
        "dynamic_templates": [
            {"strings": {"path_match": "*", "match_mapping_type": "string", "mapping": {"type": "keyword"}}}
        ],
    }


def _secret_from_settings(value: Any, env_var: str) -> Secret | None:
    """A Haystack Secret for a settings SecretStr: by env var name when it came from the environment (so
    ``to_dict`` can save it), else as a token (never serialised)."""
    if value is None:
        return None
    if os.environ.get(env_var):
        return Secret.from_env_var(env_var)
    return Secret.from_token(value.get_secret_value())


class CitebotElasticsearchStore:
    """Haystack ``DocumentStore`` + Citebot ``ChunkStore`` on one Elasticsearch index."""

    def __init__(
        self,
        *,
        hosts: str,
        index: str = "citebot-chunks",
        embedding_dim: int = 384,
        api_key: Secret | None = None,
        username: str | None = None,
        password: Secret | None = None,
        request_timeout: float = 30.0,
        ca_certs: str | None = None,
        vectors: str = "binary",
    ) -> None:
        from haystack_integrations.components.retrievers.elasticsearch import (
            ElasticsearchBM25Retriever,
            ElasticsearchEmbeddingRetriever,
        )
        from haystack_integrations.document_stores.elasticsearch import ElasticsearchDocumentStore

        if not hosts or not hosts.startswith(("http://", "https://")):
            raise ValueError("hosts must be an http:// or https:// URL (CITEBOT_ELASTICSEARCH_URL)")
        if embedding_dim <= 0:
            raise ValueError("embedding_dim must be positive")
        if request_timeout <= 0:
            raise ValueError("request_timeout must be positive")
        if vectors not in INDEX_OPTIONS:
            raise ValueError(f"vectors must be one of {', '.join(INDEX_OPTIONS)} (CITEBOT_VECTORS)")
        if (username is None) != (password is None):
            raise ValueError("set both CITEBOT_ELASTICSEARCH_USERNAME and CITEBOT_ELASTICSEARCH_PASSWORD, or neither")
        self.hosts = hosts
        self.index = index
        self.embedding_dim = embedding_dim
        self.api_key = api_key
        self.username = username
        self.password = password
        self.request_timeout = request_timeout
        self.ca_certs = ca_certs
        self.vectors = vectors
        client_kwargs: dict[str, Any] = {"request_timeout": request_timeout, **tls_options(hosts, ca_certs)}
        if username is not None and password is not None:
            client_kwargs["basic_auth"] = (username, password.resolve_value())
        self.document_store = ElasticsearchDocumentStore(
            hosts=hosts,
            index=index,
            custom_mapping=chunk_mapping(embedding_dim, vectors),
            api_key=api_key,
            api_key_id=None,
            embedding_similarity_function="cosine",
            **client_kwargs,
        )
        self._bm25 = ElasticsearchBM25Retriever(document_store=self.document_store, fuzziness=_BM25_FUZZINESS,
                                                 top_k=20)
        self._knn = ElasticsearchEmbeddingRetriever(document_store=self.document_store, top_k=20)
        self._index_ready = False

    @classmethod
    def from_settings(cls, settings: Settings) -> CitebotElasticsearchStore:
        if not settings.elasticsearch_url:
            raise ValueError("CITEBOT_ELASTICSEARCH_URL is not set")
        return cls(
            hosts=settings.elasticsearch_url,
            index=settings.elasticsearch_index,
            embedding_dim=settings.embedding_dim,
            api_key=_secret_from_settings(settings.elasticsearch_api_key, "CITEBOT_ELASTICSEARCH_API_KEY"),
            username=settings.elasticsearch_username,
            password=_secret_from_settings(settings.elasticsearch_password, "CITEBOT_ELASTICSEARCH_PASSWORD"),
            ca_certs=str(settings.elasticsearch_ca_certs) if settings.elasticsearch_ca_certs else None,
            vectors=settings.vectors,
        )

    # --- serialisation -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            hosts=self.hosts,
            index=self.index,
            embedding_dim=self.embedding_dim,
            api_key=self.api_key.to_dict() if self.api_key is not None else None,
            username=self.username,
            password=self.password.to_dict() if self.password is not None else None,
            request_timeout=self.request_timeout,
            ca_certs=self.ca_certs,
            vectors=self.vectors,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CitebotElasticsearchStore:
        params = dict(data.get("init_parameters", {}))
        for key in ("api_key", "password"):
            if isinstance(params.get(key), dict):
                params[key] = Secret.from_dict(params[key])
        return default_from_dict(cls, {**data, "init_parameters": params})

    # --- client ----------------------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The Elasticsearch client; creates the index with our settings and mapping on first use."""
        if not self._index_ready:
            self._guard(self._create_index)
            self._index_ready = True
        return self.document_store.client

    def _create_index(self) -> None:
        from elasticsearch import BadRequestError, Elasticsearch

        raw = Elasticsearch(
            self.hosts,
            api_key=self.api_key.resolve_value() if self.api_key is not None else None,
            basic_auth=(self.username, self.password.resolve_value() or "")
            if self.username is not None and self.password is not None
            else None,
            request_timeout=self.request_timeout,
            **tls_options(self.hosts, self.ca_certs),
        )
        try:
            if not raw.indices.exists(index=self.index):
                raw.indices.create(
                    index=self.index,
                    mappings=chunk_mapping(self.embedding_dim, self.vectors),
                    settings={"refresh_interval": "-1"},
                )
        except BadRequestError as e:
            if not index_exists_already(e):  # else another replica created it first
                raise
        finally:
            raw.close()

    def _guard(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn``; turn connection and server errors into a StoreError that says, in one line, which URL
        (without credentials) and what to check."""
        from elasticsearch import ApiError, AuthenticationException, AuthorizationException, TransportError
        from elasticsearch import ConnectionError as EsConnectionError

        url = redact_url(self.hosts)
        try:
            return fn(*args, **kwargs)
        except EsConnectionError as e:
            raise StoreError(
                f"cannot reach Elasticsearch at {url}: check that it is running and that CITEBOT_ELASTICSEARCH_URL "
                "is right (host, port, http or https)"
            ) from e
        except (AuthenticationException, AuthorizationException) as e:
            raise StoreError(
                f"Elasticsearch at {url} refused the credentials: check CITEBOT_ELASTICSEARCH_API_KEY, or "
                "CITEBOT_ELASTICSEARCH_USERNAME and CITEBOT_ELASTICSEARCH_PASSWORD"
            ) from e
        except (TransportError, ApiError) as e:
            raise StoreError(
                f"Elasticsearch at {url} failed ({type(e).__name__}); check that it is running and that "
                "CITEBOT_ELASTICSEARCH_URL and its credentials are right"
            ) from e

    def refresh(self) -> None:
        self._guard(self.client.indices.refresh, index=self.index)

    def drop_index(self) -> None:
        """Delete the whole index (tests and admin only)."""
        self._guard(self.client.indices.delete, index=self.index, ignore_unavailable=True)
        self._index_ready = False

    def close(self) -> None:
        self.document_store.close()

    # --- Haystack DocumentStore protocol -----------------------------------------------------------
    def count_documents(self) -> int:
        _ = self.client
        return int(self._guard(self.document_store.count_documents))

    def filter_documents(self, filters: dict[str, Any] | None = None) -> list[Document]:
        _ = self.client
        return list(self._guard(self.document_store.filter_documents, filters))

    def write_documents(self, documents: list[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE) -> int:
        docs = self._validate(documents)
        _ = self.client
        try:
            n = self._guard(self.document_store.write_documents, docs, policy=policy, refresh=False)
        finally:
            self.refresh()
        return int(n)

    def delete_documents(self, document_ids: list[str]) -> None:
        if not document_ids:
            return
        _ = self.client
        self._guard(self.document_store.delete_documents, list(document_ids), refresh=True)

    # --- ChunkStore ----------------------------------------------------------------------------------
    def replace_document(
        self, documents: list[Document], *, scope: str, replaces: Sequence[str] = ()
    ) -> list[str]:
        (scope,) = require_scopes([scope])
        docs = self._validate(documents)
        ids = [d.id for d in docs]
        if len(set(ids)) != len(ids):
            raise DuplicateDocumentError("a chunk id appears twice in the document")
        for d in docs:
            if d.meta.get("scope", scope) != scope:
                raise ValueError(f"chunk {d.id} has scope {d.meta.get('scope')!r}, expected {scope!r}")
        docs = [d if d.meta.get("scope") == scope else replace(d, meta={**d.meta, "scope": scope}) for d in docs]
        new_doc_ids = sorted({str(d.meta["doc_id"]) for d in docs if d.meta.get("doc_id")})
        client = self.client

        # Chunks that exist already: another scope's are never taken over; ours are kept to restore on failure.
        existing: dict[str, dict[str, Any]] = {}
        for batch in _batches(ids, 500):
            res = self._guard(client.mget, index=self.index, ids=batch)
            for hit in res["docs"]:
                if hit.get("found"):
                    existing[hit["_id"]] = hit["_source"]
        foreign = [i for i, src in existing.items() if src.get("scope") != scope]
        if foreign:
            raise DuplicateDocumentError(f"{len(foreign)} chunk id(s) belong to another scope, e.g. {foreign[0]}")
        # the versions the service decided this one replaces (store_api), and earlier chunks of this doc_id
        old_doc_ids = self._doc_ids_in(scope, sorted(set(replaces) - set(new_doc_ids)))

        try:
            self.document_store.write_documents(docs, policy=DuplicatePolicy.OVERWRITE, refresh=False)
            stale = {
                "bool": {
                    "filter": [{"term": {"scope": scope}}],
                    "should": [
                        {"terms": {"doc_id": sorted(set(old_doc_ids) | set(new_doc_ids))}},
                    ],
                    "minimum_should_match": 1,
                    "must_not": [{"ids": {"values": ids}}],
                }
            }
            self._guard(
                client.delete_by_query, index=self.index, query=stale, refresh=False, conflicts="proceed", slices=1
            )
        except Exception as e:
            self._undo(ids, existing)
            if isinstance(e, (StoreError, DuplicateDocumentError, ValueError)):
                raise
            raise StoreError("writing a document to Elasticsearch failed; nothing was changed") from e
        self.refresh()
        replaced = [d for d in dict.fromkeys(replaces) if d in set(old_doc_ids)]
        log.debug("store_replace_document", scope=scope, chunks=len(docs), replaced=len(replaced))
        return replaced

    def _undo(self, ids: list[str], existing: dict[str, dict[str, Any]]) -> None:
        """Remove the chunks a failed replace wrote and put back the ones it overwrote."""
        from elasticsearch import helpers

        client = self.document_store.client
        actions: list[dict[str, Any]] = [
            {"_op_type": "delete", "_index": self.index, "_id": i} for i in ids if i not in existing
        ]
        actions += [
            {"_op_type": "index", "_index": self.index, "_id": i, "_source": src} for i, src in existing.items()
        ]
        try:
            helpers.bulk(client, actions, refresh=True, raise_on_error=False)
        except Exception as e:  # noqa: BLE001 - the original error is the one to raise
            log.error("store_undo_failed", chunks=len(actions), error=type(e).__name__)  # noqa: TRY400

    def _doc_ids_in(self, scope: str, doc_ids: list[str]) -> list[str]:
        """Those of ``doc_ids`` that have chunks in ``scope``."""
        if not doc_ids:
            return []
        query = {"bool": {"filter": [{"term": {"scope": scope}}, {"terms": {"doc_id": doc_ids}}]}}
        return [b["key"]["doc_id"] for b in self._composite(query, [{"doc_id": {"terms": {"field": "doc_id"}}}])]

    def has_document(self, doc_id: str, *, scope: str) -> bool:
        (scope,) = require_scopes([scope])
        query = {"bool": {"filter": [{"term": {"scope": scope}}, {"term": {"doc_id": doc_id}}]}}
        return int(self._guard(self.client.count, index=self.index, query=query)["count"]) > 0

    def delete_document(self, doc_id: str, *, scopes: Sequence[str]) -> int:
        scopes = require_scopes(scopes)
        query = {"bool": {"filter": [{"terms": {"scope": list(scopes)}}, {"term": {"doc_id": doc_id}}]}}
        res = self._guard(self.client.delete_by_query, index=self.index, query=query, refresh=True, conflicts="proceed")
        return int(res.get("deleted", 0))

    def list_documents(self, *, scopes: Sequence[str]) -> list[DocInfo]:
        scopes = require_scopes(scopes)
        query = {"bool": {"filter": [{"terms": {"scope": list(scopes)}}]}}
        sub_aggs = {
            "file": {"terms": {"field": "file_name", "size": 1}},
            "page_end": {"max": {"field": "page_end"}},
            "page_start": {"max": {"field": "page_start"}},
            "uploaded_at": {"terms": {"field": "uploaded_at", "size": 1, "order": {"_key": "desc"}}},
            "uploaded_by": {"terms": {"field": "uploaded_by", "size": 1}},
            "sha256": {"terms": {"field": "sha256", "size": 1}},
            "source_url": {"terms": {"field": "source_url", "size": 1}},
            **{f: {"terms": {"field": f, "size": 1}} for f in ("doc_issuer", "doc_form", "doc_period", "doc_title")},
            "doc_year": {"max": {"field": "doc_year"}},
            "doc_quarter": {"max": {"field": "doc_quarter"}},
        }
        sources = [{"scope": {"terms": {"field": "scope"}}}, {"doc_id": {"terms": {"field": "doc_id"}}}]
        docs = []
        for b in self._composite(query, sources, sub_aggs):
            pages = b["page_end"]["value"] or b["page_start"]["value"] or 0
            docs.append(
                DocInfo(
                    doc_id=b["key"]["doc_id"],
                    scope=b["key"]["scope"],
                    file=_top(b["file"]),
                    pages=int(pages),
                    chunks=int(b["doc_count"]),
                    uploaded_at=_top(b["uploaded_at"]),
                    uploaded_by=_top(b["uploaded_by"]),
                    sha256=_top(b["sha256"]),
                    source_url=_top(b["source_url"]),
                    issuer=_top(b["doc_issuer"]),
                    form=_top(b["doc_form"]),
                    period=_top(b["doc_period"]),
                    year=_max_int(b["doc_year"]),
                    quarter=_max_int(b["doc_quarter"]),
                    title=_top(b["doc_title"]),
                )
            )
        docs.sort(key=lambda d: (d.file.lower(), d.uploaded_at, d.doc_id))
        return docs

    def _composite(
        self, query: dict[str, Any], sources: list[dict[str, Any]], sub_aggs: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Every bucket of a composite aggregation, page by page."""
        buckets: list[dict[str, Any]] = []
        after: dict[str, Any] | None = None
        while True:
            comp: dict[str, Any] = {"size": 1000, "sources": sources}
            if after is not None:
                comp["after"] = after
            agg: dict[str, Any] = {"composite": comp}
            if sub_aggs:
                agg["aggs"] = sub_aggs
            res = self._guard(self.client.search, index=self.index, query=query, size=0, aggs={"c": agg})
            page = res["aggregations"]["c"]
            buckets.extend(page["buckets"])
            after = page.get("after_key")
            if not page["buckets"] or after is None:
                return buckets

    def count_in_scopes(self, scopes: Sequence[str]) -> int | None:
        """Not counted: a count right after a write may not see it yet (refresh), so callers keep to their TTL."""
        require_scopes(scopes)
        return None

    def fetch(
        self,
        *,
        scopes: Sequence[str],
        filters: dict[str, Any] | None = None,
        limit: int = 200,
        return_embedding: bool = False,
    ) -> list[Document]:
        from haystack_integrations.document_stores.elasticsearch.filters import _normalize_filters

        scopes = require_scopes(scopes)
        if limit <= 0:
            return []
        query = {"bool": {"filter": _normalize_filters(scope_filter(scopes, filters))}}
        source: Any = True if return_embedding else {"excludes": ["embedding"]}
        sort = [{"doc_id": "asc"}, {"chunk_index": {"order": "asc", "missing": "_last"}}, {"id": "asc"}]
        docs: list[Document] = []
        after: list[Any] | None = None
        while len(docs) < limit:  # pages of up to 1,000 chunks, resumed with search_after
            page: dict[str, Any] = {"size": min(1000, int(limit) - len(docs)), "sort": sort}
            if after is not None:
                page["search_after"] = after
            res = self._guard(self.client.search, index=self.index, query=query, source=source, **page)
            hits = res["hits"]["hits"]
            docs.extend(self._to_doc(hit, score=None) for hit in hits)
            if len(hits) < page["size"]:
                break
            after = hits[-1]["sort"]
        return docs

    def document_vectors(self, doc_id: str, *, scope: str, limit: int = 20_000) -> DocumentVectors:
        """One document's chunks with their vectors as one matrix, for page ranking: the chunks come back with their
        embeddings in the one sorted search ``fetch`` makes (the vectors are part of each hit's source)."""
        (scope,) = require_scopes([scope])
        chunks = self.fetch(scopes=[scope], filters={"field": "meta.doc_id", "operator": "==", "value": doc_id},
                            limit=limit, return_embedding=True)
        return DocumentVectors.from_documents(chunks, self.embedding_dim or 0)

    def embedding_fingerprint(self) -> str | None:
        """The fingerprint of the model and backend the stored vectors were made with, kept in the index
        mapping's ``_meta`` (None: not recorded)."""
        mapping = self._guard(self.client.indices.get_mapping, index=self.index)
        body = dict(mapping).get(self.index, {}) if mapping is not None else {}
        value = (body.get("mappings", {}).get("_meta") or {}).get("citebot_embedding_fingerprint")
        return str(value) if value else None

    def set_embedding_fingerprint(self, fingerprint: str) -> None:
        self._guard(self.client.indices.put_mapping, index=self.index,
                    meta={"citebot_embedding_fingerprint": fingerprint})

    def all_scopes(self) -> list[str]:
        buckets = self._composite({"match_all": {}}, [{"scope": {"terms": {"field": "scope"}}}])
        return sorted(b["key"]["scope"] for b in buckets if b["key"]["scope"])

    # --- search ----------------------------------------------------------------------------------------
    def bm25_search(
        self,
        query: str,
        *,
        scopes: Sequence[str],
        top_k: int,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]:
        scopes = require_scopes(scopes)
        if top_k <= 0 or not (query or "").strip():
            return []
        _ = self.client
        out = self._guard(self._bm25.run, query=query, filters=scope_filter(scopes, filters), top_k=int(top_k))
        return [self._light(d, return_embedding) for d in out["documents"] if d.meta.get("scope") in scopes]

    def bm25_matches(self, query: str, *, scopes: Sequence[str], filters: dict[str, Any] | None = None) -> bool:
        """Whether :meth:`bm25_search` finds anything (Elasticsearch ranks one hit as cheaply as it counts)."""
        return bool(self.bm25_search(query, scopes=scopes, top_k=1, filters=filters))

    def bm25_matches_each(
        self, queries: Sequence[str], *, scopes: Sequence[str], filters: dict[str, Any] | None = None
    ) -> dict[str, bool]:
        """:meth:`bm25_matches` of each of ``queries``, in one ``_msearch``: per query the body the BM25
        retriever sends (``multi_match``, fuzziness "0", the scope filter AND ``filters``), one hit, its scope
        checked as :meth:`bm25_search` checks it."""
        from haystack_integrations.document_stores.elasticsearch.filters import _normalize_filters

        scopes = require_scopes(scopes)
        found = dict.fromkeys(queries, False)
        asked = [q for q in found if (q or "").strip()]
        if not asked:
            return found
        flt = _normalize_filters(scope_filter(scopes, filters))
        searches: list[dict[str, Any]] = []
        for q in asked:
            match = {"multi_match": {"query": q, "fuzziness": _BM25_FUZZINESS, "type": "most_fields",
                                     "operator": "OR"}}
            searches += [{"index": self.index}, {"size": 1, "_source": ["scope"], "track_total_hits": False,
                                                 "query": {"bool": {"must": [match], "filter": flt}}}]
        _ = self.client
        res = self._guard(self.client.msearch, searches=searches)
        for q, r in zip(asked, res["responses"], strict=True):
            if "error" in r:  # one failed search fails the call, as the per-query search raises
                raise StoreError(f"Elasticsearch at {redact_url(self.hosts)} failed a term look-up; check that it "
                                 "is running and that the index is healthy")
            found[q] = any(h.get("_source", {}).get("scope") in scopes for h in r["hits"]["hits"])
        return found

    def embedding_search(
        self,
        embedding: Sequence[float],
        *,
        scopes: Sequence[str],
        top_k: int,
        filters: dict[str, Any] | None = None,
        return_embedding: bool = False,
    ) -> list[Document]:
        scopes = require_scopes(scopes)
        if top_k <= 0:
            return []
        vec = [float(x) for x in embedding]
        if len(vec) != self.embedding_dim:
            raise ValueError(f"query embedding has {len(vec)} dimensions, the index holds {self.embedding_dim}")
        if not all(math.isfinite(x) for x in vec):
            raise ValueError("query embedding contains NaN or infinity")
        _ = self.client
        out = self._guard(self._knn.run, query_embedding=vec, filters=scope_filter(scopes, filters), top_k=int(top_k))
        docs = []
        for d in out["documents"]:
            if d.meta.get("scope") not in scopes:
                continue
            cos = 2.0 * float(d.score) - 1.0 if d.score is not None else None
            docs.append(replace(self._light(d, return_embedding), score=cos))
        return docs

    # --- internals ---------------------------------------------------------------------------------------
    def _validate(self, documents: Any) -> list[Document]:
        if not isinstance(documents, list):
            raise ValueError("write_documents expects a list of Documents")  # noqa: TRY004 (Haystack protocol)
        for d in documents:
            if not isinstance(d, Document):
                raise ValueError(f"write_documents expects Documents, got {type(d).__name__}")  # noqa: TRY004
            if d.embedding is not None:
                if len(d.embedding) != self.embedding_dim:
                    raise ValueError(
                        f"document {d.id} has a {len(d.embedding)}-dimensional embedding; "
                        f"the index holds {self.embedding_dim}"
                    )
                if not all(math.isfinite(float(x)) for x in d.embedding):
                    raise ValueError(f"document {d.id} has an embedding with NaN or infinity")
        return documents

    @staticmethod
    def _light(doc: Document, return_embedding: bool) -> Document:
        return doc if return_embedding or doc.embedding is None else replace(doc, embedding=None)

    def _to_doc(self, hit: dict[str, Any], score: float | None) -> Document:
        data = dict(hit["_source"])
        data["score"] = score
        return Document.from_dict(data)


def _top(terms_agg: dict[str, Any]) -> str:
    buckets = terms_agg.get("buckets") or []
    return str(buckets[0]["key"]) if buckets else ""


def _max_int(max_agg: dict[str, Any]) -> int | None:
    value = max_agg.get("value")
    return int(value) if value is not None else None


def _batches(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


# --------------------------------------------------------------------------------------------------
# Scoped retrievers: the integration's retrievers, always filtered by scope at run time
# --------------------------------------------------------------------------------------------------
@component
class ScopedElasticsearchBM25Retriever(ScopedBM25Retriever):
    """BM25 over the Elasticsearch store's chunks of the given scopes."""

    store_class = CitebotElasticsearchStore


@component
class ScopedElasticsearchEmbeddingRetriever(ScopedEmbeddingRetriever):
    """Cosine kNN over the Elasticsearch store's chunks of the given scopes."""

    store_class = CitebotElasticsearchStore


__all__ = [
    "CitebotElasticsearchStore",
    "DocumentStoreError",
    "ScopedElasticsearchBM25Retriever",
    "ScopedElasticsearchEmbeddingRetriever",
    "chunk_mapping",
]

