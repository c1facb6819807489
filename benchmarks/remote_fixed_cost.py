"""The fixed cost of a one-file copy between hosts: rcp against rsync over ssh.

Issue 25's target: a one-file remote copy (``rcp host:/data/f /scratch/f``) within
0.3 s of ``rsync`` over ssh on the same hosts. Two network namespaces on a private
bridge (:func:`benchmarks.netns.lan`), a real sshd in ``h2``
(:func:`benchmarks.sshd.running_sshd`); every command runs in ``h1``. Measured,
interleaved and repeated (so noise hits them alike), each a 1 KiB file:

- ``ssh true``: one ssh login and a command, the floor under both tools;
- ``rsync pull``, ``rsync push``: ``rsync -a -e SSH``;
- ``rcp pull``, ``rcp push``: as a user runs it (with SSH reuse where this rcp has it,
  so every run after the first finds the connection of the one before);
- ``rcp pull, new ssh``: ``--no-ssh-reuse``, a login every run (only where this rcp
  has the flag);
- ``baseline rcp pull``, ``baseline rcp push``: another build's (``--baseline-python``,
  e.g. ``.venv-bench-base/bin/python`` of ``make bench-base``).

Then the pull apart (``--trace`` runs, not interleaved with the above): timestamps
from ``rcp`` itself (its functions wrapped) and from a wrapper that starts ``rcpd``,
on one clock (both hosts are this machine), medians per phase.

Run: ``python -m benchmarks.remote_fixed_cost --python .venv-bench-rcp/bin/python
--out benchmarks/results/remote_fixed_cost.md`` (root: namespaces and sshd; the
wheel installs of ``make bench-rcp``, as users have them: an editable install's
import hook costs every start-up, rcpd's too, some 20 ms).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import netns, sshd
from benchmarks.harness.markdown import publish
from benchmarks.harness.stats import Spread, spread

SIZE = 1024
REUSE_FLAG = "--no-ssh-reuse"

# The traced rcp: wraps the master's steps, prints "MS what" lines on stderr (ms
# since $T0, the epoch the probe took just before starting it).
TRACE = """
import os, sys, time
T0 = float(os.environ["T0"])
def mark(what):
    print(f"@@ {(time.time() - T0) * 1000:.2f} {what}", file=sys.stderr, flush=True)
from rcp_provider.cli import rcp as cli
from rcp_core.remote import ssh
def wrap(owner, name, label, then=None):
    inner = getattr(owner, name)
    def wrapped(*args, **kwargs):
        mark(label + " start")
        try:
            return inner(*args, **kwargs)
        finally:
            mark(label + " end")
            if then is not None:
                then()
    setattr(owner, name, wrapped)
def after_login():
    # Where the master imports the rest (sshcopy) itself: wrapped no earlier, so
    # the start-up measured is the one users get.
    from rcp_core.remote import sshcopy, sshrole
    if not hasattr(sshcopy, "_traced"):
        sshcopy._traced = True
        wrap(sshrole, "dial", "dial")
        wrap(sshcopy, "_run_local", "job")
wrap(ssh.SshDaemon, "__init__", "ssh", after_login)
wrap(ssh.SshDaemon, "exchange", "exchange")
wrap(ssh.SshDaemon, "stop", "stop")
status = cli.main(sys.argv[1:])
mark("exit")
sys.exit(status)
"""

# The wrapper rcpd on h2: appends "what epoch" lines to $1's log, then runs rcpd.
RCPD_WRAPPER = """#!/bin/sh
log={log}
echo "exec $(date +%s.%N)" >> "$log"
exec {python} -c '
import sys, time
started = time.time()
from rcp_provider.cli.launch import collector_paused
with collector_paused():
    from rcp_provider.cli.rcpd import main
imported = time.time()
with open(sys.argv[1], "a") as f:
    f.write(f"python {{started:.6f}}\\nimported {{imported:.6f}}\\n")
sys.exit(main(sys.argv[2:]))' "$log" "$@"
"""

PHASES = (
    ("rcp start-up, to ssh started", None, "ssh start"),
    ("ssh login, to rcpd started", "ssh start", "rcpd exec"),
    ("python starts on h2", "rcpd exec", "rcpd python"),
    ("rcpd imports", "rcpd python", "rcpd imported"),
    ("rcpd identity, setup line, announcement", "rcpd imported", "exchange end"),
    ("control connection (TLS)", "dial start", "dial end"),
    ("the job (data connections, the file)", "job start", "job end"),
    ("teardown (rcpd and ssh exit)", "stop start", "stop end"),
    ("total", None, "exit"),
)


def rcp_has_reuse(rcp: str) -> bool:
    """Whether this rcp has :data:`REUSE_FLAG`."""
    out = subprocess.run([rcp, "--help"], capture_output=True, text=True, check=True)
    return REUSE_FLAG in out.stdout


def commands(
    python: str,
    ssh: list[str],
    target: str,
    work: Path,
    baseline: str | None = None,
) -> dict[str, list[str]]:
    """Each probe's command line (run in h1); with ``baseline`` (another build's
    python) its rcp's pull and push too."""

    def rcp(python: str) -> list[str]:
        return [
            str(Path(python).with_name("rcp")),
            "--ssh",
            shlex.join(ssh),
            "--rcpd-path",
            str(Path(python).with_name("rcpd")),
        ]

    src, far = work / "src", f"{target}:{work / 'src'}"
    pulled, pushed = str(work / "pulled"), f"{target}:{work / 'pushed'}"
    rsync = ["rsync", "-a", "-e", shlex.join(ssh)]
    probes = {
        "ssh true": [*ssh, target, "true"],
        "rsync pull": [*rsync, far, pulled],
        "rcp pull": [*rcp(python), "-o", far, pulled],
        "rsync push": [*rsync, str(src), pushed],
        "rcp push": [*rcp(python), "-o", str(src), pushed],
    }
    if rcp_has_reuse(rcp(python)[0]):
        probes["rcp pull, new ssh"] = [*rcp(python), REUSE_FLAG, "-o", far, pulled]
    if baseline is not None:
        probes["baseline rcp pull"] = [*rcp(baseline), "-o", far, pulled]
        probes["baseline rcp push"] = [*rcp(baseline), "-o", str(src), pushed]
    return probes


