"""The wire decoder under generated hostile input (hypothesis).

Each example is a stream of frames, most of them almost right -- a real prefix and
JSON header with one thing wrong (a kind no one knows, a length that lies, a header
that is not JSON, not an object or nested too deep, a stream cut anywhere) -- sent
through a socket to a :class:`~rcp_core.remote.wire.FrameReader`. For every stream:

- no crash: each read gives a frame, the clean end, or a protocol-level error
  (:class:`ProtocolError`, :class:`ConnectionLostError`), never another exception;
- no hang: the stream is read to its end (or its first error) within the socket's
  timeout, in at most one read per frame sent plus one;
- bounded memory: the reader never holds more than its frame limit (traced
  allocations stay under a few times the limit, whatever lengths the stream claims).

Figure: frames sent / frames handled (decoded or refused cleanly).
"""

from __future__ import annotations

import json
import random
import socket
import struct
import threading
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rcp_core.errors import ConnectionLostError, ProtocolError
from rcp_core.remote.wire import PREFIX, FrameReader
from support.reliability import Figure, Scale, published

LIMIT = 1 << 16
"""The reader's frame limit here: lengths beyond it must be refused unread."""
MEMORY = 4 * LIMIT + (1 << 20)
"""Traced peak allowed per stream: the payload buffer, its decoding, and slack."""

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)
FRAMES = (30, 80)
"""How many frames a stream has: enough that one stream carries many flaws in a row."""


@st.composite
def frames(draw: st.DrawFn) -> bytes:
    """One frame: right, or with one part wrong.

    Hypothesis draws the frame's shape (its flaw, kind, header and sizes); its raw
    bytes (a payload, a body that is not JSON) come from a drawn seed, so a stream of
    many frames stays within what Hypothesis can draw per example.
    """
    flaw = draw(
        st.sampled_from(
            [
                "none",
                "kind",
                "length",
                "header_length",
                "not_json",
                "not_object",
                "deep",
                "huge",
            ]
        )
    )
    noise = random.Random(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.integers(1, 5)) if flaw != "kind" else draw(st.integers(0, 255))
    header: Any = draw(st.dictionaries(st.text(max_size=8), JSON, max_size=3))
    if flaw == "not_object":
        header = draw(JSON.filter(lambda v: not isinstance(v, dict)))
    if flaw == "deep":
        for _ in range(draw(st.integers(33, 200))):
            header = {"x": header}
    body = json.dumps(header).encode()
    if flaw == "not_json":
        body = noise.randbytes(draw(st.integers(1, 64)))
    data = noise.randbytes(draw(st.integers(0, 512)))
    length, header_length = 5 + len(body) + len(data), len(body)
    if flaw == "length":
        length = draw(st.integers(0, 2 * length + 16))
    if flaw == "header_length":
        header_length = draw(st.integers(0, 2**32 - 1))
    if flaw == "huge":
        length = draw(st.integers(LIMIT + 1, 2**32 - 1))
    return PREFIX.pack(length, kind, header_length) + body + data


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, int]:
    """Several frames, perhaps cut short; (the bytes, how many frames)."""
    parts = draw(st.lists(frames(), min_size=FRAMES[0], max_size=FRAMES[1]))
    stream = b"".join(parts)
    if draw(st.booleans()):
        stream = stream[: draw(st.integers(0, len(stream)))]
    return stream, len(parts)


def read_all(stream: bytes, sent: int) -> str:
    """Feed ``stream`` to a reader; how it ended (``end``, ``refused``)."""
    a, b = socket.socketpair()
    writer = threading.Thread(target=lambda: (a.sendall(stream), a.shutdown(1)))
    try:
        b.settimeout(2.0)
        writer.start()
        reader = FrameReader(b, max_frame=LIMIT)
        for _ in range(sent + 1):
            try:
                frame = reader.read()
            except (ProtocolError, ConnectionLostError):
                return "refused"
            if frame is None:
                return "end"
            assert isinstance(frame.header, dict)
        raise AssertionError("more frames read than sent")
    finally:
        b.close()  # a writer blocked on a full buffer gets EPIPE and ends
        writer.join(5)
        a.close()
        assert not writer.is_alive()


@pytest.mark.timeout(1800)  # make stress: over 100,000 frames
def test_hostile_frames_are_decoded_or_refused_cleanly(
    scale: Scale, figures: list[Figure]
) -> None:
    figure = published(figures, "hostile input", "wire decoder: generated frames")

    @settings(
        max_examples=scale.trials(fast=50, full=3300),
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(streams())
    def check(case: tuple[bytes, int]) -> None:
        stream, sent = case
        tracemalloc.start()
        try:
            read_all(stream, sent)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        figure.tried += sent
        assert peak < MEMORY, f"{peak} bytes traced for one stream"
        figure.survived += sent

    try:
        check()
    except Exception as exc:
        figure.failed(f"{type(exc).__name__}: {exc}"[:300], crash=True)
        raise
    assert figure.tried >= scale.trials(fast=1500, full=100_000)
    assert figure.clean, figure.notes


def test_the_frame_layout_the_generator_builds_on() -> None:
    """The generator's prefix is the wire's: a frame it calls right decodes."""
    body = json.dumps({"type": "ping"}).encode()
    stream = struct.pack(">IBI", 5 + len(body), 2, len(body)) + body
    assert read_all(stream, 1) == "end"
