"""The destination's writer processes: the other cores, for copies where one
destination process saturates one.

A destination writes what arrives on its data connections in one Python process:
the TLS decryption, the frame checks and the per-file Python work share one GIL, and
its connection threads hand it back and forth (benchmarks/results/remote_profile.md:
the Linux tree costs the destination 8.8 CPU-seconds in one process). Writer
processes (:mod:`rcp_core.remote.writerprocess`, spawned, not forked) each dial data
connections of their own to the source, as late data connections (protocol 1.15: the
control ``attach`` said how many may come), and write what arrives on them. This
process keeps the control connection, its own data connections and the accounting
of every directory (:meth:`~rcp_core.remote.receive.Receiver.wrote`): directories are
created, finished post-order, pruned and given their metadata here, and hard links
are made here, so the local engine's invariants hold wherever an entry arrived.

- **when**: :meth:`Writers.consider` starts them after a ``LOOK_AFTER`` seconds
  window of the transfer in which this process was busy at least ``BUSY`` of a
  core (a small copy, or one a slow link paces, never pays for them) while the host
  had at least ``SPARE`` of a core idle for them (where the host's cores are taken,
  by the source on the same machine or by other work, more processes only compete
  for them: measured, benchmarks/results/compare-s23-writers); or at once when
  ``--max-processes`` asked for them;
- **how many**: the site plugins' ``processes`` for the destination's storage
  (:func:`rcp_core.site.capacity.choose_concurrency`: one per CPU on local disks,
  one on shared storage, whose round trips the write pool overlaps), less this one,
  each with as many data connections as this process has;
- **directories**: a writer that is ready learns every directory ready for entries,
  then each before its ``dir_ready`` goes to the source, with its descriptor
  (:meth:`~rcp_core.remote.receive.Receiver.share`), and each as it is finished;
- **failures**: a writer whose connection breaks, that crashes, or that ends without
  its ``Final`` after it took connections fails the transfer (:meth:`Writers.check`);
  one that never became ready (it could not start, or the transfer ended first)
  took nothing, and the copy goes on without it;
- **bounded**: a writer's dials are bounded by the copy's ``timeout``, and one not
  ready when the copy ends is killed; its ``Final`` is awaited at most ``timeout``;
  :meth:`Writers.close` kills what is left;
- **on demand**: this module is light; a writer's handle
  (:mod:`rcp_core.remote.writerhandle`: sockets, pickle, subprocess) is imported
  only when writers start, so a copy that never needs them does not pay for it.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any

from rcp_core.remote.hello import MAX_MORE_DATA
from rcp_core.site.capacity import choose_concurrency, open_files_budget
from rcp_core.site.storage import StorageInfo

if TYPE_CHECKING:
    from collections.abc import Callable

    from rcp_core.remote.receive import Receiver
    from rcp_core.remote.writerhandle import Writer
    from rcp_core.settings import CopySettings

log = logging.getLogger("rcp_core")

LOOK_AFTER = 0.5
"""Seconds of transfer in each window over which the destination decides whether
it needs writers."""
BUSY = 0.6
"""The share of a core this process used in a window that calls for writers."""
SPARE = 0.75
"""The share of a core the host left idle in that window, at least, for writers."""
STAT = "/proc/stat"


def wanted(elapsed: float, busy: float, idle: float | None) -> bool:
    """Whether writers pay, after a window of ``elapsed`` seconds in which this
    process used ``busy`` CPU-seconds and the host's CPUs were ``idle`` seconds idle
    together (``None``: not known, so not a reason against them)."""
    if busy < BUSY * elapsed:
        return False
    return idle is None or idle >= SPARE * elapsed


def host_idle() -> float | None:
    """The seconds this host's CPUs have been idle (or waiting for I/O) since boot,
    all of them together; ``None`` where the kernel does not say (not Linux)."""
    try:
        with open(STAT, "rb") as stat:
            fields = stat.readline().split()
        ticks = int(fields[4]) + int(fields[5])  # "cpu" user nice system idle iowait
    except (OSError, IndexError, ValueError):
        return None
    return ticks / os.sysconf("SC_CLK_TCK")


class Writers:
    """The writer processes a destination may start (none until :meth:`consider`).

    :param setup: the fields of the writers'
        :class:`~rcp_core.remote.writerchannel.WriterSetup`.
    :param count: writer processes to start.
    :param eager: ``--max-processes`` asked for them: started at the first
        :meth:`consider`.
    """

    def __init__(
        self,
        receiver: Receiver,
        setup: dict[str, Any],
        count: int,
        *,
        eager: bool,
        beat: Callable[[], None],
    ) -> None:
        self.receiver = receiver
        self.setup = setup
        self.count = count
        self.eager = eager
        self.beat = beat
        self.failure: BaseException | None = None
        self.started = False
        self._writers: list[Writer] = []
        self._window = self._now()
        receiver.runtime.on_stop.append(self._stop)

    @property
    def more(self) -> int:
        """The data connections the writers may add (the control ``attach``'s)."""
        connections: int = self.setup["connections"]
        return self.count * connections

    def consider(self) -> None:
        """Start the writers if this process is the bottleneck and the host has a
        core for them (or they were asked for); called about five times a second
        while the transfer runs."""
        if self.started or self.receiver.runtime.stopping:
            return
        if not self.eager:
            began, cpu, idle = self._window
            now = self._now()
            elapsed = now[0] - began
            if elapsed < LOOK_AFTER:
                return
            self._window = now
            host = now[2] - idle if now[2] is not None and idle is not None else None
            if not wanted(elapsed, now[1] - cpu, host):
                return
        self.started = True
        from rcp_core.remote.writerchannel import WriterSetup
        from rcp_core.remote.writerhandle import Writer

        log.debug("starting %d writer processes", self.count)
        for number in range(1, self.count + 1):
            writer = Writer(self, number)
            self.receiver.counters.include(writer.tally)
            self._writers.append(writer)
            writer.start(WriterSetup(**self.setup, group=number))

    @staticmethod
    def _now() -> tuple[float, float, float | None]:
        """The time, this process's CPU time and the host's idle time."""
        return time.monotonic(), time.process_time(), host_idle()

    def failed(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc

    def check(self) -> None:
        """Raise what failed in a writer (the transfer fails)."""
        if self.failure is not None:
            raise self.failure

    def _stop(self, reason: str) -> None:
        for writer in self._writers:
            writer.stop(reason)

    def finish(self) -> None:
        """Every directory is finished: collect the writers' last counters (at most
        the setup's ``timeout``)."""
        for writer in self._writers:
            writer.finish()
        timeout: float = self.setup["timeout"]
        deadline = time.monotonic() + timeout
        for writer in self._writers:
            if writer.ready.is_set() and not writer.dead:
                writer.final.wait(max(0.0, deadline - time.monotonic()))
        self.check()

    def close(self) -> None:
        """End every writer and reap it: one without its ``Final`` (the transfer
        failed) is hung up on, so it removes the file it was writing, and killed if
        it does not end in time."""
        for writer in self._writers:
            if not writer.final.is_set():
                writer.hang_up()
        for writer in self._writers:
            writer.reap(self.setup["timeout"])


def writers_for(
    receiver: Receiver, setup: dict[str, Any], beat: Callable[[], None]
) -> Writers | None:
    """The writer processes a destination may start: the site plugins'
    ``processes`` for its storage (or ``--max-processes``), less itself, and no more
    than the protocol's late connections allow (``MAX_MORE_DATA``); ``None`` when
    that is none.

    :param beat: called as the writers' frames arrive (the transfer's heartbeat).
    """
    settings: CopySettings = setup["settings"]
    storage = receiver.runtime.storage or StorageInfo("unknown")
    concurrency = choose_concurrency(
        receiver.runtime.hook,
        [(storage, storage)],
        settings,
        open_files_budget(settings),
    )
    connections: int = setup["connections"]
    count = min(concurrency.processes - 1, MAX_MORE_DATA // max(1, connections))
    if count < 1:
        return None
    return Writers(
        receiver, setup, count, eager=settings.max_processes is not None, beat=beat
    )
