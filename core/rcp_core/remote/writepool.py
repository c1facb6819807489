"""The destination's writers: the entries of ``FILES`` frames, written by a work pool.

Used where more writers than data connections pay, on a shared storage (network,
parallel, FUSE): :meth:`rcp_core.remote.receive.Receiver._write_pool` says why not on
a local disk, with the measurement.

A data connection's reader checks a ``FILES`` frame and hands each entry's write to a
:class:`~rcp_core.run.pool.WorkPool` whose limit the adaptive controller moves
(:class:`~rcp_core.run.tuning.Controller` under a :class:`~rcp_core.run.monitor.Monitor`),
within the bounds this host's plugins choose for the destination's storage, as a local
copy's workers are (:func:`rcp_core.site.capacity.choose_concurrency`). The pool's
workers count into the receiver's counters (each worker its own tally), so the
controller measures the work they do. As a local copy's walk does, small files share
work items: a frame's writes go in batches of at most ``BATCH`` entries, and in at least
as many batches as the limit lets run at once, so one frame alone fills the workers.

- **bounded**: at most ``frames`` frames, holding at most ``max_bytes`` bytes of data,
  are handed over and not yet written; the reader that would pass the bound waits
  until writes finish (backpressure: memory stays flat, nothing queues without bound).
  A frame larger than ``max_bytes`` still goes, alone;
- **the frame's bytes**: a frame's data is a view of its connection's read buffer,
  which the next read overwrites (:class:`~rcp_core.remote.wire.FrameReader`), so the
  writers get their own copy of it, kept until the frame's last write is done;
- **failures**: a write handles its own ``OSError`` (the receiver's ``_guarded``
  records it in the role's error log, as before); anything else a write raises (a
  peer's protocol error found while writing, or a defect) is kept as :attr:`crash`
  and raised to the connections (:meth:`check`), which fail the transfer;
- **close**: :meth:`close` waits, at most ``timeout`` seconds, for the writes in flight,
  then ends the workers; whether they all ended, so the caller knows whether the
  directories they write into may be closed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from rcp_core.errors import RemoteError
from rcp_core.run.monitor import Monitor
from rcp_core.run.pool import WorkPool
from rcp_core.run.summary import Tally, ThreadTallies
from rcp_core.run.tuning import Concurrency, Controller

log = logging.getLogger("rcp_core")

FRAMES = 16
"""Frames handed over and not yet written, at most (all connections together)."""
BYTES = 32 << 20
"""Their data, at most: eight of the source's fullest ``FILES`` frames (4 MiB of data
each). A reader waiting for room holds one more frame's copy (one per connection)."""

BATCH = 32
"""Writes per work item at most: a local copy's batch of small files
(:data:`rcp_core.engine.walk.BATCH`; not imported, for the start-up of a remote copy,
which needs nothing else of the walk)."""

Write = Callable[[], None]


class _Frame:
    """A frame in flight: its batches of writes still to finish, and the bytes it
    holds."""

    __slots__ = ("data", "left", "size")

    def __init__(self, left: int, size: int, data: object) -> None:
        self.left = left
        self.size = size
        self.data = data  # kept alive until the frame's last write is done


class WritePool:
    """Writes handed over in frames, by adaptive workers, within a bound in flight.

    :param concurrency: the workers' bounds and start (their ``maximum`` threads at most).
    :param counters: the receiver's per-thread counters; each worker counts into its
        pool tally through them.
    :param frames: frames in flight at most; ``max_bytes``: bytes of their data.
    """

    def __init__(
        self,
        concurrency: Concurrency,
        counters: ThreadTallies,
        *,
        frames: int = FRAMES,
        max_bytes: int = BYTES,
    ) -> None:
        self.concurrency = concurrency
        self.counters = counters
        self.max_frames = frames
        self.max_bytes = max_bytes
        self.crash: BaseException | None = None
        self.pool = WorkPool(
            concurrency.maximum, concurrency.initial, on_crash=self._crashed
        )
        self.pool.reserve()  # serve until close(), however long no frame arrives
        self._cond = threading.Condition()
        self._frames = 0
        self._bytes = 0
        self.peak = (0, 0)
        """The most frames and bytes that were in flight at once (for tests)."""
        self._monitor: Monitor | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def limits(self) -> list[int]:
        """The limits the controller chose, one per tick."""
        return self._monitor.limits if self._monitor is not None else []

    def _start(self) -> None:
        """Start the workers and their monitor (with the first frame: a transfer
        that writes no ``FILES`` frame starts no thread)."""
        controller = Controller(self.concurrency) if self.concurrency.adaptive else None
        self._monitor = Monitor(
            self.pool,
            controller,
            [],
            progress_interval=3600.0,
            cancel=threading.Event(),
            on_cancel=lambda: None,
        )
        self._thread = threading.Thread(
            target=self._serve, name="rcp-writers", daemon=True
        )
        self._thread.start()
        self._monitor.start()

    def _serve(self) -> None:
        try:
            self.pool.run()
        except BaseException as exc:
            if exc is not self.crash:
                raise
            # the crash is raised to the connections by check()

    def _crashed(self, exc: BaseException) -> None:
        if self.crash is None:
            self.crash = exc

    def check(self) -> None:
        """Raise what a write raised besides its own ``OSError`` (the transfer fails)."""
        if self.crash is not None:
            raise self.crash

    def submit(self, writes: Sequence[Write], size: int, data: object) -> None:
        """Hand over one frame's ``writes`` (``data``: the ``size`` bytes they read),
        after waiting for room in flight."""
        if not writes:
            return
        with self._cond:
            if self._closed:  # a reader that outlived its transfer's end
                raise RemoteError("the transfer has ended")
            if self._thread is None:
                self._start()
            while self._frames and (
                self._frames >= self.max_frames or self._bytes + size > self.max_bytes
            ):
                self._cond.wait(1.0)
                self.check()
            self._frames += 1
            self._bytes += size
            self.peak = (
                max(self.peak[0], self._frames),
                max(self.peak[1], self._bytes),
            )
        step = min(BATCH, -(-len(writes) // self.pool.limit))
        batches = [writes[i : i + step] for i in range(0, len(writes), step)]
        frame = _Frame(len(batches), size, data)
        for batch in batches:
            self.pool.push(self._write, frame, batch)

    def _write(self, tally: Tally, frame: _Frame, batch: Sequence[Write]) -> None:
        self.counters.adopt(tally)
        try:
            for write in batch:
                write()
        finally:
            with self._cond:
                frame.left -= 1
                if not frame.left:
                    frame.data = None
                    self._frames -= 1
                    self._bytes -= frame.size
                    self._cond.notify_all()

    def close(self, timeout: float) -> bool:
        """Let the writes in flight finish (at most ``timeout`` seconds), then end the
        workers: whether every write ended."""
        with self._cond:
            if self._closed:
                return self._thread is None or not self._thread.is_alive()
            self._closed = True
            thread = self._thread
        if thread is None:
            return True
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._frames and time.monotonic() < deadline:
                self._cond.wait(max(0.001, deadline - time.monotonic()))
            drained = not self._frames
        if not drained:
            log.warning("writes still running after %g s; leaving them", timeout)
        self.pool.finish_external()  # the pool ends once its last item has
        thread.join(max(0.0, deadline - time.monotonic()))
        assert self._monitor is not None
        self._monitor.stop()
        log.debug("destination writers: limits %s", ",".join(map(str, self.limits)))
        return drained and not thread.is_alive()
