"""The ``rcp`` filesystem on an ``rcpd serve`` service: ``rcp://host[:port]/abs/path``.

:class:`RcpServiceFileSystem` talks to one service through a
:class:`~rcp_core.remote.client.ServiceClient` (TLS with the service's certificate
pinned, its token): ``info`` and ``ls`` are ``stat`` and ``listdir`` requests, a file
opened for reading reads ranges, and a file opened for writing goes to a temporary
that the service renames into place when the file is closed
(:mod:`rcp_provider.fsspec.servicefile`). Bulk transfers are the service's own copies,
in parallel and keeping modes and times.

Invariants:

- **fsspec decides what is copied where** (:mod:`rcp_provider.fsspec.servicetransfers`);
- **no half-written file under its name**: a file being written is invisible until
  ``close``; a ``with`` block that raises, and a writer dropped without ``close``,
  abort it; ``get`` writes a local file through a temporary renamed into place;
- paths are the service host's absolute paths, confined there to its roots (a path
  outside is refused: :class:`~rcp_core.errors.UsageError`); a symlink is shown as
  what it points to (``islink``), as fsspec's local filesystem shows it, when the
  target is beneath the roots, else as ``other``;
- errors are the builtins a local call would raise (``FileNotFoundError``, ...,
  through :class:`~rcp_core.errors.RemoteFileError`'s subclasses); a service job that
  failed is :class:`~rcp_core.errors.JobFailedError`, a transfer with errors
  :class:`~rcp_core.errors.CopyFailedError` carrying its summary.

``username`` in a URL is accepted and not used: a service admits clients by its token
and certificates, not by user name.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import os
import posixpath
import secrets
import stat
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fsspec.callbacks import DEFAULT_CALLBACK, Callback
from fsspec.implementations.local import make_path_posix
from fsspec.spec import AbstractFileSystem

from rcp_core.errors import (
    RemoteFileNotFoundError,
    RemoteNotADirectoryError,
    UsageError,
)
from rcp_core.remote.client import SERVICE_PORT, ServiceClient
from rcp_core.remote.clientupload import FileWriter
from rcp_core.remote.filewire import MAX_READ, MAX_WRITE, Entry
from rcp_provider.fsspec.base import RcpBase
from rcp_provider.fsspec.plan import Plan
from rcp_provider.fsspec.servicefile import RcpServiceFile
from rcp_provider.fsspec.servicetransfers import bulk, run_jobs, steps
from rcp_provider.fsspec.storage_options import (
    bool_option,
    float_option,
    int_option,
    service_path,
)

if TYPE_CHECKING:
    from rcp_provider.fsspec.serviceport import ServicePlace

DEFAULT_TIMEOUT = 15.0
"""Seconds a service has to answer each request (a job's wait is longer)."""
MAX_HOPS = 40
"""Symlinks followed to the bytes of a path at most (Linux's limit)."""


class RcpServiceFileSystem(RcpBase, AbstractFileSystem):  # type: ignore[misc]  # fsspec is untyped
    """fsspec's filesystem API on an ``rcpd serve`` service.

    :param host: the service's host.
    :param port: its port (``rcpd serve``'s default otherwise).
    :param fingerprint: the SHA-256 of the certificate the service printed at start:
        pinned, required unless ``encrypt`` is false.
    :param token: the service's shared secret, if it wants one.
    :param encrypt: ``False`` only on networks trusted with the data in plain text.
    :param timeout: seconds the service has to answer each request.
    :param storage_options: engine settings
        (:data:`rcp_provider.fsspec.storage_options.ENGINE_OPTIONS`) for the service's
        copies; the rest are fsspec's own.
    :raises UsageError: an option that does not parse, or no fingerprint to pin.
    """

    def __init__(
        self,
        host: str,
        port: object = SERVICE_PORT,
        username: object = None,
        fingerprint: object = None,
        token: object = None,
        encrypt: object = True,
        timeout: object = DEFAULT_TIMEOUT,
        **storage_options: Any,
    ) -> None:
        super().__init__(**storage_options)
        self.host = host
        self.port = int_option("port", port) or SERVICE_PORT
        self.timeout = float_option("timeout", timeout)
        self.client = ServiceClient(
            host,
            self.port,
            fingerprint=None if fingerprint is None else str(fingerprint),
            token=None if token is None else str(token),
            encrypt=bool_option("encrypt", encrypt),
            timeout=self.timeout,
        )
        # fsspec has no close for a filesystem: its connection goes with it.
        weakref.finalize(self, self.client.close)

    # -- paths ----------------------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        """``rcp://host:port/a/b/`` -> ``/a/b`` (the service host's path)."""
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        return service_path(path)

    def backend_port(self, path: str) -> ServicePlace:
        """``path`` here as a backend port, which lists and hashes on the service
        (:func:`rcp_provider.fsspec.storetree.port_of` asks for it)."""
        from rcp_provider.fsspec.serviceport import ServicePlace

        return ServicePlace.on(self, path)

    def unstrip_protocol(self, name: str) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"rcp://{host}:{self.port}{self._strip_protocol(name)}"

    # -- looking ----------------------------------------------------------------------

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        path = self._strip_protocol(path)
        return self._info(path, self.client.stat(path), follow=True)

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        """The entries of the directory ``path`` (a file: itself), sorted by name."""
        path = self._strip_protocol(path)
        try:
            entries = self.client.listdir(path)
        except RemoteNotADirectoryError:
            final, entry = self._final(path)
            if entry.kind != "directory":
                info = self.info(path)
                return [info if detail else info["name"]]
            entries = self.client.listdir(final)
        infos = sorted(
            (
                self._info(posixpath.join(path, e.name), e, follow=False)
                for e in entries
            ),
            key=lambda info: str(info["name"]),
        )
        return infos if detail else [info["name"] for info in infos]

    def modified(self, path: str) -> datetime.datetime:
        mtime = self.info(path)["mtime"]
        return datetime.datetime.fromtimestamp(mtime, tz=datetime.UTC)

    def _info(self, path: str, entry: Entry, *, follow: bool) -> dict[str, Any]:
        """fsspec's description of ``entry`` at ``path``, as fsspec's local filesystem
        gives it: a symlink has its target's size, and its target's type when
        ``follow`` (``info``), "other" when not (a listing's entries, so a walk never
        enters a symlink). A listed symlink whose target dangles or lies outside the
        roots is "other" of size 0; asked about by path, a dangling one is not found.

        :raises FileNotFoundError: ``follow`` and the symlink dangles.
        """
        st, link = entry.stat, entry.target
        if link is not None:
            target = None
            try:
                target = self.client.stat(path, follow=True).stat
            except FileNotFoundError:
                if follow:
                    raise  # a dangling symlink, asked about by path: as os.stat
            except UsageError:
                pass  # pointing outside the roots: not followed
            st = target if target is not None and follow else st
            size = target.st_size if target is not None else 0
        if stat.S_ISDIR(st.st_mode):
            kind = "directory"
        elif stat.S_ISREG(st.st_mode):
            kind = "file"
        else:
            kind = "other"
        if link is None:
            size = st.st_size
        info: dict[str, Any] = {
            "name": path,
            "size": size,
            "type": kind,
            "mode": st.st_mode,
            "uid": st.st_uid,
            "gid": st.st_gid,
            "mtime": st.st_mtime,
            "islink": link is not None,
        }
        if link is not None:
            info["destination"] = link
        return info

    def _final(self, path: str) -> tuple[str, Entry]:
        """The entry ``path``'s symlinks lead to (each hop confined by the service),
        and its path; ``path`` itself when it is not a symlink.

        :raises OSError: ``ELOOP`` after :data:`MAX_HOPS` symlinks.
        """
        for _ in range(MAX_HOPS):
            entry = self.client.stat(path)
            if entry.target is None:
                return path, entry
            path = posixpath.normpath(
                posixpath.join(posixpath.dirname(path), entry.target)
            )
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)

    # -- single entries -----------------------------------------------------------------

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: int | None = None,
        autocommit: bool = True,
        cache_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> RcpServiceFile:
        path = self._strip_protocol(path)
        if mode == "rb":  # read where the bytes are (through symlinks)
            path, entry = self._final(path)
            kwargs["size"] = entry.stat.st_size
        return RcpServiceFile(
            self,
            path,
            mode,
            block_size,
            autocommit,
            cache_options=cache_options,
            **kwargs,
        )

    def cat_file(
        self,
        path: str,
        start: int | None = None,
        end: int | None = None,
        **kwargs: Any,
    ) -> bytes:
        path, entry = self._final(self._strip_protocol(path))
        if (start or 0) < 0 or (end or 0) < 0:
            size = entry.stat.st_size
            start = size + start if start is not None and start < 0 else start
            end = size + end if end is not None and end < 0 else end
        offset = max(0, start or 0)
        if end is not None:
            return self.client.read_range(path, offset, max(0, end - offset))
        return b"".join(self._pieces(path, offset))

    def pipe_file(
        self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any
    ) -> None:
        with self._writer(self._strip_protocol(path), exclusive=mode == "create") as w:
            w.write(value)

    def put_file(
        self,
        lpath: str,
        rpath: str,
        callback: Callback = DEFAULT_CALLBACK,
        mode: str = "overwrite",
        **kwargs: Any,
    ) -> None:
        """One local file (a directory: made) here, its bytes counted by ``callback``."""
        rpath = self._strip_protocol(rpath)
        if os.path.isdir(lpath):
            self.makedirs(rpath, exist_ok=True)
            return
        with open(lpath, "rb") as src:
            st = os.fstat(src.fileno())
            callback.set_size(st.st_size)
            perms = stat.S_IMODE(st.st_mode)
            with self._writer(rpath, exclusive=mode == "create", mode=perms) as w:
                while chunk := src.read(MAX_WRITE):
                    w.write(chunk)
                    callback.relative_update(len(chunk))

    def get_file(
        self,
        rpath: str,
        lpath: str,
        callback: Callback = DEFAULT_CALLBACK,
        outfile: Any = None,
        **kwargs: Any,
    ) -> None:
        """One file (a directory: made) from here to ``lpath``, written through a
        temporary beside it that is renamed into place when complete."""
        rpath, entry = self._final(self._strip_protocol(rpath))
        if entry.kind == "directory":
            os.makedirs(lpath, exist_ok=True)
            return
        callback.set_size(entry.stat.st_size)
        if outfile is not None:
            for piece in self._pieces(rpath, 0):
                outfile.write(piece)
                callback.relative_update(len(piece))
            return
        lpath = make_path_posix(lpath)
        directory, name = os.path.split(lpath)
        temporary = os.path.join(directory, f".rcp-{secrets.token_hex(6)}-{name}")
        # Created as open() creates a file (0o666 less the umask), as fsspec's local
        # get_file does; exclusive, so nothing of someone else's is written.
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as out:
                for piece in self._pieces(rpath, 0):
                    out.write(piece)
                    callback.relative_update(len(piece))
            os.replace(temporary, lpath)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        self.client.mkdir(self._strip_protocol(path), parents=create_parents)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        path = self._strip_protocol(path)
        self.client.mkdir(path, parents=True, exist_ok=exist_ok)

    def rmdir(self, path: str) -> None:
        path = self._strip_protocol(path)
        if self.info(path)["type"] != "directory":
            raise NotADirectoryError(path)
        self.client.remove(path)

    def rm_file(self, path: str) -> None:
        """Remove a file, symlink or empty directory (``rm`` removes a tree's
        entries children first)."""
        self.client.remove(self._strip_protocol(path))

    def mv(
        self,
        path1: str | list[str],
        path2: str | list[str],
        recursive: bool = False,
        maxdepth: int | None = None,
        **kwargs: Any,
    ) -> None:
        """One path to another: renamed in one step on the service (into ``path2``
        when it is a directory); lists and globs: fsspec's copy, then remove."""
        if not (isinstance(path1, str) and isinstance(path2, str)) or (
            self._strip_protocol(path1) == self._strip_protocol(path2)
        ):
            super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)
            return
        src, dst = self._strip_protocol(path1), self._strip_protocol(path2)
        if self.isdir(dst):
            dst = posixpath.join(dst, posixpath.basename(src))
        self.client.rename(src, dst)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        pair = (self._strip_protocol(path1), self._strip_protocol(path2))
        run_jobs(self, steps(Plan([pair], False), self.isdir, self._ensure_dir))

    def _ensure_dir(self, path: str) -> None:
        """Make the directory ``path`` here unless it is one already (a root's parent
        is not the service's to make, or even to ask about making)."""
        if not self.isdir(path):
            self.makedirs(path, exist_ok=True)

    def _writer(
        self, path: str, *, exclusive: bool = False, mode: int | None = None
    ) -> FileWriter:
        """Start writing ``path``, making its parents if they are missing."""
        try:
            return self.client.open_write(path, exclusive=exclusive, mode=mode)
        except RemoteFileNotFoundError:
            self.makedirs(self._parent(path), exist_ok=True)
            return self.client.open_write(path, exclusive=exclusive, mode=mode)

    def _pieces(self, path: str, offset: int) -> Iterator[bytes]:
        """The file's bytes from ``offset`` to its end, a read's worth at a time."""
        while True:
            piece = self.client.read_range(path, offset, MAX_READ)
            if piece:
                yield piece
            if len(piece) < MAX_READ:
                return
            offset += len(piece)

    _bulk = bulk  # copy, put and get (rcp_provider.fsspec.servicetransfers)
