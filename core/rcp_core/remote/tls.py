"""TLS on every rcp connection: per-run identities, pinned certificates, no CA.

Each process of a remote copy makes a fresh key and a self-signed certificate
(:meth:`Identity.ephemeral`, ECDSA P-256); an ``rcpd serve`` service may keep one in
files (:meth:`Identity.load`). A peer is trusted because its certificate's SHA-256
fingerprint is the one we were told out of band: over the SSH channel that launched a
daemon, or in the configuration of a service.

- A *client* (the side that connects) does not verify a chain; after the handshake it
  compares the server certificate's fingerprint with the pinned one and closes on a
  mismatch. TLS 1.3 always checks the server's ``CertificateVerify`` signature, so a
  peer that only replays a certificate cannot complete the handshake.
- A *server* that must know its client (mutual TLS between daemons, a service with
  ``--client-cert``) trusts exactly that certificate (``cadata``, partial chains
  allowed), so an unknown client fails the handshake; the fingerprint is checked again
  after it.
- TLS 1.3 only. Handshakes run under the socket's timeout (bounded by the caller).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rcp_core.errors import AuthenticationError


def fingerprint(der: bytes) -> str:
    """SHA-256 of a DER certificate, lower-case hex (what users compare and pin)."""
    return hashlib.sha256(der).hexdigest()


def pem_fingerprint(pem: str) -> str:
    """:func:`fingerprint` of a PEM certificate."""
    return fingerprint(ssl.PEM_cert_to_DER_cert(pem))


@dataclass(frozen=True, slots=True)
class Identity:
    """A certificate (PEM) and its private key (PEM, unencrypted, kept in memory)."""

    cert_pem: str
    key_pem: str

    @property
    def fingerprint(self) -> str:
        return pem_fingerprint(self.cert_pem)

    @classmethod
    def ephemeral(cls, name: str = "rcp", days: int = 1) -> Identity:
        """A new ECDSA P-256 key and a self-signed certificate valid for ``days``
        (:mod:`rcp_core.remote.selfsigned`)."""
        from rcp_core.remote.selfsigned import make

        return cls(*make(name, days))

    @classmethod
    def load(cls, cert_file: Path, key_file: Path) -> Identity:
        """A service's identity from its files."""
        return cls(cert_file.read_text(), key_file.read_text())

    @classmethod
    def stored(cls, directory: Path, name: str) -> Identity:
        """A service's identity kept in ``directory`` (``cert.pem``, ``key.pem``):
        loaded if there, else made (valid ten years: clients pin it, no CA expires
        it) and written, the key readable by its owner only and complete before it
        gets its name."""
        cert_file, key_file = directory / "cert.pem", directory / "key.pem"
        if cert_file.exists() and key_file.exists():
            return cls.load(cert_file, key_file)
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        identity = cls.ephemeral(name, days=3650)
        for path, text in (
            (key_file, identity.key_pem),
            (cert_file, identity.cert_pem),
        ):
            fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.")
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(temp, path)
        return identity

    def _load_into(self, ctx: ssl.SSLContext) -> None:
        # ssl only loads keys from files: a private temporary file, gone at once.
        fd, path = tempfile.mkstemp(prefix="rcp-tls-")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(self.cert_pem + self.key_pem)
            ctx.load_cert_chain(path)
        finally:
            os.unlink(path)


def _context(purpose: ssl.Purpose) -> ssl.SSLContext:
    ctx = ssl.SSLContext(
        ssl.PROTOCOL_TLS_SERVER
        if purpose is ssl.Purpose.CLIENT_AUTH
        else ssl.PROTOCOL_TLS_CLIENT
    )
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    return ctx


def server_context(identity: Identity, client_cert_pem: str | None) -> ssl.SSLContext:
    """A server context; with ``client_cert_pem``, only that client can connect."""
    ctx = _context(ssl.Purpose.CLIENT_AUTH)
    identity._load_into(ctx)
    if client_cert_pem is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
        ctx.load_verify_locations(cadata=client_cert_pem)
    return ctx


def client_context(identity: Identity | None) -> ssl.SSLContext:
    """A client context presenting ``identity`` (if any); the server is pinned after
    the handshake by :func:`check_pin`, not by a chain."""
    ctx = _context(ssl.Purpose.SERVER_AUTH)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if identity is not None:
        identity._load_into(ctx)
    return ctx


def check_pin(sock: ssl.SSLSocket, expected: str, peer: str) -> None:
    """Close ``sock`` and raise unless the peer's certificate has the ``expected``
    fingerprint.

    :param peer: who the peer should be, for the error message.
    """
    der = sock.getpeercert(binary_form=True)
    got = fingerprint(der) if der else ""
    if not hmac.compare_digest(got, expected.lower()):
        sock.close()
        shown = got[:16] + "..." if got else "no certificate"
        raise AuthenticationError(
            f"{peer}: certificate fingerprint {shown} is not the pinned "
            f"{expected[:16]}..."
        )


def connect(
    sock: socket.socket, ctx: ssl.SSLContext, expected: str, peer: str
) -> ssl.SSLSocket:
    """Handshake as a client on a connected ``sock`` and pin the server; the socket
    is closed if either fails."""
    try:
        tls = ctx.wrap_socket(sock, server_side=False)
    except BaseException:
        sock.close()
        raise
    check_pin(tls, expected, peer)
    return tls
