"""Crash consistency of a copy between hosts: each role SIGKILLed at random moments.

The copy goes from one "host" to another (both this machine through a real sshd on
loopback, so both sides are ``rcpd`` daemons started over SSH, and the master is
the ``rcp`` command). A trial kills one of the three -- the source daemon, the
destination daemon or the master -- at a random moment of the copy, then:

- the killed copy ends within :data:`RUN_BOUND` with a non-zero status (or had
  finished, exactly, before the kill landed), and no daemon outlives it by more
  than :data:`ORPHAN_BOUND` seconds;
- nothing half-written looks complete;
- the same command with ``-o`` then yields an exact copy.

Figure, per role: kills that landed on a live process / trials that kept all three.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from benchmarks import sshd
from support.nobody import RCP
from support.reliability import (
    MIB,
    Figure,
    Scale,
    between_hosts,
    daemons,
    looks_complete_but_is_not,
    mixed_tree,
    no_daemons_within,
    published,
)
from support.treecmp import TreeCompare
from support.treespec import make_tree

pytestmark = [pytest.mark.privileged, pytest.mark.slow]

RUN_BOUND = 120.0
ORPHAN_BOUND = 20.0


def kill_all(pids: list[int]) -> bool:
    """SIGKILL each of ``pids``; whether one was still there to kill."""
    landed = False
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        landed = True
    return landed


@pytest.mark.timeout(1800)  # make stress: 40 kills per role
@pytest.mark.parametrize("role", ["source", "destination", "master"])
def test_a_role_killed_mid_copy_then_rerun_is_exact(
    tmp_path: Path,
    server: sshd.Sshd,
    role: str,
    scale: Scale,
    figures: list[Figure],
    tree_compare: TreeCompare,
) -> None:
    src = make_tree(tmp_path / "src", mixed_tree(seed=5, large=(48 * MIB, 16 * MIB)))
    dst = tmp_path / "dst"
    argv = between_hosts(RCP, server.port, server.ssh(), src, dst, "-o")
    started = time.monotonic()
    first = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_BOUND)
    assert first.returncode == 0, first.stderr
    whole = time.monotonic() - started
    figure = published(
        figures, "crash", f"remote copy, {role} SIGKILLed mid-copy, then rerun"
    )
    rng = random.Random(f"crash-{role}")
    kills = scale.trials(fast=2, full=40)
    for trial in range(3 * kills):
        if figure.tried == kills:
            break
        shutil.rmtree(dst, ignore_errors=True)
        moment = rng.uniform(0.1, 0.9 * whole)
        proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        try:
            proc.wait(moment)
        except subprocess.TimeoutExpired:
            if role == "master":
                proc.kill()
                landed = True
            else:
                landed = kill_all(daemons(role))
        else:
            landed = False  # it finished first
        try:
            _, stderr = proc.communicate(timeout=RUN_BOUND)
        except subprocess.TimeoutExpired:
            proc.kill()
            figure.failed(f"trial {trial}: the killed copy hung", hang=True)
            continue
        if not landed:
            continue
        figure.tried += 1
        if not no_daemons_within(ORPHAN_BOUND):
            figure.failed(f"trial {trial}: a daemon outlived the copy", hang=True)
            continue
        if role != "master" and proc.returncode == 0 and tree_compare(src, dst):
            figure.failed(f"trial {trial}: exit 0 with a broken copy", lost=True)
            continue
        if "Traceback" in stderr:
            figure.failed(f"trial {trial}: {stderr[-300:]}", crash=True)
            continue
        wrong = looks_complete_but_is_not(src, dst) if dst.exists() else []
        if wrong:
            figure.failed(f"trial {trial}: complete-looking {wrong[:3]}", lost=True)
            continue
        rerun = subprocess.run(
            argv, capture_output=True, text=True, timeout=RUN_BOUND, check=False
        )
        differences = tree_compare(src, dst)
        if rerun.returncode != 0 or differences:
            figure.failed(
                f"trial {trial} (kill at {moment:.2f} s): rerun exit "
                f"{rerun.returncode} {rerun.stderr[-200:]} {differences[:3]}",
                lost=True,
            )
            continue
        figure.survived += 1
    assert figure.tried > 0, "no kill landed on a live process"
    assert figure.clean, figure.notes
