"""Stop signals: ``rcp`` SIGINTed, SIGTERMed or SIGHUPed at random moments.

A scheduler ends a job with SIGTERM (Slurm, systemd, Kubernetes), a closed terminal
sends SIGHUP, a user Ctrl-C; each reaches the whole process group. Each trial copies
a mixed tree with ``rcp --summary -o SRC DST`` (locally, and between two hosts over
SSH), sends one of them to the process group at a random moment while the copy
writes (after the destination appeared: a signal during the interpreter's own
start-up is the interpreter's), then checks:

- the run ends within :data:`RUN_BOUND` with ``128 + signal`` (or 0: it had
  finished), one stderr line naming the signal, and, once the copy had begun, the
  partial summary on stdout;
- nothing it started outlives it by more than :data:`ORPHAN_BOUND` seconds (the
  local helpers; the daemons on both hosts);
- nothing half-written looks complete, and no temporary (``.rcp-*``) is left;
- the same command then yields an exact copy.

Figure, per signal and place: signals that stopped a run cleanly / signals sent.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import sshd
from support.reliability import (
    MIB,
    Figure,
    Scale,
    between_hosts,
    looks_complete_but_is_not,
    mixed_tree,
    no_daemons_within,
    published,
)
from support.treecmp import TreeCompare
from support.treespec import make_tree

pytestmark = pytest.mark.slow

RUN_BOUND = 120.0
ORPHAN_BOUND = 20.0
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
RCP = [str(Path(sys.executable).with_name("rcp"))]
"""The installed command (its launcher sets the signals' handling, as users get it)."""


def temporaries(root: Path) -> list[str]:
    return [str(p) for p in root.rglob(".rcp-*")]


def gone_within(group: int, bound: float) -> bool:
    """Whether every process of ``group`` ended within ``bound`` seconds (the
    stragglers are killed)."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    os.killpg(group, signal.SIGKILL)
    return False


def fresh(dst: Path) -> None:
    """No ``dst``, and no daemon of an earlier run that could still make it: the
    wait for it to appear must be this run's (a signal sent before ``rcp`` set its
    handlers, in the interpreter's start-up, is the interpreter's)."""
    assert no_daemons_within(ORPHAN_BOUND), "an earlier run's daemons lingered"
    shutil.rmtree(dst, ignore_errors=True)
    assert not dst.exists()


def writing_time(argv: list[str], dst: Path) -> float:
    """How long the copy writes: from ``dst``'s appearance to its end (the
    shortest of two runs, so that signals land while it writes)."""
    spans = []
    for _ in range(2):
        fresh(dst)
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        while not dst.exists() and proc.poll() is None:
            time.sleep(0.002)
        appeared = time.monotonic()
        assert proc.wait(RUN_BOUND) == 0
        spans.append(time.monotonic() - appeared)
    return min(spans)


def trials(
    argv: list[str],
    src: Path,
    dst: Path,
    signum: signal.Signals,
    figure: Figure,
    count: int,
    remote: bool,
    tree_compare: TreeCompare,
) -> int:
    """``count`` signals at random moments of the copy ``argv`` (see the module);
    how many stopped a run (the others came after its end)."""
    writing = writing_time(argv, dst)
    rng = random.Random(f"signal-{signum.name}-{remote}")
    landed = 0
    for trial in range(count):
        fresh(dst)
        figure.tried += 1
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        while not dst.exists() and proc.poll() is None:
            time.sleep(0.002)
        try:
            proc.wait(rng.uniform(0.0, 0.7 * writing))  # while it surely writes
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signum)
        try:
            out, err = proc.communicate(timeout=RUN_BOUND)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            figure.failed(f"trial {trial}: no end after {signum.name}", hang=True)
            continue
        problems = []
        if proc.returncode not in (0, 128 + signum):
            crash = "Traceback" in err or proc.returncode < 0
            problems.append(f"exit {proc.returncode}: {err[-300:]}")
            figure.failed(f"trial {trial}: {problems[-1]}", crash=crash)
        elif proc.returncode:
            landed += 1
            if err.strip().splitlines()[-1:] != [f"rcp: interrupted by {signum.name}"]:
                problems.append(f"stderr {err[-300:]!r}")
            if dst.exists() and "copied:" not in out:  # the copy had begun
                problems.append(f"no partial summary: {out[-300:]!r}")
            if problems:
                figure.failed(f"trial {trial}: {'; '.join(problems)}"[:400])
        orphans = not (no_daemons_within(ORPHAN_BOUND) if remote else True)
        orphans |= not gone_within(proc.pid, ORPHAN_BOUND)
        if orphans:
            problems.append("processes outlived rcp")
            figure.failed(f"trial {trial}: processes outlived rcp", hang=True)
        if dst.exists():
            wrong = looks_complete_but_is_not(src, dst)
            left = temporaries(dst)
            if wrong or left:
                problems.append(f"half-written {wrong[:3]} temporaries {left[:3]}")
                figure.failed(f"trial {trial}: {problems[-1]}", lost=True)
        rerun = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_BOUND)
        if rerun.returncode != 0:
            problems.append(f"rerun exit {rerun.returncode}: {rerun.stderr[-300:]}")
            figure.failed(f"trial {trial}: {problems[-1]}")
        elif differences := tree_compare(src, dst):
            problems.append(f"rerun differs: {differences[:3]}")
            figure.failed(f"trial {trial}: {problems[-1]}", lost=True)
        if not problems:
            figure.survived += 1
    figure.detail = f"{landed} signals stopped a run mid-copy"
    return landed


@pytest.mark.timeout(1800)  # make stress: 30 signals of each kind
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_a_local_copy_stops_cleanly_on_a_signal(
    tmp_path: Path,
    signum: signal.Signals,
    scale: Scale,
    figures: list[Figure],
    tree_compare: TreeCompare,
) -> None:
    src = make_tree(
        tmp_path / "src", mixed_tree(seed=9, large=(24 * MIB, 24 * MIB, 40 * MIB))
    )
    dst = tmp_path / "dst"
    figure = published(figures, "signals", f"local rcp, {signum.name} mid-copy")
    count = scale.trials(fast=2, full=30)
    argv = [*RCP, "--summary", "-o", str(src), str(dst)]
    landed = trials(argv, src, dst, signum, figure, count, False, tree_compare)
    assert figure.clean, figure.notes
    assert landed > 0, "no signal landed mid-copy"


@pytest.mark.privileged
@pytest.mark.timeout(1800)  # make stress: 20 signals of each kind
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_a_copy_between_hosts_stops_cleanly_and_its_daemons_exit(
    tmp_path: Path,
    server: sshd.Sshd,
    signum: signal.Signals,
    scale: Scale,
    figures: list[Figure],
    tree_compare: TreeCompare,
) -> None:
    src = make_tree(tmp_path / "src", mixed_tree(seed=6, large=(48 * MIB, 16 * MIB)))
    dst = tmp_path / "dst"
    argv = between_hosts(RCP, server.port, server.ssh(), src, dst, "--summary", "-o")
    figure = published(figures, "signals", f"remote copy, {signum.name} to rcp")
    count = scale.trials(fast=2, full=20)
    landed = trials(argv, src, dst, signum, figure, count, True, tree_compare)
    assert figure.clean, figure.notes
    assert landed > 0, "no signal landed mid-copy"
