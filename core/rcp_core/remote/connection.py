"""One framed, authenticated connection between two rcp processes.

A :class:`Connection` is made by :mod:`rcp_core.remote.handshake` (``dial``,
``accept``), which exchanged hellos on it (:meth:`Connection.greet`): one that exists
has a peer of a known role speaking a negotiated version.

Invariants:

- every send, and every read while a frame is incomplete, is bounded by ``timeout``;
  between frames a connection may stay idle while TCP keepalive (:func:`tune`) finds
  the peer alive, so a vanished peer (a host gone, a link down) is found within about
  ``2 * timeout`` seconds;
- frames from several threads never interleave (:meth:`Connection.send` holds a lock
  for the whole frame); one thread reads;
- the descriptor is released only when no thread is inside a send or a read
  (:meth:`Connection.close` shuts the socket down first, which wakes them): a thread
  must never write to or read from a number the process has since given to another
  file;
- an ``ERROR`` frame from the peer becomes :class:`RemoteError` with its reason; a
  frame the state does not allow becomes :class:`ProtocolError` (:meth:`expect`).
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import logging
import os
import select
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rcp_core.errors import (
    AuthenticationError,
    ConnectionLostError,
    PeerTimeoutError,
    ProtocolError,
    RemoteError,
    TokenRefusedError,
)
from rcp_core.remote.hello import PROTOCOL, Hello, negotiate
from rcp_core.remote.wire import (
    MAX_FRAME,
    Frame,
    FrameKind,
    FrameReader,
    encode,
    encode_head,
)

if TYPE_CHECKING:
    from rcp_core.run.throttle import TokenBucket

log = logging.getLogger("rcp_core")

AUTHENTICATION_FAILED = "authentication failed"
"""The reason a side gives up on a peer whose hello had the wrong token (the peer
raises :class:`~rcp_core.errors.TokenRefusedError` on reading it)."""

BUFFER = 4 << 20
"""Socket send buffer asked for (the kernel caps it at its maximum). The receive
buffer is left to the kernel's autotuning, which grows it with the path's
bandwidth-delay product (up to ``tcp_rmem``'s maximum); a fixed size would turn that
off and cap the window on a long or queued path."""
KEEPALIVE_PROBES = 4
"""Unanswered keepalive probes after which the peer is gone."""
SOCKET_ERRNOS = frozenset(
    (errno.EPIPE, errno.ECONNRESET, errno.ECONNABORTED, errno.ENOTCONN, errno.ETIMEDOUT)
)
"""What ``sendfile`` fails with when the connection, not the file, is the cause."""
JOIN_BELOW = 64 << 10
"""Frames with less data than this go out as one joined buffer (one write, one TLS
record); larger data is written after the header, never copied."""


def tune(sock: socket.socket, timeout: float) -> None:
    """No Nagle delay, a large send buffer, and keepalive: after ``timeout`` s of
    silence the kernel probes the peer every ``timeout / KEEPALIVE_PROBES`` s, so a
    peer that answers none of them (its host or the link gone) fails every wait on
    the connection with ``ETIMEDOUT`` about ``2 * timeout`` s after it went silent.
    A live peer's kernel answers probes even while its process is busy or stopped:
    that case is for the bounded waits inside frames."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    idle = max(1, round(timeout))
    interval = max(1, round(timeout / KEEPALIVE_PROBES))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, interval)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_PROBES)


