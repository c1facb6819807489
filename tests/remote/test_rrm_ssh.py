"""``rrm`` with a ``host:/path`` operand through a real sshd on loopback: the session
service it starts there (confined to the operand's parent), what goes, what stays."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import sshd
from support.overssh import at, run_tool
from support.treespec import Dir, File, Spec, Symlink, make_tree

pytestmark = pytest.mark.privileged

RRM = [sys.executable, "-m", "rcp_provider.cli.rrm"]

TREE: Spec = {
    ".": Dir(mode=0o755),
    "a/f": File(b"x" * 100),
    "a/link": Symlink("f"),
    **{f"many/f{i}": b"y" for i in range(20)},
}


def rrm(server: sshd.Sshd, *args: str) -> subprocess.CompletedProcess[str]:
    return run_tool(RRM, server, *args, timeout=120)


def sessions() -> list[str]:
    """The ``rcpd serve --session`` processes running now."""
    found = subprocess.run(
        ["pgrep", "-f", "serve --session"], capture_output=True, text=True, check=False
    )
    return found.stdout.split()


def test_a_remote_tree_goes_its_sibling_stays_and_its_session_ends(
    tmp_path: Path, server: sshd.Sshd
) -> None:
    tree = make_tree(tmp_path / "tree", TREE)
    sibling = make_tree(tmp_path / "tree2", {"keep": b"k"})
    summary = tmp_path / "summary.json"
    done = rrm(server, "--summary-json", str(summary), at(server, tree))
    assert done.returncode == 0, done.stderr
    assert not tree.exists()
    assert (sibling / "keep").read_bytes() == b"k"
    removed = json.loads(summary.read_text())["removed"]
    assert (removed["files"], removed["symlinks"], removed["dirs"]) == (21, 1, 3)
    assert sessions() == []


def test_a_dry_run_on_a_host_removes_nothing(tmp_path: Path, server: sshd.Sshd) -> None:
    tree = make_tree(tmp_path / "tree", TREE)
    before = sorted(p.relative_to(tree) for p in tree.rglob("*"))
    done = rrm(server, "--dry-run", at(server, tree))
    assert done.returncode == 0, done.stderr
    assert "a/f" in done.stdout
    assert sorted(p.relative_to(tree) for p in tree.rglob("*")) == before


def test_a_filesystem_mounted_in_a_remote_tree_is_kept(
    tmp_path: Path, server: sshd.Sshd
) -> None:
    tree = make_tree(tmp_path / "tree", TREE)
    point = tree / "a" / "mnt"
    point.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(point)], check=True
    )
    try:
        (point / "kept").write_bytes(b"k")
        done = rrm(server, at(server, tree))
        assert done.returncode == 0, done.stderr
        assert "another filesystem is mounted here; kept" in done.stdout
        assert (point / "kept").read_bytes() == b"k"
        assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*")) == [
            "a",
            "a/mnt",
            "a/mnt/kept",
        ]
        refused = rrm(server, at(server, point))
        assert refused.returncode == 2
        assert "refusing to remove a mount point (--force)" in refused.stderr
        assert (point / "kept").read_bytes() == b"k"
    finally:
        subprocess.run(["umount", "-l", str(point)], check=True)


def test_what_a_remote_removal_cannot_honour_is_refused_and_nothing_goes(
    tmp_path: Path, server: sshd.Sshd
) -> None:
    tree = make_tree(tmp_path / "tree", TREE)
    local = make_tree(tmp_path / "local", {"f": b"f"})
    for args, words in (
        (["--created-before", "1d", at(server, tree)], "--created-before"),
        ([str(local), at(server, tree)], "local paths"),
        ([at(server, tree / "a" / ".." / "a")], ".."),
        ([at(server, tmp_path / "nowhere")], "no such file or directory"),
    ):
        done = rrm(server, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert words in done.stderr, (args, done.stderr)
    assert (tree / "a" / "f").exists()
    assert (local / "f").exists()
    assert sessions() == []


def test_launch_options_are_refused_without_a_host_operand(tmp_path: Path) -> None:
    local = make_tree(tmp_path / "local", {"f": b"f"})
    done = subprocess.run(
        [*RRM, "--rcpd-path", "/x/rcpd", str(local)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "--rcpd-path" in done.stderr
    assert (local / "f").exists()
