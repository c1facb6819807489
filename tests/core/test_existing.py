"""Existing destinations: overwrite, update, ignore-existing, --delete and dry runs.

Every test builds real trees, runs :func:`rcp_core.copy` and inspects the destination
(types, bytes, inodes, leftovers) and the summary counters.
"""

from __future__ import annotations

import logging
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import rcp_core
from rcp_core import CompareAttr, CopySettings, DryRun, ExistingPolicy, Summary
from support.treecmp import TreeCompare
from support.treespec import Dir, Entry, File, HardLink, Symlink, make_tree

T0 = 1_600_000_000 * 10**9
NEWER = T0 + 1000 * 10**9
OLDER = T0 - 1000 * 10**9
KINDS = ("file", "dir", "symlink")
OVERWRITE = CopySettings(existing=ExistingPolicy.OVERWRITE)

# (type, inode, data) for every entry; data is the content of a file, the target of a
# symlink; non-directories also record mode and mtime (directories get their metadata
# re-applied when merged into, which is not "touching" their entries).
Snap = dict[bytes, tuple[object, ...]]


def snapshot(root: Path) -> Snap:
    """Everything observable about the tree at ``root``, keyed by relative path."""
    out: Snap = {}
    base = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(base):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, base)] = describe(path)
    out[b"."] = describe(base)
    return out


def describe(path: bytes) -> tuple[object, ...]:
    st = os.lstat(path)
    kind = stat.S_IFMT(st.st_mode)
    if stat.S_ISDIR(st.st_mode):
        return (kind, st.st_ino)
    if stat.S_ISLNK(st.st_mode):
        data: object = os.readlink(path)
    else:
        with open(path, "rb") as f:
            data = f.read()
    return (kind, st.st_ino, data, stat.S_IMODE(st.st_mode), st.st_mtime_ns)


def full_snapshot(root: Path) -> Snap:
    """Like :func:`snapshot`, plus directory mode and mtime (for dry runs)."""
    snap = snapshot(root)
    for rel in snap:
        st = os.lstat(os.path.join(os.fsencode(root), rel))
        snap[rel] = (*snap[rel], stat.S_IMODE(st.st_mode), st.st_mtime_ns)
    return snap


