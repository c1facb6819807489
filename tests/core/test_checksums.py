"""The MD5s stores record, matched against bytes (rcp_core.backends.checksums)."""

from __future__ import annotations

import hashlib
import io
import os

import pytest

from rcp_core.backends.checksums import (
    MIB,
    StoreChecksum,
    matches,
    of_etag,
    part_sizes,
)


def _multipart_etag(data: bytes, part: int) -> StoreChecksum:
    """What S3 records of ``data`` uploaded in parts of ``part`` bytes."""
    digests = [
        hashlib.md5(data[i : i + part]).digest() for i in range(0, len(data), part)
    ]
    return StoreChecksum(hashlib.md5(b"".join(digests)).digest(), len(digests))


def test_an_etag_is_read_with_its_quotes_and_part_count() -> None:
    md5 = hashlib.md5(b"x").digest()
    assert of_etag(f'"{md5.hex()}"') == StoreChecksum(md5)
    assert of_etag(f'"{md5.hex()}-3"') == StoreChecksum(md5, 3)
    for not_one in ('"0x271A8D8C708C9A0"', '"abc"', f'"{md5.hex()}-x"', None, 5):
        assert of_etag(not_one) is None


def test_a_checksum_is_sixteen_bytes() -> None:
    with pytest.raises(ValueError, match="not an MD5"):
        StoreChecksum(b"short")


def test_the_same_bytes_match_and_any_other_do_not() -> None:
    data = os.urandom(3 * MIB + 5)
    recorded = StoreChecksum(hashlib.md5(data).digest())
    assert matches(recorded, io.BytesIO(data), len(data)) is True
    changed = bytearray(data)
    changed[MIB] ^= 1
    assert matches(recorded, io.BytesIO(bytes(changed)), len(data)) is False
    assert matches(recorded, io.BytesIO(data[:-1]), len(data)) is False  # shorter
    assert matches(recorded, io.BytesIO(data + b"!"), len(data)) is False  # longer


def test_a_multipart_etag_is_matched_at_the_part_size_that_gives_its_count() -> None:
    data = os.urandom(17 * MIB + 3)
    for part in (5 * MIB, 8 * MIB, 16 * MIB):
        recorded = _multipart_etag(data, part)
        assert part in part_sizes(len(data), recorded.parts)
        assert matches(recorded, io.BytesIO(data), len(data)) is True
        changed = data[:-1] + bytes([data[-1] ^ 1])
        assert matches(recorded, io.BytesIO(changed), len(data)) is False


def test_a_part_count_no_part_size_gives_is_unknown() -> None:
    data = os.urandom(2 * MIB)
    recorded = _multipart_etag(data, MIB)  # 1 MiB parts: no tool's
    assert part_sizes(len(data), recorded.parts) == ()
    assert matches(recorded, io.BytesIO(data), len(data)) is None


def test_a_stop_leaves_it_unknown() -> None:
    data = b"abc"
    recorded = StoreChecksum(hashlib.md5(data).digest())
    assert matches(recorded, io.BytesIO(data), 3, lambda: True) is None
