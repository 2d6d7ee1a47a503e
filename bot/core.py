"""The platform-neutral chat core: chat events in, service calls and user-facing text out.

Slack (``bot/slack``) and Teams (``bot/teams``) parse their events into :class:`ChatContext` and
call these methods, then render the results. The use-cases both platforms share live here (an upload:
download, size cap, ingest, progress, record, result text); every text a user reads that is not an
answer is in :mod:`bot.texts`, and the commands in :mod:`bot.commands`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import structlog

from bot import texts
from connectors import metrics
from connectors.download import DownloadError, TooLargeError, check_size
from connectors.log import error_fields
from connectors.settings import Settings
from connectors.state_api import AnswerRecord, ChatState, Polarity
from connectors.store_api import DocInfo
from connectors.stores import open_state
from connectors.uploads import max_upload_bytes
from pipelines.models import Answer, IngestResult, ProgressCallback, Turn, for_people, printable
from pipelines.service import CitebotService
from pipelines.streaming import ShowText

log = structlog.get_logger(__name__)

Platform = Literal["slack", "teams"]

MAX_COMMENT_CHARS = 2000
MAX_CHOICE_CHARS = 500  # a reading's follow-up question, as a button or card action carries it


@dataclass(frozen=True)
class ClaimKey:
    """The work journal's key of a chat delivery or a piece of work, stored as ``{platform}:{kind}:{parts}``.

    ``event``: a Slack event id (any listener's work); ``answer``: one answer per Slack message (its
    ``app_mention`` and ``message`` events share it); ``file``: one ingest per file share in a channel;
    ``command``: one slash command (its trigger id); ``vote``: one button click or feedback form; ``choice``: one
    click on a reading of a "which one?" answer; ``msg``: one Teams activity (its answer, upload, ``sync`` or quick
    reply)."""

    platform: Platform
    kind: Literal["event", "answer", "file", "command", "vote", "choice", "msg"]
    parts: tuple[str, ...]

    def __str__(self) -> str:
        return ":".join((self.platform, self.kind, *self.parts))

    @classmethod
    def slack_event(cls, event_id: str) -> ClaimKey:
        return cls("slack", "event", (event_id,))

    @classmethod
    def slack_answer(cls, team: str, channel: str, ts: str) -> ClaimKey:
        return cls("slack", "answer", (team, channel, ts))

    @classmethod
    def slack_file(cls, team: str, channel: str, file_id: str) -> ClaimKey:
        return cls("slack", "file", (team, channel, file_id))

    @classmethod
    def slack_command(cls, trigger_id: str) -> ClaimKey:
        return cls("slack", "command", (trigger_id,))

    @classmethod
    def slack_vote(cls, *parts: str) -> ClaimKey:
        return cls("slack", "vote", parts)

    @classmethod
    def slack_choice(cls, team: str, channel: str, user: str, action_ts: str) -> ClaimKey:
        return cls("slack", "choice", (team, channel, user, action_ts))

    @classmethod
    def teams_message(cls, conversation_id: str, activity_id: str) -> ClaimKey:
        return cls("teams", "msg", (conversation_id, activity_id))


@dataclass(frozen=True)
class ChatContext:
    """Who asked, where, and which scopes they may search."""

    platform: Platform
    scope: str
    user: str
    search_scopes: tuple[str, ...] = field(default=())
    event_id: str = ""
    # other ids of the same person that an upload's owner may be recorded under (Teams: ``aad:{object id}``, the
    # owner of a file synced from a channel's Files tab)
    also_known_as: tuple[str, ...] = field(default=())

    def is_user(self, user_id: str) -> bool:
        return bool(user_id) and (user_id == self.user or user_id in self.also_known_as)

    @property
    def scopes(self) -> tuple[str, ...]:
        return self.search_scopes or (self.scope,)


@dataclass(frozen=True)
class ForgetOutcome:
    status: Literal["deleted", "not_found", "not_allowed"]
    message: str


class ChatCore:
    def __init__(self, service: CitebotService, state: ChatState, settings: Settings) -> None:
        self.service = service
        self.state = state
        self.settings = settings

    @classmethod
    def from_settings(cls, settings: Settings) -> ChatCore:
        return cls(CitebotService(settings), open_state(settings), settings)

    def note_work(self, key: ClaimKey | str, **note: str) -> None:
        """Keep what a journaled item's work did so far (e.g. the ts of a message it posted)."""
        self.state.note_work(str(key), **note)

    @property
    def answer_budget_s(self) -> float:
        """The longest an answer may take: a rewrite and two answer calls, each with all their retries."""
        s = self.settings
        return 3 * s.llm_timeout_s * (s.llm_max_retries + 1) + 120.0

    @property
    def ingest_budget_s(self) -> float:
        """The longest an upload may take: the download, the per-document indexing budget, saving."""
        return self.settings.download_timeout_s + self.settings.ingest_timeout_s + 300.0

    # --- questions -------------------------------------------------------------------------------
    def ask(
        self, ctx: ChatContext, question: str, history: Sequence[Turn] = (), *, show: ShowText | None = None
    ) -> Answer:
        """Answer ``question`` over the context's scopes. The service writes the answer's one log line; who asked
        where is bound to it here (never the text). ``show``: an LLM answer's checked sentences while they are
        written (the chat platform's streaming)."""
        t0 = time.perf_counter()
        try:
            with structlog.contextvars.bound_contextvars(platform=ctx.platform, scope=ctx.scope, user=ctx.user,
                                                         event_id=ctx.event_id):
                answer = for_people(self.service.answer(question, list(ctx.scopes), history, show=show))
        except Exception:
            metrics.record_question_failed(ctx.platform, seconds=time.perf_counter() - t0)
            raise
        v = answer.validation
        metrics.record_question(ctx.platform, mode=answer.mode, refused=answer.refused,
                                seconds=time.perf_counter() - t0, exact=v.exact, normalised=v.normalised,
                                fuzzy=v.fuzzy, dropped=v.unknown_chunk + v.unmatched)
        return answer

    def answer_choice(self, ctx: ChatContext, question: str, *, show: ShowText | None = None) -> Answer:
        """A reading picked under a "which one?" answer (a Slack button, a Teams card action): its follow-up
        question, answered afresh over the context's scopes, as a reply "2" in the thread is
        (:func:`pipelines.questions.resolve_choice`): it names its reading whole, so the thread
        before it is not read into it. The question comes from the click's payload: it is asked with the
        clicker's scopes, exactly what they could ask by mentioning the bot there, never the scopes of the
        message that offered it."""
        return self.ask(ctx, question[:MAX_CHOICE_CHARS], (), show=show)

    def history(self, platform: Platform, thread_ref: str) -> list[Turn]:
        turns = self.state.thread_history(platform=platform, thread_ref=thread_ref)
        return [Turn(role=t.role, text=t.text) for t in turns]

    def thread_answered(self, platform: Platform, thread_ref: str) -> bool:
        return self.state.thread_answered(platform=platform, thread_ref=thread_ref)

    @staticmethod
    def answer_record(
        ctx: ChatContext, *, message_ref: str, thread_ref: str, question: str, answer: Answer
    ) -> AnswerRecord:
        """What the chat state records of a posted answer, so 👍/👎 and follow-ups find it; written with the end of
        its work item (:meth:`bot.journal.WorkJournal.end_answered`)."""
        return AnswerRecord(platform=ctx.platform, message_ref=message_ref, thread_ref=thread_ref, scope=ctx.scope,
                            user=ctx.user, question=question, answer_json=answer.model_dump_json())

    # --- feedback --------------------------------------------------------------------------------
    def feedback(
        self,
        platform: Platform,
        *,
        message_ref: str,
        user: str,
        polarity: Polarity,
        comment: str = "",
        choice: str = "",
    ) -> bool:
        """Record ``user``'s vote on an answer; their latest vote (button, reaction or modal) replaces any earlier
        one. ``choice`` is a key of :data:`bot.texts.FEEDBACK_CHOICES` (others are dropped), ``comment`` free text."""
        choice = choice if choice in texts.FEEDBACK_CHOICES else ""
        ok = self.state.add_feedback(
            platform=platform,
            message_ref=message_ref,
            user=user,
            polarity=polarity,
            comment=printable(comment).strip()[:MAX_COMMENT_CHARS],
            choice=choice,
        )
        if ok:
            metrics.record_feedback(platform, polarity)
        log.info("feedback", platform=platform, user=user, polarity=polarity, linked=ok, choice=choice,
                 has_comment=bool(comment.strip()))
        return ok

    def retract_feedback(self, platform: Platform, *, message_ref: str, user: str, polarity: Polarity) -> bool:
        return self.state.retract_feedback(
            platform=platform, message_ref=message_ref, user=user, polarity=polarity
        )

    # --- files -----------------------------------------------------------------------------------
    def upload(
        self,
        ctx: ChatContext,
        *,
        file_name: str,
        data: bytes,
        progress: ProgressCallback | None = None,
        is_admin: bool | Callable[[], bool] = False,
        source_url: str = "",
    ) -> IngestResult:
        """Ingest an uploaded file into the context's own scope (never a search scope). It replaces an earlier
        version only if ``ctx.user`` uploaded that one or is an admin (as :meth:`forget`); otherwise it is
        indexed beside it under another name. ``source_url`` is where people open the file (Slack permalink,
        Teams file URL): citations link to it."""
        result = self.service.ingest(
            data, file_name=file_name, scope=ctx.scope, uploaded_by=ctx.user, is_admin=is_admin,
            source_url=source_url, progress=progress,
        )
        metrics.record_ingest(ctx.platform, status=result.status, seconds=result.seconds, pages=result.pages,
                              ocr_pages=result.ocr_pages, chunks=result.chunks, reason=result.error_code or "")
        log.info(
            "ingested",
            platform=ctx.platform,
            scope=ctx.scope,
            user=ctx.user,
            status=result.status,
            pages=result.pages,
            chunks=result.chunks,
            seconds=round(result.seconds, 2),
        )
        return result

    @property
    def max_file_bytes(self) -> int:
        return max_upload_bytes(self.settings.max_file_mb)

    def ingest(
        self,
        ctx: ChatContext,
        *,
        file_name: str,
        fetch: Callable[[int], bytes],
        size: int = 0,
        progress: ProgressCallback | None = None,
        is_admin: bool | Callable[[], bool] = False,
        source_url: str = "",
        file_ref: str = "",
    ) -> str:
        """An upload, start to end: the size cap (``size``, when the platform told it), ``fetch(max_bytes)`` for
        the bytes, :meth:`upload`, :meth:`record_upload` (when the platform has a ``file_ref``); returns the text
        to show. A failed download gets its class's fixed text; any other exception is ours and propagates, for
        the adapter's "something went wrong on my side"."""
        try:
            check_size(size, self.max_file_bytes)  # the platform told us the size: don't even start
            data = fetch(self.max_file_bytes)
        except DownloadError as e:  # its message is never shown, nor logged: it may carry a URL
            log.info("download_failed", platform=ctx.platform, scope=ctx.scope, user=ctx.user, **error_fields(e))
            metrics.record_ingest_refused(ctx.platform, "too_large" if isinstance(e, TooLargeError) else "download")
            return texts.download_failed_text(
                file_name, e, max_file_mb=self.settings.max_file_mb, timeout_s=self.settings.download_timeout_s
            )
        result = self.upload(
            ctx, file_name=file_name, data=data, progress=progress, is_admin=is_admin, source_url=source_url
        )
        if file_ref:
            self.record_upload(ctx, file_ref=file_ref, result=result)
        return texts.ingest_result_text(result)

    def documents(self, scopes: Sequence[str]) -> list[DocInfo]:
        return self.service.list_documents(list(scopes))

    def document_count(self, scopes: Sequence[str]) -> int:
        """How many documents a question searches (cached: see :meth:`CitebotService.document_count`)."""
        return self.service.document_count(list(scopes))

    def forget(self, ctx: ChatContext, name: str, *, is_admin: bool) -> ForgetOutcome:
        """Delete a document of the context's scope by file name or doc id: uploader or admin only."""
        found = self.service.find_documents(name, ctx.scope)
        if not found:
            return ForgetOutcome("not_found", texts.forget_not_found_text(name))
        allowed = [d for d in found if is_admin or ctx.is_user(d.uploaded_by)]
        if not allowed:
            return ForgetOutcome("not_allowed", texts.forget_not_allowed_text(found[0].file))
        for doc in allowed:
            self.service.forget(doc.doc_id, ctx.scope)
        log.info("forgot", platform=ctx.platform, scope=ctx.scope, user=ctx.user, n_docs=len(allowed))
        return ForgetOutcome("deleted", texts.forgot_text(allowed[0].file))

    def record_upload(self, ctx: ChatContext, *, file_ref: str, result: IngestResult) -> None:
        """Link the platform's file id to the document it became, for :meth:`forget_file`."""
        if result.status != "failed" and result.doc_id:
            self.state.record_upload(
                platform=ctx.platform, file_ref=file_ref, scope=ctx.scope, doc_id=result.doc_id, user=ctx.user
            )

    def forget_file(self, platform: Platform, file_ref: str) -> int:
        """The platform deleted a file: remove the documents it became in every scope it was shared to
        (kept while another file of that scope holds the same bytes). Returns how many were removed."""
        removed = 0
        for scope, doc_id, still_shared in self.state.pop_uploads(platform=platform, file_ref=file_ref):
            if not still_shared and self.service.forget(doc_id, scope):
                removed += 1
        log.info("file_deleted", platform=platform, n_docs=removed)
        return removed

    # --- assistant threads (Slack's AI pane) -----------------------------------------------------
    def save_thread_context(self, platform: Platform, *, thread_ref: str, user: str, context_channel: str) -> None:
        self.state.save_thread_context(
            platform=platform, thread_ref=thread_ref, user=user, context_channel=context_channel
        )

    def thread_context(self, platform: Platform, thread_ref: str) -> tuple[str, str] | None:
        """(user, channel they are viewing) for an assistant thread, None for any other thread."""
        return self.state.thread_context(platform=platform, thread_ref=thread_ref)

    def suggested_questions(self, scopes: Sequence[str], limit: int = 4) -> list[tuple[str, str]]:
        """Up to ``limit`` (title, question) pairs from the headings of the documents in ``scopes``, taking one
        from each document in turn so every PDF gets a say. A document is called by its title (the heading
        above all its others) where it has one, never by its file name; a document with a title and no topic
        under it gets "What is “title” about?"."""
        per_doc: dict[str, list[str]] = {}
        paths: dict[str, list[list[str]]] = {}
        for doc in self.service.store.fetch(scopes=list(scopes), limit=400):
            meta = doc.meta or {}
            doc_id = str(meta.get("doc_id") or "")
            section = str(meta.get("section") or "")
            if not doc_id or not section:
                continue
            paths.setdefault(doc_id, []).append(section.split(" > "))
            title = section_title(section)
            titles = per_doc.setdefault(doc_id, [])
            if title and title.lower() not in (t.lower() for t in titles):
                titles.append(title)
        names = {doc_id: document_title(p) for doc_id, p in paths.items()}
        for doc_id, titles in per_doc.items():
            name = names[doc_id]
            per_doc[doc_id] = [t for t in titles if t.lower() != name.lower()] or ([name] if name else [])
        out: list[tuple[str, str]] = []
        for i in range(max((len(t) for t in per_doc.values()), default=0)):
            for doc_id, titles in per_doc.items():
                if i < len(titles) and len(out) < limit:
                    name, topic = names[doc_id], titles[i]
                    question = texts.about_question(name) if topic == name else texts.suggested_question(topic, name)
                    out.append((topic, question))
        return out

    def stats(self, scopes: Sequence[str]) -> dict[str, int]:
        docs = self.documents(scopes)
        return {"documents": len(docs), "pages": sum(d.pages for d in docs), "chunks": sum(d.chunks for d in docs)}