def temp_leftovers(root: Path) -> list[str]:
    """Names of the engine's temporary files (``.rcp-*``) anywhere under ``root``."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        found += [
            os.path.join(dirpath, n)
            for n in [*dirnames, *filenames]
            if n.startswith(".rcp-")
        ]
    return found


def source_entry(kind: str) -> dict[str, Entry]:
    if kind == "file":
        return {"e": File(b"source data\n", 0o644, T0)}
    if kind == "dir":
        return {
            "e": Dir(0o755, T0),
            "e/inner": File(b"inner from the source", 0o644, T0),
            "e/added": File(b"only in the source", 0o644, T0),
        }
    return {"e": Symlink("target-src", T0)}


def dest_entry(kind: str, mtime_ns: int) -> dict[str, Entry]:
    if kind == "file":
        return {"e": File(b"old", 0o600, mtime_ns)}
    if kind == "dir":
        return {
            "e": Dir(0o700, mtime_ns),
            "e/inner": File(b"old inner", 0o600, mtime_ns),
        }
    return {"e": Symlink("target-dst", mtime_ns)}


def build_pair(tmp_path: Path, src_kind: str, dst_kind: str, dst_mtime: int) -> None:
    make_tree(
        tmp_path / "src",
        {
            ".": Dir(0o755, T0),
            "new": File(b"missing in dst", 0o644, T0),
            **source_entry(src_kind),
        },
    )
    make_tree(
        tmp_path / "dst", {".": Dir(0o755, T0), **dest_entry(dst_kind, dst_mtime)}
    )


def run(tmp_path: Path, settings: CopySettings) -> Summary:
    return rcp_core.copy(str(tmp_path / "src"), str(tmp_path / "dst"), settings)


def assert_replaced(
    tmp_path: Path,
    summary: Summary,
    src_kind: str,
    dst_kind: str,
    tree_compare: TreeCompare,
) -> None:
    """The destination equals the source: types, content, modes and mtimes."""
    assert tree_compare(tmp_path / "src", tmp_path / "dst") == []
    assert temp_leftovers(tmp_path / "dst") == []
    assert summary["errors"] == 0
    if src_kind == "file":
        assert summary["copied.files"] == 2  # e and new
    elif src_kind == "symlink":
        assert summary["copied.symlinks"] == 1
    if dst_kind == "dir" and src_kind != "dir":
        # the directory in the way went, with its content
        assert (summary["removed.dirs"], summary["removed.files"]) == (1, 1)
    if src_kind == "dir" and dst_kind != "dir":
        assert summary[f"removed.{dst_kind}s"] == 1
        assert summary["copied.dirs"] == 1


def assert_kept(
    tmp_path: Path, before: Snap, summary: Summary, src_kind: str, dst_kind: str
) -> None:
    """Every existing entry is untouched; only the missing ones were added."""
    after = snapshot(tmp_path / "dst")
    for rel, seen in before.items():
        assert after.get(rel) == seen, rel
    added = {b"new"} | (
        {b"e/added"} if (src_kind, dst_kind) == ("dir", "dir") else set()
    )
    assert set(after) - set(before) == added
    for rel in added:
        assert (tmp_path / "dst" / os.fsdecode(rel)).read_bytes() == (
            tmp_path / "src" / os.fsdecode(rel)
        ).read_bytes()
    assert summary["errors"] == 0
    if (src_kind, dst_kind) == ("dir", "dir"):
        assert summary["skipped.files"] == 1  # e/inner
    else:
        assert summary[f"skipped.{src_kind}s"] == 1
    assert temp_leftovers(tmp_path / "dst") == []


@pytest.mark.parametrize("dst_kind", KINDS)
@pytest.mark.parametrize("src_kind", KINDS)
def test_overwrite_makes_destination_equal_to_source(
    tmp_path: Path, src_kind: str, dst_kind: str, tree_compare: TreeCompare
) -> None:
    """Under OVERWRITE any existing entry ends up with the source's type and content."""
    build_pair(tmp_path, src_kind, dst_kind, OLDER)
    summary = run(tmp_path, OVERWRITE)
    assert_replaced(tmp_path, summary, src_kind, dst_kind, tree_compare)


@pytest.mark.parametrize("dst_kind", KINDS)
@pytest.mark.parametrize("src_kind", KINDS)
def test_ignore_existing_leaves_existing_entries_alone(
    tmp_path: Path, src_kind: str, dst_kind: str
) -> None:
    """IGNORE_EXISTING keeps bytes, inode and type of what exists; adds what is missing."""
    build_pair(tmp_path, src_kind, dst_kind, OLDER)
    before = snapshot(tmp_path / "dst")
    summary = run(tmp_path, CopySettings(existing=ExistingPolicy.IGNORE_EXISTING))
    assert_kept(tmp_path, before, summary, src_kind, dst_kind)


@pytest.mark.parametrize("dst_kind", KINDS)
@pytest.mark.parametrize("src_kind", KINDS)
def test_update_keeps_newer_destination(
    tmp_path: Path, src_kind: str, dst_kind: str
) -> None:
    """UPDATE keeps a destination entry whose mtime is newer than the source's."""
    build_pair(tmp_path, src_kind, dst_kind, NEWER)
    before = snapshot(tmp_path / "dst")
    summary = run(tmp_path, CopySettings(existing=ExistingPolicy.UPDATE))
    assert_kept(tmp_path, before, summary, src_kind, dst_kind)


