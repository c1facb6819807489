"""The speed targets of issues 3, 5, 6 and 7, checked against a run's results.

Issue 3's copy targets, the Airflow operator's (5) and fsspec's (6) are here; issue
7's tree chores (removal, content comparison) are in :mod:`.chores` and copies between
hosts in :mod:`.remote`, each with its own thresholds, both using the row helpers here
(:func:`verified_pair`, :func:`scaled_row`, ...).

Each target becomes one or more :class:`TargetResult` rows: met or missed (with the
margin), "(scaled down)" when measured below the target's scale (indicative only), or
not measured (with the reason: the cell was not in the plan, or a tool failed). Rows
carry CPU evidence (CPU seconds per wall second) so a miss can be read as CPU-bound
or waiting.

Invariants: thresholds are named constants, measured values come only from
verified outcomes (:mod:`.aggregate`), and a target is never "met" from a failed or
missing measurement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final, Literal

from benchmarks.harness.aggregate import (
    AutoVsBest,
    Key,
    Outcome,
    auto_vs_best,
    outcomes,
)
from benchmarks.harness.filesets import FILESETS, GiB
from benchmarks.harness.results import MODES, Mode, Results
from benchmarks.harness.stats import Spread

Status = Literal[
    "met", "missed", "not measured", "met (scaled down)", "missed (scaled down)"
]
AUTO: Final = "rcp_auto"
PARALLEL_CP: Final = "cp_par8"

LABELS: Final = {
    "cp_r": "cp -r",
    "cp_a": "cp -a",
    "rsync_a": "rsync -a",
    "shutil": "shutil",
    "fsspec": "fsspec",
    PARALLEL_CP: "parallel cp",
}
SMALL_MIN_FILES: Final = 50_000
SMALL_VS_CP_R: Final = 1.0
SMALL_VS_RSYNC: Final = 0.6
SMALL_VS_PYTHON: Final = 0.5
LARGE_VS_CP: Final = 1.05
FIXED_COST_FILESET: Final = "tiny"
"""Copied by every tool to measure its fixed cost (start-up and exit)."""
REFLINK_SECONDS: Final = 0.5
REFLINK_BYTES: Final = 4 * GiB
REFLINK_SHARED: Final = 0.99
FUSE_SPEEDUP: Final = 8.0
LINUX_VS_CP_A: Final = 1.0
AUTO_VS_BEST: Final = 1.10
MEMORY_GROWTH: Final = 1.5
HOOKS_OVERHEAD: Final = 1.03
OPERATOR: Final = "rcp_operator"
OBJECT_STORAGE: Final = "airflow"
OPERATOR_SPEEDUP: Final = 5.0
FSSPEC_RCP: Final = "fsspec_rcp"
FSSPEC_SPEEDUP: Final = {"ext4": 2.0, "fuse": 8.0}
FSSPEC_PLACES: Final = {"ext4": "ext4", "fuse": "the latency FUSE"}
HOOKS: Final = "rcp_hooks"
NO_HOOKS: Final = "rcp_nohooks"


@dataclass(frozen=True, slots=True)
class TargetResult:
    """One checked target (or one scenario of a target)."""

    target: str
    scenario: str
    measured: str
    status: Status
    margin: str
    evidence: str = ""


def check(results: Results) -> list[TargetResult]:
    """Every copy target on one host: issue 3's in the issue's order, then issue 5's
    and 6's (the chores': :func:`.chores.targets`)."""
    table = outcomes(results)
    rows: list[TargetResult] = []
    for fn in (
        _small_files,
        _large_files,
        _reflink,
        _fuse,
        _linux,
        _auto,
        _memory,
        _hooks,
        _operator,
        _fsspec,
    ):
        rows.extend(fn(results, table))
    return rows


Table = dict[Key, Outcome]


def _files(results: Results, fileset: str) -> int:
    info = results.fileset(fileset)
    return info.files if info else 0


def _bytes(results: Results, fileset: str) -> int:
    info = results.fileset(fileset)
    return info.bytes if info else 0


def _measured(results: Results, fs: str, pick: Callable[[str], bool]) -> list[str]:
    return list(
        dict.fromkeys(
            s.fileset for s in results.samples if s.fs == fs and pick(s.fileset)
        )
    )


def absent_row(target: str, scenario: str, why: str) -> TargetResult:
    return TargetResult(target, scenario, "-", "not measured", why)


def margin_text(value: float, limit: float, ok: bool) -> str:
    """``within 12% of 1.05x`` / ``missed by 7% of 1.05x``."""
    verdict = "within" if ok else "missed by"
    return f"{verdict} {abs(value / limit - 1) * 100:.0f}% of {limit:g}x"


def cpu_note(label: str, o: Outcome | None) -> str:
    if o is None or o.wall is None or o.cpu is None or o.wall.median <= 0:
        return ""
    return f"{label} {o.cpu.median / o.wall.median:.2f} CPU-s/s"


def verified_pair(
    table: Table, key: tuple[str, str, Mode], tool: str, reference: str
) -> tuple[Spread, Spread, Outcome, Outcome] | str:
    """Both verified wall spreads (and outcomes), or why they are not there."""
    fs, fileset, mode = key
    found = []
    for name in (tool, reference):
        o = table.get((fs, fileset, mode, name))
        if o is None:
            return f"{name} did not run"
        if o.wall is None:
            return f"{name} failed: {o.problem}"
        found.append((o.wall, o))
    (mine, mine_o), (ref, ref_o) = found
    return mine, ref, mine_o, ref_o


def ratio_row(
    target: str,
    scenario: str,
    table: Table,
    key: tuple[str, str, Mode],
    tool: str,
    reference: str,
    limit: float,
    *,
    strict: bool = False,
    ref_label: str = "",
    note: str = "",
    label: str = "rcp",
) -> TargetResult:
    """``tool / reference`` wall-time ratio against ``limit`` (<=, or < if strict);
    ``label`` names ``tool`` in the CPU evidence."""
    pair = verified_pair(table, key, tool, reference)
    if isinstance(pair, str):
        return TargetResult(target, scenario, "-", "not measured", pair)
    mine, ref, mine_o, ref_o = pair
    ref_label = ref_label or LABELS.get(reference, reference)
    r = mine.median / ref.median
    ok = r < limit if strict else r <= limit
    margin = margin_text(r, limit, ok)
    measured = f"{r:.2f}x {ref_label} ({mine.median:.3g} s vs {ref.median:.3g} s)"
    notes = (cpu_note(label, mine_o), cpu_note(ref_label, ref_o), note)
    status: Status = "met" if ok else "missed"
    return TargetResult(
        target, scenario, measured, status, margin, "; ".join(x for x in notes if x)
    )


def _small_files(results: Results, table: Table) -> list[TargetResult]:
    target = "1 KiB files (>= 50k), ext4, warm: <= 1.0x cp -r"
    candidates = _measured(results, "ext4", lambda f: f.startswith("1k_"))
    if not candidates:
        return [absent_row(target, "ext4 1k warm", "no 1k fileset on ext4")]
    fileset = max(candidates, key=lambda f: _files(results, f))
    files = _files(results, fileset)
    note = "" if files >= SMALL_MIN_FILES else f"only {files:,} files (target: 50,000)"
    key: tuple[str, str, Mode] = ("ext4", fileset, "warm")
    scenario = f"ext4 {fileset} warm"
    rows = [ratio_row(target, scenario, table, key, AUTO, "cp_r", SMALL_VS_CP_R)]
    for ref, limit, strict in (
        ("rsync_a", SMALL_VS_RSYNC, False),
        ("shutil", SMALL_VS_PYTHON, True),
        ("fsspec", SMALL_VS_PYTHON, True),
    ):
        name = LABELS[ref]
        label = f"  (same cell: {'<' if strict else 'about'} {limit:g}x {name})"
        rows.append(
            ratio_row(label, scenario, table, key, AUTO, ref, limit, strict=strict)
        )
    return [scaled_row(r, note) for r in rows]


def scaled_row(row: TargetResult, note: str) -> TargetResult:
    """Mark a row measured below the target's scale: indicative, not the target."""
    if not note or row.status == "not measured":
        return row
    status: Status = (
        "missed (scaled down)" if row.status == "missed" else "met (scaled down)"
    )
    return replace(row, status=status, margin=f"{row.margin}; {note}")


