"""The two data roles of a remote copy, wired to their connections.

The destination connects to the source: one control connection, then the data
connections, each announcing itself with ``attach`` after the hello. Both sides use
TLS pinned both ways (the source trusts exactly the destination's certificate, the
destination checks the source's fingerprint) unless encryption is off.

- :func:`run_source` accepts those connections on a bound listening socket and runs a
  :class:`~rcp_core.remote.send.Sender`; it returns the source's counts and errors.
- :func:`run_destination` connects, answers ``dir`` messages, writes what arrives
  through a :class:`~rcp_core.remote.receive.Receiver`, and returns the destination's
  counts once the destination root is finished (it then says ``finished``).

Every wait is bounded by ``timeout`` (per connection step, and per frame while a frame
is incomplete); a transfer that stops making progress for ``idle`` seconds fails.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rcp_core.engine.tree import DIR_FLAGS
from rcp_core.errors import PeerTimeoutError, ProtocolError, RemoteError
from rcp_core.remote import tls
from rcp_core.remote.connection import Connection
from rcp_core.remote.handshake import accept_next, dial
from rcp_core.remote.hello import MANIFESTS, RESUME, STOP, Role
from rcp_core.remote.listening import tell_connected
from rcp_core.remote.receivedtree import ANCHOR
from rcp_core.remote.roleruntime import RoleRun
from rcp_core.remote.wire import FrameKind
from rcp_core.settings import CopySettings

if TYPE_CHECKING:
    from rcp_core.remote.incoming import Incoming
    from rcp_core.remote.receive import Receiver

log = logging.getLogger("rcp_core")

SOFTWARE = "rcp"
STALL = 120.0
"""Seconds a transfer may go without any frame before the destination gives up."""
PROGRESS = 1.0
"""Seconds between the destination's progress reports."""

Progress = Callable[[dict[str, int]], None]
"""Takes a destination's counts so far."""


def run_source(
    listener: socket.socket,
    ctx: ssl.SSLContext | None,
    sources: Sequence[tuple[str, str]],
    settings: CopySettings,
    *,
    connections: int,
    timeout: float,
    bwlimit: int = 0,
) -> tuple[dict[str, int], list[str]]:
    """Accept the destination's connections on ``listener`` and send ``sources``.

    :param sources: ``(path, name at the destination)`` pairs.
    :param settings: the copy's settings (filters, and what makes a file unchanged
        for the destination's manifests).
    :param bwlimit: bytes per second all data connections together send at most
        (0: unlimited).
    :returns: the source's counts and its error messages.
    """
    # Imported by the role that runs: a daemon imports one role's modules.
    from rcp_core.remote.send import Sender

    deadline = time.monotonic() + timeout
    control: Connection | None = None
    data: list[Connection] = []
    try:
        while control is None or len(data) < connections:
            conn = accept_next(
                listener,
                deadline,
                "the destination",
                role=Role.SOURCE,
                software=SOFTWARE,
                timeout=timeout,
                ctx=ctx,
            )
            channel = conn.expect(FrameKind.CONTROL, "attach").header.get("channel")
            if channel == "control" and control is None:
                control = conn
            elif channel == "data" and control is not None:
                data.append(conn)
            else:
                conn.fail(f"unexpected attach {channel!r}")
                raise ProtocolError(f"unexpected attach {channel!r}")
        runtime = RoleRun(settings, sources[0][0], source=True)
        pace = runtime.bucket(bwlimit) if bwlimit else None  # wakes on a stop
        for conn in data:
            conn.pace = pace
        sender = Sender(sources, control, data, settings, stall=STALL, runtime=runtime)
        return sender.run(), sender.errors.messages()
    finally:
        for conn in (*data, *([control] if control else [])):
            conn.close()


def job_bwlimit(job: Mapping[str, Any]) -> int:
    """A source job's ``bwlimit`` (protocol 1.13): bytes per second, 0 when absent.

    :raises ProtocolError: it is not a whole number >= 0.
    """
    bwlimit = job.get("bwlimit", 0)
    if not isinstance(bwlimit, int) or isinstance(bwlimit, bool) or bwlimit < 0:
        raise ProtocolError(f"job: bad bwlimit {bwlimit!r}")
    return bwlimit


def run_destination(
    address: tuple[str, int],
    pin: str | None,
    identity: tls.Identity | None,
    dst: str,
    settings: CopySettings,
    *,
    connections: int,
    timeout: float,
    stall: float = STALL,
    on_progress: Progress | None = None,
    into: bool = False,
    say: Callable[[str], None] | None = None,
    local_address: str | None = None,
) -> tuple[dict[str, int], list[str]]:
    """Connect to the source at ``address`` and write the copy as ``dst`` (with
    ``into``: into the existing directory ``dst``, under the sources' names).

    :param stall: give up when no frame arrived for this many seconds.
    :param on_progress: called with the counts so far every ``PROGRESS`` seconds
        while the copy runs (from this thread).
    :param say: takes a dry run's lines (default: logged).
    :param local_address: this host's address the connections leave from
        (``--bind-ip``; default: the kernel's choice).
    :returns: the destination's counts and its error messages.
    """
    from rcp_core.remote.dry import DryReceiver
    from rcp_core.remote.receive import Receiver

    parent = os.path.abspath(dst) if into else os.path.dirname(os.path.abspath(dst))
    umask = os.umask(0)
    os.umask(umask)
    run = RoleRun(settings, parent, source=False)
    fd = os.open(parent, DIR_FLAGS)
    receiver = (
        Receiver(settings, fd, umask, run, connections)
        if settings.dry_run is None
        else DryReceiver(settings, fd, umask, run, say or _log_line)
    )

    def connect(channel: str) -> Connection:
        conn = dial(
            address,
            role=Role.DESTINATION,
            software=SOFTWARE,
            timeout=timeout,
            pin=pin,
            identity=identity,
            local_address=local_address,
        )
        conn.send_control("attach", channel=channel)
        return conn

    conns: list[Connection] = []
    threads: list[threading.Thread] = []
    log.debug("receiving from %s:%d on %d data connections", *address, connections)
    try:
        conns.append(connect("control"))
        here = conns[0].sock.getsockname()[:2]
        tell_connected("the destination here", here, address)
        if conns[0].version >= STOP:
            run.on_stop.append(functools.partial(_tell_stop, conns[0]))
        conns += [connect("data") for _ in range(connections)]
        return _receive(receiver, conns, threads, stall, on_progress)
    finally:
        for conn in conns:
            conn.close()
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        receiver.close()


