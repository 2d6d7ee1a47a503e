"""File downloads from chat platforms: timeout, size cap, PDF magic-byte check, bytes kept in memory.

Nothing is written to disk and no path is ever built from a user-supplied name.
"""

from __future__ import annotations

from collections.abc import Mapping

import requests


class DownloadError(Exception):
    """A file could not be fetched; ``str(e)`` is safe to show the user."""


PDF_MAGIC = b"%PDF-"


def looks_like_pdf(data: bytes) -> bool:
    """PDF files start with ``%PDF-`` (some producers put a little junk before it)."""
    return PDF_MAGIC in data[:1024]


def download(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    max_bytes: int,
    timeout_s: float,
    require_pdf: bool = True,
) -> bytes:
    """GET ``url`` and return its bytes, refusing more than ``max_bytes`` or a non-PDF body."""
    try:
        with requests.get(url, headers=dict(headers or {}), stream=True, timeout=timeout_s) as resp:
            if resp.status_code in (401, 403):
                raise DownloadError("I'm not allowed to download that file (check the bot's file permissions)")
            if resp.status_code >= 400:
                raise DownloadError(f"the file server answered HTTP {resp.status_code}")
            declared = resp.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise DownloadError(_too_big(max_bytes))
            chunks: list[bytes] = []
            size = 0
            for chunk in resp.iter_content(chunk_size=1 << 16):
                size += len(chunk)
                if size > max_bytes:
                    raise DownloadError(_too_big(max_bytes))
                chunks.append(chunk)
    except requests.Timeout as e:
        raise DownloadError(f"the download took longer than {timeout_s:.0f} s") from e
    except requests.RequestException as e:
        raise DownloadError("the file could not be downloaded (network error)") from e
    data = b"".join(chunks)
    if require_pdf and not looks_like_pdf(data):
        if data.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
            raise DownloadError("the download returned a web page instead of the file (check the bot token)")
        raise DownloadError("that file is not a PDF, whatever its name says")
    return data


def _too_big(max_bytes: int) -> str:
    return f"the file is larger than the {max_bytes / 1_000_000:.0f} MB limit"
