"""Verification: two trees compared by metadata and content, each difference once.

Trees are built from `support.treespec` specs in which every entry, directories and
the root included, has an explicit mtime (`timed`), so two builds of one spec are equal.
Root ignores permission bits, so the unreadable-entry test runs the comparison as
``nobody`` (setpriv) on a world-writable directory, like the copy's error tests.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import posixpath
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import rcp_core
from benchmarks.latencyfs import Faults, mounted
from rcp_core import CompareAttr, Kind, UsageError, hookimpl
from rcp_core.tools.verify.compare import (
    Comparison,
    Difference,
    DiffKind,
    Scope,
    compare,
    prepare_scopes,
    verify_copy,
)
from rcp_core.tools.verify.differences import MAX_KEPT
from rcp_core.tools.verify.hashing import SEGMENT
from support import nobody
from support.nobody import NOBODY, give_to_nobody
from support.treespec import (
    Dir,
    Entry,
    Fifo,
    File,
    HardLink,
    Spec,
    Symlink,
    make_tree,
)

T0 = 1_600_000_000 * 10**9
MIB = 1 << 20


def timed(spec: Spec) -> dict[str, Entry]:
    """``spec`` with mtime ``T0`` on every entry lacking one, its implicit parent
    directories and the root made explicit."""
    out: dict[str, Entry] = {".": Dir(mtime_ns=T0)}
    for rel in spec:
        parent = posixpath.dirname(rel)
        while parent:
            out[parent] = Dir(mtime_ns=T0)
            parent = posixpath.dirname(parent)
    for rel, entry in spec.items():
        if isinstance(entry, bytes):
            entry = File(entry)
        if not isinstance(entry, HardLink) and entry.mtime_ns is None:
            entry = dataclasses.replace(entry, mtime_ns=T0)
        out[rel] = entry
    return out


def trees(base: Path, src: Spec, dst: Spec | None = None) -> tuple[Path, Path]:
    """Build ``src`` and ``dst`` (default: the same spec) under ``base``."""
    a = make_tree(base / "src", timed(src))
    b = make_tree(base / "dst", timed(src if dst is None else dst))
    return a, b


def found(result: Comparison) -> list[tuple[str, DiffKind]]:
    return [(d.path, d.kind) for d in result.differences]


def detail(result: Comparison, path: str, kind: DiffKind) -> str:
    [match] = [d for d in result.differences if (d.path, d.kind) == (path, kind)]
    return match.detail


TREE: dict[str, Entry] = {
    "a.txt": b"alpha",
    "empty": b"",
    "sub/b.bin": os.urandom(3000),
    "sub/deeper/c": b"c" * 100,
    "sub/link": Symlink("../a.txt"),
    "sub/dangling": Symlink("nowhere"),
    "fifo": Fifo(),
    "modes/private": File(b"p", mode=0o600),
    "modes/dir": Dir(mode=0o700),
    **{f"many/f{i:03}": b"%d" % i for i in range(150)},
}
TREE_DIRS = {".", "sub", "sub/deeper", "modes", "modes/dir", "many"}
TREE_FILES = {rel: e for rel, e in TREE.items() if isinstance(e, bytes | File)}


def data(entry: Entry) -> bytes:
    assert isinstance(entry, bytes | File)
    return entry if isinstance(entry, bytes) else entry.data


# -- same ----------------------------------------------------------------------------


@pytest.mark.parametrize("checksum", [False, True])
def test_identical_trees_are_same(tmp_path: Path, checksum: bool) -> None:
    src, dst = trees(tmp_path, TREE)
    result = compare(src, dst, checksum=checksum, max_workers=4)
    assert result.differences == ()
    assert result.same
    assert result.entries == len(TREE) + len(TREE_DIRS - TREE.keys())
    if checksum:
        assert result.files_hashed == len(TREE_FILES)
        total = sum(len(data(e)) for e in TREE_FILES.values())
        assert result.bytes_hashed == 2 * total
    else:
        assert (result.files_hashed, result.bytes_hashed) == (0, 0)
    out = json.loads(json.dumps(result.as_dict()))
    assert out["same"] is True
    assert out["differences"] == []
    assert out["by_kind"] == {kind.value: 0 for kind in DiffKind}


def test_a_copy_made_by_rcp_is_same_with_checksums(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", TREE)
    (src / "big").write_bytes(os.urandom(SEGMENT + 5 * MIB))
    rcp_core.copy(str(src), str(tmp_path / "dst"))
    result = compare(src, tmp_path / "dst", checksum=True)
    assert result.same, result.differences
    assert result.files_hashed == len(TREE_FILES) + 1


def test_roots_that_are_files_are_compared_as_one_entry(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"same")
    (tmp_path / "b").write_bytes(b"same")
    for path in ("a", "b"):
        os.utime(tmp_path / path, ns=(T0, T0))
    assert compare(tmp_path / "a", tmp_path / "b", checksum=True).same
    (tmp_path / "b").write_bytes(b"diff")
    os.utime(tmp_path / "b", ns=(T0, T0))
    result = compare(tmp_path / "a", tmp_path / "b", checksum=True)
    assert found(result) == [(".", DiffKind.CONTENT)]
    assert result.entries == 1


# -- content -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "flip"),
    [
        (9 * MIB, 9 * MIB // 2),  # one segment, the byte in the middle
        (2 * SEGMENT + 1000, 2 * SEGMENT + 10),  # three segments, in the last
    ],
)
def test_a_flipped_byte_is_found_with_checksum_only(
    tmp_path: Path, size: int, flip: int
) -> None:
    content = bytearray(os.urandom(size))
    src, dst = trees(tmp_path, {"big": bytes(content), "small": b"s"})
    content[flip] ^= 0x01
    (dst / "big").write_bytes(content)
    os.utime(dst / "big", ns=(T0, T0))

    assert compare(src, dst).same
    result = compare(src, dst, checksum=True, max_workers=3)
    assert found(result) == [("big", DiffKind.CONTENT)]
    assert not result.same
    assert result.files_hashed == 2
    if size > SEGMENT:
        assert detail(result, "big", DiffKind.CONTENT) == (
            f"content differs in bytes {2 * SEGMENT}-{size - 1}"
        )


@pytest.mark.parametrize("workers", [None, 1, 4])
def test_every_segment_of_a_large_file_is_hashed_once(
    tmp_path: Path, workers: int | None
) -> None:
    """Alone, with helpers in the pool, or with helpers aside (the default here)."""
    size = 3 * SEGMENT + 12345
    src, dst = trees(tmp_path, {"big": os.urandom(size), "small": b"s"})
    result = compare(src, dst, checksum=True, max_workers=workers)
    assert result.same
    assert result.bytes_hashed == 2 * (size + 1)
    assert result.files_hashed == 2


def test_workers_stepping_aside_give_the_rest_of_their_batch_away(
    tmp_path: Path,
) -> None:
    """Files large enough to hash aside, among small ones: each compared once, the
    flipped one found."""
    spec: dict[str, Entry] = {f"big{i:02}": os.urandom(MIB + i) for i in range(12)}
    spec.update({f"small{i:02}": b"%d" % i for i in range(40)})
    src, dst = trees(tmp_path, spec)
    changed = bytearray(data(spec["big07"]))
    changed[-1] ^= 0xFF
    (dst / "big07").write_bytes(changed)
    os.utime(dst / "big07", ns=(T0, T0))
    result = compare(src, dst, checksum=True)
    assert found(result) == [("big07", DiffKind.CONTENT)]
    assert result.entries == 1 + len(spec)
    assert result.files_hashed == len(spec)
    assert result.bytes_hashed == 2 * sum(len(data(e)) for e in spec.values())


def test_size_difference_is_one_difference_even_with_checksum(tmp_path: Path) -> None:
    src, dst = trees(tmp_path, {"f": b"abc"}, {"f": b"abcd"})
    result = compare(src, dst, checksum=True)
    assert found(result) == [("f", DiffKind.SIZE)]
    assert detail(result, "f", DiffKind.SIZE) == "size 3 != 4"
    assert result.files_hashed == 0
    # without size among the attributes, the checksum still tells them apart
    result = compare(src, dst, checksum=True, attrs=frozenset({CompareAttr.MTIME}))
    assert found(result) == [("f", DiffKind.CONTENT)]


# -- one difference each ---------------------------------------------------------------


def test_missing_and_extra_entries(tmp_path: Path) -> None:
    src, dst = trees(
        tmp_path,
        {"both": b"x", "only-src": b"s"},
        {"both": b"x", "only-dst": Symlink("t")},
    )
    result = compare(src, dst)
    assert found(result) == [
        ("only-dst", DiffKind.EXTRA),
        ("only-src", DiffKind.MISSING),
    ]
    assert detail(result, "only-src", DiffKind.MISSING) == "file missing in destination"
    assert detail(result, "only-dst", DiffKind.EXTRA) == "symlink only in destination"
    assert result.entries == 4
    assert result.counts[DiffKind.MISSING] == result.counts[DiffKind.EXTRA] == 1


def test_a_directory_missing_in_the_destination_is_reported_once(
    tmp_path: Path,
) -> None:
    spec = {f"d/sub{i}/f{j}": b"x" for i in range(5) for j in range(20)}
    src, dst = trees(tmp_path, {**spec, "keep": b"k"}, {"keep": b"k"})
    result = compare(src, dst, checksum=True)
    assert found(result) == [("d", DiffKind.MISSING)]
    assert detail(result, "d", DiffKind.MISSING) == "directory missing in destination"
    assert result.total == 1
    assert result.entries == 3  # the root, keep, d: d's subtree is not entered


def test_a_missing_destination_root_is_one_difference(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", timed({"a": b"a"}))
    result = compare(src, tmp_path / "nothing")
    assert found(result) == [(".", DiffKind.MISSING)]


TYPES: Mapping[str, Entry] = {
    "file": b"data",
    "directory": Dir(),
    "symlink": Symlink("target"),
    "fifo": Fifo(),
}


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("file", "directory"),
        ("directory", "file"),
        ("file", "symlink"),
        ("symlink", "file"),
        ("directory", "symlink"),
        ("symlink", "directory"),
        ("fifo", "file"),
    ],
)
def test_a_type_change_is_one_difference(
    tmp_path: Path, before: str, after: str
) -> None:
    src_spec: dict[str, Entry] = {"x": TYPES[before]}
    dst_spec: dict[str, Entry] = {"x": TYPES[after]}
    # a directory's contents are not compared with a non-directory
    for spec, kind in ((src_spec, before), (dst_spec, after)):
        if kind == "directory":
            spec.update({"x/child": b"c", "x/sub/grandchild": b"g"})
    src, dst = trees(tmp_path, src_spec, dst_spec)
    result = compare(src, dst, checksum=True)
    assert found(result) == [("x", DiffKind.TYPE)]
    assert detail(result, "x", DiffKind.TYPE) == f"{before} != {after}"


def test_mode_change(tmp_path: Path) -> None:
    src, dst = trees(
        tmp_path,
        {"f": File(b"x", mode=0o644), "d": Dir(mode=0o755)},
        {"f": File(b"x", mode=0o600), "d": Dir(mode=0o750)},
    )
    result = compare(src, dst)
    assert found(result) == [("d", DiffKind.MODE), ("f", DiffKind.MODE)]
    assert detail(result, "f", DiffKind.MODE) == "mode 0644 != 0600"
    assert detail(result, "d", DiffKind.MODE) == "mode 0755 != 0750"
    assert compare(src, dst, attrs=frozenset({CompareAttr.SIZE})).same


def test_symlink_target_change(tmp_path: Path) -> None:
    src, dst = trees(
        tmp_path,
        {"l": Symlink("a/b"), "dir": Dir()},
        {"l": Symlink("a/c"), "dir": Dir()},
    )
    result = compare(src, dst, attrs=frozenset())
    assert found(result) == [("l", DiffKind.LINK)]
    assert detail(result, "l", DiffKind.LINK) == "link 'a/b' != 'a/c'"


def test_mtime_change_in_nanoseconds(tmp_path: Path) -> None:
    src, dst = trees(
        tmp_path,
        {"f": File(b"x", mtime_ns=T0 + 1), "d": Dir(), "l": Symlink("t")},
        {"f": b"x", "d": Dir(mtime_ns=T0 + 2 * 10**9), "l": Symlink("t")},
    )
    result = compare(src, dst)
    assert found(result) == [("d", DiffKind.MTIME), ("f", DiffKind.MTIME)]
    assert detail(result, "f", DiffKind.MTIME) == (
        "mtime 1600000000.000000001 != 1600000000.000000000"
    )
    assert compare(src, dst, attrs=frozenset({CompareAttr.SIZE})).same


@pytest.mark.privileged
def test_owner_is_compared_only_when_asked(tmp_path: Path) -> None:
    src, dst = trees(
        tmp_path, {"f": File(b"x", owner=(0, 0))}, {"f": File(b"x", owner=(1234, 5678))}
    )
    assert compare(src, dst).same
    owner = frozenset({CompareAttr.UID, CompareAttr.GID})
    result = compare(src, dst, attrs=owner)
    assert found(result) == [("f", DiffKind.OWNER)]
    assert detail(result, "f", DiffKind.OWNER) == "uid 0 != 1234, gid 0 != 5678"


# -- errors, caps, cancel --------------------------------------------------------------


@pytest.fixture
def world_dir() -> Iterator[Path]:
    with nobody.world_dir() as path:
        yield path


COMPARE_AS_NOBODY = (
    "import json, sys; from rcp_core.tools.verify.compare import compare; "
    "print(json.dumps(compare('src', 'dst', checksum=True).as_dict()))"
)


@pytest.mark.privileged
def test_unreadable_entries_are_errors_and_the_rest_is_compared(
    world_dir: Path,
) -> None:
    """As nobody, a ``chmod 000`` file and directory are ``error`` differences; the
    comparison goes on and still finds a content difference elsewhere."""
    spec = {
        "secret": b"s",
        "locked/inside": b"i",
        "ok/fine": b"f",
        "ok/changed": b"one",
    }
    trees(world_dir, spec, {**spec, "ok/changed": b"two"})
    give_to_nobody(world_dir, ["src/secret", "dst/secret", "src/locked", "dst/locked"])
    result = subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            sys.executable,
            "-c",
            COMPARE_AS_NOBODY,
        ],
        capture_output=True,
        text=True,
        cwd=world_dir,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["same"] is False
    assert out["differences"] == [
        {"path": "locked", "kind": "error", "detail": "open source: Permission denied"},
        {"path": "ok/changed", "kind": "content", "detail": "content differs"},
        {"path": "secret", "kind": "error", "detail": "open source: Permission denied"},
    ]
    assert out["files_hashed"] == 2  # ok/fine and ok/changed


def test_differences_beyond_the_cap_are_counted_not_kept(tmp_path: Path) -> None:
    n = MAX_KEPT + 50
    src, dst = trees(tmp_path, {f"f{i}": b"" for i in range(n)}, {})
    seen: list[Difference] = []
    result = compare(src, dst, on_difference=seen.append)
    assert result.counts[DiffKind.MISSING] == result.total == len(seen) == n
    assert len(result.differences) == MAX_KEPT
    assert result.truncated
    assert set(result.differences) <= set(seen)
    out = result.as_dict()
    assert (out["differences_total"], len(out["differences"])) == (n, MAX_KEPT)
    assert out["truncated"] is True


def test_cancel_stops_at_once(tmp_path: Path) -> None:
    """The callback cancels at the first difference: no other is looked for."""
    src, dst = trees(tmp_path, {f"f{i}": b"" for i in range(300)}, {})
    cancel = threading.Event()
    result = compare(src, dst, cancel=cancel, on_difference=lambda d: cancel.set())
    assert result.cancelled
    assert not result.same
    assert result.total == 1


def test_cancel_before_the_start_compares_nothing(tmp_path: Path) -> None:
    src, dst = trees(tmp_path, TREE)
    cancel = threading.Event()
    cancel.set()
    result = compare(src, dst, checksum=True, cancel=cancel)
    assert (result.entries, result.files_hashed, result.total) == (0, 0, 0)
    assert result.cancelled
    assert not result.same
    assert result.as_dict()["same"] is False


def test_a_failing_callback_stops_the_comparison_and_is_raised(
    tmp_path: Path,
) -> None:
    src, dst = trees(tmp_path, {f"d{i}/f": b"" for i in range(50)}, {})

    def boom(difference: Difference) -> None:
        raise RuntimeError(f"stop at {difference.path}")

    with pytest.raises(RuntimeError, match="stop at d"):
        compare(src, dst, on_difference=boom)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"attrs": frozenset({CompareAttr.CTIME})}, "ctime"),
        ({"max_workers": 0}, "max-workers"),
    ],
)
def test_usage_errors(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        compare(tmp_path, tmp_path, **kwargs)  # type: ignore[arg-type]


# -- a copy's own scope: what it was asked to copy (verify_copy) ----------------------

SCOPED: dict[str, Entry] = {
    "keep.txt": b"kept",
    "app.log": b"log",
    "data/x.csv": b"1,2",
    "data/deep/y.csv": b"3,4",
    "data/notes.log": b"n",
    "only-logs/z.log": b"z",
    "build/out.o": b"o",
    ".gitignore": b"build/\n*.o\n",
    "fifo": Fifo(),
}


def copied_and_verified(
    tmp_path: Path, settings: rcp_core.CopySettings, *, checksum: bool = True
) -> dict[str, object]:
    """Copy ``tmp_path/src`` to ``tmp_path/dst`` with ``settings`` (the scopes taken
    before, as rcp does), then verify it."""
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    scopes = prepare_scopes([src], dst, settings)
    rcp_core.copy(src, dst, settings)
    return verify_copy(
        [src],
        dst,
        checksum=checksum,
        preserve=settings.preserve,
        scopes=scopes,
    )


@pytest.mark.parametrize(
    "filters",
    [
        {"excludes": ["*.log"]},
        {"includes": ["/data/**"]},
        {"includes": ["*.csv"], "excludes": ["deep/"]},
        {"filter_file": "FILTERS"},
        {"gitignore": True},
    ],
    ids=["exclude", "include", "include-and-exclude", "filter-file", "gitignore"],
)
def test_a_filtered_copy_verifies_clean(
    tmp_path: Path, filters: dict[str, object]
) -> None:
    """What the filters left out (files, a directory they only traverse and that
    holds nothing included) is no difference; what they kept is compared."""
    make_tree(tmp_path / "src", SCOPED)
    if filters.get("filter_file") == "FILTERS":
        rules = tmp_path / "filters"
        rules.write_text("# logs stay\n--exclude *.log\n--exclude /build/\n")
        filters = {"filter_file": str(rules)}
    settings = rcp_core.CopySettings(**filters)  # type: ignore[arg-type]
    verdict = copied_and_verified(tmp_path, settings)
    assert verdict["same"] is True, verdict
    [tree] = verdict["trees"]  # type: ignore[attr-defined]
    assert tree["files_hashed"] == sum(
        1 for p in (tmp_path / "dst").rglob("*") if p.is_file() and not p.is_symlink()
    )
    assert tree["files_hashed"] > 0


def test_a_corruption_under_filters_is_still_caught(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", SCOPED)
    settings = rcp_core.CopySettings(excludes=["*.log"], gitignore=True)
    src, dst = tmp_path / "src", tmp_path / "dst"
    scopes = prepare_scopes([str(src)], str(dst), settings)
    rcp_core.copy(str(src), str(dst), settings)
    (dst / "data" / "deep" / "y.csv").write_bytes(b"3,5")
    os.utime(
        dst / "data" / "deep" / "y.csv",
        ns=(T0, os.stat(src / "data/deep/y.csv").st_mtime_ns),
    )
    (dst / "keep.txt").unlink()
    root = os.stat(src).st_mtime_ns
    os.utime(dst, ns=(root, root))
    with pytest.raises(rcp_core.errors.VerificationError) as caught:
        verify_copy(
            [str(src)],
            str(dst),
            checksum=True,
            preserve=settings.preserve,
            scopes=scopes,
        )
    [tree] = caught.value.result["trees"]
    assert [(d["path"], d["kind"]) for d in tree["differences"]] == [
        ("data/deep/y.csv", "content"),
        ("keep.txt", "missing"),
    ]
    assert str(caught.value) == "the copy differs from its source: 1 missing, 1 content"


def test_a_traversed_directory_holding_an_include_must_be_there(
    tmp_path: Path,
) -> None:
    """``--include '*.csv'`` only traverses ``data``: it holds an included file, so
    the copy makes it, and its absence is one ``missing``."""
    make_tree(tmp_path / "src", SCOPED)
    settings = rcp_core.CopySettings(includes=["*.csv"])
    src, dst = tmp_path / "src", tmp_path / "dst"
    rcp_core.copy(str(src), str(dst), settings)
    assert not (dst / "only-logs").exists()  # traversed, nothing included: removed
    subprocess.run(["rm", "-r", str(dst / "data")], check=True)
    sizes = frozenset({CompareAttr.SIZE})
    result = compare(src, dst, checksum=True, attrs=sizes, scope=Scope.of(settings))
    assert found(result) == [("data", DiffKind.MISSING)]


def test_ignore_existing_leaves_a_different_existing_file_alone(
    tmp_path: Path,
) -> None:
    """An existing destination file that ``--ignore-existing`` kept is not a
    difference, nor the existing directory's own attributes; what the copy made
    is compared, and a corruption of it caught."""
    make_tree(tmp_path / "src", SCOPED)
    make_tree(tmp_path / "dst", {"keep.txt": File(b"older and longer", mode=0o600)})
    settings = rcp_core.CopySettings(existing=rcp_core.ExistingPolicy.IGNORE_EXISTING)
    verdict = copied_and_verified(tmp_path, settings)
    assert verdict["same"] is True, verdict
    assert (tmp_path / "dst" / "keep.txt").read_bytes() == b"older and longer"
    # Without the record of what was there, the kept file is a difference.
    src, dst = tmp_path / "src", tmp_path / "dst"
    plain = compare(src, dst, checksum=True, scope=Scope.of(settings))
    assert ("keep.txt", DiffKind.SIZE) in found(plain)
    # A file the copy made is compared as ever.
    scopes = prepare_scopes([str(src)], str(dst), settings)
    (dst / "app.log").write_bytes(b"LOG")
    with pytest.raises(rcp_core.errors.VerificationError):
        verify_copy(
            [str(src)],
            str(dst),
            checksum=True,
            preserve=settings.preserve,
            scopes={str(dst): dataclasses.replace(scopes[str(dst)], before=None)},
        )


def test_update_leaves_a_newer_destination_file_alone(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", SCOPED)
    newer = T0 + 10**9 * 3600 * 24 * 365 * 30
    make_tree(tmp_path / "dst", {"keep.txt": File(b"newer", mtime_ns=newer)})
    settings = rcp_core.CopySettings(existing=rcp_core.ExistingPolicy.UPDATE)
    assert copied_and_verified(tmp_path, settings)["same"] is True


def test_skipped_specials_and_unmirrored_extras_are_no_differences(
    tmp_path: Path,
) -> None:
    """``skip_specials``: a FIFO the copy could not make may be missing; without
    ``delete`` a destination's own entries stay, so they are not ``extra``; with it
    they are, except where the filters protect them."""
    src, dst = trees(
        tmp_path,
        {"a": b"a", "fifo": Fifo()},
        {"a": b"a", "mine": b"m", "mine.log": b"l"},
    )
    assert found(compare(src, dst)) == [
        ("fifo", DiffKind.MISSING),
        ("mine", DiffKind.EXTRA),
        ("mine.log", DiffKind.EXTRA),
    ]
    copy = rcp_core.CopySettings(skip_specials=True)
    assert compare(src, dst, scope=Scope.of(copy)).same
    mirror = dataclasses.replace(copy, delete=True, excludes=["*.log"])
    assert found(compare(src, dst, scope=Scope.of(mirror))) == [
        ("mine", DiffKind.EXTRA)
    ]
    everything = dataclasses.replace(mirror, delete_excluded=True)
    assert found(compare(src, dst, scope=Scope.of(everything))) == [
        ("mine", DiffKind.EXTRA),
        ("mine.log", DiffKind.EXTRA),
    ]


# -- errors tried again, as the copy tries them -----------------------------------------
#
# The faults are real: latencyfs serves both trees and fails the requests its fault
# table names, once each (``times=1``), logging every one it injects. A ``short``
# rule on a file has it opened with direct_io, so that a failed read reaches the
# reader (through the page cache the kernel would read the page again itself) and
# each read comes up short (the reader loops on it).


class Site:
    """A site plugin calling EIO ``kind`` (EIO is transient on some Lustre sites),
    and remembering the storage it was told."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.told: list[tuple[Any, Any]] = []

    @hookimpl
    def rcp_classify_error(
        self, error: OSError, source: Any, destination: Any
    ) -> Kind | None:
        if error.errno != errno.EIO:
            return None
        self.told.append((source, destination))
        return self.kind


