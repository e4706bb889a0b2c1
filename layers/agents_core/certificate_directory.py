"""A CA bundle laid out as OpenSSL's hashed directory (what `openssl rehash` makes): one file per
certificate, named after the hash of its subject.

Loading certifi's bundle into a TLS context parses its 140-odd certificates: about 40 ms of CPU
at a full core in every function's init (OpenSSL 3), for the one or two roots its connections
meet. A context given this directory instead (`capath`) reads a root from its file when a
handshake first asks for it. The layer build writes the directory from the layer's own certifi
bundle (`build_layer.py`), with no OpenSSL tools: the name is OpenSSL's `X509_NAME_hash`,
the first four bytes (little-endian) of the SHA-1 of the subject's canonical encoding.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\s+(.*?)-----END CERTIFICATE-----", re.S)

# Universal tags of the string types OpenSSL canonicalizes, and how each is encoded.
_UTF8, _SEQUENCE, _SET = 0x0C, 0x30, 0x31
_STRING_CODECS = {
    0x0C: "utf-8",  # UTF8String
    0x13: "latin-1",  # PrintableString
    0x14: "latin-1",  # T61String, read a byte a character as OpenSSL does
    0x16: "latin-1",  # IA5String
    0x1A: "latin-1",  # VisibleString
    0x1C: "utf-32-be",  # UniversalString
    0x1E: "utf-16-be",  # BMPString
}
_SPACE = b" \t\n\v\f\r"


def write(bundle: Path, folder: Path) -> int:
    """Write `bundle`'s certificates into `folder` as `<hash>.<n>` files; how many."""
    folder.mkdir(parents=True, exist_ok=True)
    named = hashed_names(bundle.read_bytes())
    for name, pem in named.items():
        (folder / name).write_bytes(pem)
    return len(named)


def hashed_names(bundle: bytes) -> dict[str, bytes]:
    """Each PEM certificate of `bundle` by its file name in a hashed directory: its subject's
    hash, then `.0`, or `.1` and on for a subject hash met before."""
    named: dict[str, bytes] = {}
    for match in _PEM.finditer(bundle):
        digest = subject_hash(base64.b64decode(match.group(1)))
        n = 0
        while f"{digest}.{n}" in named:
            n += 1
        named[f"{digest}.{n}"] = match.group(0) + b"\n"
    return named


def subject_hash(certificate: bytes) -> str:
    """OpenSSL's subject hash of a DER certificate (`openssl x509 -subject_hash`)."""
    _, body, _ = _read(certificate, 0)  # Certificate ::= SEQUENCE { tbsCertificate, ... }
    _, tbs, _ = _read(certificate, body[0])
    fields = list(_children(certificate, tbs))
    if certificate[fields[0][0]] == 0xA0:  # [0] version, when not v1
        fields = fields[1:]
    subject = fields[4][0]  # serial, signature, issuer, validity, subject
    digest = hashlib.sha1(_canonical_name(certificate, subject)).digest()
    return f"{int.from_bytes(digest[:4], 'little'):08x}"


def _canonical_name(der: bytes, start: int) -> bytes:
    """A Name's canonical encoding (OpenSSL's x509_name_canon): each relative distinguished
    name's SET, its string values as UTF8String, trimmed, ASCII lowercased and inner runs of
    space made one; the outer SEQUENCE's header left out."""
    _, content, _ = _read(der, start)
    out = b""
    for rdn, _ in _children(der, content):
        entries = []
        for entry in _children(der, _read(der, rdn)[1]):
            oid, value = list(_children(der, _read(der, entry[0])[1]))
            entries.append(_tlv(_SEQUENCE, der[oid[0] : oid[1]] + _canonical_value(der, value)))
        out += _tlv(_SET, b"".join(sorted(entries)))  # DER sorts a SET OF
    return out


def _canonical_value(der: bytes, at: tuple[int, int]) -> bytes:
    tag = der[at[0]]
    codec = _STRING_CODECS.get(tag)
    if codec is None:
        return der[at[0] : at[1]]
    _, (start, end), _ = _read(der, at[0])
    text = der[start:end].decode(codec).encode("utf-8").strip(_SPACE)
    canon = bytearray()
    for byte in text:
        if byte in _SPACE:
            if canon[-1:] != b" ":
                canon.append(0x20)
        else:
            canon.append(byte + 32 if 0x41 <= byte <= 0x5A else byte)
    return _tlv(_UTF8, bytes(canon))


def _read(der: bytes, at: int) -> tuple[int, tuple[int, int], int]:
    """(tag, (content start, content end), end) of the DER element at `at`."""
    tag, length, at = der[at], der[at + 1], at + 2
    if length & 0x80:
        size = length & 0x7F
        length, at = int.from_bytes(der[at : at + size], "big"), at + size
    return tag, (at, at + length), at + length


def _children(der: bytes, content: tuple[int, int]):
    """(start, end) of each element within `content`."""
    at, end = content
    while at < end:
        child_end = _read(der, at)[2]
        yield at, child_end
        at = child_end


def _tlv(tag: int, content: bytes) -> bytes:
    size = len(content)
    if size < 0x80:
        return bytes((tag, size)) + content
    length = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes((tag, 0x80 | len(length))) + length + content
