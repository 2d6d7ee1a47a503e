"""Microsoft Graph, just enough to list and fetch the PDFs of a Teams channel's files folder.

App-only (client-credentials) token from ``settings.teams_token_url`` with the bot's app id and
password, then ``GET /teams/{group}/channels/{channel}/filesFolder`` and the folder's children.
Both endpoints are settings so tests point them at a local fake. The token is never logged.

Every call goes through ``connectors.download.fetch``: ``_TIMEOUT_S`` is a deadline for the whole call
(connect, headers, body), not a per-read timeout a dripping server could stretch forever, and a JSON body
is capped at ``_MAX_JSON_BYTES``. The bearer token goes only to the Graph host: a ``@odata.nextLink``
elsewhere is refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from connectors.download import (
    DeadlineError,
    DownloadError,
    Fetched,
    TooLargeError,
    check_size,
    download,
    fetch,
    host_of,
)
from connectors.settings import Settings
from connectors.uploads import is_pdf_file

GRAPH_SCOPE = "https://graph.microsoft.com/.default"
_TIMEOUT_S = 20.0  # per call, start to finish
_MAX_JSON_BYTES = 4_000_000  # a page of 200 drive items is ~200 kB
_MAX_PAGES = 50


class GraphError(Exception):
    """Graph could not be used; ``str(e)`` is safe to show the user."""


def graph_configured(settings: Settings) -> bool:
    return bool(settings.teams_app_id and settings.teams_app_password)


@dataclass(frozen=True)
class DriveFile:
    item_id: str
    drive_id: str
    name: str
    size: int
    download_url: str  # pre-authenticated ``@microsoft.graph.downloadUrl``, or "" (then /content with the token)
    web_url: str = ""  # where people open it in SharePoint (the driveItem's ``webUrl``)
    created_by: str = ""  # the Entra object id of the user who added it (``createdBy.user.id``), "" if no user


class GraphClient:
    def __init__(self, settings: Settings, tenant_id: str) -> None:
        if not graph_configured(settings):
            raise GraphError("Microsoft Graph is not configured (TEAMS_APP_ID and TEAMS_APP_PASSWORD)")
        self.settings = settings
        self.tenant_id = settings.teams_app_tenant_id if settings.teams_app_type == "SingleTenant" else tenant_id
        self.base = settings.teams_graph_url.rstrip("/") + "/"
        self._token: str | None = None

    # --- token ---------------------------------------------------------------------------------
    def _call(self, url: str, what: str, **kwargs: Any) -> Fetched:
        try:
            return fetch(url, max_bytes=_MAX_JSON_BYTES, timeout_s=_TIMEOUT_S,
                         trusted_hosts=self.settings.configured_hosts, **kwargs)
        except DeadlineError as e:
            raise GraphError(f"{what} did not answer within {_TIMEOUT_S:.0f} s") from e
        except TooLargeError as e:
            raise GraphError(f"{what} answered with more than {_MAX_JSON_BYTES // 1_000_000} MB") from e
        except DownloadError as e:
            raise GraphError(f"I couldn't reach {what}") from e

    @staticmethod
    def _json(got: Fetched, what: str) -> dict[str, Any]:
        try:
            body = json.loads(got.body)
        except ValueError as e:
            raise GraphError(f"{what} answered with something that is not JSON") from e
        if not isinstance(body, dict):
            raise GraphError(f"{what} answered with an unexpected shape")
        return body

    def token(self) -> str:
        if self._token is None:
            url = self.settings.teams_token_url.format(tenant=self.tenant_id or "botframework.com")
            password = self.settings.teams_app_password
            got = self._call(
                url,
                "the Microsoft sign-in service",
                method="POST",
                data={
                    "grant_type": "client_credentials",
                    "client_id": self.settings.teams_app_id or "",
                    "client_secret": password.get_secret_value() if password else "",
                    "scope": GRAPH_SCOPE,
                },
            )
            if got.status != 200:
                raise GraphError(
                    f"Microsoft sign-in refused the bot's credentials (HTTP {got.status}); "
                    "check TEAMS_APP_ID, TEAMS_APP_PASSWORD and admin consent for Files.Read.All"
                )
            token = self._json(got, "Microsoft sign-in").get("access_token")
            if not token:
                raise GraphError("Microsoft sign-in answered without an access token")
            self._token = str(token)
        return self._token

    def _get(self, url: str) -> dict[str, Any]:
        if not url.startswith(("http://", "https://")):
            url = self.base + url.lstrip("/")
        graph_host = host_of(self.base)
        if host_of(url) != graph_host:
            raise GraphError("Microsoft Graph pointed the bot at another server")
        got = self._call(url, "Microsoft Graph", headers={"Authorization": f"Bearer {self.token()}"},
                         credential_hosts={graph_host})
        if got.status in (401, 403):
            raise GraphError(
                "Microsoft Graph denied access to this channel's files; an admin must grant the app "
                "Files.Read.All (application) and consent"
            )
        if got.status == 404:
            raise GraphError("Microsoft Graph could not find this channel's files folder")
        if got.status >= 300:
            raise GraphError(f"Microsoft Graph answered HTTP {got.status}")
        return self._json(got, "Microsoft Graph")

    # --- files ---------------------------------------------------------------------------------
    def channel_pdfs(self, group_id: str, channel_id: str) -> Iterator[DriveFile]:
        """PDFs directly inside the channel's files folder (paged)."""
        folder = self._get(f"teams/{quote(group_id, safe='')}/channels/{quote(channel_id, safe='')}/filesFolder")
        drive_id = str((folder.get("parentReference") or {}).get("driveId") or "")
        folder_id = str(folder.get("id") or "")
        if not drive_id or not folder_id:
            raise GraphError("Microsoft Graph returned a files folder without a drive")
        url: str | None = f"drives/{quote(drive_id, safe='')}/items/{quote(folder_id, safe='')}/children"
        pages = 0
        while url and pages < _MAX_PAGES:
            page = self._get(url)
            pages += 1
            for item in page.get("value") or []:
                if not isinstance(item, dict) or "file" not in item:
                    continue
                name = str(item.get("name") or "")
                mime = str((item.get("file") or {}).get("mimeType") or "")
                if not is_pdf_file(name, mime_type=mime):
                    continue
                yield DriveFile(
                    item_id=str(item.get("id") or ""),
                    drive_id=drive_id,
                    name=name,
                    size=int(item.get("size") or 0),
                    download_url=str(item.get("@microsoft.graph.downloadUrl") or ""),
                    web_url=str(item.get("webUrl") or ""),
                    created_by=str(((item.get("createdBy") or {}).get("user") or {}).get("id") or ""),
                )
            next_link = page.get("@odata.nextLink")
            url = str(next_link) if next_link else None

    def download(self, f: DriveFile, *, max_bytes: int, timeout_s: float) -> bytes:
        """The file's bytes (size cap, timeout and PDF magic check from connectors.download)."""
        check_size(f.size, max_bytes)
        trusted = self.settings.configured_hosts
        if f.download_url:  # pre-authenticated: no token goes with it
            return download(f.download_url, max_bytes=max_bytes, timeout_s=timeout_s, trusted_hosts=trusted)
        url = f"{self.base}drives/{quote(f.drive_id, safe='')}/items/{quote(f.item_id, safe='')}/content"
        return download(
            url, headers={"Authorization": f"Bearer {self.token()}"}, max_bytes=max_bytes, timeout_s=timeout_s,
            credential_hosts={host_of(self.base)}, trusted_hosts=trusted,
        )
