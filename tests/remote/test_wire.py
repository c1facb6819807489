"""Frames: exact round trips, and every malformed or stalled input a clear error."""

from __future__ import annotations

import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rcp_core.errors import ConnectionLostError, PeerTimeoutError, ProtocolError
from rcp_core.remote.wire import (
    PREFIX,
    FrameKind,
    FrameReader,
    encode,
)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    b.settimeout(2.0)
    yield a, b
    a.close()
    b.close()


def test_frames_round_trip_with_their_data(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    odd_name = os.fsdecode(b"caf\xe9-\xff.txt")  # not UTF-8: surrogate escapes
    frames = [
        (FrameKind.HELLO, {"protocol": [1, 0], "role": "master"}, b""),
        (FrameKind.FILES, {"dir": "a/b", "names": [odd_name, "x"]}, b"\x00" * 70_000),
        (FrameKind.CHUNK, {"file": 7, "offset": 1 << 40}, os.urandom(1000)),
        (FrameKind.ERROR, {"reason": "é ünïcode"}, b""),
    ]
    sender = threading.Thread(
        target=lambda: [a.sendall(encode(k, h, d)) for k, h, d in frames]
    )
    sender.start()
    reader = FrameReader(b)
    for kind, header, data in frames:
        frame = reader.read()
        assert frame is not None
        assert (frame.kind, frame.header, bytes(frame.data)) == (kind, header, data)
    sender.join()
    names = frames[1][1]["names"]
    assert os.fsencode(names[0]) == b"caf\xe9-\xff.txt"
    a.shutdown(socket.SHUT_WR)
    assert reader.read() is None  # closed between frames: the normal end


def _raw(length: int, kind: int, header_length: int, rest: bytes = b"") -> bytes:
    return PREFIX.pack(length, kind, header_length) + rest


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_raw(4, 1, 0), "below the minimum"),
        (_raw(1 << 30, 1, 2), "exceeds the limit"),
        (_raw(5 + 2, 99, 2, b"{}"), "unknown frame kind 99"),
        (_raw(5 + 2, 2, 9, b"{}"), "header of 9 bytes"),
        (_raw(5 + 3, 2, 3, b"{x}"), "not JSON"),
        (_raw(5 + 2, 2, 2, b"\xff\xfe"), "not JSON"),
        (_raw(5 + 2, 2, 2, b"[]"), "a list, not an object"),
    ],
)
def test_malformed_frames_are_protocol_errors(
    pair: tuple[socket.socket, socket.socket], raw: bytes, message: str
) -> None:
    a, b = pair
    a.sendall(raw)
    with pytest.raises(ProtocolError, match=message):
        FrameReader(b).read()


def test_a_deeply_nested_header_is_refused(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """Deeper than the decoder descends: refused, never a crash of the reader."""
    a, b = pair
    depth = sys.getrecursionlimit() + 10
    body = b'{"x":' + b"[" * depth + b"]" * depth + b"}"
    a.sendall(PREFIX.pack(5 + len(body), FrameKind.CONTROL, len(body)) + body)
    with pytest.raises(ProtocolError, match="not JSON"):
        FrameReader(b).read()


def test_a_frame_over_the_limit_is_refused_before_its_payload_is_read(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    # Announce 100 MiB and send none of it: the reader must not wait for (or
    # allocate) the payload.
    a.sendall(_raw(100 << 20, 3, 2))
    started = time.monotonic()
    with pytest.raises(ProtocolError, match="exceeds the limit of 1048576"):
        FrameReader(b, max_frame=1 << 20).read()
    assert time.monotonic() - started < 1.0


def test_a_close_inside_a_frame_is_a_lost_connection(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    a.sendall(encode(FrameKind.CONTROL, {"type": "x"}, b"12345")[:-2])
    a.shutdown(socket.SHUT_WR)
    with pytest.raises(ConnectionLostError, match="inside a frame"):
        FrameReader(b).read()


def test_a_stalled_peer_times_out_within_the_socket_timeout(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    b.settimeout(0.3)
    a.sendall(encode(FrameKind.CONTROL, {"type": "x"})[:7])
    started = time.monotonic()
    with pytest.raises(PeerTimeoutError):
        FrameReader(b).read()
    assert time.monotonic() - started < 2.0


def test_errors_carry_errnos_that_classify_them() -> None:
    from rcp_core.run.runtime import Kind, classify

    assert classify(PeerTimeoutError("x")) is Kind.TRANSIENT
    assert classify(ConnectionLostError("x")) is Kind.TRANSIENT


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.binary(max_size=4096))
def test_arbitrary_bytes_decode_or_fail_cleanly(data: bytes) -> None:
    """Fuzz: any byte stream yields frames, a clean end, or a protocol-level error;
    never another exception, never a hang."""
    a, b = socket.socketpair()
    try:
        b.settimeout(0.5)
        a.sendall(data)
        a.shutdown(socket.SHUT_WR)
        reader = FrameReader(b, max_frame=1 << 16)
        for _ in range(len(data) + 1):
            try:
                frame = reader.read()
            except (ProtocolError, ConnectionLostError):
                break
            if frame is None:
                break
            assert isinstance(frame.header, dict)
        else:
            pytest.fail("more frames than bytes")
    finally:
        a.close()
        b.close()


def test_prefix_layout_is_the_documented_one() -> None:
    frame = encode(FrameKind.CHUNK, {}, b"ab")
    assert struct.unpack(">IBI", frame[:9]) == (5 + 2 + 2, 4, 2)
    assert frame[9:] == b"{}ab"


def test_a_link_too_slow_for_the_low_water_mark_is_read_as_it_comes() -> None:
    """400 KB trickling in at 200 KB/s over TCP, with a 1 s read timeout: waiting for
    256 KiB at a time (``SO_RCVLOWAT``) would take 1.3 s per wake-up, longer than the
    timeout, yet data never stops coming, so the reader takes what came instead of
    calling the peer silent."""
    listener = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(listener.getsockname()[:2])
    b, _ = listener.accept()
    listener.close()
    data = os.urandom(400_000)
    frame = encode(FrameKind.CHUNK, {"n": 1}, data)

    def trickle() -> None:
        for start in range(0, len(frame), 20_000):
            a.sendall(frame[start : start + 20_000])
            time.sleep(0.1)

    sender = threading.Thread(target=trickle)
    sender.start()
    try:
        got = FrameReader(b, frame_timeout=1.0).read()
        assert got is not None
        assert bytes(got.data) == data
    finally:
        sender.join()
        a.close()
        b.close()
