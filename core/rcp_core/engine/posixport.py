"""This host's files as a backend port (:class:`rcp_core.backends.port.Port`).

The generic engine (:mod:`rcp_core.engine.portcopy`) reaches a local tree through
this port when the other side of the copy is a store; a copy between two local
trees is the fd-relative fast path (:mod:`rcp_core.engine.copyrun`).

- a listing is one ``scandir`` with an ``lstat`` per entry (and a ``stat`` through a
  followed symlink, a ``readlink`` of one not followed); names come from this host's
  kernel; an entry has everything ``lstat`` says (owner, device number) and a
  symlink its target;
- a file is written to a temporary beside it (:class:`rcp_core.engine.temporaries.
  Beside`, the shape a later run sweeps) and renamed over its name once complete;
  a symlink is made under such a name and renamed over its name the same way, and
  a file written at offsets by several streams (:class:`RangeFile`) too;
- a directory is made ``0o777`` less the umask (its mode follows with its metadata);
  an entry of another kind in its place is unlinked first, so a symlink there is
  never written through;
- removal is the local engine's fd-relative one
  (:func:`rcp_core.engine.removeentry.remove_entry`: never through a symlink);
- mode and mtime are kept to the nanosecond, the owner where permitted (as root:
  EPERM keeps the copier's, as ``cp -p`` does); a symlink's own time and owner,
  never its target's (a symlink has no mode of its own on Linux);
- its name, its parent and what it holds are read from the root's absolute path,
  no symlink resolved (a relative root is the working directory's).
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import BinaryIO

from rcp_core.backends.capabilities import Backend, Capability
from rcp_core.backends.port import Entry, EntryKind, Listing, Port, Protect
from rcp_core.engine.metadata import chown_permitted
from rcp_core.engine.removeentry import remove_entry
from rcp_core.engine.temporaries import Beside, made_beside
from rcp_core.engine.tree import DIR_FLAGS
from rcp_core.run.summary import Tally

LOCAL = Backend(
    "local",
    frozenset(
        {
            Capability.DIRECTORIES,
            Capability.MODES,
            Capability.MTIMES,
            Capability.OWNERS,
            Capability.SYMLINKS,
            Capability.ATOMIC_RENAME,
        }
    ),
    1,
)
"""A local tree as the generic engine writes it: mode and mtime to the nanosecond,
owners where permitted, symlinks, nothing else (xattrs, hard links and specials
are the fast path's)."""


def entry_of(st: os.stat_result, target: str | None = None) -> Entry:
    """A stat result as a port's entry (with a symlink's ``target``, if read, and
    the device it is on)."""
    if stat.S_ISDIR(st.st_mode):
        kind = EntryKind.DIRECTORY
    elif stat.S_ISREG(st.st_mode):
        kind = EntryKind.FILE
    elif stat.S_ISLNK(st.st_mode):
        kind = EntryKind.SYMLINK
    else:
        kind = EntryKind.OTHER
    rdev = st.st_rdev if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else None
    return Entry(
        kind,
        st.st_size,
        st.st_mode,
        st.st_mtime_ns,
        st.st_mtime_ns,
        st.st_uid,
        st.st_gid,
        target,
        rdev,
        st.st_dev,
    )


class RangeFile:
    """A file of this host written at offsets (``pwrite``, from any thread) into a
    temporary beside ``path``, renamed over it by :meth:`commit`."""

    def __init__(self, path: str, size: int) -> None:
        self.beside = Beside(path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        self.fd = os.open(self.beside.temporary, flags, 0o666)
        try:
            os.ftruncate(self.fd, size)
        except BaseException:
            self.discard()
            raise

    def write_at(self, offset: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(self.fd, view, offset)
            view, offset = view[written:], offset + written

    def commit(self) -> None:
        os.close(self.fd)
        self.beside.commit()

    def discard(self) -> None:
        os.close(self.fd)
        self.beside.discard()


class PosixPort:
    """A tree of this host at ``root`` (a path)."""

    backend = LOCAL

    def __init__(self, root: str) -> None:
        self.root = root

    @property
    def local_path(self) -> str | None:
        return self.root

    def describe(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else self.root

    @property
    def name(self) -> str:
        return os.path.basename(os.path.abspath(self.root))

    def at(self, rel: str) -> PosixPort:
        return PosixPort(self.describe(rel))

    def parent(self) -> PosixPort | None:
        absolute = os.path.abspath(self.root)
        above = os.path.dirname(absolute)
        return PosixPort(above) if above != absolute else None

    def holds(self, other: Port) -> bool:
        """Any port whose root is a path of this host
        (:attr:`~rcp_core.backends.port.Port.local_path`) may be below."""
        if other.local_path is None:
            return False
        root, path = os.path.abspath(self.root), os.path.abspath(other.local_path)
        return path == root or path.startswith(root.rstrip("/") + "/")

    def stat(self, rel: str, *, follow: bool = True) -> Entry | None:
        try:
            return entry_of(os.stat(self.describe(rel), follow_symlinks=follow))
        except (FileNotFoundError, NotADirectoryError):
            return None  # nothing there, or a file where a directory would be

    def complete(self, rel: str, entry: Entry) -> Entry:
        return entry  # an lstat tells all

    def list(self, rel: str, *, follow: bool) -> Listing:
        entries: dict[str, Entry] = {}
        skipped = 0
        with os.scandir(self.describe(rel)) as found:
            for dirent in found:
                try:
                    st = dirent.stat(follow_symlinks=False)
                    if follow and stat.S_ISLNK(st.st_mode):
                        st = dirent.stat(follow_symlinks=True)
                        if stat.S_ISDIR(st.st_mode):
                            skipped += 1  # never entered through a link
                            continue
                    target = None
                    if stat.S_ISLNK(st.st_mode):
                        target = os.readlink(dirent.path)
                except FileNotFoundError:
                    if follow and dirent.is_symlink():
                        skipped += 1  # dangling: nothing to copy
                    continue  # gone meanwhile
                entries[dirent.name] = entry_of(st, target)
        return Listing(entries, {}, skipped)

    def read_link(self, rel: str, entry: Entry) -> Entry:
        """Its listing read the target already; a stat's entry has it read here."""
        if entry.target is not None:
            return entry
        return dataclasses.replace(entry, target=os.readlink(self.describe(rel)))

    def make_symlink(self, rel: str, link: Entry, replacing: Entry | None) -> None:
        assert link.target is not None, "a symlink is made with its target"
        with made_beside(self.describe(rel)) as temporary:
            os.symlink(link.target, temporary)

    def make_dir(self, rel: str, replacing: Entry | None) -> None:
        path = self.describe(rel)
        if replacing is not None:
            os.unlink(path)  # replaced, never written through (a symlink)
        try:
            os.mkdir(path)
        except FileExistsError:
            if not os.path.isdir(path) or os.path.islink(path):
                raise

    def remove_dir(self, rel: str) -> None:
        os.rmdir(self.describe(rel))

    def remove(
        self, rel: str, entry: Entry, tally: Tally, protect: Protect | None
    ) -> None:
        parent, name = os.path.split(self.describe(rel))
        fd = os.open(parent, DIR_FLAGS | os.O_NOFOLLOW)
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            remove_entry(fd, name, st, tally, rel=rel, protect=protect)
        finally:
            os.close(fd)

    def read(self, rel: str) -> AbstractContextManager[BinaryIO]:
        return open(self.describe(rel), "rb")

    def write(self, rel: str, chunks: Iterator[bytes], kept: Entry) -> None:
        with made_beside(self.describe(rel)) as temporary, open(temporary, "xb") as out:
            for chunk in chunks:
                out.write(chunk)

    def write_ranges(self, rel: str, size: int) -> RangeFile:
        return RangeFile(self.describe(rel), size)

    def digest(self, rel: str, offset: int, length: int) -> bytes | None:
        return None  # the data is here: read it

    def copy_in(self, source: Port, src_rel: str, rel: str, kept: Entry) -> bool:
        return False  # a local pair is the fast path's; a store's data streams here

    def set_meta(
        self, rel: str, entry: Entry, mode: bool, times: bool, owner: bool = False
    ) -> None:
        path = self.describe(rel)
        if owner and (entry.uid, entry.gid) != (None, None):
            uid, gid = entry.uid, entry.gid
            chown_permitted(
                path,
                -1 if uid is None else uid,
                -1 if gid is None else gid,
                follow_symlinks=False,
            )
        link = entry.kind is EntryKind.SYMLINK
        if mode and entry.mode is not None and not link:
            os.chmod(path, stat.S_IMODE(entry.mode))
        mtime_ns = entry.changed_ns
        if times and mtime_ns is not None:
            os.utime(path, ns=(mtime_ns, mtime_ns), follow_symlinks=not link)
