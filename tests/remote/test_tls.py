"""TLS: pinned servers, known clients, and refusals, over real loopback sockets."""

from __future__ import annotations

import contextlib
import datetime
import socket
import ssl
import threading
from collections.abc import Callable, Iterator

import pytest

from rcp_core.errors import AuthenticationError
from rcp_core.remote import tls
from rcp_core.remote.tls import Identity

TIMEOUT = 5.0


@pytest.fixture(scope="module")
def server_id() -> Identity:
    return Identity.ephemeral("server")


@pytest.fixture(scope="module")
def client_id() -> Identity:
    return Identity.ephemeral("client")


@contextlib.contextmanager
def _serve(
    ctx: ssl.SSLContext, handle: Callable[[ssl.SSLSocket], None]
) -> Iterator[tuple[int, list[BaseException]]]:
    """Accept one connection on loopback, handshake, hand it to ``handle``."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(TIMEOUT)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            conn, _ = listener.accept()
            conn.settimeout(TIMEOUT)
            with ctx.wrap_socket(conn, server_side=True) as tls_conn:
                handle(tls_conn)
        except (OSError, ssl.SSLError) as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield listener.getsockname()[1], errors
    finally:
        thread.join(TIMEOUT)
        listener.close()


def _echo(conn: ssl.SSLSocket) -> None:
    conn.sendall(conn.recv(100))


def _dial(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)


def test_identities_are_fresh_and_fingerprints_are_sha256_hex(
    server_id: Identity,
) -> None:
    other = Identity.ephemeral()
    assert other.fingerprint != server_id.fingerprint
    assert len(server_id.fingerprint) == 64
    int(server_id.fingerprint, 16)


def test_a_client_talks_to_the_pinned_server(server_id: Identity) -> None:
    with (
        _serve(tls.server_context(server_id, None), _echo) as (port, errors),
        tls.connect(
            _dial(port), tls.client_context(None), server_id.fingerprint, "server"
        ) as conn,
    ):
        assert conn.version() == "TLSv1.3"
        conn.sendall(b"ping")
        assert conn.recv(100) == b"ping"
    assert errors == []


def test_a_server_with_another_certificate_is_refused(server_id: Identity) -> None:
    impostor = Identity.ephemeral("server")
    with (
        _serve(tls.server_context(impostor, None), _echo) as (port, _),
        pytest.raises(AuthenticationError, match="is not the pinned"),
    ):
        tls.connect(
            _dial(port), tls.client_context(None), server_id.fingerprint, "server"
        )


def test_mutual_tls_admits_exactly_the_known_client(
    server_id: Identity, client_id: Identity
) -> None:
    ctx = tls.server_context(server_id, client_id.cert_pem)
    seen: list[str] = []

    def remember(conn: ssl.SSLSocket) -> None:
        der = conn.getpeercert(binary_form=True)
        assert der is not None
        seen.append(tls.fingerprint(der))
        _echo(conn)

    with (
        _serve(ctx, remember) as (port, errors),
        tls.connect(
            _dial(port), tls.client_context(client_id), server_id.fingerprint, "server"
        ) as conn,
    ):
        conn.sendall(b"hi")
        assert conn.recv(100) == b"hi"
    assert errors == []
    assert seen == [client_id.fingerprint]


def _handshake_and_use(port: int, me: Identity | None, pin: str) -> None:
    """Connect and talk: with TLS 1.3 the client's side of the handshake finishes
    first, so a server's refusal of the client arrives on first use."""
    with tls.connect(_dial(port), tls.client_context(me), pin, "server") as conn:
        conn.sendall(b"x")
        conn.recv(1)


@pytest.mark.parametrize("present", ["nothing", "another certificate"])
def test_mutual_tls_refuses_an_unknown_client(
    server_id: Identity, client_id: Identity, present: str
) -> None:
    ctx = tls.server_context(server_id, client_id.cert_pem)
    stranger = Identity.ephemeral("client") if present != "nothing" else None
    with (
        _serve(ctx, _echo) as (port, errors),
        pytest.raises((ssl.SSLError, ConnectionError)),
    ):
        _handshake_and_use(port, stranger, server_id.fingerprint)
    assert errors
    assert isinstance(errors[0], ssl.SSLError)


def test_tls_below_1_3_is_refused(server_id: Identity) -> None:
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.check_hostname = False
    old.verify_mode = ssl.CERT_NONE
    old.maximum_version = ssl.TLSVersion.TLSv1_2
    with (
        _serve(tls.server_context(server_id, None), _echo) as (port, errors),
        _dial(port) as sock,
        pytest.raises(ssl.SSLError),
    ):
        old.wrap_socket(sock)
    assert errors


@pytest.mark.parametrize(
    ("name", "days"), [("rcpd-source", 1), ("rcpd ü", 3650), ("after 2049", 10000)]
)
def test_an_identity_is_the_self_signed_ca_certificate_it_says(
    name: str, days: int
) -> None:
    """The certificate encoded by :mod:`rcp_core.remote.selfsigned`, read back by
    ``cryptography.x509``: version 3, the name as issuer and subject, a positive
    serial, valid from five minutes ago for ``days``, a CA of path length 0, and
    signed by the key that comes with it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    identity = Identity.ephemeral(name, days)
    cert = x509.load_pem_x509_certificate(identity.cert_pem.encode())
    key = serialization.load_pem_private_key(identity.key_pem.encode(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert isinstance(key.curve, ec.SECP256R1)
    assert cert.version is x509.Version.v3
    common = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, name)])
    assert cert.subject == cert.issuer == common
    assert 0 < cert.serial_number < 1 << 159
    start = cert.not_valid_before_utc
    assert before - datetime.timedelta(minutes=5) <= start
    assert start <= before - datetime.timedelta(minutes=4)
    assert cert.not_valid_after_utc - start == datetime.timedelta(days=days, minutes=5)
    (extension,) = cert.extensions
    assert extension.critical
    assert extension.value == x509.BasicConstraints(ca=True, path_length=0)
    assert cert.public_key() == key.public_key()
    assert isinstance(cert.signature_hash_algorithm, hashes.SHA256)
    cert.verify_directly_issued_by(cert)
    assert ssl.DER_cert_to_PEM_cert(ssl.PEM_cert_to_DER_cert(identity.cert_pem)) == (
        identity.cert_pem
    )
