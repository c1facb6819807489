"""A self-signed ECDSA P-256 certificate, encoded here (DER) rather than by
``cryptography.x509``.

Every daemon makes one before it can announce itself, so the time it takes is on
the critical path of every copy between hosts; importing ``cryptography.x509`` costs
as much as the rest of the key's machinery (some 30 ms), while the certificate is a
fixed shape (RFC 5280) of a few fields:

- version 3, a random positive 159-bit serial number;
- signature ``ecdsa-with-SHA256`` (signed by its own key: issuer = subject);
- issuer and subject: one ``commonName`` (UTF8String);
- validity: ``UTCTime`` before 2050, ``GeneralizedTime`` from then (RFC 5280 4.1.2.5),
  to the second, in UTC;
- the key as ``SubjectPublicKeyInfo`` (from the key itself);
- one critical extension, ``basicConstraints``: CA, path length 0 (a peer pins it and
  trusts exactly it, partial chains allowed).

Invariant: :func:`make` returns a certificate ``cryptography.x509`` and OpenSSL parse
as those fields, its signature verifying with its own key (``tests/remote/test_tls``).
"""

from __future__ import annotations

import datetime
import os
import ssl

ECDSA_SHA256 = bytes.fromhex("300a06082a8648ce3d040302")
"""AlgorithmIdentifier ``ecdsa-with-SHA256`` (1.2.840.10045.4.3.2), no parameters."""
COMMON_NAME = bytes.fromhex("0603550403")
"""OBJECT IDENTIFIER ``commonName`` (2.5.4.3)."""
CA_PATH_0 = bytes.fromhex("30120603551d130101ff040830060101ff020100")
"""Extension ``basicConstraints`` (2.5.29.19), critical: ``cA`` true, path length 0."""
VERSION_3 = bytes.fromhex("a003020102")
"""``[0] EXPLICIT INTEGER 2``: version 3."""


def _der(tag: int, body: bytes) -> bytes:
    """One DER element: its tag, definite length, and ``body``."""
    size = len(body)
    if size < 0x80:
        return bytes([tag, size]) + body
    length = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(length)]) + length + body


def _integer(value: int) -> bytes:
    """A non-negative INTEGER (a leading zero byte keeps it positive)."""
    return _der(0x02, value.to_bytes(value.bit_length() // 8 + 1, "big"))


def _time(when: datetime.datetime) -> bytes:
    """``when`` (UTC) as RFC 5280 wants it: UTCTime before 2050, else
    GeneralizedTime."""
    when = when.astimezone(datetime.UTC)
    if when.year < 2050:
        return _der(0x17, when.strftime("%y%m%d%H%M%SZ").encode())
    return _der(0x18, when.strftime("%Y%m%d%H%M%SZ").encode())


def _name(common_name: str) -> bytes:
    """A Name of one ``commonName``."""
    attribute = _der(0x30, COMMON_NAME + _der(0x0C, common_name.encode()))
    return _der(0x30, _der(0x31, attribute))


def make(name: str, days: int) -> tuple[str, str]:
    """A new key and its self-signed certificate for ``name``, valid from five
    minutes ago (clocks differ) for ``days``: (certificate PEM, PKCS#8 key PEM)."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    validity = _der(
        0x30,
        _time(now - datetime.timedelta(minutes=5))
        + _time(now + datetime.timedelta(days=days)),
    )
    tbs = _der(
        0x30,
        VERSION_3
        + _integer(int.from_bytes(os.urandom(20), "big") >> 1)
        + ECDSA_SHA256
        + _name(name)
        + validity
        + _name(name)
        + public
        + _der(0xA3, _der(0x30, CA_PATH_0)),
    )
    signature = key.sign(tbs, ec.ECDSA(hashes.SHA256()))
    cert = _der(0x30, tbs + ECDSA_SHA256 + _der(0x03, b"\x00" + signature))
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return ssl.DER_cert_to_PEM_cert(cert), key_pem.decode()
