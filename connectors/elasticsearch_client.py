"""What the Elasticsearch document store and the Elasticsearch chat state share about reaching the cluster: the TLS
options their clients get, the URL as it may be shown (without credentials), and which error says an index being
created is there already."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from elasticsearch import ApiError


def tls_options(hosts: str, ca_certs: str | None) -> dict[str, Any]:
    """The client's TLS options: certificates always verified; against ``ca_certs`` when it is set (an https:// URL
    only: credentials never go over plain HTTP because a CA was configured)."""
    if ca_certs is None:
        return {}
    if not hosts.startswith("https://"):
        raise ValueError("CITEBOT_ELASTICSEARCH_CA_CERTS needs an https:// CITEBOT_ELASTICSEARCH_URL")
    return {"ca_certs": ca_certs, "verify_certs": True}


def redact_url(url: str) -> str:
    """``url`` without a user name or password in it (``http://elastic:pw@es:9200`` -> ``http://es:9200``)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def index_exists_already(e: ApiError) -> bool:
    """True for the 400 Elasticsearch answers a create of an index that exists (another replica made it first): the
    client puts the error's ``type`` in :attr:`ApiError.error`, so its message text is never read."""
    return e.meta.status == 400 and e.error == "resource_already_exists_exception"
