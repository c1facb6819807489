"""latencyfs's injected faults: each rule fires exactly as written, and is logged."""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from benchmarks.latencyfs import Faults, LatencyFsError, mounted

pytestmark = pytest.mark.privileged


@contextmanager
def mount_with(tmp_path: Path, rules: list[str]) -> Iterator[tuple[Path, Faults]]:
    """A mount of a directory holding ``f`` (200,000 bytes) with ``rules``."""
    backing, mnt = tmp_path / "backing", tmp_path / "mnt"
    backing.mkdir()
    mnt.mkdir()
    (backing / "f").write_bytes(b"x" * 200_000)
    faults = Faults.table(tmp_path, rules)
    with mounted(backing, mnt, delay_ms=0, faults=faults) as mounted_at:
        yield mounted_at, faults


@pytest.fixture
def rules() -> list[str]:
    return []


@pytest.fixture
def fs(tmp_path: Path, rules: list[str]) -> Iterator[tuple[Path, Faults]]:
    with mount_with(tmp_path, rules) as mounted_fs:
        yield mounted_fs


def failure(call: object) -> int | None:
    """The errno ``call()`` failed with, or ``None``."""
    try:
        call()  # type: ignore[operator]
    except OSError as exc:
        return exc.errno
    return None


@pytest.mark.parametrize("rules", [["open /f EIO times=2"]])
def test_a_counted_fault_fires_that_many_times(fs: tuple[Path, Faults]) -> None:
    mnt, faults = fs
    read = (mnt / "f").read_bytes
    assert [failure(read), failure(read), failure(read)] == [errno.EIO, errno.EIO, None]
    assert faults.injected() == [("open", "EIO", "/f"), ("open", "EIO", "/f")]


@pytest.mark.parametrize(
    "rules", [["mkdir /new* ENOSPC after=1", "unlink /gone EACCES times=1"]]
)
def test_after_lets_requests_through_and_rules_match_by_glob(
    fs: tuple[Path, Faults],
) -> None:
    mnt, faults = fs
    (mnt / "new1").mkdir()  # the first match passes
    assert failure(lambda: (mnt / "new2").mkdir()) == errno.ENOSPC
    (mnt / "other").mkdir()  # another name: no rule
    (mnt / "gone").write_bytes(b"")
    assert failure((mnt / "gone").unlink) == errno.EACCES
    (mnt / "gone").unlink()
    assert faults.injected() == [
        ("mkdir", "ENOSPC", "/new2"),
        ("unlink", "EACCES", "/gone"),
    ]


@pytest.mark.parametrize("rules", [["read /f short"]])
def test_short_reads_reach_the_reader(fs: tuple[Path, Faults]) -> None:
    """Half of what was asked, every time, and still all of the file in the end."""
    mnt, _ = fs
    fd = os.open(mnt / "f", os.O_RDONLY)
    try:
        assert len(os.read(fd, 65536)) == 32768
        chunks = [os.read(fd, 65536) for _ in range(20)]
    finally:
        os.close(fd)
    assert 32768 + sum(map(len, chunks)) == 200_000


@pytest.mark.parametrize("rules", [["read /f eof times=1"]])
def test_an_early_end_of_file_reaches_the_reader(fs: tuple[Path, Faults]) -> None:
    """The first read finds nothing, though the size says 200,000 bytes."""
    mnt, faults = fs
    fd = os.open(mnt / "f", os.O_RDONLY)
    try:
        assert os.fstat(fd).st_size == 200_000
        assert os.read(fd, 4096) == b""
        assert len(os.read(fd, 4096)) == 4096
    finally:
        os.close(fd)
    assert faults.injected() == [("read", "eof", "/f")]


def test_random_faults_replay_from_their_seed(tmp_path: Path) -> None:
    outcomes = []
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        with mount_with(tmp_path / run, ["seed 7", "getattr /f EIO p=0.5"]) as (mnt, _):
            stat_f = functools.partial(os.stat, mnt / "f")
            outcomes.append([failure(stat_f) for _ in range(40)])
    assert outcomes[0] == outcomes[1]
    assert 5 < outcomes[0].count(errno.EIO) < 35


@pytest.mark.parametrize(
    "line", ["open /f EWHATEVER", "open /f slow", "open /f EIO p=2", "open /f"]
)
def test_a_bad_rule_stops_the_mount_with_its_line(tmp_path: Path, line: str) -> None:
    with (
        pytest.raises(LatencyFsError, match=r"faults.rules:1: not a rule"),
        mount_with(tmp_path, [line]),
    ):
        pass
