"""The monitor's signals: a backlog once, when work first waits for a worker; each
limit the controller sets."""

from __future__ import annotations

import threading
import time

from rcp_core.monitor import SAMPLE, Monitor
from rcp_core.pool import WorkPool
from rcp_core.summary import Tally
from rcp_core.tuning import Concurrency, Controller


class Backlog:
    """Counts the monitor's ``on_backlog`` calls; ``seen`` is set at the first."""

    def __init__(self) -> None:
        self.calls = 0
        self.seen = threading.Event()

    def __call__(self) -> None:
        self.calls += 1
        self.seen.set()


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


def test_a_new_limit_reaches_the_pool_and_the_limit_callback() -> None:
    """One worker busy on items that only wait (no CPU): the first tick grows the
    limit, and ``on_limit`` hears of it after the pool has it."""
    pool = WorkPool(4, 1, on_crash=lambda exc: None)
    heard: list[tuple[int, int]] = []

    def waiting_item(tally: Tally) -> None:
        time.sleep(0.01)
        tally["copied.files"] += 1

    for _ in range(100):
        pool.push(waiting_item)
    monitor = Monitor(
        pool,
        Controller(Concurrency(1, 1, 4)),
        [],
        60.0,
        threading.Event(),
        lambda: None,
        on_limit=lambda limit: heard.append((limit, pool.limit)),
    )
    monitor.start()
    pool.run()
    monitor.stop()
    assert heard
    assert heard[0] == (2, 2)
    assert monitor.limits[:2] == [1, 2]
