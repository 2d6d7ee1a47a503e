"""A local fake of the Slack Web API and of Slack's event deliveries, for tests and benchmarks.

:class:`FakeSlack` is a threaded ``http.server`` on 127.0.0.1 that speaks the Web API's wire format
(JSON or form bodies, ``Authorization: Bearer``, ``{"ok": ...}`` replies, 429 with ``Retry-After``),
serves uploaded files at ``url_private_download`` URLs (bot token required, like Slack), takes
``response_url`` posts, and records every call so a test can wait for one deterministically.

:func:`post_signed` delivers an event or slash command the way Slack does: signed with the app's
signing secret (``X-Slack-Signature`` over ``v0:{timestamp}:{body}``), optionally as a retry.
:func:`post_interaction` delivers an interaction (a button click, a modal submission) the way Slack does:
form-encoded ``payload=<json>``, signed; :func:`feedback_click`, :func:`view_submission` and
:func:`assistant_thread_event` build those payloads and events in Slack's shapes. The Socket Mode side is
:mod:`eval.fakes.slack_socket_mode`.

It keeps each of the bot's messages as people see it last (:meth:`FakeSlack.thread`): posted, edited
(``chat.update``) or streamed (``chat.startStream`` / ``chat.appendStream`` / ``chat.stopStream``, Slack's chat
streaming: a message in a thread, for a recipient when in a channel, appended to while it streams).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from slack_sdk.signature import SignatureVerifier

TEAM = "T0CITE"
BOT_USER = "UCITEBOT"
BOT_ID = "BCITEBOT"
BOT_TOKEN = "xoxb-fake-citebot-token"  # noqa: S105 - a fake token for a fake server
APP_TOKEN = "xapp-fake-citebot-token"  # noqa: S105
SIGNING_SECRET = "fake-signing-secret"  # noqa: S105


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    at: float
    authorized: bool
    reply: dict[str, Any] = field(default_factory=dict)


@dataclass
class FakeFile:
    id: str
    name: str
    data: bytes
    filetype: str = "pdf"
    mimetype: str = "application/pdf"
    shares: dict[str, str] = field(default_factory=dict)  # channel -> ts of the sharing message


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


class FakeSlack:
    """The fake Web API. ``url`` is the ``base_url`` for ``WebClient`` (``CITEBOT_SLACK_API_URL``)."""

    def __init__(self, *, team: str = TEAM, bot_user: str = BOT_USER, bot_id: str = BOT_ID, token: str = BOT_TOKEN):
        self.team, self.bot_user, self.bot_id, self.token = team, bot_user, bot_id, token
        self.calls: list[Call] = []
        self.files: dict[str, FakeFile] = {}
        self.memberships: dict[str, list[str]] = {}
        self.admins: set[str] = set()
        self.rate_limit_once: set[str] = set()
        self.fail: dict[str, str] = {}  # method -> Slack error code to answer with
        self.socket_url = ""  # what apps.connections.open hands out (see eval.fakes.slack_socket_mode.FakeSocketMode)
        self.messages: dict[str, list[dict[str, Any]]] = {}  # channel -> the bot's posts, oldest first
        # method -> until when its replies are held back (the call is done, its answer not yet on its way back),
        # e.g. to kill a bot between a post and its reply
        self.hold_replies: dict[str, threading.Event] = {}
        self._cond = threading.Condition()
        self._ts = itertools.count(1)
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FakeSlack:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeSlack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"{self.root}/api/"

    def response_url(self, name: str = "cmd") -> str:
        return f"{self.root}/respond/{name}"

    # --- test set-up -------------------------------------------------------------------------
    def add_file(self, file_id: str, name: str, data: bytes, *, filetype: str = "pdf", mimetype: str = "") -> dict:
        """Host a file and return the file object Slack would put in an event."""
        mime = mimetype or ("application/pdf" if filetype == "pdf" else "application/octet-stream")
        self.files[file_id] = FakeFile(file_id, name, data, filetype, mime)
        return self.file_object(file_id)

    def file_object(self, file_id: str) -> dict[str, Any]:
        f = self.files[file_id]
        return {
            "id": f.id,
            "name": f.name,
            "title": f.name,
            "filetype": f.filetype,
            "mimetype": f.mimetype,
            "size": len(f.data),
            "url_private": f"{self.root}/files/{f.id}/{urllib.parse.quote(f.name)}",
            "url_private_download": f"{self.root}/files/{f.id}/download/{urllib.parse.quote(f.name)}",
            # where a person opens it in Slack (never fetched by the bot)
            "permalink": f"https://fake.slack.invalid/files/{BOT_USER}/{f.id}/{urllib.parse.quote(f.name)}",
            "shares": {"public": {ch: [{"ts": ts}] for ch, ts in f.shares.items()}},
        }

    # --- inspection --------------------------------------------------------------------------
    def calls_to(self, method: str, **match: Any) -> list[Call]:
        with self._cond:
            return [c for c in self.calls if c.method == method and _matches(c.params, match)]

    def wait_for(self, method: str, count: int = 1, *, timeout: float = 60.0, **match: Any) -> list[Call]:
        """Block until ``count`` calls of ``method`` (with params equal to ``match``) were recorded."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [c for c in self.calls if c.method == method and _matches(c.params, match)]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [c.method for c in self.calls]
                    raise TimeoutError(f"waited {timeout:.0f} s for {count} x {method} {match}; calls so far: {seen}")
                self._cond.wait(left)

    def wait_until(self, predicate: Callable[[], bool], *, timeout: float = 60.0) -> None:
        """Block until ``predicate()`` holds; re-checked whenever a call is recorded (and every 50 ms)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"condition not met within {timeout:.0f} s")
                self._cond.wait(min(left, 0.05))

    def _record(
        self, method: str, params: dict[str, Any], authorized: bool, reply: dict[str, Any] | None = None
    ) -> None:
        with self._cond:
            self.calls.append(Call(method, params, time.monotonic(), authorized, reply or {}))
            self._cond.notify_all()

    # --- the Web API -------------------------------------------------------------------------
    def _reply(self, method: str, p: dict[str, Any]) -> dict[str, Any]:
        if method in self.fail:
            return {"ok": False, "error": self.fail[method]}
        if method == "apps.connections.open":
            return {"ok": True, "url": self.socket_url} if self.socket_url else {"ok": False, "error": "no_socket"}
        if method == "auth.test":
            return {
                "ok": True,
                "url": "https://fake.slack.invalid/",
                "team": "Fake",
                "user": "citebot",
                "team_id": self.team,
                "user_id": self.bot_user,
                "bot_id": self.bot_id,
            }
        if method == "chat.postMessage":
            ts = f"{int(time.time())}.{next(self._ts):06d}"
            message: dict[str, Any] = {"type": "message", "text": p.get("text"), "ts": ts, "bot_id": self.bot_id}
            if p.get("thread_ts"):
                message["thread_ts"] = str(p["thread_ts"])
            for key in ("metadata", "blocks"):
                if p.get(key):
                    message[key] = p[key]
            with self._cond:
                self.messages.setdefault(str(p.get("channel")), []).append(message)
            return {"ok": True, "channel": p.get("channel"), "ts": ts, "message": {"text": p.get("text"), "ts": ts}}
        if method in ("conversations.replies", "conversations.history"):
            return {"ok": True, "messages": self._history(p), "has_more": False}
        if method == "chat.update":
            with self._cond:
                found = self._message(p)
                if found is not None:
                    found.update({k: p[k] for k in ("text", "blocks", "metadata") if p.get(k) is not None})
            return {"ok": True, "channel": p.get("channel"), "ts": p.get("ts"), "text": p.get("text")}
        if method.startswith("chat.") and method.endswith("Stream"):
            return self._stream(method, p)
        if method == "views.open":
            if not p.get("trigger_id"):
                return {"ok": False, "error": "invalid_trigger_id"}
            view = p.get("view")
            view = json.loads(view) if isinstance(view, str) else view
            return {"ok": True, "view": {"id": f"V{next(self._ts):08d}", **(view or {})}}
        if method in ("assistant.threads.setStatus", "assistant.threads.setSuggestedPrompts"):
            if not p.get("channel_id") or not p.get("thread_ts"):
                return {"ok": False, "error": "invalid_arguments"}
            return {"ok": True}
        if method == "users.conversations":
            channels = [{"id": c} for c in self.memberships.get(str(p.get("user")), [])]
            return {"ok": True, "channels": channels, "response_metadata": {"next_cursor": ""}}
        if method == "users.info":
            user = str(p.get("user"))
            admin = user in self.admins
            return {"ok": True, "user": {"id": user, "is_admin": admin, "is_owner": False}}
        if method == "files.info":
            file_id = str(p.get("file"))
            if file_id not in self.files:
                return {"ok": False, "error": "file_not_found"}
            return {"ok": True, "file": self.file_object(file_id)}
        return {"ok": True}

    def _message(self, p: dict[str, Any]) -> dict[str, Any] | None:
        """The bot's message ``p`` names by channel and ts (under ``_cond``)."""
        return next((m for m in self.messages.get(str(p.get("channel")), []) if m["ts"] == str(p.get("ts"))), None)

    def _stream(self, method: str, p: dict[str, Any]) -> dict[str, Any]:
        """chat.startStream / chat.appendStream / chat.stopStream, with Slack's rules: a stream is a reply in a
        thread, for a recipient (user and team) outside a DM; only a message still streaming takes more text."""
        text = str(p.get("markdown_text") or "") + "".join(
            str(c.get("text") or "") for c in p.get("chunks") or [] if c.get("type") == "markdown_text")
        channel = str(p.get("channel") or "")
        with self._cond:
            if method == "chat.startStream":
                if not channel or not p.get("thread_ts"):
                    return {"ok": False, "error": "invalid_arguments"}
                if not channel.startswith("D") and not (p.get("recipient_user_id") and p.get("recipient_team_id")):
                    return {"ok": False, "error": "invalid_arguments"}
                ts = f"{int(time.time())}.{next(self._ts):06d}"
                self.messages.setdefault(channel, []).append({
                    "type": "message", "text": text, "ts": ts, "bot_id": self.bot_id,
                    "thread_ts": str(p["thread_ts"]), "streaming": True})
                return {"ok": True, "channel": channel, "ts": ts}
            found = self._message(p)
            if found is None:
                return {"ok": False, "error": "message_not_found"}
            if not found.get("streaming"):
                return {"ok": False, "error": "message_not_in_streaming_state"}
            found["text"] = str(found.get("text") or "") + text
            if method == "chat.stopStream":
                found["streaming"] = False
                for key in ("blocks", "metadata"):
                    if p.get(key):
                        found[key] = p[key]
            return {"ok": True, "channel": channel, "ts": found["ts"]}

    def thread(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        """The bot's messages in a thread as people see them now (after edits and streams), oldest first."""
        with self._cond:
            return [dict(m) for m in self.messages.get(channel, []) if m.get("thread_ts") == thread_ts]

    def _history(self, p: dict[str, Any]) -> list[dict[str, Any]]:
        """The bot's posts of a channel (``conversations.history``, newest first) or of one thread
        (``conversations.replies`` with ``ts``, oldest first); ``metadata`` only with ``include_all_metadata``."""
        with self._cond:
            posted = list(self.messages.get(str(p.get("channel")), []))
        if p.get("ts"):
            posted = [m for m in posted if m.get("thread_ts") == str(p["ts"]) or m["ts"] == str(p["ts"])]
        else:
            posted.reverse()
        if str(p.get("include_all_metadata")).lower() not in ("1", "true"):
            posted = [{k: v for k, v in m.items() if k != "metadata"} for m in posted]
        return posted[: int(p.get("limit") or 100)]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

            def _authorized(self) -> bool:
                auth = self.headers.get("Authorization")
                if self.path.startswith("/api/apps.connections.open"):
                    return auth == f"Bearer {APP_TOKEN}"  # the app-level token, not the bot's
                return auth == f"Bearer {fake.token}"

            def _params(self) -> dict[str, Any]:
                path, _, query = self.path.partition("?")
                params: dict[str, Any] = {k: v[0] for k, v in urllib.parse.parse_qs(query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                ctype = self.headers.get("Content-Type", "")
                if raw and "json" in ctype:
                    params.update(json.loads(raw))
                elif raw:
                    params.update({k: v[0] for k, v in urllib.parse.parse_qs(raw.decode()).items()})
                for key in ("blocks", "view", "prompts", "loading_messages", "metadata", "chunks"):
                    if isinstance(params.get(key), str):
                        params[key] = json.loads(params[key])
                return params

            def _send(self, status: int, body: bytes, ctype: str = "application/json", **headers: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers.items():
                    self.send_header(k.replace("_", "-"), v)
                self.end_headers()
                self.wfile.write(body)

            def _api(self) -> None:
                path = self.path.partition("?")[0]
                params = self._params()
                if path.startswith("/respond/"):
                    fake._record("response_url", {"name": path.rsplit("/", 1)[-1], **params}, True)
                    self._send(200, b"ok", "text/plain")
                    return
                if not path.startswith("/api/"):
                    self._send(404, b"")
                    return
                method = path[len("/api/") :]
                if method in fake.rate_limit_once:
                    fake.rate_limit_once.discard(method)
                    fake._record(f"{method}#429", params, self._authorized())
                    self._send(429, b'{"ok":false,"error":"ratelimited"}', Retry_After="1")
                    return
                authorized = self._authorized()
                reply = fake._reply(method, params) if authorized else {"ok": False, "error": "invalid_auth"}
                fake._record(method, params, authorized, reply)
                held = fake.hold_replies.get(method)
                if held is not None:
                    held.wait(120)
                self._send(200, json.dumps(reply).encode())

            def do_POST(self) -> None:  # noqa: N802
                self._api()

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.partition("?")[0]
                if not path.startswith("/files/"):
                    self._api()
                    return
                file_id = path.split("/")[2]
                fake._record("file.download", {"file": file_id}, self._authorized())
                held = fake.hold_replies.get("file.download")  # a slow file host: the download waits
                if held is not None:
                    held.wait(120)
                f = fake.files.get(file_id)
                if not self._authorized():  # Slack answers a login page to a request without the token
                    self._send(200, b"<!DOCTYPE html><html>Sign in to Slack</html>", "text/html")
                elif f is None:
                    self._send(404, b"")
                else:
                    self._send(200, f.data, f.mimetype)

        return Handler


def _matches(params: dict[str, Any], match: dict[str, Any]) -> bool:
    return all(params.get(k) == v for k, v in match.items())


# --- deliveries ----------------------------------------------------------------------------------


def sign(body: str, *, secret: str = SIGNING_SECRET, timestamp: int | None = None) -> dict[str, str]:
    """The headers Slack puts on a delivery of ``body``."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": signature or ""}


def post_signed(
    url: str,
    payload: dict[str, Any],
    *,
    secret: str = SIGNING_SECRET,
    form: bool = False,
    retry_num: int | None = None,
    timeout: float = 10.0,
) -> tuple[int, bytes]:
    """POST ``payload`` to the bot like Slack: JSON (events) or form-encoded (slash commands), signed."""
    body = urllib.parse.urlencode(payload) if form else json.dumps(payload)
    headers = {
        "Content-Type": "application/x-www-form-urlencoded" if form else "application/json",
        **sign(body, secret=secret),
    }
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
        headers["X-Slack-Retry-Reason"] = "http_timeout"
    req = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - loopback only
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def post_interaction(url: str, payload: dict[str, Any], *, secret: str = SIGNING_SECRET) -> tuple[int, bytes]:
    """POST an interaction payload (``block_actions``, ``view_submission``) as Slack does: ``payload=<json>``."""
    return post_signed(url, {"payload": json.dumps(payload)}, secret=secret, form=True)


def feedback_click(
    *, user: str, channel: str, message_ts: str, value: str, action_id: str, thread_ts: str = "",
    team: str = TEAM, trigger_id: str = "13345224609.738474920.8088930838d88f008e0", block_id: str = "fb",
    ephemeral: bool = False,
) -> dict[str, Any]:
    """A ``block_actions`` payload for a click on a ``feedback_buttons`` element of a bot message; of an
    ephemeral message (a slash command's private answer), Slack sends no ``message``, only the container."""
    message: dict[str, Any] = {"type": "message", "user": BOT_USER, "bot_id": BOT_ID, "ts": message_ts}
    if thread_ts:
        message["thread_ts"] = thread_ts
    payload = {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "team_id": team},
        "api_app_id": "ACITEBOT",
        "token": "unused-verification-token",
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": ephemeral},
        "trigger_id": trigger_id,
        "team": {"id": team, "domain": "fake"},
        "channel": {"id": channel, "name": "channel"},
        "message": message,
        "actions": [
            {"type": "feedback_buttons", "action_id": action_id, "block_id": block_id, "value": value,
             "action_ts": f"{time.time():.6f}"}
        ],
    }
    if ephemeral:
        del payload["message"]
    return payload


def button_click(
    *, user: str, channel: str, message_ts: str, action_id: str, value: str, thread_ts: str = "", team: str = TEAM,
    block_id: str = "citebot_choices", ephemeral: bool = False, response_url: str = "",
) -> dict[str, Any]:
    """A ``block_actions`` payload for a click on a ``button`` element of a bot message (in a thread when
    ``thread_ts``; of an ephemeral message when ``ephemeral``), with Slack's ``response_url`` when given."""
    payload = feedback_click(user=user, channel=channel, message_ts=message_ts, value=value, action_id=action_id,
                             thread_ts=thread_ts, team=team, block_id=block_id, ephemeral=ephemeral)
    payload["actions"][0]["type"] = "button"
    if response_url:
        payload["response_url"] = response_url
    return payload


def view_submission(view: dict[str, Any], *, user: str, values: dict[str, Any], team: str = TEAM) -> dict[str, Any]:
    """A ``view_submission`` payload for ``view`` (as ``views.open`` was given it) with the person's input."""
    return {
        "type": "view_submission",
        "team": {"id": team, "domain": "fake"},
        "user": {"id": user, "username": user.lower(), "team_id": team},
        "api_app_id": "ACITEBOT",
        "token": "unused-verification-token",
        "trigger_id": "13345224609.738474920.view",
        "view": {**view, "id": "VFAKEVIEW", "team_id": team, "state": {"values": values}},
    }


def assistant_thread_event(
    kind: str, *, user: str, dm_channel: str, thread_ts: str, context_channel: str = "", team: str = TEAM
) -> dict[str, Any]:
    """``assistant_thread_started`` or ``assistant_thread_context_changed``."""
    context = {"channel_id": context_channel, "team_id": team, "enterprise_id": None} if context_channel else {}
    return {
        "type": kind,
        "assistant_thread": {"user_id": user, "context": context, "channel_id": dm_channel, "thread_ts": thread_ts},
        "event_ts": f"{time.time():.6f}",
    }


_event_ids = itertools.count(1)


def event_callback(event: dict[str, Any], *, team: str = TEAM, event_id: str | None = None) -> dict[str, Any]:
    """Wrap ``event`` in the Events API envelope."""
    return {
        "token": "unused-verification-token",
        "team_id": team,
        "api_app_id": "ACITEBOT",
        "event": event,
        "type": "event_callback",
        "event_id": event_id or f"Ev{next(_event_ids):08d}{int(time.time() * 1000) % 100000}",
        "event_time": int(time.time()),
        "authorizations": [{"team_id": team, "user_id": BOT_USER, "is_bot": True}],
    }


def mention(channel: str, user: str, text: str, ts: str, *, thread_ts: str | None = None) -> dict[str, Any]:
    event = {"type": "app_mention", "user": user, "text": f"<@{BOT_USER}> {text}", "ts": ts, "channel": channel}
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


def message(
    channel: str, user: str, text: str, ts: str, *, thread_ts: str | None = None, channel_type: str = "channel"
) -> dict[str, Any]:
    event = {
        "type": "message",
        "user": user,
        "text": text,
        "ts": ts,
        "channel": channel,
        "channel_type": channel_type,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event
