"""rcp's own S3 upload (rcp_provider/fsspec/s3upload.py), against moto's server: a
large file in parts that come back whole, one request for a file of one part, a
failure that leaves no part behind, and the transfer budget bounding the memory of
every upload in flight, in this process and in a real ``rcp``."""

from __future__ import annotations

import concurrent.futures
import io
import logging
import os
import subprocess
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
import pytest

from benchmarks.objectstores import Store
from rcp_core.engine.portcopy import copy_tree
from rcp_core.run.budget import TRANSFER_BYTES, Budget
from rcp_provider.fsspec import s3upload
from rcp_provider.fsspec.storetree import port_of_url
from support.rcprun import RCP

MiB = 1 << 20
PART = s3upload.PART


def _uploads(fs: Any, bucket: str) -> list[dict[str, Any]]:
    """The multipart uploads begun and neither completed nor aborted."""
    found: list[dict[str, Any]] = fs.call_s3(
        "list_multipart_uploads", Bucket=bucket
    ).get("Uploads", [])
    return found


def _reader(data: bytes) -> Callable[[int], bytes]:
    return io.BytesIO(data).read


def test_a_large_file_goes_up_in_parts_and_comes_back_whole(s3: Store) -> None:
    fs, bucket = s3.fs(), s3.bucket()
    data = os.urandom(2 * PART + 5)
    budget = Budget(TRANSFER_BYTES)
    extra = {"Metadata": {"mtime": "1.000000000"}}
    s3upload.upload(fs, f"{bucket}/d/x.txt", _reader(data), len(data), extra, budget)
    head = fs.call_s3("head_object", Bucket=bucket, Key="d/x.txt")
    assert fs.cat_file(f"{bucket}/d/x.txt") == data
    assert head["ETag"].strip('"').endswith("-3")  # three parts of 16 MiB at most
    assert head["Metadata"] == {"mtime": "1.000000000"}
    assert head["ContentType"] == "text/plain"  # guessed from the key, as s3fs does
    assert budget.held == 0
    assert _uploads(fs, bucket) == []


@pytest.mark.parametrize(
    ("size", "said", "parts"),
    [(PART, PART, 0), (PART - 1, PART, 0), (PART + 10, PART, 2), (PART + 1, 0, 2)],
    ids=["exactly-one-part", "smaller", "grew-past-a-part", "said-empty"],
)
def test_an_upload_is_one_put_only_while_it_fits_one_part(
    s3: Store, size: int, said: int, parts: int
) -> None:
    """What the source said its size was chooses, and what it gives decides: a
    file that grew past a part after it was listed still goes up whole."""
    fs, bucket = s3.fs(), s3.bucket()
    data = os.urandom(size)
    s3upload.upload(fs, f"{bucket}/k", _reader(data), said, {}, Budget(64 * MiB))
    etag = fs.call_s3("head_object", Bucket=bucket, Key="k")["ETag"].strip('"')
    assert fs.cat_file(f"{bucket}/k") == data
    assert etag.partition("-")[2] == (str(parts) if parts else "")


def _reader_calling(
    data: bytes, when: int, call: Callable[[], None]
) -> Callable[[int], bytes]:
    """A reader of ``data`` that calls ``call`` before its ``when``-th read."""
    source, reads = io.BytesIO(data), 0

    def read(size: int) -> bytes:
        nonlocal reads
        reads += 1
        if reads == when:
            call()
        return source.read(size)

    return read


class _Broken(Exception):
    """Not an OSError: how the engine's stop arrives through a read."""


@pytest.mark.parametrize("error", [OSError(5, "the source failed"), _Broken()])
def test_a_failed_read_aborts_the_upload_and_leaves_nothing(
    s3: Store, error: BaseException
) -> None:
    fs, bucket = s3.fs(), s3.bucket()

    def fail() -> None:
        raise error

    read = _reader_calling(os.urandom(5 * PART), 4, fail)
    budget = Budget(TRANSFER_BYTES)
    with pytest.raises(type(error)):
        s3upload.upload(fs, f"{bucket}/k", read, 5 * PART, {}, budget)
    assert not fs.exists(f"{bucket}/k")
    assert _uploads(fs, bucket) == []  # no part left to bill
    assert budget.held == 0


