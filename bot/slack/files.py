"""PDFs shared in Slack: indexed into the channel's scope (kind ``slack.ingest``, on the uploads lane), with a
status message updated in place as the work goes on; a deleted file is forgotten (``slack.forget_file``).

The upload itself (size cap, download, index, the texts) is the chat core's (:meth:`bot.core.ChatCore.ingest`);
what stays here is Slack's own: which share is which, the file's host, the status message.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import structlog
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.core import ChatContext, ChatCore, ClaimKey
from bot.journal import Kind, QueueFull
from bot.slack.events import (
    FileShared,
    SlackFile,
    files_of_message,
    parse_file_deleted,
    parse_file_shared,
    parse_message,
)
from bot.slack.items import ItemPosts, event_key, is_admin
from bot.slack.render import plain
from bot.slack.workers import SlackWorkers
from bot.texts import EXTERNAL_FILE_TEXT, INGEST_FAILED_TEXT, UPLOADS_BUSY_TEXT, indexing_text, progress_text
from connectors.download import download, host_of, may_receive_credentials
from connectors.settings import Settings
from connectors.state_api import WorkItem
from pipelines.models import IngestProgress

log = structlog.get_logger(__name__)

PROGRESS_MIN_INTERVAL_S = 1.0
# Slack serves uploaded files from this host; the bot token is sent nowhere else.
SLACK_FILE_HOST = "files.slack.com"


class Files:
    """The file listeners and the workers that index and forget."""

    def __init__(self, *, settings: Settings, core: ChatCore, client: WebClient, work: SlackWorkers,
                 posts: ItemPosts) -> None:
        self.settings, self.core, self.client, self.work, self.posts = settings, core, client, work, posts

    def kinds(self) -> list[Kind]:
        return [
            Kind("slack.ingest", self.run_ingest, self.give_up_ingest),
            Kind("slack.forget_file", self.run_forget_file),
        ]

    # --- listeners (the request's thread: cheap, then the ack) ------------------------------------
    def on_file_shared(self, body: dict[str, Any]) -> None:
        shared = parse_file_shared(body)
        if shared is not None:
            self.start(shared, body)

    def start(self, shared: FileShared, body: dict[str, Any]) -> None:
        if shared.file.complete and not shared.file.is_pdf:
            return  # other file types are none of our business
        structlog.contextvars.bind_contextvars(file_id=shared.file.id)
        # file_shared and message/file_share both announce one share: ingest it once per channel.
        key = str(ClaimKey.slack_file(shared.team, shared.channel, shared.file.id))
        if self.work.uploads_waiting() >= self.settings.upload_queue:
            log.warning("upload_queue_full", waiting=self.settings.upload_queue)
            self.work.ui.submit(self._say_busy, shared)
            return
        try:
            self.work.accept(key, "slack.ingest", {"body": body, "file_id": shared.file.id}, user=shared.user,
                             team=shared.team)
        except QueueFull:  # this person's earlier questions and files wait already: say so
            self.work.ui.submit(self.posts.say_queue_full, shared.channel, shared.user, shared.message_ts)

    def on_file_deleted(self, body: dict[str, Any]) -> None:
        deleted = parse_file_deleted(body)
        if deleted is not None:
            self.work.accept(event_key(deleted.event_id), "slack.forget_file", {"file_id": deleted.file_id})

    def _say_busy(self, shared: FileShared) -> None:
        name = shared.file.name or "your file"
        try:
            self.client.chat_postMessage(channel=shared.channel, thread_ts=shared.message_ts or None,
                                         text=plain(UPLOADS_BUSY_TEXT.format(file=name)))
        except Exception as e:  # noqa: BLE001 - best effort
            log.warning("busy_notice_failed", error=type(e).__name__)

    # --- the work (a journal worker) --------------------------------------------------------------
    @staticmethod
    def _shared_of(payload: dict[str, Any]) -> FileShared | None:
        body, file_id = payload["body"], payload.get("file_id")
        shared = parse_file_shared(body)
        if shared is not None:
            return shared
        msg = parse_message(body)
        return next((s for s in files_of_message(msg) if s.file.id == file_id), None) if msg is not None else None

    def run_ingest(self, item: WorkItem, payload: dict[str, Any]) -> None:
        shared = self._shared_of(payload)
        if shared is None:
            return
        structlog.contextvars.bind_contextvars(event_id=shared.event_id, file_id=shared.file.id, user=shared.user)
        file, thread_ts = shared.file, shared.message_ts
        if not file.complete or not thread_ts:
            info = self.client.files_info(file=file.id)["file"]
            if not file.complete:
                file = SlackFile.parse(info)
            thread_ts = thread_ts or _share_ts(info, shared.channel)
        if not file.is_pdf:
            return
        self.posts.note(item, file_name=file.name, thread_ts=thread_ts)
        where = {"channel": shared.channel, "thread_ts": thread_ts}
        if file.is_external or not self._is_slack_file_url(file.url_private_download):
            log.info("external_file_refused", external=file.is_external)
            self.posts.post_once(item, "refused_ts", **where, text=plain(EXTERNAL_FILE_TEXT.format(file=file.name)))
            return
        indexing = plain(indexing_text(file.name))
        earlier = self.posts.posted(item, "status_ts", **where)
        if earlier:  # a take-over after the first worker died: carry on in the status message it posted
            status = StatusMessage(self.client, shared.channel, earlier, text="")
            status.set(indexing, force=True)
        else:
            posted = self.posts.post(item, "status_ts", **where, text=indexing)
            status = StatusMessage(self.client, shared.channel, posted, text=indexing)
        text = self._download_and_index(shared, file, status)
        status.set(plain(text), force=True)

    def give_up_ingest(self, item: WorkItem, payload: dict[str, Any]) -> None:
        """The upload failed, or every attempt died: its status message (or a new one) says so and how to retry."""
        shared = self._shared_of(payload)
        if shared is None:
            return
        text = plain(INGEST_FAILED_TEXT.format(file=item.notes.get("file_name") or shared.file.name or "your file"))
        thread_ts = item.notes.get("thread_ts") or shared.message_ts
        status_ts = self.posts.posted(item, "status_ts", shared.channel, thread_ts)
        if status_ts:
            self.client.chat_update(channel=shared.channel, ts=status_ts, text=text)
        else:
            self.posts.post_once(item, "failed_ts", channel=shared.channel, thread_ts=thread_ts, text=text)

    @property
    def _file_hosts(self) -> set[str]:
        """Where the bot token may go: Slack's file host, and the host of the configured Web API (tests)."""
        return {SLACK_FILE_HOST, host_of(self.settings.slack_api_url)}

    def _is_slack_file_url(self, url: str) -> bool:
        """A link the bot token may follow (HTTPS on Slack's file host; plain HTTP only on a configured endpoint,
        a local test server): the download's own rule, asked before anything is posted."""
        return may_receive_credentials(url, self._file_hosts, self.settings.configured_hosts)

    def _download_and_index(self, shared: FileShared, file: SlackFile, status: StatusMessage) -> str:
        def fetch(max_bytes: int) -> bytes:
            return download(
                file.url_private_download,
                headers={"Authorization": f"Bearer {self.client.token}"},
                max_bytes=max_bytes,
                timeout_s=self.settings.download_timeout_s,
                credential_hosts=self._file_hosts,
                trusted_hosts=self.settings.configured_hosts,
            )

        def progress(p: IngestProgress) -> None:
            status.set(plain(progress_text(p)))

        return self.core.ingest(
            ChatContext("slack", shared.scope, shared.user, event_id=shared.event_id),
            file_name=file.name, fetch=fetch, size=file.size, progress=progress,
            is_admin=lambda: is_admin(self.client, shared.user), source_url=file.permalink, file_ref=file.id,
        )

    def run_forget_file(self, item: WorkItem, payload: dict[str, Any]) -> None:
        self.core.forget_file("slack", str(payload["file_id"]))


class StatusMessage:
    """A message updated in place (chat.update), at most once a second unless forced."""

    def __init__(self, client: WebClient, channel: str, ts: str, *, text: str) -> None:
        self._client, self.channel, self.ts = client, channel, ts
        self._lock = threading.Lock()
        self._last_text = text
        self._last_at = 0.0

    def set(self, text: str, *, force: bool = False) -> None:
        with self._lock:
            now = time.monotonic()
            if text == self._last_text or (not force and now - self._last_at < PROGRESS_MIN_INTERVAL_S):
                return
            self._last_text, self._last_at = text, now
        try:
            self._client.chat_update(channel=self.channel, ts=self.ts, text=text)
        except (SlackApiError, SlackClientError) as e:
            if force:
                raise
            log.info("progress_update_failed", error=type(e).__name__)


def _share_ts(info: dict[str, Any], channel: str) -> str:
    """The ts of the message that shared ``info`` (a files.info file) in ``channel``, or ""."""
    shares = info.get("shares") or {}
    for kind in ("public", "private"):
        for share in (shares.get(kind) or {}).get(channel) or []:
            if share.get("ts"):
                return str(share["ts"])
    return ""
