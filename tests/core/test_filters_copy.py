"""Filters through a real copy: what arrives, what is not descended, what is counted.

The filter module's own decisions are tested in ``test_filters.py``; here every test
runs :func:`rcp_core.copy` on a real tree and lists the destination.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import rcp_core
from rcp_core import CopySettings, ExistingPolicy, Summary
from support.treespec import Dir, Entry, File, make_tree


def listing(root: Path) -> set[str]:
    """Every path under ``root``, relative, directories with a trailing ``/``."""
    out: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        prefix = "" if rel == "." else rel + "/"
        out.update(prefix + d + "/" for d in dirnames)
        out.update(prefix + f for f in filenames)
    return out


def copy(tmp_path: Path, spec: dict[str, Entry], **settings: Any) -> Summary:
    """Build ``spec`` as ``src`` and copy it to ``dst`` with these settings."""
    make_tree(tmp_path / "src", spec)
    return rcp_core.copy(
        str(tmp_path / "src"),
        str(tmp_path / "dst"),
        CopySettings(**settings),
    )


TREE: dict[str, Entry] = {
    "top.log": b"root log",
    "readme.txt": b"r",
    "sub/top.log": b"nested log",
    "sub/a.txt": b"a",
    "sub/deep/b.txt": b"b",
    "sub/deep/c.log": b"c",
    "build/out.o": b"o",
    "src/build": b"a file named build",
    "src/main.c": b"int main;",
}


def test_unanchored_exclude_matches_at_any_depth(tmp_path: Path) -> None:
    """``*.log`` excludes log files everywhere; each is counted as skipped."""
    summary = copy(tmp_path, TREE, excludes=["*.log"])
    got = listing(tmp_path / "dst")
    assert not [p for p in got if p.endswith(".log")]
    assert {"readme.txt", "sub/a.txt", "sub/deep/b.txt", "src/build"} <= got
    assert summary["skipped.files"] == 3
    assert summary["skipped.dirs"] == 0
    assert summary["copied.files"] == 6


def test_anchored_exclude_matches_only_at_the_root(tmp_path: Path) -> None:
    """``/top.log`` excludes the root's top.log, not ``sub/top.log``."""
    summary = copy(tmp_path, TREE, excludes=["/top.log"])
    got = listing(tmp_path / "dst")
    assert "top.log" not in got
    assert "sub/top.log" in got
    assert (tmp_path / "dst" / "sub" / "top.log").read_bytes() == b"nested log"
    assert summary["skipped.files"] == 1


def test_dir_only_exclude_skips_the_directory_not_a_file_of_that_name(
    tmp_path: Path,
) -> None:
    """``build/`` excludes the directory build (not descended) but not the file."""
    summary = copy(tmp_path, TREE, excludes=["build/"])
    got = listing(tmp_path / "dst")
    assert "build/" not in got
    assert "build/out.o" not in got
    assert "src/build" in got
    assert summary["skipped.dirs"] == 1
    # not descended: out.o was neither copied nor looked at
    assert summary["skipped.files"] == 0
    assert summary["copied.files"] == len(TREE) - 1


def test_excluded_directory_is_not_descended(tmp_path: Path) -> None:
    """Nothing below an excluded directory is counted, copied or reported."""
    spec: dict[str, Entry] = {"keep": b"k"}
    for i in range(50):
        spec[f"cache/d{i % 5}/f{i}"] = b"x"
    summary = copy(tmp_path, spec, excludes=["/cache"])
    assert listing(tmp_path / "dst") == {"keep"}
    assert summary["skipped.dirs"] == 1
    assert summary["skipped.files"] == 0
    assert summary["copied.dirs"] == 1  # the root
    assert summary["copied.files"] == 1


def test_double_star_exclude_crosses_directories(tmp_path: Path) -> None:
    """``/sub/**/*.txt`` excludes text files at any depth under sub only."""
    summary = copy(tmp_path, TREE, excludes=["/sub/**/*.txt"])
    got = listing(tmp_path / "dst")
    assert "sub/a.txt" not in got
    assert "sub/deep/b.txt" not in got
    assert "readme.txt" in got
    assert "sub/deep/c.log" in got
    assert summary["skipped.files"] == 2


