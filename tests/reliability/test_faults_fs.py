"""Faults of the filesystem under ``rcp``: latencyfs injects them (its fault table),
``rcp`` must handle each one correctly.

Source and destination are both on one latencyfs mount (``/src``, ``/dst``), so a
rule can aim at either. Two kinds of trial:

- named scenarios, each with its exact expected outcome: a transient fault
  (ESTALE, EAGAIN, EINTR, ETIMEDOUT, a few times) is retried and the copy is exact;
  short reads and copies are looped over; slow calls only take longer; a permanent
  fault (EIO, EACCES) is reported with the path it hit, and everything else is copied;
  a full or read-only destination (ENOSPC, EDQUOT, EROFS) stops the run with an
  error;
- random fault tables (seeded): whatever happens, the rules below hold.

The rules every trial checks, as a fault handled correctly:

- no hang: ``rcp`` ends within :data:`RUN_BOUND`;
- no crash: no traceback, no death by a signal;
- honest exit: status 0 only if the copy is exact; otherwise non-zero with an error
  line;
- nothing half-written looks complete (:func:`looks_complete_but_is_not`);
- recovery: the same command without faults then yields an exact copy.

Figure: ``tried`` counts the faults injected (the daemon's log), ``survived`` those
in trials that kept every rule; ``lost``, ``hangs`` and ``crashes`` count trials.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.latencyfs import Faults, mounted
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

pytestmark = [pytest.mark.privileged, pytest.mark.slow]

RUN_BOUND = 120.0
TRANSIENT = ("ESTALE", "EAGAIN", "EINTR", "ETIMEDOUT", "EBUSY")
PERMANENT = ("EIO", "EACCES", "EPERM")
FATAL = ("ENOSPC", "EDQUOT", "EROFS")
OPS = (
    "open",
    "read",
    "write",
    "create",
    "mkdir",
    "getattr",
    "opendir",
    "readdir",
    "utimens",
    "chmod",
    "rename",
    "unlink",
    "copy_file_range",
    "fsync",
    "flush",
    "readlink",
    "symlink",
    "link",
    "listxattr",
    "lseek",
)
GLOBS = ("/src/*", "/dst/*", "/src/small/d3/*", "/dst/large/*", "/src/hard/*", "*")


@dataclass(frozen=True)
class Scenario:
    """A fault table and what ``rcp`` must do under it: ``exact`` (exit 0 and an
    exact copy), or fail naming ``reports`` (a path or a message) with the rest of
    the tree exact apart from ``spared`` (paths relative to the tree)."""

    name: str
    rules: tuple[str, ...]
    exact: bool = True
    reports: str = ""
    spared: tuple[str, ...] = ()


NO_COPY_RANGE = "copy_file_range * EOPNOTSUPP"
"""rcp then reads and writes: the rules on read and write meet it."""
SCENARIOS = (
    *(
        Scenario(f"{errno} on {op}", (f"{op} {glob} {errno} times=2",))
        for errno in TRANSIENT
        for op, glob in (("open", "/src/small/d3/*"), ("copy_file_range", "/src/*"))
    ),
    Scenario("ESTALE on read", (NO_COPY_RANGE, "read /src/large/* ESTALE times=2")),
    Scenario("EINTR on write", (NO_COPY_RANGE, "write /dst/large/* EINTR times=3")),
    Scenario("ESTALE on create", ("create /dst/small/* ESTALE times=2",)),
    Scenario("EAGAIN on mkdir", ("mkdir /dst/large EAGAIN times=1",)),
    Scenario("ESTALE on utimens", ("utimens /dst/hard/* ESTALE times=2",)),
    Scenario("short copies", ("copy_file_range * short",)),
    Scenario("short reads", (NO_COPY_RANGE, "read * short")),
    Scenario("slow calls", ("open /src/large/* slow ms=300", "mkdir * slow ms=50")),
    Scenario(
        "EIO reading one file",
        ("read /src/small/d5/f7 EIO", "copy_file_range /src/small/d5/f7 EIO"),
        exact=False,
        reports="small/d5/f7",
        spared=("small/d5/f7", "small/d5"),
    ),
    Scenario(
        "EACCES opening one file",
        ("open /src/hard/a EACCES",),
        exact=False,
        reports="hard/a",
        spared=("hard/a", "hard/b", "hard"),
    ),
    *(
        Scenario(
            f"{errno} filling the destination",
            (f"copy_file_range /src/large/* {errno}", f"write /dst/large/* {errno}"),
            exact=False,
            reports=message,
        )
        for errno, message in (
            ("ENOSPC", "No space left"),
            ("EDQUOT", "quota"),
            ("EROFS", "Read-only"),
        )
    ),
)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree every trial copies (outside the mount; each trial puts it in)."""
    return make_tree(tmp_path_factory.mktemp("tree") / "src", mixed_tree(seed=11))


@dataclass
class Stage:
    """One latencyfs mount over ``backing``: ``rcp`` copies ``src`` to ``dst``
    through the mount; the results are read in the backing (``truth``), where no
    fault can bend what a check reads."""

    mnt: Path
    backing: Path

    @property
    def src(self) -> Path:
        return self.mnt / "src"

    @property
    def dst(self) -> Path:
        return self.mnt / "dst"

    def truth(self) -> tuple[Path, Path]:
        return self.backing / "src", self.backing / "dst"