@contextlib.contextmanager
def served(
    base: Path, src: Spec, dst: Spec | None, rules: list[str]
) -> Iterator[tuple[Path, Faults]]:
    """``src`` and ``dst`` (as :func:`trees` builds them) on a latencyfs mount that
    injects ``rules``: the mount, and its log of faults."""
    trees(base / "backing", src, dst)
    (base / "mnt").mkdir()
    faults = Faults.table(base, rules)
    with mounted(base / "backing", base / "mnt", delay_ms=0, faults=faults) as mnt:
        yield mnt, faults


def injected(faults: Faults, action: str) -> list[tuple[str, str]]:
    """(operation, path) of each fault injected with ``action``."""
    return [(op, path) for op, act, path in faults.injected() if act == action]


TRIED = {"d/f": b"f" * 5000, "d/g": b"g" * 300, "d/l": Symlink("f"), "e": Dir()}


@pytest.mark.privileged
def test_a_read_a_site_calls_transient_is_tried_again(tmp_path: Path) -> None:
    """A site's ``rcp_classify_error`` says EIO is transient: a read failing once
    with it is tried again, and the trees are the same. The hook is told both
    roots' storage."""
    rules = ["read /src/d/f EIO times=1", "read /src/d/f short"]
    site = Site(Kind.TRANSIENT)
    with served(tmp_path, TRIED, None, rules) as (mnt, faults):
        result = compare(
            mnt / "src",
            mnt / "dst",
            checksum=True,
            plugins=[site],
            retry_delay=0.001,
        )
        assert injected(faults, "EIO") == [("read", "/src/d/f")]
    assert result.same, result.differences
    assert result.files_hashed == 2
    assert site.told
    for source, destination in site.told:
        assert source.fstype.startswith("fuse")
        assert destination.fstype.startswith("fuse")


