"""HTTPS clients share one TLS context per set of trusted certificates: loading a CA bundle
costs about 35 ms of CPU at a full core (0.3 s at 192 MB's share), and a new container's
first run would otherwise pay it once per client (DynamoDB, EventBridge, the model, each tool
call's client)."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from agents_core import http1
from agents_core.tools._http import guarded_client
from agents_core.tools.guard import OutboundGuard

from .peers.tls_certificates import make_certificates


@pytest.fixture
def https_server(tmp_path):
    """A local HTTPS server answering every POST and GET with a small JSON body; yields (its
    base URL, the file of the CA that signed its certificate)."""
    certificates = make_certificates(tmp_path)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"ok": True}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates.chain, certificates.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://localhost:{server.server_address[1]}", str(certificates.ca)
    finally:
        server.shutdown()
        server.server_close()


def test_every_https_client_verifies_with_one_shared_context(https_server, monkeypatch):
    """The model's client and another lean client, and a tool's guarded httpx client, all
    verify the server against SSL_CERT_FILE, and the certificates are loaded once."""
    url, ca_file = https_server
    monkeypatch.setenv("SSL_CERT_FILE", ca_file)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    http1.tls_context.cache_clear()
    made = []
    create = ssl.create_default_context

    def counted(*args, **kwargs):
        made.append(kwargs.get("cafile"))
        return create(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counted)

    async def calls() -> list[int]:
        statuses = []
        for _ in range(2):  # two clients, as the model's and DynamoDB's
            client = http1.PostClient(url + "/", {}, timeout=5, connect_timeout=5)
            answer = await client.post(b"{}", {"Content-Type": "application/json"})
            await answer.read(1024)
            answer.close()
            statuses.append(answer.status)
        guard = OutboundGuard(["127.0.0.0/8", "localhost"])
        async with guarded_client(guard, timeout=5, max_response_bytes=1024) as client:
            statuses.append((await client.get(url + "/doc")).status_code)
        return statuses

    try:
        assert asyncio.run(calls()) == [200, 200, 200]
        assert made == [ca_file]
    finally:
        http1.tls_context.cache_clear()


def test_a_server_the_certificates_do_not_vouch_for_is_refused(https_server, monkeypatch):
    """Sharing the context keeps verification: with certifi's bundle (no SSL_CERT_FILE) the
    test CA's server is a failed connection, for the lean client and for httpx alike."""
    url, _ = https_server
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    http1.tls_context.cache_clear()

    async def lean() -> None:
        client = http1.PostClient(url + "/", {}, timeout=5, connect_timeout=5)
        await client.post(b"{}")

    try:
        with pytest.raises(http1.ConnectFailed):
            asyncio.run(lean())
        with (
            pytest.raises(httpx.ConnectError),
            httpx.Client(verify=http1.default_tls_context()) as client,
        ):
            client.get(url + "/")
    finally:
        http1.tls_context.cache_clear()


def test_aws_clients_verify_with_the_configured_ca_bundle_as_botocore_does(
    https_server, monkeypatch
):
    """JsonClient takes AWS_CA_BUNDLE as botocore does (a proxy's or a private endpoint's CA):
    the call goes through with it, and without it the same endpoint is refused."""
    from agents_core import aws
    from botocore.exceptions import EndpointConnectionError, SSLError

    url, ca_file = https_server
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    http1.tls_context.cache_clear()
    try:
        monkeypatch.setenv("AWS_CA_BUNDLE", ca_file)
        answer = aws.client("dynamodb", attempts=1).get_item(TableName="t", Key={"PK": {"S": "a"}})
        assert answer["ok"] is True
        monkeypatch.delenv("AWS_CA_BUNDLE")
        refused = aws.client("dynamodb", attempts=1)
        with pytest.raises((EndpointConnectionError, SSLError)):
            refused.get_item(TableName="t", Key={"PK": {"S": "a"}})
    finally:
        http1.tls_context.cache_clear()


def _certificate_directory():
    from .test_built_artifacts import _build_layer_module

    return _build_layer_module().certificate_directory


