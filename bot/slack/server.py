"""``citebot serve slack``: Socket Mode when ``SLACK_APP_TOKEN`` is set, else the Events API over HTTP.

HTTP mode is a small threaded ``http.server`` in front of ``App.dispatch`` (Bolt's own development
server is single-threaded and has no health route): ``POST /slack/events`` for events, slash
commands and interactivity; ``GET /healthz`` and ``GET /readyz`` for load balancers and probes
(:mod:`bot.health`). The server listens while the model loads; until it is ready, events get 503 and
Slack re-sends them. Listeners only acknowledge and hand work to the bot's pool, so acks stay fast under load.

The server faces the internet, so every request is bounded before Bolt checks its signature:

* **Size.** ``Content-Length`` is required (411 without it) and must be ``0..MAX_BODY_BYTES`` (413
  otherwise, before a byte of the body is read).
* **Time.** A request (request line, headers and body) must arrive within ``REQUEST_TIMEOUT_S``, a
  deadline rather than a per-read timeout, so a client dripping a byte a second is cut off too; an idle
  keep-alive connection is closed after the same time.
* **Concurrency.** At most ``MAX_CONNECTIONS`` connections are served at once, each by one of as many threads
  started with the server, and at most ``MAX_CONNECTIONS_PER_CLIENT`` from one address; more get 503 straight
  away (from a few bounded reject threads), so slow or many clients cannot use up the process's threads, nor one
  client every slot. A connection that sends nothing is closed after ``IDLE_TIMEOUT_S``. (Behind a reverse proxy
  every connection comes from the proxy's address: it gets half the slots, and its own per-client limits apply;
  loopback clients, a proxy or a load test on the same host, are bounded by the total alone.)
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import json
import queue
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import structlog
from slack_bolt import App, BoltRequest
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.health import HEALTH_PATH, READY_PATH, Health, serve_health
from connectors.log import error_fields
from connectors.settings import Settings
from connectors.state_api import StateError
from connectors.store_api import StoreError

log = structlog.get_logger(__name__)

__all__ = ["EVENTS_PATH", "HEALTH_PATH", "READY_PATH", "make_http_server", "serve"]

EVENTS_PATH = "/slack/events"
MAX_BODY_BYTES = 1_000_000  # Slack payloads are a few kB; refuse anything absurd before reading it
MAX_CONNECTIONS = 64  # connections served at once; Slack's bursts are acked in milliseconds each
REQUEST_TIMEOUT_S = 10.0  # Slack gives up after 3 s; a request still arriving after 10 s is not Slack
MAX_CONNECTIONS_PER_CLIENT = 32  # from one address: half the slots, so one client never holds them all
PER_CLIENT_EXEMPT = ("127.0.0.0/8", "::1/128")  # local processes: a sidecar proxy, `citebot bench slack`
IDLE_TIMEOUT_S = 5.0  # until the first byte of a request (a new connection, or the next on a keep-alive one)
_REJECT_THREADS = 8  # threads that answer 503 beyond MAX_CONNECTIONS; beyond those, connections are closed
_REJECT_TIMEOUT_S = 1.0
_OVERLOADED = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
)


class _DeadlineReader(io.RawIOBase):
    """Socket reads that all end by one deadline (``http.server`` only knows a per-read timeout)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.deadline = self.idle_deadline = time.monotonic()
        self.started = False  # a byte of the current request has arrived

    def start(self, timeout_s: float, idle_s: float) -> None:
        """A new request (or an idle keep-alive): its first byte within ``idle_s``, all of it within ``timeout_s``."""
        now = time.monotonic()
        self.deadline, self.idle_deadline, self.started = now + timeout_s, now + min(idle_s, timeout_s), False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = (self.deadline if self.started else self.idle_deadline) - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request took too long to arrive")
        self._sock.settimeout(remaining)
        n = self._sock.recv_into(buffer)
        self.started = self.started or n > 0
        return n


