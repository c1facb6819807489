"""A tree on an ``rcpd serve`` service as a backend port: :class:`ServicePlace`.

A :class:`~rcp_provider.fsspec.storetree.Place` of the ``rcp`` filesystem's service
form (:class:`~rcp_provider.fsspec.service.RcpServiceFileSystem`) that asks the
service what a comparison needs, where the data is:

- a listing is the service's ``listdir`` (``lstat`` on its host: type, mode, owner,
  mtime to the nanosecond, device numbers, the device each entry is on (1.12: a
  removal keeps a mount point) and symlink targets; names checked on the
  wire by :func:`rcp_core.remote.filewire.entry_from_wire`); a source's symlink
  (``follow``) is its target's ``stat`` when that is a file beneath the service's
  roots, else skipped and counted;
- a file's digest is the service's ``digest`` request: hashed on its host, no data
  crosses the network;
- an entry's owner, permission bits and mtime are set by the service's
  ``setmeta`` request (1.17), as a local copy sets them; a symlink is made by its
  ``symlink`` request (1.18), with its own time and owner;
- these requests run on connections of the place's own
  (:class:`Connections`: one per request in flight, so several workers ask at
  once), closed when the last place sharing them goes; reading, writing and
  removing are the filesystem's, as any store's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import posixpath
import stat
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field

from rcp_core.backends.capabilities import Backend, Capability
from rcp_core.backends.port import Entry, EntryKind, Listing
from rcp_core.engine.posixport import entry_of
from rcp_core.errors import UsageError
from rcp_core.remote.client import ServiceClient
from rcp_core.remote.filewire import Entry as RemoteEntry
from rcp_provider.fsspec.service import RcpServiceFileSystem
from rcp_provider.fsspec.storetree import Place, store_backend_of


class Connections:
    """Clients of one service, each serving one request at a time: a request takes
    an idle one, or opens another (:meth:`ServiceClient.another`), and gives it back.
    Every one is closed when this goes."""

    def __init__(self, client: ServiceClient) -> None:
        self._first = client
        self._idle: list[ServiceClient] = []
        self._lock = threading.Lock()
        self._opened: list[ServiceClient] = []
        weakref.finalize(self, _close_all, self._opened)

    @contextlib.contextmanager
    def client(self) -> Iterator[ServiceClient]:
        with self._lock:
            client = self._idle.pop() if self._idle else None
        if client is None:
            client = self._first.another()
            with self._lock:
                self._opened.append(client)
        try:
            yield client
        finally:
            with self._lock:
                self._idle.append(client)


def _close_all(clients: list[ServiceClient]) -> None:
    for client in clients:
        client.close()


@dataclass(frozen=True, slots=True)
class ServicePlace(Place):
    """A path on a service (see the module docstring); :meth:`on` makes one."""

    connections: Connections = field(compare=False, kw_only=True)

    @classmethod
    def on(cls, fs: RcpServiceFileSystem, path: str) -> ServicePlace:
        """The place ``path`` of ``fs``'s service, with connections of its own."""
        return cls(fs, path, connections=Connections(fs.client))

    @property
    def backend(self) -> Backend:
        """A store's declaration (what a copy through the generic engine keeps
        here), whose listings give mtimes to the nanosecond, as ``lstat`` did, and
        which keeps the owner, permission bits and mtime :meth:`set_meta` gives and
        the symlinks :meth:`make_symlink` makes (their targets listed)."""
        store = store_backend_of(self.fs)
        kept = store.capabilities | {
            Capability.MODES,
            Capability.MTIMES,
            Capability.OWNERS,
            Capability.SYMLINKS,
        }
        return dataclasses.replace(store, capabilities=kept, time_precision_ns=1)

    def set_meta(
        self, rel: str, entry: Entry, mode: bool, times: bool, owner: bool = False
    ) -> None:
        """``entry``'s owner (``owner``: where the service is permitted to),
        permission bits (``mode``; a service makes no setuid, setgid or sticky
        entries) and mtime (``times``), set by the service on its host
        (``setmeta``, 1.17); one it refuses (a symlink there, an older service) is
        a ``PermissionError`` of this entry."""
        if entry.kind is EntryKind.SYMLINK:
            return  # made with its time and owner (make_symlink)
        bits = entry.mode & 0o777 if mode and entry.mode is not None else None
        mtime_ns = entry.changed_ns if times else None
        uid, gid = (entry.uid, entry.gid) if owner else (None, None)
        if (bits, mtime_ns, uid, gid) == (None, None, None, None):
            return
        with self.connections.client() as client:
            try:
                client.set_meta(
                    self.join(rel), mode=bits, mtime_ns=mtime_ns, uid=uid, gid=gid
                )
            except UsageError as exc:
                raise PermissionError(errno.EPERM, str(exc)) from exc

    def make_symlink(self, rel: str, link: Entry, replacing: Entry | None) -> None:
        """Made by the service on its host (``symlink``, 1.18), whole, with the
        time and owner ``link`` has; one it refuses (outside the roots, an older
        service) is a ``PermissionError`` of this entry."""
        assert link.target is not None, "a symlink is made with its target"
        with self.connections.client() as client:
            try:
                client.symlink(
                    self.join(rel),
                    link.target,
                    mtime_ns=link.mtime_ns,
                    uid=link.uid,
                    gid=link.gid,
                )
            except UsageError as exc:
                raise PermissionError(errno.EPERM, str(exc)) from exc

    def stat(self, rel: str, *, follow: bool = True) -> Entry | None:
        with self.connections.client() as client:
            try:
                found = client.stat(self.join(rel), follow=follow)
            except FileNotFoundError:
                return None
        return _entry(found)

    def list(self, rel: str, *, follow: bool) -> Listing:
        entries: dict[str, Entry] = {}
        skipped = 0
        path = self.join(rel)
        with self.connections.client() as client:
            for listed in client.listdir(path):
                if follow and listed.target is not None:
                    st = _followed(client, posixpath.join(path, listed.name))
                    if st is None:
                        skipped += 1  # to a directory, dangling, out of the roots
                    else:
                        entries[listed.name] = entry_of(st)
                    continue
                entries[listed.name] = _entry(listed)
        return Listing(entries, {}, skipped)

    def digest(self, rel: str, offset: int, length: int) -> bytes | None:
        with self.connections.client() as client:
            digest, _ = client.digest(self.join(rel), offset, length)
        return bytes.fromhex(digest)


def _entry(found: RemoteEntry) -> Entry:
    """A service's entry as a port's, with the device it is on as the service says
    (``None`` from a service older than 1.12): its ``stat`` has none."""
    return dataclasses.replace(entry_of(found.stat, found.target), dev=found.dev)


def _followed(client: ServiceClient, path: str) -> os.stat_result | None:
    """What the symlink ``path`` leads to, when it is a file beneath the roots."""
    try:
        st = client.stat(path, follow=True).stat
    except (FileNotFoundError, UsageError):
        return None
    return st if stat.S_ISREG(st.st_mode) else None
