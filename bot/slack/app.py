"""The Slack adapter's one Bolt app: its middleware, its one error handler, the ``message`` dispatcher.

Acknowledge first, work after, and lose nothing in between. The app runs with ``process_before_response=True``: a
listener runs in the request's own thread and only parses the event and journals its work
(:meth:`bot.journal.WorkJournal.accept`, through :class:`bot.slack.workers.SlackWorkers`) before the ack leaves.
The work itself (answering, downloading, indexing) is done by the journal's workers, sized per lane (answers and
commands ``CITEBOT_SLACK_WORKERS``, uploads ``CITEBOT_UPLOAD_WORKERS``), each item under a lease that any replica
takes over when a bot is killed; a busy lane never delays an ack, not even a slash command's.

Cross-cutting concerns are Bolt middleware, one small class each, as Bolt's own ``IgnoringSelfEvents`` (which drops
the bot's own posts): :class:`TrackAcks` (workers wait while acks are in flight), :class:`LogContext`, and
:class:`DropRedeliveries` (a re-delivered ``event_id``, e.g. a retry carrying ``X-Slack-Retry-Num``, is acknowledged
and dropped by an in-memory set before any listener runs). After a restart the journal's key (``slack:answer:…``,
``slack:file:…``) drops it instead. Work the journal cannot take (:class:`bot.journal.NotRecorded`) is answered 503,
so Slack re-sends it; any other listener failure reaches the one ``@app.error`` handler: log, apologise in the thread.

Bolt's ``Assistant`` routes the assistant pane's thread events (:mod:`bot.slack.assistant`). The listeners and the
work they journal are one module per concern: questions and "which one?" (:mod:`bot.slack.answers`), files
(:mod:`bot.slack.files`), 👍/👎 (:mod:`bot.slack.feedback`), ``/citebot`` (:mod:`bot.slack.slash`), the assistant
pane; posting once per work item is :mod:`bot.slack.items`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import structlog
from slack_bolt import App, BoltContext, BoltRequest, BoltResponse
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_bolt.middleware import Middleware
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from bot.core import ChatCore
from bot.journal import NotRecorded
from bot.slack.answers import Answers
from bot.slack.assistant import AssistantPane
from bot.slack.events import files_of_message, mentions, parse_message
from bot.slack.feedback import Feedback
from bot.slack.files import Files
from bot.slack.items import ItemPosts
from bot.slack.render import CHOICE_ACTION, FEEDBACK_ACTION, FEEDBACK_MODAL
from bot.slack.scopes import MembershipCache
from bot.slack.slash import SlashCommand
from bot.slack.workers import AckBackPressure, RecentKeys, SlackWorkers
from bot.texts import APOLOGY
from connectors.log import error_fields
from connectors.settings import Settings

log = structlog.get_logger(__name__)

_RETRY_HEADER = "x-slack-retry-num"


class _DropTokenUnusedWarning(logging.Filter):
    """Bolt warns "As you gave `client` as well, `token` will be unused" whenever SLACK_BOT_TOKEN is in the
    environment and an app is given its client, i.e. on every start of Citebot, whose client is built from that
    very token. The warning tells an admin nothing; drop just that record."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


def _quiet_bolt_token_warning() -> None:
    bolt_app_logger = logging.getLogger("slack_bolt.App")
    if not any(isinstance(f, _DropTokenUnusedWarning) for f in bolt_app_logger.filters):
        bolt_app_logger.addFilter(_DropTokenUnusedWarning())


class SlackConfigError(Exception):
    """The Slack settings are incomplete; the message names the variable to set."""


def web_client(settings: Settings) -> WebClient:
    """The Web API client: ``CITEBOT_SLACK_API_URL``, a timeout, and retries on 429 and dropped connections."""
    if settings.slack_bot_token is None:
        raise SlackConfigError("SLACK_BOT_TOKEN is not set: copy the Bot User OAuth Token (xoxb-...) from the app")
    base_url = settings.slack_api_url if settings.slack_api_url.endswith("/") else settings.slack_api_url + "/"
    return WebClient(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=base_url,
        timeout=30,
        retry_handlers=[ConnectionErrorRetryHandler(max_retry_count=2), RateLimitErrorRetryHandler(max_retry_count=3)],
    )


