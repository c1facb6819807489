"""Markdown pieces of ``report.md``: numbers, spreads, ratios and tables.

Invariants: a missing value prints as ``-`` (never 0); a ratio is median / median and
is ``-`` when either side failed or is missing; a table cell's ``|`` is escaped, so a
tool's error message cannot break the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from benchmarks.harness.aggregate import Outcome
from benchmarks.harness.results import MODES, Mode
from benchmarks.harness.stats import Spread


def num(x: float) -> str:
    """Three significant digits, without scientific notation for our ranges."""
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def span(s: Spread | None) -> str:
    """``median [min-max]``, or ``-``."""
    if s is None:
        return "-"
    if s.count == 1:
        return num(s.median)
    return f"{num(s.median)} [{num(s.low)}-{num(s.high)}]"


def ratio(a: Outcome | None, b: Outcome | None) -> str:
    """``a``'s median wall time over ``b``'s, two decimals, or ``-``."""
    if a is None or b is None or a.wall is None or b.wall is None or b.wall.median <= 0:
        return "-"
    return f"{a.wall.median / b.wall.median:.2f}"


def figures(per_mode: Mapping[Mode, Outcome | None]) -> list[str]:
    """A tool's cells in a results table: wall time per mode (``FAILED`` with the
    first problem when a run failed), median CPU seconds per mode, peak RSS."""
    cells = [
        "-"
        if o is None
        else span(o.wall)
        if o.ok
        else f"FAILED {o.failures}/{o.runs}: {o.problem}"
        for o in (per_mode.get(m) for m in MODES)
    ]
    cells.append(
        " / ".join(
            "-"
            if (o := per_mode.get(m)) is None or o.cpu is None
            else num(o.cpu.median)
            for m in MODES
        )
    )
    rss = [
        o.rss_mib.median
        for o in per_mode.values()
        if o is not None and o.rss_mib is not None
    ]
    cells.append(num(max(rss)) if rss else "-")
    return cells


def md_table(
    header: Sequence[str], rows: Iterable[Sequence[str]], right_from: int = 1
) -> list[str]:
    """A markdown table; columns from ``right_from`` on are right-aligned."""
    out = ["| " + " | ".join(header) + " |"]
    out.append(
        "|"
        + "|".join("---" if i < right_from else "---:" for i in range(len(header)))
        + "|"
    )
    out.extend(
        "| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows
    )
    return out


def publish(text: str, out: Path | None) -> int:
    """A probe's report: printed, and written to ``out`` too when given; the probe's
    exit status."""
    print(text, end="")
    if out is not None:
        out.write_text(text)
    return 0
