"""Confinement of a service's paths: text checks, symlinks on the way, swaps after."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import rcp_core
from rcp_core.errors import PathRefusedError
from rcp_core.remote.roots import Roots


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Roots, Path, Path]]:
    """Roots ``data`` and ``backup``; ``outside`` beside them, with a file."""
    (tmp_path / "data" / "tree" / "sub").mkdir(parents=True)
    (tmp_path / "data" / "tree" / "sub" / "f").write_text("inside")
    (tmp_path / "backup").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_text("secret")
    (tmp_path / "data" / "escape").symlink_to(tmp_path / "outside")
    roots = Roots([str(tmp_path / "data"), str(tmp_path / "backup")])
    yield roots, tmp_path / "data", tmp_path / "outside"
    roots.close()


@pytest.mark.parametrize(
    ("rel", "why"),
    [
        ("outside/secret", "outside this service's roots"),
        ("data/../outside/secret", "'..'"),
        ("data/./tree", "'.'"),
        ("data/escape/secret", "symlink or not a directory"),
        ("data/tree/sub/f/x", "symlink or not a directory"),
        ("data/missing/x", "'missing' does not exist"),
        ("database/x", "outside this service's roots"),  # a prefix is not a root
    ],
)
def test_paths_out_of_the_roots_are_refused(
    served: tuple[Roots, Path, Path], tmp_path: Path, rel: str, why: str
) -> None:
    roots, _, _ = served
    path = f"{tmp_path}/{rel}"
    with pytest.raises(PathRefusedError, match=why):
        roots.source(path)
    with pytest.raises(PathRefusedError, match=why):
        roots.destination(path)


@pytest.mark.parametrize("path", ["relative/x", "", "/data\0/x"])
def test_malformed_paths_are_refused(
    served: tuple[Roots, Path, Path], path: str
) -> None:
    with pytest.raises(PathRefusedError):
        served[0].source(path)


def test_a_symlink_operand_is_copied_as_a_link_never_followed(
    served: tuple[Roots, Path, Path],
) -> None:
    roots, data, _ = served
    confined = roots.source(f"{data}/escape")
    assert os.readlink(confined.path) == str(served[2])
    confined.close()
    with pytest.raises(PathRefusedError, match="does not follow a symlink"):
        roots.source(f"{data}/escape/")


def test_a_root_is_a_source_but_never_a_destination_by_name(
    served: tuple[Roots, Path, Path], tmp_path: Path
) -> None:
    roots, data, _ = served
    source = roots.source(str(data))
    assert os.path.realpath(source.path) == str(data)
    source.close()
    with pytest.raises(PathRefusedError, match="is a root"):
        roots.destination(str(tmp_path / "backup"))
    inside = roots.destination(f"{tmp_path}/backup/")
    assert inside.name == ""
    assert os.path.realpath(inside.path) == str(tmp_path / "backup")
    inside.close()


def test_a_directory_swapped_for_a_symlink_after_the_check_is_not_followed(
    served: tuple[Roots, Path, Path], tmp_path: Path
) -> None:
    """The engine gets the checked directory itself, not its path again."""
    roots, data, outside = served
    confined = roots.destination(f"{data}/tree/sub/copy")
    os.rename(data / "tree", data / "moved")
    (data / "tree").symlink_to(outside)
    rcp_core.copy(str(tmp_path / "backup"), confined.path)
    confined.close()
    assert (data / "moved" / "sub" / "copy").is_dir()
    assert sorted(os.listdir(outside)) == ["secret"]


def test_roots_must_exist_and_be_absolute(tmp_path: Path) -> None:
    with pytest.raises(PathRefusedError, match="not an absolute"):
        Roots(["data"])
    with pytest.raises(PathRefusedError, match="No such file"):
        Roots([str(tmp_path / "missing")])
    with pytest.raises(PathRefusedError, match="at least one"):
        Roots([])
