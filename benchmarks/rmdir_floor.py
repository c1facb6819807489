"""The floor under removing the FUSE 1k_200 tree: its directories' rmdirs.

The fuse/1k_200 fileset is 100 directories of 2 files under one root, on latencyfs
(0.5 ms per request). Removing it ends with 100 rmdirs in that root, and the kernel
serializes changes to one directory (the parent's lock), so no number of threads
overlaps them. This probe times exactly those 100 rmdirs of empty directories, from
one thread and from 32, interleaved and repeated, then sets the fastest against the
report's ``rm -rf`` median for the cell: a remover that spent nothing else (no
start-up, no file unlinks, no directory reads) could be at most that many times
faster than ``rm -rf``; one that must also start as ``rrm`` does (timed on an empty
directory) at most the second bound.

Run: ``python -m benchmarks.rmdir_floor --rrm .venv-bench-rcp/bin/rrm --out
benchmarks/results/rmdir_floor.md`` (root: it mounts latencyfs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.harness.markdown import publish
from benchmarks.harness.results import load
from benchmarks.latencyfs import mounted

DIRS = 100
CELL = ("fuse", "1k_200", "warm")
ASKED = 8.0


def rmdirs(backing: Path, mnt: Path, threads: int) -> float:
    """Seconds to remove ``DIRS`` empty directories of the mount's root."""
    for i in range(DIRS):
        os.mkdir(backing / f"d{i}")
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda i: os.rmdir(mnt / f"d{i}"), range(DIRS)))
    return time.perf_counter() - started


def rm_rf_median(results: Path) -> float | None:
    walls = [
        s.wall_s
        for s in load(results).samples
        if (s.fs, s.fileset, s.mode) == CELL and s.tool == "rm_rf" and s.ok
    ]
    return statistics.median(walls) if walls else None


def start_up(rrm: str, reps: int) -> float:
    """Median seconds of ``rrm`` removing an empty directory: its fixed cost."""
    walls = []
    with tempfile.TemporaryDirectory(prefix="rcp-rrm-") as work:
        for _ in range(reps):
            empty = Path(work, "empty")
            empty.mkdir()
            started = time.perf_counter()
            subprocess.run([rrm, str(empty)], check=True)
            walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def render(
    times: dict[int, list[float]], rm_rf: float | None, fixed: float | None = None
) -> str:
    lines = [
        "# Removal floor on the latency FUSE",
        "",
        f"{DIRS} rmdirs of empty directories in one directory through latencyfs "
        "(0.5 ms per request), interleaved; `python -m benchmarks.rmdir_floor`.",
        "",
        "| threads | median s | min s | max s |",
        "|---:|---:|---:|---:|",
    ]
    for threads, walls in times.items():
        lines.append(
            f"| {threads} | {statistics.median(walls):.3f} | {min(walls):.3f} "
            f"| {max(walls):.3f} |"
        )
    fastest = min(min(walls) for walls in times.values())
    if rm_rf is not None:
        bound = rm_rf / fastest
        lines += [
            "",
            f"{' '.join(CELL)}: rm -rf {rm_rf:.2f} s; the rmdirs alone take at least "
            f"{fastest:.3f} s, so no remover can be more than {bound:.1f}x faster "
            f"than rm -rf there ({ASKED:g}x asked)"
            + (": out of reach." if bound < ASKED else "."),
        ]
        if fixed is not None:
            bound = rm_rf / (fastest + fixed)
            lines.append(
                f"With rrm's start-up ({fixed:.3f} s on an empty directory) added: "
                f"at most {bound:.1f}x"
                + (": out of reach for rrm." if bound < ASKED else ".")
            )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rmdir_floor")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rrm", help="the rrm to time on an empty directory")
    parser.add_argument(
        "--results", type=Path, default=Path("benchmarks/results/results.json")
    )
    parser.add_argument("--out", type=Path, help="write the markdown here too")
    args = parser.parse_args(argv)
    times: dict[int, list[float]] = {1: [], 32: []}
    with tempfile.TemporaryDirectory(prefix="rcp-rmdir-") as work:
        backing, mnt = Path(work, "backing"), Path(work, "mnt")
        backing.mkdir()
        mnt.mkdir()
        with mounted(backing, mnt, 0.5):
            for _ in range(args.reps):
                for threads, walls in times.items():
                    walls.append(rmdirs(backing, mnt, threads))
    rm_rf = rm_rf_median(args.results) if args.results.exists() else None
    fixed = start_up(args.rrm, 4 * args.reps) if args.rrm else None
    text = render(times, rm_rf, fixed)
    return publish(text, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