def _crafted_certificates() -> list[bytes]:
    """Self-signed PEM certificates whose subjects take every turn of OpenSSL's canonical form:
    case, runs of spaces, string types other than UTF8String, a multi-valued name, non-ASCII
    text, a name longer than 127 bytes; and two with the same subject."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.name import _ASN1Type
    from cryptography.x509.oid import NameOID

    attribute = x509.NameAttribute
    names = [
        x509.Name([attribute(NameOID.COMMON_NAME, "  Mixed   CASE\tName  ")]),
        x509.Name(
            [
                attribute(NameOID.COUNTRY_NAME, "DE"),
                attribute(NameOID.ORGANIZATION_NAME, "Printable  Org", _ASN1Type.PrintableString),
                attribute(NameOID.COMMON_NAME, "Zürich ÜNÏCODE", _ASN1Type.BMPString),
            ]
        ),
        x509.Name(
            [
                x509.RelativeDistinguishedName(
                    [
                        attribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "Beta Unit"),
                        attribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "alfa Unit"),
                    ]
                ),
                x509.RelativeDistinguishedName([attribute(NameOID.COMMON_NAME, "x" * 60)]),
                x509.RelativeDistinguishedName([attribute(NameOID.LOCALITY_NAME, "Y" * 90)]),
            ]
        ),
    ]
    names.append(names[0])  # another key under the same subject: `<hash>.0` and `<hash>.1`
    now = datetime.datetime.now(datetime.UTC)
    made = []
    for name in names:
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256())
        )
        made.append(certificate.public_bytes(serialization.Encoding.PEM))
    return made


def test_a_bundle_laid_out_as_a_hashed_directory_names_each_certificate_as_openssl_does(
    tmp_path,
):
    """certifi's bundle and certificates made for every turn of the canonical form: each file
    is named as `openssl rehash` names it, and holds the certificate it names."""
    import shutil
    import subprocess

    import certifi

    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to compare with")
    directory = _certificate_directory()
    bundle = Path(certifi.where()).read_bytes() + b"".join(_crafted_certificates())
    named = directory.hashed_names(bundle)
    theirs = tmp_path / "rehashed"
    theirs.mkdir()
    for index, pem in enumerate(named.values()):
        (theirs / f"{index}.pem").write_bytes(pem)
    subprocess.run(["openssl", "rehash", str(theirs)], check=True, capture_output=True)
    assert len(named) == bundle.count(b"-----BEGIN CERTIFICATE-----") > 100

    def by_hash(files: dict[str, bytes]) -> dict[str, set[bytes]]:
        """The certificates under each hash (OpenSSL reads `<hash>.0`, `.1`, ... in turn)."""
        found: dict[str, set[bytes]] = {}
        for name, pem in files.items():
            found.setdefault(name.rsplit(".", 1)[0], set()).add(pem)
        return found

    linked = {p.name: p.read_bytes() for p in theirs.iterdir() if p.is_symlink()}
    assert sorted(linked) == sorted(named)
    assert by_hash(linked) == by_hash(named)


def test_a_client_verifies_through_a_hashed_directory_reading_only_the_root_it_needs(
    https_server, tmp_path
):
    """A context over the layer's kind of directory holds no certificate until a handshake asks
    for one; then the server's CA alone is read, and the call goes through. A directory without
    that CA refuses the server."""
    url, ca_file = https_server
    directory = _certificate_directory()
    import certifi

    trusting, other = tmp_path / "trusting", tmp_path / "other"
    for folder in (trusting, other):
        directory.write(Path(certifi.where()), folder)
    directory.write(Path(ca_file), trusting)

    async def call(folder: Path) -> int:
        client = http1.PostClient(
            url + "/", {}, timeout=5, connect_timeout=5, certificates=(None, str(folder))
        )
        answer = await client.post(b"{}", {"Content-Type": "application/json"})
        answer.close()
        return answer.status

    http1.tls_context.cache_clear()
    try:
        context = http1.tls_context(None, str(trusting))
        assert context.cert_store_stats()["x509_ca"] == 0
        assert asyncio.run(call(trusting)) == 200
        assert context.cert_store_stats()["x509_ca"] == 1
        with pytest.raises(http1.ConnectFailed):
            asyncio.run(call(other))
    finally:
        http1.tls_context.cache_clear()
