"""Certificates for a local HTTPS peer: a CA made for the run and a certificate it signs for
localhost and 127.0.0.1 (the TLS tests' server, the benches' TLS fronts)."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import NamedTuple

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


class Certificates(NamedTuple):
    ca: Path  # the CA's certificate, what a client trusts
    chain: Path  # the server's certificate
    key: Path  # the server's private key


def make_certificates(folder: Path) -> Certificates:
    """The CA and localhost's certificate and key, written into `folder`."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])

    def signed(name: x509.Name, public_key, ca: bool) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(ca_name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return builder.sign(ca_key, hashes.SHA256())

    ca = signed(ca_name, ca_key.public_key(), ca=True)
    localhost = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    cert = signed(localhost, key.public_key(), ca=False)
    pem = serialization.Encoding.PEM
    made = Certificates(folder / "ca.pem", folder / "cert.pem", folder / "key.pem")
    made.ca.write_bytes(ca.public_bytes(pem))
    made.chain.write_bytes(cert.public_bytes(pem))
    made.key.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return made
