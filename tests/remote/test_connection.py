"""Connections: hello, pinning and tokens end to end on loopback, every wait bounded."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rcp_core.errors import (
    AuthenticationError,
    PeerTimeoutError,
    ProtocolError,
    RemoteError,
)
from rcp_core.remote import tls
from rcp_core.remote.connection import Connection, accept, dial
from rcp_core.remote.hello import PROTOCOL, Role
from rcp_core.remote.wire import FrameKind, FrameReader, encode

TIMEOUT = 5.0


@pytest.fixture(scope="module")
def server_id() -> tls.Identity:
    return tls.Identity.ephemeral("server")


@contextlib.contextmanager
def serving(
    handle: Callable[[socket.socket], Any],
) -> Iterator[tuple[tuple[str, int], list[Any]]]:
    """One accepted connection on loopback, given to ``handle`` in a thread; what it
    returns or raises lands in the list."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(TIMEOUT)
    out: list[Any] = []

    def run() -> None:
        try:
            sock, _ = listener.accept()
            out.append(handle(sock))
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield listener.getsockname()[:2], out
    finally:
        thread.join(TIMEOUT * 2)
        listener.close()


def _server(
    ctx: ssl.SSLContext | None, token: str | None = None
) -> Callable[[socket.socket], Any]:
    def handle(sock: socket.socket) -> Any:
        conn = accept(
            sock,
            "client",
            role=Role.SOURCE,
            software="test-server",
            timeout=TIMEOUT,
            ctx=ctx,
            token=token,
        )
        frame = conn.expect(FrameKind.CONTROL, "ping")
        conn.send_control("pong", n=frame.header["n"])
        conn.close()
        return conn.hello

    return handle


def _ping(conn: Connection) -> int:
    conn.send_control("ping", n=41)
    got: int = conn.expect(FrameKind.CONTROL, "pong").header["n"]
    conn.close()
    return got


def test_a_pinned_tls_connection_greets_and_talks(server_id: tls.Identity) -> None:
    with serving(_server(tls.server_context(server_id, None))) as (address, out):
        conn = dial(
            address,
            role=Role.MASTER,
            software="test-client",
            timeout=TIMEOUT,
            pin=server_id.fingerprint,
        )
        assert conn.hello is not None
        assert (conn.hello.role, conn.hello.software) == (Role.SOURCE, "test-server")
        assert conn.version == PROTOCOL
        assert _ping(conn) == 41
    assert out[0].role is Role.MASTER


def test_plain_tcp_when_encryption_is_off() -> None:
    with serving(_server(None)) as (address, out):
        conn = dial(address, role=Role.MASTER, software="c", timeout=TIMEOUT, pin=None)
        assert not isinstance(conn.sock, ssl.SSLSocket)
        assert _ping(conn) == 41
    assert out[0].role is Role.MASTER


def test_the_wrong_server_certificate_is_refused(server_id: tls.Identity) -> None:
    other = tls.Identity.ephemeral()
    with (
        serving(_server(tls.server_context(other, None))) as (address, _),
        pytest.raises(AuthenticationError, match="is not the pinned"),
    ):
        dial(
            address,
            role=Role.MASTER,
            software="c",
            timeout=TIMEOUT,
            pin=server_id.fingerprint,
        )


@pytest.mark.parametrize("given", [None, "wrong"])
def test_a_service_token_is_required(
    server_id: tls.Identity, given: str | None
) -> None:
    ctx = tls.server_context(server_id, None)
    # The refusal is the server's ERROR frame, read where the client waits for the
    # server's hello.
    with (
        serving(_server(ctx, token="s3cret")) as (address, out),
        pytest.raises(RemoteError, match="authentication failed"),
    ):
        dial(
            address,
            role=Role.CLIENT,
            software="c",
            timeout=TIMEOUT,
            pin=server_id.fingerprint,
            token=given,
        )
    assert isinstance(out[0], AuthenticationError)


def test_the_right_token_is_accepted(server_id: tls.Identity) -> None:
    ctx = tls.server_context(server_id, None)
    with serving(_server(ctx, token="s3cret")) as (address, out):
        conn = dial(
            address,
            role=Role.CLIENT,
            software="c",
            timeout=TIMEOUT,
            pin=server_id.fingerprint,
            token="s3cret",
        )
        assert _ping(conn) == 41
    assert out[0].token == "s3cret"


def test_an_incompatible_major_version_is_a_clear_error_on_both_sides() -> None:
    def old_client(address: tuple[str, int]) -> str:
        with socket.create_connection(address, timeout=TIMEOUT) as sock:
            hello = {"protocol": [2, 0], "role": "master", "software": "rcp 9"}
            sock.sendall(encode(FrameKind.HELLO, hello))
            frame = FrameReader(sock).read()
            assert frame is not None
            assert frame.kind is FrameKind.ERROR
            return str(frame.header["reason"])

    with serving(_server(None)) as (address, out):
        reason = old_client(address)
    ours = f"{PROTOCOL[0]}.{PROTOCOL[1]}"
    assert f"speaks rcp protocol 2.0, this side {ours}" in reason
    assert isinstance(out[0], ProtocolError)


def test_a_silent_client_is_dropped_within_the_timeout(
    server_id: tls.Identity,
) -> None:
    """A peer that connects and never handshakes (half-open) costs a bounded wait."""

    def handle(sock: socket.socket) -> Any:
        started = time.monotonic()
        try:
            accept(
                sock,
                "client",
                role=Role.SOURCE,
                software="s",
                timeout=0.5,
                ctx=tls.server_context(server_id, None),
            )
        except PeerTimeoutError:
            return time.monotonic() - started
        return None

    with (
        serving(handle) as (address, out),
        socket.create_connection(address, timeout=TIMEOUT),
    ):
        deadline = time.monotonic() + TIMEOUT
        while not out and time.monotonic() < deadline:
            time.sleep(0.05)
    assert isinstance(out[0], float)
    assert out[0] < 2.0


def test_a_silent_server_times_out_the_dial(server_id: tls.Identity) -> None:
    listener = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    try:
        started = time.monotonic()
        with pytest.raises(PeerTimeoutError):
            dial(
                listener.getsockname()[:2],
                role=Role.MASTER,
                software="c",
                timeout=0.5,
                pin=server_id.fingerprint,
            )
        assert time.monotonic() - started < 2.0
    finally:
        listener.close()
