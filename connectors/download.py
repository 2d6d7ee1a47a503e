"""File downloads from chat platforms: who may receive a credential, where a request may go, how long it may take.

* **Credentials stay home.** ``headers`` (a bot token) are sent only to ``credential_hosts`` and only over
  HTTPS (plain HTTP only to a host the admin configured, such as a local test server). A redirect to any
  other host is followed without them.
* **No requests into the network we run in.** Every host is resolved and every address it resolves to must
  be a public one: loopback, private, link-local (cloud metadata at 169.254.169.254), shared, reserved and
  multicast addresses are refused, on every redirect hop, and the socket's peer is checked again after
  connecting (so a DNS answer that changes between the check and the connect gains nothing). Hosts in
  ``trusted_hosts`` (endpoints the admin configured in settings, e.g. a local fake Slack) are exempt.
* **A deadline, not a per-read timeout.** ``timeout_s`` bounds the whole download, redirects included; a
  server dripping a byte a second, in its headers or its body, is cut off when the deadline passes (a
  watchdog shuts the socket down then). The size cap holds while streaming.
* Bytes stay in memory; nothing is written to disk and no path is built from a user-supplied name.

:func:`fetch` is the same machinery for any small HTTP exchange (the Microsoft Graph client's token and
listing calls): it returns the status and, for a success, the capped body.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from connectors.uploads import looks_like_pdf

MAX_REDIRECTS = 5
_READ_SIZE = 1 << 16


class DownloadError(Exception):
    """A file could not be fetched. The class says why (a network problem, when it is this base class); the
    message is for tests and developers, never shown to users (the chat core has a fixed text per class)."""


class BlockedAddressError(DownloadError):
    """The URL points into a private network (or is not http/https)."""


class DeadlineError(DownloadError):
    """The exchange took longer than its deadline."""


class TooLargeError(DownloadError):
    """The body is larger than the cap."""


class HttpStatusError(DownloadError):
    """The file's server answered with an error status (``status``: 401 and 403 mean not allowed)."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class NotAPdfError(DownloadError):
    """The body is not a PDF; ``web_page`` when it is an HTML page (a login page: the token was refused)."""

    def __init__(self, message: str, *, web_page: bool = False) -> None:
        super().__init__(message)
        self.web_page = web_page


@dataclass(frozen=True)
class Fetched:
    """What :func:`fetch` got: the final status and, when it is below 400, the body (else ``b""``, unread)."""

    status: int
    body: bytes


class _Watchdog:
    """Shuts every socket of one exchange down when its deadline passes, whatever read is blocking then."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.fired = False
        self._timers: list[threading.Timer] = []

    def watch(self, sock: socket.socket) -> None:
        timer = threading.Timer(max(0.0, self.deadline - time.monotonic()), self._cut, (sock,))
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def _cut(self, sock: socket.socket) -> None:
        self.fired = True
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        for timer in self._timers:
            timer.cancel()


def host_of(url: str) -> str:
    """The lower-cased host name of ``url`` ("" when it has none)."""
    return (urlsplit(url).hostname or "").lower().rstrip(".")


def is_public_address(address: str) -> bool:
    """True for a globally routable unicast address; False for loopback, private, link-local, metadata..."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def check_url(url: str, trusted_hosts: Collection[str] = ()) -> str:
    """The URL's host, after checking its scheme and that every address it resolves to is public.

    Raises :class:`BlockedAddressError` otherwise; hosts in ``trusted_hosts`` skip the address check.
    """
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().rstrip(".")
    if parts.scheme not in ("http", "https") or not host:
        raise BlockedAddressError("the file link is not an http(s) address")
    if host in trusted_hosts:
        return host
    try:
        infos = socket.getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80),
                                   type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise DownloadError("the file's server could not be found (DNS)") from e
    if not infos or not all(is_public_address(str(info[4][0])) for info in infos):
        raise BlockedAddressError("the file link points into a private network, which I never download from")
    return host


def check_size(size: int, max_bytes: int) -> None:
    """Raise :class:`TooLargeError` when ``size`` (declared by a platform or a server, or read so far) is over
    the cap (:func:`connectors.uploads.max_upload_bytes`)."""
    if size > max_bytes:
        raise TooLargeError(_too_big(max_bytes))


