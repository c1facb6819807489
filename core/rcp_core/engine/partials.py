"""Resuming a large file's copy from what a cut-off run wrote (``--partial``).

With ``partial``, a regular file larger than :data:`RESUMABLE` is written under its
partial name (:func:`rcp_core.engine.temporaries.partial_name`) and put in place only
once complete, data and metadata; a copy that fails or is killed leaves it there. The
next run with ``partial`` opens it (:func:`open_partial`) and keeps the longest prefix
it verifies against the source: the BLAKE3 digests of the partial's blocks
(:func:`describe`, a :class:`Prefix`) compared in order with those of the same ranges
of the source (:func:`verified`). The partial is cut to that length and the copy goes
on from there. A local copy does both on this host (:func:`reopen`); between hosts
the destination describes and the source verifies (protocol 1.14), so only the rest
crosses the network.

Invariants:

- a prefix is trusted only once verified, block by block from the start: the first
  block that differs ends it (a hole a parallel write left, a tail torn by a crash, a
  source that changed), and nothing after it is kept;
- a partial is used only if it is a regular file of this user with one link, opened
  without following a symlink; anything else under that name (the name is reserved,
  as temporaries' names are) is removed, and the file written afresh;
- a partial is never under the final name: it is put there only when complete.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from typing import Any

from rcp_core.tools.verify.digests import at_offset, blake3_of

RESUMABLE = 1 << 20
"""Files larger than this are written resumably under ``partial`` (smaller ones cost
less to send again than to verify)."""
MIN_BLOCK = 16 << 20
"""The smallest block a prefix is verified by."""
MAX_BLOCKS = 1024
"""At most this many digests describe a prefix (the block grows with the size)."""
READ_SIZE = 4 << 20
OPEN_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_UNUSABLE = frozenset({errno.ELOOP, errno.ENXIO, errno.ETXTBSY})
"""An open of these errors found something that is no partial (a symlink, a socket)."""


def block_size(size: int) -> int:
    """The block a prefix of ``size`` bytes is verified by: a power of two, at least
    :data:`MIN_BLOCK`, with at most :data:`MAX_BLOCKS` blocks."""
    block = MIN_BLOCK
    while -(-size // block) > MAX_BLOCKS:
        block *= 2
    return block


@dataclass(frozen=True, slots=True)
class Prefix:
    """What a partial holds: its length and the digests of its blocks, in order (the
    last block may be short).

    :param identity: ``(st_ino, st_size, st_mtime_ns)`` of the partial when it was
        described (the describing side's own check that it is unchanged when used;
        never sent).
    """

    size: int
    block: int
    digests: tuple[str, ...]
    identity: tuple[int, int, int] = (0, 0, 0)

    def to_wire(self) -> dict[str, Any]:
        return {"size": self.size, "block": self.block, "digests": list(self.digests)}

    @classmethod
    def from_wire(cls, value: Any) -> Prefix:
        """A peer's description, checked before it is used.

        :raises ValueError: not a prefix (the caller's protocol error).
        """
        if not isinstance(value, dict):
            raise ValueError("a prefix is an object")
        size, block, digests = (
            value.get("size"),
            value.get("block"),
            value.get("digests"),
        )
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ValueError(f"bad prefix size {size!r}")
        if (
            not isinstance(block, int)
            or isinstance(block, bool)
            or block < MIN_BLOCK
            or block & (block - 1)
        ):
            raise ValueError(f"bad prefix block {block!r}")
        if not isinstance(digests, list) or len(digests) != -(-size // block):
            raise ValueError("a prefix needs one digest per block")
        if len(digests) > MAX_BLOCKS or not all(_is_digest(d) for d in digests):
            raise ValueError("bad prefix digests")
        return cls(size, block, tuple(digests))


def _is_digest(value: Any) -> bool:
    if not isinstance(value, str) or len(value) != 64:
        return False
    try:
        bytes.fromhex(value)
    except ValueError:
        return False
    return True


_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK})
"""What ``link`` answers on a filesystem (or a file) that takes no more hard links."""


def place_new(dir_fd: int, made: str, name: str) -> None:
    """Give the complete file ``made`` the name ``name``, where nothing was when the
    copy planned it, never replacing what may have been made there since: a hard
    link (which fails on an existing name), then ``made`` goes. A filesystem without
    hard links gets a rename after ``name`` was found free.

    :raises FileExistsError: something has the name now (``made`` stays).
    """
    try:
        os.link(made, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        if _exists(dir_fd, name):
            raise FileExistsError(errno.EEXIST, "destination exists", name) from exc
        os.rename(made, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return
    os.unlink(made, dir_fd=dir_fd)


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


def open_partial(dir_fd: int, name: str) -> int | None:
    """The partial ``name`` in ``dir_fd``, open for reading and writing, when it may
    be used (see the module); ``None`` when there is none (one that may not be used
    is removed first).

    :raises OSError: it cannot be opened or removed (a directory under that name).
    """
    try:
        fd = os.open(name, OPEN_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno not in _UNUSABLE:
            raise
        discard(dir_fd, name)
        return None
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and st.st_uid == os.geteuid():
        return fd
    os.close(fd)
    discard(dir_fd, name)
    return None


def discard(dir_fd: int, name: str) -> None:
    """Remove what is under the partial name ``name`` (nothing there is fine).

    :raises IsADirectoryError: a directory has the name (left alone).
    """
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)


def describe(fd: int) -> Prefix:
    """The digests of every block of the open partial ``fd`` (to its end as read)."""
    st = os.fstat(fd)
    block = block_size(st.st_size)
    buf = bytearray(min(READ_SIZE, block))
    digests = []
    size = 0
    while size < st.st_size:
        digest, done = blake3_of(
            at_offset(fd, size), min(block, st.st_size - size), buf
        )
        if done < min(block, st.st_size - size):
            break  # it shrank: describe what is there in whole blocks
        digests.append(digest.hex())
        size += done
    return Prefix(size, block, tuple(digests), (st.st_ino, size, st.st_mtime_ns))


def verified(fd: int, prefix: Prefix, size: int) -> int:
    """How many bytes of ``prefix`` the first ``size`` bytes of the open source ``fd``
    confirm: the blocks, from the start, whose digests match (0: none)."""
    buf = bytearray(min(READ_SIZE, prefix.block))
    kept = 0
    for digest in prefix.digests:
        end = min(kept + prefix.block, prefix.size)
        if end > size:
            break
        found, done = blake3_of(at_offset(fd, kept), end - kept, buf)
        if done < end - kept or found.hex() != digest:
            break
        kept = end
    return kept


def reopen(dir_fd: int, name: str, src_fd: int, size: int) -> tuple[int, int] | None:
    """A local copy's resume: the partial ``name`` open for writing, cut to the prefix
    the source ``src_fd`` (``size`` bytes) confirms, and that prefix's length; ``None``
    when nothing of it can be kept (the partial, if any, is then removed).
    """
    fd = open_partial(dir_fd, name)
    if fd is None:
        return None
    try:
        kept = verified(src_fd, describe(fd), size)
        if kept:
            os.ftruncate(fd, kept)
            return fd, kept
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    discard(dir_fd, name)
    return None


def resume(dir_fd: int, name: str, prefix: Prefix, kept: int) -> int:
    """The destination's side of a resume between hosts: the partial ``name`` that
    ``prefix`` described, open for writing and cut to the ``kept`` bytes its source
    confirmed.

    :raises OSError: it is gone or changed since it was described (``ECANCELED``: a
        permanent error of the file; the next run verifies it again).
    """
    fd = open_partial(dir_fd, name)
    if fd is None:
        raise FileNotFoundError(errno.ENOENT, "the partial is gone", name)
    st = os.fstat(fd)
    if (st.st_ino, st.st_size, st.st_mtime_ns) != prefix.identity or kept > prefix.size:
        os.close(fd)
        raise OSError(
            errno.ECANCELED, "the partial changed since it was verified", name
        )
    try:
        os.ftruncate(fd, kept)
    except BaseException:
        os.close(fd)
        raise
    return fd
