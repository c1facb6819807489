"""A remote copy onto a latency-bound destination: two builds of rcp side by side.

The harness's netns cells write to ext4, where the remote destination's writers gain
nothing from more threads than its data connections. On a network or parallel
filesystem every create, write and close waits on a server; this probe measures what
more writers do there. Two hosts (network namespaces, sshd in h2, as the netns cells:
:mod:`benchmarks.harness.hosts`); h1 runs ``rcp root@h2:SRC DST`` with ``DST`` on
latencyfs (``--delay-ms`` per operation, a FUSE filesystem: shared storage to rcp);
``SRC`` is 400 files of 1 KiB in 4 directories and 50 of 1 MiB in 2. The builds run
interleaved, each into a new directory, ``--reps`` times; the medians and their ratio
are printed as a Markdown table (and written to ``--out``).

Run (root): ``python -m benchmarks.fuse_destination --a .venv-bench-rcp/bin
--b .venv-bench-base/bin --out benchmarks/results/....md``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness import hosts
from benchmarks.harness.markdown import publish
from benchmarks.latencyfs import mounted

SMALL = (4, 100, 1 << 10)
LARGE = (2, 25, 1 << 20)
TIMEOUT = 600.0


def make_source(src: Path) -> None:
    """The tree both builds copy (see the module docstring)."""
    for prefix, (dirs, files, size) in (("small", SMALL), ("large", LARGE)):
        for d in range(dirs):
            directory = src / f"{prefix}{d}"
            directory.mkdir(parents=True)
            for i in range(files):
                (directory / f"f{i}").write_bytes(os.urandom(size))


def copy_seconds(pair: hosts.Pair, bindir: Path, src: Path, dst: Path) -> float:
    """Seconds one ``rcp`` of ``bindir`` takes to pull ``src`` from h2 into ``dst``.

    :raises RuntimeError: the copy failed.
    """
    command = [
        *pair.prefix,
        str(bindir / "rcp"),
        "--ssh",
        shlex.join(pair.ssh),
        "--rcpd-path",
        str(bindir / "rcpd"),
        f"root@{pair.server.address}:{src}",
        str(dst),
    ]
    started = time.monotonic()
    proc = subprocess.run(
        command, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{bindir}/rcp exited {proc.returncode}: {proc.stderr}")
    return elapsed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, required=True, help="bin dir of build A")
    parser.add_argument("--b", type=Path, required=True, help="bin dir of build B")
    parser.add_argument("--a-name", default="A")
    parser.add_argument("--b-name", default="B")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--delay-ms", type=float, default=0.5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    builds = {args.a_name: args.a.resolve(), args.b_name: args.b.resolve()}
    times: dict[str, list[float]] = {name: [] for name in builds}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as scratch:
        work = Path(scratch)
        make_source(work / "src")
        (work / "backing").mkdir()
        (work / "mnt").mkdir()
        with (
            hosts.pair(work / "hosts", work) as pair,
            mounted(work / "backing", work / "mnt", delay_ms=args.delay_ms) as root,
        ):
            for rep in range(args.reps):
                for name, bindir in builds.items():
                    dst = Path(root) / f"{name}-{rep}"
                    times[name].append(copy_seconds(pair, bindir, work / "src", dst))
                    shutil.rmtree(work / "backing" / f"{name}-{rep}")
    a, b = (statistics.median(times[name]) for name in builds)
    lines = [
        f"remote copy of {SMALL[0] * SMALL[1]} x 1 KiB and {LARGE[0] * LARGE[1]} x "
        f"1 MiB onto latencyfs ({args.delay_ms:g} ms per operation), "
        f"{args.reps} interleaved runs each",
        "",
        "| build | median s | runs (s) |",
        "|---|---:|---|",
        *(
            f"| {name} | {statistics.median(v):.3f} | "
            f"{', '.join(f'{t:.3f}' for t in v)} |"
            for name, v in times.items()
        ),
        "",
        f"{args.a_name} / {args.b_name}: {a / b:.3f}",
    ]
    text = "\n".join(lines) + "\n"
    return publish(text, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
