"""A TLS front for a bench peer: HTTPS on a port of its own, each connection's bytes passed to
and from the peer's plain HTTP port, so the functions reach AWS and the model over TLS as in
AWS (handshakes, certificate checks, the bundle's load). Its certificate (for localhost) is
signed by a CA made here, written with certifi's bundle into `<dir>/bundle.pem`: a bundle of the
size the functions load in AWS, which trusts this front too.

    python bench/tls_front.py UPSTREAM_PORT CHAIN KEY   # prints the port it listens on

(`write_certificates(dir)` makes CHAIN, KEY and the bundle; `lambda_share.py --tls` runs one
front for the moto server and one for the model.)
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import socket
import ssl
import sys
from pathlib import Path


def write_certificates(folder: Path) -> tuple[Path, Path]:
    """(the certificate chain file, its key file) for localhost; `bundle.pem` beside them."""
    import certifi
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def certificate(name: str, key, issuer, signer, ca: bool) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench CA")])
    ca = certificate("bench CA", ca_key, ca_name, ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = certificate("localhost", key, ca_name, ca_key, ca=False)
    pem = serialization.Encoding.PEM
    chain, key_file = folder / "front.pem", folder / "front.key"
    chain.write_bytes(cert.public_bytes(pem))
    key_file.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    bundle = Path(certifi.where()).read_bytes() + b"\n" + ca.public_bytes(pem)
    (folder / "bundle.pem").write_bytes(bundle)
    return chain, key_file


async def serve(upstream: int, context: ssl.SSLContext, listening: socket.socket) -> None:
    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            peer_reader, peer_writer = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            writer.close()
            return
        for sock in (writer, peer_writer):
            raw = sock.get_extra_info("socket")
            if raw is not None:
                raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(pipe(reader, peer_writer), pipe(peer_reader, writer))

    server = await asyncio.start_server(connection, sock=listening, ssl=context)
    async with server:
        await server.serve_forever()


def main() -> None:
    upstream, chain, key = int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain, key)
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen(128)
    print(listening.getsockname()[1], flush=True)
    asyncio.run(serve(upstream, context, listening))


if __name__ == "__main__":
    main()