@pytest.mark.parametrize("dst_kind", KINDS)
@pytest.mark.parametrize("src_kind", KINDS)
def test_update_replaces_older_destination(
    tmp_path: Path, src_kind: str, dst_kind: str, tree_compare: TreeCompare
) -> None:
    """UPDATE replaces a destination entry older than the source, like OVERWRITE."""
    build_pair(tmp_path, src_kind, dst_kind, OLDER)
    summary = run(tmp_path, CopySettings(existing=ExistingPolicy.UPDATE))
    assert_replaced(tmp_path, summary, src_kind, dst_kind, tree_compare)


@pytest.mark.parametrize("policy", [ExistingPolicy.OVERWRITE, ExistingPolicy.UPDATE])
def test_update_with_equal_mtime_keeps_and_overwrite_leaves_unchanged(
    tmp_path: Path, policy: ExistingPolicy
) -> None:
    """A destination file as new as the source is not replaced by UPDATE either."""
    make_tree(tmp_path / "src", {"f": File(b"abc", 0o644, T0)})
    make_tree(tmp_path / "dst", {"f": File(b"xyz", 0o644, T0)})
    ino = (tmp_path / "dst" / "f").stat().st_ino
    summary = run(tmp_path, CopySettings(existing=policy))
    assert (tmp_path / "dst" / "f").read_bytes() == b"xyz"
    assert (tmp_path / "dst" / "f").stat().st_ino == ino
    key = "unchanged.files" if policy is ExistingPolicy.OVERWRITE else "skipped.files"
    assert summary[key] == 1
    assert summary["copied.bytes"] == 0


def test_symlink_with_same_target_is_unchanged(tmp_path: Path) -> None:
    """Symlinks are compared by target and times: both the same -> unchanged."""
    make_tree(tmp_path / "src", {"l": Symlink("somewhere", T0)})
    make_tree(tmp_path / "dst", {"l": Symlink("somewhere", T0)})
    ino = os.lstat(tmp_path / "dst" / "l").st_ino
    summary = run(tmp_path, OVERWRITE)
    assert summary["unchanged.symlinks"] == 1
    assert summary["copied.symlinks"] == 0
    assert os.lstat(tmp_path / "dst" / "l").st_ino == ino


def test_symlink_with_same_target_and_other_times_gets_the_sources(
    tmp_path: Path,
) -> None:
    """A link a killed run made but never dated: its times are set in place (the
    same link, no replacement), so the rerun's copy is exact."""
    make_tree(tmp_path / "src", {"l": Symlink("somewhere", T0)})
    make_tree(tmp_path / "dst", {"l": Symlink("somewhere", OLDER)})
    ino = os.lstat(tmp_path / "dst" / "l").st_ino
    summary = run(tmp_path, OVERWRITE)
    assert summary["copied.symlinks"] == 1
    assert os.lstat(tmp_path / "dst" / "l").st_ino == ino
    assert os.lstat(tmp_path / "dst" / "l").st_mtime_ns == T0
    assert os.readlink(tmp_path / "dst" / "l") == "somewhere"


def test_identical_files_are_skipped(tmp_path: Path) -> None:
    """Same size and mtime: the file counts as unchanged and is not rewritten."""
    make_tree(tmp_path / "src", {"a": File(b"1" * 100, 0o644, T0), "b": b"x"})
    make_tree(tmp_path / "dst", {"a": File(b"2" * 100, 0o644, T0)})
    ino = (tmp_path / "dst" / "a").stat().st_ino
    summary = run(tmp_path, OVERWRITE)
    assert summary["unchanged.files"] == 1
    assert summary["copied.files"] == 1  # b
    # documented: size+mtime decides, so different bytes of the same size survive
    assert (tmp_path / "dst" / "a").read_bytes() == b"2" * 100
    assert (tmp_path / "dst" / "a").stat().st_ino == ino


def flipped_byte_pair(tmp_path: Path) -> tuple[bytes, int]:
    """A source file and a destination copy differing in one byte, same size+mtime."""
    data = os.urandom(300_000)
    flipped = bytearray(data)
    flipped[123_456] ^= 0xFF
    make_tree(tmp_path / "src", {"f": File(data, 0o644, T0)})
    make_tree(tmp_path / "dst", {"f": File(bytes(flipped), 0o644, T0)})
    return data, (tmp_path / "dst" / "f").stat().st_ino


