"""A writer process of a destination, from the destination's side
(:mod:`rcp_core.remote.writers` decides when): spawned, told the directories,
listened to, finished and reaped. Imported only when a destination starts writers
(sockets, pickle and subprocess cost a copy's start-up otherwise)."""

from __future__ import annotations

import contextlib
import logging
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rcp_core.engine.helpers.channel import (
    Channel,
    Counts,
    Crash,
    Failure,
    Final,
    Finish,
    Ready,
    Record,
    Stop,
)
from rcp_core.engine.helpers.spawn import read_helper, spawn
from rcp_core.engine.partials import Prefix
from rcp_core.errors import RemoteError
from rcp_core.remote.receivedtree import ReceivedDir
from rcp_core.remote.writerchannel import Broken, Closed, Opened, WriterSetup, Wrote
from rcp_core.run.summary import Tally

if TYPE_CHECKING:
    from rcp_core.remote.writers import Writers

log = logging.getLogger("rcp_core")


class Writer:
    """One writer process, from the destination's side."""

    def __init__(self, writers: Writers, number: int) -> None:
        self.writers = writers
        self.number = number
        self.tally = Tally()
        self.ready = threading.Event()
        self.final = threading.Event()
        self.dead = False
        self.proc: subprocess.Popen[bytes] | None = None
        self.chan: Channel | None = None
        self.thread: threading.Thread | None = None
        self.spawned = time.monotonic()

    def start(self, setup: WriterSetup) -> None:
        """Spawn the process; if that fails, the copy goes on without it."""
        try:
            self.proc, chan = spawn("rcp_core.remote.writerprocess", setup)
        except OSError as exc:
            log.warning("cannot start writer process %d: %s", self.number, exc)
            return
        self.chan = chan
        self.thread = threading.Thread(
            target=self._read, name=f"rcp-writer-{self.number}", daemon=True
        )
        self.thread.start()

    # -- what the receiver tells every writer (Receiver.share) -------------------

    def opened(self, node: ReceivedDir, described: Mapping[str, Prefix]) -> None:
        self.send(
            Opened(node.id, node.rel, node.fresh, node.names is not None, described),
            (node.fd,),
        )

    def closed(self, dir_id: int) -> None:
        self.send(Closed(dir_id))

    def stop(self, reason: str) -> None:
        """The run stopped: the writer writes nothing more."""
        self.send(Stop(reason))

    def send(self, message: object, fds: tuple[int, ...] = ()) -> None:
        """Send if the writer is still there; a gone writer is its reader's news."""
        if self.chan is not None and not self.dead:
            with contextlib.suppress(OSError):
                self.chan.send(message, fds)

    # -- what the writer says ------------------------------------------------------

    def _read(self) -> None:
        assert self.chan is not None
        try:
            read_helper(
                self.chan, self._apply, self._lost, f"writer process {self.number}"
            )
        except BaseException as exc:  # noqa: BLE001 - a peer's protocol error, or a defect: the transfer fails
            self.writers.failed(exc)

    def _apply(self, message: object) -> bool:
        """Act on one message; ``True`` when the writer is finished."""
        writers = self.writers
        receiver = writers.receiver
        if isinstance(message, Wrote):
            writers.beat()
            receiver.wrote(message)
        elif isinstance(message, Counts):
            writers.beat()
            self.tally.update(message.counts)
        elif isinstance(message, Failure):
            receiver.errors.add(message.error)
            receiver.runtime.stop_for(message.error)
        elif isinstance(message, Record):
            logging.getLogger(message.logger).log(message.level, "%s", message.message)
        elif isinstance(message, Ready):
            receiver.share(self)
            self.ready.set()
            log.debug(
                "writer process %d took its connections after %.3f s",
                self.number,
                time.monotonic() - self.spawned,
            )
        elif isinstance(message, Final):
            self.tally.update(message.counts)
            log.debug(
                "writer process %d wrote %d files, %d bytes",
                self.number,
                self.tally["copied.files"],
                self.tally["moved.bytes"],
            )
            self.final.set()
            return True
        elif isinstance(message, Broken):
            writers.failed(
                RemoteError(f"writer process {self.number}: {message.description}")
            )
            return True
        elif isinstance(message, Crash):
            log.error(
                "writer process %d crashed:\n%s", self.number, message.description
            )
            writers.failed(RemoteError(f"writer process {self.number} crashed"))
            return True
        return False

    def _lost(self) -> None:
        """The writer ended without its ``Final``: a failure if it had taken
        connections (what it held is lost), else only its help is."""
        self.dead = True
        if self.final.is_set():
            return
        status = self.proc.poll() if self.proc is not None else None
        if self.ready.is_set():
            self.writers.failed(
                RemoteError(f"writer process {self.number} exited (status {status})")
            )
        else:
            log.debug(
                "writer process %d ended before it took connections (status %s)",
                self.number,
                status,
            )

    # -- ending --------------------------------------------------------------------

    def finish(self) -> None:
        if self.ready.is_set():
            self.send(Finish())
        else:
            self.kill()  # it took nothing: nothing to wait for

    def reap(self, timeout: float) -> None:
        """Wait for the process to end (at most ``timeout`` seconds, then kill it)."""
        deadline = time.monotonic() + timeout
        if self.proc is not None:
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.error("writer process %d did not end; killing it", self.number)
                self.kill()
                self.proc.wait()
        if self.thread is not None:
            self.thread.join(max(0.0, deadline - time.monotonic()))
        if self.chan is not None:
            self.chan.close()

    def hang_up(self) -> None:
        """Close our end's traffic: the writer reads the end of its channel."""
        if self.chan is not None:
            with contextlib.suppress(OSError):
                self.chan.sock.shutdown(socket.SHUT_RDWR)

    def kill(self) -> None:
        self.dead = True
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
