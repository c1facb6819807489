"""PNG plots of a run (matplotlib, Agg backend: no display needed).

- ``time_<mode>.png``: per filesystem, median wall time per fileset and tool on a log
  scale, whiskers from min to max; the rcp fixed settings are folded into one bar,
  "rcp best fixed", so peers, rcp automatic and rcp's best stand side by side.
- ``sweep.png``: per filesystem, rcp's median wall time against ``--max-workers``
  (log-log), one line per fileset and mode, with rcp automatic as a dashed line.
- ``auto_vs_best.png``: heat map filesystem x fileset of automatic / best fixed
  (like rcp's Figure 5), one panel per mode; 1.0 = automatic is as fast as the best.

Invariants: only copies are drawn (tree chores: tables only, :mod:`.chores`); only
verified outcomes are drawn (a failed tool has no bar); a plot with
nothing to show is not written; every figure is closed after saving.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.colors import TwoSlopeNorm
from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

from benchmarks.harness.aggregate import Key, Outcome, auto_vs_best, outcomes, scenarios
from benchmarks.harness.results import MODES, Mode, Results

BEST = "rcp best fixed"


def write_all(results: Results, out: Path) -> list[str]:
    """Write every plot that has data into ``out``; return the file names."""
    names = [
        f"time_{mode}.png"
        for mode in MODES
        if _time_plot(results, mode, out / f"time_{mode}.png")
    ]
    if _sweep_plot(results, out / "sweep.png"):
        names.append("sweep.png")
    if _heatmap(results, out / "auto_vs_best.png"):
        names.append("auto_vs_best.png")
    return names


def _compared(results: Results, mode: Mode) -> list[tuple[str, str]]:
    """(fs, fileset) pairs of ``mode`` where at least two copy tools ran (not the
    probes)."""
    copies = {t.id for t in results.tools if t.chore == "copy"}
    tools: dict[tuple[str, str], set[str]] = {}
    for s in results.samples:
        if s.mode == mode and s.tool in copies:
            tools.setdefault((s.fs, s.fileset), set()).add(s.tool)
    return [cell for cell, ran in tools.items() if len(ran) > 1]


def _time_plot(results: Results, mode: Mode, path: Path) -> bool:
    table = outcomes(results)
    compared = _compared(results, mode)
    filesystems = list(dict.fromkeys(fs for fs, _ in compared))
    if not filesystems:
        return False
    unfixed = [t.id for t in results.tools if t.workers is None and t.chore == "copy"]
    labels = {t.id: t.label for t in results.tools}
    fig, axes = plt.subplots(
        len(filesystems), 1, figsize=(13, 3.6 * len(filesystems) + 0.8), squeeze=False
    )
    cmap = plt.get_cmap("tab20")
    legend: dict[str, Any] = {}
    for ax, fs in zip(axes[:, 0], filesystems, strict=True):
        filesets = [f for f2, f in compared if f2 == fs]
        # Only the tools that ran here: the remote cells have tools of their own.
        ran = {tool for (fs2, _, m, tool) in table if fs2 == fs and m == mode}
        bars = [t for t in unfixed if t in ran]
        width = 0.8 / (len(bars) + 1)
        for i, tool in enumerate([*bars, BEST]):
            xs, ys, lo, hi = [], [], [], []
            for j, fileset in enumerate(filesets):
                o = (
                    _best(table, results, fs, fileset, mode)
                    if tool == BEST
                    else table.get((fs, fileset, mode, tool))
                )
                if o is None or o.wall is None:
                    continue
                xs.append(j + (i - len(bars) / 2) * width)
                ys.append(o.wall.median)
                lo.append(o.wall.median - o.wall.low)
                hi.append(o.wall.high - o.wall.median)
            if xs:
                label = labels.get(tool, tool)
                # One colour per tool across panels (the legend is shared).
                colour = cmap(unfixed.index(tool) % 20 if tool in unfixed else 19)
                legend[label] = ax.bar(
                    xs, ys, width, yerr=[lo, hi], capsize=1.5, color=colour
                )
        ax.set_yscale("log")
        _plain_numbers(ax.yaxis)
        ax.set_xticks(range(len(filesets)), filesets)
        ax.set_ylabel("wall s (log)")
        ax.set_title(f"{fs}, {mode}: median, whiskers min-max")
        ax.grid(axis="y", which="both", alpha=0.3)
    fig.legend(
        list(legend.values()),
        list(legend),
        loc="upper center",
        ncol=min(6, len(legend) or 1),
        fontsize=8,
    )
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.7 / (3.6 * len(filesystems) + 0.8)))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _plain_numbers(axis: Any) -> None:
    """Log-axis tick labels as 0.2, 0.5, 1, 2 (not 10^0); minor ones on short ranges."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FormatStrFormatter("%g"))
    low, high = axis.get_view_interval()
    short = low > 0 and high / low < 4
    axis.set_minor_formatter(FormatStrFormatter("%g") if short else NullFormatter())