def test_checksum_compare_replaces_same_size_and_mtime_with_other_bytes(
    tmp_path: Path,
) -> None:
    """With CHECKSUM in overwrite_compare a one-byte difference is found and fixed."""
    data, ino = flipped_byte_pair(tmp_path)
    settings = CopySettings(
        existing=ExistingPolicy.OVERWRITE,
        overwrite_compare=frozenset(
            {CompareAttr.SIZE, CompareAttr.MTIME, CompareAttr.CHECKSUM}
        ),
    )
    summary = run(tmp_path, settings)
    assert (tmp_path / "dst" / "f").read_bytes() == data
    assert (tmp_path / "dst" / "f").stat().st_ino != ino
    assert summary["copied.files"] == 1
    assert summary["unchanged.files"] == 0


def test_checksum_compare_keeps_identical_content(tmp_path: Path) -> None:
    """With CHECKSUM an identical file is still unchanged (content compared, equal)."""
    data = os.urandom(50_000)
    make_tree(tmp_path / "src", {"f": File(data, 0o644, T0)})
    make_tree(tmp_path / "dst", {"f": File(data, 0o644, T0)})
    ino = (tmp_path / "dst" / "f").stat().st_ino
    settings = CopySettings(
        existing=ExistingPolicy.OVERWRITE,
        overwrite_compare=frozenset({CompareAttr.CHECKSUM}),
    )
    summary = run(tmp_path, settings)
    assert summary["unchanged.files"] == 1
    assert (tmp_path / "dst" / "f").stat().st_ino == ino


def test_without_checksum_a_flipped_byte_is_skipped(tmp_path: Path) -> None:
    """Documented limit of size+mtime: same size and mtime, other bytes -> skipped."""
    data, ino = flipped_byte_pair(tmp_path)
    summary = run(tmp_path, OVERWRITE)
    assert summary["unchanged.files"] == 1
    assert (tmp_path / "dst" / "f").read_bytes() != data
    assert (tmp_path / "dst" / "f").stat().st_ino == ino


def test_replacement_is_a_rename_over_the_old_file(tmp_path: Path) -> None:
    """The old inode is never written: a reader holding it still sees the old bytes."""
    make_tree(tmp_path / "src", {"f": File(b"new content" * 1000, 0o644, T0)})
    make_tree(tmp_path / "dst", {"f": File(b"old content", 0o600, OLDER)})
    old_ino = (tmp_path / "dst" / "f").stat().st_ino
    with open(tmp_path / "dst" / "f", "rb") as held:
        summary = run(tmp_path, OVERWRITE)
        assert held.read() == b"old content"
        assert os.fstat(held.fileno()).st_nlink == 0  # unlinked by the rename
    assert (tmp_path / "dst" / "f").stat().st_ino != old_ino
    assert (tmp_path / "dst" / "f").read_bytes() == b"new content" * 1000
    assert summary["copied.files"] == 1
    assert temp_leftovers(tmp_path / "dst") == []


def test_long_name_is_replaced_through_a_short_enough_temp_name(
    tmp_path: Path,
) -> None:
    """A 255-byte name can be replaced: the temporary name stays within NAME_MAX."""
    name = "é" * 127 + "x"  # 255 bytes in UTF-8
    make_tree(tmp_path / "src", {name: File(b"new", 0o644, T0)})
    make_tree(tmp_path / "dst", {name: File(b"older!", 0o644, OLDER)})
    summary = run(tmp_path, OVERWRITE)
    assert summary["errors"] == 0
    assert (tmp_path / "dst" / name).read_bytes() == b"new"
    assert temp_leftovers(tmp_path / "dst") == []


