"""``benchmarks/results/reliability.md`` from the figures of a ``make stress`` run.

The reliability suite (``tests/reliability``, run with ``--stress
--reliability-out FIGURES``) writes one figure per category: what was tried, how
many trials kept every guarantee, and how many lost data, hung or crashed; and the
tests that skipped, with their reasons. This renders them as one table, the skipped
tests (trials not made on that machine), the notes of any trial that failed, and a
verdict line: zero lost, zero hangs and zero crashes in every category, or which did
not.

Run: ``python -m benchmarks.reliability FIGURES --out benchmarks/results/reliability.md``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

COLUMNS = ("tried", "survived", "lost", "hangs", "crashes")


def render(run: dict[str, Any], command: str) -> str:
    """The report's markdown, from what the suite wrote: when it ``finished`` on
    which ``machine``, its ``figures`` and its ``skipped`` tests."""
    figures: list[dict[str, Any]] = run["figures"]
    lines = [
        "# Reliability figures",
        "",
        f"Run finished {run['finished']} on {run['machine']}: `{command}`. "
        "Each row is one category of "
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
    if run["skipped"]:
        lines += ["", "Skipped on this machine (trials not made):", ""]
        lines += [f"- `{s['test']}`: {s['reason']}" for s in run["skipped"]]
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
    run = json.loads(args.figures.read_text())
    args.out.write_text(render(run, args.command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
