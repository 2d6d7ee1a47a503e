"""Chat state on Elasticsearch, for any number of bot replicas: the ``citebot-state-*`` indices.

Chosen by ``connectors.stores.open_state`` when ``CITEBOT_ELASTICSEARCH_URL`` is set; the same
:class:`~connectors.state_api.ChatState` contract as the SQLite :class:`~connectors.state_log.StateLog`.

=========================  ============================================  =====================================
index                      document id                                   holds
=========================  ============================================  =====================================
``{prefix}-work``          the work item's key                           the work journal
``{prefix}-answers``       platform + message ref                        posted answers (thread history)
``{prefix}-feedback``      platform + message ref + user                 one vote per person and answer
``{prefix}-uploads``       platform + file ref + scope                   which document a platform file became
``{prefix}-threads``       platform + thread ref                         assistant-pane thread contexts
=========================  ============================================  =====================================

How a work item stays exclusive across replicas: the first accept writes it with ``op_type=create`` under its
key's deterministic id, which Elasticsearch accepts exactly once (the others get 409). Taking it (or taking over
one whose lease ran out) is a write conditioned on the ``_seq_no``/``_primary_term`` the taker read (optimistic
concurrency), so of several replicas taking the same item exactly one succeeds. Both are decided on the primary
shard. Writes that other replicas must find by search (the journal, answers for thread history, votes, uploads)
use ``refresh=wait_for``; reads by id (``find_answer``, a work item, a thread context) are real-time. A
``{prefix}-claims`` index left by a version before the journal carried Teams' quick replies is no longer read; it
may be deleted.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from connectors.elasticsearch_client import index_exists_already, redact_url, tls_options
from connectors.metrics import record_claim_taken_over
from connectors.settings import Settings
from connectors.state_api import (
    ACCEPT_WITHIN_S,
    PRUNE_EVERY_S,
    WORK_TTL_S,
    AnswerRecord,
    FeedbackEntry,
    Polarity,
    PostedAnswer,
    QueueFull,
    RecordedAnswer,
    StateError,
    ThreadTurn,
    WorkItem,
    WorkState,
)

_KW = {"type": "keyword"}
# Only what is searched or sorted on is mapped; everything else stays in _source (dynamic: false).
MAPPINGS: dict[str, dict[str, Any]] = {
    "answers": {
        "dynamic": False,
        "properties": {"platform": _KW, "thread_ref": _KW, "message_ref": _KW, "at": {"type": "date"},
                       "seq": {"type": "long"}},
    },
    "feedback": {
        "dynamic": False,
        "properties": {"platform": _KW, "message_ref": _KW, "user": _KW, "polarity": _KW, "retracted": {
            "type": "boolean"}, "at": {"type": "date"}, "seq": {"type": "long"}},
    },
    "uploads": {
        "dynamic": False,
        "properties": {"platform": _KW, "file_ref": _KW, "scope": _KW, "doc_id": _KW},
    },
    "threads": {"dynamic": False, "properties": {"platform": _KW, "thread_ref": _KW, "at": {"type": "date"}}},
    "work": {
        "dynamic": False,
        "properties": {"kind": _KW, "state": _KW, "lease_until": {"type": "double"}, "created": {"type": "double"},
                       "updated": {"type": "double"}, "who": _KW, "tenant": _KW, "taken_at": {"type": "double"}},
    },
}
_MAX_ID_BYTES = 200  # Elasticsearch allows 512; longer keys (Teams conversation ids) are hashed
_CAS_ATTEMPTS = 8
_FAIR_WINDOW = 200  # waiting items a take orders in turns (the oldest); beyond them, oldest first


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def doc_id(*parts: str) -> str:
    """A deterministic document id for ``parts`` (readable when short, a hash when long)."""
    raw = "|".join(parts)
    if len(raw.encode()) <= _MAX_ID_BYTES and not any("|" in p for p in parts) and not raw.startswith("h:"):
        return raw
    return "h:" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


class ElasticsearchState:
    """Thread-safe (the Elasticsearch client is); share one per process."""

    def __init__(
        self,
        *,
        hosts: str,
        prefix: str = "citebot-state",
        api_key: str | None = None,
        username: str | None = None,
        password: str | None = None,
        request_timeout: float = 30.0,
        ca_certs: str | None = None,
        clock: Callable[[], float] = time.time,
        host: str | None = None,
        retention_days: float = 0,
    ) -> None:
        """``clock`` and ``host`` (default: this machine's name) exist for tests of lease take-over;
        ``retention_days`` (0: forever) is how long answers, votes and assistant threads are kept."""
        if retention_days < 0:
            raise ValueError("retention_days must be 0 (keep forever) or more")
        self.retention_days = retention_days
        if not hosts or not hosts.startswith(("http://", "https://")):
            raise ValueError("hosts must be an http:// or https:// URL (CITEBOT_ELASTICSEARCH_URL)")
        if not prefix or prefix != prefix.lower() or any(c in prefix for c in ' "*\\<|,>/?#:'):
            raise ValueError("prefix must be a lowercase Elasticsearch index name (CITEBOT_ELASTICSEARCH_STATE_PREFIX)")
        if (username is None) != (password is None):
            raise ValueError("set both CITEBOT_ELASTICSEARCH_USERNAME and CITEBOT_ELASTICSEARCH_PASSWORD, or neither")
        if request_timeout <= 0:
            raise ValueError("request_timeout must be positive")
        from elasticsearch import Elasticsearch

        self.hosts = hosts
        self.prefix = prefix
        self._es = Elasticsearch(
            hosts,
            api_key=api_key,
            basic_auth=(username, password) if username is not None and password is not None else None,
            request_timeout=request_timeout,
            retry_on_timeout=True,
            max_retries=2,
            **tls_options(hosts, ca_certs),
        )
        self._clock = clock
        self._host = host or socket.gethostname()
        self._ready = False
        self._ready_lock = threading.Lock()
        self._pruned_at = 0.0

    @classmethod
    def from_settings(cls, settings: Settings, **kwargs: Any) -> ElasticsearchState:
        if not settings.elasticsearch_url:
            raise ValueError("CITEBOT_ELASTICSEARCH_URL is not set")
        key, pw = settings.elasticsearch_api_key, settings.elasticsearch_password
        return cls(
            hosts=settings.elasticsearch_url,
            prefix=settings.elasticsearch_state_prefix,
            api_key=key.get_secret_value() if key is not None else None,
            username=settings.elasticsearch_username,
            password=pw.get_secret_value() if pw is not None else None,
            ca_certs=str(settings.elasticsearch_ca_certs) if settings.elasticsearch_ca_certs else None,
            retention_days=settings.retention_days,
            **kwargs,
        )

    def index(self, name: str) -> str:
        """The full name of one of the state indices (``work``, ``answers``, ``feedback``, ``uploads``...)."""
        return f"{self.prefix}-{name}"

    # --- plumbing --------------------------------------------------------------------------------
    @contextmanager
    def _guard(self, *expected: type[Exception]) -> Iterator[None]:
        """Connection and server errors become a :class:`StateError` naming the URL (without credentials);
        the ``expected`` ones (a 409 conflict, a 404) pass through for the caller to handle."""
        from elasticsearch import ApiError, AuthenticationException, AuthorizationException, TransportError
        from elasticsearch import ConnectionError as EsConnectionError

        url = redact_url(self.hosts)
        try:
            yield
        except expected:
            raise
        except EsConnectionError as e:
            raise StateError(
                f"cannot reach Elasticsearch at {url} for the chat state: check that it is running and that "
                "CITEBOT_ELASTICSEARCH_URL is right"
            ) from e
        except (AuthenticationException, AuthorizationException) as e:
            raise StateError(
                f"Elasticsearch at {url} refused the credentials: check CITEBOT_ELASTICSEARCH_API_KEY, or "
                "CITEBOT_ELASTICSEARCH_USERNAME and CITEBOT_ELASTICSEARCH_PASSWORD (they need the citebot-state-* "
                "indices too)"
            ) from e
        except (TransportError, ApiError) as e:
            raise StateError(f"Elasticsearch at {url} failed on the chat state ({type(e).__name__})") from e

    @property
    def es(self) -> Any:
        """The client, once the state indices exist (created with their mappings on first use)."""
        if not self._ready:
            with self._ready_lock:
                if not self._ready:
                    self._create_indices()
                    self._ready = True
        return self._es

    def _create_indices(self) -> None:
        from elasticsearch import BadRequestError

        with self._guard():
            for name, mapping in MAPPINGS.items():
                if self._es.indices.exists(index=self.index(name)):  # made by an earlier version: add new fields
                    self._es.indices.put_mapping(index=self.index(name), properties=mapping["properties"])
                    continue
                try:
                    self._es.indices.create(index=self.index(name), mappings=mapping)
                except BadRequestError as e:
                    if not index_exists_already(e):  # else another replica created it first
                        raise

    def drop(self) -> None:
        """Delete every state index (tests and admin only)."""
        with self._guard():
            self._es.indices.delete(index=",".join(self.index(n) for n in MAPPINGS), ignore_unavailable=True)
        self._ready = False

    def close(self) -> None:
        self._es.close()

    def _get(self, name: str, id_: str) -> Any:
        from elasticsearch import NotFoundError

        try:
            with self._guard(NotFoundError):
                return self.es.get(index=self.index(name), id=id_)
        except NotFoundError:
            return None

    def _put_if(self, name: str, id_: str, doc: dict[str, Any], got: Any, **kw: Any) -> bool:
        """Write ``doc`` only if the document is still as ``got`` read it; False when someone wrote first."""
        from elasticsearch import ConflictError

        try:
            with self._guard(ConflictError):
                self.es.index(
                    index=self.index(name), id=id_, document=doc,
                    if_seq_no=got["_seq_no"], if_primary_term=got["_primary_term"], **kw,
                )
        except ConflictError:
            return False
        return True

    def _search_all(self, name: str, query: dict[str, Any]) -> list[dict[str, Any]]:
        from elasticsearch.helpers import scan

        with self._guard():
            return [hit["_source"] for hit in scan(self.es, index=self.index(name), query={"query": query}, size=500)]

    def forget_before(self, cutoff: str) -> int:
        """Forget answers, votes and assistant threads recorded before ``cutoff`` (ISO time); how many went. (The
        threads index of an older version has no ``at`` mapped: it is added here, so threads saved since go too.)"""
        deleted = 0
        with self._guard():
            self.es.indices.put_mapping(index=self.index("threads"), properties={"at": {"type": "date"}})
            for name in ("answers", "feedback", "threads"):
                res = self.es.delete_by_query(index=self.index(name), query={"range": {"at": {"lt": cutoff}}},
                                              conflicts="proceed", refresh=True)
                deleted += int(res.get("deleted") or 0)
        return deleted

    # --- the work journal ------------------------------------------------------------------------
    # Each item is one document under its key's id; every change of state is a write conditioned on the
    # _seq_no/_primary_term read (one taker wins), and is refreshed so other replicas' searches find it.
    def add_work(self, key: str, *, kind: str, payload: str, who: str = "", tenant: str = "", owner: str = "",
                 lease_s: float = 0.0, max_waiting: int = 0) -> bool:
        """As :meth:`StateLog.add_work`; ``max_waiting`` is a count before the create (no transaction spans the two:
        replicas accepting one person's items at the same moment may each pass the bound once, as they could when
        the listener counted first)."""
        from elasticsearch import ConflictError

        if who and max_waiting and self._waiting(who) >= max_waiting:
            if self._get("work", doc_id(key)) is not None:  # a re-delivery of an item journaled before
                return False
            raise QueueFull(kind)

        now = self._clock()
        doc = {"key": key, "kind": kind, "payload": payload, "state": "pending", "attempts": 0, "owner": "",
               "lease_until": 0.0, "note": {}, "created": now, "updated": now, "who": who, "tenant": tenant,
               "taken_at": 0.0}
        if owner:  # taken as it is written: work its listener does at once
            doc |= {"state": "running", "attempts": 1, "owner": owner, "lease_until": now + lease_s, "taken_at": now}
        try:
            with self._guard(ConflictError):
                self.es.create(index=self.index("work"), id=doc_id(key), document=doc, refresh="wait_for")
        except ConflictError:
            return False
        return True

    def probe(self) -> None:
        """Write and remove a throwaway journal document (readiness: the cluster takes writes to the journal)."""
        id_ = doc_id(f"probe:{self._host}:{os.getpid()}")
        now = self._clock()
        with self._guard():
            es = self.es.options(request_timeout=ACCEPT_WITHIN_S * 2)
            es.index(index=self.index("work"), id=id_, document={"key": id_, "kind": "probe", "payload": "",
                                                                   "state": "done", "created": now, "updated": now})
            es.delete(index=self.index("work"), id=id_)

    def take_work(
        self, *, owner: str, lease_s: float, kinds: tuple[str, ...], key: str | None = None, limit: int = 1
    ) -> list[WorkItem]:
        if not kinds or limit < 1:
            return []
        now = self._clock()
        self._prune(now)
        if key is not None:
            got = self._get("work", doc_id(key))
            candidates = [got] if got is not None else []
        else:
            query = {"bool": {
                "filter": [{"terms": {"kind": list(kinds)}}],
                "should": [{"term": {"state": "pending"}},
                           {"bool": {"filter": [{"term": {"state": "running"}},
                                                {"range": {"lease_until": {"lt": now}}}]}}],
                "minimum_should_match": 1,
            }}
            with self._guard():
                found = self.es.search(index=self.index("work"), query=query, sort=[{"created": "asc"}],
                                       size=max(limit * 4, _FAIR_WINDOW), seq_no_primary_term=True)
            candidates = self._fair_order(found["hits"]["hits"])
        taken: list[WorkItem] = []
        for got in candidates:
            old = got["_source"]
            if len(taken) >= limit or old.get("kind") not in kinds:
                continue
            expired = old.get("state") == "running" and float(old.get("lease_until") or 0) < now
            if old.get("state") != "pending" and not expired:
                continue
            doc = {**old, "state": "running", "owner": owner, "lease_until": now + lease_s,
                   "attempts": int(old.get("attempts") or 0) + 1, "updated": now,
                   "taken_at": now + len(taken) * 1e-6}  # takes of one call keep their order
            if self._put_if("work", got["_id"], doc, got, refresh="wait_for"):
                if expired:
                    record_claim_taken_over(str(old.get("key")))
                taken.append(_work_item(doc))
        return taken

    def _fair_order(self, hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``hits`` (oldest first) in fair turns, as :meth:`StateLog.take_work`: the tenant, then the user, taken from
        least recently (one aggregation over their items), then the oldest item."""
        if not hits:
            return hits
        tenants = sorted({str(h["_source"].get("tenant") or "") for h in hits})
        whos = sorted({str(h["_source"].get("who") or "") for h in hits})
        aggs = {
            "tenants": {"filter": {"terms": {"tenant": tenants}},
                        "aggs": {"by": {"terms": {"field": "tenant", "size": len(tenants)},
                                        "aggs": {"last": {"max": {"field": "taken_at"}}}}}},
            "users": {"filter": {"terms": {"who": whos}},
                      "aggs": {"by": {"terms": {"field": "who", "size": len(whos)},
                                      "aggs": {"last": {"max": {"field": "taken_at"}}}}}},
        }
        with self._guard():
            res = self.es.search(index=self.index("work"), size=0, aggs=aggs)

        def last(name: str) -> dict[str, float]:
            return {str(b["key"]): float(b["last"]["value"] or 0.0) for b in res["aggregations"][name]["by"]["buckets"]}

        by_tenant, by_user = last("tenants"), last("users")
        return sorted(hits, key=lambda h: (by_tenant.get(str(h["_source"].get("tenant") or ""), 0.0),
                                           by_user.get(str(h["_source"].get("who") or ""), 0.0),
                                           float(h["_source"].get("created") or 0.0)))

    def _change_work(self, key: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> bool:
        """Apply ``change`` (None: leave it) to an item, retrying on a concurrent write; True when written."""
        id_ = doc_id(key)
        for _ in range(_CAS_ATTEMPTS):
            got = self._get("work", id_)
            if got is None:
                return False
            doc = change(dict(got["_source"]))
            if doc is None:
                return False
            if self._put_if("work", id_, {**doc, "updated": self._clock()}, got, refresh="wait_for"):
                return True
        return False

    def renew_work(self, keys: list[str], *, owner: str, lease_s: float) -> list[str]:
        def renew(doc: dict[str, Any]) -> dict[str, Any] | None:
            if doc.get("owner") != owner or doc.get("state") != "running":
                return None
            return {**doc, "lease_until": self._clock() + lease_s}

        return [key for key in keys if self._change_work(key, renew)]

    def end_work(self, key: str, *, owner: str, failed: bool = False, answer: AnswerRecord | None = None) -> bool:
        """As :meth:`StateLog.end_work`. Elasticsearch has no transaction across documents (each write is atomic on
        its own document), so ``answer`` is written (and refreshed) before the item ends: a kill between the two
        leaves the item running with its answer recorded, and the take-over records it again (the same id)."""
        if answer is not None:
            self.record_answer(**answer._asdict())

        def end(doc: dict[str, Any]) -> dict[str, Any] | None:
            if doc.get("owner") != owner or doc.get("state") != "running":
                return None
            return {**doc, "state": "failed" if failed else "done"}

        return self._change_work(key, end)

    def release_work(self, key: str, *, owner: str) -> None:
        def release(doc: dict[str, Any]) -> dict[str, Any] | None:
            if doc.get("owner") != owner or doc.get("state") != "running":
                return None
            return {**doc, "state": "pending", "owner": "", "lease_until": 0.0}  # the attempt still counts

        self._change_work(key, release)

    def note_work(self, key: str, **note: str) -> None:
        self._change_work(key, lambda doc: {**doc, "note": {**(doc.get("note") or {}), **note}})

    def work_items(self, *, state: WorkState | None = None) -> list[WorkItem]:
        query: dict[str, Any] = {"term": {"state": state}} if state else {"match_all": {}}
        with self._guard():
            self.es.indices.refresh(index=self.index("work"))
        docs = sorted(self._search_all("work", query), key=lambda d: float(d.get("created") or 0))
        return [_work_item(doc) for doc in docs]

    def _waiting(self, who: str) -> int:
        query = {"bool": {"filter": [{"term": {"who": who}}, {"terms": {"state": ["pending", "running"]}}]}}
        with self._guard():
            return int(self.es.count(index=self.index("work"), query=query)["count"])

    def count_work(self, *, kinds: tuple[str, ...], states: tuple[WorkState, ...], who: str | None = None) -> int:
        if not kinds or not states:
            return 0
        query = {"bool": {"filter": [{"terms": {"kind": list(kinds)}}, {"terms": {"state": list(states)}},
                                     *([{"term": {"who": who}}] if who is not None else [])]}}
        with self._guard():
            return int(self.es.count(index=self.index("work"), query=query)["count"])

    def _prune(self, now: float) -> None:
        """Forget ended items older than :data:`WORK_TTL_S`, and what is older than the retention (at most every few
        minutes per process, by the workers' takes)."""
        if now - self._pruned_at < PRUNE_EVERY_S:
            return
        self._pruned_at = now
        with self._guard():
            self.es.delete_by_query(
                index=self.index("work"), conflicts="proceed",
                query={"bool": {"filter": [{"terms": {"state": ["done", "failed"]}},
                                           {"range": {"updated": {"lt": now - WORK_TTL_S}}}]}},
            )
        if self.retention_days:
            self.forget_before(datetime.fromtimestamp(now - self.retention_days * 86400, UTC).isoformat(
                timespec="seconds"))

    # --- uploads ---------------------------------------------------------------------------------
    def record_upload(self, *, platform: str, file_ref: str, scope: str, doc_id: str, user: str) -> None:
        doc = {"platform": platform, "file_ref": file_ref, "scope": scope, "doc_id": doc_id, "user": user,
               "at": _now()}
        with self._guard():
            self.es.index(index=self.index("uploads"), id=_id(platform, file_ref, scope), document=doc,
                          refresh="wait_for")

    def pop_uploads(self, *, platform: str, file_ref: str) -> list[tuple[str, str, bool]]:
        from elasticsearch import NotFoundError

        rows = self._search_all("uploads", _terms(platform=platform, file_ref=file_ref))
        for row in rows:
            try:
                with self._guard(NotFoundError):
                    self.es.delete(index=self.index("uploads"), id=_id(platform, file_ref, row["scope"]),
                                   refresh="wait_for")
            except NotFoundError:
                pass  # another replica popped it first
        out = []
        for row in rows:
            with self._guard():
                res = self.es.search(
                    index=self.index("uploads"), query=_terms(platform=platform, scope=row["scope"],
                                                              doc_id=row["doc_id"]), size=1, source=False,
                )
            out.append((row["scope"], row["doc_id"], bool(res["hits"]["hits"])))
        return out

    # --- assistant threads -----------------------------------------------------------------------
    def save_thread_context(self, *, platform: str, thread_ref: str, user: str, context_channel: str) -> None:
        doc = {"platform": platform, "thread_ref": thread_ref, "user": user, "context_channel": context_channel,
               "at": _now()}
        with self._guard():
            self.es.index(index=self.index("threads"), id=_id(platform, thread_ref), document=doc)

    def thread_context(self, *, platform: str, thread_ref: str) -> tuple[str, str] | None:
        got = self._get("threads", _id(platform, thread_ref))
        return None if got is None else (got["_source"]["user"], got["_source"]["context_channel"])

    # --- answers ---------------------------------------------------------------------------------
    def record_answer(
        self,
        *,
        platform: str,
        message_ref: str,
        thread_ref: str,
        scope: str,
        user: str,
        question: str,
        answer_json: str,
    ) -> None:
        doc = {
            "platform": platform, "message_ref": message_ref, "thread_ref": thread_ref, "scope": scope,
            "user": user, "question": question, "answer_json": answer_json, "at": _now(),
            "seq": time.time_ns(),
        }
        with self._guard():
            self.es.index(index=self.index("answers"), id=_id(platform, message_ref), document=doc,
                          refresh="wait_for")

    def thread_history(self, *, platform: str, thread_ref: str, limit: int = 6) -> list[ThreadTurn]:
        with self._guard():
            res = self.es.search(
                index=self.index("answers"), query=_terms(platform=platform, thread_ref=thread_ref),
                sort=[{"seq": "desc"}], size=limit,
            )
        turns: list[ThreadTurn] = []
        for hit in reversed(res["hits"]["hits"]):
            src = hit["_source"]
            turns.append(ThreadTurn(role="user", text=src["question"]))
            turns.append(ThreadTurn(role="assistant", text=json.loads(src["answer_json"])["text"]))
        return turns

    def thread_answered(self, *, platform: str, thread_ref: str) -> bool:
        with self._guard():
            res = self.es.search(
                index=self.index("answers"), query=_terms(platform=platform, thread_ref=thread_ref), size=1,
                source=False,
            )
        return bool(res["hits"]["hits"])

    def find_answer(self, *, platform: str, message_ref: str) -> PostedAnswer | None:
        got = self._get("answers", _id(platform, message_ref))
        if got is None:
            return None
        src = got["_source"]
        return PostedAnswer(src["scope"], src["question"], src["answer_json"])

    def answers(self, *, since: str | None = None) -> list[RecordedAnswer]:
        """Every answer posted on or after ``since`` (ISO-8601 UTC; all without it), oldest first."""
        query = {"range": {"at": {"gte": since}}} if since else {"match_all": {}}
        found = self._search_all("answers", query)
        found.sort(key=lambda a: (str(a["at"]), int(a.get("seq") or 0)))
        return [RecordedAnswer(a["platform"], a["message_ref"], a["scope"], str(a["at"]), a["answer_json"])
                for a in found]

    # --- feedback --------------------------------------------------------------------------------
    def add_feedback(
        self,
        *,
        platform: str,
        message_ref: str,
        user: str,
        polarity: Polarity,
        comment: str = "",
        choice: str = "",
    ) -> bool:
        """Record ``user``'s vote on a posted answer, replacing their earlier one; a bare repeat of the standing vote
        keeps its comment and choice (as :meth:`StateLog.add_feedback`). False when the message is not a bot
        answer."""
        found = self.find_answer(platform=platform, message_ref=message_ref)
        if found is None:
            return False
        from elasticsearch import ConflictError

        doc = {
            "platform": platform, "message_ref": message_ref, "scope": found[0], "user": user,
            "polarity": polarity, "comment": comment, "choice": choice, "at": _now(), "seq": time.time_ns(),
            "retracted": False, "retracted_at": None,
        }
        id_ = _id(platform, message_ref, user)
        for _ in range(_CAS_ATTEMPTS):
            got = self._get("feedback", id_)
            if got is None:
                try:
                    with self._guard(ConflictError):
                        self.es.create(index=self.index("feedback"), id=id_, document=doc, refresh="wait_for")
                except ConflictError:
                    continue  # a vote of this person arrived at the same moment: read it and decide again
                return True
            standing = got["_source"]
            bare_repeat = not comment and not choice and standing.get("polarity") == polarity and not standing.get(
                "retracted")
            new = {**doc, "comment": standing.get("comment", ""), "choice": standing.get("choice", "")} if (
                bare_repeat) else doc
            if self._put_if("feedback", id_, new, got, refresh="wait_for"):
                return True
        return False

    def retract_feedback(self, *, platform: str, message_ref: str, user: str, polarity: Polarity) -> bool:
        id_ = _id(platform, message_ref, user)
        for _ in range(_CAS_ATTEMPTS):
            got = self._get("feedback", id_)
            if got is None:
                return False
            vote = got["_source"]
            if vote.get("polarity") != polarity or vote.get("retracted"):
                return False
            if self._put_if("feedback", id_, {**vote, "retracted": True, "retracted_at": _now()}, got,
                            refresh="wait_for"):
                return True
        return False

    def feedback(
        self, *, since: str | None = None, polarity: Polarity | None = None, include_retracted: bool = False
    ) -> list[FeedbackEntry]:
        """Feedback entries, oldest first, joined with the answers they rate."""
        filters: list[dict[str, Any]] = []
        if not include_retracted:
            filters.append({"term": {"retracted": False}})
        if since:
            filters.append({"range": {"at": {"gte": since}}})
        if polarity:
            filters.append({"term": {"polarity": polarity}})
        votes = self._search_all("feedback", {"bool": {"filter": filters}} if filters else {"match_all": {}})
        votes.sort(key=lambda v: (str(v["at"]), int(v.get("seq") or 0)))
        answers: dict[str, dict[str, Any]] = {}
        ids = sorted({_id(v["platform"], v["message_ref"]) for v in votes})
        for start in range(0, len(ids), 500):
            with self._guard():
                res = self.es.mget(index=self.index("answers"), ids=ids[start : start + 500])
            answers.update({d["_id"]: d["_source"] for d in res["docs"] if d.get("found")})
        out = []
        for vote in votes:
            src = answers.get(_id(vote["platform"], vote["message_ref"]))
            if src is not None:  # as the SQLite log's join: a vote needs its answer
                out.append(FeedbackEntry.of(vote, src["question"], src["answer_json"]))
        return out


def _work_item(doc: dict[str, Any]) -> WorkItem:
    note = doc.get("note") if isinstance(doc.get("note"), dict) else {}
    return WorkItem(str(doc["key"]), str(doc["kind"]), str(doc["payload"]), doc["state"], int(doc.get("attempts") or 0),
                    str(doc.get("owner") or ""), float(doc.get("lease_until") or 0.0),
                    {str(k): str(v) for k, v in (note or {}).items()})


def _id(*parts: str) -> str:
    return doc_id(*parts)


def _terms(**fields: str) -> dict[str, Any]:
    return {"bool": {"filter": [{"term": {k: v}} for k, v in fields.items()]}}
