"""A writer process of a destination (``python -P -m rcp_core.remote.writerprocess
FD``); see :mod:`rcp_core.remote.writers`.

It dials its own data connections to the source (TLS pinned both ways, as the
destination's), attaches them as late data connections (protocol 1.15) and writes the
frames that arrive on them with the destination's own code: a
:class:`WriterReceiver` is a :class:`~rcp_core.remote.receive.Receiver` whose
accounting is the destination's. Each frame's entries are checked and written here,
on the connection's thread; what only the destination can do goes back to it in one
:class:`~rcp_core.remote.writerchannel.Wrote` per directory and frame: the names
sent, arrivals to check against ``dir_end``, first names of multiply-linked inodes,
``hardlink`` entries (linked there), and the entries done. So a directory is
finished, post-order, only after its entries were written wherever they arrived.

Invariants:

- a directory is known here once the destination sent :class:`Opened` with its
  descriptor, which it does before the source may send any of its entries; a frame
  for a directory not (yet) known waits for it, at most ``timeout`` seconds;
- a directory's descriptor is closed at :class:`Closed`, or, if a frame on some
  connection still uses it, when that frame is done (never under a write);
- errors go to the destination's error log (``Failure``), counters as ``Counts``
  and ``Final``; a broken connection is ``Broken`` (the transfer fails), and the
  large file it cut off is removed (its partial stays under ``--partial``);
- it ends at ``Finish`` (answering ``Final``), or as soon as its channel closes (the
  destination is gone: its connections are closed first, so a file in progress is
  removed, not left half-written).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
import traceback
from typing import Any

from rcp_core.engine.helpers.channel import (
    Channel,
    Crash,
    Final,
    Finish,
    ForwardedErrors,
    Ready,
    Stop,
)
from rcp_core.engine.helpers.spawn import helper_main, send_counts
from rcp_core.errors import ProtocolError, RemoteError
from rcp_core.remote.connection import Connection
from rcp_core.remote.incoming import Part
from rcp_core.remote.receive import Receiver
from rcp_core.remote.receivedtree import ReceivedDir
from rcp_core.remote.receiving import serve_data
from rcp_core.remote.roleruntime import RoleRun
from rcp_core.remote.roles import dial_source
from rcp_core.remote.writerchannel import Broken, Closed, Opened, WriterSetup, Wrote
from rcp_core.site.plugins import plugin_manager

log = logging.getLogger("rcp_core")


class _Frame(threading.local):
    """One connection thread's account of the frame it is writing."""

    def __init__(self) -> None:
        self.reports: dict[int, tuple[ReceivedDir, Wrote]] = {}
        self.held: list[ReceivedDir] = []


class WriterReceiver(Receiver):
    """Writes the frames of a writer's connections into the destination's
    directories, and accounts for them to the destination (see the module)."""

    def __init__(self, setup: WriterSetup, runtime: RoleRun, chan: Channel) -> None:
        super().__init__(setup.settings, -1, setup.umask, runtime, setup.connections)
        self.chan = chan
        self.timeout = setup.timeout
        self._dirs = {}
        self._known = threading.Condition(self._lock)
        self._users: dict[int, int] = {}
        self._closed: set[int] = set()
        self._frame = _Frame()

    def _write_pool(self) -> None:
        """None: a writer writes on its connections' threads (it is one of several
        processes: they are the parallelism)."""
        return None

    # -- directories, as the destination sends them ----------------------------

    def opened(self, message: Opened, fd: int) -> None:
        node = ReceivedDir(
            parent=None,
            rel=message.rel,
            pending=0,
            id=message.id,
            fd=fd,
            name="",
            st=None,
            fresh=message.fresh,
            created=message.fresh,
            names=set() if message.names else None,
            ready=True,
        )
        with self._known:
            self._dirs[message.id] = node
            for name, prefix in message.described.items():
                self._described[(message.id, name)] = prefix
            self._known.notify_all()

    def forget(self, message: Closed) -> None:
        with self._lock:
            node = self._dirs.pop(message.id, None)
            if node is None:
                return
            if self._users.get(node.id):
                self._closed.add(node.id)  # closed when its last frame is done
                node = None
        if node is not None:
            os.close(node.fd)

    def _dir(self, dir_id: Any) -> ReceivedDir:
        """The directory, held by this frame; waits for its :class:`Opened`."""
        if not isinstance(dir_id, int):
            raise ProtocolError(f"unknown directory id {dir_id!r}")
        deadline = time.monotonic() + self.timeout
        with self._known:
            while (node := self._dirs.get(dir_id)) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ProtocolError(f"unknown directory id {dir_id!r}")
                self._known.wait(left)
            self._users[dir_id] = self._users.get(dir_id, 0) + 1
        self._frame.held.append(node)
        return node

    def _release_held(self, keep: ReceivedDir | None) -> None:
        """This frame is done with its directories (but ``keep``: a large file in
        progress there); one finished meanwhile is closed now."""
        frame = self._frame
        held, frame.held = frame.held, []
        closing: list[int] = []
        with self._lock:
            for node in held:
                if node is keep:
                    frame.held.append(node)
                    continue
                self._users[node.id] -= 1
                if not self._users[node.id]:
                    del self._users[node.id]
                    if node.id in self._closed:
                        self._closed.discard(node.id)
                        closing.append(node.fd)
        for fd in closing:
            os.close(fd)

    # -- the destination's accounting, reported ----------------------------------

    def _report(self, node: ReceivedDir) -> Wrote:
        reports = self._frame.reports
        held = reports.get(node.id)
        if held is None:
            held = reports[node.id] = (node, Wrote(node.id))
        return held[1]

    def _seen(self, node: ReceivedDir, name: str) -> None:
        if node.names is not None:
            self._report(node).names.append(name)

    def _arrived(self, node: ReceivedDir, n: int) -> None:
        self._report(node).arrived += n

    def _done(self, node: ReceivedDir, n: int = 1) -> None:
        self._report(node).done += n

    def _announce(self, node: ReceivedDir, link_id: int | None) -> None:
        if link_id is not None:
            self._report(node).announced.append(link_id)

    def _first_name(
        self, link_id: int, node: ReceivedDir, name: str, written: bool
    ) -> None:
        self._report(node).firsts.append((link_id, name, written))

    def _later_name_done(
        self, link_id: int, node: ReceivedDir, name: str, st: os.stat_result
    ) -> None:
        self._report(node).later.append((link_id, name, st))

    def _flush(self, keep: ReceivedDir | None = None) -> None:
        """Send this frame's reports, then let go of its directories."""
        reports, self._frame.reports = self._frame.reports, {}
        try:
            for node, report in reports.values():
                report.incomplete = node.incomplete
                report.has_content = node.has_content
                self.chan.send(report)
        finally:
            self._release_held(keep)

    # -- frames ---------------------------------------------------------------------

    def files(self, header: dict[str, Any], data: memoryview) -> None:
        try:
            super().files(header, data)
        finally:
            self._flush()

    def chunk(
        self, header: dict[str, Any], data: memoryview, current: Part | None
    ) -> Part | None:
        try:
            current = super().chunk(header, data, current)
        finally:
            self._flush(keep=current.file.node if current is not None else None)
        return current