def _best(
    table: dict[Key, Outcome],
    results: Results,
    fs: str,
    fileset: str,
    mode: Mode,
) -> Outcome | None:
    fixed = [t.id for t in results.tools if t.workers is not None]
    found = [
        o
        for t in fixed
        if (o := table.get((fs, fileset, mode, t))) is not None and o.wall is not None
    ]
    return min(found, key=lambda o: o.wall.median if o.wall else math.inf, default=None)


def _sweep_plot(results: Results, path: Path) -> bool:
    table = outcomes(results)
    fixed = sorted((t.workers, t.id) for t in results.tools if t.workers is not None)
    if not fixed:
        return False
    filesystems = list(dict.fromkeys(fs for fs, _, _ in scenarios(results)))
    drawn = False
    cols = min(2, len(filesystems))
    rows = -(-len(filesystems) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4 * rows), squeeze=False)
    for ax in axes.flat[len(filesystems) :]:
        ax.set_visible(False)
    cmap = plt.get_cmap("tab10")
    for ax, fs in zip(axes.flat, filesystems, strict=False):
        for k, (_, fileset, mode) in enumerate(
            s for s in scenarios(results) if s[0] == fs
        ):
            points = [
                (n, o.wall.median)
                for n, tid in fixed
                if (o := table.get((fs, fileset, mode, tid))) is not None
                and o.wall is not None
            ]
            if not points:
                continue
            color = cmap(k % 10)
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                "o-",
                color=color,
                label=f"{fileset} {mode}",
            )
            auto = table.get((fs, fileset, mode, "rcp_auto"))
            if auto is not None and auto.wall is not None:
                ax.axhline(auto.wall.median, color=color, linestyle="--", linewidth=1)
            drawn = True
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        _plain_numbers(ax.yaxis)
        ax.set_xlabel("--max-workers (dashed: automatic)")
        ax.set_ylabel("median wall s")
        ax.set_title(fs)
        ax.grid(which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    if drawn:
        fig.savefig(path, dpi=110)
    plt.close(fig)
    return drawn


def _heatmap(results: Results, path: Path) -> bool:
    rows = auto_vs_best(results)
    if not rows:
        return False
    modes = [m for m in MODES if any(r.mode == m for r in rows)]
    filesystems = list(dict.fromkeys(r.fs for r in rows))
    filesets = list(dict.fromkeys(r.fileset for r in rows))
    ratios = [r.ratio for r in rows]
    norm = TwoSlopeNorm(vmin=min(0.9, *ratios), vcenter=1.1, vmax=max(1.5, *ratios))
    fig, axes = plt.subplots(
        1,
        len(modes),
        figsize=(1.3 * len(filesets) * len(modes) + 2.5, 0.7 * len(filesystems) + 1.8),
        squeeze=False,
    )
    image = None
    for ax, mode in zip(axes[0], modes, strict=True):
        grid = [[math.nan] * len(filesets) for _ in filesystems]
        for r in rows:
            if r.mode == mode:
                grid[filesystems.index(r.fs)][filesets.index(r.fileset)] = r.ratio
        image = ax.imshow(grid, cmap="RdYlGn_r", norm=norm, aspect="auto")
        for i, row in enumerate(grid):
            for j, value in enumerate(row):
                text = "-" if math.isnan(value) else f"{value:.2f}"
                ax.text(j, i, text, ha="center", va="center", fontsize=9)
        ax.set_xticks(range(len(filesets)), filesets, rotation=30, ha="right")
        ax.set_yticks(range(len(filesystems)), filesystems)
        ax.set_title(f"rcp auto / best fixed ({mode})")
    if image is not None:
        fig.colorbar(
            image, ax=axes[0].tolist(), shrink=0.8, label="ratio (<= 1.10 = target met)"
        )
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True