def may_receive_credentials(url: str, credential_hosts: Collection[str], trusted_hosts: Collection[str],
                            credential_domains: Collection[str] = ()) -> bool:
    """The one rule of where a credential may go: a host of ``credential_hosts``, or of a domain of
    ``credential_domains`` ("smba.trafficmanager.net" and its subdomains: the Bot Connector's regional hosts), over
    HTTPS; plain HTTP only to a host of ``trusted_hosts``, endpoints the admin configured, such as a local test
    server. Slack's file downloads and the Teams bot's Bot Connector token both go through it."""
    host = host_of(url)
    scheme = urlsplit(url).scheme
    if host in credential_hosts:
        return scheme == "https" or (scheme == "http" and host in trusted_hosts)
    in_domain = bool(host) and any(host == d or host.endswith("." + d) for d in credential_domains)
    return in_domain and scheme == "https"


def _guarded_session(trusted_hosts: Collection[str], watchdog: _Watchdog) -> requests.Session:
    """A session whose connections re-check the peer address after connecting (DNS-rebinding guard) and are
    cut at the watchdog's deadline.

    It ignores proxy variables from the environment: a proxy would make the peer check meaningless.
    """

    def check_peer(conn: HTTPConnection, sock: socket.socket) -> None:
        watchdog.watch(sock)
        if conn.host.lower().rstrip(".") in trusted_hosts:
            return
        if not is_public_address(str(sock.getpeername()[0])):
            sock.close()
            raise BlockedAddressError("the file link points into a private network, which I never download from")

    class _Http(HTTPConnection):
        def _new_conn(self) -> socket.socket:
            sock = super()._new_conn()
            check_peer(self, sock)
            return sock

    class _Https(HTTPSConnection):
        def _new_conn(self) -> socket.socket:
            sock = super()._new_conn()
            check_peer(self, sock)
            return sock

    class _HttpPool(HTTPConnectionPool):
        ConnectionCls = _Http

    class _HttpsPool(HTTPSConnectionPool):
        ConnectionCls = _Https

    class _Adapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": _HttpPool, "https": _HttpsPool}

    session = requests.Session()
    session.trust_env = False
    session.mount("http://", _Adapter())
    session.mount("https://", _Adapter())
    return session


def fetch(
    url: str,
    *,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    data: Mapping[str, str] | None = None,
    max_bytes: int,
    timeout_s: float,
    credential_hosts: Collection[str] = (),
    trusted_hosts: Collection[str] = (),
) -> Fetched:
    """One HTTP exchange under the rules above: ``headers`` go only to ``credential_hosts`` (HTTPS), no private
    addresses, at most ``timeout_s`` in all and ``max_bytes`` of body. GET follows redirects; other methods
    (which carry ``data``, e.g. a client secret) never do. Raises :class:`DownloadError`."""
    deadline = time.monotonic() + timeout_s
    trusted = {h.lower() for h in trusted_hosts}
    cred_hosts = {h.lower() for h in credential_hosts}
    watchdog = _Watchdog(deadline)
    try:
        with _guarded_session(trusted, watchdog) as session:
            got = _exchange(session, url, method=method, headers=headers or {}, data=data, max_bytes=max_bytes,
                            deadline=deadline, timeout_s=timeout_s, cred_hosts=cred_hosts, trusted=trusted)
    except DeadlineError:
        raise
    except DownloadError as e:
        if watchdog.fired:
            raise DeadlineError(_too_slow(timeout_s)) from e
        raise
    except requests.Timeout as e:
        raise DeadlineError(_too_slow(timeout_s)) from e
    except requests.ConnectionError as e:
        if watchdog.fired:
            raise DeadlineError(_too_slow(timeout_s)) from e
        if _caused_by(e, BlockedAddressError):
            raise BlockedAddressError("the file link points into a private network, which I never download from") from e
        raise DownloadError("the file could not be downloaded (network error)") from e
    except requests.RequestException as e:
        if watchdog.fired:
            raise DeadlineError(_too_slow(timeout_s)) from e
        raise DownloadError("the file could not be downloaded (network error)") from e
    finally:
        watchdog.cancel()
    if watchdog.fired:  # the socket was cut at the deadline: what was read may be a truncated body
        raise DeadlineError(_too_slow(timeout_s))
    return got


