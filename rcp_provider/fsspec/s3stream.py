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
    s3fs's event loop."""

    def __init__(self, fs: Any, body: Any) -> None:
        self._fs, self._body = fs, body

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all that is left with -1); ``b""`` at the end.

        :raises ConnectionResetError: the connection failed while the body came.
        """
        try:
            data: bytes = fsspec.asyn.sync(
                self._fs.loop, self._body.read, size if size >= 0 else None
            )
        except (TimeoutError, _client_errors()) as exc:
            raise ConnectionResetError(
                errno.ECONNRESET, f"the object's body stopped coming: {exc}"
            ) from exc
        return data

    def close(self) -> None:
        self._body.close()


def _client_errors() -> type[Exception]:
    """aiohttp's connection errors (aiobotocore's transport)."""
    import aiohttp

    return aiohttp.ClientError


@contextlib.contextmanager
def get_object(fs: Any, path: str) -> Iterator[tuple[Stream, dict[str, str]]]:
    """The object at ``path`` (``bucket/key``) on the s3fs filesystem ``fs``: its
    body as a stream, and its user metadata; the body released on exit.

    :raises OSError: as s3fs translates the store's errors (``FileNotFoundError``
        where there is no such object).
    """
    bucket, key, version = fs.split_path(path)
    extra = {"VersionId": version} if version else {}
    response = fs.call_s3("get_object", Bucket=bucket, Key=key, **extra)
    stream = Stream(fs, response["Body"])
    try:
        yield stream, dict(response.get("Metadata") or {})
    finally:
        stream.close()