# --- section titles as topics ------------------------------------------------------------------

_NUMBERING = re.compile(
    r"^(?:(?i:section|article|chapter|part|clause)\s+)?(?:\d+(?:\.\d+)*\.?|[IVXLC]{1,6}[.)]|[IVXLC]{2,6}|[A-Z][.)])\s+"
)
_NOT_TOPICS = {"contents", "table of contents", "index", "appendix", "references", "introduction", "preface",
               "abstract", "bibliography", "acknowledgements", "acknowledgments", "list of figures", "list of tables",
               "foreword", "keywords", "notes", "untitled"}
# a date or a byline line set as a heading ("January 3, 2024", "3 March 2021", "2023-01-03") is no topic
_DATE_LIKE = re.compile(
    r"^(?:\d{1,2}\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?,?"
    r"\s*\d{4}$|^\d{1,2}\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?,?\s+\d{4}$"
    r"|^(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?,?\s+\d{4}$|^\d{4}[-/.]\d{1,2}[-/.]\d{1,2}$|^\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}$",
    re.I,
)


def section_title(section: str) -> str:
    """The innermost heading of a section path without its numbering ("4 Leave > 4.2 Parental leave" ->
    "Parental leave"), or "" when it is no useful topic (empty, a contents page, too long to be a title)."""
    title = printable(section.split(" > ")[-1]).strip()
    title = " ".join(_NUMBERING.sub("", title).split())
    if title.isupper() and len(title) > 3:  # "GENERAL PROVISIONS" reads as shouting in a prompt
        title = title.capitalize()
    if not 3 <= len(title) <= 60 or title.lower() in _NOT_TOPICS or not any(ch.isalpha() for ch in title):
        return ""
    if _DATE_LIKE.match(title):
        return ""
    return title


def document_title(paths: Sequence[Sequence[str]]) -> str:
    """A document's title from its chunks' section paths: the one outermost heading every nested path shares
    ("Two-Column Document with Lorem Ipsum > Abstract"), unnumbered and readable as a title; "" otherwise."""
    tops = {p[0] for p in paths if p}
    if len(tops) != 1 or not any(len(p) >= 2 for p in paths):
        return ""
    top = next(iter(tops))
    return "" if _NUMBERING.match(top) else section_title(top)