def _receive(
    receiver: Receiver,
    conns: list[Connection],
    threads: list[threading.Thread],
    stall: float,
    on_progress: Progress | None,
) -> tuple[dict[str, int], list[str]]:
    """Serve the control connection (first) and the data connections until the
    destination root is finished; the threads started are added to ``threads``."""
    control, data = conns[0], conns[1:]
    failures: list[BaseException] = []
    seen = _Heartbeat()
    threads.append(
        threading.Thread(
            target=_guard(failures, lambda: _serve_control(control, receiver, seen)),
            daemon=True,
        )
    )
    threads.extend(
        threading.Thread(
            target=_guard(
                failures, functools.partial(_serve_data, conn, receiver, seen)
            ),
            daemon=True,
        )
        for conn in data
    )
    for thread in threads:
        thread.start()
    reported = time.monotonic()
    while not receiver.done.wait(0.2):
        if failures:
            raise failures[0]
        receiver.check()
        if seen.silent_for() > stall:
            raise PeerTimeoutError(f"no data from the source for {stall:g} s")
        if on_progress is not None and time.monotonic() - reported >= PROGRESS:
            reported = time.monotonic()
            on_progress(receiver.counts())
    control.send_control("finished", counts=receiver.counts())
    return receiver.counts(), receiver.errors.messages()


def _tell_stop(control: Connection, reason: str) -> None:
    """Ask the source to send nothing more (advisory: a source already gone has
    nothing more to send)."""
    with contextlib.suppress(RemoteError):
        control.send_control("stop", reason=reason)


def _log_line(line: str) -> None:
    log.info("%s", line)


class _Heartbeat:
    """When the last frame arrived on any connection of a transfer."""

    def __init__(self) -> None:
        self.last = time.monotonic()

    def beat(self) -> None:
        self.last = time.monotonic()

    def silent_for(self) -> float:
        return time.monotonic() - self.last


def _guard(failures: list[BaseException], fn: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        try:
            fn()
        except (RemoteError, OSError) as exc:
            failures.append(exc)

    return run


def _serve_control(conn: Connection, receiver: Receiver, seen: _Heartbeat) -> None:
    resumes = receiver.resumes and conn.version >= RESUME
    if resumes:  # the anchor's partials, before any of its files is sent
        _tell_partials(conn, receiver, ANCHOR)
        conn.send_control("dir_ready", id=ANCHOR)
    while not receiver.done.is_set():
        frame = conn.read()
        seen.beat()
        if frame is None:
            if receiver.done.is_set():
                return
            raise ProtocolError(f"{conn.peer} closed control before the copy ended")
        kind = frame.header.get("type")
        if frame.kind is not FrameKind.CONTROL:
            raise ProtocolError(f"{frame.kind.name} frame on the control connection")
        if kind == "dir":
            h = frame.header
            ok = receiver.open_dir(
                h.get("id"),
                h.get("parent"),
                h.get("name"),
                h.get("meta"),
                h.get("traverse", False),
            )
            if ok and receiver.wants_manifests and conn.version >= MANIFESTS:
                for part in receiver.manifest(h["id"]):
                    conn.send_control("dir_manifest", id=h["id"], entries=part)
            if ok and resumes:
                _tell_partials(conn, receiver, h["id"])
            conn.send_control("dir_ready" if ok else "dir_failed", id=h.get("id"))
        elif kind == "dir_end":
            h = frame.header
            receiver.end_dir(h.get("dir"), h.get("count"), h.get("xattrs"))
        elif kind == "dir_excluded":
            receiver.exclude(frame.header.get("dir"), frame.header.get("names"))
        else:
            raise ProtocolError(f"unexpected control message {kind!r}")


def _tell_partials(conn: Connection, receiver: Receiver, dir_id: int) -> None:
    """Describe the partials of directory ``dir_id`` to the source (``dir_partials``)."""
    for part in receiver.partials(dir_id):
        conn.send_control("dir_partials", id=dir_id, entries=part)


def _serve_data(conn: Connection, receiver: Receiver, seen: _Heartbeat) -> None:
    """Write what arrives on one data connection. A large file cut off by a broken
    connection is removed: nothing half-written stays under its final name."""
    current: Incoming | None = None
    try:
        while True:
            try:
                frame = conn.read()
                seen.beat()
            except (RemoteError, OSError):
                if receiver.done.is_set():
                    return  # closed under us at the end: nothing was pending here
                raise
            if frame is None:
                if current is not None:
                    raise ProtocolError(f"{conn.peer} closed inside a large file")
                return
            if frame.kind is FrameKind.FILES:
                receiver.files(frame.header, frame.data)
            elif frame.kind is FrameKind.CHUNK:
                current = receiver.chunk(frame.header, frame.data, current)
            else:
                raise ProtocolError(f"{frame.kind.name} frame on a data connection")
    except BaseException:
        if current is not None:
            current.discard()
        raise
