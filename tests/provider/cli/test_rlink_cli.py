"""``rlink``: hard-linked snapshots, and updates that link the unchanged and copy the
rest, on real trees (inodes tell what is shared)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rcp_core import CopySettings, UsageError
from support.treecmp import TreeCompare
from support.treespec import Dir, File, Spec, Symlink, make_tree

RLINK = [sys.executable, "-m", "rcp_provider.cli.rlink"]
T0 = 1_600_000_000 * 10**9
DAY1: Spec = {
    ".": Dir(0o755, T0),
    "same.txt": File(b"unchanged", 0o640, T0),
    "edited.txt": File(b"first", 0o644, T0),
    "touched.txt": File(b"12345", 0o644, T0),
    "gone.txt": File(b"removed on day 2", 0o644, T0),
    "sub": Dir(0o750, T0 + 1),
    "sub/deep.bin": File(os.urandom(5000), 0o600, T0),
    "sub/link": Symlink("deep.bin", T0),  # a fixed time: both days have the same link
}
DAY2: Spec = {
    **{k: v for k, v in DAY1.items() if k != "gone.txt"},
    "edited.txt": File(b"second!", 0o644, T0 + 5),
    "touched.txt": File(b"12345", 0o644, T0 + 9),  # same size and bytes, new mtime
    "new.txt": File(b"added on day 2", 0o644, T0),
}


def rlink(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RLINK, *map(str, args)], capture_output=True, text=True, timeout=120
    )


def inode(path: Path) -> int:
    return path.stat().st_ino


def test_a_snapshot_links_every_file(tmp_path: Path, tree_compare: TreeCompare) -> None:
    day1 = make_tree(tmp_path / "day1", DAY1)
    done = rlink(day1, tmp_path / "snap1")
    assert done.returncode == 0, done.stderr
    snap = tmp_path / "snap1"
    assert tree_compare(day1, snap) == []
    for name in ("same.txt", "edited.txt", "gone.txt", "sub/deep.bin"):
        assert inode(snap / name) == inode(day1 / name)
    assert (snap / "sub" / "link").is_symlink()
    assert rlink(day1, snap).returncode == 2  # DST exists: refused, untouched


def test_an_update_links_the_unchanged_and_copies_the_rest(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    day1 = make_tree(tmp_path / "day1", DAY1)
    day2 = make_tree(tmp_path / "day2", DAY2)
    done = rlink(day1, tmp_path / "snap2", "--update", day2, "--summary")
    assert done.returncode == 0, done.stderr
    snap = tmp_path / "snap2"
    assert tree_compare(day2, snap) == []  # exactly day 2
    assert inode(snap / "same.txt") == inode(day1 / "same.txt")
    assert inode(snap / "sub" / "deep.bin") == inode(day1 / "sub" / "deep.bin")
    for name in ("edited.txt", "touched.txt", "new.txt"):
        assert inode(snap / name) not in (inode(day2 / name), _inode_or(day1 / name))
    assert "link 2" in done.stdout
    by_size = rlink(
        day1, tmp_path / "snap3", "--update", day2, "--update-compare", "size"
    )
    assert by_size.returncode == 0, by_size.stderr
    assert inode(tmp_path / "snap3" / "touched.txt") == inode(day1 / "touched.txt")


def _inode_or(path: Path) -> int:
    return inode(path) if path.exists() else -1


def test_delete_mirrors_into_an_existing_snapshot_and_dry_runs_change_nothing(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    day1 = make_tree(tmp_path / "day1", DAY1)
    day2 = make_tree(tmp_path / "day2", DAY2)
    snap = tmp_path / "snap"
    assert rlink(day1, snap).returncode == 0
    dry = rlink(day1, snap, "--update", day2, "--delete", "--dry-run", "brief")
    assert dry.returncode == 0, dry.stderr
    assert (snap / "gone.txt").exists()
    done = rlink(day1, snap, "--update", day2, "--delete")
    assert done.returncode == 0, done.stderr
    assert tree_compare(day2, snap) == []
    assert inode(snap / "same.txt") == inode(day1 / "same.txt")


def test_bad_input(tmp_path: Path) -> None:
    assert rlink(tmp_path / "missing", tmp_path / "x").returncode == 2
    day1 = make_tree(tmp_path / "day1", DAY1)
    assert rlink(day1, tmp_path / "x", "--update-compare", "checksum").returncode == 2
    with pytest.raises(UsageError, match="absolute"):
        CopySettings(link_dest="relative/dir")


@pytest.mark.parametrize(
    ("where", "kind"),
    [
        ("memory://snap", "URL store"),
        ("otherhost:/snap", "host:"),
        ("rcp://otherhost:7000/snap", "rcpd serve"),
    ],
)
@pytest.mark.parametrize("role", ["src", "dst", "update"])
def test_an_operand_not_of_this_host_is_refused_by_name(
    tmp_path: Path, where: str, kind: str, role: str
) -> None:
    """A hard link cannot reach another host or a store: each such operand is one
    line naming it and its kind, exit 2, nothing made."""
    day1 = make_tree(tmp_path / "day1", DAY1)
    args = {"src": day1, "dst": tmp_path / "snap", "update": None}
    args[role] = where if role != "update" else None
    extra = ["--update", where] if role == "update" else []
    result = rlink(args["src"], args["dst"], *extra)
    assert result.returncode == 2, result
    assert f"{where}: rlink links trees of this host's filesystem, not a {kind}" in (
        result.stderr
    )
    assert not (tmp_path / "snap").exists()


def test_a_file_url_is_a_tree_of_this_host(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    day1 = make_tree(tmp_path / "day1", DAY1)
    result = rlink(f"file://{day1}", f"file://{tmp_path / 'snap'}")
    assert result.returncode == 0, result
    assert tree_compare(day1, tmp_path / "snap") == []
