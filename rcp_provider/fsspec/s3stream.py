"""An S3 object read in one GET, its user metadata with it.

s3fs reads a file by ranges, each a request, and an S3 listing carries no user
metadata, so a download that keeps each object's mode and mtime asked twice per
object (a HEAD for the metadata, a GET for the bytes). One ``GetObject`` answers both:
its response headers carry the metadata before its body streams.

Invariants: one request per object read (its body streamed by :meth:`Stream.read`,
never gathered); an error of the store is s3fs's ``OSError``
(``FileNotFoundError``, ``PermissionError``, ...), one of the connection while the
body streams a :class:`ConnectionResetError` (an ``OSError`` the run may try again);
the body is released when the stream closes, read to its end or not.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from typing import Any

import fsspec.asyn


class Stream:
    """The body of one ``GetObject`` response, read from this (synchronous) side of
    s3fs's event loop.

    Invariant: each :meth:`read` crosses into the loop once at most, however the
    body's bytes arrive (aiohttp hands them over as the socket gives them, often in
    tens of KiB): the bytes asked for are gathered there. Once the ``length`` bytes
    the response declared have come, the body is read to its end in the same
    crossing (the empty read that lets the client check the length and the
    checksum), and a read after the end asks nothing.
    """

    def __init__(self, fs: Any, body: Any, length: int) -> None:
        self._fs, self._body, self._left = fs, body, length
        self._ended = False

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all that is left with -1); ``b""`` at the end.

        :raises ConnectionResetError: the connection failed while the body came.
        """
        if self._ended:
            return b""
        try:
            data: bytes = fsspec.asyn.sync(self._fs.loop, self._gather, size)
        except (TimeoutError, _client_errors()) as exc:
            raise ConnectionResetError(
                errno.ECONNRESET, f"the object's body stopped coming: {exc}"
            ) from exc
        return data

    async def _gather(self, size: int) -> bytes:
        """``size`` bytes of the body (fewer at its end; all with -1), on the loop."""
        if size < 0:
            self._ended = True
            rest: bytes = await self._body.read()
            return rest
        parts: list[bytes] = []
        while size > 0 and not self._ended:
            part: bytes = await self._body.read(size)
            self._ended = not part
            parts.append(part)
            size -= len(part)
            self._left -= len(part)
        if self._left <= 0 and not self._ended:
            self._ended = True
            if await self._body.read():
                raise OSError(errno.EIO, "the object's body is longer than declared")
        return b"".join(parts)

    def close(self) -> None:
        self._body.close()


def _client_errors() -> type[Exception]:
    """aiohttp's connection errors (aiobotocore's transport)."""
    import aiohttp

    return aiohttp.ClientError


@contextlib.contextmanager
def get_object(
    fs: Any,
    path: str,
    span: tuple[int, int] | None = None,
    etag: str | None = None,
) -> Iterator[tuple[Stream, dict[str, str]]]:
    """The object at ``path`` (``bucket/key``) on the s3fs filesystem ``fs``: its
    body as a stream (of ``span``'s ``(offset, length)`` only, where given), and
    its user metadata; the body released on exit. With ``etag``, only the object
    that has it (``If-Match``).

    :raises OSError: as s3fs translates the store's errors (``FileNotFoundError``
        where there is no such object, ``EIO`` where the range is not what was
        asked).
    """
    bucket, key, version = fs.split_path(path)
    extra: dict[str, str] = {"VersionId": version} if version else {}
    if span is not None:
        extra["Range"] = f"bytes={span[0]}-{span[0] + span[1] - 1}"
    if etag is not None:
        extra["IfMatch"] = etag
    response = fs.call_s3("get_object", Bucket=bucket, Key=key, **extra)
    if span is not None and int(response["ContentLength"]) != span[1]:
        response["Body"].close()
        raise OSError(errno.EIO, f"asked {span[1]} bytes, got a range of another size")
    stream = Stream(fs, response["Body"], int(response["ContentLength"]))
    try:
        yield stream, dict(response.get("Metadata") or {})
    finally:
        stream.close()
