"""Resource bounds: open-file budget, worker count, metadata-ops throttle."""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import rcp_core
from rcp_core import CopySettings
from rcp_core.engine.copyrun import Engine
from rcp_core.engine.entries import ASIDE_BYTES
from rcp_core.paths import plan_jobs
from rcp_core.run.throttle import TokenBucket
from rcp_core.site.capacity import FD_RESERVE, FDS_PER_WORKER, OPEN_FILES_CAP
from support.treecmp import TreeCompare


@pytest.fixture
def low_soft_limit() -> Iterator[int]:
    """Lower the soft RLIMIT_NOFILE for the test; restore it afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(256, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
    try:
        yield hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def engine_for(tmp_path: Path, settings: CopySettings) -> Engine:
    (tmp_path / "src").mkdir(exist_ok=True)
    jobs = plan_jobs([str(tmp_path / "src"), str(tmp_path / "dst")], settings)
    return Engine(jobs, settings)


def test_soft_open_files_limit_is_raised_to_hard(
    tmp_path: Path, low_soft_limit: int
) -> None:
    engine = engine_for(tmp_path, CopySettings())
    hard = low_soft_limit
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard
    assert engine.max_open_files == min(int(hard * 0.8), OPEN_FILES_CAP)


def test_max_open_files_bounds_the_workers(tmp_path: Path) -> None:
    """Each worker may hold a source and a destination file plus directories."""
    budget = (100 - FD_RESERVE) // FDS_PER_WORKER
    for settings in (
        CopySettings(max_open_files=100),
        CopySettings(max_open_files=100, max_workers=50),
    ):
        bounds = engine_for(tmp_path, settings).concurrency
        assert bounds.maximum + bounds.aside <= budget
        assert bounds.minimum <= bounds.initial <= bounds.maximum
        assert engine_for(tmp_path, settings).pool.threads == bounds.maximum
    tiny = engine_for(tmp_path, CopySettings(max_open_files=10)).concurrency
    assert (tiny.minimum, tiny.initial, tiny.maximum) == (1, 1, 1)


def test_explicit_workers_are_fixed(tmp_path: Path) -> None:
    """--max-workers N: exactly N in flight, no adaptation."""
    bounds = engine_for(tmp_path, CopySettings(max_workers=3)).concurrency
    assert (bounds.minimum, bounds.initial, bounds.maximum) == (3, 3, 3)
    assert not bounds.adaptive
    assert bounds.aside == 0  # no more files in flight than asked for


def test_local_disks_copy_large_files_aside_one_per_cpu(tmp_path: Path) -> None:
    engine = engine_for(tmp_path, CopySettings(max_open_files=4096))
    cpus = len(os.sched_getaffinity(0))
    assert engine.concurrency.aside == cpus
    assert engine.pool.aside_max == cpus
    assert engine.ctx.aside is not None
    plain = engine_for(tmp_path, CopySettings(max_workers=1))
    assert plain.pool.aside_max == 0
    assert plain.ctx.aside is None


def test_large_and_small_files_of_one_directory_copy_exactly_aside(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """Large files copied aside while their batch's small files go on elsewhere: the
    copy is exact and counted once."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(6):
        (src / f"large{i}").write_bytes(bytes([i]) * (ASIDE_BYTES + i))
        for j in range(40):
            (src / f"small{i}-{j}").write_bytes(b"%d %d" % (i, j))
    settings = CopySettings(max_processes=1)
    summary = rcp_core.copy(src, tmp_path / "dst", settings)
    assert summary["copied.files"] == 6 * 41
    assert summary["copied.bytes"] == sum(p.stat().st_size for p in src.iterdir())
    assert tree_compare(src, tmp_path / "dst") == []


def test_token_bucket_allows_a_burst_then_paces() -> None:
    """rate tokens at once, then one per 1/rate seconds (a lower bound: never faster)."""
    bucket = TokenBucket(20.0)
    start = time.monotonic()
    for _ in range(20):
        bucket.take()
    burst = time.monotonic() - start
    for _ in range(10):
        bucket.take()
    paced = time.monotonic() - start - burst
    assert paced >= 10 / 20 * 0.9


def test_token_bucket_paces_amounts_across_threads() -> None:
    """Bytes, as --bwlimit takes them: a burst of one second's worth, then what four
    threads take together passes at the rate, an amount over the burst too."""
    bucket = TokenBucket(400_000.0)
    start = time.monotonic()
    bucket.take(400_000)  # the burst
    assert time.monotonic() - start < 0.2
    threads = [threading.Thread(target=bucket.take, args=(100_000,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    bucket.take(200_000)  # more than what is left of any burst: into debt
    elapsed = time.monotonic() - start
    assert elapsed >= (400_000 + 200_000) / 400_000 * 0.95


def test_ops_throttle_paces_a_copy(tmp_path: Path) -> None:
    """40 entries at 20 metadata ops/s take at least a second after the burst."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(40):
        (src / f"f{i}").write_bytes(b"x")
    start = time.monotonic()
    summary = rcp_core.copy(
        str(src), str(tmp_path / "dst"), CopySettings(ops_throttle=20)
    )
    elapsed = time.monotonic() - start
    assert summary["copied.files"] == 40
    assert elapsed >= (40 - 20) / 20 * 0.9
