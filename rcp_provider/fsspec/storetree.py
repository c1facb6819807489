"""A tree on an fsspec filesystem: the fsspec backend port.

- :class:`Place`: a path on a filesystem, and the backend port
  (:class:`rcp_core.backends.port.Port`) the generic engine
  (:mod:`rcp_core.engine.portcopy`) copies through: what the storage keeps
  (:attr:`Place.backend`, the declaration :mod:`rcp_core.backends.capabilities`
  refuses by), one-level listings, atomic writes, removal. A place of this host's
  files (fsspec's ``LocalFileSystem``) is the engine's own POSIX port
  (:class:`rcp_core.engine.posixport.PosixPort`) in every operation;
- :func:`list_dir`: one directory's entries as the engine reads them (names
  checked per component by :mod:`rcp_core.names`, a key ending in ``/`` its
  directory; a source's symlinks followed to files or skipped);
- :func:`stat_of`, :func:`mtime_of`: an fsspec info as the local copy's rules read
  it.

The store copy (:mod:`rcp_core.engine.portcopy`) and the store comparison
(:mod:`rcp_provider.fsspec.storecompare`) list through this module, so what one
copies is what the other compares.

Port invariants kept here for a store: a file is written with ``autocommit=False``
and committed only once every chunk is written (discarded otherwise); a local
file's upload (``put_file``) publishes the object when it ends; a copy within one
filesystem is its own ``cp_file`` (server-side where the store has one); removing a
directory removes the keys below it one by one, keeping what the engine protects,
and never joins a listed name that is not safe.
"""

from __future__ import annotations

import datetime
import os
import posixpath
import stat
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, BinaryIO

import fsspec
from fsspec.implementations.local import LocalFileSystem

from rcp_core.backends.capabilities import Backend, Capability, store_backend
from rcp_core.backends.port import Entry, EntryKind, Listing, Port, Protect
from rcp_core.engine.posixport import LOCAL, PosixPort
from rcp_core.engine.tree import joined
from rcp_core.errors import UnsafeNameError, UsageError
from rcp_core.names import check_component, check_relative
from rcp_core.run.summary import Tally

