"""``report.md``: the human-readable account of a run, computed from its :class:`Results`.

Sections: run, machine, versions, scale (filesets, filesystems, cells), method,
targets (issue 3's, the operator's, fsspec's and the tree chores'), the previous
build vs this one (only when it was measured: :mod:`.baseline`), automatic vs best
fixed, complete results (one table of copies per filesystem x fileset, like rcp's
"complete results"), tree chores (their tables: :mod:`.chores`), remote copies
(their setup, targets and tables: :mod:`.remote`), plots, skipped, noise.

Invariants: every number comes from the results (nothing typed in); a failed tool
shows ``FAILED`` with its reason and never a time; ratios are median / median
(``> 1`` means slower than the reference); missing values print as ``-``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness import baseline, chores, remote
from benchmarks.harness.aggregate import auto_vs_best, cells, outcomes
from benchmarks.harness.markdown import figures, md_table, ratio, span
from benchmarks.harness.results import MODES, Results
from benchmarks.harness.stats import spread
from benchmarks.harness.targets import check

MiB = 1024**2


def render(results: Results, plots: Sequence[str] = ()) -> str:
    """The whole report as markdown; ``plots`` are PNG file names next to it."""
    meta = results.meta
    lines = [f"# rcp benchmark: `{meta.get('profile', '?')}` run", ""]
    lines += _run_section(results)
    lines += _machine_section(results)
    lines += _versions_section(results)
    lines += _scale_section(results)
    lines += _method_section(results)
    lines += _targets_section(results)
    lines += baseline.section(results)
    lines += _auto_section(results, "auto_vs_best.png" in plots)
    lines += _complete_section(results)
    lines += chores.section(results)
    lines += remote.section(results)
    lines += _plots_section(plots)
    lines += _skipped_section(results)
    lines += _noise_section(results)
    return "\n".join(lines).rstrip() + "\n"


def write(results: Results, out: Path, plots: Sequence[str] = ()) -> Path:
    """Write ``out/report.md`` and return its path."""
    path = out / "report.md"
    path.write_text(render(results, plots), encoding="utf-8")
    return path


def _run_section(results: Results) -> list[str]:
    meta = results.meta
    samples = results.samples
    failed = sum(1 for s in samples if not s.ok)
    duration = meta.get("duration_s")
    took = f" ({float(duration) / 60:.1f} min)" if duration is not None else ""
    rounds = meta.get("confirm_reps")
    confirmed = f" then {rounds} confirmation rounds (Method)" if rounds else ""
    lines = [
        f"Profile `{meta.get('profile', '?')}`, {meta.get('reps', '?')} repetitions "
        f"per cell{confirmed}, started {meta.get('started', '?')}, "
        f"finished {meta.get('finished', 'not finished')}{took}.",
        f"Runs: {len(samples)} measured of {meta.get('planned_runs', '?')} planned; "
        f"{failed} failed (wrong copy, error or timeout: shown as FAILED, never as a "
        "time).",
    ]
    if any(s.rss_source != "time" for s in samples):
        lines.append(
            "Peak RSS: GNU time was missing, so RSS includes the harness's own image "
            "(install the `time` package)."
        )
    if meta.get("interrupted"):
        lines.append(
            f"**The run was interrupted ({meta['interrupted']}); results are partial.**"
        )
    if meta.get("command"):
        lines.append(f"Command: `{meta['command']}`.")
    return [*lines, ""]


def _machine_section(results: Results) -> list[str]:
    m = results.meta.get("machine", {})
    rows = [
        ("CPU", f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores"),
        ("Memory", f"{m.get('memory_gib', '?')} GiB"),
        ("Kernel", str(m.get("kernel", "?"))),
        ("OS", str(m.get("os", "?"))),
        ("Python", str(m.get("python", "?"))),
        (
            "Work disk",
            f"{m.get('work_fs', '?')} on {m.get('work_device', '?')} "
            f"({m.get('work_mount_options', '?')}), "
            f"journal: {m.get('work_ext4_journal', '?')}, "
            f"{m.get('work_free_gib', '?')} GiB free at start",
        ),
        ("Load at start", ", ".join(str(x) for x in m.get("load_at_start", [])) or "?"),
    ]
    return ["## Machine", "", *md_table(("", ""), rows, right_from=2), ""]


def _versions_section(results: Results) -> list[str]:
    rows = [(t.label, t.version or "-", t.command, t.note) for t in results.tools]
    return [
        "## Tools and versions",
        "",
        *md_table(("tool", "version", "command", "notes"), rows, 4),
        "",
    ]


def _scale_section(results: Results) -> list[str]:
    lines = [
        "## Scale",
        "",
        "Filesets (generated once per filesystem; content from a fixed seed):",
        "",
    ]
    rows = [
        (
            f.id,
            f.description,
            f"{f.files:,}",
            f"{f.dirs:,}",
            f"{f.symlinks:,}",
            f"{f.bytes / MiB:,.1f}",
            f"`{f.command}`",
        )
        for f in results.filesets
    ]
    lines += md_table(
        ("id", "what", "files", "dirs", "symlinks", "MiB", "made by"), rows, 2
    )
    lines += ["", "Filesystems:", ""]
    lines += md_table(
        ("name", "type", "how", "cold runs"),
        (
            (f.name, f.fstype, f.detail, "yes" if f.cold else "no (in memory)")
            for f in results.filesystems
        ),
        4,
    )
    planned = results.meta.get("cells", [])
    if planned:
        lines += ["", "Cells (filesystem x fileset) as planned:", ""]
        lines += md_table(
            ("fs", "fileset", "modes", "tools", "reps", "note"),
            (
                (
                    c["fs"],
                    c["fileset"],
                    ", ".join(c["modes"]),
                    str(len(c["tools"])),
                    str(c["reps"]),
                    c.get("note", ""),
                )
                for c in planned
            ),
            6,
        )
    return [*lines, ""]


def _method_section(results: Results) -> list[str]:
    reps = results.meta.get("reps", "?")
    return [
        "## Method",
        "",
        f"- A *round* runs every tool once, one after another, on one fileset in one "
        f"mode, each into a destination never used before; {reps} repetitions, the "
        "tool order rotated per repetition (noise hits all alike), the 1-minute load "
        "average recorded before each run. The round's copies are deleted together at "
        "its end, then `sync` and `echo 3 > /proc/sys/vm/drop_caches`. (Where a "
        "round's copies would not fit or hold much data, each is deleted after its "
        "run, with the same sync and drop, and a warm source is read again.)",
        "- *Confirmation rounds*: after its repetitions a cell runs "
        f"{results.meta.get('confirm_reps', 0)} more rounds of only the tools its "
        "targets compare: rcp automatic, the fixed `--max-workers` setting with the "
        "best median so far, and the targets' references (cp, fsspec, "
        "ObjectStoragePath, the engine without hooks). The best of eight settings by "
        "three noisy runs each is partly the luckiest; its fresh runs measure it "
        "again, and the comparison keeps the setting so confirmed (a tool's "
        "median is then over all its runs).",
        "- ext4 copies of many files go to a *fresh* ext4, made like the work disk "
        "(no journal), that is re-made empty where other filesystems delete copies. "
        "ext4 without a journal does not reuse an inode freed in the last 60 s (360 s "
        "while its inode-table block is dirty, as during a copy) and scans past each "
        "(`recently_deleted()`, fs/ext4/ialloc.c): a 50k-file copy right after earlier "
        "copies were deleted spent 45% of its CPU time there (perf), and the ratio "
        "between tools depended on who ran after a delete. Sources and copies of a few "
        "large files stay on the work disk, so those copies run within one filesystem.",
        "- *cold*: `sync`, drop caches, an unmeasured warm-up of the same tool on a "
        "3-entry tree (so Python imports and binaries are cached: start-up from disk is "
        "not copy time), then the run. *warm*: the whole source was read once at the "
        "start of the round and each tool warmed up once; `sync` before each run so the "
        "previous copy's writeback does not overlap it.",
        "- Wall time spans fork to reap of the tool; CPU is user + system of the tool "
        "and the children it waited for (`wait4`); peak RSS is GNU `time`'s `%M` (the "
        "largest single process of the tool's tree). No `sync` is inside the timing: "
        "with 24 GiB of RAM a copy of large files ends in the page cache, so "
        "large-file times are to-memory times.",
        "- Every copy is verified: number and total bytes of regular files (and SHA-256 "
        "of every file on the small filesets) must match the source as the tool promises "
        "to copy it (symlinks kept, dereferenced, or skipped); otherwise it is FAILED.",
        "- Cells show `median [min-max]` seconds; ratios are the tool's median over the "
        "reference's median (`< 1` = faster than the reference).",
        "",
    ]


def _targets_section(results: Results) -> list[str]:
    rows = [
        (r.target, r.scenario, r.measured, f"**{r.status}**", r.margin, r.evidence)
        for r in [*check(results), *chores.targets(results)]
    ]
    lines = [
        "## Targets (issue 3; the Airflow operator (issue 5), fsspec (issue 6) and "
        "tree chores (issue 7) rows)",
        "",
        *md_table(
            ("target", "scenario", "measured", "status", "margin", "evidence"), rows, 6
        ),
        "",
    ]
    if remote.section(results):
        lines += [f"Targets of copies between hosts: see *{remote.TITLE}* below.", ""]
    return lines


def _auto_section(results: Results, heatmap: bool) -> list[str]:
    rows = [
        (
            r.fs,
            r.fileset,
            r.mode,
            span(r.auto),
            f"{span(r.best)} (N={r.best_workers})",
            f"{r.ratio:.2f}",
            "yes" if r.ratio <= 1.10 else "**no**",
        )
        for r in auto_vs_best(results)
    ]
    lines = ["## rcp automatic vs best fixed --max-workers", ""]
    if not rows:
        return [
            *lines,
            "No scenario had both rcp auto and a fixed setting verified.",
            "",
        ]
    lines += md_table(
        ("fs", "fileset", "mode", "auto s", "best fixed s", "auto/best", "within 10%"),
        rows,
        3,
    )
    if heatmap:
        lines += ["", "![auto vs best fixed](auto_vs_best.png)"]
    return [*lines, ""]


def _complete_section(results: Results) -> list[str]:
    table = outcomes(results)
    lines = ["## Complete results", ""]
    labels = {t.id: t.label for t in results.tools}
    order = [t.id for t in results.tools if t.chore == "copy"]  # chores: their own
    for fs, fileset in cells(results):
        if remote.is_remote(fs):
            continue  # their own section
        rows = []
        for tool in order:
            per_mode = {m: table.get((fs, fileset, m, tool)) for m in MODES}
            if all(o is None for o in per_mode.values()):
                continue
            row = [labels.get(tool, tool), *figures(per_mode)]
            row += [
                " / ".join(
                    ratio(per_mode[m], table.get((fs, fileset, m, ref))) for m in MODES
                )
                for ref in ("cp_r", "cp_a")
            ]
            shares = [
                o.shared_fraction
                for o in per_mode.values()
                if o is not None and o.shared_fraction is not None
            ]
            row.append(f"{min(shares):.0%}" if shares else "")
            rows.append(row)
        if not rows:
            continue  # only chores ran here
        info = results.fileset(fileset)
        what = f" ({info.description})" if info else ""
        lines += [f"### {fs} / {fileset}{what}", ""]
        lines += md_table(
            (
                "tool",
                "cold wall s",
                "warm wall s",
                "CPU s, median (cold / warm)",
                "peak RSS MiB",
                "vs cp -r (cold / warm)",
                "vs cp -a (cold / warm)",
                "reflinked",
            ),
            rows,
        )
        lines.append("")
    return lines


def _plots_section(plots: Sequence[str]) -> list[str]:
    shown = [p for p in plots if p != "auto_vs_best.png"]
    if not shown:
        return []
    return ["## Plots", "", *(f"![{p}]({p})" for p in shown), ""]


def _skipped_section(results: Results) -> list[str]:
    if not results.skips:
        return []
    rows = [(s.what, s.reason) for s in results.skips]
    return ["## Skipped", "", *md_table(("what", "why"), rows, 2), ""]


def _noise_section(results: Results) -> list[str]:
    if not results.samples:
        return []
    load = spread(s.load1 for s in results.samples)
    noisy = sorted(
        (
            (o.wall.relative_range, key)
            for key, o in outcomes(results).items()
            if o.wall is not None and o.wall.count > 1
        ),
        reverse=True,
    )[:5]
    cores = results.meta.get("machine", {}).get("cores", "?")
    lines = [
        "## Noise",
        "",
        f"1-minute load average before each run: median {load.median:.2f} "
        f"[{load.low:.2f}-{load.high:.2f}] on {cores} cores "
        "(other sessions share this machine).",
    ]
    if noisy:
        lines.append(
            "Widest spreads ((max - min) / median): "
            + ", ".join(
                f"{fs} {fileset} {mode} {tool} {r:.0%}"
                for r, (fs, fileset, mode, tool) in noisy
            )
            + "."
        )
    return [*lines, ""]
