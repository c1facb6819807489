"""A store's info as a port's entry (rcp_provider.fsspec.storeinfo): the MD5 each
store records, read from what its listing gives."""

from __future__ import annotations

import base64
import hashlib

from rcp_core.backends.checksums import StoreChecksum
from rcp_provider.fsspec.storeinfo import entry_of


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