def _large(fileset: str) -> bool:
    return fileset in FILESETS and FILESETS[fileset].large


def _large_files(results: Results, table: Table) -> list[TargetResult]:
    target = "Large files, ext4: <= 1.05x cp"
    found = _measured(results, "ext4", _large)
    if not found:
        return [absent_row(target, "ext4 large", "no large-file fileset on ext4")]
    return [
        ratio_row(
            target,
            f"ext4 {f} {m}",
            table,
            ("ext4", f, m),
            AUTO,
            "cp_r",
            LARGE_VS_CP,
            note=_fixed_cost(table, ("ext4", f, m)),
        )
        for f in found
        for m in MODES
        if ("ext4", f, m, AUTO) in table
    ]


def _fixed_cost(table: Table, key: tuple[str, str, Mode]) -> str:
    """rcp's and cp's time for a tiny tree (the floor under a short copy), and the
    cell's times less it: how much of a miss is start-up and how much the copy."""
    floor = _walls(table, ("ext4", FIXED_COST_FILESET, "warm"))
    if floor is None:
        return ""
    text = (
        f"fixed cost ({FIXED_COST_FILESET} tree): rcp {floor[0]:.3g} s, "
        f"cp -r {floor[1]:.3g} s"
    )
    cell = _walls(table, key)
    if cell is None:
        return text
    rcp, cp = (wall - fixed for wall, fixed in zip(cell, floor, strict=True))
    if rcp <= 0 or cp <= 0:
        return text
    return f"{text}; less it: rcp {rcp:.3g} s, cp -r {cp:.3g} s ({rcp / cp:.2f}x)"


