"""The content checksums object stores record, and whether a file's bytes match one.

Stores record an MD5 of what they hold, and their listings give it, so a copy can
tell an object unchanged by its bytes without asking for it: an S3 object's ETag is
the MD5 of its bytes when it was uploaded in one request, and the MD5 of its parts'
MD5s followed by ``-`` and the part count when it was uploaded in parts (a
multipart upload); GCS records ``md5Hash`` of every object but a composite; Azure a
``Content-MD5`` of a blob uploaded in one request (or given one). A port's listing
gives what its store recorded as :attr:`rcp_core.backends.port.Entry.checksum`.

Invariants:

- a match is proof of the same bytes (MD5's collisions are made, never met by
  chance, and a copy's user copies their own files); a mismatch is *no proof of a
  difference*: an S3 ETag of an object encrypted with a KMS key is no MD5 of its
  bytes, and a multipart ETag's part size is not recorded, so :func:`matches` tries
  the part sizes tools upload with (:data:`PART_SIZES`) and says ``None`` where none
  gives the recorded part count; a caller falls back to what it did without one;
- bounded memory: the bytes are read :data:`READ_SIZE` at a time, never gathered.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

READ_SIZE = 1 << 20
"""Bytes read at a time while hashing."""
MIB = 1 << 20
PART_SIZES = (5 * MIB, 8 * MIB, 16 * MIB, 50 * MIB, 64 * MIB, 100 * MIB, 128 * MIB)
"""The part sizes a multipart ETag is tried with, smallest first: rclone's and the
S3 minimum (5 MiB), the AWS CLI's and boto3's (8 MiB), s3fs's and s5cmd's
(50 MiB), and the round sizes sites configure."""


@dataclass(frozen=True, slots=True)
class StoreChecksum:
    """An MD5 a store recorded for an object.

    :param md5: the 16 bytes.
    :param parts: 0 where it is of the object's bytes; else of that many parts'
        MD5s (an S3 multipart upload's ETag).
    """

    md5: bytes
    parts: int = 0

    def __post_init__(self) -> None:
        if len(self.md5) != 16 or self.parts < 0:
            raise ValueError(f"not an MD5 checksum: {self.md5!r}, {self.parts} parts")

    def etag(self) -> str:
        """As S3 names it in an ETag (what :func:`of_etag` reads), quotes and all."""
        parts = f"-{self.parts}" if self.parts else ""
        return f'"{self.md5.hex()}{parts}"'


def of_etag(etag: Any) -> StoreChecksum | None:
    """The checksum an S3 ETag (``"<32 hex>"`` or ``"<32 hex>-<parts>"``, quotes
    and all) is, ``None`` where it is no such ETag."""
    if not isinstance(etag, str):
        return None
    text, _, parts = etag.strip('"').partition("-")
    if len(text) != 32 or (parts and not parts.isdigit()):
        return None
    try:
        return StoreChecksum(bytes.fromhex(text), int(parts or 0))
    except ValueError:
        return None


@dataclass(slots=True)
class _Parts:
    """The MD5s of one part size's parts, as the bytes come."""

    size: int
    current: Any = field(default_factory=hashlib.md5)
    filled: int = 0
    digests: list[bytes] = field(default_factory=list)

    def update(self, view: memoryview) -> None:
        while view:
            take = min(len(view), self.size - self.filled)
            self.current.update(view[:take])
            self.filled += take
            view = view[take:]
            if self.filled == self.size:
                self.digests.append(self.current.digest())
                self.current, self.filled = hashlib.md5(), 0

    def final(self) -> bytes:
        if self.filled:
            self.digests.append(self.current.digest())
        return hashlib.md5(b"".join(self.digests)).digest()


def part_sizes(size: int, parts: int) -> tuple[int, ...]:
    """The sizes of :data:`PART_SIZES` that cut ``size`` bytes into ``parts``."""
    return tuple(p for p in PART_SIZES if -(-size // p) == parts)


def matches(
    checksum: StoreChecksum,
    stream: BinaryIO,
    size: int,
    stopping: Callable[[], bool] = lambda: False,
) -> bool | None:
    """Whether the ``size`` bytes ``stream`` gives (from where it stands) are what
    ``checksum`` was recorded of; ``None`` where a multipart checksum's part count
    fits no part size tried, or ``stopping`` said so before a read (nothing is
    known then). Bytes beyond ``size``, or fewer, are no match."""
    whole = hashlib.md5() if not checksum.parts else None
    split = (
        [_Parts(p) for p in part_sizes(size, checksum.parts)] if checksum.parts else []
    )
    if whole is None and not split:
        return None
    done = 0
    while True:
        if stopping():
            return None
        data = stream.read(READ_SIZE)
        if not data:
            break
        done += len(data)
        if done > size:
            return False
        if whole is not None:
            whole.update(data)
        for parts in split:
            parts.update(memoryview(data))
    if done != size:
        return False
    if whole is not None:
        return whole.digest() == checksum.md5
    return any(parts.final() == checksum.md5 for parts in split)