def test_include_keeps_matching_files_and_prunes_empty_traversed_dirs(
    tmp_path: Path,
) -> None:
    """With ``--include '*.c'`` only C files arrive; dirs left empty are removed."""
    summary = copy(tmp_path, TREE, includes=["*.c"])
    assert listing(tmp_path / "dst") == {"src/", "src/main.c"}
    assert summary["copied.files"] == 1
    assert summary["skipped.files"] == len(TREE) - 1  # traversed: all but main.c
    assert summary["skipped.dirs"] == 0
    assert summary["errors"] == 0


def test_include_double_star_copies_a_whole_subtree(tmp_path: Path) -> None:
    """``/sub/**`` includes everything under sub; the rest of the tree is left out."""
    copy(tmp_path, TREE, includes=["/sub/**"])
    assert listing(tmp_path / "dst") == {
        "sub/",
        "sub/top.log",
        "sub/a.txt",
        "sub/deep/",
        "sub/deep/b.txt",
        "sub/deep/c.log",
    }


def test_files_under_an_included_directory_are_copied(tmp_path: Path) -> None:
    """Including a directory (dir-only, anchored) includes what is under it."""
    summary = copy(tmp_path, TREE, includes=["/sub/"], excludes=["c.log"])
    assert listing(tmp_path / "dst") == {
        "sub/",
        "sub/top.log",
        "sub/a.txt",
        "sub/deep/",
        "sub/deep/b.txt",
    }
    assert summary["copied.files"] == 3


def test_dir_only_include_does_not_match_a_file(tmp_path: Path) -> None:
    """``build/`` as include matches the directory build, not the file src/build."""
    copy(tmp_path, TREE, includes=["build/"])
    assert listing(tmp_path / "dst") == {"build/", "build/out.o"}


def test_traversed_dirs_are_pruned_only_when_empty_and_created_by_the_run(
    tmp_path: Path,
) -> None:
    """An existing destination directory is never removed for being empty."""
    make_tree(tmp_path / "dst", {"docs": Dir(), "other": Dir()})
    spec: dict[str, Entry] = {
        "docs/x.bin": b"x",
        "other/y.bin": b"y",
        "lib/z.bin": b"z",
        "lib/inner/w.md": b"w",
        "a/b/c/d.md": b"d",
        "a/b/e": Dir(),
    }
    summary = copy(tmp_path, spec, includes=["*.md"], existing=ExistingPolicy.OVERWRITE)
    assert listing(tmp_path / "dst") == {
        "docs/",
        "other/",
        "lib/",
        "lib/inner/",
        "lib/inner/w.md",
        "a/",
        "a/b/",
        "a/b/c/",
        "a/b/c/d.md",
    }
    assert summary["copied.files"] == 2


def test_excludes_win_over_includes(tmp_path: Path) -> None:
    """An entry matching both an include and an exclude is excluded."""
    copy(tmp_path, TREE, includes=["*.txt"], excludes=["/sub/deep/"])
    assert listing(tmp_path / "dst") == {"readme.txt", "sub/", "sub/a.txt"}


def test_filter_file_rules_apply(tmp_path: Path) -> None:
    """A filter file's include/exclude lines (with comments, blanks) act like flags."""
    rules = tmp_path / "rules"
    rules.write_text(
        "# only sources and text\n\n  --include *.c  \n--include *.txt\n"
        "--exclude /sub/deep/\n"
    )
    summary = copy(tmp_path, TREE, filter_file=str(rules))
    assert listing(tmp_path / "dst") == {
        "readme.txt",
        "sub/",
        "sub/a.txt",
        "src/",
        "src/main.c",
    }
    assert summary["skipped.dirs"] == 1