@pytest.mark.privileged
@pytest.mark.parametrize(
    "rule",
    [
        "opendir /dst/d ETIMEDOUT times=1",  # a directory opened
        "readdir /src/d ETIMEDOUT times=1",  # the source listing
        "readdir /dst/d ETIMEDOUT times=1",  # the pass over the destination
        "getattr /dst/d/g ETIMEDOUT times=1",  # an lstat
        "readlink /src/d/l ETIMEDOUT times=1",
        "open /dst/d/f ETIMEDOUT times=1",  # a file opened to be hashed
    ],
)
def test_a_transient_error_is_tried_again_wherever_it_comes(
    tmp_path: Path, rule: str
) -> None:
    """ETIMEDOUT is transient by the built-in table: whatever read meets it once,
    the comparison tries again, and the trees are the same; ``retries=0`` tries
    once, and the failure is an ``error`` difference."""
    with served(tmp_path, TRIED, None, [rule]) as (mnt, faults):
        result = compare(mnt / "src", mnt / "dst", checksum=True, retry_delay=0.001)
        op, path, _ = rule.split(" ", 2)
        assert injected(faults, "ETIMEDOUT") == [(op, path)]
    assert result.same, result.differences
    assert result.files_hashed == 2
    with served(tmp_path / "once", TRIED, None, [rule]) as (mnt, _):
        once = compare(mnt / "src", mnt / "dst", checksum=True, retries=0)
    assert once.counts[DiffKind.ERROR] == 1
    assert "Connection timed out" in once.differences[0].detail


