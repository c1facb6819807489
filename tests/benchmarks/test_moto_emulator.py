"""The benchmark's moto (:mod:`benchmarks.moto_emulator`): its indexed listing serves
moto's own pages, and its server holds the objects ``--fill`` names."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

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
