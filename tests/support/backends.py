"""Kinds of storage an ``rcp`` operand can name, described for the conformance suite.

A :class:`Backend` says, for one kind of storage, how a test makes a fresh place there
(:meth:`~Backend.area`), builds a tree from a :mod:`support.treespec` spec in it
(:meth:`~Backend.build`), names a path of it as an ``rcp`` operand, with or without a
trailing slash (:meth:`~Backend.operand`), reads a tree back as a local directory to
compare with :func:`support.treecmp.compare_trees` (:meth:`~Backend.view`), and
takes a snapshot of everything in an area (:meth:`~Backend.snapshot`: to prove that
nothing was touched, or nothing written outside a destination). What it supports is
not here: that is the one table of :mod:`support.capabilities`, keyed by
:attr:`Backend.name`.

Two families cover the built-in kinds:

- :class:`PosixBackend`: a directory tree of this host's kernel, named as a local
  path (``local``), a ``file://`` URL (``file``), ``host:/path`` on the test sshd
  (``host``: this host again, reached through ssh and ``rcpd``) or
  ``rcp://host:port/path`` on an ``rcpd serve`` service (``serve``: its roots are
  directories of this host). Built with :func:`~support.treespec.make_tree`, read in
  place.
- :class:`StoreBackend`: an fsspec store (``memory://``, ``s3://`` on moto). A tree
  is built by making it locally with :func:`~support.treespec.make_tree` and
  uploading each entry with the store's own ``put_file``/``makedirs``, and read back
  by downloading each listed file with the store's own ``get_file``: fsspec's code,
  never the engine under test.

How ``rcp`` is run against them is :mod:`support.rcprun`. A site adds its own kind of
storage by writing a :class:`Backend` (see ``tests/conformance/README.md``).
"""

from __future__ import annotations

import abc
import dataclasses
import os
import shlex
import stat
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rcp_core.backends.capabilities import Capability
from rcp_core.backends.port import Entry, EntryKind
from rcp_provider.fsspec import markers, objectmeta
from rcp_provider.fsspec.storetree import Place, protocol_of, store_backend_of
from support.treespec import Spec, make_tree

LINK_SUFFIX = ".rclonelink"
"""rclone's name for a symlink's object (``--links``): what ``rcp`` writes too."""

Snapshot = dict[str, tuple[object, ...]]
"""Every entry of an area by relative path: what a change to it would change."""


@dataclass(frozen=True)
class Launch:
    """What a run needs to reach a backend: ``rcp`` options (``--ssh``, ...), fsspec
    configuration by protocol (applied while an in-process run lasts), and the
    environment of an ``rcp`` process."""

    args: tuple[str, ...] = ()
    fsspec: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    environ: Mapping[str, str] = field(default_factory=dict)


class Backend(abc.ABC):
    """One kind of storage (see the module docstring).

    :param name: its key in :data:`support.capabilities.TABLE` and in test ids.
    :param url: whether ``rcp`` sees its operands as URLs (the store path), not as
        local paths or ``host:/path``.
    :param in_process: whether only this process can see it (``memory://``): then
        ``rcp`` must run in this process.
    """

    name: str = ""
    url: bool = False
    in_process: bool = False
    launch: Launch = Launch()

    @abc.abstractmethod
    def area(self) -> str:
        """A fresh, empty place of this backend for one test (its native path)."""
        raise NotImplementedError

    @abc.abstractmethod
    def operand(self, path: str, slash: bool = False) -> str:
        """``path`` as an ``rcp`` operand (with a trailing ``/`` if ``slash``)."""
        raise NotImplementedError

    @abc.abstractmethod
    def build(self, path: str, spec: Spec) -> str:
        """Make the tree ``spec`` at ``path`` (made if missing); ``path``."""
        raise NotImplementedError

    @abc.abstractmethod
    def view(self, path: str) -> AbstractContextManager[Path]:
        """A context manager giving the tree at ``path`` as a local directory, to read
        and compare, never to change."""
        raise NotImplementedError

    @abc.abstractmethod
    def snapshot(self, path: str) -> Snapshot:
        """Every entry below ``path`` (``path`` itself as ``"."``)."""
        raise NotImplementedError

    @abc.abstractmethod
    def exists(self, path: str) -> bool:
        """Whether anything is at ``path``."""
        raise NotImplementedError

    @abc.abstractmethod
    def read(self, path: str) -> bytes:
        """The bytes of the file at ``path``."""
        raise NotImplementedError

    def join(self, path: str, *names: str) -> str:
        return "/".join([path.rstrip("/"), *names])


