"""The client's side of a file written through a service: append, then commit or abort.

The service's side, and what it promises (nothing under the final name before the
commit, nothing left behind by an abort or a lost connection), is
:mod:`rcp_core.remote.upload`. Pieces go in order, each at most
:data:`~rcp_core.remote.filewire.MAX_WRITE` bytes and each answered before the next,
on the one connection that holds the file.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import TracebackType
from typing import Any

from rcp_core.errors import ConnectionLostError, ProtocolError, UsageError
from rcp_core.remote.filewire import MAX_WRITE

Send = Callable[[str, dict[str, Any], bytes | memoryview], dict[str, Any]]
"""Sends one request (type, fields, data) on the file's connection; the answer's
header. Raises :class:`ConnectionLostError` once that connection is gone."""


class FileWriter:
    """A file being written on a service
    (:meth:`rcp_core.remote.client.ServiceClient.open_write`).

    :meth:`write` appends; :meth:`commit` puts the file under its name in one step;
    :meth:`abort` drops it. Until the commit the name shows what it showed before.
    As a context manager it commits when the block ends normally and aborts when it
    raises.

    A writer belongs to its client's connection: if that is lost, the service drops
    the file, and :meth:`write` and :meth:`commit` raise
    :class:`ConnectionLostError` (a commit whose answer was lost may have happened:
    :meth:`~rcp_core.remote.client.ServiceClient.stat` tells).

    :param send: sends one request on the connection that holds the file; its answer.
    :param handle: the file's handle on that connection.
    :param path: the file's final path, for messages.
    """

    def __init__(self, send: Send, handle: int, path: str) -> None:
        self.path = path
        self.size = 0
        self.closed = False
        self._send = send
        self._handle = handle

    def __enter__(self) -> FileWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is None:
            self.commit()
        else:
            self.abort()

    def write(self, data: bytes | memoryview) -> int:
        """Append ``data`` (sent in pieces of at most 4 MiB); how many bytes."""
        if self.closed:
            raise UsageError(f"{self.path}: write to a closed writer")
        view = memoryview(data).cast("B")
        for start in range(0, len(view), MAX_WRITE):
            piece = view[start : start + MAX_WRITE]
            fields = {"handle": self._handle, "offset": self.size}
            answer = self._send("write", fields, piece)
            if answer.get("size") != self.size + len(piece):
                raise ProtocolError(f"{self.path}: the service wrote another size")
            self.size += len(piece)
        return len(view)

    def commit(self, *, sync: bool = False) -> None:
        """Put the file under its name (replacing what was there) in one step.

        :param sync: have the service flush the file and its directory to disk first.
        :raises RemoteFileExistsError: an exclusive write whose name exists by now.
        """
        if self.closed:
            raise UsageError(f"{self.path}: commit of a closed writer")
        self.closed = True
        self._send("commit", {"handle": self._handle, "sync": sync}, b"")

    def abort(self) -> None:
        """Drop the file; its name stays as it was. Quiet when the connection is
        already gone (the service dropped the file then)."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(ConnectionLostError):
            self._send("abort", {"handle": self._handle}, b"")
