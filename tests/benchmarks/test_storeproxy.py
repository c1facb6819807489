"""The counting, delaying proxy in front of the store emulators
(benchmarks/storeproxy.py): requests pass unchanged, each waits the delay, each is
counted by what it does, whichever store's API it speaks, and bodies stream through."""

from __future__ import annotations

import hashlib
import os
import time
import tracemalloc

import pytest

from benchmarks import storeproxy
from benchmarks.objectstores import SERVERS, Store
from benchmarks.storeproxy import Kind, kind_of
from rcp_provider.fsspec import s3stream

MiB = 1 << 20


@pytest.mark.parametrize(
    ("method", "path", "query", "headers", "kind"),
    [
        ("GET", "/b", {"list-type": "2", "prefix": "p/"}, {}, Kind.LIST),
        ("HEAD", "/b/k", {}, {}, Kind.HEAD),
        ("GET", "/b/k", {}, {}, Kind.GET),
        ("PUT", "/b/k", {}, {}, Kind.PUT),
        ("POST", "/b/k", {"uploads": ""}, {}, Kind.START),
        ("PUT", "/b/k", {"partNumber": "2", "uploadId": "u"}, {}, Kind.PART),
        ("POST", "/b/k", {"uploadId": "u"}, {}, Kind.COMMIT),
        ("PUT", "/b/k", {}, {"x-amz-copy-source": "/b/j"}, Kind.COPY),
        ("DELETE", "/b/k", {}, {}, Kind.DELETE),
        ("POST", "/b", {"delete": ""}, {}, Kind.DELETE),
        ("GET", "/storage/v1/b/b/o", {"prefix": "p/"}, {}, Kind.LIST),
        ("GET", "/storage/v1/b/b/o/p%2Fk", {}, {}, Kind.HEAD),
        ("GET", "/storage/v1/b/b/o/p%2Fk", {"alt": "media"}, {}, Kind.GET),
        ("GET", "/download/storage/v1/b/b/o/k", {"alt": "media"}, {}, Kind.GET),
        ("POST", "/upload/storage/v1/b/b/o", {"uploadType": "multipart"}, {}, Kind.PUT),
        (
            "POST",
            "/upload/storage/v1/b/b/o",
            {"uploadType": "resumable"},
            {},
            Kind.START,
        ),
        (
            "PUT",
            "/upload/storage/v1/b/b/o",
            {"uploadType": "resumable", "upload_id": "u"},
            {},
            Kind.PART,
        ),
        ("POST", "/storage/v1/b/b/o/k/rewriteTo/b/c/o/j", {}, {}, Kind.COPY),
        ("GET", "/acct/c", {"restype": "container", "comp": "list"}, {}, Kind.LIST),
        ("PUT", "/acct/c/k", {"comp": "block", "blockid": "x"}, {}, Kind.PART),
        ("PUT", "/acct/c/k", {"comp": "blocklist"}, {}, Kind.COMMIT),
        ("PUT", "/acct/c/k", {}, {"x-ms-copy-source": "http://x/acct/c/j"}, Kind.COPY),
        ("PUT", "/acct/c", {"restype": "container"}, {}, Kind.OTHER),
    ],
)
def test_each_request_is_counted_as_what_it_does(
    method: str, path: str, query: dict[str, str], headers: dict[str, str], kind: Kind
) -> None:
    assert kind_of(method, path, query, headers) is kind


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_requests_pass_unchanged_and_wait_the_delay(
    name: str, request: pytest.FixtureRequest
) -> None:
    store: Store = request.getfixturevalue(name)
    with storeproxy.proxied(store, delay=0.05) as proxy:
        fs, bucket = proxy.store.fs(), proxy.store.bucket()
        proxy.reset()
        data = {f"{bucket}/p/k{i}": bytes([i]) * 1000 for i in range(4)}
        began = time.monotonic()
        for key, value in data.items():
            fs.pipe_file(key, value)
        took = time.monotonic() - began
        written = proxy.reset()
        assert written.of(Kind.PUT) == 4, written
        assert written.sent >= 4000, written
        assert took >= 4 * 0.05
        assert fs.cat_file(f"{bucket}/p/k3") == data[f"{bucket}/p/k3"]
        assert store.fs().cat_file(f"{bucket}/p/k2") == data[f"{bucket}/p/k2"]
        read = proxy.reset()
        assert read.of(Kind.GET) == 1, read
        assert read.received >= 1000, read


def test_a_gcs_resumable_upload_comes_back_through_the_proxy(gcs: Store) -> None:
    """The emulator names a resumable session by the request's ``Host``: the proxy
    keeps the client's, so the data request is delayed and counted too."""
    with storeproxy.proxied(gcs, delay=0.0) as proxy:
        fs, bucket = proxy.store.fs(), proxy.store.bucket()
        proxy.reset()
        writer = fs.open(f"{bucket}/x", "wb", autocommit=False)
        writer.write(b"12345")
        writer.close()
        writer.commit()
        counts = proxy.reset()
    assert (counts.of(Kind.START), counts.of(Kind.PART)) == (1, 1), counts
    assert counts.sent >= 5, counts
    assert gcs.fs().cat_file(f"{bucket}/x") == b"12345"


def test_a_large_body_streams_through_both_ways(s3: Store) -> None:
    """120 MiB up (s3fs's ``pipe_file``, in parts) and down (one GET read a MiB at
    a time): every byte counted, and the proxy (in this process) never holds the
    object: the whole download's allocations stay far below its size."""
    data = os.urandom(120 * MiB)
    with storeproxy.proxied(s3, delay=0.0) as proxy:
        fs, bucket = proxy.store.fs(), s3.bucket()
        proxy.reset()
        fs.pipe_file(f"{bucket}/k", data)
        up = proxy.reset()
        tracemalloc.start()
        try:
            with s3stream.get_object(fs, f"{bucket}/k") as (stream, _):
                digest = hashlib.sha256()
                for piece in iter(lambda: stream.read(MiB), b""):
                    digest.update(piece)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        down = proxy.reset()
    assert len(data) <= up.sent < len(data) + 4096, up  # and the parts list
    assert down.received == len(data), down
    assert digest.digest() == hashlib.sha256(data).digest()
    assert peak < 16 * MiB, peak >> 20