@pytest.mark.privileged
def test_what_still_fails_is_an_error_and_the_rest_is_compared(
    tmp_path: Path,
) -> None:
    """An EIO the site calls transient that never clears is tried ``retries + 1``
    times, then is an ``error`` difference; the rest is compared, and a corrupted
    file elsewhere still found."""
    dst = {**TRIED, "d/g": b"G" * 300}
    rules = ["read /src/d/f EIO", "read /src/d/f short"]
    with served(tmp_path, TRIED, dst, rules) as (mnt, faults):
        result = compare(
            mnt / "src",
            mnt / "dst",
            checksum=True,
            plugins=[Site(Kind.TRANSIENT)],
            retries=2,
            retry_delay=0.001,
        )
        assert injected(faults, "EIO") == [("read", "/src/d/f")] * 3
    assert result.differences == (
        Difference("d/f", DiffKind.ERROR, "read source: Input/output error"),
        Difference("d/g", DiffKind.CONTENT, "content differs"),
    )
    assert not result.cancelled
    assert result.entries == len(timed(TRIED))


@pytest.mark.privileged
def test_an_error_the_site_calls_fatal_stops_the_comparison(tmp_path: Path) -> None:
    """A fatal error is an ``error`` difference and stops the comparison (the rest
    would fail the same way): it is cancelled, not the same."""
    spec = {**TRIED, **{f"many/f{i}": b"x" for i in range(300)}}
    with served(tmp_path, spec, None, ["opendir /src/d EIO"]) as (mnt, faults):
        result = compare(
            mnt / "src", mnt / "dst", max_workers=1, plugins=[Site(Kind.FATAL)]
        )
        assert injected(faults, "EIO") == [("opendir", "/src/d")]
    assert result.cancelled
    assert not result.same
    assert result.differences == (
        Difference("d", DiffKind.ERROR, "open source: Input/output error"),
    )


