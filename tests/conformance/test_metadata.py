"""Metadata per declared capability, on every pair whose source can hold it: modes,
mtimes (to the backend's precision), owners, symlinks, hard links, FIFOs, xattrs.

One copy per pair of a tree that holds each of them (:data:`META`), with the
``--preserve`` the pair supports; each aspect is a test of its own that reads that
copy, so a defect fails only the aspect it breaks. Where a pair supports an aspect it
must be kept; where a backend has no such thing the note of its cell says what
happens instead (a symlink to a file copied as the file, ...), and a ``--preserve``
that asks for it is refused.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import capabilities
from support.capabilities import Feature, Support
from support.pairs import T0, Pair, Shared, cases
from support.rcprun import Run
from support.treespec import Dir, Fifo, File, HardLink, Spec, Symlink

NS = 123_456_789
"""A sub-second part: kept to the nanosecond, or to the backend's precision."""
META: Spec = {
    ".": Dir(mode=0o750, mtime_ns=T0 + 1 * NS),
    "run.sh": File(b"#!/bin/sh\n", mode=0o751, mtime_ns=T0 + 2 * NS),
    "private": File(b"secret\n", mode=0o600, mtime_ns=T0 + 3 * NS, owner=(1234, 5678)),
    "d": Dir(mode=0o705, mtime_ns=T0 + 4 * NS, owner=(4321, 8765)),
    "d/f": File(b"in d\n", mode=0o640, mtime_ns=T0 + 5 * NS),
    "link": Symlink("private"),
    "dirlink": Symlink("d"),
    "one": File(b"two names\n", mode=0o644, mtime_ns=T0),
    "two": HardLink("one"),
    "fifo": Fifo(mode=0o644, mtime_ns=T0),
    "tagged": File(b"x\n", mode=0o644, mtime_ns=T0, xattrs={"user.rcp": b"kept"}),
}
KEPT = (".", "run.sh", "private", "d", "d/f", "one", "tagged")
"""The entries every pair copies as they are (regular files and directories)."""


def from_trees(source: str, destination: str) -> bool:
    """The source can hold what :data:`META` holds."""
    return source in capabilities.POSIX_TREES


def kind(path: Path) -> str:
    """What is at ``path``: ``file``, ``dir``, ``symlink``, ``fifo``, ``other`` or
    ``missing``."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    for name, test in (
        ("symlink", stat.S_ISLNK),
        ("file", stat.S_ISREG),
        ("dir", stat.S_ISDIR),
        ("fifo", stat.S_ISFIFO),
    ):
        if test(mode):
            return name
    return "other"


def meta_cases(feature: Feature, *supports: Support) -> list[object]:
    return cases(feature, *supports, where=from_trees)


@dataclass(frozen=True)
class Copied:
    pair: Pair
    src: str
    dst: str
    run: Run


def copied(shared: Shared, names: tuple[str, str]) -> Copied:
    """The pair's copy of :data:`META` (with owners and xattrs where the pair keeps
    them)."""

    def make() -> Copied:
        pair = shared.pair(names)
        src, dst = pair.source(META), pair.target()
        extra = [
            name
            for name, feature in (("owner", Feature.OWNER), ("xattrs", Feature.XATTRS))
            if pair.support(feature) is Support.YES
        ]  # the default (mode, times) is not refused where a side lacks them
        flags = ("--preserve", ",".join(["mode", "times", *extra])) if extra else ()
        return Copied(pair, src, dst, pair.rcp(*flags, sources=[src], destination=dst))

    return shared.get(("meta", names), make)


def differences(copy: Copied, what: str, **flags: bool) -> list[str]:
    """The comparer's lines about ``what`` (``mode``, ``mtime_ns``, ...) for the
    entries of :data:`KEPT`."""
    found = copy.pair.differences(copy.src, copy.dst, **flags)
    return [
        line
        for line in found
        if f": {what}" in line and line.split(":")[0].strip("'") in KEPT
    ]


@pytest.mark.parametrize("names", meta_cases(Feature.MODE, Support.YES))
def test_modes_are_kept(shared: Shared, names: tuple[str, str]) -> None:
    """Each file's and directory's permission bits, the top's included."""
    assert differences(copied(shared, names), "mode", mode=True) == []


@pytest.mark.parametrize("names", meta_cases(Feature.MTIME, Support.YES))
def test_mtimes_are_kept_to_the_backends_precision(
    shared: Shared, names: tuple[str, str]
) -> None:
    """Each file's and directory's mtime (sub-second), within the coarser of the
    two backends' precision (:data:`support.capabilities.PRECISION_NS`)."""
    precision = max(capabilities.PRECISION_NS[name] for name in names)
    off = []
    for line in differences(copied(shared, names), "mtime_ns", times=True):
        found = re.search(r"mtime_ns (\d+) != (\d+)", line)
        assert found is not None, line
        if abs(int(found[1]) - int(found[2])) >= precision:
            off.append(line)
    assert off == [], f"mtimes not kept to {precision} ns"


@pytest.mark.parametrize("names", meta_cases(Feature.OWNER, Support.YES))
def test_owners_are_kept(shared: Shared, names: tuple[str, str]) -> None:
    """Each file's and directory's owner and group (this suite runs as root, so
    they are permitted), through a store's metadata too."""
    copy = copied(shared, names)
    assert differences(copy, "owner", owner=True) == [], copy.run
    with copy.pair.dst.view(copy.dst) as local:
        owners = {
            n: (os.lstat(local / n).st_uid, os.lstat(local / n).st_gid)
            for n in ("private", "d")
        }
    assert owners == {"private": (1234, 5678), "d": (4321, 8765)}


