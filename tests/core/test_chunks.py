"""Large files copied as parallel chunks: every byte exactly once, no deadlock, errors."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import rcp_core
from rcp_core import CopySettings
from rcp_core.engine.chunks import ChunkedCopy, Spawn
from rcp_core.engine.copyrun import Engine
from rcp_core.paths import plan_jobs
from rcp_core.run.tuning import Concurrency
from rcp_core.site.hookspecs import hookimpl
from rcp_core.site.storage import StorageInfo
from support.treecmp import TreeCompare

MIB = 1 << 20


class Chunked:
    """A site plugin that splits files above 1 MiB (as the built-in does on NFS)."""

    def __init__(self, initial: int = 4, maximum: int = 8) -> None:
        self.bounds = Concurrency(initial, 1, maximum, chunk_size=MIB)

    @hookimpl
    def rcp_choose_concurrency(
        self, source: StorageInfo, destination: StorageInfo, cpus: int
    ) -> Concurrency:
        return self.bounds


def threads_spawn(started: list[threading.Thread]) -> Spawn:
    def spawn(work: Callable[[], None]) -> None:
        thread = threading.Thread(target=work)
        started.append(thread)
        thread.start()

    return spawn


def test_every_chunk_copied_exactly_once() -> None:
    size, chunk = 10 * MIB + 123, MIB
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def copy_range(offset: int, length: int) -> int:
        with lock:
            seen.append((offset, length))
        return length

    helpers: list[threading.Thread] = []
    copied = ChunkedCopy(size, chunk, copy_range).run(threads_spawn(helpers), 3)
    for thread in helpers:
        thread.join()
    assert copied == size
    assert sorted(seen) == [(o, min(chunk, size - o)) for o in range(0, size, chunk)]
    assert len(helpers) == 3


def test_owner_copies_alone_when_no_helper_ever_runs() -> None:
    """Helpers queued behind busy workers may never start: the owner does it all."""
    done: list[int] = []
    copied = ChunkedCopy(5 * MIB, MIB, lambda o, n: done.append(o) or n).run(
        lambda work: None, 4
    )
    assert copied == 5 * MIB
    assert sorted(done) == [o * MIB for o in range(5)]


def test_a_failed_chunk_stops_the_rest_and_is_raised() -> None:
    calls: list[int] = []

    def copy_range(offset: int, length: int) -> int:
        calls.append(offset)
        if offset == 2 * MIB:
            raise OSError(5, "Input/output error")
        return length

    with pytest.raises(OSError, match="Input/output"):
        ChunkedCopy(20 * MIB, MIB, copy_range).run(lambda work: None, 0)
    assert calls == [0, MIB, 2 * MIB]


def test_a_late_helper_does_nothing() -> None:
    late: list[Callable[[], None]] = []
    calls: list[int] = []
    chunked = ChunkedCopy(3 * MIB, MIB, lambda o, n: calls.append(o) or n)
    chunked.run(late.append, 2)
    late[0]()  # the pool ran the helper only after the file was done
    assert sorted(calls) == [0, MIB, 2 * MIB]


def test_engine_splits_large_files_and_copies_exactly(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"big{i}").write_bytes(os.urandom(7 * MIB + i))
    (src / "small").write_bytes(b"s" * 1000)
    summary = rcp_core.copy(str(src), str(tmp_path / "dst"), plugins=[Chunked()])
    assert tree_compare(src, tmp_path / "dst") == []
    assert summary["copied.files"] == 4
    assert summary["copied.bytes"] == 3 * 7 * MIB + 3 + 1000


def test_many_large_files_with_one_worker_do_not_deadlock(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """Every worker may own a chunked file at once; none waits for queued work."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(6):
        (src / f"big{i}").write_bytes(os.urandom(3 * MIB))
    rcp_core.copy(str(src), str(tmp_path / "dst"), plugins=[Chunked(1, 2)])
    assert tree_compare(src, tmp_path / "dst") == []


def test_chunks_across_filesystems_fall_back_per_chunk(
    ext4_tmp_path: Path, xfs_tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """ext4 -> XFS: no reflink, no cross-filesystem copy_file_range: read/write chunks."""
    src = ext4_tmp_path / "src"
    src.mkdir()
    (src / "big").write_bytes(os.urandom(9 * MIB))
    summary = rcp_core.copy(str(src), str(xfs_tmp_path / "dst"), plugins=[Chunked()])
    assert tree_compare(src, xfs_tmp_path / "dst") == []
    assert summary["method.readwrite"] == 1


def test_fixed_workers_keep_the_chunk_size(tmp_path: Path) -> None:
    """--max-workers fixes the count, not whether large files are split."""
    (tmp_path / "src").mkdir()
    jobs = plan_jobs(
        [str(tmp_path / "src"), str(tmp_path / "dst")], CopySettings(max_workers=3)
    )
    engine = Engine(
        jobs, CopySettings(max_workers=3), plugins=rcp_core.plugin_manager([Chunked()])
    )
    assert engine.concurrency.chunk_size == MIB
    assert engine.ctx.chunking is not None
