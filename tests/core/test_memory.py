"""The engine keeps no whole-tree lists: peak memory stays flat as the tree grows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def empty_files(root: Path, dirs: int, per_dir: int) -> None:
    for d in range(dirs):
        parent = root / f"d{d:04}"
        parent.mkdir(parents=True)
        fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for f in range(per_dir):
                os.close(
                    os.open(f"f{f:05}", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)
                )
        finally:
            os.close(fd)


def peak_rss(src: Path, dst: Path, report: Path) -> int:
    """Copy in a fresh process and return the peak RSS it reports."""
    code = "from rcp_provider.cli.rcp import main; raise SystemExit(main())"
    result = subprocess.run(
        [sys.executable, "-c", code, "--summary-json", str(report), str(src), str(dst)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(report.read_text())
    return int(data["peak_rss_bytes"])


@pytest.mark.slow
def test_peak_rss_flat_from_20k_to_200k_files(tmp_path: Path) -> None:
    """Ten times the files must cost less than twice the peak memory."""
    small, large = tmp_path / "small", tmp_path / "large"
    empty_files(small, dirs=20, per_dir=1000)
    empty_files(large, dirs=200, per_dir=1000)
    rss_small = peak_rss(small, tmp_path / "small-copy", tmp_path / "small.json")
    rss_large = peak_rss(large, tmp_path / "large-copy", tmp_path / "large.json")
    print(f"peak RSS: 20k files {rss_small} B, 200k files {rss_large} B")
    assert (
        sum(len(files) for _, _, files in os.walk(tmp_path / "large-copy")) == 200_000
    )
    assert rss_large < 2 * rss_small
