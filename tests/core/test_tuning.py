"""The adaptive controller on simulated storage: deterministic, no sleeps."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rcp_core.run.tuning import Concurrency, Controller, Tick

TICK = 0.5
Storage = Callable[[int, int], tuple[float, float]]
"""(workers in flight, tick number) -> (busy workers, work units done in the tick)."""


def servers(capacity: int, latency: float) -> Storage:
    """Storage with ``capacity`` parallel servers of ``latency`` seconds per unit.

    Up to ``capacity`` requests are served at once (a network round trip each: more in
    flight hide it); beyond that, requests queue and only add latency.
    """

    def serve(workers: int, tick: int) -> tuple[float, float]:
        return workers, TICK * min(workers, capacity) / latency

    return serve


def cpu_bound(cores: int, latency: float, contention: float = 0.05) -> Storage:
    """Work limited by ``cores``; every extra thread also costs a little (GIL, locks)."""

    def serve(workers: int, tick: int) -> tuple[float, float]:
        penalty = 1 + contention * max(0, workers - cores)
        return workers, TICK * min(workers, cores) / latency / penalty

    return serve


def run(
    controller: Controller, storage: Storage, ticks: int, start: int = 0
) -> list[int]:
    """Drive the controller; return the limits it chose, leaving out its probe ticks."""
    limits = []
    for t in range(start, start + ticks):
        busy, units = storage(controller.limit, t)
        limit = controller.update(Tick(TICK, busy, units))
        if not controller.probing:
            limits.append(limit)
    return limits


def test_grows_where_latency_hides_work() -> None:
    """NFS-like: 128 servers at 0.5 ms; starting at 16 it climbs to near 128."""
    controller = Controller(Concurrency(16, 1, 256))
    limits = run(controller, servers(128, 0.0005), 60)
    assert 128 <= limits[-1] <= 128 * 1.6
    assert limits.index(max(limits)) < 30  # multiplicative growth: no crawl


def test_settles_low_when_cpu_bound() -> None:
    """Tiny files on a fast local disk: two cores do all there is to do."""
    controller = Controller(Concurrency(8, 1, 64))
    limits = run(controller, cpu_bound(2, 0.00005), 60)
    assert limits[-1] <= 3
    assert min(limits) >= 1


def test_backs_off_when_storage_slows_down() -> None:
    """The storage loses 7 of its 8 servers mid-run: the controller backs off."""
    controller = Controller(Concurrency(8, 1, 64))

    def degrading(workers: int, tick: int) -> tuple[float, float]:
        capacity = 32 if tick < 40 else 4
        return servers(capacity, 0.001)(workers, tick)

    before = run(controller, degrading, 40)
    assert before[-1] >= 32
    after = run(controller, degrading, 40, start=40)
    assert after[-1] <= 4 * controller.beta
    assert after[5] < before[-1] / 2  # within a few ticks it has acted


def test_holds_inside_the_band() -> None:
    """At capacity the latency ratio sits between alpha and beta: no oscillation
    (probes aside, which last one tick)."""
    controller = Controller(Concurrency(16, 1, 64))
    limits = run(controller, servers(16, 0.001), 40)
    assert set(limits[-20:]) == {limits[-1]}


def test_stays_within_bounds() -> None:
    controller = Controller(Concurrency(4, 2, 8))
    assert max(run(controller, servers(1000, 0.001), 30)) == 8
    controller = Controller(Concurrency(4, 2, 8))
    assert min(run(controller, cpu_bound(1, 0.001, contention=1.0), 30)) >= 2


def test_no_evidence_no_change() -> None:
    """Idle ticks (nothing finished, nobody busy) leave the limit alone."""
    controller = Controller(Concurrency(5, 1, 64))
    for _ in range(10):
        assert controller.update(Tick(TICK, 0.0, 0.0)) == 5
        assert controller.update(Tick(TICK, 3.0, 0.0)) == 5


def test_does_not_grow_when_the_limit_is_not_what_holds_back() -> None:
    """Two busy workers under a limit of 16 (a tree's tail): no reason to grow."""
    controller = Controller(Concurrency(16, 1, 64))
    for _ in range(10):
        controller.update(Tick(TICK, 2.0, 2 * TICK / 0.001))
    assert controller.limit == 16


def test_probes_refresh_the_baseline_at_low_concurrency() -> None:
    """A probe halves the limit for one tick, then the limit comes back."""
    controller = Controller(Concurrency(16, 1, 64), probe_every=4)
    seen = []
    for t in range(20):
        busy, units = servers(16, 0.001)(controller.limit, t)
        seen.append((controller.update(Tick(TICK, busy, units)), controller.probing))
    probes = [i for i, (_, probing) in enumerate(seen) if probing]
    assert len(probes) >= 3
    for i in probes:
        assert seen[i][0] == seen[i - 1][0] // 2 or seen[i - 1][1]
        assert seen[i + 1][0] >= seen[i][0] * 2 - 1


def test_fixed_concurrency_never_moves() -> None:
    controller = Controller(Concurrency.fixed(4))
    assert set(run(controller, servers(128, 0.001), 20)) == {4}


@pytest.mark.parametrize(
    ("initial", "minimum", "maximum", "chunk"),
    [(0, 1, 4, 0), (5, 1, 4, 0), (2, 3, 4, 0), (2, 1, 4, -1)],
)
def test_bad_bounds_are_refused(
    initial: int, minimum: int, maximum: int, chunk: int
) -> None:
    with pytest.raises(ValueError, match=r"must|need"):
        Concurrency(initial, minimum, maximum, chunk_size=chunk)


def worse_with_more(latency: float, penalty: float) -> Storage:
    """A create-bound local disk: one worker is best; each extra one slows all down."""

    def serve(workers: int, tick: int) -> tuple[float, float]:
        return workers, TICK / latency / (1 + penalty * (workers - 1))

    return serve


def test_stays_at_the_minimum_when_that_is_best() -> None:
    """Failed growths back off exponentially: the limit rests at 1 most of the time."""
    controller = Controller(Concurrency(2, 1, 8))
    limits = run(controller, worse_with_more(0.00005, 0.2), 120)
    assert limits[-60:].count(1) >= 50


def test_the_first_tick_only_measures() -> None:
    """A copy shorter than two ticks runs at the plugin's choice: no blind first step."""
    controller = Controller(Concurrency(1, 1, 8))
    busy, units = servers(8, 0.001)(1, 0)
    assert controller.update(Tick(TICK, busy, units)) == 1
    assert not controller.probing
    busy, units = servers(8, 0.001)(1, 1)
    assert controller.update(Tick(TICK, busy, units)) == 2  # now there is evidence


@pytest.mark.parametrize(
    ("busy", "cpu", "limit"),
    [
        (1.0, 0.2 * TICK, 2),  # a cold cache: the one worker waited for the disk
        (1.0, 1.0 * TICK, 1),  # a warm local copy: the worker was on the CPU
        (4.0, 1.0 * TICK, 4),  # four threads taking turns on one GIL: CPU-bound
        (0.4, 0.1 * TICK, 1),  # workers idle for want of work: nothing to hide
        (1.0, None, 1),  # CPU not measured: no evidence
    ],
)
def test_the_first_tick_grows_only_where_busy_workers_wait(
    busy: float, cpu: float | None, limit: int
) -> None:
    """The process's CPU time is the first tick's evidence: every worker busy while
    the process used under ``wait_share`` of a core means the items wait on storage."""
    start = max(1, int(busy))
    controller = Controller(Concurrency(start, 1, 8))
    assert controller.update(Tick(TICK, busy, 1000.0, cpu)) == limit
    if limit > start:  # a growth that makes the next tick much slower is undone
        assert controller.update(Tick(TICK, 2.0, 1000.0 / 2, 0.3 * TICK)) == start


def shared_cpu(cores: int, others: int, cost: float) -> Callable[[int], Tick]:
    """A CPU-bound copy on a machine where ``others`` busy threads compete for the
    ``cores``: the scheduler gives the copy's ``workers`` threads their share, so the
    process gets more of the CPUs (and does more) with more threads. ``cost``: CPU
    seconds per unit of work."""

    def tick(workers: int) -> Tick:
        share = min(workers, cores * workers / (workers + others))
        return Tick(TICK, workers, share * TICK / cost, share * TICK)

    return tick


def quiet_cpu(cost: float, penalty: float) -> Callable[[int], Tick]:
    """The same copy alone on the machine: one core whatever the threads (the GIL),
    and each extra thread costs a little."""

    def tick(workers: int) -> Tick:
        units = TICK / cost / (1 + penalty * (workers - 1))
        return Tick(TICK, workers, units, 1.0 * TICK)

    return tick


def drive(
    controller: Controller, ticks: int, storage: Callable[[int], Tick]
) -> list[int]:
    """Drive the controller with measured CPU; its limits, probe ticks left out."""
    limits = []
    for _ in range(ticks):
        limit = controller.update(storage(controller.limit))
        if not controller.probing:
            limits.append(limit)
    return limits


def test_grows_on_a_contended_cpu_where_more_threads_win_more_of_it() -> None:
    """Two busy threads beside the copy: each growth costs per-worker latency (past
    beta) but wins more of the CPUs, so it is kept; the limit climbs within a few
    ticks (the Linux tree's copy lasts about six)."""
    controller = Controller(Concurrency(1, 1, 16))
    limits = drive(controller, 12, shared_cpu(cores=2, others=2, cost=0.00005))
    assert limits[3] >= 3
    assert max(limits[-6:]) >= 4


def test_an_idle_cpu_bound_copy_does_not_grow_that_way() -> None:
    """Alone on the machine the process already has its core: its workers never
    wait, so a growth is judged by latency and undone; the limit rests at 1."""
    controller = Controller(Concurrency(1, 1, 16))
    limits = drive(controller, 120, quiet_cpu(cost=0.00005, penalty=0.1))
    assert limits[-60:].count(1) >= 50


def test_a_growth_while_waiting_that_collapses_the_rate_is_undone() -> None:
    """More of a core but half the work done: not what the growth was for."""
    controller = Controller(Concurrency(2, 1, 16))
    assert controller.update(Tick(TICK, 2.0, 1000.0, 0.3 * TICK)) == 3
    assert controller.update(Tick(TICK, 3.0, 500.0, 0.5 * TICK)) == 2


def test_a_growth_while_waiting_that_wins_no_cpu_is_undone_exactly() -> None:
    """Storage at its limit: one more worker gets neither more CPU nor more work
    done, so the limit goes back to where it was. (A growth on the first tick is
    only undone by a collapse: that tick's CPU share, taken during start-up, is no
    reference.)"""
    controller = Controller(Concurrency(4, 4, 16))  # at the minimum: no probes
    assert controller.update(Tick(TICK, 4.0, 1000.0, 1.0 * TICK)) == 4
    waiting = Tick(TICK, 4.0, 1000.0, 0.3 * TICK)
    assert controller.update(waiting) == 5
    assert controller.update(Tick(TICK, 5.0, 1000.0, 0.3 * TICK)) == 4
    assert controller.update(waiting) == 4  # and it waits before trying again


def test_a_growth_while_waiting_that_gets_more_done_is_kept_and_doubled() -> None:
    """The second worker costs per-worker latency (ratio 1.7) and no more CPU, but
    15% more work is done: the growth is kept and the climb goes on, doubling."""
    controller = Controller(Concurrency(1, 1, 16))
    assert controller.update(Tick(TICK, 1.0, 1000.0, 1.0 * TICK)) == 1
    assert controller.update(Tick(TICK, 1.0, 1000.0, 0.6 * TICK)) == 2
    assert controller.update(Tick(TICK, 2.0, 1150.0, 0.6 * TICK)) == 4


def test_a_restart_keeps_a_growth_unjudged_and_measures_afresh() -> None:
    """Helper processes started in the tick that judges a growth: the caller's rate
    fell because they took work from it, which is no verdict on the growth. It is
    kept, and the tick is taken as a first one: its waiting workers make a growth
    that only a collapse undoes."""
    controller = Controller(Concurrency(1, 1, 16))
    assert controller.update(Tick(TICK, 1.0, 1000.0, 1.0 * TICK)) == 1
    assert controller.update(Tick(TICK, 1.0, 1000.0, 0.6 * TICK)) == 2
    controller.restart()
    assert controller.update(Tick(TICK, 2.0, 700.0, 0.6 * TICK)) == 3
    assert controller.update(Tick(TICK, 3.0, 700.0, 0.6 * TICK)) == 6


def test_without_a_restart_the_same_fall_undoes_the_growth() -> None:
    """The same ticks with no helpers starting: the growth bought neither CPU nor
    work, so it is undone."""
    controller = Controller(Concurrency(1, 1, 16))
    assert controller.update(Tick(TICK, 1.0, 1000.0, 1.0 * TICK)) == 1
    assert controller.update(Tick(TICK, 1.0, 1000.0, 0.6 * TICK)) == 2
    assert controller.update(Tick(TICK, 2.0, 700.0, 0.6 * TICK)) == 1
