"""The run's monitor thread: adapts concurrency, reports progress, watches for cancel.

Every ``SAMPLE`` seconds it samples how many items run; every ``TICK`` seconds (the
first time, and the second after a first that grew the limit, after ``FIRST_TICK``)
it feeds the controller one :class:`~rcp_core.run.tuning.Tick` (mean busy workers, work
finished, the process's CPU time) and applies the new limit to the pool; every
``progress_interval`` seconds it hands a :class:`~rcp_core.run.progress.Progress`
snapshot to the observers. All of it reads only samples, so a slow observer delays
reports, never the copy.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from rcp_core.run.pool import WorkPool
from rcp_core.run.progress import Progress, entries
from rcp_core.run.summary import merge
from rcp_core.run.tuning import Controller, Tick

log = logging.getLogger("rcp_core")

SAMPLE = 0.05
TICK = 0.5
FIRST_TICK = 0.1
"""The first tick is shorter: the controller's first decision (to grow where the
workers wait) must come early enough to matter in a run of about a second. So is the
second when the first grew the limit: that growth's judgement, and the next step up,
must come within a copy of half a second too (ext4, 10k x 1 KiB cold: the climb to 4
in flight arrived at 0.2 s instead of 0.6 s: 3-4% faster, in 20 of 20 and 13 of 16
pairs side by side)."""
MIB = 1 << 20
WORTH_HELPERS = 0.25
"""A run expected to last this long (seconds) is worth a helper process: one takes
about 0.06 s to import and costs the run about 0.04 s in all, so a shorter copy is
faster without it."""

Observer = Callable[[Progress], None]


def work_units(counts: Mapping[str, int]) -> float:
    """Work done so far: entries handled plus MiB written (of finished files and of
    files still being copied, so a large file counts as it goes)."""
    return entries(counts) + counts["moved.bytes"] / MIB


def entries_left(counts: Mapping[str, int]) -> float:
    """Entries still to handle, as far as the walk can tell: those found and not yet
    handled, and for each directory found but not yet scanned as many as the scanned
    ones held on average."""
    scanned = counts["scanned.dirs"]
    if not scanned:
        return 0.0
    found = counts["found.entries"]
    unscanned = max(0, counts["found.dirs"] - scanned)
    return max(0, found - entries(counts)) + unscanned * found / scanned


def seconds_left(counts: Mapping[str, int], elapsed: float) -> float:
    """How long :func:`entries_left` would take at the rate so far (``elapsed``
    seconds for the work done); infinite before any work is done."""
    done = work_units(counts)
    if done <= 0:
        return math.inf
    return entries_left(counts) * elapsed / done


class Monitor:
    """Runs beside a pool until :meth:`stop`.

    :param controller: adapts ``pool.limit``; ``None`` keeps it fixed.
    :param observers: progress callbacks.
    :param cancel: when set, ``on_cancel`` is called once.
    :param elsewhere: counters of work done outside the pool (helper processes):
        part of the progress, not of the controller's measure of its own workers.
    :param on_backlog: called once, from the monitor thread, at the first sample
        that finds work queued for the pool's workers in a run expected to last
        ``WORTH_HELPERS`` seconds: the time so far and :func:`seconds_left`. A deep
        tree's walk sees little of what is left, so there the time so far decides.
        The helpers it starts take work from the pool's workers, so the controller
        then starts its measures over (:meth:`Controller.restart`).
    :param on_limit: called from the monitor thread with each limit the controller
        sets that differs from the last (after the pool has it).
    """

    def __init__(
        self,
        pool: WorkPool,
        controller: Controller | None,
        observers: Sequence[Observer],
        progress_interval: float,
        cancel: threading.Event,
        on_cancel: Callable[[], None],
        elsewhere: Sequence[Mapping[str, int]] = (),
        on_backlog: Callable[[], None] | None = None,
        on_limit: Callable[[int], None] | None = None,
    ) -> None:
        self.pool = pool
        self.controller = controller
        self.observers = list(observers)
        self.progress_interval = progress_interval
        self.cancel = cancel
        self.on_cancel = on_cancel
        self.elsewhere = elsewhere
        self.on_backlog = on_backlog
        self.on_limit = on_limit
        self.started = time.monotonic()
        self.limits: list[int] = [pool.limit]
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="rcp-monitor", daemon=True
        )

    def snapshot(self, final: bool = False) -> Progress:
        """Progress of the whole run, helper processes' work included."""
        return Progress(
            counts=merge([*self.pool.tallies, *self.elsewhere]),
            elapsed=time.monotonic() - self.started,
            pending=self.pool.outstanding,
            final=final,
            concurrency=self.pool.limit,
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread, then give observers the final snapshot."""
        self._stop.set()
        self._thread.join()
        self._report(self.snapshot(final=True))

    def _report(self, progress: Progress) -> None:
        """Hand ``progress`` to every observer; a failing observer never stops the run
        (it is logged once and dropped)."""
        for observer in list(self.observers):
            try:
                observer(progress)
            except Exception:
                log.exception("progress observer %r failed; dropping it", observer)
                self.observers.remove(observer)

    def _backlog(self) -> bool:
        """Work waits for a worker in a run expected to last ``WORTH_HELPERS``."""
        if not self.pool.queued:
            return False
        elapsed = time.monotonic() - self.started
        counts = merge(list(self.pool.tallies))
        return elapsed + seconds_left(counts, elapsed) >= WORTH_HELPERS

    def _climbing(self) -> bool:
        """No tick yet, or only one, which grew the limit (for waiting workers)."""
        return len(self.limits) == 1 or (
            len(self.limits) == 2 and self.limits[1] > self.limits[0]
        )

    def _run(self) -> None:
        tick_start = last_report = time.monotonic()
        cpu_before = time.process_time()
        busy_sum = 0.0
        samples = 0
        done_before = 0.0
        cancelled = self.cancel.is_set()  # set before the run began: stop at once
        if cancelled:
            self.on_cancel()
        while not self._stop.wait(SAMPLE):
            if not cancelled and self.cancel.is_set():
                cancelled = True
                self.on_cancel()
            if self.on_backlog is not None and self._backlog():
                on_backlog, self.on_backlog = self.on_backlog, None
                on_backlog()
                if self.controller is not None:
                    self.controller.restart()
            busy_sum += self.pool.running
            samples += 1
            now = time.monotonic()
            length = FIRST_TICK if self._climbing() else TICK
            if self.controller is not None and now - tick_start >= length:
                done = work_units(merge(list(self.pool.tallies)))
                cpu = time.process_time()
                tick = Tick(
                    now - tick_start,
                    busy_sum / samples,
                    done - done_before,
                    cpu - cpu_before,
                )
                limit = self.controller.update(tick)
                log.debug(
                    "tick of %.2f s: %.1f busy, %.0f units, %.2f CPU s; limit %d -> %d",
                    tick.seconds,
                    tick.busy,
                    tick.units,
                    tick.cpu,
                    self.pool.limit,
                    limit,
                )
                if limit != self.pool.limit:  # setting it wakes every waiting worker
                    self.pool.limit = limit
                    if self.on_limit is not None:
                        self.on_limit(limit)
                self.limits.append(limit)
                done_before, busy_sum, samples, tick_start = done, 0.0, 0, now
                cpu_before = cpu
            if self.observers and now - last_report >= self.progress_interval:
                last_report = now
                self._report(self.snapshot())
