"""The object-store benchmark's report (``stores.md``): issue 26's targets, then a
table a cell (:mod:`benchmarks.stores`).

Targets, rcp against the peers in the same run:

- up and down, small and large files: no more requests a file than ``s3fs`` and
  ``rclone copy`` (directory markers, one a directory, allowed: an upload's writes
  of them, a download's HEADs of them; the peers keep no directories' metadata),
  wall time at most ``s3fs``'s and below ``rclone``'s;
- an unchanged rerun: no request moving object data, and no HEAD an object (at most
  one a directory, for its marker, and two more);
- a rerun after touching 1% of the files: exactly those uploaded;
- S3 to GCS: at least 5x as fast as ``ObjectStoragePath.copy``;
- within one bucket: no object data through the client (server-side copies);
- listing a flat prefix of a million objects (a dry run): peak RSS within 1.5x of
  listing a tenth as many.

Invariants: figures come only from ``ok`` runs (exit 0 and the copy verified byte
for byte); a target with no ok run on either side is ``not measured``, never met
(the harness's :class:`~benchmarks.harness.targets.TargetResult` and its words); a
median of an even count is the mean of the middle two; a missing figure prints ``-``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from benchmarks.harness.markdown import md_table, num, span
from benchmarks.harness.stats import Spread, spread
from benchmarks.harness.targets import Status, TargetResult
from benchmarks.storeproxy import Kind
from benchmarks.stores import CELLS, Cell, MiB, Report, Run, Scale

ACROSS_SPEEDUP = 5.0
CORES = os.cpu_count() or 1
"""The cores a report whose runs did not record theirs is taken to have had."""
LISTED_RSS = 1.5
DATA = (Kind.PUT, Kind.PART, Kind.START, Kind.COMMIT, Kind.GET)
"""Requests that move object data through the client (a server-side COPY does not)."""


@dataclass(frozen=True)
class Figures:
    """A tool's ok runs in a cell, as medians."""

    runs: int
    failures: int
    problem: str
    wall: Spread | None
    requests: dict[str, float]
    sent: float
    received: float
    emulator_cpu: float
    proxy_cpu: float
    cpu: float
    rss_mib: float

    def of(self, *kinds: Kind) -> float:
        return sum(self.requests.get(kind.value, 0.0) for kind in kinds)

    @property
    def total(self) -> float:
        return sum(self.requests.values())


def _median(values: Sequence[float]) -> float:
    return spread(values).median if values else 0.0


def figures(report: Report, cell: str, tool: str) -> Figures | None:
    """``tool``'s figures in ``cell``; ``None`` where it never ran."""
    runs = [r for r in report.runs if r.cell == cell and r.tool == tool]
    if not runs:
        return None
    ok = [r for r in runs if r.ok]
    failed = [r for r in runs if not r.ok]
    kinds = {k for r in ok for k in r.requests}

    def med(value: Callable[[Run], float]) -> float:
        return _median([value(r) for r in ok])

    return Figures(
        runs=len(runs),
        failures=len(failed),
        problem=failed[0].problem if failed else "",
        wall=spread(r.wall_s for r in ok) if ok else None,
        requests={k: _median([r.requests.get(k, 0) for r in ok]) for k in kinds},
        sent=med(lambda r: r.sent),
        received=med(lambda r: r.received),
        emulator_cpu=med(lambda r: r.emulator_cpu_s),
        proxy_cpu=med(lambda r: r.proxy_cpu_s),
        cpu=med(lambda r: r.cpu_s),
        rss_mib=med(lambda r: r.maxrss_kib / 1024),
    )


def _result(
    scenario: str,
    target: str,
    measured: str = "-",
    ok: bool | None = None,
    missed_because: str = "",
) -> TargetResult:
    """A target's row as the harness's reports give it: ``not measured`` where a
    side has no verified run (``ok`` is ``None``); a missed one says what was
    measured to miss it (``missed_because``)."""
    status: Status = "not measured" if ok is None else "met" if ok else "missed"
    why = "no verified run on a side" if ok is None else "" if ok else missed_because
    return TargetResult(target, scenario, measured, status, why)


def _extra_requests(ours: Figures, theirs: Figures) -> str:
    """The kinds of request rcp made more (and fewer) of than a peer, by count."""
    kinds = sorted(ours.requests.keys() | theirs.requests.keys())
    deltas = {k: ours.requests.get(k, 0.0) - theirs.requests.get(k, 0.0) for k in kinds}
    more = ", ".join(f"+{d:.0f} {k.upper()}" for k, d in deltas.items() if d > 0)
    fewer = ", ".join(f"{d:.0f} {k.upper()}" for k, d in deltas.items() if d < 0)
    return f"rcp made {more or 'none more'}" + (f"; {fewer}" if fewer else "")


