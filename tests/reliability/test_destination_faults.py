"""Real failures of real filesystems: a full destination, a read-only one, and a
source with subtrees the copier may not read.

Each is made the way it happens (a small ext4 filled up, a read-only bind mount,
``chmod 000`` against an unprivileged copier), and each must give: a non-zero exit
with the cause and the path on stderr, nothing half-written that looks complete,
nothing changed where nothing could be written, everything else copied exactly, and
-- once the cause is gone -- an exact copy from the same command.

Figure: failures made / handled.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import nobody
from support.loopfs import SmallFs
from support.nobody import RCP, give_to_nobody, rcp_as_nobody
from support.reliability import (
    Figure,
    looks_complete_but_is_not,
    mixed_tree,
    published,
)
from support.treecmp import TreeCompare
from support.treespec import make_tree

pytestmark = [pytest.mark.privileged, pytest.mark.slow]

MIB = 1 << 20


@pytest.fixture(scope="module")
def figure(figures: list[Figure]) -> Figure:
    return published(figures, "destination", "full, read-only, unreadable subtrees")


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
    before = snapshot(read_only)
    subprocess.run(["mount", "-o", "remount,ro,bind", str(read_only)], check=True)
    refused = rcp("-o", str(src), str(read_only))
    problems = []
    said = refused.stdout + refused.stderr  # error lines are logged to stdout
    if refused.returncode == 0 or "Read-only file system" not in said:
        problems.append(f"exit {refused.returncode}: {said[-300:]}")
    if snapshot(read_only) != before:
        problems.append("the read-only copy changed")
    subprocess.run(["mount", "-o", "remount,rw,bind", str(read_only)], check=True)
    again = rcp("-o", str(src), str(read_only))
    if again.returncode != 0 or tree_compare(src, read_only):
        problems.append(f"once writable: exit {again.returncode} {again.stderr[-200:]}")
    figure.trial("a read-only destination", problems, lost=True)
    assert not problems


def snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    return {
        str(p.relative_to(root)): (
            p.lstat().st_mode,
            p.lstat().st_size,
            p.lstat().st_mtime_ns,
        )
        for p in root.rglob("*")
    }


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
