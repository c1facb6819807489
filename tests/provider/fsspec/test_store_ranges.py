"""A large S3 object copied to this host's files in ranges at once
(:mod:`rcp_core.engine.portranges`), against a real S3 API (``moto_server``), with
the threshold made small so a few MiB make several ranges: each range a ranged
``GetObject`` of the object the listing gave, written at its offset; the file is
whole with its kept time, or not there at all (an object replaced meanwhile, a
stop), and no temporary is left."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.objectstores import Store
from rcp_core.backends.port import Entry, EntryKind
from rcp_core.engine import portranges
from rcp_core.engine.portcopy import copy_tree
from rcp_core.engine.posixport import PosixPort
from rcp_core.errors import CopyFailedError
from rcp_provider.fsspec import s3stream
from rcp_provider.fsspec.storetree import Place

MiB = 1 << 20
T1 = 1_600_000_000_123_456_789


@pytest.fixture
def small_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(portranges, "RANGED_LEAST", 2 * MiB)
    monkeypatch.setattr(portranges, "CHUNK", 256 << 10)


def _object(s3: Store, size: int) -> tuple[Any, str, bytes]:
    """A bucket holding ``tree/big`` (``size`` random bytes, its mtime kept as
    ``rcp`` keeps it) and ``tree/small``."""
    fs, bucket = s3.fs(), s3.bucket()
    data = os.urandom(size)
    kept = Entry(EntryKind.FILE, size, 0o100640, T1)
    Place(fs, f"{bucket}/tree/big").write("", iter([data]), kept)
    fs.pipe_file(f"{bucket}/tree/small", b"small")
    return fs, f"{bucket}/tree", data


def _recording(
    monkeypatch: pytest.MonkeyPatch, before: Any = None
) -> list[tuple[int, int] | None]:
    """The spans each ``GetObject`` asked for (``None``: the whole object)."""
    asked: list[tuple[int, int] | None] = []
    original = s3stream.get_object
    lock = threading.Lock()

    @contextlib.contextmanager
    def recording(
        fs: Any, path: str, span: Any = None, etag: Any = None
    ) -> Iterator[Any]:
        with lock:
            asked.append(span)
            if before is not None:
                before(len(asked))
        with original(fs, path, span, etag) as got:
            yield got

    monkeypatch.setattr(s3stream, "get_object", recording)
    return asked


def test_a_large_object_comes_down_in_ranges_whole_with_its_time(
    s3: Store, small_ranges: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fs, tree, data = _object(s3, 5 * MiB + 3)
    asked = _recording(monkeypatch)
    summary = copy_tree(Place(fs, tree), PosixPort(str(tmp_path / "down")))
    assert summary["copied.files"] == 2
    assert (tmp_path / "down" / "big").read_bytes() == data
    st = os.stat(tmp_path / "down" / "big")
    assert (st.st_mtime_ns, st.st_mode & 0o777) == (T1, 0o640)
    spans = sorted(span for span in asked if span is not None)
    assert spans == [(0, 2 * MiB), (2 * MiB, 2 * MiB), (4 * MiB, MiB + 3)]
    assert asked.count(None) == 1  # the small file: one GET of it whole
    assert sorted(os.listdir(tmp_path / "down")) == ["big", "small"]


def test_an_object_replaced_between_ranges_is_an_error_and_nothing_is_left(
    s3: Store, small_ranges: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fs, tree, _ = _object(s3, 5 * MiB)

    def replace(count: int) -> None:
        if count == 2:  # after the listing and the first range's request
            fs.pipe_file(f"{tree}/big", os.urandom(5 * MiB))

    _recording(monkeypatch, replace)
    down = tmp_path / "down"
    with pytest.raises(CopyFailedError) as failed:
        copy_tree(Place(fs, tree), PosixPort(str(down)))
    assert failed.value.summary["errors"] == 1, failed.value
    assert sorted(os.listdir(down)) == ["small"]  # no temporary, no mixed file


def test_a_stop_while_ranges_come_leaves_nothing(
    s3: Store, small_ranges: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fs, tree, _ = _object(s3, 5 * MiB)
    cancel = threading.Event()

    def stopped_first(count: int) -> None:
        """Cancel at the first request, held until the run's monitor (which
        watches ``cancel`` every few tens of ms) has surely seen it: on a loaded
        machine the 5 MiB came whole before it looked."""
        if count == 1:
            cancel.set()
            time.sleep(1.0)

    _recording(monkeypatch, stopped_first)
    down = tmp_path / "down"
    with pytest.raises(CopyFailedError) as failed:
        copy_tree(Place(fs, tree), PosixPort(str(down)), cancel=cancel)
    assert failed.value.stopped
    assert "big" not in os.listdir(down)
    assert not [n for n in os.listdir(down) if n.startswith(".")]


def test_spans_cut_a_size_into_up_to_four_whole_mib_ranges() -> None:
    least = portranges.RANGED_LEAST
    assert portranges.spans(least) == [(0, least // 2), (least // 2, least // 2)]
    quarter = 64 * MiB
    assert portranges.spans(256 * MiB) == [(i * quarter, quarter) for i in range(4)]
    cut = portranges.spans(10 * 1024 * MiB + 1)
    assert len(cut) == 4
    assert sum(length for _, length in cut) == 10 * 1024 * MiB + 1
    assert all(o % MiB == 0 for o, _ in cut)