def _cpu_bound(ours: Figures, theirs: Figures, wall: float, cores: int) -> str:
    """How busy the machine's cores were during rcp's run, and the tools' own CPU:
    the emulator, the proxy and the tool share the cores here."""
    used = ours.cpu + ours.emulator_cpu + ours.proxy_cpu
    return (
        f"{cores} cores {used / (cores * wall):.0%} busy in rcp's run (tool "
        f"{num(ours.cpu)} + emulator {num(ours.emulator_cpu)} + proxy "
        f"{num(ours.proxy_cpu)} CPU-s); tool CPU {num(ours.cpu)} s vs "
        f"{num(theirs.cpu)} s"
    )


def _ran(report: Report, cell: str, tool: str) -> tuple[Figures, Spread] | None:
    """``tool``'s figures in ``cell`` and its wall times, where a run was ok."""
    found = figures(report, cell, tool)
    if found is None or found.wall is None or cell not in report.trees:
        return None
    return found, found.wall


def _versus_peers(report: Report, cell: Cell) -> Iterator[TargetResult]:
    """Requests a file and wall time, rcp against each peer (directory markers,
    one a directory, not counted against it: an upload's writes, a download's
    HEADs)."""
    for peer in ("s3fs", "rclone"):
        requests = f"requests a file, rcp <= {peer}"
        wall = f"wall, rcp {'<=' if peer == 's3fs' else '<'} {peer}"
        ours, theirs = _ran(report, cell.id, "rcp"), _ran(report, cell.id, peer)
        if ours is None or theirs is None:
            yield from (_result(cell.title, requests), _result(cell.title, wall))
            continue
        tree = report.trees[cell.id]
        markers = tree["directories"]
        if cell.direction != "up":
            markers = min(markers, round(ours[0].of(Kind.HEAD)))
        mine = (ours[0].total - markers) / tree["files"]
        peers = theirs[0].total / tree["files"]
        read = "markers" if cell.direction == "up" else "marker reads"
        shown = f"{mine:.4f} vs {peers:.4f}" + (f" (+{markers} {read})" * bool(markers))
        extra = _extra_requests(ours[0], theirs[0])
        yield _result(cell.title, requests, shown, mine <= peers, extra)
        a, b = ours[1].median, theirs[1].median
        yield _result(
            cell.title,
            wall,
            f"{num(a)} s vs {num(b)} s ({a / b:.2f}x)",
            a <= b if peer == "s3fs" else a < b,
            _cpu_bound(ours[0], theirs[0], a, report.meta.get("cores", CORES)),
        )


def _rerun(report: Report) -> TargetResult:
    scenario, target = "Unchanged rerun", "no data request, HEAD <= directories + 2"
    if (ran := _ran(report, "rerun", "rcp")) is None:
        return _result(scenario, target)
    tree, heads = report.trees["rerun"], ran[0].of(Kind.HEAD)
    data = ran[0].of(*DATA, Kind.COPY)  # a COPY rewrites an object (its metadata)
    return _result(
        scenario,
        target,
        f"{data:.0f} data, {heads:.0f} HEAD ({tree['files']:,} files, "
        f"{tree['directories']} directories)",
        data == 0 and heads <= tree["directories"] + 2,
    )


def _touched(report: Report) -> TargetResult:
    scenario, target = "Rerun after touching 1%", "exactly those uploaded"
    if (ran := _ran(report, "touched", "rcp")) is None:
        return _result(scenario, target)
    want, puts = report.trees["touched"]["touched"], ran[0].of(Kind.PUT, Kind.START)
    return _result(
        scenario, target, f"{puts:.0f} uploads of {want} touched", puts == want
    )


def _across(report: Report) -> TargetResult:
    scenario = "S3 to GCS"
    target = f">= {ACROSS_SPEEDUP:.0f}x as fast as ObjectStoragePath.copy"
    ours, theirs = _ran(report, "across", "rcp"), _ran(report, "across", "osp")
    if ours is None or theirs is None:
        return _result(scenario, target)
    a, b = ours[1].median, theirs[1].median
    return _result(
        scenario,
        target,
        f"{b / a:.1f}x ({num(a)} s vs {num(b)} s)",
        b / a >= ACROSS_SPEEDUP,
    )


def _within(report: Report) -> TargetResult:
    """No GET and no body sent: the objects are copied by the store (a directory
    marker is an empty PUT)."""
    scenario, target = "Within one bucket", "no object data through the client"
    if (ran := _ran(report, "within", "rcp")) is None:
        return _result(scenario, target)
    found = ran[0]
    return _result(
        scenario,
        target,
        f"{found.of(Kind.GET):.0f} GET, {found.sent:.0f} bytes sent, "
        f"{found.of(Kind.COPY):.0f} COPY",
        found.of(Kind.GET) == 0 and found.sent == 0,
    )


