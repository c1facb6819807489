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
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rcp_core.engine.tree import DIR_FLAGS
from rcp_core.errors import ProtocolError, RemoteError
from rcp_core.remote import tls
from rcp_core.remote.connection import Connection
from rcp_core.remote.handshake import accept_next, dial
from rcp_core.remote.hello import LATE_DATA, STOP, Role
from rcp_core.remote.latedata import LateData, more_data
from rcp_core.remote.listening import tell_connected
from rcp_core.remote.receiving import Heartbeat, Progress, receive
from rcp_core.remote.roleruntime import RoleRun
from rcp_core.remote.wire import FrameKind
from rcp_core.settings import CopySettings

if TYPE_CHECKING:
    from rcp_core.remote.writers import Writers

log = logging.getLogger("rcp_core")

SOFTWARE = "rcp"
STALL = 120.0
"""Seconds a transfer may go without any frame before the destination gives up."""


def run_source(
    listener: socket.socket,
    ctx: ssl.SSLContext | None,
    sources: Sequence[tuple[str, str]],
    settings: CopySettings,
    *,
    connections: int,
    timeout: float,
    bwlimit: int = 0,
    cancel: threading.Event | None = None,
) -> tuple[dict[str, int], list[str]]:
    """Accept the destination's connections on ``listener`` and send ``sources``.

    :param sources: ``(path, name at the destination)`` pairs.
    :param settings: the copy's settings (filters, and what makes a file unchanged
        for the destination's manifests).
    :param bwlimit: bytes per second all data connections together send at most
        (0: unlimited).
    :param cancel: set it to stop: no more connections are accepted, nothing more
        is sent (:func:`stopped_by`).
    :returns: the source's counts and its error messages.
    """
    # Imported by the role that runs: a daemon imports one role's modules.
    from rcp_core.remote.send import Sender

    deadline = time.monotonic() + timeout
    control: Connection | None = None
    data: list[Connection] = []
    late: LateData | None = None
    more = 0
    accepting = functools.partial(
        accept_next,
        listener,
        who="the destination",
        role=Role.SOURCE,
        software=SOFTWARE,
        timeout=timeout,
        ctx=ctx,
    )
    runtime = RoleRun(settings, sources[0][0], source=True)

    def stop() -> None:
        runtime.stop("cancelled")
        with contextlib.suppress(OSError):  # wakes an accept waiting for a peer
            listener.shutdown(socket.SHUT_RDWR)

    try:
        with stopped_by(cancel, stop):
            while control is None or len(data) < connections:
                conn = accepting(deadline)
                header = conn.expect(FrameKind.CONTROL, "attach").header
                channel = header.get("channel")
                if channel == "control" and control is None:
                    control = conn
                    more = more_data(header) if conn.version >= LATE_DATA else 0
                elif channel == "data" and control is not None:
                    data.append(conn)
                else:
                    conn.fail(f"unexpected attach {channel!r}")
                    raise ProtocolError(f"unexpected attach {channel!r}")
            pace = runtime.bucket(bwlimit) if bwlimit else None  # wakes on a stop
            for conn in data:
                conn.pace = pace
            sender = Sender(
                sources, control, data, settings, stall=STALL, runtime=runtime
            )
            if more:
                late = LateData(listener, accepting, sender, more, timeout, pace)
            return sender.run(), sender.errors.messages()
    finally:
        if late is not None:
            late.stop()
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
    cancel: threading.Event | None = None,
) -> tuple[dict[str, int], list[str]]:
    """Connect to the source at ``address`` and write the copy as ``dst`` (with
    ``into``: into the existing directory ``dst``, under the sources' names).

    :param stall: give up when no frame arrived for this many seconds.
    :param on_progress: called with the counts so far every
        :data:`~rcp_core.remote.receiving.PROGRESS` seconds
        while the copy runs (from this thread).
    :param say: takes a dry run's lines (default: logged).
    :param local_address: this host's address the connections leave from
        (``--bind-ip``; default: the kernel's choice).
    :param cancel: set it to stop: the source is told to send nothing more, and
        what arrived is finished (:func:`stopped_by`).
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

    connect = functools.partial(
        dial_source,
        address,
        pin=pin,
        identity=identity,
        local_address=local_address,
        timeout=timeout,
    )

    conns: list[Connection] = []
    threads: list[threading.Thread] = []
    seen = Heartbeat()
    writers: Writers | None = None
    log.debug("receiving from %s:%d on %d data connections", *address, connections)
    try:
        control = connect(channel=None)
        conns.append(control)
        if control.version >= LATE_DATA and settings.dry_run is None:
            from rcp_core.remote.writers import writers_for

            writers = writers_for(
                receiver,
                {
                    "settings": settings,
                    "umask": umask,
                    "root": parent,
                    "address": address,
                    "pin": pin,
                    "identity": identity,
                    "local_address": local_address,
                    "timeout": timeout,
                    "connections": connections,
                    "entry_points": True,
                    "log_level": logging.getLogger("rcp_core").getEffectiveLevel(),
                },
                seen.beat,
            )
        more = writers.more if writers is not None else 0  # an older source ignores it
        control.send_control("attach", channel="control", more=more)
        here = control.sock.getsockname()[:2]
        tell_connected("the destination here", here, address)
        if control.version >= STOP:
            run.on_stop.append(functools.partial(_tell_stop, control))
        conns += [connect(channel="data") for _ in range(connections)]
        with stopped_by(cancel, functools.partial(run.stop, "cancelled")):
            return receive(receiver, conns, threads, stall, on_progress, seen, writers)
    finally:
        for conn in conns:
            conn.close()
        if writers is not None:
            writers.close()
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        receiver.close()


def dial_source(
    address: tuple[str, int],
    *,
    pin: str | None,
    identity: tls.Identity | None,
    local_address: str | None,
    timeout: float,
    channel: str | None,
    group: int = 0,
) -> Connection:
    """A destination's connection to its source (the destination's own, or a writer
    process's), attached as ``channel`` (``None``: not yet); a writer's data
    connections say its number as their ``group`` (protocol 1.16), which an older
    source ignores."""
    conn = dial(
        address,
        role=Role.DESTINATION,
        software=SOFTWARE,
        timeout=timeout,
        pin=pin,
        identity=identity,
        local_address=local_address,
    )
    if channel is not None:
        try:
            extra = {"group": group} if group else {}
            conn.send_control("attach", channel=channel, **extra)
        except BaseException:
            conn.close()
            raise
    return conn


CANCEL_POLL = 0.2
"""Seconds between looks at a role's ``cancel`` event."""


@contextlib.contextmanager
def stopped_by(
    cancel: threading.Event | None, stop: Callable[[], None]
) -> Iterator[None]:
    """Run the block; ``stop()`` is called (once, from a watcher thread) if
    ``cancel`` is set before the block ends. Without ``cancel``, just the block."""
    if cancel is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(CANCEL_POLL):
            if cancel.is_set():
                stop()
                return

    watcher = threading.Thread(target=watch, name="rcp-role-cancel", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def _tell_stop(control: Connection, reason: str) -> None:
    """Ask the source to send nothing more (advisory: a source already gone has
    nothing more to send)."""
    with contextlib.suppress(RemoteError):
        control.send_control("stop", reason=reason)


def _log_line(line: str) -> None:
    log.info("%s", line)