def _walls(table: Table, key: tuple[str, str, Mode]) -> tuple[float, float] | None:
    """rcp's and cp -r's median wall times in one cell, if both verified."""
    pair = verified_pair(table, key, AUTO, "cp_r")
    if isinstance(pair, str):
        return None
    return pair[0].median, pair[1].median


def _reflink(results: Results, table: Table) -> list[TargetResult]:
    target = "XFS reflink: 4 x 1 GiB reflinked in < 0.5 s"
    found = _measured(results, "xfs", _large)
    if not found:
        return [absent_row(target, "xfs large", "no large-file fileset on XFS")]
    rows = []
    for fileset in sorted(found, key=lambda f: -_bytes(results, f)):
        for mode in MODES:
            o = table.get(("xfs", fileset, mode, AUTO))
            scenario = f"xfs {fileset} {mode}"
            if o is None:
                continue
            if o.wall is None:
                rows.append(absent_row(target, scenario, f"rcp failed: {o.problem}"))
                continue
            shared = o.shared_fraction
            reflinked = shared is not None and shared >= REFLINK_SHARED
            size = _bytes(results, fileset)
            seconds = o.wall.median
            shown = "?" if shared is None else f"{shared:.0%}"
            measured = f"{seconds:.3g} s, {shown} of the bytes shared with the source"
            ok = seconds < REFLINK_SECONDS and reflinked
            margin = f"{seconds / REFLINK_SECONDS:.2f}x of the 0.5 s limit"
            if not reflinked:
                margin += "; not reflinked"
            scale = "" if size >= REFLINK_BYTES else f"only {size / GiB:.2g} GiB"
            status: Status = "met" if ok else "missed"
            row = TargetResult(target, scenario, measured, status, margin)
            rows.append(scaled_row(row, scale))
    return rows


def _fuse(results: Results, table: Table) -> list[TargetResult]:
    target = (
        "Latency FUSE (0.5 ms/op), 1 KiB and 1 MiB: >= 8x faster than cp -r, "
        "faster than parallel cp"
    )
    found = _measured(results, "fuse", lambda f: f.startswith(("1k_", "1m_")))
    if not found:
        return [absent_row(target, "fuse", "no 1k/1m fileset on the FUSE fs")]
    rows = []
    for fileset in found:
        for mode in MODES:
            key: tuple[str, str, Mode] = ("fuse", fileset, mode)
            if ("fuse", fileset, mode, AUTO) not in table:
                continue
            scenario = f"fuse {fileset} {mode}"
            vs_cp = verified_pair(table, key, AUTO, "cp_r")
            vs_par = verified_pair(table, key, AUTO, PARALLEL_CP)
            if isinstance(vs_cp, str) or isinstance(vs_par, str):
                why = vs_cp if isinstance(vs_cp, str) else str(vs_par)
                rows.append(TargetResult(target, scenario, "-", "not measured", why))
                continue
            mine, cp_r, mine_o, _ = vs_cp
            par = vs_par[1]
            speedup, over_par = cp_r.median / mine.median, par.median / mine.median
            ok = speedup >= FUSE_SPEEDUP and over_par > 1.0
            measured = (
                f"{speedup:.1f}x faster than cp -r, {over_par:.2f}x than parallel cp "
                f"({mine.median:.3g} s vs {cp_r.median:.3g} s and {par.median:.3g} s)"
            )
            margin = (
                f"speed-up {speedup / FUSE_SPEEDUP:.2f} of the 8x asked; "
                f"{'faster' if over_par > 1 else 'slower'} than parallel cp "
                f"by {abs(over_par - 1) * 100:.0f}%"
            )
            status: Status = "met" if ok else "missed"
            rows.append(
                TargetResult(
                    target, scenario, measured, status, margin, cpu_note("rcp", mine_o)
                )
            )
    return rows


