"""An entry beneath a service's roots, reached without following a symlink at the
end: through an ``O_PATH`` descriptor of the entry itself, checked, then used by
its ``/proc/self/fd`` name, so what is read or changed is the very inode checked,
never what the name may lead to by the time it is used.

- :func:`open_regular`: a regular file opened to read (``read``, ``digest``);
- :func:`pread_all`: a range of it;
- :func:`set_own_meta`: an entry's own owner, permission bits and times
  (``setmeta``); a symlink refused;
- :func:`make_own_symlink`: a symlink made whole with its own owner and time
  (``symlink``): under a temporary name, then renamed over its name.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from rcp_core.engine.metadata import chown_permitted
from rcp_core.engine.temporaries import temp_name
from rcp_core.errors import PathRefusedError
from rcp_core.remote.roots import Confined

_PATH_ONLY = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


def open_regular(at: Confined) -> tuple[int, os.stat_result]:
    """A descriptor to read the regular file ``at`` names, and its ``stat``.

    :raises IsADirectoryError: it is a directory.
    :raises PathRefusedError: it is something else (a symlink, a device, a FIFO).
    """
    probe = os.open(at.name, _PATH_ONLY, dir_fd=at.fd)
    try:
        st = os.fstat(probe)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not stat.S_ISREG(st.st_mode):
            raise PathRefusedError(f"{at.shown}: a symlink or not a regular file")
        # The very inode checked above, never what the name may lead to by now.
        fd = os.open(f"/proc/self/fd/{probe}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(probe)
    return fd, st


def pread_all(fd: int, offset: int, length: int) -> bytes:
    """``length`` bytes from ``offset``; fewer only at the end of the file."""
    pieces: list[bytes] = []
    got = 0
    while got < length:
        piece = os.pread(fd, length - got, offset + got)
        if not piece:
            break
        pieces.append(piece)
        got += len(piece)
    return b"".join(pieces)


def set_own_meta(
    at: Confined,
    owner: tuple[int | None, int | None],
    mode: int | None,
    mtime_ns: int | None,
) -> None:
    """Give the entry ``at`` names the owner and group ``owner`` (where permitted:
    :func:`~rcp_core.engine.metadata.chown_permitted`), the permission bits
    ``mode`` and the access and modification time ``mtime_ns``, each where given,
    in that order (a ``chown`` clears setuid bits; each change bumps the ctime).

    :raises PathRefusedError: it is a symlink.
    """
    fd = os.open(at.name, _PATH_ONLY, dir_fd=at.fd)
    try:
        if stat.S_ISLNK(os.fstat(fd).st_mode):
            raise PathRefusedError(f"{at.shown} is a symlink")
        pinned = f"/proc/self/fd/{fd}"
        if owner != (None, None):
            uid, gid = owner
            chown_permitted(
                pinned, -1 if uid is None else uid, -1 if gid is None else gid
            )
        if mode is not None:
            os.chmod(pinned, mode)
        if mtime_ns is not None:
            os.utime(pinned, ns=(mtime_ns, mtime_ns))
    finally:
        os.close(fd)


def make_own_symlink(
    at: Confined,
    target: str,
    owner: tuple[int | None, int | None],
    mtime_ns: int | None,
) -> None:
    """Make the entry ``at`` names the symlink to ``target``, with the owner
    ``owner`` (where permitted) and the time ``mtime_ns``, each where given: made
    and given them under a temporary name beside it, then renamed over the name
    (replacing a file or symlink there; a directory there stays, an error), so the
    name is never a link without them."""
    temporary = temp_name(at.name)
    os.symlink(target, temporary, dir_fd=at.fd)
    try:
        if owner != (None, None):
            uid, gid = owner
            chown_permitted(
                temporary,
                -1 if uid is None else uid,
                -1 if gid is None else gid,
                dir_fd=at.fd,
                follow_symlinks=False,
            )
        if mtime_ns is not None:
            os.utime(
                temporary, ns=(mtime_ns, mtime_ns), dir_fd=at.fd, follow_symlinks=False
            )
        os.rename(temporary, at.name, src_dir_fd=at.fd, dst_dir_fd=at.fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=at.fd)
        raise
