"""What is copied and what is removed: ``--include``/``--exclude``, ``--gitignore``,
``--delete`` and ``--dry-run explain``, on every pair.

Every kind of storage honours them (the store engine walks one directory at a time
with the local walk's filter rules); each effect is checked on the tree.
"""

from __future__ import annotations

import re

import pytest

from support.capabilities import Feature, Support
from support.pairs import TREE, Pair, cases
from support.treespec import File, Spec

FILES: Spec = {
    "keep.txt": b"keep\n",
    "skip.log": b"log\n",
    "x.ign": b"ignored by .gitignore\n",
    ".gitignore": b"*.ign\n",
    "sub/keep.txt": b"keep below\n",
    "sub/skip.log": b"log below\n",
    "sub/local.txt": b"ignored by sub/.gitignore\n",
    "sub/.gitignore": b"local.txt\n",
}


def files(pair: Pair, path: str) -> set[str]:
    """The relative paths of the files of the tree at ``path`` (of the destination)."""
    with pair.dst.view(path) as local:
        return {str(p.relative_to(local)) for p in local.rglob("*") if p.is_file()}


SELECTIONS = {
    "exclude": (("--exclude", "*.log"), set(FILES) - {"skip.log", "sub/skip.log"}),
    "include": (
        ("--include", "sub/**"),
        {"sub/keep.txt", "sub/skip.log", "sub/local.txt", "sub/.gitignore"},
    ),
}


@pytest.mark.parametrize("selection", SELECTIONS)
@pytest.mark.parametrize("pair", cases(Feature.FILTERS, Support.YES), indirect=True)
def test_include_and_exclude_choose_what_is_copied(pair: Pair, selection: str) -> None:
    """``--exclude '*.log'`` leaves out every ``.log``; ``--include 'sub/**'`` copies
    only what is below ``sub``."""
    flags, kept = SELECTIONS[selection]
    src, dst = pair.source(FILES), pair.target()
    pair.copy(*flags, source=src, destination=dst)
    assert files(pair, dst) == kept


@pytest.mark.parametrize("pair", cases(Feature.GITIGNORE, Support.YES), indirect=True)
def test_gitignore_leaves_out_what_each_gitignore_names(pair: Pair) -> None:
    """``--gitignore``: ``*.ign`` (the top's) and ``sub/local.txt`` (``sub``'s own
    ``.gitignore``) are not copied; the ``.gitignore`` files are."""
    src, dst = pair.source(FILES), pair.target()
    pair.copy("--gitignore", source=src, destination=dst)
    assert files(pair, dst) == set(FILES) - {"x.ign", "sub/local.txt"}


EXTRA: Spec = {
    **{rel: entry for rel, entry in TREE.items() if rel != "."},
    "extra.txt": b"only in the destination\n",
    "gone/deep/f": b"a directory the source does not have\n",
    "sub/extra.txt": b"below\n",
}


@pytest.mark.parametrize("pair", cases(Feature.DELETE, Support.YES), indirect=True)
def test_delete_makes_the_destination_a_mirror(pair: Pair) -> None:
    """``-o --delete``: what only the destination had (files, a directory tree, at
    any depth) is removed; the destination is the source's tree, and the removals
    are counted."""
    src, dst = pair.source(TREE), pair.existing(EXTRA)
    run = pair.copy("-o", "--delete", source=src, destination=dst)
    assert pair.differences(src, dst) == []
    assert run.counts("removed")["files"] == 3, run.summary


PROTECTED: Spec = {
    "a.txt": TREE["a.txt"],
    "extra.txt": b"only in the destination\n",
    "mine.log": b"excluded: not the copy's to remove\n",
    "gone/deep/f": b"removed\n",
    "gone/deep/g.log": b"excluded: keeps its directories\n",
}


@pytest.mark.parametrize("excluded_too", [False, True])
@pytest.mark.parametrize("pair", cases(Feature.DELETE, Support.YES), indirect=True)
def test_delete_keeps_what_the_filters_exclude_unless_delete_excluded(
    pair: Pair, excluded_too: bool
) -> None:
    """``-o --delete --exclude '*.log'`` removes what the source lacks but the
    excluded names (also inside a directory the source lacks, which stays holding
    them); ``--delete-excluded`` removes those too."""
    src, dst = pair.source(TREE), pair.existing(PROTECTED)
    flags = ("-o", "--delete", "--exclude", "*.log")
    pair.copy(
        *flags,
        *(("--delete-excluded",) if excluded_too else ()),
        source=src,
        destination=dst,
    )
    copied = {rel for rel, entry in TREE.items() if isinstance(entry, File)}
    kept = set() if excluded_too else {"mine.log", "gone/deep/g.log"}
    assert files(pair, dst) == copied | kept


PARTIAL: Spec = {
    "a.txt": TREE["a.txt"],  # identical: same bytes, size and mtime
    "sub/b.txt": b"changed in the destination\n",
}


@pytest.mark.parametrize("pair", cases(Feature.DRY_RUN, Support.YES), indirect=True)
def test_dry_run_explain_says_what_it_would_do_and_why_and_does_nothing(
    pair: Pair,
) -> None:
    """``-o --dry-run explain`` onto a partial copy: a line for each file saying
    what would happen and why (left, replaced, copied), and nothing written."""
    src, dst = pair.source(TREE), pair.existing(PARTIAL)
    before = pair.snapshot()
    run = pair.copy("-o", "--dry-run", "explain", source=src, destination=dst)
    assert pair.snapshot() == before
    lines = run.out.splitlines()

    def said(name: str, action: str) -> bool:
        """A line says ``action`` of ``name``, and why (in parentheses at its end)."""
        pattern = rf"{action} file '[^']*\b{re.escape(name)}' \(.+\)$"
        return any(re.search(pattern, line) for line in lines)

    assert said("a.txt", "unchanged"), run
    assert said("sub/b.txt", "would replace"), run
    assert said("sub/deeper/c.txt", "would (copy|create)"), run
