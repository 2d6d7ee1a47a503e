"""The chat core's upload use-case (``ChatCore.ingest``): size cap, download, ingest, record, result text.

A download's own message never reaches the user (it may carry a signed URL or a token), nor the logs; each
class of failure has a fixed text saying what to do, and our own bugs are never reported as the user's file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import structlog

from bot.core import ChatContext, ChatCore
from connectors.download import DeadlineError, DownloadError, HttpStatusError, NotAPdfError, TooLargeError
from connectors.settings import Settings
from pipelines.models import IngestResult

SECRET = "xoxb-SECRET-1234"
CTX = ChatContext("slack", "slack:T1:C1", "U1")


class _Service:
    def __init__(self) -> None:
        self.ingested: list[tuple[str, bytes]] = []

    def ingest(self, data: bytes, *, file_name: str, scope: str, **_: Any) -> IngestResult:
        self.ingested.append((file_name, data))
        return IngestResult(file=file_name, scope=scope, status="indexed", doc_id="d1", pages=2, chunks=3)


class _State:
    def __init__(self) -> None:
        self.uploads: list[dict[str, Any]] = []

    def record_upload(self, **kw: Any) -> None:
        self.uploads.append(kw)


@pytest.fixture
def core(tmp_path: Path) -> ChatCore:
    settings = Settings(_env_file=None, data_dir=tmp_path, max_file_mb=50, download_timeout_s=60)  # type: ignore[call-arg]
    return ChatCore(_Service(), _State(), settings)  # type: ignore[arg-type]


def _failing(error: BaseException) -> Any:
    def fetch(max_bytes: int) -> bytes:
        raise error

    return fetch


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (DownloadError(f"GET https://files.example/x?token={SECRET} failed"),
         "I couldn't index a.pdf: I couldn't download it. Please try uploading it again in a few minutes."),
        (HttpStatusError(f"HTTP 404 from https://files.example/{SECRET}", status=404),
         "I couldn't index a.pdf: the file server answered HTTP 404."),
        (HttpStatusError(SECRET, status=403),
         "I couldn't index a.pdf: I'm not allowed to download that file (check the bot's file permissions)."),
        (NotAPdfError(SECRET), "I couldn't index a.pdf: that file is not a PDF, whatever its name says."),
        (TooLargeError(SECRET), "I couldn't index a.pdf: the file is larger than the 50 MB limit."),
        (DeadlineError(SECRET),
         "I couldn't index a.pdf: the download took longer than 60 s. Please try again in a few minutes."),
    ],
)
def test_a_failed_download_shows_its_class_fixed_text_never_its_message(
    core: ChatCore, error: DownloadError, text: str
) -> None:
    with structlog.testing.capture_logs() as logs:
        shown = core.ingest(CTX, file_name="a.pdf", fetch=_failing(error))
    assert shown == text
    assert SECRET not in shown and SECRET not in repr(logs)
    assert [e["event"] for e in logs] == ["download_failed"] and logs[0]["error"] == type(error).__name__
    assert core.service.ingested == []  # type: ignore[attr-defined]


def test_our_own_bug_in_the_fetch_propagates_instead_of_blaming_the_file(core: ChatCore) -> None:
    with pytest.raises(KeyError):
        core.ingest(CTX, file_name="a.pdf", fetch=_failing(KeyError(SECRET)))


def test_a_known_size_over_the_cap_is_refused_before_downloading(core: ChatCore) -> None:
    def fetch(max_bytes: int) -> bytes:
        raise AssertionError("downloaded a file Slack said was too large")

    shown = core.ingest(CTX, file_name="big.pdf", fetch=fetch, size=10**9)
    assert shown == "I couldn't index big.pdf: the file is larger than the 50 MB limit."


def test_an_upload_is_fetched_under_the_cap_ingested_and_recorded(core: ChatCore) -> None:
    caps: list[int] = []

    def fetch(max_bytes: int) -> bytes:
        caps.append(max_bytes)
        return b"%PDF-1.7 ..."

    shown = core.ingest(CTX, file_name="a.pdf", fetch=fetch, file_ref="F1")
    assert caps == [50_000_000]
    assert shown.startswith("Indexed a.pdf: 2 pages, 3 passages.")
    assert core.service.ingested == [("a.pdf", b"%PDF-1.7 ...")]  # type: ignore[attr-defined]
    assert [u["file_ref"] for u in core.state.uploads] == ["F1"]  # type: ignore[attr-defined]
    # without a platform file id there is nothing to record (Teams)
    core.ingest(CTX, file_name="b.pdf", fetch=fetch)
    assert len(core.state.uploads) == 1  # type: ignore[attr-defined]
