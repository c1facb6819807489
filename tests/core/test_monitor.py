"""The monitor's signals: a backlog once, when work first waits for a worker in a run
expected to last long enough for helper processes; each limit the controller sets;
and the walk's estimate of the work left behind the first."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import pytest

from rcp_core.run import monitor as monitor_module
from rcp_core.run.monitor import SAMPLE, Monitor, entries_left, seconds_left
from rcp_core.run.pool import WorkPool
from rcp_core.run.summary import Tally
from rcp_core.run.tuning import Concurrency, Controller


class Backlog:
    """Counts the monitor's ``on_backlog`` calls; ``seen`` is set at the first, and
    ``at`` is when (``time.monotonic``)."""

    def __init__(self) -> None:
        self.calls = 0
        self.at = math.nan
        self.seen = threading.Event()

    def __call__(self) -> None:
        self.calls += 1
        self.at = time.monotonic()
        self.seen.set()


def walked(done_files: int, scanned: int, found: int, found_dirs: int) -> Tally:
    """A worker's counters after it walked and copied part of a tree."""
    tally = Tally()
    tally["copied.files"] = done_files
    tally["scanned.dirs"] = scanned
    tally["found.entries"] = found
    tally["found.dirs"] = found_dirs
    return tally


def test_the_work_left_counts_what_was_found_and_what_unscanned_directories_hold() -> (
    None
):
    """A root of 100 directories of 100 files, two directories scanned (the root and
    one of them), 20 files copied: 181 found entries are left (the root among them),
    and the 99 directories not yet scanned are taken to hold what the scanned ones
    found on average (201 / 2)."""
    tally = walked(done_files=20, scanned=2, found=201, found_dirs=101)
    assert entries_left(tally) == 181 + 99 * 201 / 2
    assert seconds_left(tally, elapsed=0.02) == pytest.approx(
        entries_left(tally) / 1000
    )


def test_nothing_scanned_means_nothing_known_left_and_nothing_done_means_no_rate() -> (
    None
):
    assert entries_left(Tally()) == 0
    assert seconds_left(Tally(), elapsed=1.0) == math.inf


def watch(pool: WorkPool, backlog: Backlog) -> Monitor:
    monitor = Monitor(
        pool, None, [], 60.0, threading.Event(), lambda: None, on_backlog=backlog
    )
    monitor.start()
    return monitor


def serve_blocked(
    pool: WorkPool, items: int
) -> tuple[threading.Thread, threading.Event]:
    """Push ``items`` items that wait for the returned event, and serve the pool."""
    release = threading.Event()
    for _ in range(items):
        pool.push(lambda tally: release.wait(10))
    runner = threading.Thread(target=pool.run)
    runner.start()
    return runner, release


def first_backlog(pool: WorkPool) -> tuple[Backlog, Monitor]:
    """Serve three items that wait (one runs, two wait) until the monitor signals a
    backlog; the backlog and the stopped monitor."""
    runner, release = serve_blocked(pool, 3)
    backlog = Backlog()
    monitor = watch(pool, backlog)
    assert backlog.seen.wait(10)
    release.set()
    runner.join(10)
    monitor.stop()
    return backlog, monitor


def test_work_waiting_for_a_worker_signals_a_backlog_once() -> None:
    pool = WorkPool(1, 1, on_crash=lambda exc: None)
    runner, release = serve_blocked(pool, 3)  # one runs, two wait
    backlog = Backlog()
    monitor = watch(pool, backlog)
    assert backlog.seen.wait(10)
    assert not threading.Event().wait(5 * SAMPLE)  # later samples see the same queue
    release.set()
    runner.join(10)
    monitor.stop()
    assert backlog.calls == 1


