"""The benchmark's moto (:mod:`benchmarks.moto_emulator`): its indexed listing serves
moto's own pages, its ranged GETs moto's own answers, and its server holds the
objects ``--fill`` names."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import fsspec.asyn
import pytest
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.s3 import models

from benchmarks import moto_emulator, objectstores

KEYS = [
    "a",
    "a-1",
    "a.b",
    "a/",
    "a/x",
    "a/y/z",
    "a//w",
    "b/",
    "bb",
    "c/d/e",
    "c/d/f",
    "é",
    "日本/語",
    "z/",
    *(f"m/f{i:03d}" for i in range(40)),
    *(f"m/d{i:02d}/k" for i in range(15)),
]


@pytest.fixture
def bucket() -> Iterator[tuple[models.S3Backend, models.FakeBucket]]:
    moto_emulator.count_writes()
    backend = models.s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    name = f"idx{uuid.uuid4().hex[:12]}"
    made = backend.create_bucket(name, "us-east-1")
    for key in KEYS:
        backend.put_object(name, key, key.encode())
    backend.delete_object(name, "bb")  # gone: not listed
    yield backend, made
    for key in list(made.keys):
        backend.delete_object(name, key)
    backend.delete_bucket(name)


def _names(page: list[Any]) -> list[str]:
    return [item if isinstance(item, str) else item.name for item in page]


def _all_pages(
    backend: models.S3Backend,
    bucket: models.FakeBucket,
    listing: Any,
    prefix: str,
    delimiter: str | None,
    size: int,
    start_after: str | None,
) -> list[tuple[list[str], bool, str | None]]:
    pages = []
    token: str | None = None
    while True:
        page, truncated, token = listing(
            backend, bucket, prefix, delimiter, token, start_after, size
        )
        pages.append((_names(page), truncated, token))
        if not truncated:
            return pages


@pytest.mark.parametrize("prefix", ["", "a", "a/", "m/", "c/", "x"])
@pytest.mark.parametrize("delimiter", ["/", None])
@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_the_index_serves_moto_s_own_pages(
    bucket: tuple[models.S3Backend, models.FakeBucket],
    prefix: str,
    delimiter: str | None,
    size: int,
) -> None:
    backend, made = bucket
    for start_after in (None, "a/x", "m/d03/", "m/f010"):
        ours = _all_pages(
            backend,
            made,
            moto_emulator.list_objects_v2,
            prefix,
            delimiter,
            size,
            start_after,
        )
        theirs = _all_pages(
            backend,
            made,
            models.S3Backend.list_objects_v2,
            prefix,
            delimiter,
            size,
            start_after,
        )
        assert ours == theirs, (prefix, delimiter, size, start_after)


def test_a_write_is_listed_at_once(
    bucket: tuple[models.S3Backend, models.FakeBucket],
) -> None:
    backend, made = bucket
    listing = moto_emulator.list_objects_v2
    before = _names(listing(backend, made, "c/", "/", None, None, 1000)[0])
    backend.put_object(made.name, "c/new", b"new")
    after = _names(listing(backend, made, "c/", "/", None, None, 1000)[0])
    assert (before, after) == (["c/d/"], ["c/d/", "c/new"])


def test_the_server_holds_the_filled_objects_and_lists_them_in_pages() -> None:
    with objectstores.serve("s3", fill=["filled/p=2500"]) as store:
        fs = store.fs()
        listed = fs.ls("filled/p", detail=True)
        assert len(listed) == 2500
        assert listed[0]["name"] == "filled/p/f0000000"
        assert listed[-1]["name"] == "filled/p/f0002499"
        assert {item["size"] for item in listed} == {1}
        assert fs.cat_file("filled/p/f0001234") == b"x"


RANGES = [
    "bytes=0-0",
    "bytes=0-",
    "bytes=5-99",
    "bytes=1000-1999",
    "bytes=4000-",
    "bytes=4000-999999",
    "bytes=4095-4095",
    "bytes=4096-",
    "bytes=9-3",
    "bytes=-100",
    "bytes=0-1,5-9",
    "bytes=x-3",
    "items=0-9",
]


def _get(fs: Any, key: str, **asked: str) -> tuple[Any, ...]:
    """Status, bytes and Content-Range of a ``GetObject`` of ``key`` (the error s3fs
    made of a refusal)."""
    bucket, name = key.split("/", 1)
    try:
        got = fs.call_s3("get_object", Bucket=bucket, Key=name, **asked)
    except OSError as refused:
        return type(refused).__name__, refused.errno, str(refused)
    status = got["ResponseMetadata"]["HTTPStatusCode"]
    body = fsspec.asyn.sync(fs.loop, got["Body"].read)
    return status, body, got.get("ContentRange", "")


def test_a_ranged_get_is_answered_as_moto_answers_it(s3: objectstores.Store) -> None:
    """Status, bytes and Content-Range of each range, from the benchmark's moto and
    the unchanged one, for the same object (4,096 bytes) and the same precondition."""
    body = bytes(range(256)) * 16
    with objectstores.serve("s3", benchmark=True) as ours:
        answers = []
        for store in (ours, s3):
            bucket = store.bucket()
            fs = store.fs()
            fs.pipe_file(f"{bucket}/k", body)
            etag = fs.info(f"{bucket}/k")["ETag"]
            seen: list[tuple[Any, ...]] = []
            for spec in RANGES:
                seen.extend(
                    _get(fs, f"{bucket}/k", Range=spec, **precondition)
                    for precondition in ({}, {"IfMatch": etag}, {"IfMatch": '"x"'})
                )
            seen.append(_get(fs, f"{bucket}/k"))
            answers.append(seen)
    ours_seen, theirs = answers
    assert ours_seen == theirs
    assert (206, body[5:100], "bytes 5-99/4096") in ours_seen


def test_a_range_reads_its_bytes_alone(
    bucket: tuple[models.S3Backend, models.FakeBucket],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend, made = bucket
    key = backend.put_object(made.name, "big", bytes(range(256)) * 4096)
    buffer = key._value_buffer
    sizes: list[int] = []

    def counted(size: int = -1) -> bytes:
        sizes.append(size)
        read: bytes = type(buffer).read(buffer, size)
        return read

    monkeypatch.setattr(buffer, "read", counted)
    monkeypatch.setattr(moto_emulator._ranged, "spec", "bytes=1000-1009", raising=False)
    assert moto_emulator._value(key) == (bytes(range(256)) * 4)[1000:1010]
    assert (sizes, moto_emulator._ranged.served) == ([10], (1000, 1009, 1 << 20))