def measure(
    host: netns.Host, probes: dict[str, list[str]], reps: int
) -> dict[str, Spread]:
    """Wall times of the probes, interleaved ``reps`` times."""
    walls: dict[str, list[float]] = {name: [] for name in probes}
    for _ in range(reps):
        for name, argv in probes.items():
            started = time.perf_counter()
            subprocess.run(host.enter(argv), check=True, stdout=subprocess.DEVNULL)
            walls[name].append(time.perf_counter() - started)
    return {name: spread(values) for name, values in walls.items()}


def trace(
    host: netns.Host,
    python: str,
    ssh: list[str],
    target: str,
    work: Path,
    reps: int,
    flags: Sequence[str] = (),
) -> dict[str, Spread]:
    """The phases of ``reps`` traced pulls (ms from rcp's start) with rcp's
    ``flags``."""
    log = work / "rcpd.log"
    wrapper = work / "rcpd-wrapper"
    wrapper.write_text(
        RCPD_WRAPPER.format(log=shlex.quote(str(log)), python=shlex.quote(python))
    )
    wrapper.chmod(0o755)
    argv = [python, "-c", TRACE, "--ssh", shlex.join(ssh), "--rcpd-path", str(wrapper)]
    argv += [*flags, "-o", f"{target}:{work / 'src'}", str(work / "traced")]
    phases: dict[str, list[float]] = {name: [] for name, _, _ in PHASES}
    for _ in range(reps):
        log.unlink(missing_ok=True)
        t0 = time.time()
        proc = subprocess.run(
            host.enter(argv),
            env={**os.environ, "T0": repr(t0)},
            capture_output=True,
            text=True,
            check=True,
        )
        marks: dict[str, float] = {}
        for line in proc.stderr.splitlines():
            if line.startswith("@@ "):
                _, ms, what = line.split(" ", 2)
                marks.setdefault(what, float(ms))
        for line in log.read_text().splitlines():
            what, epoch = line.split()
            marks[f"rcpd {what}"] = (float(epoch) - t0) * 1000
        for name, begin, end in PHASES:
            phases[name].append(marks[end] - (marks[begin] if begin else 0.0))
    return {name: spread(values) for name, values in phases.items()}


def render(
    spreads: dict[str, Spread],
    phases: dict[str, dict[str, Spread]],
    reps: int,
    traced: int,
) -> str:
    """The markdown of the probe."""
    lines = [
        "# Fixed cost of a one-file copy between hosts",
        "",
        f"A {SIZE} B file between two network namespaces (sshd in h2, every command in "
        f"h1); interleaved, {reps} runs each, median [min-max]; "
        "`python -m benchmarks.remote_fixed_cost`.",
        "",
        "| probe | wall | less rsync's |",
        "|---|---|---|",
    ]
    for name, s in spreads.items():
        base = (
            spreads.get("rsync push" if "push" in name else "rsync pull")
            if "rcp" in name
            else None
        )
        less = f"{1000 * (s.median - base.median):+.0f} ms" if base else ""
        lines.append(
            f"| {name} | {1000 * s.median:.0f} ms "
            f"[{1000 * s.low:.0f}-{1000 * s.high:.0f}] | {less} |"
        )
    lines += [
        "",
        f"The pull apart ({traced} traced runs each, one after the other; ms, median "
        "[min-max] of each phase, so they need not add up to the total's):",
        "",
        "| phase | " + " | ".join(phases) + " |",
        "|---|" + "---|" * len(phases),
    ]
    for name, _, _ in PHASES:
        lines.append(
            f"| {name} | "
            + " | ".join(
                f"{p[name].median:.0f} [{p[name].low:.0f}-{p[name].high:.0f}]"
                for p in phases.values()
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.remote_fixed_cost")
    parser.add_argument("--python", default=sys.executable, help="the venv's python")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--traced", type=int, default=10, help="traced pulls")
    parser.add_argument(
        "--baseline-python", help="another build's python: its rcp measured too"
    )
    parser.add_argument("--out", type=Path, help="write the markdown here too")
    args = parser.parse_args(argv)
    why = netns.missing() or sshd.missing()
    if why:
        parser.error(why)
    python = str(Path(args.python).absolute())
    baseline = args.baseline_python and str(Path(args.baseline_python).absolute())
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rcp-fc-")))
        # rcp's SSH connections of this run only (their own runtime directory).
        os.environ["XDG_RUNTIME_DIR"] = str(work)
        (work / "src").write_bytes(os.urandom(SIZE))
        h1, h2 = stack.enter_context(netns.lan(2))
        server = stack.enter_context(sshd.running_sshd(work / "sshd", h2))
        stack.callback(sshd.close_masters, work / "rcp-ssh")
        ssh, target = server.ssh(), f"root@{h2.address}"
        probes = commands(python, ssh, target, work, baseline)
        spreads = measure(h1, probes, args.reps)
        phases = {"as run": trace(h1, python, ssh, target, work, args.traced)}
        if REUSE_FLAG in probes.get("rcp pull, new ssh", []):
            phases["new ssh"] = trace(
                h1, python, ssh, target, work, args.traced, [REUSE_FLAG]
            )
    text = render(spreads, phases, args.reps, args.traced)
    return publish(text, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
