"""Two of issue 25's targets between hosts: ``--bwlimit`` holds, and a cut-off copy
resumes without sending again what arrived.

Two hosts as the harness's netns cells (:mod:`benchmarks.harness.hosts`: network
namespaces, sshd in h2, uncapped veth); h1 pulls from h2 with the rcp of ``--bin``:

- **bwlimit**: four files of 1 GiB (the large-file cell) with ``--bwlimit 50M``
  (52,428,800 bytes per second, 1024-based as in rsync), ``--reps`` times: the rate
  is the file bytes over the wall time; the target is within 10% of the limit.
- **resume**: one file of ``--resume-gib`` GiB with ``--partial``; the copy is
  killed (SIGKILL) once its partial holds half of the file, then run again to the
  end. The bytes on h2's link during the second run (the veth counters, so TLS and
  SSH count too) against the file's size; the target is at most 55%.

Run (root): ``python -m benchmarks.remote_controls --bin .venv-bench-rcp/bin
--out benchmarks/results/remote_controls.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness import hosts
from benchmarks.harness.markdown import publish

GiB = 1 << 30
LIMIT = "50M"
LIMIT_BYTES = 50 << 20
RATE_SLACK = 0.10
RESUMED_SHARE = 0.55
TIMEOUT = 900.0


def write_file(path: Path, size: int) -> None:
    """``size`` random bytes at ``path`` (written in 64 MiB pieces)."""
    piece = os.urandom(64 << 20)
    with open(path, "wb") as f:
        for _ in range(size // len(piece)):
            f.write(piece[:8] + os.urandom(8) + piece[16:])


def rcp_argv(pair: hosts.Pair, bindir: Path, *args: str) -> list[str]:
    return [
        *pair.prefix,
        str(bindir / "rcp"),
        "--ssh",
        shlex.join(pair.ssh),
        "--rcpd-path",
        str(bindir / "rcpd"),
        *args,
    ]


def bwlimit_rates(pair: hosts.Pair, bindir: Path, work: Path, reps: int) -> list[float]:
    """Bytes per second of each ``--bwlimit`` run of the four 1 GiB files."""
    src = work / "large"
    src.mkdir()
    for i in range(4):
        write_file(src / f"f{i}", GiB)
    rates = []
    for rep in range(reps):
        dst = work / f"bw-{rep}"
        started = time.monotonic()
        subprocess.run(
            rcp_argv(
                pair,
                bindir,
                "--bwlimit",
                LIMIT,
                f"root@{pair.server.address}:{src}",
                str(dst),
            ),
            check=True,
            capture_output=True,
            timeout=TIMEOUT,
        )
        rates.append(4 * GiB / (time.monotonic() - started))
        subprocess.run(["rm", "-rf", str(dst)], check=True)
    subprocess.run(["rm", "-rf", str(src)], check=True)
    return rates


def resumed_share(
    pair: hosts.Pair, bindir: Path, work: Path, size: int
) -> dict[str, float]:
    """Kill a ``--partial`` pull at half the file, run it again; what crossed."""
    src = work / "resume-src"
    write_file(src, size)
    dst = work / "resume-dst"
    partial = work / f".rcp-partial.{dst.name}"
    operands = (f"root@{pair.server.address}:{src}", str(dst))
    proc = subprocess.Popen(
        rcp_argv(pair, bindir, "--partial", *operands),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while not (partial.exists() and partial.stat().st_size >= size // 2):
        if proc.poll() is not None:
            raise RuntimeError("the copy ended before it was half done")
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    left = partial.stat().st_size
    summary = work / "resume.json"
    before = pair.server.traffic()
    started = time.monotonic()
    subprocess.run(
        rcp_argv(pair, bindir, "--partial", "--summary-json", str(summary), *operands),
        check=True,
        capture_output=True,
        timeout=TIMEOUT,
    )
    seconds = time.monotonic() - started
    crossed = pair.server.traffic() - before
    if subprocess.run(["cmp", str(src), str(dst)], check=False).returncode:
        raise RuntimeError("the resumed copy differs from its source")
    kept = json.loads(summary.read_text())["resumed"]["bytes"]
    for path in (src, dst):
        path.unlink()
    return {
        "size": size,
        "partial": left,
        "kept": kept,
        "crossed": crossed,
        "seconds": seconds,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, required=True, help="rcp's bin dir")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--resume-gib", type=int, default=4)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    bindir = args.bin.resolve()
    with tempfile.TemporaryDirectory(dir="/var/tmp") as scratch:
        work = Path(scratch)
        with hosts.pair(work / "hosts", work) as pair:
            resumed = resumed_share(pair, bindir, work, args.resume_gib * GiB)
            rates = bwlimit_rates(pair, bindir, work, args.reps)
    rate = statistics.median(rates)
    off = abs(rate - LIMIT_BYTES) / LIMIT_BYTES
    share = resumed["crossed"] / resumed["size"]
    lines = [
        "# Network controls between hosts",
        "",
        "`python -m benchmarks.remote_controls`: h1 pulls from h2 over an uncapped "
        "veth (network namespaces, sshd in h2), TLS on.",
        "",
        f"## `--bwlimit {LIMIT}` (4 x 1 GiB, {args.reps} runs)",
        "",
        f"- limit: {LIMIT_BYTES:,} B/s",
        f"- measured: median {rate:,.0f} B/s "
        f"(runs: {', '.join(f'{r:,.0f}' for r in rates)})",
        f"- off by {off:.1%} (target: within {RATE_SLACK:.0%}): "
        f"{'met' if off <= RATE_SLACK else 'NOT met'}",
        "",
        f"## Resume (`--partial`, one file of {args.resume_gib} GiB killed at half)",
        "",
        f"- the partial left: {resumed['partial']:,.0f} bytes; the rerun kept "
        f"{resumed['kept']:,.0f} (verified)",
        f"- bytes on h2's link during the rerun: {resumed['crossed']:,.0f} = "
        f"{share:.1%} of the file (target: at most {RESUMED_SHARE:.0%}): "
        f"{'met' if share <= RESUMED_SHARE else 'NOT met'}",
        f"- the rerun took {resumed['seconds']:.1f} s (hashing both prefixes included)",
    ]
    text = "\n".join(lines) + "\n"
    return publish(text, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
