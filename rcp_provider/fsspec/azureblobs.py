"""Azure blob calls rcp makes itself, through adlfs's own asynchronous service client
(its credentials, its event loop), where adlfs does not do what a copy needs.

- :func:`upload`: a local file as one blob with its metadata. adlfs's ``put_file``
  names the blob's metadata itself (the ones given are dropped) and its writer
  stages every file as blocks and commits them (two requests for a small file);
  the SDK's ``upload_blob`` sends a file up to its single-put size (64 MiB) in one
  Put Blob, for which the service records the Content-MD5 the next listings give
  (:mod:`rcp_core.backends.checksums`), and a larger one as blocks committed at the
  end;
- :func:`put`, :func:`metadata`, :func:`remove`: one blob written from bytes, its
  user metadata read, removed (a directory's marker,
  :mod:`rcp_provider.fsspec.markers`);
- :func:`one_level`: the blobs and prefixes directly below a prefix, the prefixes
  named as the service names them (:mod:`~rcp_provider.fsspec.storelisting`).

Invariants: a blob appears only whole (a Put Blob, or a block list committed after
its last block); an error is an ``OSError`` as fsspec's stores raise them
(``FileNotFoundError`` where there is no such blob, ``PermissionError`` for a
refusal, ``ConnectionError`` where the service was not reached, else ``EIO``).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Awaitable, Callable
from typing import Any, BinaryIO, TypeVar

import fsspec.asyn

DIRECTORY = {"is_directory": "true"}
"""adlfs's own mark of a directory blob: without it adlfs takes ``DIR/`` for a file
named ``DIR`` and lists nothing below it."""
CONCURRENCY = 4
"""Blocks of one large file in flight (the SDK's 4 MiB each)."""
BUFFERED = 64 << 20
"""The bytes :func:`upload` holds at most: the SDK reads a file up to its
single-put size (64 MiB) whole, a larger one :data:`CONCURRENCY` blocks at a time."""

T = TypeVar("T")


def upload(fs: Any, local: str, path: str, metadata: dict[str, str]) -> None:
    """The local file ``local`` as the blob ``path`` (``container/key``), with
    ``metadata``, replacing one there."""
    container, key, _ = fs.split_path(path)
    with open(local, "rb") as data:
        size = os.fstat(data.fileno()).st_size
        _run(fs, key, lambda bc: _upload(bc, data, size, metadata), container)


async def _upload(
    bc: Any, data: bytes | BinaryIO, size: int, metadata: dict[str, str]
) -> None:
    await bc.upload_blob(
        data,
        length=size,
        overwrite=True,
        metadata=metadata,
        max_concurrency=CONCURRENCY,
    )


def put(fs: Any, container: str, key: str, data: bytes, meta: dict[str, str]) -> None:
    """``data`` as the blob ``key`` in ``container``, with ``meta``."""
    _run(fs, key, lambda bc: _upload(bc, data, len(data), meta), container)


def metadata(fs: Any, container: str, key: str) -> dict[str, str]:
    """The user metadata of the blob ``key``.

    :raises FileNotFoundError: there is no such blob.
    """
    properties = _run(fs, key, lambda bc: bc.get_blob_properties(), container)
    return dict(properties.metadata or {})


def remove(fs: Any, container: str, key: str) -> None:
    """Remove the blob ``key``.

    :raises FileNotFoundError: there is no such blob.
    """
    _run(fs, key, lambda bc: bc.delete_blob(), container)


def one_level(fs: Any, path: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The blobs directly below ``path`` (``container/key``), as adlfs's ``ls``
    describes them, and the prefixes there as the service names them (a trailing
    ``/`` each, an empty segment kept: ``set//``).

    :raises OSError: as :func:`_os_error` says.
    """
    container, key, _ = fs.split_path(path)
    start = f"{key}/" if key else ""

    async def walk() -> tuple[list[dict[str, Any]], list[str]]:
        from azure.core.exceptions import AzureError
        from azure.storage.blob.aio import BlobPrefix

        blobs: list[Any] = []
        prefixes: list[str] = []
        async with fs.service_client.get_container_client(container) as cc:
            try:
                async for item in cc.walk_blobs(
                    name_starts_with=start, include=["metadata"], delimiter="/"
                ):
                    if isinstance(item, BlobPrefix):  # the asynchronous client's
                        prefixes.append(str(item.name))
                    else:
                        blobs.append(item)
            except AzureError as exc:
                raise _os_error(exc, path) from exc
        infos: list[dict[str, Any]] = await fs._details(blobs)
        return infos, prefixes

    found: tuple[list[dict[str, Any]], list[str]] = fsspec.asyn.sync(fs.loop, walk)
    return found


def _run(fs: Any, key: str, call: Callable[[Any], Awaitable[T]], container: str) -> T:
    """``call`` on the blob client of ``key`` in ``container``, on adlfs's loop;
    the service's errors as ``OSError``."""

    async def with_client() -> T:
        from azure.core.exceptions import AzureError

        client = fs.service_client.get_blob_client(container=container, blob=key)
        async with client as bc:
            try:
                return await call(bc)
            except AzureError as exc:
                raise _os_error(exc, f"{container}/{key}") from exc

    result: T = fsspec.asyn.sync(fs.loop, with_client)
    return result


def _os_error(exc: Exception, name: str) -> OSError:
    """The ``OSError`` an Azure SDK error is (see the module's invariants)."""
    from azure.core.exceptions import (
        ClientAuthenticationError,
        ResourceNotFoundError,
        ServiceRequestError,
        ServiceResponseError,
    )

    if isinstance(exc, ResourceNotFoundError):
        return FileNotFoundError(errno.ENOENT, "no such blob", name)
    if isinstance(exc, ClientAuthenticationError):
        return PermissionError(errno.EACCES, f"refused: {exc}", name)
    if isinstance(exc, ServiceRequestError | ServiceResponseError):
        return ConnectionError(errno.ECONNRESET, f"the service: {exc}", name)
    return OSError(errno.EIO, str(exc), name)
