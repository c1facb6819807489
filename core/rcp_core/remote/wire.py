"""Frames on an rcp connection: the one place where bytes become messages.

Every frame is::

    length:u32 | kind:u8 | header_length:u32 | header (JSON object, UTF-8) | data

big-endian, where ``length`` counts everything after itself (so at least 5) and
``data`` is the raw bytes some kinds carry (file contents). See
``docs/remote_protocol.md`` for the kinds and the flow.

Invariants of :class:`FrameReader` -- what a hostile or broken peer can do to us:

- a frame longer than ``max_frame``, a header longer than its frame, an unknown kind,
  a header that is not a JSON object, or one nested deeper than the JSON decoder
  descends (the interpreter's recursion limit) raise :class:`ProtocolError` before
  anything is acted on; nothing else walks a header recursively, so no depth
  matters after decoding (a walk bounding it cost twice the decoding); a reader
  holds one buffer, as large as the largest frame it has read, so its memory is
  bounded by ``max_frame`` (and a stream of large frames allocates nothing);
- every read inside a frame has a deadline (``frame_timeout``); a peer that stops
  mid-frame raises :class:`PeerTimeoutError`, one that closes mid-frame
  :class:`ConnectionLostError`; a close *between* frames is the normal end (``None``).
  Between frames the wait is ``idle_timeout`` (``None``: as long as the peer is alive,
  which TCP keepalive checks: a peer whose host stopped answering the probes is
  :class:`ConnectionLostError`).
- on TCP, a read of a frame's body waits for :data:`LOW_WATER` bytes (or what is
  left of the frame, less a TLS record) before the kernel wakes it
  (``SO_RCVLOWAT``), so data that arrives slower than it is read costs a wake-up,
  a poll and a read per 256 KiB, not per segment; the wait never asks for bytes the
  frame does not have, so it cannot stall on the frame's tail, and a link too slow
  to bring that much within :data:`LOW_WATER_WAIT` is read as it comes for the rest
  of the frame (so a slow link is never taken for a silent peer).

Names in headers are POSIX byte strings decoded with ``os.fsdecode`` (UTF-8 with
surrogateescape); JSON carries undecodable bytes as ``\\udcXX`` escapes, and
``os.fsencode`` restores them exactly.
"""

from __future__ import annotations

import enum
import errno
import json
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

from rcp_core.errors import ConnectionLostError, PeerTimeoutError, ProtocolError

PREFIX = struct.Struct(">IBI")
"""``length``, ``kind``, ``header_length``."""
MAX_FRAME = 8 << 20
"""The default bound on one frame (header and data): 8 MiB."""
_EMPTY = memoryview(b"")


class FrameKind(enum.IntEnum):
    """What a frame carries; the header's schema depends on it."""

    HELLO = 1
    """First frame each way: version, role, authentication."""
    CONTROL = 2
    """A control message (``header["type"]`` names it); no data."""
    FILES = 3
    """Small files of one directory: entries in the header, their bytes as data."""
    CHUNK = 4
    """A piece of one large file: file id and offset in the header, bytes as data."""
    ERROR = 5
    """The peer gives up: a reason in the header; the connection closes after it."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame. ``data`` is a view into its reader's buffer: valid until
    the reader's next :meth:`FrameReader.read`, so a consumer that keeps it copies."""

    kind: FrameKind
    header: dict[str, Any]
    data: memoryview = _EMPTY


def encode_head(kind: FrameKind, header: dict[str, Any], data_length: int) -> bytes:
    """The prefix and header of a frame whose ``data_length`` bytes of data follow."""
    body = json.dumps(header, separators=(",", ":")).encode()
    return PREFIX.pack(5 + len(body) + data_length, kind, len(body)) + body


def encode(
    kind: FrameKind, header: dict[str, Any], data: bytes | memoryview = b""
) -> bytes:
    """The bytes of one whole frame."""
    return encode_head(kind, header, len(data)) + bytes(data)


