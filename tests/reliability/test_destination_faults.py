"""Real failures of real filesystems: a full destination, one over its user's quota,
a read-only one, and a source with subtrees the copier may not read.

Each is made the way it happens (a small ext4 filled up, an XFS user quota smaller
than the tree, a read-only bind mount, ``chmod 000`` against an unprivileged copier),
and each must give: a non-zero exit
with the cause and the path on stderr, nothing half-written that looks complete,
nothing changed where nothing could be written, everything else copied exactly, and
-- once the cause is gone -- an exact copy from the same command.

Figure: failures made / handled.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.mounts import loop_volume
from support import loopfs, nobody
from support.loopfs import SmallFs
from support.nobody import RCP, give_to_nobody, rcp_as_nobody
from support.reliability import (
    Figure,
    looks_complete_but_is_not,
    mixed_tree,
    published,
    state,
)
from support.treecmp import TreeCompare
from support.treespec import make_tree

pytestmark = [pytest.mark.privileged, pytest.mark.slow]

MIB = 1 << 20


@pytest.fixture(scope="module")
def figure(figures: list[Figure]) -> Figure:
    return published(
        figures, "destination", "full, over quota, read-only, unreadable subtrees"
    )


def rcp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RCP, *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_a_full_destination_stops_the_copy_and_a_rerun_after_space_is_freed_completes(
    tmp_path: Path, small_fs: SmallFs, figure: Figure, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "src", mixed_tree(seed=3, large=(6 * MIB,)))
    fs = small_fs(96)
    ballast = fs / "ballast"
    with open(ballast, "wb") as f:  # leave about 8 MiB
        free = os.statvfs(fs).f_bavail * os.statvfs(fs).f_frsize
        f.write(os.urandom(max(0, free - 8 * MIB)))
    dst = fs / "dst"
    full = rcp("-o", str(src), str(dst))
    problems = []
    said = full.stdout + full.stderr  # error lines are logged to stdout
    if full.returncode == 0 or "No space left on device" not in said:
        problems.append(f"exit {full.returncode}: {said[-300:]}")
    if looks_complete_but_is_not(src, dst):
        problems.append("a half-written file looks complete")
    ballast.unlink()
    again = rcp("-o", str(src), str(dst))
    if again.returncode != 0 or tree_compare(src, dst):
        problems.append(
            f"after freeing space: exit {again.returncode} {again.stderr[-200:]}"
        )
    figure.trial("a full ext4", problems, lost=True)
    assert not problems


@pytest.fixture
def quota_world() -> Iterator[Path]:
    """A world-writable directory holding ``mnt``: an XFS mounted with user quotas
    on, its root owned by nobody (whose quota the test sets).

    Skipped only on a kernel built without XFS quotas (``CONFIG_XFS_QUOTA``), where
    no such mount can exist; EDQUOT then comes from latencyfs (test_faults_fs).
    """
    loopfs.require("xfs")
    if "# CONFIG_XFS_QUOTA is not set" in kernel_config():
        pytest.skip("this kernel has no XFS quota support (CONFIG_XFS_QUOTA unset)")
    with nobody.world_dir() as world:
        mnt = world / "mnt"
        with loop_volume(
            world / "xfs.img",
            mnt,
            loopfs.MKFS["xfs"],
            "xfs",
            loopfs.MIN_SIZE["xfs"],
            options="uquota",
        ):
            os.chown(mnt, nobody.NOBODY, nobody.NOBODY)
            yield world


def kernel_config() -> str:
    """The running kernel's build configuration, if it publishes it."""
    try:
        with gzip.open("/proc/config.gz", "rt") as config:
            return config.read()
    except FileNotFoundError:
        return ""


def set_quota(mnt: Path, hard_limit: str) -> None:
    """Limit nobody's blocks on ``mnt`` to ``hard_limit`` (``0``: no limit)."""
    subprocess.run(
        ["xfs_quota", "-x", "-c", f"limit -u bhard={hard_limit} nobody", str(mnt)],
        check=True,
        capture_output=True,
    )


