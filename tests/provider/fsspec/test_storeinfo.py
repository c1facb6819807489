"""A store's info as a port's entry (rcp_provider.fsspec.storeinfo): the MD5 each
store records, read from what its listing gives, and recorded for every upload of
rcp's (real S3, GCS and Azure APIs on loopback)."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import pytest

from benchmarks.objectstores import SERVERS, Store
from rcp_core.backends.checksums import StoreChecksum
from rcp_provider.fsspec.storeinfo import entry_of
from support.rcprun import program


def test_each_stores_recorded_md5_is_read_from_its_listing() -> None:
    md5 = hashlib.md5(b"hello world").digest()
    s3 = {"ETag": f'"{md5.hex()}"', "size": 11, "type": "file"}
    gcs = {"md5Hash": base64.b64encode(md5).decode(), "size": 11, "type": "file"}
    azure = {"content_settings": {"content_md5": bytearray(md5)}, "type": "file"}
    for info in (s3, gcs, azure):
        assert entry_of(info).checksum == StoreChecksum(md5)
    assert entry_of({**s3, "ETag": f'"{md5.hex()}-2"'}).checksum == StoreChecksum(
        md5, 2
    )
    for none in (
        {"type": "file"},
        {"md5Hash": "not base64!", "type": "file"},
        {"content_settings": {"content_md5": None}, "type": "file"},
        {"ETag": '"0x8D"', "type": "file"},
        {**s3, "type": "directory"},
    ):
        assert entry_of(none).checksum is None


@pytest.fixture(params=sorted(SERVERS))
def store(request: pytest.FixtureRequest) -> Store:
    found: Store = request.getfixturevalue(request.param)
    return found


def test_every_store_lists_the_md5_of_what_rcp_uploaded(
    store: Store, tmp_path: Path
) -> None:
    """What lets a rerun tell an object unchanged without asking for it: on Azure
    too, whose Content-MD5 the service records only for a blob put in one request."""
    src = tmp_path / "src"
    src.mkdir()
    sizes = (0, 1, 4096, 100_000)
    for size in sizes:
        (src / f"f{size}").write_bytes(os.urandom(size))
    bucket = store.bucket()
    run = program([str(src), store.url(f"{bucket}/t")], store.environ())
    assert run.code == 0, run
    fs = store.fs()
    for size in sizes:
        info = fs.info(f"{bucket}/t/f{size}")
        expected = hashlib.md5((src / f"f{size}").read_bytes()).digest()
        assert entry_of(info).checksum == StoreChecksum(expected), (size, info)