def test_filter_file_combines_with_command_line_rules(tmp_path: Path) -> None:
    """Command-line rules and filter-file rules are both in force."""
    rules = tmp_path / "rules"
    rules.write_text("--exclude *.log\n")
    copy(tmp_path, TREE, excludes=["/src/"], filter_file=str(rules))
    assert listing(tmp_path / "dst") == {
        "readme.txt",
        "sub/",
        "sub/a.txt",
        "sub/deep/",
        "sub/deep/b.txt",
        "build/",
        "build/out.o",
    }


def test_bad_filter_file_is_a_usage_error_and_touches_nothing(tmp_path: Path) -> None:
    """A malformed filter file line is refused before anything is written."""
    rules = tmp_path / "rules"
    rules.write_text("--include *.c\n--frobnicate x\n")
    make_tree(tmp_path / "src", TREE)
    with pytest.raises(rcp_core.UsageError, match=r"rules:2"):
        rcp_core.copy(
            str(tmp_path / "src"),
            str(tmp_path / "dst"),
            CopySettings(filter_file=str(rules)),
        )
    assert not (tmp_path / "dst").exists()


GIT_TREE: dict[str, Entry] = {
    ".gitignore": b"*.log\nbuild/\n# comment\n",
    "a.log": b"ignored",
    "a.txt": b"kept",
    "build/out.o": b"ignored dir",
    "sub/.gitignore": b"!keep.log\n*.tmp\n",
    "sub/keep.log": b"re-included by the nested file",
    "sub/other.log": b"still ignored",
    "sub/x.tmp": b"ignored by the nested file",
    "sub/build": b"a file, not the build/ directory",
    "x.tmp": b"nested rule does not apply up here",
    "sub/deeper/.gitignore": b"/only-here\n",
    "sub/deeper/only-here": b"ignored (anchored to sub/deeper)",
    "sub/deeper/z.log": b"ignored by the root file",
    "only-here": b"kept: the anchored rule is sub/deeper's",
}


def test_gitignore_nested_files_and_negation(tmp_path: Path) -> None:
    """``.gitignore`` files stack: deeper files override, ``!`` re-includes."""
    summary = copy(tmp_path, GIT_TREE, gitignore=True)
    assert listing(tmp_path / "dst") == {
        ".gitignore",
        "a.txt",
        "sub/",
        "sub/.gitignore",
        "sub/keep.log",
        "sub/build",
        "x.tmp",
        "sub/deeper/",
        "sub/deeper/.gitignore",
        "only-here",
    }
    assert (tmp_path / "dst" / "sub" / "keep.log").read_bytes() == (
        b"re-included by the nested file"
    )
    assert summary["skipped.dirs"] == 1  # build/, not descended
    assert summary["skipped.files"] == 5
    assert summary["errors"] == 0


def test_gitignore_off_copies_everything(tmp_path: Path) -> None:
    """Without ``gitignore`` the .gitignore files are plain files and rule nothing."""
    summary = copy(tmp_path, GIT_TREE)
    assert summary["copied.files"] == len(GIT_TREE)
    assert summary["skipped.files"] == summary["skipped.dirs"] == 0


def test_gitignore_combines_with_excludes(tmp_path: Path) -> None:
    """``--exclude`` still applies where no .gitignore rule matches."""
    copy(tmp_path, GIT_TREE, gitignore=True, excludes=["sub/"])
    assert listing(tmp_path / "dst") == {".gitignore", "a.txt", "x.tmp", "only-here"}


def test_filter_skips_count_only_what_was_excluded(tmp_path: Path) -> None:
    """Skipped counters count excluded files and directories, one each."""
    spec: dict[str, Entry] = {
        "a/1.o": b"1",
        "a/2.o": b"2",
        "a/3.c": b"3",
        "b/4.o": b"4",
        "tmp/5.c": b"5",
        "tmp/t/6.c": b"6",
        "root.o": File(b"7", 0o644),
    }
    summary = copy(tmp_path, spec, excludes=["*.o", "/tmp/"])
    assert summary["skipped.files"] == 4
    assert summary["skipped.dirs"] == 1
    assert summary["copied.files"] == 1
    # b/ held only excluded files; it is not traverse-only, so it is copied empty
    assert listing(tmp_path / "dst") == {"a/", "a/3.c", "b/"}
