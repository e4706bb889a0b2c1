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
import socket
import ssl
import sys
from pathlib import Path


def write_certificates(folder: Path) -> tuple[Path, Path]:
    """(the certificate chain file, its key file) for localhost, signed by a CA made here
    (tests/peers/tls_certificates.py); `bundle.pem` beside them: certifi's bundle and the CA."""
    import certifi

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.peers.tls_certificates import make_certificates

    made = make_certificates(folder)
    bundle = Path(certifi.where()).read_bytes() + b"\n" + made.ca.read_bytes()
    (folder / "bundle.pem").write_bytes(bundle)
    return made.chain, made.key


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
