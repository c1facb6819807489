"""The floor under a short copy: what a Python CLI pays before it copies a byte.

The ext4 100m_3 warm cell (3 x 100 MiB, page cache warm) is a copy ``cp -r`` finishes
in about 80 ms, so its target (rcp <= 1.05x cp) leaves rcp about 85 ms for its start-up
*and* the copy. This probe measures, interleaved and repeated, the start-up of:

- ``interpreter``: ``python -c pass``;
- ``stdlib``: ``python -c "import argparse, dataclasses, enum, json, logging,
  threading, typing"``: the standard library a structured CLI like rcp is built on;
- ``rcp imports``: ``import rcp_provider.cli.rcp``;
- ``rcp, empty tree``: ``rcp SRC DST`` of an empty directory: rcp's whole fixed cost.

With a report's medians for the cell (``results.json``: ``cp_r`` and ``rcp_auto``) it
derives what rcp's copy itself took (its time less its fixed cost) and the floor: the
``stdlib`` start-up plus that copy, against the time the target allows. A floor above
it means no rcp shaped like this one, however lean its own modules, meets the target
on this machine; below it, the room left is set against what rcp's own modules take
to import (``rcp imports`` less ``stdlib``).

Run: ``python -m benchmarks.startup --python .venv-bench-rcp/bin/python``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness.markdown import publish
from benchmarks.harness.results import load
from benchmarks.harness.stats import Spread, spread

STDLIB = "import argparse, dataclasses, enum, json, logging, threading, typing"
CELL = ("ext4", "100m_3", "warm")
ALLOWED = 1.05


def probes(python: str, src: Path, dst: Path) -> dict[str, list[str]]:
    """Each probe's command line."""
    rcp = str(Path(python).with_name("rcp"))
    return {
        "interpreter": [python, "-c", "pass"],
        "stdlib": [python, "-c", STDLIB],
        "rcp imports": [python, "-c", "import rcp_provider.cli.rcp"],
        "rcp, empty tree": [rcp, str(src), str(dst)],
    }


def measure(commands: dict[str, list[str]], reps: int, dst: Path) -> dict[str, Spread]:
    """Wall times, the probes interleaved ``reps`` times (noise hits them alike)."""
    walls: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(reps):
        for name, argv in commands.items():
            shutil.rmtree(dst, ignore_errors=True)
            started = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            walls[name].append(time.perf_counter() - started)
    return {name: spread(values) for name, values in walls.items()}


def cell_medians(results: Path) -> dict[str, float]:
    """The 100m_3 warm medians of ``cp_r`` and ``rcp_auto`` in a report's results."""
    found: dict[str, list[float]] = {"cp_r": [], "rcp_auto": []}
    for sample in load(results).samples:
        where = (sample.fs, sample.fileset, sample.mode)
        if where == CELL and sample.ok and sample.tool in found:
            found[sample.tool].append(sample.wall_s)
    return {tool: statistics.median(v) for tool, v in found.items() if v}


def render(spreads: dict[str, Spread], medians: dict[str, float], reps: int) -> str:
    """The markdown of the probe (and, with both medians, the floor)."""
    lines = [
        "# Start-up floor",
        "",
        f"Interleaved, {reps} runs each (median [min-max]); "
        "`python -m benchmarks.startup`.",
        "",
        "| probe | wall |",
        "|---|---|",
    ]
    for name, s in spreads.items():
        lines.append(
            f"| {name} | {1000 * s.median:.1f} ms "
            f"[{1000 * s.low:.1f}-{1000 * s.high:.1f}] |"
        )
    if len(medians) == 2:
        cp, rcp = medians["cp_r"], medians["rcp_auto"]
        allowed = ALLOWED * cp
        copy = rcp - spreads["rcp, empty tree"].median
        floor = spreads["stdlib"].median + copy
        own = spreads["rcp imports"].median - spreads["stdlib"].median
        room = allowed - floor
        verdict = (
            "no room at all: out of reach of a CLI built on that library."
            if room <= 0
            else f"that leaves {1000 * room:.1f} ms for rcp's own modules, which "
            f"take {1000 * own:.1f} ms to import"
            + (" now: met." if own <= room else " now.")
        )
        lines += [
            "",
            f"{' '.join(CELL)}: cp -r {1000 * cp:.1f} ms, rcp {1000 * rcp:.1f} ms "
            f"({rcp / cp:.2f}x); the target allows {1000 * allowed:.1f} ms.",
            f"rcp's copy without its fixed cost: {1000 * copy:.1f} ms; with only the "
            f"standard library's start-up: {1000 * floor:.1f} ms "
            f"({floor / cp:.2f}x cp -r): {verdict}",
        ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup")
    parser.add_argument("--python", required=True, help="the bench venv's python")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument(
        "--results", type=Path, default=Path("benchmarks/results/results.json")
    )
    parser.add_argument("--out", type=Path, help="write the markdown here too")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rcp-startup-") as work:
        src, dst = Path(work, "src"), Path(work, "dst")
        src.mkdir()
        spreads = measure(probes(args.python, src, dst), args.reps, dst)
    medians = cell_medians(args.results) if args.results.exists() else {}
    text = render(spreads, medians, args.reps)
    return publish(text, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
