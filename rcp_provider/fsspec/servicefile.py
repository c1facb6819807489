"""A file on an ``rcpd serve`` service, as the ``rcp`` filesystem's service form opens it.

:class:`RcpServiceFile` reads by ranges, and writes whole through a temporary on the
service that takes the file's name when it is closed: a file being written is
invisible until then, and a ``with`` block that raises, or a writer dropped unclosed,
aborts it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from fsspec.spec import AbstractBufferedFile

from rcp_core.remote.clientupload import FileWriter
from rcp_core.remote.filewire import MAX_WRITE

if TYPE_CHECKING:
    from rcp_provider.fsspec.service import RcpServiceFileSystem


class RcpServiceFile(AbstractBufferedFile):  # type: ignore[misc]  # fsspec is untyped
    """A file on a service: read by ranges, or written whole.

    Writing goes to a temporary on the service (:class:`FileWriter`) that takes the
    file's name at ``close`` (with ``autocommit``) or at the transaction's commit;
    leaving a ``with`` block by an exception, or dropping an unclosed file, aborts it.
    Appending (``"ab"``) is not supported: a service writes whole files.
    """

    DEFAULT_BLOCK_SIZE = MAX_WRITE

    def __init__(
        self,
        fs: RcpServiceFileSystem,
        path: str,
        mode: str = "rb",
        block_size: int | None = None,
        autocommit: bool = True,
        **kwargs: Any,
    ) -> None:
        if mode == "ab":
            raise NotImplementedError(f"{path}: rcp:// files cannot be appended to")
        self._file: FileWriter | None = None
        super().__init__(fs, path, mode, block_size, autocommit, **kwargs)
        if mode == "xb":  # an existing name fails now, as open(path, "xb") does
            self._initiate_upload()
            self.offset = 0

    def _fetch_range(self, start: int, end: int) -> bytes:
        data: bytes = self.fs.client.read_range(self.path, start, end - start)
        return data

    def _initiate_upload(self) -> None:
        self._file = self.fs._writer(self.path, exclusive=self.mode == "xb")

    def _upload_chunk(self, final: bool = False) -> bool:
        assert self._file is not None
        self._file.write(self.buffer.getvalue())
        if final and self.autocommit:
            self.commit()
        return True

    def commit(self) -> None:
        """Give the written file its name, in one step."""
        if self._file is not None:
            self._file.commit()

    def discard(self) -> None:
        """Drop what was written; the name keeps what it had."""
        if self._file is not None:
            self._file.abort()

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        if kind is not None and self.writable():
            self.discard()
            self.closed = True
            return
        self.close()

    def __del__(self) -> None:
        if not self.closed and self.writable():
            with contextlib.suppress(Exception):
                self.discard()
            self.closed = True
