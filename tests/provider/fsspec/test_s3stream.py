"""An S3 object read in one GET (rcp_provider/fsspec/s3stream.py), against moto's
server: the bytes asked for come whole, one crossing into s3fs's loop a read, and
the end is found in the crossing that takes the last bytes."""

from __future__ import annotations

import os
from typing import Any

import fsspec.asyn
import pytest

from benchmarks import storeproxy
from benchmarks.objectstores import Store
from benchmarks.storeproxy import Kind
from rcp_provider.fsspec import s3stream
from rcp_provider.fsspec.storetree import Place

MiB = 1 << 20


@pytest.fixture
def crossings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times this process's code crossed into an fsspec loop (each call
    of the real ``fsspec.asyn.sync``)."""
    count = [0]
    real = fsspec.asyn.sync

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(fsspec.asyn, "sync", counted)
    return count


def test_each_read_gives_the_bytes_asked_for_in_one_crossing(
    s3: Store, crossings: list[int]
) -> None:
    fs, bucket = s3.fs(), s3.bucket()
    data = os.urandom(9 * MiB + 3)
    fs.call_s3("put_object", Bucket=bucket, Key="k", Body=data, Metadata={"mtime": "1"})
    with s3stream.get_object(fs, f"{bucket}/k") as (stream, metadata):
        crossings[0] = 0
        parts = [stream.read(4 * MiB) for _ in range(4)]
        reads = crossings[0]
    assert metadata == {"mtime": "1"}
    assert [len(p) for p in parts] == [4 * MiB, 4 * MiB, MiB + 3, 0]
    assert b"".join(parts) == data
    assert reads == 3  # the end found with the last bytes: the fourth asks nothing


@pytest.mark.parametrize("size", [0, 5])
def test_a_small_object_is_read_whole_and_ended_at_once(
    s3: Store, crossings: list[int], size: int
) -> None:
    fs, bucket = s3.fs(), s3.bucket()
    fs.pipe_file(f"{bucket}/k", b"x" * size)
    with s3stream.get_object(fs, f"{bucket}/k") as (stream, _):
        crossings[0] = 0
        assert stream.read(4 * MiB) == b"x" * size
        assert stream.read(4 * MiB) == b""
        assert stream.read() == b""
        assert crossings[0] == 1


def test_a_place_reads_a_large_object_in_one_get(s3: Store) -> None:
    """``Place.read`` on S3 (a copy that keeps no times, a comparison) streams one
    ``GetObject``, where s3fs's reader asks for one 50 MiB block after another."""
    data = os.urandom(120 * MiB)
    with storeproxy.proxied(s3, delay=0.0) as proxy:
        bucket = s3.bucket()
        s3.fs().pipe_file(f"{bucket}/k", data)
        place = Place(proxy.store.fs(), bucket)
        proxy.reset()
        with place.read("k") as reader:
            got = b"".join(iter(lambda: reader.read(4 * MiB), b""))
        counts = proxy.reset()
    assert got == data
    assert counts.requests == {Kind.GET: 1}
