"""The comparison through backend ports follows the local comparison's rules: two
local trees given to ``compare`` as ports (``PosixPort``) are walked by
``portcompare``, and it finds exactly what the directory descriptors' walk finds of
the same paths, difference for difference, under every scope a copy's verification
takes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import rcp_core
from rcp_core.engine.posixport import PosixPort
from rcp_core.settings import CompareAttr
from rcp_core.tools.verify.compare import Comparison, DiffKind, Scope, compare
from rcp_core.tools.verify.scope import snapshot
from support.treespec import Dir, Entry, Fifo, File, Spec, Symlink, make_tree

T0 = 1_600_000_000 * 10**9
EVERY_ATTR = frozenset(CompareAttr) - {CompareAttr.CTIME, CompareAttr.CHECKSUM}

SOURCE: dict[str, Entry] = {
    ".": Dir(mtime_ns=T0),
    "same.txt": File(b"same", mtime_ns=T0),
    "flipped": File(b"abcdef", mtime_ns=T0),
    "longer": File(b"short", mtime_ns=T0),
    "later": File(b"t", mtime_ns=T0),
    "private": File(b"p", mode=0o644, mtime_ns=T0),
    "owned": File(b"o", mtime_ns=T0, owner=(0, 0)),
    "link": Symlink("same.txt", mtime_ns=T0),
    "retyped": File(b"was a file", mtime_ns=T0),
    "gone": File(b"missing in the copy", mtime_ns=T0),
    "gone-dir": Dir(mtime_ns=T0),
    "gone-dir/below": File(b"not entered", mtime_ns=T0),
    "fifo": Fifo(mtime_ns=T0),
    "sub": Dir(mtime_ns=T0),
    "sub/deeper": Dir(mtime_ns=T0),
    "sub/deeper/f": File(b"deep", mtime_ns=T0),
    "sub/deeper/g": File(b"gee", mtime_ns=T0),
}
COPY: dict[str, Entry] = {
    **{rel: e for rel, e in SOURCE.items() if not rel.startswith("gone")},
    "flipped": File(b"abcdeF", mtime_ns=T0),
    "longer": File(b"longer", mtime_ns=T0),
    "later": File(b"t", mtime_ns=T0 + 1),
    "private": File(b"p", mode=0o600, mtime_ns=T0),
    "owned": File(b"o", mtime_ns=T0, owner=(1234, 5678)),
    "link": Symlink("flipped", mtime_ns=T0),
    "retyped": Dir(mtime_ns=T0),
    "retyped/inside": File(b"not compared", mtime_ns=T0),
    "extra": File(b"only in the copy", mtime_ns=T0),
    "sub/deeper/g": File(b"GEE", mtime_ns=T0),
    "sub/deeper/h": Symlink("f", mtime_ns=T0),
}


def both(src: Path, dst: Path, **kwargs: Any) -> tuple[Comparison, Comparison]:
    """The trees compared through directory descriptors, and through ports."""
    return (
        compare(src, dst, **kwargs),
        compare(PosixPort(str(src)), PosixPort(str(dst)), **kwargs),
    )


def as_found(result: Comparison) -> list[tuple[str, DiffKind, str]]:
    return [(d.path, d.kind, d.detail) for d in result.differences]


@pytest.mark.privileged
@pytest.mark.parametrize("checksum", [False, True])
@pytest.mark.parametrize(
    "attrs", [frozenset({CompareAttr.SIZE}), EVERY_ATTR], ids=["size", "all"]
)
def test_ports_find_what_descriptors_find(
    tmp_path: Path, checksum: bool, attrs: frozenset[CompareAttr]
) -> None:
    """Every kind of difference, one each, with the same detail; the same paths
    examined and files hashed (``retyped``'s subtree, ``gone-dir``'s never entered)."""
    src = make_tree(tmp_path / "src", SOURCE)
    dst = make_tree(tmp_path / "dst", COPY)
    local, ported = both(src, dst, checksum=checksum, attrs=attrs)
    assert as_found(ported) == as_found(local)
    assert (ported.entries, ported.files_hashed, ported.bytes_hashed) == (
        local.entries,
        local.files_hashed,
        local.bytes_hashed,
    )
    kinds = {kind for _, kind, _ in as_found(ported)}
    expected = {
        DiffKind.MISSING,
        DiffKind.EXTRA,
        DiffKind.TYPE,
        DiffKind.LINK,
        DiffKind.SIZE,
    }
    if attrs == EVERY_ATTR:
        expected |= {DiffKind.MTIME, DiffKind.MODE, DiffKind.OWNER}
    if checksum:
        expected.add(DiffKind.CONTENT)
    assert kinds == expected


SCOPED: Spec = {
    "keep.txt": b"kept",
    "app.log": b"log",
    "link.csv": Symlink("data/x.csv"),
    "data/x.csv": b"1,2",
    "data/deep/y.csv": b"3,4",
    "data/deep/.gitignore": b"*.tmp\n",
    "data/deep/scratch.tmp": b"t",
    "data/notes.log": b"n",
    "only-logs/z.log": b"z",
    "only-logs/nested/w.log": b"w",
    "build/out.o": b"o",
    ".gitignore": b"build/\n*.o\n",
    "fifo": Fifo(),
}
"""Filters' cases: excluded files and directories, one only traversed, a
``.gitignore`` at the top and one below, a FIFO a copy may skip."""


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"excludes": ["*.log"]},
        {"includes": ["/data/**"]},
        {"includes": ["*.csv"], "excludes": ["deep/"]},
        {"gitignore": True},
        {"skip_specials": True, "delete": True, "excludes": ["*.log"]},
        {"delete": True, "delete_excluded": True, "excludes": ["*.log"]},
        {"existing": rcp_core.ExistingPolicy.IGNORE_EXISTING},
        {"existing": rcp_core.ExistingPolicy.UPDATE},
    ],
    ids=[
        "everything",
        "exclude",
        "include",
        "include-and-exclude",
        "gitignore",
        "mirror",
        "delete-excluded",
        "ignore-existing",
        "update",
    ],
)
def test_a_copy_is_verified_by_the_same_scope(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    """A filtered, mirrored or policy-kept copy, then corrupted: the scope (taken
    through the destination's port before the copy) leaves out and reports the
    same on both paths."""
    src = make_tree(tmp_path / "src", SCOPED)
    dst = tmp_path / "dst"
    copy = rcp_core.CopySettings(**settings)
    if Scope.keeps(copy):
        make_tree(dst, {"keep.txt": File(b"there before", mtime_ns=T0), "mine": b"m"})
    scope = Scope.of(copy, snapshot(PosixPort(str(dst))))
    rcp_core.copy(str(src), str(dst), copy)
    (dst / "data" / "deep").mkdir(parents=True, exist_ok=True)
    (dst / "data" / "deep" / "y.csv").write_bytes(b"3,5")
    (dst / "stray.log").write_bytes(b"a destination's own")
    if (dst / "only-logs").exists():
        os.rename(dst / "only-logs", dst / "no-logs")
    local, ported = both(src, dst, checksum=True, scope=scope)
    assert as_found(ported) == as_found(local)
    assert ported.entries == local.entries
    assert ported.files_hashed == local.files_hashed


def test_a_snapshot_through_a_port_is_what_the_tree_holds(tmp_path: Path) -> None:
    """``lstat`` of every entry by relative path, symlinks not followed below the
    root; nothing there is ``None``."""
    root = make_tree(
        tmp_path / "t",
        {"a": File(b"a", mode=0o600, mtime_ns=T0), "d/l": Symlink("../a")},
    )
    found = snapshot(PosixPort(str(root)))
    assert found is not None
    assert sorted(found) == ["", "a", "d", "d/l"]
    for rel, st in found.items():
        real = os.lstat(root / rel) if rel else os.stat(root)
        assert (st.st_mode, st.st_size, st.st_mtime_ns) == (
            real.st_mode,
            real.st_size,
            real.st_mtime_ns,
        )
        assert (st.st_uid, st.st_gid) == (real.st_uid, real.st_gid)
    assert snapshot(PosixPort(str(tmp_path / "none"))) is None


DEEP: Spec = {
    "top.csv": b"t",
    "data/deep/er/y.csv": b"3,4",
    "data/deep/er/.gitignore": b"*.tmp\n",
    "data/deep/er/scratch.tmp": b"t",
    "data/notes.log": b"n",
    "logs/nested/w.log": b"w",
}
"""An included file only three levels below a directory the filters traverse."""


@pytest.mark.parametrize("gitignore", [False, True], ids=["filters", "gitignore"])
def test_a_traversed_directory_missing_is_missing_where_it_holds_an_include(
    tmp_path: Path, gitignore: bool
) -> None:
    """``--include '*.csv'`` only traverses ``data`` and ``logs``, and neither is in
    the copy: ``data`` (an included file three levels below) is ``missing``, ``logs``
    (nothing included below: the copy removed it) is not, on both paths (one
    descent, :meth:`~rcp_core.tools.verify.scope.Scope.included_below`)."""
    src = make_tree(tmp_path / "src", DEEP)
    dst = tmp_path / "dst"
    copy = rcp_core.CopySettings(includes=["*.csv"], gitignore=gitignore)
    rcp_core.copy(str(src), str(dst), copy)
    assert not (dst / "logs").exists()
    os.rename(dst / "data", tmp_path / "moved")
    sizes = frozenset({CompareAttr.SIZE})  # the rename changed the root's mtime
    local, ported = both(src, dst, attrs=sizes, scope=Scope.of(copy))
    assert as_found(ported) == as_found(local)
    assert [(p, k) for p, k, _ in as_found(local)] == [("data", DiffKind.MISSING)]
