from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from connectors.download import DownloadError, download

PDF = b"%PDF-1.7\n" + b"x" * 5000
LOCAL = {"127.0.0.1"}  # the test server's host, configured like the admin's Slack API URL


class _Files(BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, bytes, dict[str, str]]] = {
        "/ok.pdf": (200, PDF, {}),
        "/big.pdf": (200, PDF + b"y" * 20_000, {}),
        "/liar.pdf": (200, PDF, {"Content-Length": "99999999"}),
        "/notes.pdf": (200, b"PK\x03\x04 this is a zip", {}),
        "/login.pdf": (200, b"<!DOCTYPE html><html>sign in</html>", {}),
        "/secret.pdf": (403, b"forbidden", {}),
        "/gone.pdf": (404, b"", {}),
    }
    seen_headers: list[dict[str, str]] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's API
        type(self).seen_headers.append(dict(self.headers))
        if self.path == "/slow.pdf":
            time.sleep(1.5)
        status, body, headers = self.routes.get(self.path, (200, PDF, {}))
        self.send_response(status)
        if "Content-Length" in headers:
            self.send_header("Content-Length", headers["Content-Length"])
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_downloads_a_pdf_with_the_given_headers(base_url: str) -> None:
    data = download(f"{base_url}/ok.pdf", headers={"Authorization": "Bearer xoxb-1"}, max_bytes=10_000, timeout_s=5,
                    credential_hosts={"127.0.0.1"}, trusted_hosts=LOCAL)
    assert data == PDF
    assert _Files.seen_headers[-1]["Authorization"] == "Bearer xoxb-1"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/big.pdf", "larger than"),
        ("/liar.pdf", "larger than"),
        ("/notes.pdf", "not a PDF"),
        ("/login.pdf", "web page"),
        ("/secret.pdf", "not allowed"),
        ("/gone.pdf", "HTTP 404"),
    ],
)
def test_refuses_with_a_reason_a_user_can_act_on(base_url: str, path: str, reason: str) -> None:
    with pytest.raises(DownloadError, match=reason):
        download(f"{base_url}{path}", max_bytes=10_000, timeout_s=5, trusted_hosts=LOCAL)


def test_a_slow_server_times_out(base_url: str) -> None:
    with pytest.raises(DownloadError, match="longer than"):
        download(f"{base_url}/slow.pdf", max_bytes=10_000, timeout_s=0.5, trusted_hosts=LOCAL)
