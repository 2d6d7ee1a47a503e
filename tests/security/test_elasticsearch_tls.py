"""Defect 4 of the second security review, the client's half: the shipped deployment reached Elasticsearch over
plain ``http://``, so the bots' Elasticsearch credentials crossed the network in clear.

Now ``CITEBOT_ELASTICSEARCH_CA_CERTS`` names the CA that signed the cluster's certificate (ECK's
``<cluster>-es-http-certs-public``) and both clients (chunks and chat state) verify against it. Against a local
HTTPS stand-in on 127.0.0.1: the real cluster (certificate from that CA) receives the credentials; an impostor with
a certificate from another CA receives a TLS handshake and never the password; a CA with an ``http://`` URL is a
configuration error naming the variables.
"""

from __future__ import annotations

import datetime as dt
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pydantic import ValidationError

from connectors.elasticsearch_state import ElasticsearchState
from connectors.elasticsearch_store import CitebotElasticsearchStore
from connectors.settings import Settings

PASSWORD = "s3cret-citebot-writer"  # noqa: S105 - a test's own


def _ca(tmp: Path, name: str) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1 signed by it: (ca.pem, cert.pem, key.pem)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
          .not_valid_after(now + dt.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "es")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = (tmp / f"{name}-ca.pem", tmp / f"{name}-cert.pem", tmp / f"{name}-key.pem")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


class FakeCluster:
    """Answers ``GET /`` and ``HEAD /{index}`` as Elasticsearch 8 does; records every Authorization header."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.authorizations: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
                return

            def _reply(self, status: int, body: dict[str, object] | None) -> None:
                fake.authorizations.append(self.headers.get("Authorization") or "")
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Elastic-Product", "Elasticsearch")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def do_GET(self) -> None:
                self._reply(200, {"version": {"number": "8.19.0"}, "tagline": "You Know, for Search"})

            def do_HEAD(self) -> None:
                self._reply(200, None)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeCluster:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, tuple[Path, Path, Path]]:
    return {"ours": _ca(tmp_path, "ours"), "other": _ca(tmp_path, "other")}


@pytest.fixture
def cluster(pki: dict[str, tuple[Path, Path, Path]]) -> Iterator[FakeCluster]:
    _, cert, key = pki["ours"]
    with FakeCluster(cert, key) as c:
        yield c


@pytest.fixture
def impostor(pki: dict[str, tuple[Path, Path, Path]]) -> Iterator[FakeCluster]:
    _, cert, key = pki["other"]
    with FakeCluster(cert, key) as c:
        yield c


def _settings(url: str, ca: Path, tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", elasticsearch_url=url, elasticsearch_username="citebot_writer",
                    elasticsearch_password=PASSWORD, elasticsearch_ca_certs=ca)


def test_both_clients_reach_the_cluster_its_ca_signed(cluster: FakeCluster, pki: dict, tmp_path: Path) -> None:
    settings = _settings(cluster.url, pki["ours"][0], tmp_path)
    assert ElasticsearchState.from_settings(settings)._es.info()["version"]["number"] == "8.19.0"
    store = CitebotElasticsearchStore.from_settings(settings)
    assert store.document_store.client.info()["version"]["number"] == "8.19.0"
    assert cluster.authorizations and all(a.startswith("Basic ") for a in cluster.authorizations)


def test_an_impostor_with_another_cas_certificate_never_sees_the_password(
    impostor: FakeCluster, pki: dict, tmp_path: Path
) -> None:
    settings = _settings(impostor.url, pki["ours"][0], tmp_path)
    with pytest.raises(Exception) as caught:  # noqa: PT011 - the client's own connection error, whatever its class
        ElasticsearchState.from_settings(settings)._es.info()
    assert "CERTIFICATE_VERIFY_FAILED" in repr(caught.value) or "certificate" in repr(caught.value).lower()
    with pytest.raises(Exception):  # noqa: PT011, B017
        CitebotElasticsearchStore.from_settings(settings).document_store.client.info()
    assert impostor.authorizations == []  # not one request got as far as carrying credentials


def test_a_ca_with_a_plain_http_url_is_refused_at_start(pki: dict, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="CITEBOT_ELASTICSEARCH_CA_CERTS needs an https://"):
        CitebotElasticsearchStore.from_settings(_settings("http://127.0.0.1:9200", pki["ours"][0], tmp_path))
    with pytest.raises(ValidationError, match="CITEBOT_ELASTICSEARCH_CA_CERTS must name a readable PEM file"):
        _settings("https://127.0.0.1:9200", tmp_path / "missing.pem", tmp_path)