def _linux(results: Results, table: Table) -> list[TargetResult]:
    target = "Linux source tree, ext4, warm: <= 1.0x cp -a"
    key: tuple[str, str, Mode] = ("ext4", "linux", "warm")
    if ("ext4", "linux", "warm", AUTO) not in table:
        return [absent_row(target, "ext4 linux warm", "cell not in this run")]
    return [
        ratio_row(target, "ext4 linux warm", table, key, AUTO, "cp_a", LINUX_VS_CP_A)
    ]


def _auto(results: Results, table: Table) -> list[TargetResult]:
    target = "Automatic within 10% of the best fixed setting, every scenario"
    rows = auto_vs_best(results)
    if not rows:
        return [
            absent_row(target, "all", "no scenario with rcp auto and a fixed setting")
        ]
    misses = [r for r in rows if r.ratio > AUTO_VS_BEST]
    worst = max(rows, key=lambda r: r.ratio)
    measured = (
        f"{len(rows) - len(misses)} of {len(rows)} scenarios within 10%; worst "
        f"{worst.fs} {worst.fileset} {worst.mode}: {worst.ratio:.2f}x best "
        f"(--max-workers {worst.best_workers})"
    )
    missed = ", ".join(f"{r.fs} {r.fileset} {r.mode} ({r.ratio:.2f}x)" for r in misses)
    margin = f"missed in: {missed}" if misses else "all within"
    status: Status = "missed" if misses else "met"
    evidence = "; ".join(_cpu_pair(table, r) for r in misses)
    return [TargetResult(target, "all measured", measured, status, margin, evidence)]


def _cpu_pair(table: Table, row: AutoVsBest) -> str:
    """CPU seconds of auto and of the best fixed setting in a missed scenario: equal
    CPU with more wall time means auto waited (too few in flight); more CPU means it
    did work the fixed setting did not (threads or helper processes started)."""
    key = (row.fs, row.fileset, row.mode)
    cpu = []
    for tool in (AUTO, row.best_tool):
        o = table.get((*key, tool))
        cpu.append(f"{o.cpu.median:.3g}" if o and o.cpu else "?")
    return (
        f"{row.fs} {row.fileset} {row.mode}: CPU {cpu[0]} s auto vs {cpu[1]} s "
        f"--max-workers {row.best_workers}"
    )


def _memory(results: Results, table: Table) -> list[TargetResult]:
    target = "Memory: peak RSS grows < 1.5x from 100k to 1M files"
    probes = [
        (f, o.rss_mib)
        for (_, f, _, tool), o in table.items()
        if tool == AUTO and f.startswith("empty_") and o.rss_mib is not None
    ]
    if len(probes) < 2:
        return [absent_row(target, "empty files", "needs two empty-file filesets")]
    probes.sort(key=lambda p: _files(results, p[0]))
    (small, rss_small), (large, rss_large) = probes[0], probes[-1]
    growth = rss_large.median / rss_small.median
    n_small, n_large = _files(results, small), _files(results, large)
    ok = growth < MEMORY_GROWTH
    measured = (
        f"{rss_small.median:.0f} MiB at {n_small:,} files -> "
        f"{rss_large.median:.0f} MiB at {n_large:,} files ({growth:.2f}x)"
    )
    scale = ""
    if n_small < 100_000 or n_large < 1_000_000:
        scale = f"scaled down ({n_small:,} -> {n_large:,} files)"
    status: Status = "met" if ok else "missed"
    row = TargetResult(
        target,
        f"{small} -> {large}",
        measured,
        status,
        margin_text(growth, MEMORY_GROWTH, ok),
        "rcp (Rust) used about 95 MiB for 1M files",
    )
    return [scaled_row(row, scale)]


