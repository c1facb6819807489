"""Operand rules on every pair of backends ``rcp`` accepts, and the pairs it refuses.

``rcp SRC DST`` creates exactly ``DST``; ``rcp SRC DST/`` copies into the existing
directory ``DST`` as ``DST/SRC``; an existing ``DST`` is refused unless a policy allows
changing it; a missing ``DST/`` or parent of ``DST`` is refused where the backend has
directories; several sources need ``DST/``. Every refusal is exit 2, one line on
stderr, nothing written.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support import capabilities
from support.capabilities import Feature, Support
from support.pairs import TREE, Pair, Registry, cases

ALL = cases()
INTO = {"keep": b"already here\n"}
"""An existing destination directory (a store's prefix exists once a key is in it)."""


@pytest.mark.parametrize("pair", ALL, indirect=True)
def test_without_a_slash_the_copy_gets_exactly_the_destination_name(
    pair: Pair,
) -> None:
    """``rcp SRC DST``: the tree at ``DST`` is the source's, nothing else written."""
    src, dst = pair.source(TREE), pair.target()
    run = pair.copy(source=src, destination=dst)
    assert pair.differences(src, dst) == [], run
    pair.only_in(dst)
    assert run.counts("copied")["files"] == 3


@pytest.mark.parametrize("pair", ALL, indirect=True)
def test_with_a_slash_the_copy_goes_into_the_existing_directory(pair: Pair) -> None:
    """``rcp SRC DST/``: the copy is ``DST/SRC``; what ``DST`` held stays."""
    src, dst = pair.source(TREE), pair.existing(INTO)
    before = pair.snapshot()
    run = pair.rcp(sources=[src], destination=dst, slash=True)
    assert run.code == 0, run
    inside = pair.dst.join(dst, "src")
    assert pair.differences(src, inside) == []
    assert pair.dst.read(pair.dst.join(dst, "keep")) == INTO["keep"]
    pair.only_in(inside, before)


@pytest.mark.parametrize("pair", ALL, indirect=True)
def test_a_file_source_is_copied_to_its_exact_name_or_into(pair: Pair) -> None:
    """A single file: ``rcp FILE DST`` makes the file ``DST``, ``rcp FILE DIR/``
    makes ``DIR/FILE``."""
    src = pair.src.join(pair.source(TREE), "a.txt")
    exact = pair.target("exact")
    pair.copy(source=src, destination=exact)
    assert pair.dst.read(exact) == b"alpha\n"
    into = pair.existing(INTO, "into")
    run = pair.rcp(sources=[src], destination=into, slash=True)
    assert run.code == 0, run
    assert pair.dst.read(pair.dst.join(into, "a.txt")) == b"alpha\n"


@pytest.mark.parametrize("pair", ALL, indirect=True)
def test_an_existing_destination_is_refused_without_a_policy(pair: Pair) -> None:
    """``rcp SRC DST`` onto an existing ``DST``: exit 2 saying it exists, ``DST``
    untouched (as ``DST/SRC`` when ``SRC`` is there already)."""
    src = pair.source(TREE)
    dst = pair.existing({"a.txt": b"old\n"})
    pair.existing({"src/a.txt": b"old\n"}, "into")
    before = pair.snapshot()
    pair.refused(pair.rcp(sources=[src], destination=dst), "exists", before)
    into = pair.target("into")
    run = pair.rcp(sources=[src], destination=into, slash=True)
    pair.refused(run, "exists", before)


@pytest.mark.parametrize("pair", ALL, indirect=True)
def test_a_missing_directory_or_parent_is_refused_where_there_are_directories(
    pair: Pair,
) -> None:
    """``rcp SRC MISSING/`` and ``rcp SRC MISSING/DST``: where the destination has
    directories, exit 2 naming the missing directory and nothing written; on a store
    of prefixes, the copy is made under the prefix."""
    src = pair.source(TREE)
    missing = pair.target("missing")
    below = pair.dst.join(missing, "dst")
    before = pair.snapshot()
    refuses = pair.cell(Feature.DIRECTORIES, pair.dst).support is Support.YES
    into = pair.rcp(sources=[src], destination=missing, slash=True)
    if refuses:
        pair.refused(into, "does not exist", before)
        pair.refused(
            pair.rcp(sources=[src], destination=below), "does not exist", before
        )
    else:
        assert into.code == 0, into
        assert pair.differences(src, pair.dst.join(missing, "src")) == []
        pair.copy(source=src, destination=below)
        assert pair.differences(src, below) == []


@pytest.mark.parametrize("pair", ALL, indirect=True)
def test_several_sources_need_a_slash_or_are_refused(pair: Pair) -> None:
    """``rcp A B DST/`` copies both into ``DST``; without the slash it is refused.
    A pair that takes one source refuses both forms, saying so."""
    a = pair.source({"x": b"from a\n"}, "a")
    b = pair.source({"y": b"from b\n"}, "b")
    dst = pair.existing(INTO)
    before = pair.snapshot()
    bare = pair.rcp(sources=[a, b], destination=dst)
    if pair.support(Feature.SEVERAL_SOURCES) is Support.YES:
        pair.refused(bare, "trailing slash", before)
        run = pair.rcp(sources=[a, b], destination=dst, slash=True)
        assert run.code == 0, run
        assert pair.dst.read(pair.dst.join(dst, "a", "x")) == b"from a\n"
        assert pair.dst.read(pair.dst.join(dst, "b", "y")) == b"from b\n"
    else:
        pair.refused(bare, "one source", before)
        run = pair.rcp(sources=[a, b], destination=dst, slash=True)
        pair.refused(run, "one source", before)


REFUSED = [
    pytest.param(names, id=f"{names[0]}-{names[1]}")
    for names in capabilities.refused_pairs()
]


@pytest.mark.parametrize("refused", REFUSED)
def test_a_pair_rcp_does_not_copy_between_is_refused_naming_why(
    refused: tuple[str, str],
    backends: Registry,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``host:/path`` beside a URL: exit 2, one line naming both kinds of operand,
    nothing written -- at the destination, nor anywhere a relative path spelled
    like the host operand would lead (run from a directory where it exists)."""
    pair = Pair(backends[refused[0]], backends[refused[1]])
    src, dst = pair.source(TREE), pair.target()
    operand = (
        pair.dst.operand(dst) if pair.dst.name == "host" else pair.src.operand(src)
    )
    os.makedirs(tmp_path / os.path.dirname(operand), exist_ok=True)
    monkeypatch.chdir(tmp_path)
    before = pair.snapshot()
    run = pair.rcp(sources=[src], destination=dst)
    written = sorted(
        p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()
    )
    assert written == [], f"written beside the host operand: {written}"
    pair.refused(run, "host", before)
    assert "URL" in run.err, run
