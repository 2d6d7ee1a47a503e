"""Defect 7 of the security review: an outgoing HTTP call has a deadline, not a per-read timeout.

The Graph client's token and listing calls used ``requests`` with ``timeout=20``: that bounds each read, so a
server (or a man in the middle) sending a byte every few seconds held a worker thread for as long as it
liked. File downloads already had a deadline for the body, but not for the status line and headers. A local
server here drips its head or its body a byte every 0.1 s; the deadline (lowered to 1 s) must end the call.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import bot.teams.graph as graph
from bot.teams.graph import GraphClient, GraphError
from connectors.download import DownloadError, download
from connectors.settings import Settings

TOKEN_BODY = json.dumps({"access_token": "fake-graph-token", "token_type": "Bearer", "expires_in": 3599}).encode()
FOLDER_BODY = json.dumps({"id": "folder-1", "name": "General", "parentReference": {"driveId": "drive-1"}}).encode()


class _Graph(BaseHTTPRequestHandler):
    """``/{mode}/...``: ``drip-token-head`` drips the token answer's head, ``drip-list-body`` the files
    folder's body, ``big-list`` answers 5 MB of JSON, ``foreign-next`` pages on to another server,
    ``drip-file-head`` drips a PDF download's head."""

    protocol_version = "HTTP/1.1"
    foreign = ""
    seen: list[tuple[str, str]] = []
    dripped: list[str] = []  # the paths whose dripped answer was sent to its last byte

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self, body: bytes, drip: str) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        whole = head + body
        start = 0 if drip == "head" else len(head) if drip == "body" else len(whole)
        try:
            self.wfile.write(whole[:start])
            for b in whole[start:]:
                self.wfile.write(bytes([b]))
                time.sleep(0.1)
        except OSError:
            self.close_connection = True
            return
        if drip:
            type(self).dripped.append(self.path)

    def do_POST(self) -> None:  # noqa: N802 - http.server's API
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        mode = self.path.split("/")[1]
        self._answer(TOKEN_BODY, mode.removeprefix("drip-token-") if mode.startswith("drip-token-") else "")

    def do_GET(self) -> None:  # noqa: N802
        type(self).seen.append((self.path, self.headers.get("Authorization") or ""))
        mode = self.path.split("/")[1]
        if mode == "drip-file-head":
            self._answer(b"%PDF-1.7\n" + b"x" * 100, "head")
            return
        if self.path.endswith("/filesFolder"):
            if mode == "big-list":
                body = json.dumps({"id": "folder-1", "parentReference": {"driveId": "d"}, "pad": "x" * 5_000_000})
                self._answer(body.encode(), "")
                return
            self._answer(FOLDER_BODY, mode.removeprefix("drip-list-") if mode.startswith("drip-list-") else "")
            return
        page: dict[str, object] = {"value": []}
        if mode == "foreign-next" and "skiptoken" not in self.path:
            page["@odata.nextLink"] = f"{type(self).foreign}/foreign-next/v1.0/drives/d/items/f/children?skiptoken=2"
        self._answer(json.dumps(page).encode(), "")


def _serve(host: str) -> tuple[ThreadingHTTPServer, type[_Graph]]:
    handler = type("Handler", (_Graph,), {"seen": [], "dripped": []})
    server = ThreadingHTTPServer((host, 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, handler


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, type[_Graph], type[_Graph]]]:
    home, home_handler = _serve("127.0.0.1")
    away, away_handler = _serve("127.0.0.2")
    home_handler.foreign = f"http://127.0.0.2:{away.server_address[1]}"
    yield f"http://127.0.0.1:{home.server_address[1]}", home_handler, away_handler
    for s in (home, away):
        s.shutdown()
        s.server_close()


def _client(base: str, mode: str, tmp_path: Path) -> GraphClient:
    settings = Settings(data_dir=tmp_path, teams_app_id="app-id", teams_app_password="app-password",
                        teams_graph_url=f"{base}/{mode}/v1.0/",
                        teams_token_url=f"{base}/{mode}/{{tenant}}/oauth2/v2.0/token")
    return GraphClient(settings, "tenant-one")


@pytest.mark.parametrize("mode", ["drip-token-head", "drip-token-body", "drip-list-head", "drip-list-body"])
def test_a_graph_call_ends_at_its_deadline_however_slowly_the_server_drips(
    servers: tuple[str, type[_Graph], type[_Graph]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setattr(graph, "_TIMEOUT_S", 1.0)
    base, home, _ = servers
    with pytest.raises(GraphError, match="did not answer within"):
        list(_client(base, mode, tmp_path).channel_pdfs("group-1", "19:channel@thread.tacv2"))
    # the call ended while the server was still dripping (a byte every 0.1 s: eight seconds or more)
    assert not [p for p in home.dripped if p.startswith(f"/{mode}/")]


def test_an_oversized_graph_answer_is_refused(
    servers: tuple[str, type[_Graph], type[_Graph]], tmp_path: Path
) -> None:
    base, _, _ = servers
    with pytest.raises(GraphError, match="more than"):
        list(_client(base, "big-list", tmp_path).channel_pdfs("group-1", "19:channel@thread.tacv2"))


def test_the_graph_token_never_follows_a_next_link_to_another_server(
    servers: tuple[str, type[_Graph], type[_Graph]], tmp_path: Path
) -> None:
    base, _, away = servers
    with pytest.raises(GraphError, match="another server"):
        list(_client(base, "foreign-next", tmp_path).channel_pdfs("group-1", "19:channel@thread.tacv2"))
    assert away.seen == []


def test_a_file_download_ends_at_its_deadline_when_the_headers_drip(
    servers: tuple[str, type[_Graph], type[_Graph]]
) -> None:
    base, home, _ = servers
    with pytest.raises(DownloadError, match="longer than"):
        download(f"{base}/drip-file-head/x.pdf", max_bytes=10_000, timeout_s=1, trusted_hosts={"127.0.0.1"})
    assert "/drip-file-head/x.pdf" not in home.dripped  # ended while the server was still dripping its head
