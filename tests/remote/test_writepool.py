"""The destination writes the entries of ``FILES`` frames in a work pool
(:mod:`rcp_core.remote.writepool`) on a shared storage:
concurrently, within a bound in flight, and every write done before the transfer
ends; on a local disk each connection writes its own."""

from __future__ import annotations

import functools
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rcp_core import hookimpl
from rcp_core.remote.meta import meta_of
from rcp_core.remote.receive import Receiver
from rcp_core.remote.roleruntime import RoleRun
from rcp_core.remote.writepool import WritePool
from rcp_core.run.summary import ThreadTallies
from rcp_core.run.tuning import Concurrency
from rcp_core.settings import CopySettings
from rcp_core.site.plugins import plugin_manager
from rcp_core.site.storage import StorageInfo


class SharedStorage:
    """A site that says its destination is a network filesystem."""

    @hookimpl
    def rcp_detect_storage(self, path: str, fd: int) -> StorageInfo | None:
        return StorageInfo("nfs")


class SlowCreates:
    """A site whose every file creation takes ``delay`` seconds (a slow network
    filesystem), noting how many run at once and on which threads."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.threads: set[int] = set()

    @hookimpl
    def rcp_pre_create(
        self, dir_fd: int, name: str, size: int, destination: StorageInfo
    ) -> bool | None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.threads.add(threading.get_ident())
        time.sleep(self.delay)
        with self.lock:
            self.now -= 1
        return None


def receiver_with(
    tmp_path: Path, plugins: list[object], settings: CopySettings
) -> tuple[Receiver, dict[str, Any]]:
    """A receiver writing into ``tmp_path/dst`` with ``plugins``, and the metadata
    of a small file (for entries)."""
    (tmp_path / "dst").mkdir()
    (tmp_path / "f").write_bytes(b"x" * 100)
    hook = plugin_manager(plugins, entry_points=False).hook
    runtime = RoleRun(settings, str(tmp_path / "dst"), source=False, hook=hook)
    fd = os.open(tmp_path / "dst", os.O_RDONLY | os.O_DIRECTORY)
    return Receiver(settings, fd, 0o022, runtime), meta_of(os.lstat(tmp_path / "f"))


def frame(names: list[str], meta: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    entries = [{"name": name, "kind": "file", "meta": meta} for name in names]
    return {"dir": 0, "entries": entries}, b"x" * (100 * len(names))


def test_the_entries_of_a_files_frame_are_written_concurrently(
    tmp_path: Path,
) -> None:
    """Eight files of one frame on a network filesystem where each creation takes
    0.1 s: the pool's workers write them at once, not the connection's thread one by
    one (which took 0.8 s), and the frame's bytes land whole although the frame's
    buffer is overwritten as soon as ``files`` returns."""
    slow = SlowCreates(0.1)
    receiver, meta = receiver_with(tmp_path, [slow, SharedStorage()], CopySettings())
    names = [f"f{i}" for i in range(8)]
    header, data = frame(names, meta)
    buffer = bytearray(data)
    started = time.monotonic()
    try:
        receiver.files(header, memoryview(buffer))
        buffer[:] = b"\0" * len(buffer)  # the connection's next read
        receiver.close()
    finally:
        receiver.close()
    assert time.monotonic() - started < 0.6
    assert slow.most >= 2
    assert threading.get_ident() not in slow.threads
    assert len(slow.threads) >= 2
    for name in names:
        assert (tmp_path / "dst" / name).read_bytes() == b"x" * 100
    counts = receiver.counts()
    assert counts["copied.files"] == 8
    assert counts["copied.bytes"] == 800
    assert counts["errors"] == 0


def test_a_write_error_in_the_pool_reaches_the_error_log(tmp_path: Path) -> None:
    """A worker's failed write is counted and recorded as the connection's was: the
    file that exists already (no ``--overwrite``) fails, the others are written."""
    slow = SlowCreates(0.0)
    receiver, meta = receiver_with(tmp_path, [slow, SharedStorage()], CopySettings())
    (tmp_path / "dst" / "b").write_bytes(b"old")
    header, data = frame(["a", "b", "c"], meta)
    try:
        receiver.files(header, memoryview(data))
    finally:
        receiver.close()
    assert (tmp_path / "dst" / "b").read_bytes() == b"old"
    assert (tmp_path / "dst" / "c").read_bytes() == b"x" * 100
    counts = receiver.counts()
    assert counts["errors"] == 1
    assert counts["copied.files"] == 2
    messages = receiver.errors.messages()
    assert len(messages) == 1
    assert "b" in messages[0]


def test_frames_in_flight_stay_within_the_bound() -> None:
    """A reader handing over frames faster than the one worker writes them waits:
    never more than ``frames`` frames, nor ``max_bytes`` bytes, are in flight."""
    pool = WritePool(Concurrency.fixed(1), ThreadTallies(), frames=3, max_bytes=10_000)
    release = threading.Event()
    written: list[int] = []

    def write(n: int) -> None:
        release.wait(5)
        written.append(n)

    handed: list[int] = []

    def reader() -> None:
        for n in range(10):
            pool.submit([functools.partial(write, n)], 4_000, b"x" * 4_000)
            handed.append(n)

    thread = threading.Thread(target=reader)
    thread.start()
    time.sleep(0.3)
    assert len(handed) == 2  # a third 4,000-byte frame would pass 10,000 bytes
    release.set()
    thread.join(5)
    assert pool.close(5)
    assert sorted(written) == list(range(10))
    assert pool.peak == (2, 8_000)


def test_a_frame_bound_holds_for_frames_without_data() -> None:
    pool = WritePool(Concurrency.fixed(2), ThreadTallies(), frames=3)
    release = threading.Event()
    handed: list[int] = []

    def wait() -> None:
        release.wait(5)

    def reader() -> None:
        for _ in range(6):
            pool.submit([wait] * 4, 0, None)
            handed.append(1)

    thread = threading.Thread(target=reader)
    thread.start()
    time.sleep(0.3)
    assert len(handed) == 3
    release.set()
    thread.join(5)
    assert pool.close(5)
    assert pool.peak[0] == 3


def test_a_crash_in_a_write_is_raised_to_the_connections() -> None:
    pool = WritePool(Concurrency.fixed(1), ThreadTallies())

    def broken() -> None:
        raise ValueError("a defect")

    pool.submit([broken], 0, None)
    assert pool.close(5)
    with pytest.raises(ValueError, match="a defect"):
        pool.check()


def test_close_waits_for_the_writes_in_flight_within_its_bound() -> None:
    """A write that outlasts the bound: ``close`` returns after it, saying the pool
    did not drain (the receiver then keeps the directories open under it)."""
    pool = WritePool(Concurrency.fixed(1), ThreadTallies())
    release = threading.Event()
    done: list[bool] = []

    def slow() -> None:
        release.wait(5)
        done.append(True)

    pool.submit([slow], 0, None)
    started = time.monotonic()
    assert not pool.close(0.3)
    assert 0.3 <= time.monotonic() - started < 2
    assert done == []
    release.set()


def test_the_writers_never_drop_below_the_data_connections(tmp_path: Path) -> None:
    """Each data connection wrote its own frames before the pool: on a shared
    storage the pool starts with, and keeps, at least as many writers (within the
    storage's maximum)."""
    (tmp_path / "dst").mkdir()
    hook = plugin_manager([SharedStorage()], entry_points=False).hook
    runtime = RoleRun(CopySettings(), str(tmp_path / "dst"), source=False, hook=hook)
    assert runtime.storage is not None
    assert runtime.storage.shared
    fd = os.open(tmp_path / "dst", os.O_RDONLY | os.O_DIRECTORY)
    receiver = Receiver(CopySettings(), fd, 0o022, runtime, connections=4)
    try:
        assert receiver._writers is not None
        bounds = receiver._writers.concurrency
        assert bounds.minimum == min(4, bounds.maximum) <= bounds.initial
    finally:
        receiver.close()


def test_on_a_local_disk_each_connection_writes_its_own_frames(
    tmp_path: Path,
) -> None:
    """On a storage that is not shared (this test's tmp directory), a frame's
    entries are written on the connection's thread, in order, before ``files``
    returns: no hand-over to other threads."""
    slow = SlowCreates(0.0)
    receiver, meta = receiver_with(tmp_path, [slow], CopySettings())
    assert receiver.runtime.storage is not None
    assert not receiver.runtime.storage.shared
    names = [f"f{i}" for i in range(8)]
    header, data = frame(names, meta)
    buffer = bytearray(data)
    try:
        receiver.files(header, memoryview(buffer))
        for name in names:
            assert (tmp_path / "dst" / name).read_bytes() == b"x" * 100
    finally:
        receiver.close()
    assert slow.threads == {threading.get_ident()}
    assert receiver.counts()["copied.files"] == 8