OBJECT_STORES = frozenset(
    {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oci"}
)
"""fsspec protocols of object stores: their directories are key prefixes, which
need not exist before an object is written below them."""


@dataclass(frozen=True, slots=True)
class Place:
    """A path on an fsspec filesystem (its protocol stripped)."""

    fs: Any
    path: str

    @classmethod
    def of(cls, url: str, **storage_options: Any) -> Place:
        """The place a URL (``memory://x``, ``s3://bucket/key``, a local path) names
        (with fsspec's ``storage_options``).

        :raises UsageError: fsspec does not know its protocol, or its package is
            missing.
        """
        try:
            fs, path = fsspec.url_to_fs(url, **storage_options)
        except ImportError as exc:
            raise UsageError(
                f"{url}: its fsspec package is not installed ({exc})"
            ) from exc
        except ValueError as exc:
            raise UsageError(f"{url}: {exc}") from exc
        return cls(fs, path)

    @property
    def posix(self) -> bool:
        """A directory of this host, where files can be written through a rename."""
        return isinstance(self.fs, LocalFileSystem)

    @property
    def _local(self) -> PosixPort:
        """This place as the engine's POSIX port (only when :attr:`posix`)."""
        return PosixPort(self.path)

    @property
    def backend(self) -> Backend:
        """What this engine can keep here."""
        if self.posix:
            return LOCAL
        protocol = self.fs.protocol
        name = protocol if isinstance(protocol, str) else protocol[0]
        return store_backend(f"{name}://", directories=name not in OBJECT_STORES)

    @property
    def has_directories(self) -> bool:
        """Directories of their own here (a missing parent is an error, an empty
        directory is removed with ``rmdir``), not an object store's prefixes."""
        return self.backend.has(Capability.DIRECTORIES)

    def join(self, rel: str) -> str:
        return posixpath.join(self.path, rel) if rel else self.path

    @property
    def local_path(self) -> str | None:
        return self.path if self.posix else None

    def describe(self, rel: str) -> str:
        return self.join(rel)

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/"))

    def at(self, rel: str) -> Place:
        return Place(self.fs, self.join(rel))

    def parent(self) -> Place | None:
        above = posixpath.dirname(self.path.rstrip("/"))
        return Place(self.fs, above) if above else None

    def holds(self, other: Port) -> bool:
        """On this host's files, any port whose root is a local path may be below;
        elsewhere a place of the same kind of filesystem."""
        if self.posix:
            return self._local.holds(other)
        if not isinstance(other, Place) or type(other.fs) is not type(self.fs):
            return False
        root = self.path.rstrip("/")
        return other.path == self.path or other.path.startswith(root + "/")

    def stat(self, rel: str) -> Entry | None:
        if self.posix:
            return self._local.stat(rel)
        try:
            return entry_of(self.fs.info(self.join(rel)))
        except FileNotFoundError:
            return None

    def list(self, rel: str, *, follow: bool) -> Listing:
        if self.posix:
            return self._local.list(rel, follow=follow)
        found = list_dir(self, self.join(rel), follow=follow)
        entries = {name: entry_of(info) for name, info in found.infos.items()}
        return Listing(entries, found.unsafe, found.skipped_links)

    def make_dir(self, rel: str, replacing: Entry | None) -> None:
        if self.posix:
            self._local.make_dir(rel, replacing)
        else:
            self.fs.makedirs(self.join(rel), exist_ok=True)

    def remove_dir(self, rel: str) -> None:
        if self.posix:
            self._local.remove_dir(rel)
        elif self.has_directories:
            self.fs.rmdir(self.join(rel))

    def remove(
        self, rel: str, entry: Entry, tally: Tally, protect: Protect | None
    ) -> None:
        if self.posix:
            self._local.remove(rel, entry, tally, protect)
            return
        fs, path = self.fs, self.join(rel)
        if not entry.is_dir:
            fs.rm_file(path)
            tally["removed.files"] += 1
            tally["removed.bytes"] += entry.size
            return
        files, dirs, kept = _below(fs, path, rel, protect)
        for file_path, size in files:
            fs.rm_file(file_path)
            tally["removed.files"] += 1
            tally["removed.bytes"] += size
        if not self.has_directories:
            return  # a prefix: it goes with its last key
        for dir_rel in sorted(dirs, key=lambda d: -d.count("/")):
            if dir_rel not in kept:
                fs.rmdir(self.join(dir_rel))
                tally["removed.dirs"] += 1

    def read(self, rel: str) -> AbstractContextManager[BinaryIO]:
        if self.posix:
            return self._local.read(rel)
        opened: AbstractContextManager[BinaryIO] = self.fs.open(self.join(rel), "rb")
        return opened

    def write(self, rel: str, chunks: Iterator[bytes]) -> None:
        if self.posix:
            self._local.write(rel, chunks)
            return
        writer = self.fs.open(self.join(rel), "wb", autocommit=False)
        try:
            for chunk in chunks:
                writer.write(chunk)
            writer.close()
        except BaseException:
            writer.discard()
            raise
        writer.commit()

    def digest(self, rel: str, offset: int, length: int) -> bytes | None:
        return None

    def copy_in(self, source: Port, src_rel: str, rel: str) -> bool:
        if self.posix:
            return False
        local = source.local_path
        if local is not None:
            path = os.path.join(local, src_rel) if src_rel else local
            self.fs.put_file(path, self.join(rel))
            return True
        if isinstance(source, Place) and source.fs is self.fs:
            self.fs.cp_file(source.join(src_rel), self.join(rel))
            return True
        return False

    def set_meta(self, rel: str, entry: Entry, mode: bool, times: bool) -> None:
        if self.posix:
            self._local.set_meta(rel, entry, mode, times)


@dataclass(frozen=True, slots=True)
class InfoListing:
    """One directory's fsspec infos, one level (what :meth:`Place.list` and the
    store comparison read).

    :param infos: fsspec's infos by name; each name is one safe component
        (:func:`~rcp_core.names.check_component`).
    :param unsafe: the listed names that are not safe, and why, by how they were
        listed (a prefix with its ``/``: ``set//z`` lists ``/`` in ``set``); none
        is in ``infos``, and nothing below one is ever listed.
    :param skipped_links: symlinks not followed (to a directory, dangling, out of a
        service's roots) when the listing follows them.
    """

    infos: dict[str, dict[str, Any]]
    unsafe: dict[str, UnsafeNameError]
    skipped_links: int = 0


def list_dir(place: Place, path: str, *, follow: bool) -> InfoListing:
    """The entries of the directory ``path`` of ``place`` (one level: memory follows
    the directory, never the tree).

    With ``follow`` (a source), a symlink is its target's file when it leads to one,
    else skipped and counted (a directory is never entered through one); without it
    (a destination), a POSIX entry is what ``lstat`` says, a symlink included. A POSIX
    entry that is neither a directory nor a file is ``type == "other"`` (a FIFO,
    socket or device). A store's key ending in ``/`` (a directory marker) is its
    directory.

    :raises FileNotFoundError: nothing is there.
    """
    if place.posix:
        return _posix_listing(path, follow)
    infos: dict[str, dict[str, Any]] = {}
    unsafe: dict[str, UnsafeNameError] = {}
    skipped = 0
    base = path.rstrip("/")
    for entry in place.fs.ls(path, detail=True):
        listed = str(entry["name"])
        if listed == base or (
            listed == f"{base}/" and entry.get("type") != "directory"
        ):
            continue  # the directory itself, or its marker object, as stores list it
        name = listed[len(base) + 1 :] if listed.startswith(base + "/") else listed
        if name.endswith("/") and name.count("/") == 1 and name != "/":
            name, entry = name[:-1], {**entry, "type": "directory"}
        try:
            check_component(name)
        except UnsafeNameError as exc:
            prefix = entry.get("type") == "directory" and not name.endswith("/")
            unsafe.setdefault(f"{name}/" if prefix else name, exc)
            continue
        if follow and entry.get("islink"):
            followed = _followed(place, entry)
            if followed is None:
                skipped += 1
                continue
            entry = followed
        infos.setdefault(name, entry)
    return InfoListing(infos, unsafe, skipped)


def _posix_listing(path: str, follow: bool) -> InfoListing:
    """The engine's POSIX listing (:meth:`PosixPort.list`) as fsspec infos."""
    found = PosixPort(path).list("", follow=follow)
    infos = {
        name: _posix_info(os.path.join(path, name), entry)
        for name, entry in found.entries.items()
    }
    return InfoListing(infos, {}, found.skipped_links)


def _followed(place: Place, link: dict[str, Any]) -> dict[str, Any] | None:
    """The info of the file a store's symlink leads to (under the link's name), or
    ``None`` when it leads to no file."""
    try:
        target = place.fs.info(link["name"])
    except (OSError, UsageError):  # dangling, or out of the service's roots
        return None
    if target.get("type") != "file":
        return None
    return {**target, "name": link["name"]}


def _posix_info(path: str, entry: Entry) -> dict[str, Any]:
    kind = entry.kind.value if entry.kind is not EntryKind.SYMLINK else "other"
    mtime = entry.mtime_ns / 1e9 if entry.mtime_ns is not None else None
    return {
        "name": path,
        "type": kind,
        "size": entry.size,
        "mode": entry.mode,
        "mtime": mtime,
    }


def entry_of(info: dict[str, Any]) -> Entry:
    """An fsspec info as a port's entry: its kind (a ``mode``'s where the
    filesystem gives one), size, mode, mtime (fsspec's float seconds, to the
    nanosecond) and the store's modification time (:func:`mtime_of`)."""
    mode = info.get("mode")
    mode = mode if isinstance(mode, int) and not isinstance(mode, bool) else None
    kind = EntryKind.DIRECTORY if info.get("type") == "directory" else EntryKind.FILE
    if info.get("type") == "other":
        kind = EntryKind.OTHER
    if mode is not None and stat.S_IFMT(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), EntryKind.OTHER)
    mtime = info.get("mtime")
    mtime_ns = None
    if isinstance(mtime, (int, float)) and not isinstance(mtime, bool):
        mtime_ns = round(mtime * 1e9)
    modified = mtime_of(info)
    modified_ns = round(modified * 1e9) if modified is not None else None
    return Entry(kind, int(info.get("size") or 0), mode, mtime_ns, modified_ns)


