"""Property: any generated tree copies exactly, and a rerun changes nothing.

Trees come from ``support.strategies.trees()``: odd names (spaces, newlines, unicode,
non-UTF-8, 255 bytes), empty to sparse files, symlinks (dangling, absolute, escaping),
hard links, FIFOs, unusual modes (set-id as root) and ns mtimes. The copy must match in
content, type, link target, mode, mtime and hard-link structure; a second run with
overwrite must report every entry unchanged and copy no data.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from rcp_core import CopySettings, ExistingPolicy, Summary, copy
from support.strategies import trees
from support.treecmp import compare_trees
from support.treespec import Entry, make_tree

OVERWRITE = CopySettings(existing=ExistingPolicy.OVERWRITE)
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def census(root: Path) -> Counter[str]:
    """What a rerun should report as unchanged: one file per inode, the other names
    of an inode as hard links, and dirs (root included), symlinks and FIFOs."""
    counts: Counter[str] = Counter()
    names_per_inode: Counter[tuple[int, int]] = Counter()
    for dirpath, dirnames, filenames in os.walk(os.fsencode(root)):
        counts["dirs"] += 1
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISREG(st.st_mode):
                names_per_inode[(st.st_dev, st.st_ino)] += 1
            elif stat.S_ISLNK(st.st_mode):
                counts["symlinks"] += 1
            elif not stat.S_ISDIR(st.st_mode):
                counts["specials"] += 1
    counts["files"] = len(names_per_inode)
    counts["hardlinks"] = sum(names_per_inode.values()) - len(names_per_inode)
    return counts


def check_copy_and_rerun(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst``: equal trees; then a rerun leaves everything unchanged."""
    first = copy(str(src), str(dst))
    assert first["errors"] == 0
    assert compare_trees(src, dst, mode=True, times=True, hardlinks=True) == []
    expected = census(src)
    assert first["copied.files"] == expected["files"]
    assert first["copied.hardlinks"] == expected["hardlinks"]

    second = copy(str(src), str(dst), OVERWRITE)
    assert_all_unchanged(second, expected)
    assert compare_trees(src, dst, mode=True, times=True, hardlinks=True) == []


def assert_all_unchanged(summary: Summary, expected: Counter[str]) -> None:
    for kind in ("files", "dirs", "symlinks", "hardlinks", "specials", "bytes"):
        assert summary[f"copied.{kind}"] == 0, kind
        assert summary[f"removed.{kind}"] == 0, kind
    for kind in ("files", "dirs", "symlinks", "hardlinks", "specials"):
        assert summary[f"unchanged.{kind}"] == expected[kind], kind
    assert summary["errors"] == 0


@pytest.mark.slow
@SETTINGS
@given(spec=trees())
def test_copy_equals_source_and_rerun_is_noop(
    tmp_path_factory: pytest.TempPathFactory, spec: dict[str, Entry]
) -> None:
    """Any generated tree copies exactly and a rerun with overwrite copies nothing."""
    work = tmp_path_factory.mktemp("prop")
    try:
        src = make_tree(work / "src", spec)
        check_copy_and_rerun(src, work / "dst")
    finally:
        shutil.rmtree(work)


@settings(SETTINGS, max_examples=15)
@given(spec=trees())
def test_copy_onto_xfs_reflink_mount(
    tmp_path_factory: pytest.TempPathFactory, xfs_reflink: Path, spec: dict[str, Entry]
) -> None:
    """The same property holds copying from the local disk onto the XFS mount."""
    work = tmp_path_factory.mktemp("prop-xfs-src")
    target = Path(tempfile.mkdtemp(prefix="prop-", dir=xfs_reflink))
    try:
        src = make_tree(work / "src", spec)
        check_copy_and_rerun(src, target / "dst")
    finally:
        shutil.rmtree(work)
        shutil.rmtree(target)