def test_a_part_the_store_refuses_aborts_the_upload(
    s3: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """The upload is aborted behind rcp's back after its first part: the next
    part is refused, the error goes on, and the abort that finds nothing left to
    abort says so in the log."""
    fs, bucket = s3.fs(), s3.bucket()

    def abort_behind_its_back() -> None:
        for upload in _uploads(fs, bucket):
            fs.call_s3(
                "abort_multipart_upload",
                Bucket=bucket,
                Key="k",
                UploadId=upload["UploadId"],
            )

    read = _reader_calling(os.urandom(4 * PART), 3, abort_behind_its_back)
    budget = Budget(TRANSFER_BYTES)
    with (
        caplog.at_level(logging.WARNING, "rcp_core"),
        pytest.raises(OSError, match=r"\[Errno \d+\]"),
    ):
        s3upload.upload(fs, f"{bucket}/k", read, 4 * PART, {}, budget)
    assert not fs.exists(f"{bucket}/k")
    assert _uploads(fs, bucket) == []
    assert "could not be aborted" in caplog.text
    assert budget.held == 0


def test_the_budget_bounds_the_memory_of_every_upload_in_flight(s3: Store) -> None:
    """Four files of three parts each at once, in a budget of two and a half
    parts: this process's allocations stay within the budget and a little (what
    s3fs's ``put_file`` would hold is each file whole)."""
    fs, bucket = s3.fs(), s3.bucket()
    files = {f"f{i}": os.urandom(3 * PART) for i in range(4)}
    budget = Budget(5 * PART // 2)

    def up(name: str) -> None:
        data = files[name]
        s3upload.upload(fs, f"{bucket}/{name}", _reader(data), len(data), {}, budget)

    tracemalloc.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(len(files)) as pool:
            for done in [pool.submit(up, name) for name in files]:
                done.result()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert budget.peak <= budget.limit
    assert peak < budget.limit + 8 * MiB
    assert budget.held == 0
    for name, data in files.items():
        assert fs.cat_file(f"{bucket}/{name}") == data


def test_a_stream_from_another_store_goes_up_in_parts(s3: Store) -> None:
    """The engine's streamed path (a ``memory://`` file to S3): its chunks
    rejoined into parts."""
    data = os.urandom(2 * PART + 3)
    source = f"memory://u{uuid.uuid4().hex}"
    fsspec.filesystem("memory").pipe_file(f"{source}/big", data)
    bucket = s3.bucket()
    fs = s3.fs()
    summary = copy_tree(
        port_of_url(source), port_of_url(f"s3://{bucket}/t", **s3.options)
    )
    assert summary.counts["copied.files"] == 1
    assert fs.cat_file(f"{bucket}/t/big") == data
    head = fs.call_s3("head_object", Bucket=bucket, Key="t/big")
    assert head["ETag"].strip('"').endswith("-3")


def test_rcp_uploads_large_files_within_its_transfer_budget(
    s3: Store, tmp_path: Path
) -> None:
    """A real ``rcp`` of six 96 MiB files (576 MiB): its peak memory is what it
    needs for a small upload plus the transfer budget (s3fs's ``put_file`` held
    each file whole: 860 MiB for four of them)."""
    small, large = tmp_path / "small", tmp_path / "large"
    small.mkdir()
    large.mkdir()
    (small / "f").write_bytes(b"x" * 4096)
    for i in range(6):
        (large / f"f{i}").write_bytes(os.urandom(96 * MiB))
    bucket = s3.bucket()

    def peak_of(tree: Path) -> int:
        """The peak resident memory (bytes) of ``rcp TREE s3://BUCKET/NAME``."""
        errors = tmp_path / "stderr"
        with errors.open("wb") as stderr:
            run = subprocess.Popen(
                [RCP, str(tree), f"s3://{bucket}/{tree.name}"],
                env=s3.environ(),
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
            _, status, usage = os.wait4(run.pid, 0)
            run.returncode = os.waitstatus_to_exitcode(status)
        assert run.returncode == 0, errors.read_text()
        return usage.ru_maxrss * 1024

    base = peak_of(small)
    peak = peak_of(large)
    fs = s3.fs()
    for i in range(6):
        assert fs.size(f"{bucket}/large/f{i}") == 96 * MiB
    assert peak < base + TRANSFER_BYTES + 96 * MiB, (base >> 20, peak >> 20)
