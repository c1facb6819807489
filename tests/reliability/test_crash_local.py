"""Crash consistency of a local copy: ``rcp`` SIGKILLed at random moments, then rerun.

Each trial copies a mixed tree (small and large files, a sparse file, symlinks, hard
links, empty directories, modes and times) with ``rcp -o SRC DST``, kills the ``rcp``
process (only it: its helper processes must notice and leave by themselves) at a
random moment while the copy writes, sometimes kills the recovery run too, then runs
the same command to the end. After every kill, and at the end:

- no helper process outlives its ``rcp`` by more than :data:`ORPHAN_BOUND` seconds;
- a file that looks complete (the source's size and mtime, what ``-o`` trusts) has
  the source's content: nothing half-written is mistaken for complete;
- after the rerun the trees are identical: content, modes, times, links, hard links,
  and no temporary left behind.

Figure: kills survived / kills tried.
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

from support.nobody import RCP
from support.reliability import (
    Figure,
    Scale,
    looks_complete_but_is_not,
    mixed_tree,
    published,
)
from support.treecmp import TreeCompare
from support.treespec import make_tree

pytestmark = pytest.mark.slow

MIB = 1 << 20
ORPHAN_BOUND = 10.0
RUN_BOUND = 120.0


def members(group: int) -> list[str]:
    """The processes of ``group``: pid, state, kernel wait channel, command."""
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != group:
                continue
            proc = stat_file.parent
            wchan = (proc / "wchan").read_text()
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (FileNotFoundError, ProcessLookupError):
            continue
        found.append(f"{proc.name} {fields[0]} {wchan} {command[-60:]}")
    return found


def helpers_gone(group: int, bound: float) -> list[str]:
    """The processes of ``group`` (the killed rcp's) still there after ``bound``
    seconds (then killed): none, when every helper left in time."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return []
        time.sleep(0.05)
    left = members(group)
    os.killpg(group, signal.SIGKILL)
    return left


def kill_during(argv: list[str], dst: Path, after: float) -> tuple[int, list[str]]:
    """Start ``argv``, SIGKILL its main process ``after`` seconds after ``dst``
    appeared (when the copy is writing); its exit status (-9 when killed, 0 when it
    finished first) and the helpers that did not leave in time."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    while not dst.exists() and proc.poll() is None:
        time.sleep(0.002)
    try:
        proc.wait(after)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return proc.returncode, helpers_gone(proc.pid, ORPHAN_BOUND)


def writing_time(argv: list[str], dst: Path) -> float:
    """How long a copy writes: from ``dst``'s appearance to its end (the shortest of
    three, so that kills land while it writes)."""
    spans = []
    for _ in range(3):
        shutil.rmtree(dst, ignore_errors=True)
        proc = subprocess.Popen(argv)
        while not dst.exists() and proc.poll() is None:
            time.sleep(0.002)
        appeared = time.monotonic()
        assert proc.wait(RUN_BOUND) == 0
        spans.append(time.monotonic() - appeared)
    return min(spans)


@pytest.mark.timeout(1800)  # make stress: 150 kills
def test_a_killed_copy_rerun_is_exact(
    tmp_path: Path, scale: Scale, figures: list[Figure], tree_compare: TreeCompare
) -> None:
    src = make_tree(
        tmp_path / "src", mixed_tree(seed=8, large=(24 * MIB, 24 * MIB, 40 * MIB))
    )
    dst = tmp_path / "dst"
    argv = [*RCP, "-o", str(src), str(dst)]
    writing = writing_time(argv, dst)
    assert tree_compare(src, dst) == []
    figure = published(figures, "crash", "local rcp SIGKILLed mid-copy, then rerun")
    rng = random.Random(20261130)
    mid_copy = 0
    for trial in range(scale.trials(fast=3, full=150)):
        shutil.rmtree(dst)
        figure.tried += 1
        kills = 2 if trial % 3 == 2 else 1  # every third: the recovery run dies too
        moments = [rng.uniform(0.0, writing) for _ in range(kills)]
        problems: list[str] = []
        for moment in moments:
            status, left = kill_during(argv, dst, moment)
            if status == -signal.SIGKILL and dst.exists() and tree_compare(src, dst):
                mid_copy += 1
            if left:
                figure.failed(f"trial {trial}: helpers outlived rcp: {left}", hang=True)
                problems.append("orphans")
            wrong = looks_complete_but_is_not(src, dst) if dst.exists() else []
            if wrong:
                figure.failed(f"trial {trial}: complete-looking {wrong[:3]}", lost=True)
                problems.append("half-written")
        try:
            rerun = subprocess.run(
                argv, capture_output=True, text=True, timeout=RUN_BOUND, check=False
            )
        except subprocess.TimeoutExpired:
            figure.failed(f"trial {trial}: the rerun hung", hang=True)
            continue
        if rerun.returncode != 0:
            crash = "Traceback" in rerun.stderr
            figure.failed(
                f"trial {trial}: rerun exit {rerun.returncode}: {rerun.stderr[-300:]}",
                crash=crash,
            )
            continue
        differences = tree_compare(src, dst)
        if differences:
            figure.failed(
                f"trial {trial} (kills at {moments}): {differences[:3]}", lost=True
            )
            continue
        if not problems:
            figure.survived += 1
    figure.detail = f"{mid_copy} kills left a partial copy"
    assert mid_copy > 0, "no kill landed mid-copy"
    assert figure.clean, figure.notes