class Writer:
    """Serves one destination over ``chan``, as ``setup`` says."""

    def __init__(self, chan: Channel, setup: WriterSetup) -> None:
        self.chan = chan
        self.setup = setup
        hook = plugin_manager(entry_points=setup.entry_points).hook
        runtime = RoleRun(setup.settings, setup.root, source=False, hook=hook)
        runtime.errors = ForwardedErrors(chan)
        self.receiver = WriterReceiver(setup, runtime, chan)
        self.conns: list[Connection] = []
        self.ended = threading.Event()

    def serve(self) -> int:
        """Write until told to finish (or the destination is gone); the exit status."""
        try:
            self._dial()
        except (RemoteError, OSError) as exc:
            if not self.conns:  # the transfer ended meanwhile: nothing taken, no help
                log.debug("writer: no data connection: %s", exc)
                return 0
            self._broken(exc)
            return 1
        self.chan.send(Ready())
        threading.Thread(
            target=send_counts,
            args=(self.chan, lambda: list(self.receiver.counters.tallies), self.ended),
            name="rcp-writer-counts",
            daemon=True,
        ).start()
        readers = [
            threading.Thread(target=self._serve, args=(conn,), daemon=True)
            for conn in self.conns
        ]
        for thread in readers:
            thread.start()
        finished = self._read()
        self.ended.set()
        for conn in self.conns:  # a file in progress is removed by its reader
            conn.close()
        for thread in readers:
            thread.join(self.setup.timeout)
        self.receiver.drop_arrivals()
        if finished:
            with contextlib.suppress(OSError):
                self.chan.send(Final(self.receiver.counts()))
        return 0

    def _dial(self) -> None:
        s = self.setup
        for _ in range(s.connections):
            self.conns.append(
                dial_source(
                    s.address,
                    pin=s.pin,
                    identity=s.identity,
                    local_address=s.local_address,
                    timeout=s.timeout,
                    channel="data",
                    group=s.group,
                )
            )

    def _read(self) -> bool:
        """Take the destination's messages: whether it said ``Finish`` (else it is
        gone)."""
        receiver = self.receiver
        while True:
            try:
                got = self.chan.recv()
            except OSError:
                return False
            if got is None:
                receiver.runtime.stop("the destination went away")
                return False
            message, fds = got
            if isinstance(message, Opened):
                receiver.opened(message, fds[0])
            elif isinstance(message, Closed):
                receiver.forget(message)
            elif isinstance(message, Stop):
                receiver.runtime.stop(message.reason)
            elif isinstance(message, Finish):
                return True

    def _serve(self, conn: Connection) -> None:
        try:
            serve_data(conn, self.receiver, None)
        except (RemoteError, OSError) as exc:
            if not self.ended.is_set():
                self._broken(exc)
        except BaseException as exc:  # noqa: BLE001 - a bug: reported, then exit
            description = "".join(traceback.format_exception(exc))
            with contextlib.suppress(OSError):
                self.chan.send(Crash(description))

    def _broken(self, exc: BaseException) -> None:
        with contextlib.suppress(OSError):
            self.chan.send(Broken(f"{type(exc).__name__}: {exc}"))


def main(argv: list[str]) -> int:
    return helper_main(
        argv, WriterSetup, lambda chan, setup: Writer(chan, setup).serve()
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv))
