"""Both bots answer ``GET /healthz`` and ``GET /readyz`` with one shape, and take no work before they are ready."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from slack_bolt import App
from slack_sdk import WebClient

from bot.core import ChatCore
from bot.health import Health, serve_health
from bot.slack.app import build_bot
from bot.slack.server import make_http_server
from bot.teams.server import build_app
from connectors.settings import Settings
from eval.fakes.microsoft import AppThread
from eval.fakes.slack_api import BOT_TOKEN, SIGNING_SECRET, FakeSlack, event_callback, mention, post_signed

BASE_KEYS = {"status", "platform", "ready", "version"}


def get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - loopback only
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_slack_http_server_is_live_at_once_and_ready_after_warm_up(tmp_path: Path) -> None:
    with FakeSlack() as fake:
        settings = Settings(_env_file=None, data_dir=tmp_path, slack_bot_token=BOT_TOKEN,  # type: ignore[call-arg]
                            slack_signing_secret=SIGNING_SECRET, slack_api_url=fake.url)
        bot = build_bot(settings, ChatCore.from_settings(settings))
        health = Health("slack")
        server = make_http_server(bot.app, "127.0.0.1", 0, health=health)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        root = f"http://127.0.0.1:{server.server_address[1]}"
        try:
            status, live = get(f"{root}/healthz")
            assert status == 200 and live["status"] == "ok" and live["platform"] == "slack" and not live["ready"]
            assert set(live) == BASE_KEYS
            assert get(f"{root}/readyz") == (503, {**live, "status": "starting"})
            # an event before the model is loaded: 503, so Slack re-sends it (to this or a ready replica)
            delivery = event_callback(mention("C1", "U1", "How many days of leave?", "1.000001"))
            assert post_signed(f"{root}/slack/events", delivery)[0] == 503
            assert fake.calls_to("chat.postMessage") == []

            health.set_ready()
            status, ready = get(f"{root}/readyz")
            assert (status, ready["status"], ready["ready"]) == (200, "ready", True)
            assert get(f"{root}/healthz")[1]["ready"] is True
        finally:
            server.shutdown()
            server.server_close()
            bot.close()


def test_teams_app_answers_the_same_shape_and_refuses_activities_until_ready(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, data_dir=tmp_path)  # type: ignore[call-arg]
    health = Health("teams")
    with AppThread(build_app(settings, ChatCore.from_settings(settings), insecure_local=True, health=health)) as app:
        status, live = get(f"{app.url}/healthz")
        assert status == 200 and live["status"] == "ok" and live["platform"] == "teams" and not live["ready"]
        assert set(live) == BASE_KEYS | {"authenticated"}
        assert get(f"{app.url}/readyz")[0] == 503
        req = urllib.request.Request(f"{app.url}/api/messages", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=10)  # noqa: S310
            raise AssertionError("expected 503")
        except urllib.error.HTTPError as e:
            assert e.code == 503
        health.set_ready()
        status, ready = get(f"{app.url}/readyz")
        assert (status, ready["status"], ready["platform"]) == (200, "ready", "teams")
        assert get_text(f"{app.url}/metrics")[0] == 404  # the public port: metrics only on --metrics-port


def test_with_a_metrics_port_the_bot_port_keeps_them_private(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, data_dir=tmp_path)  # type: ignore[call-arg]
    health = Health("teams", ready=True)
    private = serve_health(health, "127.0.0.1", 0)
    threading.Thread(target=private.serve_forever, daemon=True).start()
    try:
        app = build_app(settings, ChatCore.from_settings(settings), insecure_local=True,
                        health=health.metrics_elsewhere())
        with AppThread(app) as public:
            assert get_text(f"{public.url}/metrics")[0] == 404
            assert get(f"{public.url}/readyz")[0] == 200  # the same readiness on both ports
            assert get_text(f"http://127.0.0.1:{private.server_address[1]}/metrics")[0] == 200
    finally:
        private.shutdown()
        private.server_close()


def get_text(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - loopback only
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, "", ""


def test_socket_mode_health_server_serves_only_health_and_metrics() -> None:
    health = Health("slack")
    server = serve_health(health, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    root = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        status, content_type, body = get_text(f"{root}/metrics")
        assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
        assert "# TYPE citebot_questions_total counter" in body and "# TYPE citebot_queue_depth gauge" in body
        assert get(f"{root}/readyz")[0] == 503
        health.set_ready()
        assert get(f"{root}/readyz")[1]["status"] == "ready"
        assert get(f"{root}/healthz?probe=1")[1]["status"] == "ok"
        try:
            urllib.request.urlopen(f"{root}/slack/events", timeout=10)  # noqa: S310
            raise AssertionError("expected 404")
        except urllib.error.HTTPError as e:
            assert e.code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_readiness_turns_503_while_a_requirement_fails_and_back_by_itself() -> None:
    holds = threading.Event()
    health = Health("slack", ready=True)
    health.require("journal", holds.is_set)
    status, body = health.readiness()
    assert (status, body["status"], body["waiting_for"]) == (503, "not_ready", ["journal"])
    assert health.metrics_elsewhere().readiness()[0] == 503  # the bot port's view has the same requirements
    holds.set()
    assert health.readiness()[0] == 200 and health.ready
    assert Health("slack").readiness()[1]["status"] == "starting"


def _socket_mode_app(fake: FakeSlack) -> tuple[Any, Settings, App]:
    """A local Socket Mode server the fake Slack points at, the settings that reach both, and a Bolt app on them."""
    from eval.fakes.slack_api import APP_TOKEN
    from eval.fakes.slack_socket_mode import FakeSocketMode

    socket = FakeSocketMode().start()
    fake.socket_url = socket.url
    settings = Settings(_env_file=None, slack_bot_token=BOT_TOKEN, slack_app_token=APP_TOKEN,  # type: ignore[call-arg]
                        slack_api_url=fake.url)
    app = App(client=WebClient(token=BOT_TOKEN, base_url=fake.url.rstrip("/") + "/"),
              request_verification_enabled=False, token_verification_enabled=False)
    return socket, settings, app


def test_socket_mode_readiness_follows_the_link_and_a_stop_closes_it_with_a_close_frame() -> None:
    """Issue 39 item 5: after a FIN, /readyz is 503 before slack_sdk itself notices (its pings go stale ~5 s later)
    and until a new link is up; the stop sends a close frame (1000) rather than dropping the socket."""

    from bot.slack.server import close_socket, socket_mode_handler, watch_socket

    with FakeSlack() as fake:
        socket, settings, app = _socket_mode_app(fake)
        handler = socket_mode_handler(app, settings)
        health, stop = Health("slack"), threading.Event()
        threading.Thread(target=watch_socket, args=(handler, health, stop), daemon=True).start()

        def wait(predicate: Any) -> None:
            fake.wait_until(predicate, timeout=30)

        try:
            handler.connect()
            wait(lambda: health.ready)
            before = socket.connections
            socket.drop("reset")  # the peer's FIN, no close frame
            wait(lambda: not health.ready)
            sdk_still_connected = handler.client.is_connected()  # slack_sdk has not noticed yet
            links_when_lost = socket.connections
            wait(lambda: socket.connections > before and health.ready)  # back once a new link is up
            close_socket(handler)
            with socket._cond:
                assert socket._cond.wait_for(lambda: len(socket.close_codes) == 2, 10)
        finally:
            stop.set()
            handler.close()
            socket.stop()
    assert sdk_still_connected and links_when_lost == before  # 503 from the moment the link was lost
    assert socket.close_codes[-1] == 1000  # the stop said goodbye


def test_socket_mode_readiness_turns_503_on_a_silent_link_before_the_reconnect_and_200_after() -> None:
    """Issue 39 item 5, the silent link: the TCP connection stays open but no frame and no pong comes back. /readyz
    turns 503 once the link is known lost (before slack_sdk itself drops it), is still 503 when the new link is
    requested, and 200 once it is up; an envelope on the new link is acknowledged."""

    from bot.slack.server import socket_mode_handler, watch_socket

    events: list[str] = []
    lock = threading.Lock()

    def note(event: str) -> None:
        with lock:
            if not events or events[-1] != event:  # a loss reported twice (the watcher, an error listener) is one
                events.append(event)

    class Recorded(Health):
        def set_ready(self) -> None:
            note("ready")
            super().set_ready()

        def set_not_ready(self) -> None:
            note(f"not_ready (slack_sdk connected: {handler.client.is_connected()})")
            super().set_not_ready()

    with FakeSlack() as fake:
        socket, settings, app = _socket_mode_app(fake)
        app.event("app_mention")(lambda ack: ack())
        handler = socket_mode_handler(app, settings)
        health, stop = Recorded("slack"), threading.Event()
        probe = serve_health(health, "127.0.0.1", 0)
        threading.Thread(target=probe.serve_forever, daemon=True).start()
        readyz = f"http://127.0.0.1:{probe.server_address[1]}/readyz"
        socket.on_link = lambda n: note(f"link {n} requested (readyz {get(readyz)[0]})")
        threading.Thread(target=watch_socket, args=(handler, health, stop), daemon=True).start()
        try:
            handler.connect()
            fake.wait_until(lambda: get(readyz)[0] == 200, timeout=30)
            note("silent")
            socket.drop("silent")
            fake.wait_until(lambda: socket.connections == 2 and get(readyz)[0] == 200, timeout=60)
            socket.deliver(event_callback(mention("C0SILENT", "U0SILENT", "hello", "300.000001")),
                           envelope_id="env-after")
            acked = socket.wait_ack("env-after")
        finally:
            stop.set()
            handler.close()
            socket.stop()
            probe.shutdown()
            probe.server_close()
    assert events == [
        "link 1 requested (readyz 503)",
        "ready",
        "silent",
        "not_ready (slack_sdk connected: True)",  # known lost before slack_sdk's own stale check dropped it
        "link 2 requested (readyz 503)",  # still 503 while the new link is being made
        "ready",
    ]
    assert acked["envelope_id"] == "env-after"