class PosixBackend(Backend):
    """A tree of this host's kernel (see the module docstring).

    :param name: ``local``, ``file``, ``host`` or ``serve`` (or a site's).
    :param base: where areas are made.
    :param prefix: put before an absolute path to make an operand (``""``,
        ``file://``, ``root@127.0.0.1:PORT:``, ``rcp://127.0.0.1:PORT``).
    """

    def __init__(
        self,
        name: str,
        base: Path,
        prefix: str = "",
        *,
        url: bool = False,
        launch: Launch | None = None,
    ) -> None:
        self.name, self.base, self.prefix, self.url = name, base, prefix, url
        self.launch = launch or Launch()
        base.mkdir(parents=True, exist_ok=True)

    def area(self) -> str:
        return tempfile.mkdtemp(prefix=f"{self.name}-", dir=self.base)

    def operand(self, path: str, slash: bool = False) -> str:
        return f"{self.prefix}{path}{'/' if slash else ''}"

    def build(self, path: str, spec: Spec) -> str:
        make_tree(Path(path), spec)
        return path

    @contextmanager
    def view(self, path: str) -> Iterator[Path]:
        yield Path(path)

    def snapshot(self, path: str) -> Snapshot:
        if not os.path.lexists(path):
            return {}
        shot: Snapshot = {".": _posix_entry(path)}
        for top, dirs, files in os.walk(path):
            for name in dirs + files:
                full = os.path.join(top, name)
                shot[os.path.relpath(full, path)] = _posix_entry(full)
        return shot

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def read(self, path: str) -> bytes:
        return Path(path).read_bytes()


def _posix_entry(path: str) -> tuple[object, ...]:
    st = os.lstat(path)
    data: object = None
    if stat.S_ISREG(st.st_mode):
        data = Path(path).read_bytes()
    elif stat.S_ISLNK(st.st_mode):
        data = os.readlink(path)
    return (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, data)


