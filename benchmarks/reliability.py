"""``benchmarks/results/reliability.md`` from the figures of a ``make stress`` run.

The reliability suite (``tests/reliability``, run with ``--stress
--reliability-out FIGURES``) writes one figure per category: what was tried, how
many trials kept every guarantee, and how many lost data, hung or crashed. This
renders them as one table, with the notes of any trial that failed, and a verdict
line: zero lost, zero hangs and zero crashes in every category, or which did not.

Run: ``python -m benchmarks.reliability FIGURES --out benchmarks/results/reliability.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

COLUMNS = ("tried", "survived", "lost", "hangs", "crashes")


def render(figures: list[dict[str, Any]], command: str) -> str:
    """The report's markdown."""
    lines = [
        "# Reliability figures",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on "
        f"{platform.node()} (Linux {platform.release()}, Python "
        f"{platform.python_version()}): `{command}`. Each row is one category of "
        "`tests/reliability`; its tests say what a trial is and what it must keep "
        "(`docs/reliability.md` lists the guarantees).",
        "",
        "| category | what | " + " | ".join(COLUMNS) + " |",
        "|---|---|" + "---:|" * len(COLUMNS),
    ]
    for figure in sorted(figures, key=lambda f: (f["category"], f["what"])):
        counts = " | ".join(str(figure[column]) for column in COLUMNS)
        lines.append(f"| {figure['category']} | {figure['what']} | {counts} |")
    details = [f for f in figures if f.get("detail")]
    if details:
        lines += ["", "How the trials went:", ""]
        lines += [f"- {f['category']}: {f['what']}: {f['detail']}" for f in details]
    bad = [
        f
        for f in figures
        if f["lost"] or f["hangs"] or f["crashes"] or f["survived"] != f["tried"]
    ]
    totals = {column: sum(f[column] for f in figures) for column in COLUMNS}
    lines += [
        "",
        f"Total: {totals['tried']} trials, {totals['survived']} survived, "
        f"{totals['lost']} lost, {totals['hangs']} hangs, {totals['crashes']} "
        "crashes.",
    ]
    if not figures:
        lines.append("No figures: the suite did not run.")
    elif not bad:
        lines.append("Every trial kept every guarantee.")
    for figure in bad:
        lines += ["", f"## Failed: {figure['category']}: {figure['what']}", ""]
        lines += [f"- {note}" for note in figure["notes"]]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reliability")
    parser.add_argument("figures", type=Path, help="the suite's --reliability-out")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--command", default="make stress")
    args = parser.parse_args(argv)
    figures = json.loads(args.figures.read_text())
    args.out.write_text(render(figures, args.command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