def make_http_server(
    app: App,
    host: str,
    port: int,
    *,
    max_connections: int | None = None,
    request_timeout_s: float | None = None,
    health: Health | None = None,
) -> ThreadingHTTPServer:
    """A threaded HTTP server dispatching ``/slack/events`` to ``app``; ``port=0`` picks a free one.

    ``max_connections`` and ``request_timeout_s`` default to ``MAX_CONNECTIONS`` and ``REQUEST_TIMEOUT_S``;
    ``health`` (default: ready at once) says when events may be handled.
    """
    # the events port faces the internet: it never serves /metrics (only --metrics-port or Socket Mode's port do)
    probe = (health if health is not None else Health("slack", ready=True)).metrics_elsewhere()
    slots = max_connections if max_connections is not None else MAX_CONNECTIONS
    timeout_s = request_timeout_s if request_timeout_s is not None else REQUEST_TIMEOUT_S
    per_client, idle_s = min(MAX_CONNECTIONS_PER_CLIENT, slots), IDLE_TIMEOUT_S
    exempt = [ipaddress.ip_network(n) for n in PER_CLIENT_EXEMPT]

    def capped(host: str) -> bool:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return True
        return not any(address in n for n in exempt)
    if slots < 1 or timeout_s <= 0:
        raise ValueError("max_connections must be at least 1 and request_timeout_s positive")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            self.rfile.close()  # replaced by a reader that keeps the request's deadline
            self._reader = _DeadlineReader(self.connection)
            self.rfile = io.BufferedReader(self._reader)

        def handle_one_request(self) -> None:
            self._reader.start(timeout_s, idle_s)  # for this request, or an idle keep-alive
            super().handle_one_request()  # a TimeoutError while reading closes the connection

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - no access log with query strings
            return

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            found = probe.respond(self.path)
            if found is not None:
                self._send(found[0], found[1], {"Content-Type": found[2]})
            else:
                self._send(404, b"", {})

        def do_POST(self) -> None:  # noqa: N802
            path, _, query = self.path.partition("?")
            if path != EVENTS_PATH:
                self._send(404, b"", {}, close=True)
                return
            status = self._body_length_problem()
            if status:
                self._send(status, b"", {}, close=True)  # the body stays unread: this connection is done
                return
            if not probe.ready:  # still loading the model: Slack re-sends in a moment (to a ready replica)
                self._send(503, b"", {"Retry-After": "5"}, close=True)
                return
            length = int(self.headers["Content-Length"])
            try:
                raw = self.rfile.read(length)
            except TimeoutError:
                self._send(408, b"", {}, close=True)
                return
            if len(raw) < length:  # the client hung up mid-body
                self.close_connection = True
                return
            body = raw.decode("utf-8", errors="replace")
            headers: dict[str, str | Sequence[str]] = {}
            for key in set(self.headers.keys()):
                headers[key.lower()] = self.headers.get_all(key) or []
            try:  # Bolt parses the body before it checks the signature: a body too deep to parse is no payload
                request = BoltRequest(body=body, query=query, headers=headers)
            except (ValueError, RecursionError) as e:
                log.warning("slack_bad_request", reason="body is not a Slack payload", **error_fields(e))
                self._send(400, b"", {}, close=True)
                return
            resp = app.dispatch(request)
            out = resp.body.encode("utf-8") if isinstance(resp.body, str) else json.dumps(resp.body).encode()
            self._send(resp.status, out, {k: v[0] for k, v in resp.headers.items() if v})

        def _body_length_problem(self) -> int:
            """0 when Content-Length is one number in 0..MAX_BODY_BYTES, else the status to answer."""
            values = {v.strip() for v in self.headers.get_all("Content-Length") or []}
            if self.headers.get("Transfer-Encoding") or not values:
                return 411  # chunked bodies are not read: a length up front, or nothing
            if len(values) > 1:
                return 400
            try:
                length = int(values.pop())
            except ValueError:
                return 400
            return 0 if 0 <= length <= MAX_BODY_BYTES else 413

        def _send(self, status: int, body: bytes, headers: dict[str, str], *, close: bool = False) -> None:
            self.connection.settimeout(timeout_s)  # a client that does not read its answer is let go too
            self.send_response(status)
            for key, value in headers.items():
                if key.lower() not in ("content-length", "connection"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 256  # Slack delivers bursts; the default backlog of 5 resets connections

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._handlers: list[threading.Thread] = []  # a failed bind calls server_close() before the rest is set
            super().__init__(*args, **kwargs)
            self._slots = threading.BoundedSemaphore(slots)
            self._reject_slots = threading.BoundedSemaphore(_REJECT_THREADS)
            self._per_client: dict[str, int] = {}  # open connections per client address
            self._per_client_lock = threading.Lock()
            # a thread per slot, started here and waiting for connections: a thread started per connection makes
            # the accept loop wait until each new thread runs (a hand-over of the GIL), and while answers ran that
            # put the starts of 50 requests delivered at once 0.56 s apart, their handling 18 ms at p50
            self._accepted: queue.SimpleQueue[tuple[Any, Any] | None] = queue.SimpleQueue()
            self._handlers = [
                threading.Thread(target=self._handle_accepted, daemon=True, name=f"citebot-slack-http-{n}")
                for n in range(slots)
            ]
            for thread in self._handlers:
                thread.start()

        def _take_client_slot(self, client_address: Any) -> bool:
            with self._per_client_lock:
                host = str(client_address[0])
                if self._per_client.get(host, 0) >= per_client and capped(host):
                    return False
                self._per_client[host] = self._per_client.get(host, 0) + 1
                return True

        def _give_client_slot(self, client_address: Any) -> None:
            with self._per_client_lock:
                host = str(client_address[0])
                left = self._per_client.get(host, 1) - 1
                if left > 0:
                    self._per_client[host] = left
                else:
                    self._per_client.pop(host, None)

        def process_request(self, request: Any, client_address: Any) -> None:
            if self._take_client_slot(client_address):
                if self._slots.acquire(blocking=False):
                    self._accepted.put((request, client_address))
                    return
                self._give_client_slot(client_address)
            if self._reject_slots.acquire(blocking=False):
                log.warning("slack_http_overloaded", max_connections=slots, max_per_client=per_client)
                threading.Thread(target=self._reject, args=(request,), daemon=True).start()
            else:
                self.shutdown_request(request)

        def handle_error(self, request: Any, client_address: Any) -> None:
            """One JSON log line (type and place) instead of socketserver's traceback on stderr."""
            log.error("slack_http_error", **error_fields(sys.exc_info()[1] or RuntimeError()))

        def _handle_accepted(self) -> None:
            while (accepted := self._accepted.get()) is not None:
                self.process_request_thread(*accepted)

        def process_request_thread(self, request: Any, client_address: Any) -> None:
            try:
                super().process_request_thread(request, client_address)
            finally:
                self._give_client_slot(client_address)
                self._slots.release()

        def server_close(self) -> None:
            super().server_close()
            for _ in self._handlers:  # each takes one and stops, after the connections accepted before
                self._accepted.put(None)

        def _reject(self, sock: socket.socket) -> None:
            """503, after reading what the client sent so far (closing on unread data would reset the answer)."""
            try:
                deadline = time.monotonic() + _REJECT_TIMEOUT_S
                seen = b""
                while b"\r\n\r\n" not in seen and len(seen) < 65536:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    sock.settimeout(remaining)
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    seen += chunk
                sock.settimeout(_REJECT_TIMEOUT_S)
                sock.sendall(_OVERLOADED)
                sock.shutdown(socket.SHUT_WR)
                while time.monotonic() < deadline and sock.recv(65536):  # a body on its way, until it hangs up
                    sock.settimeout(max(deadline - time.monotonic(), 0.01))
            except OSError:
                pass
            finally:
                self.shutdown_request(sock)
                self._reject_slots.release()

    return Server((host, port), Handler)


SOCKET_PING_S = 1.0  # slack_sdk drops a link after 4 s without a pong, or 5 failed pings: replaced within ~6 s
SOCKET_WATCH_S = 0.1
SOCKET_SILENT_S = 2.5 * SOCKET_PING_S  # no pong for this long: the link is lost (slack_sdk waits for 4 pings)


def socket_mode_handler(app: App, settings: Settings) -> Any:
    """Bolt's Socket Mode adapter (slack_sdk's built-in WebSocket client) for ``app``, pinging every
    :data:`SOCKET_PING_S`, that acknowledges every envelope: one Bolt routes to no listener (an unknown
    ``action_id``, an event Citebot does not subscribe to, a malformed payload) is logged once and acknowledged,
    so Slack does not re-send it up to its limit."""
    from slack_bolt import BoltResponse
    from slack_bolt.adapter.socket_mode import SocketModeHandler
    from slack_bolt.adapter.socket_mode.internals import run_bolt_app, send_response

    if settings.slack_app_token is None:
        raise ValueError("SLACK_APP_TOKEN (xapp-...) is needed for Socket Mode")

    class AckingHandler(SocketModeHandler):  # type: ignore[misc]
        def handle(self, client: Any, req: Any) -> None:
            start = time.time()
            payload = getattr(req, "payload", None)  # this envelope's ids on its lines, not an earlier request's
            structlog.contextvars.clear_contextvars()
            structlog.contextvars.bind_contextvars(
                platform="slack", envelope_id=str(getattr(req, "envelope_id", "") or ""),
                event_id=str(payload.get("event_id") or "") if isinstance(payload, dict) else "",
            )
            try:
                resp = run_bolt_app(self.app, req)
            except Exception as e:  # noqa: BLE001 - a payload Bolt cannot even parse
                log.info("envelope_dropped", kind=str(getattr(req, "type", "")), error=type(e).__name__)
                resp = BoltResponse(status=200, body="")
            if resp.status == 503:  # the journal did not take it (bot.journal.NotRecorded): no ack, Slack re-sends
                log.warning("envelope_not_recorded", kind=str(getattr(req, "type", "")))
                return
            if resp.status != 200:
                log.info("envelope_not_routed", kind=str(getattr(req, "type", "")), status=resp.status)
                resp = BoltResponse(status=200, body="")
            send_response(client, req, resp, start)

    def ack_unparsable(client: Any, message: dict[str, Any], raw: str | None) -> None:
        """An envelope whose payload slack_sdk cannot even make a request of (a list...): acknowledged here."""
        from slack_sdk.socket_mode.response import SocketModeResponse

        if message.get("envelope_id") and not isinstance(message.get("payload"), (dict, str)):
            log.info("envelope_dropped", kind=str(message.get("type") or ""), error="payload")
            client.send_socket_mode_response(SocketModeResponse(envelope_id=str(message["envelope_id"])))

    handler = AckingHandler(app, settings.slack_app_token.get_secret_value(), ping_interval=SOCKET_PING_S)
    handler.client.message_listeners.append(ack_unparsable)
    return handler


def link_alive(client: Any) -> bool:
    """Whether the Socket Mode link works now: connected, no FIN read on its socket, and a pong within
    :data:`SOCKET_SILENT_S`. slack_sdk itself notices a FIN or a silent link only when its pings go stale (four
    missed, ~5 s), and in that gap envelopes cannot arrive: readiness must not say otherwise. Reads slack_sdk's
    built-in session (``current_session``: its ``sock`` and ping times), which has no public view of them."""
    if not client.is_connected():
        return False
    session = client.current_session
    sock = getattr(session, "sock", None)
    if sock is None:
        return False
    last = getattr(session, "last_ping_pong_time", None) or getattr(session, "_first_ping_time", None)
    if last is not None and time.time() - float(last) > SOCKET_SILENT_S:
        return False
    try:  # peek at the TCP stream beneath the TLS one (a dup of its descriptor): b"" is the peer's FIN
        with socket.fromfd(sock.fileno(), sock.family, sock.type) as raw:
            return raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True  # nothing to read: open
    except OSError:
        return False  # reset, or closed under us


def watch_socket(handler: Any, health: Health, stop: threading.Event) -> None:
    """Ready only while the WebSocket link works: not ready from the moment it is known lost (a close frame or an
    error, at once; a FIN or a silent link, within :data:`SOCKET_WATCH_S` of :func:`link_alive` seeing it) until a
    new link is up. Each link lost and each reconnect is logged."""
    client = handler.client
    state = {"up": False, "lost_session": ""}
    lock = threading.Lock()

    def lost(how: str, *, closed: bool = False) -> None:
        """``closed``: the peer's close frame, after which slack_sdk always replaces the session: until then, this
        session is not taken for up again (its socket is still open for a moment)."""
        with lock:
            session = str(client.session_id() or "")
            if state["up"]:
                log.warning("slack_socket_lost", how=how, session=session)
            state["up"] = False
            if closed:
                state["lost_session"] = session
            health.set_not_ready()

    client.on_close_listeners.append(lambda code, reason: lost("close", closed=True))
    client.on_error_listeners.append(lambda error: lost(type(error).__name__))
    while not stop.wait(SOCKET_WATCH_S):
        with lock:
            session = str(client.session_id() or "")
            now = link_alive(client) and session != state["lost_session"]
            if now and not state["up"]:
                state["up"] = True
                health.set_ready()
                log.info("slack_socket_connected", session=session)
        if state["up"] and not now:
            lost("silent" if client.is_connected() else "closed")


def close_socket(handler: Any) -> None:
    """Stop Socket Mode with a close frame (1000) first, so Slack moves envelopes to another connection at once
    instead of waiting for the link to time out; then slack_sdk closes the socket."""
    from slack_sdk.socket_mode.builtin.frame_header import FrameHeader
    from slack_sdk.socket_mode.builtin.internals import _build_data_frame_for_sending

    session = getattr(handler.client, "current_session", None)
    if session is not None and getattr(session, "sock", None) is not None:
        try:
            with session.sock_send_lock:
                if session.sock is not None:
                    session.sock.send(_build_data_frame_for_sending(b"\x03\xe8", FrameHeader.OPCODE_CLOSE))
        except OSError as e:  # the link is gone already: nothing to tell
            log.info("slack_socket_close_frame_failed", error=type(e).__name__)
    handler.close()


def cannot_reach(settings: Settings, error: BaseException) -> str:
    return (
        f"citebot: cannot reach Slack at {settings.slack_api_url} ({type(error).__name__}): check this machine's "
        "network, DNS and proxy settings (HTTPS_PROXY), or CITEBOT_SLACK_API_URL"
    )


def rejected(variable: str, error: SlackApiError, hint: str) -> str:
    return f"citebot: Slack rejected {variable} ({error.response.get('error') or 'no reason given'}): {hint}"


FIX_BOT_CREDENTIAL = (
    "copy the Bot User OAuth Token (xoxb-...) again from the app's OAuth & Permissions page, and reinstall the app "
    "if it was removed"
)
FIX_APP_CREDENTIAL = (
    "make an app-level token with the connections:write scope on the app's Basic Information page (xapp-...), "
    "and turn Socket Mode on"
)


def check_bot_token(settings: Settings) -> str:
    """"" when Slack accepts the bot token (``auth.test``), else one line saying whether Slack could not be
    reached (network, DNS, proxy) or answered that the token is wrong."""
    from bot.slack.app import SlackConfigError, web_client

    try:
        web_client(settings).auth_test()
    except SlackConfigError as e:
        return f"citebot: {e}"
    except SlackApiError as e:
        return rejected("SLACK_BOT_TOKEN", e, FIX_BOT_CREDENTIAL)
    except (SlackClientError, OSError) as e:  # URLError, DNS failure, timeout, refused connection
        return cannot_reach(settings, e)
    return ""


def serve(
    settings: Settings, *, http: bool, host: str, port: int, health_port: int | None = None,
    metrics_port: int | None = None,
) -> int:
    """Run the Slack bot until interrupted (or SIGTERM); returns the exit status. The HTTP server (or, in Socket
    Mode, the health server on ``health_port``) listens while the model loads, so probes see it starting.
    ``/metrics`` is served on ``metrics_port`` when that is given, else only on Socket Mode's ``health_port``:
    never on the HTTP events port, which faces the internet."""
    from bot.core import ChatCore
    from bot.slack.app import SlackConfigError, build_bot

    socket_mode = settings.slack_app_token is not None and not http
    if not socket_mode and settings.slack_signing_secret is None:
        print(
            "citebot: set SLACK_SIGNING_SECRET for HTTP mode, or SLACK_APP_TOKEN (xapp-...) for Socket Mode",
            file=sys.stderr,
        )
        return 2
    problem = check_bot_token(settings)  # before the model loads: a wrong token should not take ten seconds
    if problem:
        print(problem, file=sys.stderr)
        return 2
    try:
        core = ChatCore.from_settings(settings)
        bot = build_bot(settings, core)
    except (SlackConfigError, StoreError, StateError) as e:  # their messages name the file or setting to fix
        print(f"citebot: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - Bolt raises BoltError on a rejected token at start-up
        print(f"citebot: could not start the Slack app ({type(e).__name__}); check SLACK_BOT_TOKEN", file=sys.stderr)
        return 2
    health = Health("slack")
    health.require("journal", lambda: bot.work.journal.writable)  # 503 while acks could not be journaled
    metrics_server = serve_health(health, host, metrics_port) if metrics_port is not None else None
    probe = health.metrics_elsewhere() if metrics_server is not None else health
    if socket_mode:
        server = serve_health(probe, host, health_port) if health_port is not None else None
    else:
        server = make_http_server(bot.app, host, port, health=probe)
    stop = threading.Event()

    def _stop(*_: object) -> None:
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop)
    for listener in (server, metrics_server):
        if listener is not None:
            threading.Thread(target=listener.serve_forever, daemon=True).start()
    try:
        log.info("warming_up")
        core.service.warm_up()
        if not socket_mode:
            health.set_ready()
        if socket_mode:
            handler = socket_mode_handler(bot.app, settings)
            try:
                handler.connect()
            except SlackApiError as e:
                print(rejected("SLACK_APP_TOKEN", e, FIX_APP_CREDENTIAL), file=sys.stderr)
                return 2
            except (SlackClientError, OSError) as e:
                print(cannot_reach(settings, e), file=sys.stderr)
                return 2
            log.info("slack_socket_mode_started", workers=settings.slack_workers, health_port=health_port)
            threading.Thread(target=watch_socket, args=(handler, health, stop), daemon=True).start()
            try:
                stop.wait()
            except KeyboardInterrupt:
                pass
            finally:
                health.set_not_ready()
                close_socket(handler)  # intake stops: Slack sends the next envelopes to another connection
                _drain(bot, settings)
            return 0
        assert server is not None
        log.info("slack_http_started", host=host, port=server.server_address[1], workers=settings.slack_workers,
                 upload_workers=settings.upload_workers)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
        health.set_not_ready()
        server.shutdown()  # intake stops (Slack re-sends to a ready replica); what was acknowledged is journaled
        server.server_close()
        server = None
        _drain(bot, settings)
        return 0
    finally:
        for listener in (server, metrics_server):
            if listener is not None:
                listener.shutdown()
                listener.server_close()
        bot.close()


def _drain(bot: Any, settings: Settings) -> None:
    """The bounded stop: running work may finish within ``CITEBOT_DRAIN_S``; the rest goes back to the journal
    for another replica, or this bot's next start."""
    log.info("draining", budget_s=settings.drain_s)
    bot.drain(settings.drain_s)