PRESERVE = {"mode": Feature.MODE, "times": Feature.MTIME, "owner": Feature.OWNER}


@pytest.mark.parametrize(
    ("pair", "kept"),
    [
        pytest.param(case.values[0], kept, id=f"{kept}-{case.id}")
        for kept, feature in PRESERVE.items()
        for case in cases(feature, Support.NO, Support.REFUSED)
    ],
    indirect=["pair"],
)
def test_preserving_what_a_side_has_not_is_refused(pair: Pair, kept: str) -> None:
    """``--preserve mode`` or ``times`` where a backend has none (a store): the flag
    is refused, not accepted and ignored."""
    src = pair.source({"f": b"data\n"})
    dst = pair.existing({"old": b"old\n"})
    before = pair.snapshot()
    run = pair.rcp("--preserve", kept, sources=[src], destination=dst, slash=True)
    pair.refused(run, "--preserve", before)


@pytest.mark.parametrize("names", meta_cases(Feature.SYMLINKS, Support.YES, Support.NO))
def test_symlinks_are_kept_or_followed_as_the_table_says(
    shared: Shared, names: tuple[str, str]
) -> None:
    """Kept: ``link`` and ``dirlink`` are symlinks with their targets. Not kept:
    ``link`` (to a file) is a copy of the file, ``dirlink`` (to a directory) is
    skipped and counted, never followed out of the tree."""
    copy = copied(shared, names)
    with copy.pair.dst.view(copy.dst) as local:
        if copy.pair.support(Feature.SYMLINKS) is Support.YES:
            links = {n: kind(local / n) for n in ("link", "dirlink")}
            assert links == {"link": "symlink", "dirlink": "symlink"}, copy.run
            assert os.readlink(local / "link") == "private"
            assert os.readlink(local / "dirlink") == "d"
        else:
            assert kind(local / "link") == "file", copy.run
            assert (local / "link").read_bytes() == b"secret\n"
            assert not os.path.lexists(local / "dirlink")
            assert copy.run.counts("skipped")["symlinks"] == 1, copy.run


@pytest.mark.parametrize(
    "names", meta_cases(Feature.HARDLINKS, Support.YES, Support.NO)
)
def test_hard_links_are_kept_or_copied_as_files(
    shared: Shared, names: tuple[str, str]
) -> None:
    """Kept: ``one`` and ``two`` are one inode. Not kept: two files, each with the
    bytes."""
    copy = copied(shared, names)
    with copy.pair.dst.view(copy.dst) as local:
        assert (local / "one").read_bytes() == (local / "two").read_bytes()
        if copy.pair.support(Feature.HARDLINKS) is Support.YES:
            same = os.path.samefile(local / "one", local / "two")
            assert same, "one and two are two files, not one linked"


@pytest.mark.parametrize("names", meta_cases(Feature.SPECIALS, Support.YES))
def test_fifos_are_made_again(shared: Shared, names: tuple[str, str]) -> None:
    copy = copied(shared, names)
    with copy.pair.dst.view(copy.dst) as local:
        assert kind(local / "fifo") == "fifo", copy.run


SPECIAL: Spec = {"a.txt": b"alpha\n", "fifo": Fifo(mode=0o644)}


@pytest.mark.parametrize(
    "pair", meta_cases(Feature.SPECIALS, Support.NO), indirect=True
)
def test_a_fifo_is_an_entry_error_or_skipped_where_it_cannot_be_made(
    pair: Pair,
) -> None:
    """Without ``--skip-specials`` the FIFO is one entry error (exit 1, counted,
    named) and the rest is copied; with it, it is skipped and counted."""
    src = pair.source(SPECIAL)
    failed = pair.rcp(sources=[src], destination=pair.target("without"))
    assert failed.code == 1, failed
    assert failed.errors == 1, failed
    assert "fifo" in failed.out, failed
    assert pair.dst.read(pair.dst.join(pair.target("without"), "a.txt")) == b"alpha\n"
    skipped = pair.copy("--skip-specials", source=src, destination=pair.target())
    assert skipped.counts("skipped")["specials"] == 1, skipped.summary
    assert not pair.dst.exists(pair.dst.join(pair.target(), "fifo"))


@pytest.mark.parametrize("names", meta_cases(Feature.XATTRS, Support.YES))
def test_xattrs_are_kept_with_preserve_xattrs(
    shared: Shared, names: tuple[str, str]
) -> None:
    copy = copied(shared, names)
    assert differences(copy, "xattr", xattrs=True) == []
    with copy.pair.dst.view(copy.dst) as local:
        assert os.getxattr(Path(local) / "tagged", "user.rcp") == b"kept"


@pytest.mark.parametrize("pair", cases(Feature.XATTRS, Support.REFUSED), indirect=True)
def test_preserving_xattrs_is_refused_where_not_kept(pair: Pair) -> None:
    src = pair.source({"f": b"data\n"})
    dst = pair.existing({"old": b"old\n"})
    before = pair.snapshot()
    run = pair.rcp("--preserve", "xattrs", sources=[src], destination=dst, slash=True)
    pair.refused(run, "--preserve", before)
