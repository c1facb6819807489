"""Temporaries a killed run left: recognised by their exact shape, removed by the next
run into their directory, and nothing else with them."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

import rcp_core
from rcp_core import CopySettings, DryRun, ExistingPolicy
from rcp_core.engine.temporaries import TRUNCATED, stands_for, sweep, temp_name
from support.treecmp import TreeCompare
from support.treespec import File, make_tree

OVERWRITE = CopySettings(existing=ExistingPolicy.OVERWRITE)


@pytest.mark.parametrize("name", ["f", "a.b.c", ".hidden", "x" * (TRUNCATED - 1)])
def test_a_temporary_names_what_it_stands_for(name: str) -> None:
    assert stands_for(temp_name(name)) == name


@pytest.mark.parametrize(
    "name",
    [
        "f",
        ".rcp-",
        ".rcp-0123abcd.",  # nothing it stands for
        ".rcp-0123abc.f",  # seven digits
        ".rcp-0123abcg.f",  # not hex
        ".rcp-0123ABCD.f",  # temp_name writes lower case
        ".rcp-0123abcdxf",  # no dot after the digits
        ".rcp-notes",
        temp_name("y" * 300),  # truncated: it may stand for any longer name
        temp_name("y" * TRUNCATED),
    ],
)
def test_other_names_are_not_temporaries(name: str) -> None:
    assert stands_for(name) is None


def test_sweep_removes_only_temporaries_of_source_names(tmp_path: Path) -> None:
    plant = {
        ".rcp-0123abcd.f": "file",  # of a source name: removed
        ".rcp-89abcdef.link": "symlink",  # a symlink's: removed
        ".rcp-00000000.gone": "file",  # of a name the source lacks: kept
        ".rcp-11111111.f": "dir",  # a directory: never removed
        ".rcp-notes": "file",  # not the shape: kept
    }
    for name, kind in plant.items():
        if kind == "dir":
            (tmp_path / name).mkdir()
        elif kind == "symlink":
            (tmp_path / name).symlink_to("anywhere")
        else:
            (tmp_path / name).write_bytes(b"data")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        in_source = {"f", "link"}.__contains__
        expected = [".rcp-0123abcd.f", ".rcp-89abcdef.link"]
        assert sorted(sweep(fd, in_source, dry=True)) == expected
        assert len(os.listdir(tmp_path)) == 5
        assert sorted(sweep(fd, in_source)) == expected
    finally:
        os.close(fd)
    assert sorted(os.listdir(tmp_path)) == [
        ".rcp-00000000.gone",
        ".rcp-11111111.f",
        ".rcp-notes",
    ]


def test_a_rerun_removes_what_a_killed_replacement_left(
    tmp_path: Path, tree_compare: TreeCompare, caplog: pytest.LogCaptureFixture
) -> None:
    """A run killed while it replaced ``d/f`` left ``d/.rcp-XXXXXXXX.f`` holding part
    of the new content; the rerun copies and removes it, a dry run names it."""
    src = make_tree(tmp_path / "src", {"d/f": File(b"new" * 1000), "d/g": b"g"})
    dst = tmp_path / "dst"
    rcp_core.copy(str(src), str(dst))
    (src / "d" / "f").write_bytes(b"newer" * 1000)
    leftover = dst / "d" / ".rcp-5ca1ab1e.f"
    leftover.write_bytes(b"newer" * 10)
    with caplog.at_level(logging.INFO, logger="rcp_core"):
        dry = rcp_core.copy(
            str(src),
            str(dst),
            CopySettings(existing=ExistingPolicy.OVERWRITE, dry_run=DryRun.BRIEF),
        )
    assert dry["removed.files"] == 0
    assert leftover.exists()
    assert "would remove temporary 'src/d/.rcp-5ca1ab1e.f'" in caplog.text
    summary = rcp_core.copy(str(src), str(dst), OVERWRITE)
    assert summary["removed.files"] == 1
    assert summary["copied.files"] == 1
    assert not leftover.exists()
    assert tree_compare(src, dst) == []