class TrackAcks(Middleware):
    """Counts the deliveries being acknowledged: a worker about to start waits for them (:class:`AckBackPressure`)."""

    def __init__(self, gate: AckBackPressure) -> None:
        self.gate = gate

    def process(
        self,
        *,
        req: BoltRequest,
        resp: BoltResponse,
        next: Callable[[], BoltResponse],  # noqa: A002 - Bolt's name for it
    ) -> BoltResponse:
        self.gate.enter()
        try:
            return next()
        finally:
            self.gate.leave()


class LogContext(Middleware):
    """Binds the delivery's platform, event id and type, team and user to every log line written while it runs."""

    def process(
        self,
        *,
        req: BoltRequest,
        resp: BoltResponse,
        next: Callable[[], BoltResponse],  # noqa: A002 - Bolt's name for it
    ) -> BoltResponse:
        body = req.body
        event = _event_of(body)
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(
            platform="slack",
            event_id=str(body.get("event_id", "")),
            event_type=str(event.get("type", body.get("command", body.get("type", "")))),
            team=str(body.get("team_id", "")),
            user=str(event.get("user") or body.get("user_id", "")),
        )
        return next()


class DropRedeliveries(Middleware):
    """Drops an ``event_id`` seen before. Slack re-sends an event (``X-Slack-Retry-Num`` 1, 2, 3) when it did not
    see our ack in time; the retry carries the same event id, so it is acknowledged and dropped here (and, after a
    restart, by the work journal's key). A retry whose first delivery never arrived is processed."""

    def __init__(self, recent: RecentKeys) -> None:
        self.recent = recent

    def process(
        self,
        *,
        req: BoltRequest,
        resp: BoltResponse,
        next: Callable[[], BoltResponse],  # noqa: A002 - Bolt's name for it
    ) -> BoltResponse:
        event_id = req.body.get("event_id")
        if req.body.get("type") != "event_callback" or not event_id:
            return next()
        retry = (req.headers.get(_RETRY_HEADER) or [""])[0]
        if self._is_repeat(str(event_id)):
            log.info("duplicate_event_skipped", retry_num=retry)
            return BoltResponse(status=200, body="")
        if retry not in ("", "0"):  # Bolt passes the header as "0" on a first delivery in Socket Mode
            log.info("retried_event_first_seen", retry_num=retry)
        return next()

    def _is_repeat(self, event_id: str) -> bool:
        """True while ``event_id`` is remembered; remembers it otherwise (one step, so two threads agree)."""
        return not self.recent.add(event_id)


