"""From samples to outcomes: one :class:`Outcome` per (filesystem, fileset, mode, tool).

Invariant: a wrong copy is a failure, never a time. An outcome with any failed
sample has ``wall`` (and ``cpu``, ``rss_mib``) set to ``None`` and carries the first
problem, so no table, ratio, target or plot can use its times. Only outcomes whose
every run verified get spreads.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from benchmarks.harness.results import Mode, Results, Sample
from benchmarks.harness.stats import Spread, spread

Key = tuple[str, str, Mode, str]  # fs, fileset, mode, tool
CONFIRMED = "confirmed"
"""``results.meta[CONFIRMED]["fs/fileset/mode"]``: the fixed setting a scenario's
confirmation rounds re-ran beside rcp automatic."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the runs of one tool in one scenario add up to."""

    runs: int
    failures: int
    problem: str  # the first failure's problem, "" when none failed
    wall: Spread | None  # seconds; None when any run failed
    cpu: Spread | None  # user + system seconds
    rss_mib: Spread | None  # peak resident set, MiB
    shared_fraction: float | None  # smallest reflink share seen, when measured
    load1: Spread | None
    source_cpu: Spread | None = None  # a remote copy's source daemon, when every run
    source_rss_mib: Spread | None = None  # reported it (rcp's --summary-json)

    @property
    def ok(self) -> bool:
        """Every run exited 0 and verified."""
        return self.failures == 0 and self.wall is not None


def outcome(samples: list[Sample]) -> Outcome:
    """Fold the samples of one scenario and tool (at least one) into an outcome."""
    failed = [s for s in samples if not s.ok]
    shares = [s.shared_fraction for s in samples if s.shared_fraction is not None]
    good = not failed
    source_cpu = [s.source_cpu_s for s in samples if s.source_cpu_s is not None]
    source_rss = [
        s.source_maxrss_kib / 1024 for s in samples if s.source_maxrss_kib is not None
    ]
    sourced = good and len(source_cpu) == len(source_rss) == len(samples)
    return Outcome(
        runs=len(samples),
        failures=len(failed),
        problem=failed[0].problem if failed else "",
        wall=spread(s.wall_s for s in samples) if good else None,
        cpu=spread(s.cpu_s for s in samples) if good else None,
        rss_mib=spread(s.maxrss_kib / 1024 for s in samples) if good else None,
        shared_fraction=min(shares) if shares else None,
        load1=spread(s.load1 for s in samples),
        source_cpu=spread(source_cpu) if sourced else None,
        source_rss_mib=spread(source_rss) if sourced else None,
    )


def outcomes(results: Results) -> dict[Key, Outcome]:
    """Every scenario x tool that has samples."""
    groups: dict[Key, list[Sample]] = defaultdict(list)
    for s in results.samples:
        groups[(s.fs, s.fileset, s.mode, s.tool)].append(s)
    return {key: outcome(group) for key, group in groups.items()}


def scenarios(results: Results) -> list[tuple[str, str, Mode]]:
    """(fs, fileset, mode) triples with samples, in the order first measured."""
    return list(dict.fromkeys((s.fs, s.fileset, s.mode) for s in results.samples))


def cells(results: Results) -> list[tuple[str, str]]:
    """(fs, fileset) pairs with samples, in the order first measured."""
    return list(dict.fromkeys((s.fs, s.fileset) for s in results.samples))


@dataclass(frozen=True, slots=True)
class AutoVsBest:
    """rcp automatic against the best fixed ``--max-workers`` in one scenario."""

    fs: str
    fileset: str
    mode: Mode
    auto: Spread
    best_tool: str
    best_workers: int
    best: Spread

    @property
    def ratio(self) -> float:
        """auto median / best fixed median (1.0 = as fast; > 1 = auto slower)."""
        return (
            self.auto.median / self.best.median
            if self.best.median > 0
            else float("inf")
        )


def best_fixed(
    results: Results,
    key: tuple[str, str, Mode],
    table: dict[Key, Outcome] | None = None,
) -> str | None:
    """The fixed ``--max-workers`` tool with the lowest verified median in ``key``.

    Once the runner confirmed a scenario (re-ran rcp automatic beside the best fixed
    setting, :func:`benchmarks.harness.runner.run`), the confirmed tool stays the best:
    picking the minimum again after the confirmation would favour whichever setting
    did not get the extra runs (the winner's curse the confirmation corrects).
    """
    confirmed = results.meta.get(CONFIRMED, {}).get("/".join(key))
    if confirmed is not None:
        return str(confirmed)
    table = outcomes(results) if table is None else table
    candidates = [
        (o.wall.median, t.id)
        for t in results.tools
        if t.family == "rcp" and t.workers
        if (o := table.get((*key, t.id))) is not None and o.wall is not None
    ]
    return min(candidates)[1] if candidates else None


def auto_vs_best(results: Results, auto_tool: str = "rcp_auto") -> list[AutoVsBest]:
    """One row per scenario where rcp auto and at least one fixed setting verified."""
    table = outcomes(results)
    workers = {t.id: t.workers or 0 for t in results.tools}
    rows: list[AutoVsBest] = []
    for key in scenarios(results):
        auto = table.get((*key, auto_tool))
        best_tool = best_fixed(results, key, table)
        if auto is None or auto.wall is None or best_tool is None:
            continue
        best = table.get((*key, best_tool))
        if best is None or best.wall is None:
            continue
        rows.append(
            AutoVsBest(*key, auto.wall, best_tool, workers[best_tool], best.wall)
        )
    return rows