def mixed_spec() -> dict[str, Entry]:
    return {
        ".": Dir(0o755, T0),
        "a": File(os.urandom(70_000), 0o644, T0),
        "d": Dir(0o750, T0),
        "d/b": File(b"bee", 0o600, T0),
        "d/e": Dir(0o700, T0),
        "d/e/c": File(b"", 0o644, T0),
        "d/link": Symlink("../a", T0),
        "hard": HardLink("a"),
    }


def test_second_overwrite_run_copies_nothing(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """Rerunning with OVERWRITE finds everything unchanged and copies 0 bytes."""
    make_tree(tmp_path / "src", mixed_spec())
    first = run(tmp_path, CopySettings())
    assert first["copied.bytes"] > 0
    before = snapshot(tmp_path / "dst")
    second = run(tmp_path, OVERWRITE)
    assert second["copied.bytes"] == 0
    assert second["copied.files"] == second["copied.symlinks"] == 0
    assert second["copied.dirs"] == second["copied.hardlinks"] == 0
    assert second["unchanged.files"] == 3
    assert second["unchanged.hardlinks"] == 1
    assert second["unchanged.symlinks"] == 1
    assert second["unchanged.dirs"] == 3
    assert snapshot(tmp_path / "dst") == before
    assert tree_compare(tmp_path / "src", tmp_path / "dst") == []


# -- delete ---------------------------------------------------------------------------


def test_delete_removes_extraneous_entries_and_counts_them(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """--delete makes a mirror: extra files, dirs (with content) and symlinks go."""
    make_tree(tmp_path / "src", mixed_spec())
    run(tmp_path, CopySettings())
    make_tree(
        tmp_path / "dst",
        {
            "extra-file": b"12345",
            "d/extra-link": Symlink("a"),
            "d/e/extra-dir": Dir(),
            "d/e/extra-dir/x": b"xx",
            "d/e/extra-dir/sub": Dir(),
            "d/e/extra-dir/sub/y": b"yyy",
            "d/e/extra-dir/sub/l": Symlink("/etc"),
        },
    )
    summary = run(
        tmp_path, CopySettings(existing=ExistingPolicy.OVERWRITE, delete=True)
    )
    assert summary["removed.files"] == 3
    assert summary["removed.bytes"] == 10
    assert summary["removed.dirs"] == 2
    assert summary["removed.symlinks"] == 2
    assert summary["copied.bytes"] == 0
    assert tree_compare(tmp_path / "src", tmp_path / "dst") == []


def test_delete_implies_overwrite(tmp_path: Path, tree_compare: TreeCompare) -> None:
    """``delete`` alone may change an existing destination (it means mirror)."""
    make_tree(tmp_path / "src", {"f": File(b"new", 0o644, T0)})
    make_tree(tmp_path / "dst", {"f": File(b"older", 0o644, OLDER), "gone": b"x"})
    summary = run(tmp_path, CopySettings(delete=True))
    assert summary["removed.files"] == 1
    assert tree_compare(tmp_path / "src", tmp_path / "dst", times=False) == []


def test_delete_protects_excluded_entries(tmp_path: Path) -> None:
    """Excluded names are not ours: --delete leaves them, --delete-excluded removes."""
    make_tree(tmp_path / "src", {"keep.txt": b"k", "a.log": b"src log"})
    make_tree(
        tmp_path / "dst",
        {"a.log": b"dst log", "b.log": b"extra log", "extra.txt": b"e"},
    )
    dst = tmp_path / "dst"
    summary = run(tmp_path, CopySettings(delete=True, excludes=["*.log"]))
    assert (dst / "a.log").read_bytes() == b"dst log"
    assert (dst / "b.log").read_bytes() == b"extra log"
    assert not (dst / "extra.txt").exists()
    assert summary["removed.files"] == 1
    assert summary["skipped.files"] == 1  # the source's a.log

    summary = run(
        tmp_path, CopySettings(delete=True, delete_excluded=True, excludes=["*.log"])
    )
    # excluded entries go even when the source has them (they are not copied)
    assert sorted(os.listdir(dst)) == ["keep.txt"]
    assert summary["removed.files"] == 2


def test_delete_protects_excluded_entries_inside_extraneous_dirs(
    tmp_path: Path,
) -> None:
    """An excluded entry stays protected inside a directory the source lacks.

    The extraneous directory loses what is not protected and stays for what is (as
    rsync does); with --delete-excluded it goes whole.
    """
    make_tree(tmp_path / "src", {"keep.txt": b"k"})
    make_tree(
        tmp_path / "dst",
        {
            "sub/c.log": b"protected",
            "sub/d.txt": b"extraneous",
            "sub/deeper/e.log": b"",
        },
    )
    dst = tmp_path / "dst"
    summary = run(tmp_path, CopySettings(delete=True, excludes=["*.log"]))
    assert (dst / "sub" / "c.log").read_bytes() == b"protected"
    assert (dst / "sub" / "deeper" / "e.log").exists()
    assert not (dst / "sub" / "d.txt").exists()
    assert summary["errors"] == 0

    summary = run(
        tmp_path, CopySettings(delete=True, delete_excluded=True, excludes=["*.log"])
    )
    assert sorted(os.listdir(dst)) == ["keep.txt"]


def test_delete_removes_symlinks_to_outside_not_their_targets(tmp_path: Path) -> None:
    """A destination symlink pointing out of the tree is unlinked; the target lives."""
    outside = tmp_path / "outside"
    make_tree(outside, {"file.txt": b"precious", "dir/inner.txt": b"also precious"})
    make_tree(tmp_path / "src", {"f": b"f"})
    make_tree(
        tmp_path / "dst",
        {
            "f": b"f",
            "to-file": Symlink(str(outside / "file.txt")),
            "to-dir": Symlink(str(outside / "dir")),
            "gone/to-dir": Symlink(str(outside / "dir")),
            "gone/rel": Symlink("../../outside/dir"),
        },
    )
    before = snapshot(outside)
    summary = run(tmp_path, CopySettings(delete=True))
    assert sorted(os.listdir(tmp_path / "dst")) == ["f"]
    assert summary["removed.symlinks"] == 4
    assert summary["removed.dirs"] == 1
    assert summary["removed.files"] == 0
    assert snapshot(outside) == before


def chattr(flag: str, path: Path) -> None:
    subprocess.run(["chattr", flag, str(path)], check=True, capture_output=True)


@pytest.fixture
def immutable(ext4_tmp_path: Path) -> Iterator[list[Path]]:
    """Paths appended here get ``chattr -i`` at teardown, so the tree can be removed."""
    paths: list[Path] = []
    yield paths
    for path in paths:
        chattr("-i", path)


def test_delete_spares_a_subtree_that_had_an_error(
    ext4_tmp_path: Path, immutable: list[Path]
) -> None:
    """Extraneous entries are pruned only where the subtree copied cleanly.

    An immutable destination file (``chattr +i``) cannot be replaced (EPERM): its
    directory and every ancestor keep their extraneous entries; a clean sibling
    directory is mirrored.
    """
    base = ext4_tmp_path
    make_tree(
        base / "src",
        {
            "bad/f": File(b"new content", 0o644, T0),
            "bad/ok": b"fine",
            "good/g": File(b"new g", 0o644, T0),
        },
    )
    make_tree(
        base / "dst",
        {
            "bad/f": File(b"old", 0o644, OLDER),
            "bad/extra": b"must stay",
            "good/g": File(b"old", 0o644, OLDER),
            "good/extra": b"must go",
            "top-extra": b"root had an error below: stays",
        },
    )
    chattr("+i", base / "dst" / "bad" / "f")
    immutable.append(base / "dst" / "bad" / "f")
    with pytest.raises(rcp_core.CopyFailedError) as info:
        rcp_core.copy(str(base / "src"), str(base / "dst"), CopySettings(delete=True))
    summary = info.value.summary
    assert summary["errors"] == 1
    assert info.value.stopped is False
    assert [count for _, count, _ in info.value.errors] == [1]
    dst = base / "dst"
    assert (dst / "bad" / "f").read_bytes() == b"old"
    assert (dst / "bad" / "extra").read_bytes() == b"must stay"
    assert (dst / "top-extra").exists()
    assert (dst / "bad" / "ok").read_bytes() == b"fine"
    assert (dst / "good" / "g").read_bytes() == b"new g"
    assert not (dst / "good" / "extra").exists()
    assert summary["removed.files"] == 1
    # the failed replacement cleans up its temporary file
    assert temp_leftovers(dst) == []


# -- dry runs ---------------------------------------------------------------------------


@pytest.fixture
def core_log(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> pytest.LogCaptureFixture:
    """caplog at INFO for "rcp_core", even if a CLI in this process stopped propagation."""
    monkeypatch.setattr(logging.getLogger("rcp_core"), "propagate", True)
    caplog.set_level(logging.INFO, logger="rcp_core")
    return caplog


def dry_scenario(tmp_path: Path) -> None:
    make_tree(
        tmp_path / "src",
        {
            "new": File(b"n", 0o644, T0),
            "changed": File(b"longer now", 0o644, T0),
            "same": File(b"s", 0o644, T0),
            "skip.tmp": File(b"t", 0o644, T0),
            "sub/deep": File(b"d", 0o644, T0),
        },
    )
    make_tree(
        tmp_path / "dst",
        {
            "changed": File(b"short", 0o644, T0),
            "same": File(b"s", 0o644, T0),
            "extra": b"x",
            "sub/extra-deep": b"y",
        },
    )


def dry_lines(core_log: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in core_log.records
        if r.name == "rcp_core" and r.levelno == logging.INFO
    ]


@pytest.mark.parametrize("level", list(DryRun))
def test_dry_run_changes_nothing(
    tmp_path: Path, core_log: pytest.LogCaptureFixture, level: DryRun
) -> None:
    """A dry run, at every level, leaves source and destination exactly as they were."""
    dry_scenario(tmp_path)
    before = (full_snapshot(tmp_path / "src"), full_snapshot(tmp_path / "dst"))
    summary = run(
        tmp_path, CopySettings(delete=True, excludes=["*.tmp"], dry_run=level)
    )
    assert (full_snapshot(tmp_path / "src"), full_snapshot(tmp_path / "dst")) == before
    assert summary.dry_run is True
    assert summary["errors"] == 0
    assert dry_lines(core_log)


def test_dry_run_of_a_new_destination_creates_nothing(
    tmp_path: Path, core_log: pytest.LogCaptureFixture
) -> None:
    """Dry-running a copy to a fresh name creates no directory, reports every entry."""
    make_tree(tmp_path / "src", {"a/b/c": b"c", "top": b"t"})
    summary = rcp_core.copy(
        str(tmp_path / "src"), str(tmp_path / "new"), CopySettings(dry_run=DryRun.BRIEF)
    )
    assert not (tmp_path / "new").exists()
    lines = dry_lines(core_log)
    assert "would copy file 'src/a/b/c'" in lines
    assert "would copy file 'src/top'" in lines
    assert "would create dir 'src/a/b'" in lines
    assert summary["copied.files"] == 2


def test_dry_run_brief_lists_changes_only(
    tmp_path: Path, core_log: pytest.LogCaptureFixture
) -> None:
    """BRIEF: "would copy/replace/remove" lines, nothing about unchanged or skipped."""
    dry_scenario(tmp_path)
    run(tmp_path, CopySettings(delete=True, excludes=["*.tmp"], dry_run=DryRun.BRIEF))
    lines = dry_lines(core_log)
    assert "would copy file 'src/new'" in lines
    assert "would copy file 'src/sub/deep'" in lines
    assert "would replace file 'src/changed'" in lines
    assert "would remove entry 'src/extra'" in lines
    assert "would remove entry 'src/sub/extra-deep'" in lines
    assert not [ln for ln in lines if not ln.startswith("would ")]
    assert not [ln for ln in lines if "same" in ln or "skip.tmp" in ln or "(" in ln]


def test_dry_run_all_adds_unchanged_and_skipped(
    tmp_path: Path, core_log: pytest.LogCaptureFixture
) -> None:
    """ALL: the BRIEF lines plus "unchanged" and "skip" lines, still without reasons."""
    dry_scenario(tmp_path)
    run(tmp_path, CopySettings(delete=True, excludes=["*.tmp"], dry_run=DryRun.ALL))
    lines = dry_lines(core_log)
    assert "would replace file 'src/changed'" in lines
    assert "would remove entry 'src/extra'" in lines
    assert "unchanged file 'src/same'" in lines
    assert "skip entry 'src/skip.tmp'" in lines
    assert not [ln for ln in lines if "(" in ln]


def test_dry_run_explain_gives_reasons(
    tmp_path: Path, core_log: pytest.LogCaptureFixture
) -> None:
    """EXPLAIN: each line carries its reason in parentheses."""
    dry_scenario(tmp_path)
    run(tmp_path, CopySettings(delete=True, excludes=["*.tmp"], dry_run=DryRun.EXPLAIN))
    lines = dry_lines(core_log)
    assert "would replace file 'src/changed' (size differs)" in lines
    assert "would remove entry 'src/extra' (not in source)" in lines
    assert "skip entry 'src/skip.tmp' (excluded by --exclude *.tmp)" in lines
    assert "unchanged file 'src/same' (identical mtime,size)" in lines
    assert "would copy file 'src/new' (new)" in lines


@pytest.mark.parametrize("level", [DryRun.BRIEF, DryRun.ALL, DryRun.EXPLAIN])
def test_dry_run_update_reports_kept_files_above_brief(
    tmp_path: Path, core_log: pytest.LogCaptureFixture, level: DryRun
) -> None:
    """UPDATE with a newer destination: "keep" appears with ALL and EXPLAIN only."""
    make_tree(tmp_path / "src", {"f": File(b"src", 0o644, T0)})
    make_tree(tmp_path / "dst", {"f": File(b"newer dst", 0o644, NEWER)})
    run(tmp_path, CopySettings(existing=ExistingPolicy.UPDATE, dry_run=level))
    lines = dry_lines(core_log)
    keep = [ln for ln in lines if ln.startswith("keep file 'src/f'")]
    if level is DryRun.BRIEF:
        assert keep == []
    elif level is DryRun.ALL:
        assert keep == ["keep file 'src/f'"]
    else:
        assert keep == ["keep file 'src/f' (destination is not older (update))"]
    assert (tmp_path / "dst" / "f").read_bytes() == b"newer dst"


def test_ignore_existing_leaves_an_existing_directory_alone(tmp_path: Path) -> None:
    """Merging into an existing directory under ignore-existing keeps its own metadata.

    Only new children are added; the directory's mode is not widened or narrowed to the
    source's, and its mtime is whatever adding children made it (never the source's).
    """
    make_tree(
        tmp_path / "src",
        {"d": Dir(mode=0o755, mtime_ns=1_000_000_007), "d/new": b"new"},
    )
    make_tree(tmp_path / "dst", {"d": Dir(mode=0o700), "d/old": b"old"})
    summary = run(tmp_path, CopySettings(existing=ExistingPolicy.IGNORE_EXISTING))
    st = os.stat(tmp_path / "dst" / "d")
    assert stat.S_IMODE(st.st_mode) == 0o700
    assert st.st_mtime_ns != 1_000_000_007
    assert (tmp_path / "dst" / "d" / "new").read_bytes() == b"new"
    assert (tmp_path / "dst" / "d" / "old").read_bytes() == b"old"
    assert summary["copied.files"] == 1
    assert summary["unchanged.dirs"] == 2