def _exchange(
    session: requests.Session,
    url: str,
    *,
    method: str,
    headers: Mapping[str, str],
    data: Mapping[str, str] | None,
    max_bytes: int,
    deadline: float,
    timeout_s: float,
    cred_hosts: Collection[str],
    trusted: Collection[str],
) -> Fetched:
    current = url
    for _hop in range(MAX_REDIRECTS + 1):
        check_url(current, trusted)
        send = dict(headers) if may_receive_credentials(current, cred_hosts, trusted) else {}
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise DeadlineError(_too_slow(timeout_s))
        with session.request(method, current, headers=send, data=data, stream=True, allow_redirects=False,
                             timeout=(min(remaining, 10.0), remaining)) as resp:
            if resp.is_redirect and method == "GET":
                current = urljoin(current, resp.headers.get("Location", ""))
                continue
            if resp.status_code >= 400 or resp.is_redirect:
                return Fetched(resp.status_code, b"")
            return Fetched(resp.status_code,
                           _read_body(resp, max_bytes=max_bytes, deadline=deadline, timeout_s=timeout_s))
    raise DownloadError("the file link redirected too many times")


def download(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    max_bytes: int,
    timeout_s: float,
    require_pdf: bool = True,
    credential_hosts: Collection[str] = (),
    trusted_hosts: Collection[str] = (),
) -> bytes:
    """GET ``url`` and return its bytes, refusing more than ``max_bytes``, more than ``timeout_s`` in all, an
    address in a private network, or a non-PDF body. ``headers`` go only to ``credential_hosts`` (HTTPS)."""
    got = fetch(url, headers=headers, max_bytes=max_bytes, timeout_s=timeout_s, credential_hosts=credential_hosts,
                trusted_hosts=trusted_hosts)
    if got.status in (401, 403):
        raise HttpStatusError("I'm not allowed to download that file (check the bot's file permissions)",
                              status=got.status)
    if got.status >= 300:
        raise HttpStatusError(f"the file server answered HTTP {got.status}", status=got.status)
    data = got.body
    if require_pdf and not looks_like_pdf(data):
        if data.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
            raise NotAPdfError("the download returned a web page instead of the file (check the bot token)",
                               web_page=True)
        raise NotAPdfError("that file is not a PDF, whatever its name says")
    return data


def _read_body(resp: requests.Response, *, max_bytes: int, deadline: float, timeout_s: float) -> bytes:
    declared = resp.headers.get("Content-Length")
    if declared and declared.isdigit():
        check_size(int(declared), max_bytes)
    raw = resp.raw
    sock = getattr(getattr(raw, "connection", None), "sock", None)
    chunks: list[bytes] = []
    size = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise DeadlineError(_too_slow(timeout_s))
        if sock is not None:
            sock.settimeout(remaining)  # each read waits at most until the deadline
        try:
            chunk = raw.read1(_READ_SIZE, decode_content=True)
        except TimeoutError as e:
            raise DeadlineError(_too_slow(timeout_s)) from e
        except Exception as e:
            if _caused_by(e, TimeoutError):
                raise DeadlineError(_too_slow(timeout_s)) from e
            raise DownloadError("the file could not be downloaded (network error)") from e
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        check_size(size, max_bytes)
        chunks.append(chunk)


def _caused_by(e: BaseException, kind: type[BaseException]) -> bool:
    seen: set[int] = set()
    stack: list[BaseException | None] = [e]
    while stack:
        cur = stack.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        if isinstance(cur, kind):
            return True
        stack.extend([cur.__cause__, cur.__context__, *[a for a in cur.args if isinstance(a, BaseException)]])
        reason = getattr(cur, "reason", None)
        if isinstance(reason, BaseException):
            stack.append(reason)
    return False


def _too_big(max_bytes: int) -> str:
    return f"the file is larger than the {max_bytes / 1_000_000:.0f} MB limit"


def _too_slow(timeout_s: float) -> str:
    return f"the download took longer than {timeout_s:.0f} s"