_KINDS = {
    stat.S_IFDIR: EntryKind.DIRECTORY,
    stat.S_IFREG: EntryKind.FILE,
    stat.S_IFLNK: EntryKind.SYMLINK,
}


def relative(path: str, root: str) -> str | None:
    """``path`` relative to ``root``, as the filesystem names both (a store's root may
    be ``""``); ``None`` outside it."""
    root = root.rstrip("/")
    if not root:
        return path.lstrip("/")
    if path.rstrip("/") == root:
        return ""
    return path[len(root) + 1 :] if path.startswith(root + "/") else None


def stat_of(info: dict[str, Any]) -> os.stat_result:
    """An fsspec info as a stat result, for the local copy's rules: its type (a
    ``mode``'s where the filesystem gives one), size, permission bits (``0o644``
    without a mode) and mtime to the nanosecond from fsspec's float seconds (0
    without one: a store's upload time is not the data's)."""
    kind = stat.S_IFDIR if info.get("type") == "directory" else stat.S_IFREG
    mode = info.get("mode")
    if isinstance(mode, int):
        kind = stat.S_IFMT(mode) or kind
    mtime = info.get("mtime")
    mtime_ns = 0
    if isinstance(mtime, (int, float)) and not isinstance(mtime, bool):
        mtime_ns = round(mtime * 1e9)
    perms = stat.S_IMODE(mode) if isinstance(mode, int) else 0o644
    size = int(info.get("size") or 0)
    seconds = mtime_ns // 10**9
    return os.stat_result(
        (kind | perms, 0, 0, 1, 0, 0, size, seconds, seconds, seconds),
        {"st_mtime_ns": mtime_ns, "st_atime_ns": mtime_ns, "st_ctime_ns": mtime_ns},
    )