def test_a_destination_listing_failing_midway_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass over a destination directory hands out batches and reports as it
    streams; when it fails midway, its next try passes over what it did: nothing
    is compared or reported twice, nothing lost.

    The one mock of these tests: latencyfs fails a directory's listing only at its
    start (libfuse reads it whole at the first request)."""
    names = {f"f{i:03}": b"%d" % i for i in range(300)}
    src, dst = trees(tmp_path, {**names, "only-src": b"s"}, {**names, "only-dst": b"d"})
    real = os.scandir
    calls: list[int] = []

    class Failing:
        """The destination root's listing, failing after 150 entries, once."""

        def __init__(self, fd: int) -> None:
            self.it = real(fd)

        def __enter__(self) -> Failing:
            return self

        def __exit__(self, *exc: object) -> None:
            self.it.close()

        def __iter__(self) -> Iterator[os.DirEntry[str]]:
            for n, entry in enumerate(self.it):
                if n == 150 and len(calls) == 1:
                    raise OSError(errno.ETIMEDOUT, os.strerror(errno.ETIMEDOUT))
                yield entry

    def scandir(path: Any) -> Any:
        if isinstance(path, int) and os.readlink(f"/proc/self/fd/{path}") == str(dst):
            calls.append(path)
            return Failing(path)
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    result = compare(src, dst, retry_delay=0.001)
    assert len(calls) == 2
    assert found(result) == [
        ("only-dst", DiffKind.EXTRA),
        ("only-src", DiffKind.MISSING),
    ]
    assert result.entries == 1 + len(names) + 2