def _listing(report: Report) -> TargetResult:
    """rcp's peak RSS listing the whole prefix against listing a tenth as many."""
    scenario, target = "Listing 1M objects", f"peak RSS within {LISTED_RSS}x of 100k's"
    all_, tenth = (
        _ran(report, "listing", "rcp_all"),
        _ran(report, "listing", "rcp_tenth"),
    )
    if all_ is None or tenth is None:
        return _result(scenario, target)
    a, b = all_[0].rss_mib, tenth[0].rss_mib
    objects = report.trees["listing"]
    return _result(
        scenario,
        target,
        f"{num(a)} MiB vs {num(b)} MiB ({a / b:.2f}x; {objects['files']:,} vs "
        f"{objects['files_rcp_tenth']:,} objects)",
        a <= LISTED_RSS * b,
    )


def targets(report: Report) -> list[TargetResult]:
    """Each target of the module docstring, from ``report``'s ok runs."""
    return [
        *(
            t
            for c in CELLS
            if c.direction in ("up", "down")
            for t in _versus_peers(report, c)
        ),
        _rerun(report),
        _touched(report),
        _across(report),
        _within(report),
        _listing(report),
    ]


def _kinds(f: Figures) -> str:
    return (
        ", ".join(
            f"{f.requests[k]:.0f} {k.upper()}"
            for k in sorted(f.requests)
            if f.requests[k]
        )
        or "-"
    )


def _row(label: str, f: Figures, files: int) -> list[str]:
    if f.wall is None:
        return [label, f"FAILED {f.failures}/{f.runs}: {f.problem}", *["-"] * 7]
    share = f.emulator_cpu / f.wall.median if f.wall.median > 0 else 0.0
    failed = f" ({f.failures}/{f.runs} FAILED: {f.problem})" if f.failures else ""
    return [
        label,
        span(f.wall) + failed,
        f"{f.total / files:.3f}",
        _kinds(f),
        f"{f.sent / MiB:.1f} / {f.received / MiB:.1f}",
        f"{num(f.emulator_cpu)} ({share:.0%})",
        num(f.proxy_cpu),
        num(f.cpu),
        num(f.rss_mib),
    ]


HEADER = (
    "tool",
    "wall s",
    "requests/file",
    "requests (median run)",
    "MiB sent / received",
    "emulator CPU s (of wall)",
    "proxy CPU s",
    "tool CPU s",
    "peak RSS MiB",
)


def render(report: Report) -> str:
    """The report's markdown."""
    meta = report.meta
    scale = Scale(**meta["scale"])
    lines = [
        "# Object stores: rcp beside s3fs, rclone and ObjectStoragePath",
        "",
        f"Run {meta['started']}, {meta['reps']} run{'s' * (meta['reps'] != 1)} a "
        "tool a cell, interleaved; "
        f"each request held {meta['delay_ms']:.0f} ms by the proxy (a real store's "
        "latency). S3 is moto's server as benchmarks/moto_emulator.py runs it "
        "(listing pages from a sorted index, a ranged GET reading its range alone, as "
        "a real store serves them; the runs before 2026-12-04 14:54 UTC but the "
        "listing cell's ran on moto's own server), GCS gcp-storage-emulator "
        "(benchmarks/objectstores.py), both on this machine's 2 cores with the tools: "
        "the emulator's CPU bounds every time here, so its seconds are shown beside "
        "each. The proxy streams each body through as it comes. "
        f"Trees: {scale.small_files:,} files of "
        f"{scale.small // 1024} KiB in {scale.dirs} directories; {scale.large_count} of "
        f"{scale.large // MiB} MiB; S3 to GCS {scale.dirs * scale.across_per_dir:,} files. "
        f"rclone: {meta['rclone']}. Made by `python -m benchmarks.stores` "
        "(benchmarks/README.md); every figure is a median of verified runs.",
        "",
        "## Targets",
        "",
        *md_table(
            ("target", "scenario", "measured", "status", "missed because (measured)"),
            (
                (t.target, t.scenario, t.measured, f"**{t.status}**", t.margin)
                for t in targets(report)
            ),
            right_from=5,
        ),
    ]
    for cell in CELLS:
        labels = {r.tool: r.label for r in report.runs if r.cell == cell.id}
        rows = []
        for tool, label in labels.items():
            f = figures(report, cell.id, tool)
            if f is not None:
                tree = report.trees[cell.id]
                rows.append(_row(label, f, tree.get(f"files_{tool}", tree["files"])))
        if rows:
            lines += ["", f"## {cell.title}", "", *md_table(HEADER, rows)]
    return "\n".join(lines) + "\n"
