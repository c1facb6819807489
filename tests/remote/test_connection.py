"""Connections: hello, pinning and tokens end to end on loopback, every wait bounded."""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rcp_core.errors import (
    AuthenticationError,
    PeerTimeoutError,
    ProtocolError,
    TokenRefusedError,
)
from rcp_core.remote import tls
from rcp_core.remote.connection import Connection
from rcp_core.remote.handshake import accept, dial
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
    # server's hello: a TokenRefusedError (never retried), not any RemoteError.
    with (
        serving(_server(ctx, token="s3cret")) as (address, out),
        pytest.raises(TokenRefusedError, match="authentication failed"),
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


def test_a_hello_trickled_byte_by_byte_ends_at_the_handshake_deadline() -> None:
    """A peer that sends its hello one byte every 0.1 s (a read never waits long,
    the frame would take seconds) is dropped when the handshake's second is up."""

    def handle(sock: socket.socket) -> Any:
        started = time.monotonic()
        try:
            accept(
                sock, "client", role=Role.SOURCE, software="s", timeout=1.0, ctx=None
            )
        except PeerTimeoutError:
            return time.monotonic() - started
        return None

    hello = encode(
        FrameKind.HELLO, {"protocol": list(PROTOCOL), "role": "master", "software": "c"}
    )
    with (
        serving(handle) as (address, out),
        socket.create_connection(address, timeout=TIMEOUT) as sock,
    ):
        for byte in hello:
            if out:
                break
            with contextlib.suppress(OSError):  # the server hung up: done
                sock.sendall(bytes([byte]))
            time.sleep(0.1)
    assert len(hello) * 0.1 > 3.0  # without the deadline it would outlast the bound
    assert isinstance(out[0], float)
    assert out[0] < 1.5


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


def _echo_frames(sock: socket.socket, ctx: ssl.SSLContext | None) -> Any:
    """The server's side of the file tests: every frame's header and data, until the
    client closes."""
    conn = accept(
        sock, "client", role=Role.SOURCE, software="s", timeout=TIMEOUT, ctx=ctx
    )
    frames = []
    while (frame := conn.read()) is not None:
        frames.append((frame.header, bytes(frame.data)))
    conn.close()
    return frames


@pytest.mark.parametrize("encrypted", [False, True], ids=["sendfile", "tls"])
def test_send_file_sends_the_files_bytes_and_keeps_step_when_it_shrank(
    tmp_path: Path, server_id: tls.Identity, encrypted: bool
) -> None:
    """Two pieces of a file, then one from past its end: the short frame is padded
    with zeros (the stream stays in step: the frame after it arrives intact) and
    ``send_file`` says how much of it was the file's."""
    content = bytes(range(256)) * 4096 + b"tail"
    path = tmp_path / "f"
    path.write_bytes(content)
    ctx = tls.server_context(server_id, None) if encrypted else None
    pin = server_id.fingerprint if encrypted else None
    with serving(lambda sock: _echo_frames(sock, ctx)) as (address, out):
        conn = dial(address, role=Role.MASTER, software="c", timeout=TIMEOUT, pin=pin)
        assert isinstance(conn.sock, ssl.SSLSocket) is encrypted
        fd = os.open(path, os.O_RDONLY)
        try:
            half = len(content) // 2
            sent = [
                conn.send_file(FrameKind.CHUNK, {"n": 0}, fd, 0, half),
                conn.send_file(
                    FrameKind.CHUNK, {"n": 1}, fd, half, len(content) - half
                ),
                conn.send_file(FrameKind.CHUNK, {"n": 2}, fd, len(content) - 4, 100),
            ]
        finally:
            os.close(fd)
        conn.send_control("after")
        conn.close()
    assert sent == [half, len(content) - half, 4]
    frames = out[0]
    assert [header for header, _ in frames] == [
        {"n": 0},
        {"n": 1},
        {"n": 2},
        {"type": "after"},
    ]
    assert frames[0][1] + frames[1][1] == content
    assert frames[2][1] == b"tail" + bytes(96)


def _timed_frames(sock: socket.socket, ctx: ssl.SSLContext | None) -> Any:
    """The server's side of the trickle test: each frame's data length and how long
    after the first byte was sent it was read whole."""
    conn = accept(
        sock, "client", role=Role.SOURCE, software="s", timeout=TIMEOUT, ctx=ctx
    )
    got = []
    while (frame := conn.read()) is not None:
        got.append((len(frame.data), time.monotonic()))
    conn.close()
    return got


@pytest.mark.parametrize("encrypted", [False, True], ids=["tcp", "tls"])
def test_a_frame_trickling_in_is_read_as_its_last_byte_arrives(
    server_id: tls.Identity, encrypted: bool
) -> None:
    """A reader inside a large frame lets the kernel wake it only once 256 KiB more
    arrived (``SO_RCVLOWAT``), never for more than the frame still has: a frame whose
    last pieces come slowly and small, over TCP and TLS, is read as soon as they are
    there, not at the read timeout."""
    ctx = tls.server_context(server_id, None) if encrypted else None
    pin = server_id.fingerprint if encrypted else None
    sizes = [700_000, 300_000, 17_000, 5]
    with serving(lambda sock: _timed_frames(sock, ctx)) as (address, out):
        conn = dial(address, role=Role.MASTER, software="c", timeout=TIMEOUT, pin=pin)
        sent = []
        for size in sizes:
            frame = encode(FrameKind.CHUNK, {"size": size}, os.urandom(size))
            cuts = sorted({max(0, len(frame) - back) for back in (20_000, 10, 1)})
            bounds = [0, *[c for c in cuts if c > 0], len(frame)]
            for low, high in itertools.pairwise(bounds):
                time.sleep(0.1)
                conn.sock.sendall(frame[low:high])
            sent.append(time.monotonic())
        conn.close()
    got = out[0]
    assert [size for size, _ in got] == sizes
    for (_, read), last_byte in zip(got, sent, strict=True):
        assert read - last_byte < 1.0  # the read timeout is 5 s