class Connection:
    """A connected socket that speaks frames.

    :param sock: connected (and, unless encryption is off, TLS-wrapped).
    :param peer: who is on the other end, for messages ("source host-a:4012").
    """

    def __init__(
        self, sock: socket.socket, peer: str, max_frame: int = MAX_FRAME
    ) -> None:
        self.sock = sock
        self.peer = peer
        self.reader = FrameReader(sock, max_frame)
        self.version = PROTOCOL
        self.hello: Hello | None = None
        # Held while a thread uses the socket's descriptor, and by close(): a
        # descriptor closed under a thread inside a send or read would let that thread
        # (or OpenSSL, which keeps the number) write to or read from whatever file the
        # process opens next under the same number.
        self._send_lock = threading.RLock()
        self._read_lock = threading.RLock()
        self._timeout = sock.gettimeout()
        self._buffer = bytearray()
        self.pace: TokenBucket | None = None
        """Paces the bytes this connection sends (a copy's ``--bwlimit``, one bucket
        for all its data connections): each frame takes its size before it goes."""

    def send(
        self, kind: FrameKind, header: dict[str, Any], data: bytes | memoryview = b""
    ) -> None:
        """Send one frame whole; :class:`ConnectionLostError` if the peer is gone."""
        if len(data) < JOIN_BELOW:
            self._send_parts(encode(kind, header, data))
        else:
            self._send_parts(encode_head(kind, header, len(data)), data)

    def send_file(
        self, kind: FrameKind, header: dict[str, Any], fd: int, offset: int, length: int
    ) -> int:
        """Send one frame whose data is ``length`` bytes of the file ``fd`` from
        ``offset``: by ``sendfile`` on a plain connection (the bytes never enter this
        process), through one reused buffer under TLS.

        :returns: how many bytes the file had there. Fewer than ``length`` (it shrank)
            and the frame was completed with zeros, so the stream stays in step: the
            caller must tell the peer the data is not the file's.
        :raises OSError: reading the file failed (the frame was completed with zeros,
            as above); :class:`RemoteError` for the connection's failures.
        """
        head = encode_head(kind, header, length)
        if isinstance(self.sock, ssl.SSLSocket):
            view = self._file_buffer(length)
            got = _pread_into(fd, view, offset)
            view[got:] = bytes(length - got)
            self._send_parts(head, view)
            return got
        failure: OSError | None = None
        if self.pace is not None:
            self.pace.take(len(head) + length)
        with self._sending():
            self.sock.sendall(head)
            try:
                got = self._sendfile(fd, offset, length)
            except OSError as exc:
                if exc.errno in SOCKET_ERRNOS or isinstance(exc, TimeoutError):
                    raise
                failure, got = exc, 0  # the file's error: keep the stream in step
            if got < length:
                self.sock.sendall(bytes(length - got))
        if failure is not None:
            raise failure
        return got

    @contextlib.contextmanager
    def _sending(self) -> Iterator[None]:
        """Hold the send lock; socket failures become the peer's errors."""
        try:
            with self._send_lock:
                yield
        except TimeoutError as exc:
            raise PeerTimeoutError(
                f"{self.peer} does not read (send timed out)"
            ) from exc
        except OSError as exc:
            raise ConnectionLostError(f"{self.peer}: {exc}") from exc

    def _send_parts(self, *parts: bytes | memoryview) -> None:
        if self.pace is not None:
            self.pace.take(sum(len(part) for part in parts))
        with self._sending():
            for part in parts:
                self.sock.sendall(part)

    def _file_buffer(self, length: int) -> memoryview:
        """The reused buffer of :meth:`send_file` under TLS (callers hold no view of
        it past their call), at least ``length`` long; the first ``length`` bytes."""
        if len(self._buffer) < length:
            self._buffer = bytearray(length)
        return memoryview(self._buffer)[:length]

    def _sendfile(self, fd: int, offset: int, length: int) -> int:
        """``sendfile`` until ``length`` bytes went or the file ended; each wait for
        the socket to drain is bounded by the connection's timeout."""
        sent = 0
        while sent < length:
            try:
                n = os.sendfile(self.sock.fileno(), fd, offset + sent, length - sent)
            except BlockingIOError:
                _, writable, _ = select.select([], [self.sock], [], self._timeout)
                if not writable:
                    raise TimeoutError("the socket did not drain") from None
                continue
            if n == 0:
                break
            sent += n
        return sent

    def send_control(self, type_: str, **fields: Any) -> None:
        self.send(FrameKind.CONTROL, {"type": type_, **fields})

    def fail(self, reason: str) -> None:
        """Tell the peer why we give up (if it still listens), then close."""
        with contextlib.suppress(RemoteError):  # gone already: close is all that's left
            self.send(FrameKind.ERROR, {"reason": reason})
        self.close()

    def read(self) -> Frame | None:
        """The next frame (``None``: closed cleanly); a peer's ``ERROR`` raises."""
        try:
            with self._read_lock:
                frame = self.reader.read()
        except ssl.SSLError as exc:
            raise ConnectionLostError(f"{self.peer}: TLS: {exc}") from exc
        except (ConnectionLostError, PeerTimeoutError) as exc:
            raise type(exc)(f"{self.peer}: {exc}") from exc
        except OSError as exc:
            raise ConnectionLostError(f"{self.peer}: {exc}") from exc
        if frame is not None and frame.kind is FrameKind.ERROR:
            reason = frame.header.get("reason")
            if reason == AUTHENTICATION_FAILED:
                raise TokenRefusedError(f"{self.peer} gave up: {reason} (wrong token)")
            raise RemoteError(f"{self.peer} gave up: {reason}")
        return frame

    def expect(self, kind: FrameKind, type_: str | None = None) -> Frame:
        """The next frame, which must be of ``kind`` (and control ``type_``)."""
        frame = self.read()
        if frame is None:
            raise ConnectionLostError(
                f"{self.peer} closed the connection; expected {kind.name}"
            )
        if frame.kind is not kind or (
            type_ is not None and frame.header.get("type") != type_
        ):
            got = frame.header.get("type") or frame.kind.name
            raise ProtocolError(
                f"{self.peer} sent {got!s} where {type_ or kind.name} belongs"
            )
        return frame

    def greet(self, ours: Hello, *, token: str | None = None, first: bool) -> Hello:
        """Exchange hellos; check the version, and the peer's ``token`` when one is
        required. ``first``: this side speaks first (the one that connected)."""
        if first:
            self.send(FrameKind.HELLO, ours.to_header())
        theirs = Hello.from_header(self.expect(FrameKind.HELLO).header)
        try:
            self.version = negotiate(ours.protocol, theirs.protocol, self.peer)
        except ProtocolError as exc:
            self.fail(str(exc))
            raise
        if token is not None and not hmac.compare_digest(
            (theirs.token or "").encode(), token.encode()
        ):
            self.fail(AUTHENTICATION_FAILED)
            raise AuthenticationError(f"{self.peer}: wrong or missing token")
        if not first:
            self.send(FrameKind.HELLO, ours.to_header())
        self.hello = theirs
        return theirs

    def settimeout(self, seconds: float) -> None:
        """Bound every send, every read inside a frame and the wait for the next
        frame by ``seconds``."""
        self.sock.settimeout(seconds)
        self._timeout = seconds
        self.reader.frame_timeout = self.reader.idle_timeout = seconds

    def wait_while_alive(self) -> None:
        """Wait for the next frame as long as the peer is alive (TCP keepalive checks
        that); sends and started frames stay bounded."""
        self.reader.idle_timeout = None

    def close(self) -> None:
        """Shut the connection down (a thread blocked on it wakes with an error), then
        release the descriptor once no thread is sending or reading on it."""
        with contextlib.suppress(OSError):  # not connected any more: nothing to wake
            # The TCP socket's own shutdown: SSLSocket.shutdown would drop its TLS
            # state under a thread that is using it.
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        with self._send_lock, self._read_lock, contextlib.suppress(OSError):
            self.sock.close()  # a broken socket has nothing to report


def _pread_into(fd: int, view: memoryview, offset: int) -> int:
    """Fill ``view`` from ``fd`` at ``offset``; fewer bytes only at the file's end."""
    got = 0
    while got < len(view):
        n = os.preadv(fd, [view[got:]], offset + got)
        if n == 0:
            break
        got += n
    return got