def test_a_short_run_by_the_walks_estimate_waits_for_the_time_so_far(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Work waits, but the walk found nothing left and the rate is high (a tree about
    copied): no backlog until the run has lasted ``WORTH_HELPERS`` after all."""
    monkeypatch.setattr(monitor_module, "WORTH_HELPERS", 0.4)
    pool = WorkPool(1, 1, on_crash=lambda exc: None)
    pool.tallies.append(walked(done_files=10**6, scanned=1, found=10, found_dirs=0))
    backlog, monitor = first_backlog(pool)
    assert backlog.at - monitor.started >= 0.4
    assert backlog.calls == 1


def test_a_long_run_by_the_walks_estimate_signals_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The walk found far more than the work done so far: the backlog comes from
    the estimate, long before the time so far would decide."""
    monkeypatch.setattr(monitor_module, "WORTH_HELPERS", 60.0)
    pool = WorkPool(1, 1, on_crash=lambda exc: None)
    pool.tallies.append(walked(done_files=1, scanned=2, found=201, found_dirs=101))
    backlog, monitor = first_backlog(pool)
    assert backlog.at - monitor.started < 60.0
    assert backlog.calls == 1


class RestartCounter(Controller):
    """A controller that counts its restarts."""

    def __init__(self) -> None:
        super().__init__(Concurrency(1, 1, 4))
        self.restarts = 0

    def restart(self) -> None:
        self.restarts += 1
        super().restart()


def test_the_controller_starts_over_when_the_helpers_start() -> None:
    """The backlog starts the helpers, which take work from the pool's workers: the
    controller's measures start over then, once."""
    pool = WorkPool(1, 1, on_crash=lambda exc: None)
    runner, release = serve_blocked(pool, 3)  # nothing done: the estimate is endless
    controller = RestartCounter()
    backlog = Backlog()
    monitor = Monitor(
        pool, controller, [], 60.0, threading.Event(), lambda: None, on_backlog=backlog
    )
    monitor.start()
    assert backlog.seen.wait(10)
    release.set()
    runner.join(10)
    monitor.stop()
    assert (backlog.calls, controller.restarts) == (1, 1)


def test_a_pool_that_keeps_up_signals_nothing() -> None:
    pool = WorkPool(2, 2, on_crash=lambda exc: None)
    runner, release = serve_blocked(pool, 2)  # both run: nothing waits
    backlog = Backlog()
    monitor = watch(pool, backlog)
    assert not backlog.seen.wait(6 * SAMPLE)
    release.set()
    runner.join(10)
    monitor.stop()
    assert backlog.calls == 0


def run_waiting_items(
    pool: WorkPool,
    controller: Controller,
    on_limit: Callable[[int], None] | None = None,
) -> Monitor:
    """Run 100 items that only wait (10 ms each, no CPU) in ``pool``, watched by a
    monitor driving ``controller``; return the monitor once they are done."""

    def waiting_item(tally: Tally) -> None:
        time.sleep(0.01)
        tally["copied.files"] += 1

    for _ in range(100):
        pool.push(waiting_item)
    monitor = Monitor(
        pool,
        controller,
        [],
        60.0,
        threading.Event(),
        lambda: None,
        on_limit=on_limit,
    )
    monitor.start()
    pool.run()
    monitor.stop()
    return monitor


def test_a_new_limit_reaches_the_pool_and_the_limit_callback() -> None:
    """One worker busy on items that only wait (no CPU): the first tick grows the
    limit, and ``on_limit`` hears of it after the pool has it."""
    pool = WorkPool(4, 1, on_crash=lambda exc: None)
    heard: list[tuple[int, int]] = []
    monitor = run_waiting_items(
        pool,
        Controller(Concurrency(1, 1, 4)),
        on_limit=lambda limit: heard.append((limit, pool.limit)),
    )
    assert heard
    assert heard[0] == (2, 2)
    assert monitor.limits[:2] == [1, 2]


def test_after_a_first_tick_that_grew_the_second_tick_is_short_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Waiting workers: the first tick grows the limit, and the tick judging that
    growth comes ``FIRST_TICK`` later, not ``TICK`` (made a minute here, so only a
    short second tick can move the limit again within the run's half second)."""
    monkeypatch.setattr(monitor_module, "TICK", 60.0)
    pool = WorkPool(4, 1, on_crash=lambda exc: None)
    monitor = run_waiting_items(pool, Controller(Concurrency(1, 1, 4)))
    assert monitor.limits[:2] == [1, 2]
    assert len(monitor.limits) >= 3
    assert monitor.limits[2] > 2


def test_after_a_first_tick_that_held_the_limit_the_next_tick_is_a_full_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(monitor_module, "TICK", 60.0)
    pool = WorkPool(2, 2, on_crash=lambda exc: None)
    monitor = run_waiting_items(pool, Controller(Concurrency.fixed(2)))
    assert monitor.limits == [2, 2]
