"""An S3 object uploaded by rcp itself: one PUT for a small file, parts in parallel
for a large one, under the process's transfer budget.

s3fs's ``put_file`` reads ten 50 MiB parts of a file before it sends any (500 MiB
a file, times the files in flight), and its writer sends one part at a time. Here
a file's parts are read one after another by the worker that copies it and sent
on s3fs's event loop while the next is read: up to :data:`PARTS_PER_FILE` of one
file in flight, and the bytes of every part in the process taken from
:func:`~rcp_core.run.budget.transfer_budget` before they are read, given back when
its request ends. Part size and parts in flight are chosen together: 256 MiB of
parts in flight at most, however many files and workers.

Invariants:

- an object appears only whole: a single ``PutObject``, or a multipart upload
  completed after its last part;
- a multipart upload that fails or is stopped (the source's read raising, which is
  how the run's stop reaches a streamed copy; a part refused) is aborted before the
  error goes on: no orphaned parts
  are left for the store to bill. Only a process killed outright leaves some (a
  bucket's lifecycle rule ``AbortIncompleteMultipartUpload`` removes them);
- the part size is :data:`PART` or, for a file that would need more than
  :data:`MAX_PARTS` of them, the smallest size that fits it, preferring the sizes a
  multipart ETag is checked with (:data:`rcp_core.backends.checksums.PART_SIZES`),
  so an unchanged rerun can still prove the bytes the same;
- the object's content type is guessed from its key, as s3fs's ``put_file`` does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import logging
import mimetypes
from collections.abc import Callable, Iterator
from typing import Any

from rcp_core.backends.checksums import PART_SIZES
from rcp_core.run.budget import Budget

log = logging.getLogger("rcp_core")

MiB = 1 << 20
PART = 16 * MiB
"""The bytes of one part (one ``UploadPart``); a file no larger is one ``PutObject``."""
MAX_PARTS = 10_000
"""S3's limit of parts in one upload."""
PARTS_PER_FILE = 8
"""One file's parts in flight at most (the budget bounds all files' together)."""

Read = Callable[[int], bytes]
"""Up to ``n`` bytes of the source, fewer only at its end."""


class Rejoined:
    """Chunks read as a stream: :meth:`read` gives ``n`` bytes (fewer only at
    the end) however the chunks were cut."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self._left = chunks, b""

    def read(self, size: int) -> bytes:
        parts, have = [self._left], len(self._left)
        while have < size:
            chunk = next(self._chunks, b"")
            if not chunk:
                break
            parts.append(chunk)
            have += len(chunk)
        data = b"".join(parts)
        self._left = data[size:]
        return data[:size]


class Body(io.RawIOBase):
    """Bytes as a request's body, read in place: botocore wraps ``bytes`` in a
    ``BytesIO``, of which aiohttp takes a buffer, which copies it (a second part's
    worth of memory for every part in flight); a seekable reader of a
    ``memoryview`` is read by both a piece at a time (the checksum, then the
    sending; rewound between, and for a retry)."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._view, self._at = memoryview(data), 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: len(self._view)}
        self._at = max(0, base[whence] + offset)
        return self._at

    def readinto(self, buffer: Any) -> int:
        piece = self._view[self._at : self._at + len(buffer)]
        buffer[: len(piece)] = piece
        self._at += len(piece)
        return len(piece)

    def read(self, size: int | None = -1) -> bytes:
        end = len(self._view) if size is None or size < 0 else self._at + size
        piece = bytes(self._view[self._at : end])
        self._at += len(piece)
        return piece

    def close(self) -> None:
        """Let go of the bytes: the clients keep a request's body in objects only
        the garbage collector frees (the response refers to its request)."""
        self._view = memoryview(b"")
        super().close()