def mtime_of(info: dict[str, Any]) -> float | None:
    """An entry's modification time in seconds, if its filesystem gives one."""
    for key in ("mtime", "LastModified", "last_modified", "updated"):
        value = info.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, datetime.datetime):
            return value.timestamp()
    return None


def _below(
    fs: Any, path: str, rel: str, protect: Protect | None
) -> tuple[list[tuple[str, int]], list[str], set[str]]:
    """What removing the store directory ``path`` (at ``rel``) removes: its files
    (path, size) and directories (relative paths, ``rel`` itself included), and the
    directories that stay because they hold an entry ``protect`` claims or one whose
    name is not safe (never joined, never removed)."""
    files: list[tuple[str, int]] = []
    dirs: list[str] = [rel]
    kept: set[str] = set()
    protected: list[str] = []
    for listed, info in sorted(fs.find(path, withdirs=True, detail=True).items()):
        sub = relative(listed, path)
        if not sub:
            continue
        is_dir = info.get("type") == "directory" or sub.endswith("/")
        sub = sub.rstrip("/") if is_dir else sub
        try:
            entry_rel = joined(rel, check_relative(sub))
        except UnsafeNameError:
            kept.update(_holding(rel, sub))
            continue
        if any(entry_rel.startswith(p + "/") for p in protected) or (
            protect is not None and protect(entry_rel, is_dir)
        ):
            protected.append(entry_rel)
            kept.update(_holding(rel, sub))
            continue
        if is_dir:
            dirs.append(entry_rel)
        else:
            files.append((listed, int(info.get("size") or 0)))
    return files, dirs, kept


def _holding(rel: str, sub: str) -> set[str]:
    """``rel`` and the directories between it and its entry ``sub``."""
    found, current = {rel}, rel
    for part in sub.split("/")[:-1]:
        current = joined(current, part)
        found.add(current)
    return found
