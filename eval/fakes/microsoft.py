"""Local stand-ins for the Microsoft services the Teams bot talks to, for tests and the loopback benchmark.

:class:`FakeMicrosoft` is one HTTP server on 127.0.0.1 speaking the real wire formats of

* the Bot Connector (``serviceUrl``): ``POST /v3/conversations/{id}/activities[/{replyToId}]``,
  ``PUT /v3/conversations/{id}/activities/{activityId}``, ``GET /v3/teams/{teamId}``;
* the Entra ID token endpoint: ``POST /{tenant}/oauth2/v2.0/token`` (client credentials);
* Microsoft Graph: ``GET /v1.0/teams/{group}/channels/{channel}/filesFolder`` and
  ``GET /v1.0/drives/{drive}/items/{folder}/children`` (paged with ``@odata.nextLink``);
* file downloads: ``GET /files/{key}`` (the ``downloadUrl`` of a Teams file attachment).

It records every call (with a monotonic timestamp) so tests can wait for a reply with a timeout. Streamed bot
messages follow Teams' rules (activities with a ``streaminfo`` entity): one-on-one chats only (a personal chat's
conversation id starts ``a:``); the first update's id is the ``streamId`` every later one and the ``final``
message carry; each update's ``streamSequence`` is higher and its text holds the text before; nothing follows the
final message. A streamed activity that breaks a rule is refused as Teams refuses it (400 or 403, error body).
:class:`AppThread` runs an aiohttp app on its own event loop in a thread, as ``serve`` would.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from aiohttp import web

FAKE_TOKEN = "fake-graph-token"  # noqa: S105 - a fake for the fake token endpoint


@dataclass
class Call:
    method: str
    path: str
    body: dict[str, Any]
    at: float
    conversation_id: str = ""
    reply_to_id: str = ""
    activity_id: str = ""
    response_id: str = ""
    authorization: str = ""  # the request's Authorization header (the bot's Bot Connector token, if any)

    @property
    def kind(self) -> str:
        """``send``, ``reply``, ``update``, ``team`` or ``other``."""
        if not self.path.startswith("/v3/conversations/"):
            return "team" if self.path.startswith("/v3/teams/") else "other"
        if self.method == "PUT":
            return "update"
        return "reply" if self.reply_to_id else "send"

    @property
    def type(self) -> str:
        return str(self.body.get("type") or "")

    @property
    def text(self) -> str:
        return str(self.body.get("text") or "")


@dataclass
class ChannelFolder:
    drive_id: str
    folder_id: str
    files: list[str] = field(default_factory=list)  # keys into FakeMicrosoft.files


class FakeMicrosoft:
    def __init__(self, *, client_id: str = "", client_secret: str = "", page_size: int = 2) -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.page_size = page_size
        self.files: dict[str, bytes] = {}
        self.team_groups: dict[str, str] = {}  # Bot Framework team id -> Microsoft 365 group id
        self.channel_folders: dict[tuple[str, str], ChannelFolder] = {}  # (group id, channel id) -> folder
        self.file_authors: dict[str, str] = {}  # file key -> Entra object id of the user who added it (createdBy)
        self.download_delay_s = 0.0
        self.calls: list[Call] = []
        self.token_requests = 0
        self.token_scopes: list[str] = []  # the scope of each token request (Graph's, the Bot Connector's)
        self.streams: dict[str, dict[str, Any]] = {}  # streamId -> sequence, text, ended
        self._ids = itertools.count(1000)
        self._cond = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-microsoft", daemon=True)

    # --- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> FakeMicrosoft:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def service_url(self) -> str:
        return self.url + "/"

    @property
    def graph_url(self) -> str:
        return self.url + "/v1.0/"

    @property
    def token_url(self) -> str:
        return self.url + "/{tenant}/oauth2/v2.0/token"

    def file_url(self, key: str) -> str:
        return f"{self.url}/files/{key}"

    @staticmethod
    def web_url(key: str) -> str:
        """Where a person opens a channel file in SharePoint (a driveItem's ``webUrl``; never fetched)."""
        return f"https://contoso.sharepoint.invalid/sites/team/Shared%20Documents/General/{quote(key)}"

    # --- inspection ----------------------------------------------------------------------------
    def connector_calls(self) -> list[Call]:
        with self._cond:
            return [c for c in self.calls if c.path.startswith("/v3/conversations/")]

    def wait_for(self, predicate: Callable[[Call], bool], *, count: int = 1, timeout: float = 30.0) -> list[Call]:
        """Block until ``count`` recorded calls match ``predicate``; raise TimeoutError otherwise."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [c for c in self.calls if predicate(c)]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"only {len(found)} of {count} expected calls after {timeout:.0f} s")
                self._cond.wait(left)

    def stop_stream(self, stream_id: str) -> None:
        """The asker pressed Stop on a streaming message (or Teams' time limit for a stream ran out): the stream
        ends where it is, and Teams refuses anything more on it, its final message too."""
        with self._cond:
            self.streams[stream_id]["ended"] = True

    def _record(self, call: Call) -> None:
        with self._cond:
            self.calls.append(call)
            self._cond.notify_all()

    def _stream_rule(self, conversation_id: str, body: dict[str, Any]) -> tuple[int, str, str] | None:
        """Apply Teams' streaming rules to a posted activity: None if it may go, else (status, code, message)."""
        info = _stream_info(body)
        if info is None:
            return None
        if not conversation_id.startswith("a:"):
            return 400, "BadArgument", "Streaming API is not enabled for this conversation type"
        kind, stream_id, text = info.get("streamType"), str(info.get("streamId") or ""), str(body.get("text") or "")
        with self._cond:
            if not stream_id:
                if kind == "final":
                    return 400, "BadArgument", "A final streamed message needs a streamId"
                return None  # the stream starts; its id is the one this post gets (see do_POST)
            stream = self.streams.get(stream_id)
            if stream is None:
                return 400, "BadArgument", "Unknown streamId"
            if stream["ended"]:
                return 403, "ContentStreamNotAllowed", "Content stream is not allowed on a completed streamed message"
            if kind == "final":
                stream["ended"] = True
                return None
            sequence = int(info.get("streamSequence") or 0)
            if sequence <= stream["sequence"]:
                return 400, "BadArgument", "ContentStreamSequenceOrderPreConditionFailed"
            if kind == "streaming" and not text.startswith(stream["text"]):
                return 400, "BadArgument", "A streamed update must hold the content streamed before it"
            stream.update(sequence=sequence, text=text if kind == "streaming" else stream["text"])
        return None

    def _stream_started(self, stream_id: str, body: dict[str, Any]) -> None:
        info = _stream_info(body)
        if info is not None and not info.get("streamId"):
            with self._cond:
                self.streams[stream_id] = {"sequence": int(info.get("streamSequence") or 0), "ended": False,
                                           "text": str(body.get("text") or "") if info.get("streamType") == "streaming"
                                           else ""}

    # --- HTTP ----------------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
                return

            def _json(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def do_POST(self) -> None:
                path = urlsplit(self.path).path
                raw = self._body()
                if path.endswith("/oauth2/v2.0/token"):
                    fake.token_requests += 1
                    form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                    fake.token_scopes.append(form.get("scope", ""))
                    ok = (
                        form.get("grant_type") == "client_credentials"
                        and form.get("client_id") == fake.client_id
                        and form.get("client_secret") == fake.client_secret
                    )
                    if not ok:
                        self._json(401, {"error": "invalid_client"})
                        return
                    self._json(200, {"access_token": FAKE_TOKEN, "token_type": "Bearer", "expires_in": 3599})
                    return
                parts = path.split("/")
                if len(parts) >= 5 and parts[1] == "v3" and parts[2] == "conversations" and parts[4] == "activities":
                    body = json.loads(raw or b"{}")
                    new_id = str(next(fake._ids))
                    refused = fake._stream_rule(unquote(parts[3]), body)
                    if refused is not None:
                        fake._record(Call("POST#refused", path, body, time.perf_counter(),
                                          conversation_id=unquote(parts[3])))
                        self._json(refused[0], {"error": {"code": refused[1], "message": refused[2]}})
                        return
                    info = _stream_info(body)
                    if info is not None and info.get("streamId"):
                        new_id = str(info["streamId"])
                    call = Call(
                        "POST",
                        path,
                        body,
                        time.perf_counter(),
                        conversation_id=unquote(parts[3]),
                        reply_to_id=unquote(parts[5]) if len(parts) > 5 else "",
                        response_id=new_id,
                        authorization=self.headers.get("Authorization") or "",
                    )
                    fake._stream_started(new_id, body)
                    fake._record(call)
                    self._json(200, {"id": new_id})
                    return
                self._json(404, {"error": {"code": "NotFound"}})

            def do_PUT(self) -> None:
                path = urlsplit(self.path).path
                parts = path.split("/")
                body = json.loads(self._body() or b"{}")
                if len(parts) == 6 and parts[1] == "v3" and parts[4] == "activities":
                    call = Call(
                        "PUT",
                        path,
                        body,
                        time.perf_counter(),
                        conversation_id=unquote(parts[3]),
                        activity_id=unquote(parts[5]),
                        response_id=unquote(parts[5]),
                        authorization=self.headers.get("Authorization") or "",
                    )
                    fake._record(call)
                    self._json(200, {"id": unquote(parts[5])})
                    return
                self._json(404, {"error": {"code": "NotFound"}})

            def do_GET(self) -> None:
                split = urlsplit(self.path)
                parts = split.path.split("/")
                if split.path.startswith("/files/"):
                    key = unquote(split.path[len("/files/") :])
                    if fake.download_delay_s:
                        time.sleep(fake.download_delay_s)
                    data = fake.files.get(key)
                    if data is None:
                        self._json(404, {"error": "not found"})
                        return
                    self.send_response(200)
                    self.send_header("Content-Type", "application/octet-stream")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if split.path.startswith("/v3/teams/"):
                    team_id = unquote(parts[3])
                    fake._record(Call("GET", unquote(split.path), {}, time.perf_counter()))
                    if team_id not in fake.team_groups:
                        self._json(404, {"error": {"code": "NotFound"}})
                        return
                    self._json(200, {"id": team_id, "name": "Team", "aadGroupId": fake.team_groups[team_id]})
                    return
                if split.path.startswith("/v1.0/"):
                    fake._record(Call("GET", unquote(split.path), {}, time.perf_counter()))
                    if self.headers.get("Authorization") != f"Bearer {FAKE_TOKEN}":
                        self._json(401, {"error": {"code": "InvalidAuthenticationToken"}})
                        return
                    self._graph(parts[2:], parse_qs(split.query))
                    return
                self._json(404, {"error": "not found"})

            def _graph(self, parts: list[str], query: dict[str, list[str]]) -> None:
                # teams/{group}/channels/{channel}/filesFolder
                if len(parts) == 5 and parts[0] == "teams" and parts[2] == "channels" and parts[4] == "filesFolder":
                    folder = fake.channel_folders.get((unquote(parts[1]), unquote(parts[3])))
                    if folder is None:
                        self._json(404, {"error": {"code": "itemNotFound"}})
                        return
                    self._json(
                        200,
                        {
                            "id": folder.folder_id,
                            "name": "General",
                            "folder": {"childCount": len(folder.files)},
                            "parentReference": {"driveId": folder.drive_id},
                        },
                    )
                    return
                # drives/{drive}/items/{folder}/children
                if len(parts) == 5 and parts[0] == "drives" and parts[2] == "items" and parts[4] == "children":
                    folder = next(
                        (
                            f
                            for f in fake.channel_folders.values()
                            if f.drive_id == unquote(parts[1]) and f.folder_id == unquote(parts[3])
                        ),
                        None,
                    )
                    if folder is None:
                        self._json(404, {"error": {"code": "itemNotFound"}})
                        return
                    skip = int(query.get("$skiptoken", ["0"])[0])
                    page = folder.files[skip : skip + fake.page_size]
                    items = [
                        {
                            "id": f"item-{key}",
                            "name": key,
                            "size": len(fake.files.get(key, b"")),
                            "file": {"mimeType": "application/pdf" if key.endswith(".pdf") else "text/plain"},
                            "@microsoft.graph.downloadUrl": fake.file_url(key),
                            "webUrl": fake.web_url(key),
                            **(
                                {"createdBy": {"user": {"id": fake.file_authors[key], "displayName": "someone"}}}
                                if key in fake.file_authors
                                else {"createdBy": {"application": {"id": "sharepoint", "displayName": "SharePoint"}}}
                            ),
                        }
                        for key in page
                    ]
                    body: dict[str, Any] = {"value": items}
                    if skip + fake.page_size < len(folder.files):
                        nxt = skip + fake.page_size
                        body["@odata.nextLink"] = (
                            f"{fake.graph_url}drives/{parts[1]}/items/{parts[3]}/children?$skiptoken={nxt}"
                        )
                    self._json(200, body)
                    return
                self._json(404, {"error": {"code": "itemNotFound"}})

        return Handler


def _stream_info(body: dict[str, Any]) -> dict[str, Any] | None:
    """The activity's ``streaminfo`` entity, if it is part of a streamed message."""
    return next((e for e in body.get("entities") or [] if isinstance(e, dict) and e.get("type") == "streaminfo"), None)


class AppThread:
    """Run an aiohttp app on 127.0.0.1 (random port) with its own event loop in a daemon thread."""

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()
        self._runner = web.AppRunner(app)
        self._thread = threading.Thread(target=self.loop.run_forever, name="teams-app", daemon=True)
        self.port = 0

    def __enter__(self) -> AppThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(timeout=30)
        return self

    async def _start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server  # noqa: SLF001 - aiohttp does not expose the bound port otherwise
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def run(self, coro: Any, timeout: float = 60.0) -> Any:
        """Run a coroutine on the app's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=timeout)

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(timeout=60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()