def test_a_copy_over_quota_stops_and_a_rerun_under_a_larger_quota_completes(
    quota_world: Path, figure: Figure, tree_compare: TreeCompare
) -> None:
    """As nobody, with 6 MiB of quota for a tree of about 14 MiB of data: EDQUOT
    from the kernel stops the run with its cause on the output and nothing
    half-written looking complete; with the limit lifted the same command completes."""
    world, mnt = quota_world, quota_world / "mnt"
    make_tree(world / "src", mixed_tree(seed=7))
    nobody.give_to_nobody(world / "src", [])
    set_quota(mnt, "6m")
    over = rcp_as_nobody(world, "-o", "src", "mnt/dst")
    problems = []
    said = over.stdout + over.stderr  # error lines are logged to stdout
    if over.returncode == 0 or "Disk quota exceeded" not in said:
        problems.append(f"exit {over.returncode}: {said[-300:]}")
    if looks_complete_but_is_not(world / "src", mnt / "dst"):
        problems.append("a half-written file looks complete")
    set_quota(mnt, "0")
    again = rcp_as_nobody(world, "-o", "src", "mnt/dst")
    if again.returncode != 0 or tree_compare(world / "src", mnt / "dst"):
        problems.append(
            f"under a larger quota: exit {again.returncode} {again.stderr[-200:]}"
        )
    figure.trial("over an XFS user quota", problems, lost=True)
    assert not problems


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A directory holding an old copy, bind-mounted read-only onto itself."""
    path = tmp_path / "dst"
    path.mkdir()
    subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


def test_a_read_only_destination_changes_nothing_and_is_reported(
    tmp_path: Path, read_only: Path, figure: Figure, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "src", mixed_tree(seed=4))
    old = rcp("-o", str(src), str(read_only))  # an old copy, then the source moves on
    assert old.returncode == 0, old.stderr
    (src / "small" / "d1" / "f1").write_bytes(b"changed since")
    (src / "new").write_bytes(b"new")
    before = state(read_only)
    subprocess.run(["mount", "-o", "remount,ro,bind", str(read_only)], check=True)
    refused = rcp("-o", str(src), str(read_only))
    problems = []
    said = refused.stdout + refused.stderr  # error lines are logged to stdout
    if refused.returncode == 0 or "Read-only file system" not in said:
        problems.append(f"exit {refused.returncode}: {said[-300:]}")
    if state(read_only) != before:
        problems.append("the read-only copy changed")
    subprocess.run(["mount", "-o", "remount,rw,bind", str(read_only)], check=True)
    again = rcp("-o", str(src), str(read_only))
    if again.returncode != 0 or tree_compare(src, read_only):
        problems.append(f"once writable: exit {again.returncode} {again.stderr[-200:]}")
    figure.trial("a read-only destination", problems, lost=True)
    assert not problems


def test_unreadable_source_subtrees_fail_alone(
    figure: Figure, tree_compare: TreeCompare
) -> None:
    """As an unprivileged user: three directories and a file it may not read are
    counted as four errors (the summary names them), missing from the copy; the
    rest is exact."""
    with nobody.world_dir() as world:
        spec = {k: v for k, v in mixed_tree(seed=6).items() if not k.startswith("hard")}
        make_tree(world / "src", spec)
        locked = ["src/small/d2", "src/small/d9", "src/links"]
        unreadable = [*locked, "src/small/d4/f5"]
        give_to_nobody(world, unreadable)
        done = rcp_as_nobody(world, "--summary-json", "s.json", "src", "dst")
        for rel in unreadable:
            os.chmod(world / rel, 0o755)
        problems = []
        if done.returncode != 1:
            problems.append(f"exit {done.returncode}: {done.stderr[-300:]}")
        summary = json.loads((world / "s.json").read_text())
        examples = {error["example"] for error in summary["error_list"]}
        if summary["errors"] != len(unreadable) or not examples <= set(unreadable):
            problems.append(f"reported {summary['errors']} errors: {examples}")
        differences = [
            d
            for d in tree_compare(world / "src", world / "dst")
            if not any(d.startswith(f"'{r[4:]}") for r in unreadable)
            and not d.startswith(("'small':", "'.':", "'small/d4':"))
        ]
        if differences:
            problems.append(f"other entries differ: {differences[:3]}")
        figure.trial("unreadable source subtrees", problems, lost=True)
    assert not problems
