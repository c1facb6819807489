"""The removal-floor probe: real rmdirs through latencyfs, and the bound it derives."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks.latencyfs import mounted
from benchmarks.rmdir_floor import DIRS, render, rmdirs, start_up

pytestmark = pytest.mark.privileged


def test_the_rmdirs_of_one_directory_take_a_delay_each_whatever_the_threads(
    tmp_path: Path,
) -> None:
    """The kernel serializes them: 32 threads take about as long as one, at least a
    request's delay per directory."""
    backing, mnt = tmp_path / "backing", tmp_path / "mnt"
    backing.mkdir()
    mnt.mkdir()
    with mounted(backing, mnt, 0.5):
        many = rmdirs(backing, mnt, 32)
        one = rmdirs(backing, mnt, 1)
    assert many >= DIRS * 0.0005
    assert many > one / 3
    assert list(backing.iterdir()) == []


def test_the_bound_is_rm_rf_over_the_fastest_rmdirs() -> None:
    out = render({1: [0.25, 0.26], 32: [0.2, 0.21]}, 1.6)
    assert "| 32 | 0.205 | 0.200 | 0.210 |" in out
    assert "no remover can be more than 8.0x faster" in out
    assert "out of reach" not in out
    assert "out of reach" in render({32: [0.25]}, 1.6)
    with_rrm = render({32: [0.2]}, 1.6, fixed=0.08)
    assert "added: at most 5.7x: out of reach for rrm." in with_rrm


def test_rrm_start_up_is_timed_on_an_empty_directory() -> None:
    assert 0 < start_up(str(Path(sys.executable).with_name("rrm")), 2) < 5
