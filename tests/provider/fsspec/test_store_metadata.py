"""POSIX metadata through S3, GCS and Azure (each a real API on loopback): ``rcp``
writes a file's mode and mtime into its object's metadata with the upload, and a
directory's into its marker ``DIR/``, reads them back, keeps them on the way down,
and compares by them, so an unchanged rerun copies nothing and a same-size edit is
copied; an empty directory survives."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from benchmarks.objectstores import SERVERS, Store
from support.rcprun import program
from support.treecmp import compare_trees, rsync_differences
from support.treespec import Dir, File, make_tree

T1 = 1_600_000_000_123_456_789
T2 = 1_500_000_000_000_000_001
TREE = {
    ".": Dir(mode=0o750, mtime_ns=T2 + 7),
    "private": File(b"only mine\n", mode=0o600, mtime_ns=T1),
    "empty": Dir(mode=0o700, mtime_ns=T1 + 5),
    "tools": Dir(mode=0o2755, mtime_ns=T2 + 3),
    "tools/run": File(b"#!/bin/sh\n", mode=0o751, mtime_ns=T2),
    "tools/deep/data.bin": File(bytes(range(256)) * 9, mode=0o644, mtime_ns=T1 + 1),
}
STORES = sorted(SERVERS)


def _rcp(store: Store, tmp_path: Path, *args: str) -> dict[str, Any]:
    """Run ``rcp`` on this store; its summary."""
    run = program(args, store.environ())
    assert run.code == 0, run
    assert run.summary is not None, run
    return run.summary


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> Store:
    found: Store = request.getfixturevalue(request.param)
    return found


def _compared(src: Path, dst: Path) -> list[str]:
    """Differences between the two trees: kinds, contents, modes and mtimes."""
    return compare_trees(src, dst, mode=True, times=True)


def test_a_tree_comes_back_from_the_store_with_its_modes_and_times(
    store: Store, tmp_path: Path
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    where = store.url(f"{store.bucket()}/tree")
    _rcp(store, tmp_path, str(src), where)
    _rcp(store, tmp_path, where, str(tmp_path / "back"))
    assert _compared(src, tmp_path / "back") == []
    assert rsync_differences(src, tmp_path / "back") == ""


OWNED = {
    **TREE,
    "private": File(b"only mine\n", mode=0o600, mtime_ns=T1, owner=(1234, 5678)),
    "tools": Dir(mode=0o2755, mtime_ns=T2 + 3, owner=(4321, 8765)),
}


def test_owners_go_to_the_store_and_come_back_with_p_owner(
    store: Store, tmp_path: Path
) -> None:
    """As root (this suite's user), ``-p owner`` keeps each file's and directory's
    uid and gid in its metadata (rclone's ``uid``/``gid``) and sets them again on
    the way down: rsync -a sees no difference."""
    src = make_tree(tmp_path / "src", OWNED)
    bucket = store.bucket()
    where, back = store.url(f"{bucket}/tree"), tmp_path / "back"
    _rcp(store, tmp_path, "-p", "mode,times,owner", str(src), where)
    fs = store.fs()
    key = f"{bucket}/tree/private"
    metadata = fs.metadata(key) if store.name == "s3" else fs.info(key)["metadata"]
    assert {k: metadata[k] for k in ("uid", "gid")} == {"uid": "1234", "gid": "5678"}
    _rcp(store, tmp_path, "-p", "mode,times,owner", where, str(back))
    assert compare_trees(src, back, mode=True, times=True, owner=True) == []
    assert (back / "tools").stat().st_uid == 4321
    assert rsync_differences(src, back) == ""
    # Without -p owner the copy is the copier's, as cp's is.
    _rcp(store, tmp_path, where, str(tmp_path / "mine"))
    assert (tmp_path / "mine" / "private").stat().st_uid == os.getuid()


def test_the_metadata_is_rclones_keys_on_the_object_itself(
    store: Store, tmp_path: Path
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    bucket = store.bucket()
    _rcp(store, tmp_path, str(src), store.url(f"{bucket}/tree"))
    fs = store.fs()
    key = f"{bucket}/tree/private"
    metadata = fs.metadata(key) if store.name == "s3" else fs.info(key)["metadata"]
    mtime = (
        "1600000000.123456789"
        if store.name == "s3"
        else "2020-09-13T12:26:40.123456789Z"
    )
    assert {k: metadata[k] for k in ("mtime", "mode")} == {
        "mtime": mtime,
        "mode": "100600",
    }


def test_an_unchanged_rerun_copies_nothing_and_a_same_size_edit_is_copied(
    store: Store, tmp_path: Path
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    bucket = store.bucket()
    where = store.url(f"{bucket}/tree")
    assert _rcp(store, tmp_path, str(src), where)["copied"]["files"] == 3
    again = _rcp(store, tmp_path, "-o", str(src), where)
    assert (again["copied"]["files"], again["unchanged"]["files"]) == (0, 3)

    (src / "private").write_bytes(b"only MINE\n")  # the same size, a new mtime
    edited = _rcp(store, tmp_path, "-o", str(src), where)
    assert (edited["copied"]["files"], edited["unchanged"]["files"]) == (1, 2)
    assert store.fs().cat_file(f"{bucket}/tree/private") == b"only MINE\n"

    back = tmp_path / "back"
    _rcp(store, tmp_path, where, str(back))
    assert _compared(src, back) == []
    down = _rcp(store, tmp_path, "-o", where, str(back))
    assert (down["copied"]["files"], down["unchanged"]["files"]) == (0, 3)
    os.utime(back / "private")  # the copy changed here, after the upload: replaced
    fixed = _rcp(store, tmp_path, "-o", where, str(back))
    assert (fixed["copied"]["files"], fixed["unchanged"]["files"]) == (1, 2)
    assert _compared(src, back) == []