def part_size(size: int) -> int:
    """The part size for an upload of about ``size`` bytes (see the invariants)."""
    needed = max(PART, -(-size // MAX_PARTS))
    for candidate in PART_SIZES:
        if candidate >= needed:
            return candidate
    return -(-needed // MiB) * MiB


def upload(
    fs: Any, path: str, read: Read, size: int, extra: dict[str, Any], budget: Budget
) -> None:
    """The bytes ``read`` gives (about ``size`` of them) as the object ``path``
    (``bucket/key``) on the s3fs filesystem ``fs``, with ``extra`` (its
    ``Metadata``) on the request that makes it, replacing one there.

    :raises OSError: as s3fs translates the store's errors; or what ``read``
        raised. Either way nothing was published and no part is left.
    """
    bucket, key, _ = fs.split_path(path)
    content_type, _ = mimetypes.guess_type(key)
    if content_type is not None:
        extra = {"ContentType": content_type, **extra}
    _Upload(fs, bucket, key, extra, budget, part_size(size)).run(read, size)
    fs.invalidate_cache(path)


class _Upload:
    """One object's upload (see the module's invariants).

    Budget: a thread holding bytes never waits for more (no two uploads can hold
    the budget waiting for each other); ``unsent`` bytes are read and not yet on
    their way (given back when the upload ends however it ends); a part sent gives
    its bytes back when its request ends.
    """

    def __init__(
        self,
        fs: Any,
        bucket: str,
        key: str,
        extra: dict[str, Any],
        budget: Budget,
        part: int,
    ) -> None:
        self.fs, self.bucket, self.key, self.extra = fs, bucket, key, extra
        self.budget, self.part = budget, part
        self.sent: list[concurrent.futures.Future[dict[str, Any]]] = []
        self.upload_id: str | None = None
        self.flying: set[concurrent.futures.Future[dict[str, Any]]] = set()
        self.unsent = 0
        self.carry = b""
        """A byte read past a part, the first of the next."""
        self.first = b""
        """The first part, read before the upload is known to need parts."""

    def run(self, read: Read, size: int) -> None:
        """Upload what ``read`` gives (``size`` bytes, as the source said): in parts
        if it is larger than one, else one ``PutObject`` unless a byte past the
        part is there after all (read to know, never held waiting: a worker
        holding bytes does not wait for more, so uploads cannot starve each other
        of the budget)."""
        try:
            first = self._read(read)
            if len(first) == self.part and size <= self.part:
                self.carry = read(1)
            if len(first) < self.part or (size <= self.part and not self.carry):
                with Body(first) as body:
                    self._call("put_object", Body=body, **self.extra)
            else:
                self.first, first = first, b""
                self._parts(read)
        finally:
            self.budget.give(self.unsent)
            self.unsent = 0

    def _parts(self, read: Read) -> None:
        """A multipart upload: each part read (its bytes taken from the budget)
        once the one before it is on its way; aborted if anything fails."""
        created = self._call("create_multipart_upload", **self.extra)
        self.upload_id = str(created["UploadId"])
        try:
            data, self.first = self.first, b""
            while data:
                self._send(data)
                del data  # its request holds it while in flight, and no longer
                self._wait(PARTS_PER_FILE - 1)
                data = self._read(read)
            self._wait(0)
            parts = [
                {"PartNumber": number, "ETag": sent.result()["ETag"]}
                for number, sent in enumerate(self.sent, 1)
            ]
            self._call(
                "complete_multipart_upload",
                UploadId=self.upload_id,
                MultipartUpload={"Parts": parts},
            )
        except BaseException:
            self._abort()
            raise

    def _read(self, read: Read) -> bytes:
        """The next part's bytes (``b""`` at the end), held in the budget as
        ``unsent``: the byte carried from the read before, and the rest."""
        taken = self.budget.take(self.part)
        try:
            data = read(self.part - len(self.carry))
        except BaseException:
            self.budget.give(taken)
            raise
        if self.carry:
            data, self.carry = self.carry + data, b""
        self.budget.give(taken - len(data))
        self.unsent += len(data)
        return data

    def _send(self, data: bytes) -> None:
        """Part ``len(self.sent) + 1`` on its way; its bytes given back when its
        request ends."""
        body = Body(data)
        request = self.fs._call_s3(
            "upload_part",
            Bucket=self.bucket,
            Key=self.key,
            UploadId=self.upload_id,
            PartNumber=len(self.sent) + 1,
            Body=body,
        )
        sent = asyncio.run_coroutine_threadsafe(request, self.fs.loop)
        self.unsent -= len(data)
        size = len(data)

        def ended(_: object) -> None:
            body.close()
            self.budget.give(size)

        sent.add_done_callback(ended)
        self.sent.append(sent)
        self.flying.add(sent)

    def _wait(self, pending: int) -> None:
        """Until at most ``pending`` parts are in flight.

        :raises OSError: a part failed (the first one found).
        """
        while True:
            for sent in [sent for sent in self.flying if sent.done()]:
                self.flying.discard(sent)
                sent.result()
            if len(self.flying) <= pending:
                return
            concurrent.futures.wait(
                self.flying, return_when=concurrent.futures.FIRST_COMPLETED
            )

    def _abort(self) -> None:
        """Abort the upload once its parts in flight have ended (a part still
        being sent could outlive an abort and be kept), which removes its parts;
        an abort that fails is logged with the upload's id (the parts it leaves),
        and the upload's own error goes on."""
        concurrent.futures.wait(self.flying)
        try:
            self._call("abort_multipart_upload", UploadId=self.upload_id)
        except OSError as exc:
            log.warning(
                "s3://%s/%s: the failed upload %s could not be aborted, its parts "
                "may be left in the bucket: %s",
                self.bucket,
                self.key,
                self.upload_id,
                exc,
            )

    def _call(self, method: str, **kwargs: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.fs.call_s3(
            method, Bucket=self.bucket, Key=self.key, **kwargs
        )
        return result
