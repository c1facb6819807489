"""Operand rules and bad input: a clear UsageError, and nothing touched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rcp_core import CopySettings, ExistingPolicy, UsageError, copy
from rcp_core.paths import plan_jobs


def snapshot(root: Path) -> list[tuple[str, int, int]]:
    """Every path under root with its size and mtime: to prove nothing changed."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            out.append((os.path.join(dirpath, name), st.st_size, st.st_mtime_ns))
    return sorted(out)


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f").write_bytes(b"data")
    return root


def test_exact_name_without_trailing_slash(src: Path, tmp_path: Path) -> None:
    jobs = plan_jobs([str(src), str(tmp_path / "copy")], CopySettings())
    assert [(j.dst_parent, j.dst_name) for j in jobs] == [(str(tmp_path), "copy")]


def test_trailing_slash_copies_into(src: Path, tmp_path: Path) -> None:
    into = tmp_path / "into"
    into.mkdir()
    summary = copy([str(src)], f"{into}/")
    assert (into / "src" / "sub" / "f").read_bytes() == b"data"
    assert summary["copied.files"] == 1


def test_several_sources_copied_into(src: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "g").write_bytes(b"g")
    into = tmp_path / "into"
    into.mkdir()
    copy([str(src), str(other)], f"{into}/")
    assert sorted(os.listdir(into)) == ["other", "src"]
    assert (into / "other" / "g").read_bytes() == b"g"


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing source", "source"),
        ("source is root", "refusing to copy '/'"),
        ("destination inside source", "inside the source"),
        ("destination equals source", "are the same"),
        ("destination parent missing", "does not exist"),
        ("destination exists", "exists"),
        ("several sources without slash", "trailing slash"),
        ("into a missing directory", "does not exist"),
        ("delete with several sources", "single source"),
        ("same name twice", "same name"),
    ],
)
def test_bad_operands_touch_nothing(
    src: Path, tmp_path: Path, case: str, message: str
) -> None:
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "keep").write_bytes(b"keep")
    other = tmp_path / "elsewhere" / "src"
    other.mkdir(parents=True)
    operands, settings = {
        "missing source": ([str(tmp_path / "nope"), str(tmp_path / "d")], None),
        "source is root": (["/", str(tmp_path / "d")], None),
        "destination inside source": ([str(src), str(src / "sub" / "d")], None),
        "destination equals source": ([str(src), str(src)], None),
        "destination parent missing": ([str(src), str(tmp_path / "a" / "b")], None),
        "destination exists": ([str(src), str(existing)], None),
        "several sources without slash": ([str(src), str(other), str(existing)], None),
        "into a missing directory": ([str(src), f"{tmp_path / 'nodir'}/"], None),
        "delete with several sources": (
            [str(src), str(existing), f"{tmp_path}/"],
            CopySettings(delete=True),
        ),
        "same name twice": ([str(src), str(other), f"{existing}/"], None),
    }[case]
    before = snapshot(tmp_path)
    with pytest.raises(UsageError, match=message):
        copy(operands[:-1], operands[-1], settings)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"delete": True, "existing": ExistingPolicy.IGNORE_EXISTING},
            "--delete conflicts",
        ),
        ({"delete_excluded": True}, "needs --delete"),
        ({"max_workers": 0}, "at least 1"),
        ({"max_processes": 0}, "max-processes must be at least 1"),
        ({"ops_throttle": -1}, "negative"),
        ({"overwrite_compare": frozenset()}, "at least one"),
    ],
)
def test_conflicting_settings(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        CopySettings(**kwargs)  # type: ignore[arg-type]


def test_delete_implies_overwrite() -> None:
    assert CopySettings(delete=True).existing is ExistingPolicy.OVERWRITE


def test_existing_destination_allowed_with_a_policy(src: Path, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    dst.mkdir()
    copy([str(src)], str(dst), CopySettings(existing=ExistingPolicy.OVERWRITE))
    assert (dst / "sub" / "f").read_bytes() == b"data"
