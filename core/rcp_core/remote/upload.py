"""One file written through a service: a hidden temporary, renamed into place on commit.

What the ``create``, ``write``, ``commit`` and ``abort`` requests do
(``docs/remote_protocol.md``, "File requests").

Invariants:

- nothing is written under the final name: the data goes to a temporary
  (:func:`rcp_core.engine.temporaries.temp_name`) created ``0600`` with ``O_EXCL`` in the
  final name's directory, which :meth:`Upload.commit` renames over the name in one step (or,
  for an exclusive write, links to it, which fails if the name appeared meanwhile):
  a reader sees the old entry or the whole new file, never a part;
- abort, a commit that fails and the end of the connection
  (:meth:`Upload.close`) remove the temporary: an unfinished write leaves nothing
  behind, and no temporary outlives the connection that made it;
- bytes are appended in order: each piece names the offset it starts at, which must
  be the size so far, so a piece sent twice or lost is refused, never written twice
  or skipped;
- the file gets its permissions once its data is complete: the mode asked for, else
  the mode of the file it replaces, else ``0644``; only permission bits (``0777``),
  so a client never makes a setuid file;
- every call is relative to the directory's descriptor, reached by
  :class:`rcp_core.remote.roots.Roots` without following a symlink.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from rcp_core.engine.destination import rename_over
from rcp_core.engine.entries import NEW_FILE_FLAGS
from rcp_core.engine.temporaries import temp_name
from rcp_core.errors import UsageError
from rcp_core.remote.roots import Confined

DEFAULT_MODE = 0o644
PERMISSIONS = 0o777


class Upload:
    """A file being written; :meth:`commit` or :meth:`close` ends it.

    :param at: the final name in its directory (the upload owns the descriptor).
    :param mode: the permission bits to give it (at most ``0777``), or ``None`` (see
        the module).
    :param exclusive: the commit fails if the final name exists by then.
    :raises IsADirectoryError: the final name is a directory.
    :raises FileExistsError: ``exclusive`` and the final name exists.
    """

    def __init__(self, at: Confined, mode: int | None, exclusive: bool) -> None:
        self.at = at
        self.mode = mode
        self.exclusive = exclusive
        self.size = 0
        self.tmp: str | None = None
        self.fd = -1
        self._closed = False
        try:
            old = _lstat(at)
            if old is not None and stat.S_ISDIR(old.st_mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
            if old is not None and exclusive:
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST))
            tmp = temp_name(at.name)
            self.fd = os.open(tmp, NEW_FILE_FLAGS, 0o600, dir_fd=at.fd)
            self.tmp = tmp
        except BaseException:
            self.close()
            raise

    def write(self, offset: int, data: bytes | memoryview) -> None:
        """Append ``data``, which must start at ``offset`` = :attr:`size`.

        :raises UsageError: ``offset`` is not the size so far; nothing was written.
        """
        if offset != self.size:
            raise UsageError(f"write at {offset}: the file has {self.size} bytes")
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]
        self.size += len(data)

    def commit(self, sync: bool) -> os.stat_result:
        """Give the file its mode and put it under its name; what it is there.

        :param sync: flush the file's data, and then its directory, to the disk
            first (``fsync``).
        :raises FileExistsError: an exclusive write whose name exists.
        :raises OSError: the rename (or link) failed: the temporary is gone and the
            final name is as it was; or, with ``sync``, flushing the directory failed
            after the rename.
        """
        assert self.tmp is not None
        try:
            mode = self.mode
            if mode is None:
                old = _lstat(self.at)
                replaced = old is not None and stat.S_ISREG(old.st_mode)
                mode = old.st_mode & PERMISSIONS if old and replaced else DEFAULT_MODE
            os.fchmod(self.fd, mode)
            if sync:
                os.fsync(self.fd)
            st = os.fstat(self.fd)
            fd, self.fd = self.fd, -1
            os.close(fd)
            tmp, dir_fd, name = self.tmp, self.at.fd, self.at.name
            if self.exclusive:
                os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                os.unlink(tmp, dir_fd=dir_fd)
            else:
                rename_over(dir_fd, tmp, name)
            self.tmp = None
            if sync:
                _sync_directory(dir_fd)
            return st
        finally:
            self.close()

    def close(self) -> None:
        """End the upload: a temporary still there is removed (abort). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.fd >= 0:
                fd, self.fd = self.fd, -1
                os.close(fd)
            if self.tmp is not None:
                tmp, self.tmp = self.tmp, None
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp, dir_fd=self.at.fd)
        finally:
            self.at.close()


def _lstat(at: Confined) -> os.stat_result | None:
    try:
        return os.stat(at.name, dir_fd=at.fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _sync_directory(dir_fd: int) -> None:
    """``fsync`` the directory of ``dir_fd`` (an ``O_PATH`` descriptor cannot be
    synced: open the directory itself through it)."""
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
