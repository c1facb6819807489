"""A tree on an fsspec filesystem as the store engine sees it.

- :class:`Place`: a path on a filesystem, and what the engine can keep there
  (:attr:`Place.backend`, the declaration :mod:`rcp_core.backends.capabilities`
  refuses by);
- :func:`list_dir`: one directory's entries as the engine reads them (names
  checked per component by :mod:`rcp_core.names`, a key ending in ``/`` its
  directory; a source's symlinks followed to files or skipped);
- :func:`stat_of`, :func:`mtime_of`: an fsspec info as the local copy's rules read
  it.

The store copy (:mod:`rcp_provider.fsspec.storecopy`) and the store comparison
(:mod:`rcp_provider.fsspec.storecompare`) list through this module, so what one
copies is what the other compares.
"""

from __future__ import annotations

import datetime
import os
import posixpath
import stat
from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from rcp_core.backends.capabilities import Backend, Capability, store_backend
from rcp_core.errors import UnsafeNameError, UsageError
from rcp_core.names import check_component

OBJECT_STORES = frozenset(
    {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oci"}
)
"""fsspec protocols of object stores: their directories are key prefixes, which
need not exist before an object is written below them."""
ON_POSIX = Backend(
    "local",
    frozenset(
        {
            Capability.DIRECTORIES,
            Capability.MODES,
            Capability.MTIMES,
            Capability.ATOMIC_RENAME,
        }
    ),
    1000,
)
"""A local directory as this engine writes it: it keeps mode and mtime (fsspec's
float seconds), nothing else."""


@dataclass(frozen=True, slots=True)
class Place:
    """A path on an fsspec filesystem (its protocol stripped)."""

    fs: Any
    path: str

    @classmethod
    def of(cls, url: str, **storage_options: Any) -> Place:
        """The place a URL (``memory://x``, ``s3://bucket/key``, a local path) names."""
        fs, path = fsspec.url_to_fs(url, **storage_options)
        return cls(fs, path)

    @property
    def posix(self) -> bool:
        """A directory of this host, where files can be written through a rename."""
        return isinstance(self.fs, LocalFileSystem)

    @property
    def backend(self) -> Backend:
        """What this engine can keep here."""
        if self.posix:
            return ON_POSIX
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


@dataclass(frozen=True, slots=True)
class Item:
    """One entry of the source tree: its path relative to the root, and fsspec's info
    (``type``, ``size``, maybe ``mtime`` and ``mode``)."""

    rel: str
    info: dict[str, Any]

    @property
    def is_dir(self) -> bool:
        return bool(self.info.get("type") == "directory")

    @property
    def is_special(self) -> bool:
        """A FIFO, socket or device of a POSIX source (no store has one)."""
        return bool(self.info.get("type") == "other")


@dataclass(frozen=True, slots=True)
class Listing:
    """One directory's entries, one level, as the engine reads them.

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


def list_dir(place: Place, path: str, *, follow: bool) -> Listing:
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
    return Listing(infos, unsafe, skipped)


def _posix_listing(path: str, follow: bool) -> Listing:
    infos: dict[str, dict[str, Any]] = {}
    skipped = 0
    with os.scandir(path) as entries:
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
                if follow and stat.S_ISLNK(st.st_mode):
                    st = entry.stat(follow_symlinks=True)
                    if stat.S_ISDIR(st.st_mode):
                        skipped += 1  # never entered through a link
                        continue
            except FileNotFoundError:
                if follow and entry.is_symlink():
                    skipped += 1  # dangling: nothing to copy
                continue  # gone meanwhile
            if stat.S_ISDIR(st.st_mode):
                kind = "directory"
            else:
                kind = "file" if stat.S_ISREG(st.st_mode) else "other"
            infos[entry.name] = _posix_info(entry.path, st, kind)
    return Listing(infos, {}, skipped)


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


def _posix_info(path: str, st: os.stat_result, kind: str) -> dict[str, Any]:
    return {
        "name": path,
        "type": kind,
        "size": st.st_size,
        "mode": st.st_mode,
        "mtime": st.st_mtime,
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
