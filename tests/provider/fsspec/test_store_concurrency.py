"""How many requests a copy to or from a store has in flight (issue 26: bounded
parallelism, the adaptive controller driving the number in flight), counted by the
proxy in front of a real S3 API (moto) that holds each request 100 ms, as a distant
store would: the plugins' starting point for a store (16 workers, moved by the
controller between 2 and 64) reaches the store, past the 10 connections s3fs's
client pool would hold; ``--max-workers`` fixes the number exactly."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import storeproxy
from benchmarks.objectstores import Store
from benchmarks.storeproxy import Kind, Proxy
from rcp_core.site.builtin import STORE_WORKERS
from support.rcprun import program

FILES = 64


@pytest.fixture
def slow_s3(s3: Store) -> Iterator[Proxy]:
    with storeproxy.proxied(s3, delay=0.1) as proxied:
        yield proxied


@pytest.fixture
def uploaded(slow_s3: Proxy, tmp_path: Path) -> str:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(FILES):
        (src / f"f{i:02d}").write_bytes(os.urandom(100))
    bucket = slow_s3.upstream.bucket()
    slow_s3.upstream.fs().put(str(src), f"{bucket}/t", recursive=True)
    return slow_s3.store.url(f"{bucket}/t")


def _peak(proxy: Proxy, *args: str) -> int:
    proxy.reset()
    run = program(args, proxy.store.environ())
    assert run.code == 0, run
    counts = proxy.reset()
    assert counts.of(Kind.GET) == FILES, counts
    return counts.peak


def test_a_download_has_the_store_workers_in_flight(
    slow_s3: Proxy, uploaded: str, tmp_path: Path
) -> None:
    assert _peak(slow_s3, uploaded, str(tmp_path / "down")) >= STORE_WORKERS


def test_max_workers_fixes_the_requests_in_flight(
    slow_s3: Proxy, uploaded: str, tmp_path: Path
) -> None:
    peak = _peak(slow_s3, "--max-workers", "4", uploaded, str(tmp_path / "down"))
    assert 2 <= peak <= 4