class SlackBot:
    """One Bolt app, its journal's workers and its membership cache; the listeners are those of
    :mod:`bot.slack.answers`, :mod:`bot.slack.files`, :mod:`bot.slack.feedback`, :mod:`bot.slack.slash` and
    :mod:`bot.slack.assistant`."""

    def __init__(self, settings: Settings, core: ChatCore, client: WebClient | None = None) -> None:
        if settings.slack_signing_secret is None and settings.slack_app_token is None:
            raise SlackConfigError(
                "SLACK_SIGNING_SECRET is not set (HTTP mode), nor SLACK_APP_TOKEN (Socket Mode): set one of them"
            )
        self.settings = settings
        self.core = core
        self.client = client if client is not None else web_client(settings)
        self.members = MembershipCache(self.client)
        self.work = SlackWorkers(core)
        posts = ItemPosts(self.client, core, gate=self.work.posting, finish=self.work.end_answered)
        self.answers = Answers(core=core, client=self.client, members=self.members, work=self.work, posts=posts)
        self.files = Files(settings=settings, core=core, client=self.client, work=self.work, posts=posts)
        self.feedback = Feedback(core=core, client=self.client, work=self.work)
        self.slash = SlashCommand(core=core, client=self.client, members=self.members, work=self.work, posts=posts)
        self.pane = AssistantPane(core=core, client=self.client, members=self.members, work=self.work, posts=posts)
        secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else None
        _quiet_bolt_token_warning()
        self.app = App(
            name="citebot",
            client=self.client,
            signing_secret=secret,
            # Socket Mode needs no signature (the socket is authenticated by the app token).
            request_verification_enabled=secret is not None,
            process_before_response=True,
        )
        self.app.use(TrackAcks(self.work.gate))
        self.app.use(LogContext())
        self.app.use(DropRedeliveries(self.work.recent))
        self.app.assistant(self.pane.middleware())
        self.app.event("app_mention")(self.answers.on_mention)
        self.app.event("message")(self._on_message)
        self.app.event("file_shared")(self.files.on_file_shared)
        self.app.event("file_deleted")(self.files.on_file_deleted)
        self.app.event("reaction_added")(self.feedback.on_reaction)
        self.app.event("reaction_removed")(self.feedback.on_reaction)
        self.app.action(FEEDBACK_ACTION)(self.feedback.on_click)
        self.app.action(re.compile(rf"^{CHOICE_ACTION}\d+$"))(self.answers.on_choice_click)
        self.app.view(FEEDBACK_MODAL)(self.feedback.on_form)
        self.app.command("/citebot")(self.slash.on_command)
        self.app.error(self._on_error)
        # takes over what a killed bot left in the journal, at once
        self.work.start([*self.answers.kinds(), *self.files.kinds(), *self.slash.kinds(), *self.feedback.kinds(),
                         *self.pane.kinds()])

    # --- lifecycle -------------------------------------------------------------------------------
    def wait_idle(self, timeout_s: float = 60.0) -> bool:
        """Block until no journaled work is pending or running (for tests and benchmarks)."""
        return self.work.wait_idle(timeout_s)

    def drain(self, budget_s: float) -> bool:
        """SIGTERM: finish what runs within ``budget_s``, hand the rest back to the journal."""
        return self.work.drain(budget_s)

    def close(self) -> None:
        self.work.close()

    def _on_error(self, error: Exception, body: Any) -> BoltResponse:
        """Bolt's one error handler: a listener raised before its work was journaled. It survives any payload. Work
        the journal could not take (:class:`NotRecorded`) is refused with 503 rather than acknowledged."""
        body = body if isinstance(body, dict) else {}
        if isinstance(error, NotRecorded):  # not journaled: no ack, so Slack re-sends it (to this bot or another)
            self.work.recent.discard(str(body.get("event_id") or ""))
            return BoltResponse(status=503, body="", headers={"Retry-After": "1"})
        event = _event_of(body)
        channel, ts = event.get("channel"), event.get("ts")
        log.error("slack_listener_failed", **error_fields(error))
        if event.get("type") in ("app_mention", "message") and isinstance(channel, str) and isinstance(ts, str):
            thread = event.get("thread_ts") if isinstance(event.get("thread_ts"), str) else ts
            self.work.ui.submit(self._apologise_quietly, channel, str(thread))
        # Slack would re-send only to hit the same failure: answer 200.
        return BoltResponse(status=200, body="")

    def _apologise_quietly(self, channel: str, thread_ts: str) -> None:
        try:
            self.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=APOLOGY)
        except Exception as e:  # noqa: BLE001 - best effort: the apology itself may fail
            log.warning("apology_failed", error=type(e).__name__)

    # --- messages: a question, or a file shared --------------------------------------------------
    def _on_message(self, body: dict[str, Any], context: BoltContext) -> None:
        """A person's message (``parse_message`` drops the rest, see :mod:`bot.slack.events`): files shared in
        it are indexed; a DM, or a follow-up in a thread the bot answered, is answered; other messages are
        people talking among themselves."""
        msg = parse_message(body)
        if msg is None:
            return
        if msg.subtype == "file_share":
            for shared in files_of_message(msg):
                self.files.start(shared, body)
            return
        if not msg.is_dm and mentions(msg.text, context.bot_user_id or ""):
            return  # the app_mention event for this message answers it
        if msg.is_dm:
            self.answers.start(msg, body)
        elif msg.in_thread and self.core.thread_answered("slack", msg.thread_ref):
            self.answers.start(msg, body)  # a follow-up in a thread the bot answered; others are people talking


def _event_of(body: Any) -> dict[str, Any]:
    """The ``event`` of a payload, ``{}`` when there is none or it is not an object (malformed envelopes)."""
    event = body.get("event") if isinstance(body, dict) else None
    return event if isinstance(event, dict) else {}


def build_bot(settings: Settings, core: ChatCore, client: WebClient | None = None) -> SlackBot:
    return SlackBot(settings, core, client)


def build_app(settings: Settings, core: ChatCore, client: WebClient | None = None) -> App:
    """The Bolt app with every Citebot listener; its worker pool lives as long as the process."""
    return build_bot(settings, core, client).app