class StoreBackend(Backend):
    """An fsspec store (see the module docstring).

    :param name: ``memory`` or ``s3`` (or a site's).
    :param fs: the store's fsspec filesystem, as this process reaches it.
    :param protocol: the URL scheme of its operands.
    :param root: where areas are made (``/c`` on ``memory://``, a bucket on S3).
    :param directories: whether the store keeps empty directories.
    :param clock: whether its entries carry the time they were written (S3's
        ``LastModified``), which no one sets.
    A store whose objects keep rcp's metadata (S3, GCS, Azure) gets each file of a
    tree it builds written as ``rcp`` writes it (:class:`Place`), with its mode and
    mtime, and each symlink as its object ``NAME.rclonelink`` (rclone's layout,
    read back by :meth:`view` as a symlink); any other store gets the bytes alone.

    :param dot_segments: whether a key can have ``.`` and ``..`` segments. Azure's
        cannot: HTTP clients resolve such segments of a blob's URL before sending it
        (aiohttp and urllib3 alike), so the signed name is not the one that arrives.
    """

    url = True

    def __init__(
        self,
        name: str,
        fs: Any,
        protocol: str,
        root: str,
        *,
        directories: bool,
        clock: bool = False,
        in_process: bool = False,
        dot_segments: bool = True,
        launch: Launch | None = None,
    ) -> None:
        self.name, self.fs, self.protocol, self.root = name, fs, protocol, root
        self.directories, self.clock, self.in_process = directories, clock, in_process
        self.dot_segments = dot_segments
        self.metadata = store_backend_of(fs).has(Capability.MTIMES)
        self.links = store_backend_of(fs).has(Capability.SYMLINKS)
        self.launch = launch or Launch()

    def area(self) -> str:
        path = f"{self.root.rstrip('/')}/{self.name}-{uuid.uuid4().hex[:12]}"
        if self.directories:
            self.fs.makedirs(path, exist_ok=True)
        return path

    def operand(self, path: str, slash: bool = False) -> str:
        return f"{self.protocol}://{path.lstrip('/')}{'/' if slash else ''}"

    def build(self, path: str, spec: Spec) -> str:
        files: dict[str, bytes] = {}
        with tempfile.TemporaryDirectory() as staging:
            local = make_tree(Path(staging) / "tree", spec)
            if self.directories:
                self.fs.makedirs(path, exist_ok=True)
            for top, dirs, names in os.walk(local):
                rel_top = os.path.relpath(top, local)
                for name in sorted(dirs + names):
                    full = os.path.join(top, name)
                    rel = name if rel_top == "." else f"{rel_top}/{name}"
                    st = os.lstat(full)
                    if stat.S_ISDIR(st.st_mode):
                        if self.directories:
                            self.fs.makedirs(self.join(path, rel), exist_ok=True)
                    elif stat.S_ISREG(st.st_mode) and self.metadata:
                        kept = Entry(EntryKind.FILE, st.st_size, st.st_mode)
                        kept = dataclasses.replace(kept, mtime_ns=st.st_mtime_ns)
                        data = Path(full).read_bytes()
                        Place(self.fs, self.join(path, rel)).write(
                            "", iter([data]), kept
                        )
                    elif stat.S_ISREG(st.st_mode):
                        files[self.join(path, rel)] = Path(full).read_bytes()
                    elif stat.S_ISLNK(st.st_mode) and self.links:
                        link = Entry(
                            EntryKind.SYMLINK,
                            mtime_ns=st.st_mtime_ns,
                            target=os.readlink(full),
                        )
                        Place(self.fs, self.join(path, rel)).make_symlink(
                            "", link, None
                        )
                    else:
                        raise ValueError(f"{rel}: a store holds files and directories")
        self.fs.pipe(files)  # the store's own upload, concurrent where it can be
        return path

    @contextmanager
    def view(self, path: str) -> Iterator[Path]:
        with tempfile.TemporaryDirectory() as there:
            local = Path(there) / "tree"
            info = self.fs.info(path)
            if info["type"] != "directory":
                self.fs.get_file(path, str(local))
                yield local
                return
            local.mkdir()
            files, dirs = [], {path.rstrip("/"): local}
            for name, entry in sorted(self._find(path).items()):
                rel = name[len(path.rstrip("/")) + 1 :].rstrip("/")
                if not rel:
                    continue
                if entry["type"] == "directory" or name.endswith("/"):
                    (local / rel).mkdir(parents=True, exist_ok=True)
                    dirs[name.rstrip("/")] = local / rel
                else:
                    files.append(name)
            contents: dict[str, bytes] = self.fs.cat(files) if files else {}
            for name, data in contents.items():
                target = local / name[len(path.rstrip("/")) + 1 :]
                target.parent.mkdir(parents=True, exist_ok=True)
                if self.links and target.name.endswith(LINK_SUFFIX):
                    target = target.with_name(target.name[: -len(LINK_SUFFIX)])
                    os.symlink(data, target)
                else:
                    target.write_bytes(data)
                self._keep(self._object_metadata(name), target)
            for name in sorted(dirs, key=lambda d: -d.count("/")):  # after their files
                if self.metadata:
                    found = markers.read(self.fs, self.fs_protocol, name)
                    self._keep(found or {}, dirs[name])
            yield local

    @property
    def fs_protocol(self) -> str:
        return protocol_of(self.fs)

    def _object_metadata(self, name: str) -> dict[str, str]:
        if not self.metadata:
            return {}
        if self.protocol == "s3":
            return dict(self.fs.metadata(name))
        return dict(self.fs.info(name).get("metadata") or {})

    def _keep(self, metadata: dict[str, str], local: Path) -> None:
        """Give the local copy of an object or a directory the owner, mode and
        mtime its metadata kept (:mod:`rcp_provider.fsspec.objectmeta`: an
        object's own, a directory's marker's), where it kept them."""
        kept = objectmeta.decode(metadata)
        link = local.is_symlink()  # its own owner and time; no mode of its own
        if (kept.uid, kept.gid) != (None, None):
            os.chown(
                local,
                -1 if kept.uid is None else kept.uid,
                -1 if kept.gid is None else kept.gid,
                follow_symlinks=False,
            )
        if kept.mode is not None and not link:
            local.chmod(kept.mode)
        if kept.mtime_ns is not None:
            os.utime(local, ns=(kept.mtime_ns, kept.mtime_ns), follow_symlinks=False)

    def _find(self, path: str) -> dict[str, dict[str, Any]]:
        self.fs.invalidate_cache()
        found: dict[str, dict[str, Any]] = self.fs.find(
            path, withdirs=True, detail=True
        )
        return found

    def snapshot(self, path: str) -> Snapshot:
        if not self.exists(path):
            return {}
        shot: Snapshot = {}
        top = path.rstrip("/")
        for name, entry in self._find(path).items():
            rel = name[len(top) + 1 :] if name != top else "."
            data = None
            if entry["type"] == "file":  # S3's ETag is a hash of the content
                data = entry.get("ETag") or self.fs.cat_file(name)
            stamp = entry.get("LastModified") or entry.get("created")
            shot[rel or "."] = (entry["type"], entry.get("size"), str(stamp), data)
        return shot

    def exists(self, path: str) -> bool:
        self.fs.invalidate_cache()
        return bool(self.fs.exists(path))

    def read(self, path: str) -> bytes:
        data: bytes = self.fs.cat_file(path)
        return data

    def can_hold(self, key: str) -> bool:
        """Whether a key (relative) can be written here under exactly its name."""
        return self.dot_segments or not {".", ".."} & set(key.split("/"))

    def put_key(self, key: str, data: bytes) -> None:
        """Write ``data`` under exactly ``key`` (a raw key, however hostile)."""
        self.fs.pipe_file(key, data)


def ssh_launch(ssh: list[str], rcpd: str) -> Launch:
    """The options that start ``rcpd`` over the test sshd."""
    return Launch(args=("--ssh", shlex.join(ssh), "--rcpd-path", rcpd))
