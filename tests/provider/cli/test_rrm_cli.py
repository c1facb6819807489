"""The ``rrm`` command: exit codes, summaries, ages and refusals, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rcp_provider.options import parse_time

RRM = [sys.executable, "-m", "rcp_provider.cli.rrm"]


def rrm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RRM, *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    for d in range(5):
        (root / f"d{d}").mkdir(parents=True)
        for f in range(20):
            (root / f"d{d}" / f"f{f}").write_bytes(b"x" * 10)
    old = time.time() - 10 * 86400
    for f in range(20):
        os.utime(root / "d0" / f"f{f}", (old, old))
    return root


def test_removes_and_reports(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "summary.json"
    done = rrm("--summary", "--summary-json", str(out), str(tree))
    assert done.returncode == 0, done.stderr
    assert "removed:   files 100  dirs 6" in done.stdout
    summary = json.loads(out.read_text())
    assert summary["removed"]["files"] == 100
    assert summary["removed"]["bytes"] == 0  # not looked at without age rules
    assert not tree.exists()


def test_an_age_keeps_the_young(tree: Path) -> None:
    done = rrm("--modified-before", "7d", str(tree))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tree.iterdir()) == [f"d{d}" for d in range(1, 5)]


def test_a_dry_run_lists_and_keeps(tree: Path) -> None:
    done = rrm("--dry-run", str(tree))
    assert done.returncode == 0
    assert done.stdout.count("would remove") == 100 + 6
    assert len(list(tree.rglob("*"))) == 105


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/"], "refusing to remove /"),
        (["--modified-before", "soon", "X"], "neither a time"),
        (["--max-workers", "0", "X"], "max_workers"),
        (["MISSING"], "no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tree: Path, args: list[str], message: str
) -> None:
    args = [
        str(tree) if a == "X" else str(tree / "nope") if a == "MISSING" else a
        for a in args
    ]
    done = rrm(*args)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert message in done.stderr
    assert len(list(tree.rglob("*"))) == 105  # nothing touched


def test_times_and_ages_parse() -> None:
    now = 1_800_000_000.0
    assert parse_time("90s", now) == now - 90
    assert parse_time("2w", now) == now - 14 * 86400
    assert parse_time("2026-11-01T00:00:00+00:00") == 1_793_491_200
