"""The work pool starts threads only as its limit reaches them."""

from __future__ import annotations

import threading

from rcp_core.run.pool import WorkPool
from rcp_core.run.summary import Tally


def _workers() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("rcp-worker-")}


def test_a_pool_at_limit_one_runs_one_thread() -> None:
    pool = WorkPool(16, 1, on_crash=lambda exc: None)
    seen: list[set[str]] = []
    for _ in range(50):
        pool.push(lambda tally: seen.append(_workers()))
    pool.run()
    assert len(seen) == 50
    assert set().union(*seen) == {"rcp-worker-0"}


def test_raising_the_limit_starts_threads_up_to_the_maximum() -> None:
    pool = WorkPool(3, 1, on_crash=lambda exc: None)
    release = threading.Event()
    running = threading.Semaphore(0)

    def blocked(tally: Tally) -> None:
        running.release()
        assert release.wait(10)

    for _ in range(5):
        pool.push(blocked)
    runner = threading.Thread(target=pool.run)
    runner.start()
    assert running.acquire(timeout=10)
    assert not running.acquire(timeout=0.2)  # one in flight at limit 1
    pool.limit = 10  # capped at the pool's 3 threads
    assert running.acquire(timeout=10)
    assert running.acquire(timeout=10)
    assert _workers() == {"rcp-worker-0", "rcp-worker-1", "rcp-worker-2"}
    assert not running.acquire(timeout=0.2)
    release.set()
    runner.join(10)
    assert not runner.is_alive()
    assert not _workers()  # every thread it started was joined


def test_a_limit_raised_after_the_run_starts_no_thread() -> None:
    pool = WorkPool(4, 1, on_crash=lambda exc: None)
    pool.push(lambda tally: None)
    pool.run()
    pool.limit = 4
    assert not _workers()


def test_a_worker_aside_lets_the_next_item_run_beside_it() -> None:
    """At limit 1, a worker waiting aside (a large file's kernel copy) gives its
    place to the work it gave away, and takes it back afterwards."""
    pool = WorkPool(4, 1, on_crash=lambda exc: None, aside=1)
    given_away_ran = threading.Event()
    overlapped: list[bool] = []

    def small(tally: Tally) -> None:
        given_away_ran.set()

    def large(tally: Tally) -> None:
        with pool.aside(lambda: pool.push(small)):
            overlapped.append(given_away_ran.wait(10))

    pool.push(large)
    pool.run()
    assert overlapped == [True]
    assert pool.running == 0
    assert not _workers()


def test_no_more_than_aside_workers_step_aside() -> None:
    """Past the bound a worker copies in place: its rest is not given away."""
    pool = WorkPool(4, 1, on_crash=lambda exc: None, aside=1)
    inside = threading.Event()
    release = threading.Event()
    gave: list[str] = []

    def first(tally: Tally) -> None:
        with pool.aside(lambda: (gave.append("first"), pool.push(second))):
            inside.set()
            assert release.wait(10)

    def second(tally: Tally) -> None:
        assert inside.wait(10)
        with pool.aside(lambda: gave.append("second")):
            pass  # in place: the one place aside is taken
        release.set()

    pool.push(first)
    pool.run()
    assert gave == ["first"]


def test_a_pool_without_aside_runs_everything_in_place() -> None:
    pool = WorkPool(4, 1, on_crash=lambda exc: None)
    gave: list[None] = []

    def item(tally: Tally) -> None:
        with pool.aside(lambda: gave.append(None)):
            pass

    pool.push(item)
    pool.run()
    assert gave == []