@pytest.fixture
def staged(tmp_path: Path, source: Path) -> tuple[Path, Path]:
    """(backing, rules directory): the source copied into a fresh backing."""
    backing = tmp_path / "backing"
    backing.mkdir()
    subprocess.run([*RCP, str(source), str(backing / "src")], check=True)
    return backing, tmp_path


def run_rcp(stage: Stage) -> subprocess.CompletedProcess[str] | None:
    """``rcp -o src dst`` on the mount; ``None`` if it did not end in time."""
    try:
        return subprocess.run(
            [*RCP, "-o", str(stage.src), str(stage.dst)],
            capture_output=True,
            text=True,
            timeout=RUN_BOUND,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None


def trial(
    staged: tuple[Path, Path],
    rules: tuple[str, ...],
    tree_compare: TreeCompare,
    figure: Figure,
    scenario: Scenario | None = None,
) -> None:
    """Copy under ``rules``, check every rule of the module docstring (and the
    scenario's own outcome), then rerun without faults; count it in ``figure``."""
    backing, workdir = staged
    shutil.rmtree(backing / "dst", ignore_errors=True)
    faults = Faults.table(workdir, rules)
    mnt = workdir / "mnt"
    mnt.mkdir(exist_ok=True)
    with mounted(backing, mnt, delay_ms=0.05, faults=faults):
        stage = Stage(mnt, backing)
        done = run_rcp(stage)
        injected = len(faults.injected())
        figure.tried += injected
        what = f"{scenario.name if scenario else rules}"
        if done is None:
            figure.failed(f"{what}: rcp hung", hang=True)
            return
        problems = []
        if done.returncode < 0 or "Traceback" in done.stderr:
            figure.failed(f"{what}: crashed: {done.stderr[-300:]}", crash=True)
            return
        differences = (
            tree_compare(*stage.truth()) if stage.truth()[1].exists() else ["no dst"]
        )
        if done.returncode == 0 and differences:
            problems.append(f"exit 0 but {differences[:3]}")
        if done.returncode != 0 and "rcp" not in done.stderr:
            problems.append(f"exit {done.returncode} without an error line")
        wrong = (
            looks_complete_but_is_not(*stage.truth())
            if stage.truth()[1].exists()
            else []
        )
        if wrong:
            figure.failed(f"{what}: complete-looking but wrong {wrong[:3]}", lost=True)
            return
        if scenario is not None:
            problems += expected(scenario, done, differences)
    with mounted(backing, mnt, delay_ms=0.05):
        again = run_rcp(stage)
        if again is None or again.returncode != 0 or tree_compare(*stage.truth()):
            problems.append("the rerun without faults did not give an exact copy")
    if problems:
        figure.failed(f"{what}: {'; '.join(problems)}", lost=True)
    else:
        figure.survived += injected


def expected(
    scenario: Scenario, done: subprocess.CompletedProcess[str], differences: list[str]
) -> list[str]:
    """How the run missed the scenario's own outcome (nothing when it met it)."""
    if scenario.exact:
        if done.returncode != 0:
            return [f"exit {done.returncode}: {done.stderr[-300:]}"]
        return []
    problems = []
    if done.returncode == 0:
        problems.append("exit 0 with a fault that cannot be recovered")
    said = done.stdout + done.stderr  # error lines are logged to stdout
    if scenario.reports not in said:
        problems.append(f"the output does not say {scenario.reports!r}: {said[-300:]}")
    if scenario.spared:
        elsewhere = [
            d
            for d in differences
            if not any(
                d.startswith(repr(path)) or repr(path) in d.split(": ", 1)[-1]
                for path in scenario.spared
            )
        ]
        if elsewhere:
            problems.append(f"other entries differ too: {elsewhere[:3]}")
    return problems


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_each_named_fault_is_handled_as_it_must_be(
    staged: tuple[Path, Path],
    scenario: Scenario,
    figures: list[Figure],
    tree_compare: TreeCompare,
) -> None:
    figure = published(figures, "faults", f"filesystem: {scenario.name}")
    trial(staged, scenario.rules, tree_compare, figure, scenario)
    assert figure.tried > 0, "the fault table never fired"
    assert figure.clean, figure.notes


def random_rules(rng: random.Random) -> tuple[str, ...]:
    """One to three rules of any op, place and failure."""
    rules = []
    for _ in range(rng.randint(1, 3)):
        action = rng.choice([*TRANSIENT, *PERMANENT, *FATAL, "short", "slow"])
        extra = " ms=20" if action == "slow" else ""
        times = rng.choice(["", " times=1", " times=3", " times=10"])
        chance = rng.choice(["", " p=0.2", " p=0.02"])
        after = rng.choice(["", f" after={rng.randint(1, 200)}"])
        rules.append(
            f"{rng.choice(OPS)} {rng.choice(GLOBS)} {action}{times}{after}{chance}{extra}"
        )
    return (f"seed {rng.randint(1, 2**31)}", *rules)


@pytest.mark.timeout(1800)  # make stress: 120 tables
def test_random_fault_tables_never_break_the_rules(
    staged: tuple[Path, Path],
    scale: Scale,
    figures: list[Figure],
    tree_compare: TreeCompare,
) -> None:
    figure = published(figures, "faults", "filesystem: random fault tables")
    rng = random.Random(8)
    for _ in range(scale.trials(fast=3, full=120)):
        trial(staged, random_rules(rng), tree_compare, figure)
    assert figure.clean, figure.notes