def _hooks(results: Results, table: Table) -> list[TargetResult]:
    target = "Built-in hooks only: < 3% slower than with hooks bypassed"
    keys = sorted(
        {(fs, fileset, mode) for fs, fileset, mode, tool in table if tool == HOOKS}
    )
    if not keys:
        return [absent_row(target, "-", "no cell ran rcp_hooks and rcp_nohooks")]
    return [
        ratio_row(
            target,
            f"{fs} {fileset} {mode}",
            table,
            (fs, fileset, mode),
            HOOKS,
            NO_HOOKS,
            HOOKS_OVERHEAD,
            strict=True,
            ref_label="hooks bypassed",
            note="same script and engine; only the plugin layer differs",
        )
        for fs, fileset, mode in keys
    ]


def speedup_row(
    target: str,
    table: Table,
    key: tuple[str, str, Mode],
    tool: str,
    reference: str,
    limit: float,
    labels: tuple[str, str],
    note: str,
) -> TargetResult:
    """``reference / tool`` wall-time speed-up against ``limit`` (>=)."""
    scenario = " ".join(key)
    pair = verified_pair(table, key, tool, reference)
    if isinstance(pair, str):
        return TargetResult(target, scenario, "-", "not measured", pair)
    mine, theirs, mine_o, theirs_o = pair
    speedup = theirs.median / mine.median
    return TargetResult(
        target,
        scenario,
        f"{speedup:.1f}x faster ({mine.median:.3g} s vs {theirs.median:.3g} s)",
        "met" if speedup >= limit else "missed",
        f"speed-up {speedup / limit:.2f} of the {limit:g}x asked",
        "; ".join((cpu_note(labels[0], mine_o), cpu_note(labels[1], theirs_o), note)),
    )


def _operator(results: Results, table: Table) -> list[TargetResult]:
    """Issue 5: Airflow's RcpCopyOperator against ObjectStoragePath.copy, both in a
    fresh process with Airflow imported, on the 1 KiB sets."""
    target = (
        "Airflow: RcpCopyOperator >= 5x faster than ObjectStoragePath.copy "
        "(recursive) on 1 KiB files, keeping mode and times"
    )
    rows = [
        speedup_row(
            target,
            table,
            (fs, fileset, mode),
            OPERATOR,
            OBJECT_STORAGE,
            OPERATOR_SPEEDUP,
            ("operator", "ObjectStoragePath"),
            "the operator keeps mode and times (tests/operators); "
            "ObjectStoragePath drops them (fsspec's copy)",
        )
        for fs, fileset, mode, tool in sorted(table)
        if tool == OPERATOR and fileset.startswith("1k_")
    ]
    return rows or [
        absent_row(target, "1k sets", "no 1k cell with the operator in this run")
    ]


def _fsspec(results: Results, table: Table) -> list[TargetResult]:
    """Issue 6: ``fsspec.filesystem("rcp").copy`` against ``fsspec.filesystem("file")
    .copy``, recursive, same venv and call, on the 1 KiB and Linux trees."""
    rows = []
    for fs, fileset, mode, tool in sorted(table):
        limit = FSSPEC_SPEEDUP.get(fs)
        if tool != FSSPEC_RCP or limit is None:
            continue
        if not (fileset.startswith("1k_") or fileset == "linux"):
            continue
        target = (
            f"fsspec: filesystem('rcp').copy >= {limit:g}x faster than "
            f"filesystem('file').copy on {FSSPEC_PLACES[fs]}, keeping modes and times"
        )
        rows.append(
            speedup_row(
                target,
                table,
                (fs, fileset, mode),
                FSSPEC_RCP,
                "fsspec",
                limit,
                ("fsspec rcp", "fsspec file"),
                "rcp keeps mode and times (verified like rcp's); fsspec's local "
                "copy drops them",
            )
        )
    return rows or [
        absent_row(
            "fsspec: filesystem('rcp').copy against filesystem('file').copy",
            "1k and linux sets",
            "no cell with fsspec_rcp in this run",
        )
    ]