def decode(kind_byte: int, payload: memoryview, header_length: int) -> Frame:
    """Validate and decode a frame's payload (everything after the prefix)."""
    try:
        kind = FrameKind(kind_byte)
    except ValueError:
        raise ProtocolError(f"unknown frame kind {kind_byte}") from None
    if header_length > len(payload):
        raise ProtocolError(
            f"header of {header_length} bytes in a frame of {len(payload) + 5}"
        )
    try:
        header = json.loads(payload[:header_length].tobytes().decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"frame header is not JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise ProtocolError(f"frame header is a {type(header).__name__}, not an object")
    return Frame(kind, header, payload[header_length:])


LOW_WATER = 256 << 10
"""Bytes a read inside a large frame waits for at most (``SO_RCVLOWAT``)."""
LOW_WATER_WAIT = 0.5
"""Seconds a read waits for ``LOW_WATER`` bytes before it takes what came."""
TLS_RECORD = 17 << 10
"""More than a TLS record's bytes (16 KiB of data and its overhead): what the TLS
layer may hold of a frame's rest, so the kernel may have that much less of it."""


class FrameReader:
    """Reads frames from a connected socket (plain or TLS) with bounded memory.

    :param sock: the socket.
    :param max_frame: the largest frame accepted.
    :param frame_timeout: seconds to wait for the rest of a started frame (default:
        the socket's timeout).
    :param idle_timeout: seconds to wait for the next frame to start (default: the
        same as ``frame_timeout``).

    ``deadline`` (a ``time.monotonic()`` time, or ``None``) caps every wait: set, a
    peer that trickles its bytes cannot make reading outlast it (a handshake's
    frames, which an unauthenticated peer sends, must end by the handshake's
    deadline however slowly they arrive).
    """

    def __init__(
        self,
        sock: socket.socket,
        max_frame: int = MAX_FRAME,
        *,
        frame_timeout: float | None = None,
        idle_timeout: float | None = None,
    ) -> None:
        self.sock = sock
        self.max_frame = max_frame
        self.frame_timeout = (
            frame_timeout if frame_timeout is not None else sock.gettimeout()
        )
        self.idle_timeout = (
            idle_timeout if idle_timeout is not None else (self.frame_timeout)
        )
        self.deadline: float | None = None
        self._low_water: int | None = (
            1 if sock.family in (socket.AF_INET, socket.AF_INET6) else None
        )
        """The socket's ``SO_RCVLOWAT`` (``None``: not TCP, left alone)."""
        self._prefix = bytearray(PREFIX.size)
        self._payload = bytearray()

    def _read_exactly(self, view: memoryview, *, at_boundary: bool) -> bool:
        """Fill ``view``; ``False`` if the peer closed before its first byte at a
        frame boundary."""
        n = len(view)
        got = 0
        slow = False
        while got < n:
            wait = self.idle_timeout if at_boundary and got == 0 else self.frame_timeout
            if self.deadline is not None:
                left = max(0.001, self.deadline - time.monotonic())
                wait = left if wait is None else min(wait, left)
            batched = self._wait_for(0 if slow else n - got)
            self.sock.settimeout(
                wait if not batched else min(wait or LOW_WATER_WAIT, LOW_WATER_WAIT)
            )
            try:
                k = self.sock.recv_into(view[got:])
            except TimeoutError as exc:
                if exc.errno == errno.ETIMEDOUT:  # the kernel's keepalive gave up
                    raise ConnectionLostError(
                        "the peer's host stopped answering (TCP keepalive)"
                    ) from exc
                if batched:  # less than LOW_WATER came: read what comes from now on
                    slow = True
                    continue
                raise PeerTimeoutError(f"no data from the peer for {wait} s") from exc
            if k == 0:
                if at_boundary and got == 0:
                    return False
                raise ConnectionLostError(
                    f"the peer closed the connection inside a frame ({got} of {n} bytes)"
                )
            got += k
        return True

    def _wait_for(self, left: int) -> bool:
        """Let the kernel wake the next read only once it holds as much of the
        ``left`` bytes still expected as surely comes (at most ``LOW_WATER``);
        whether it waits for more than a byte."""
        if self._low_water is None:
            return False
        want = max(1, min(LOW_WATER, left - TLS_RECORD))
        if want != self._low_water:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, want)
            self._low_water = want
        return want > 1

    def read(self) -> Frame | None:
        """The next frame, or ``None`` when the peer closed between frames. The
        previous frame's ``data`` is overwritten."""
        prefix = memoryview(self._prefix)
        if not self._read_exactly(prefix, at_boundary=True):
            return None
        length, kind, header_length = PREFIX.unpack(prefix)
        if length < 5:
            raise ProtocolError(f"frame length {length} is below the minimum of 5")
        if length > self.max_frame:
            raise ProtocolError(
                f"frame of {length} bytes exceeds the limit of {self.max_frame}"
            )
        if len(self._payload) < length - 5:
            self._payload = bytearray(length - 5)
        payload = memoryview(self._payload)[: length - 5]
        self._read_exactly(payload, at_boundary=False)
        return decode(kind, payload, header_length)
