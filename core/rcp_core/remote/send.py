"""The source role: walks the source tree and sends it to a destination.

One *walker* (the caller's thread) and one *sender* thread per data connection:

- The walker announces every directory with ``dir`` on the control connection and
  scans it only once the destination answered ``dir_ready`` (a directory that could
  not be made is answered ``dir_failed``: its subtree is not read). Scanning a
  directory announces its subdirectories, queues its files in batches and ends with
  ``dir_end`` and the number of entries queued, so the destination can finish the
  directory when that many arrived.
- Senders take batches from a bounded queue (the walk never runs far ahead of the
  network): small files travel together in ``FILES`` frames, a large one alone as
  ``CHUNK`` frames, its holes skipped (``SEEK_DATA``/``SEEK_HOLE``) so they stay holes.
- An entry that cannot be read is still sent, as ``failed``, so every count the
  destination waits for is met; the error is recorded here.
- A file with more than one name (``st_nlink > 1``) is read once: the first name seen
  travels with its data and a ``link`` id, each later one as a ``hardlink`` entry
  with that id and no data (to a destination that speaks protocol 1.1; an older one
  gets every name as a file). A symlink with more than one name goes the same way: the
  first name as a ``symlink`` with a ``link`` id, the later ones as ``hardlink`` (to a
  destination of 1.9; an older one gets every name as a symlink). An inode is
  forgotten once all its names were seen.
- Filters (``--include``/``--exclude``/``--gitignore``) are applied here, as a local
  copy applies them: an excluded entry is not sent (under ``--delete`` its name is,
  in ``dir_excluded``, so the destination keeps it), a directory the filters only
  traverse is announced with ``traverse`` (removed there if it stays empty).
- A dry run (``--dry-run``) sends every file's metadata and none of its data.
- Entries run under :class:`~rcp_core.remote.roleruntime.RoleRun`: transient errors of
  reads are retried, errors are classified by this host's site plugins, the walk takes
  one ``ops_throttle`` token per entry, and once the run stops (a fatal error, any
  error under ``fail_early``, or the destination's ``stop``, protocol 1.10) nothing
  more is read: directories not yet scanned end with a count of 0, queued entries go
  as ``failed``.
- A destination directory that existed may come with a manifest of its regular files
  (``dir_manifest``, before ``dir_ready``): a source file that the copy's settings
  find unchanged against it, or one to keep, goes as an ``unchanged`` or ``kept``
  entry without data (a second run of the same copy sends no file data).

Invariants: a directory's descriptor stays open until its last batch is sent; the
sizes in a frame are the bytes actually read (a file that shrank is sent as it is now).
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import stat
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rcp_core.engine.existing import Action, decide
from rcp_core.engine.filters import Filter, GitIgnores, Verdict
from rcp_core.engine.metadata import Metadata
from rcp_core.engine.methods import data_extents
from rcp_core.engine.tree import DIR_FLAGS, Lifecycle, Node, joined
from rcp_core.errors import (
    ConnectionLostError,
    PeerTimeoutError,
    ProtocolError,
    RemoteError,
)
from rcp_core.remote.connection import Connection
from rcp_core.remote.hello import (
    FILTERS,
    HARD_LINKS,
    SPECIALS,
    SYMLINK_LINKS,
    XATTRS,
)
from rcp_core.remote.meta import meta_of, stat_of, xattrs_to_wire
from rcp_core.remote.receive import ANCHOR, check_name
from rcp_core.remote.roleruntime import RoleRun
from rcp_core.remote.wire import FrameKind
from rcp_core.run.summary import Tally, merge
from rcp_core.settings import CopySettings

log = logging.getLogger("rcp_core")

SMALL = 1 << 20
"""Files up to this size travel in ``FILES`` frames; larger ones as ``CHUNK`` runs."""
FRAME_DATA = 4 << 20
"""Data bytes per frame at most (below the 8 MiB frame limit with room for headers)."""
BATCH_ENTRIES = 256
EXCLUDED_PART = 4096
"""Names per ``dir_excluded`` message."""
QUEUE_DEPTH = 64
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


@dataclass(slots=True, eq=False)
class _Dir(Node["_Dir"]):
    """A source directory whose batches may still be queued; finished (closed) when
    the last one is sent. The destination finishes directories, so a sender's node
    holds no reference on its parent (``parent`` is ``None``).

    ``rel`` names it in messages (the source root's name first); ``path`` is its
    path as the filters see it (``""`` for the source root).
    """

    fd: int
    path: str = ""
    under_include: bool = False
    ignores: GitIgnores | None = None


def _close(tally: Tally, node: _Dir) -> None:
    """A directory's finish: its descriptor closes."""
    os.close(node.fd)


@dataclass(frozen=True, slots=True)
class _Announced:
    """A directory announced to the destination, scanned once it is ready there."""

    parent: _Dir
    name: str
    rel: str
    path: str
    under_include: bool


Kind = str
"""What the walk found an entry to be: ``file``, ``symlink``, ``special`` (a FIFO,
socket or device), or a file matched by the destination's manifest: ``unchanged``
or ``kept``."""


@dataclass(frozen=True, slots=True)
class _Batch:
    """Entries of one directory for one sender: ``(name, kind)`` pairs (the sender
    stats each file as it reads it, so a file costs no separate ``lstat``)."""

    dir_id: int
    node: _Dir
    entries: list[tuple[str, Kind]]
    rename: str | None = None
    """The one entry's name at the destination, when it differs (a root file)."""


class Sender:
    """Sends sources (each a directory or a single entry) under their destination
    names, all into the destination's directory 0.

    :param sources: ``(path, name at the destination)`` pairs.

    :param control: the control connection to the destination (its reader is ours).
    :param data: the data connections; one sender thread each.
    :param stall: give up when the destination answered no directory for this long.
    :param runtime: the role's run state (default: this host's plugins, for the first
        source).
    """

    def __init__(
        self,
        sources: Sequence[tuple[str, str]],
        control: Connection,
        data: list[Connection],
        settings: CopySettings,
        *,
        stall: float,
        runtime: RoleRun | None = None,
    ) -> None:
        self.stall = stall
        self.settings = settings
        self.sources = list(sources)
        self.runtime = runtime or RoleRun(settings, self.sources[0][0], source=True)
        self.control = control
        self.data = data
        self.tallies: list[Tally] = []
        self.errors = self.runtime.errors
        self._lock = threading.Lock()
        self.tree: Lifecycle[_Dir] = Lifecycle(_close)
        self._ids = 0
        self._announced: dict[int, _Announced] = {}
        self.filter = Filter.build(
            includes=settings.includes,
            excludes=settings.excludes,
            filter_file=settings.filter_file,
            gitignore=settings.gitignore,
        )
        self._filters_wire = control.version >= FILTERS
        self._specials = control.version >= SPECIALS
        # Reads the attributes --preserve keeps (xattrs, acls); none for an older peer.
        self._metadata = Metadata(settings.preserve, umask=0)
        self._xattrs = self._metadata.copy_xattrs and control.version >= XATTRS
        self._protect = (
            settings.delete and not settings.delete_excluded and self._filters_wire
        )
        self._ready: queue.Queue[tuple[int, bool]] = queue.Queue()
        self._work: queue.Queue[_Batch | None] = queue.Queue(QUEUE_DEPTH)
        self._failure: BaseException | None = None
        self._hard_links = control.version >= HARD_LINKS
        self._symlink_links = control.version >= SYMLINK_LINKS
        self._links: dict[tuple[int, int], list[int]] = {}
        """(device, inode) -> [its link id, names still to see]."""
        self._link_ids = 0
        self._manifests: dict[int, dict[str, os.stat_result]] = {}
        """Directory id -> the regular files its destination already holds."""

    # -- the walk ----------------------------------------------------------------

    def run(self) -> dict[str, int]:
        """Send everything; the source side's counts. Raises what broke the transfer."""
        tally = self._new_tally()
        senders = [
            threading.Thread(target=self._send_loop, args=(conn,), daemon=True)
            for conn in self.data
        ]
        for thread in senders:
            thread.start()
        reader = threading.Thread(target=self._read_control, daemon=True)
        reader.start()
        try:
            self._walk(tally)
        finally:
            for _ in senders:
                self._work.put(None)
            for thread in senders:
                thread.join()
        if self._failure is None:
            # The destination says "finished" once everything is written; closing
            # before that would cut it off.
            reader.join(self.stall)
            if reader.is_alive():
                raise PeerTimeoutError(
                    f"the destination did not finish within {self.stall:g} s"
                )
        if self._failure is not None:
            raise self._failure
        return merge(self.tallies)

    def _new_tally(self) -> Tally:
        tally = Tally()
        with self._lock:
            self.tallies.append(tally)
        return tally

    def _walk(self, tally: Tally) -> None:
        entries = 0
        for src, dst_name in self.sources:
            parent, name = os.path.split(os.path.abspath(src))
            anchor = _Dir(parent=None, rel="", fd=os.open(parent or "/", DIR_FLAGS))
            try:
                st = os.lstat(name, dir_fd=anchor.fd)
                if stat.S_ISDIR(st.st_mode):
                    root = _Announced(anchor, name, name, "", False)
                    self._announce(anchor, ANCHOR, root, dst_name, st)
                else:
                    kind = "symlink" if stat.S_ISLNK(st.st_mode) else "file"
                    self.tree.hold(anchor)
                    self._work.put(_Batch(ANCHOR, anchor, [(name, kind)], dst_name))
                    entries += 1
            finally:
                self.tree.release(tally, anchor)
        self.control.send_control("dir_end", dir=ANCHOR, count=entries)
        pending = len(self._announced)
        while pending:
            dir_id, ok = self._next_ready()
            pending -= 1
            with self._lock:
                announced = self._announced.pop(dir_id)
            if not ok:
                self.tree.release(tally, announced.parent)
                continue
            if self.runtime.stopping:
                self.tree.release(tally, announced.parent)
                self.control.send_control("dir_end", dir=dir_id, count=0)
                continue
            pending += self._scan(tally, dir_id, announced)

    def _next_ready(self) -> tuple[int, bool]:
        deadline = time.monotonic() + self.stall
        while True:
            if self._failure is not None:
                raise self._failure
            try:
                return self._ready.get(timeout=0.2)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise PeerTimeoutError(
                        f"the destination answered no directory for {self.stall:g} s"
                    ) from None

    def _announce(
        self,
        parent: _Dir,
        parent_id: int,
        announced: _Announced,
        dst_name: str,
        st: os.stat_result,
        traverse: bool = False,
    ) -> None:
        """Send ``dir``; ``traverse``: the filters descend into it only for matches
        below, so the destination removes it at the end if it stayed empty."""
        with self._lock:
            self._ids += 1
            dir_id = self._ids
            self._announced[dir_id] = announced
        self.tree.hold(parent)
        extra = {"traverse": True} if traverse and self._filters_wire else {}
        self.control.send_control(
            "dir", id=dir_id, parent=parent_id, name=dst_name, meta=meta_of(st), **extra
        )

    def _scan(self, tally: Tally, dir_id: int, announced: _Announced) -> int:
        """Scan one ready directory; the number of subdirectories announced."""
        parent, rel = announced.parent, announced.rel
        try:
            fd = self.runtime.attempt(
                lambda: os.open(
                    announced.name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=parent.fd
                )
            )
        except OSError as exc:
            self.runtime.fail(tally, rel, "open directory", exc)
            self.control.send_control("dir_end", dir=dir_id, count=0)
            return 0
        finally:
            self.tree.release(tally, parent)
        node = _Dir(
            parent=None,
            rel=rel,
            fd=fd,
            path=announced.path,
            under_include=announced.under_include,
        )
        if self.filter.gitignore:
            ignores = parent.ignores or GitIgnores.root()
            node.ignores = ignores.with_dir(fd, announced.path)
        with self._lock:
            manifest = self._manifests.pop(dir_id, {})
        subdirs = 0
        count = 0
        batch: list[tuple[str, Kind]] = []
        excluded: list[str] = []
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    if self.runtime.throttle is not None:
                        self.runtime.throttle.take()  # returns early on a stop
                    if self.runtime.stopping:
                        break
                    path = joined(node.path, entry.name)
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                        verdict = self._verdict(node, path, is_dir)
                        if verdict is Verdict.EXCLUDE:
                            tally["skipped.dirs" if is_dir else "skipped.files"] += 1
                            excluded.append(entry.name)
                            continue
                        if is_dir:
                            st = entry.stat(follow_symlinks=False)
                            below = _Announced(
                                node,
                                entry.name,
                                node.child_rel(entry.name),
                                path,
                                node.under_include or verdict is Verdict.INCLUDE,
                            )
                            self._announce(
                                node,
                                dir_id,
                                below,
                                entry.name,
                                st,
                                traverse=verdict is Verdict.TRAVERSE,
                            )
                            subdirs += 1
                            continue
                        kind = self._kind(entry, manifest)
                    except OSError as exc:
                        self.runtime.fail(
                            tally, node.child_rel(entry.name), "stat", exc
                        )
                        continue
                    batch.append((entry.name, kind))
                    count += 1
                    if len(batch) >= BATCH_ENTRIES:
                        self._queue(tally, dir_id, node, batch)
                        batch = []
        except OSError as exc:
            self.runtime.fail(tally, rel, "read directory", exc)
        if batch:
            self._queue(tally, dir_id, node, batch)
        if self._protect:
            for start in range(0, len(excluded), EXCLUDED_PART):
                part = excluded[start : start + EXCLUDED_PART]
                self.control.send_control("dir_excluded", dir=dir_id, names=part)
        end: dict[str, Any] = {}
        if self._xattrs:
            attrs = self._meta(tally, rel, fd, os.fstat(fd)).get("xattrs")
            if attrs:
                end["xattrs"] = attrs
        self.control.send_control("dir_end", dir=dir_id, count=count, **end)
        self.tree.release(tally, node)
        return subdirs

    def _verdict(self, node: _Dir, path: str, is_dir: bool) -> Verdict | None:
        """The filters' verdict on ``path`` (``None`` when no filter is active)."""
        if not self.filter.active:
            return None
        return self.filter.decide(
            path, is_dir, under_include=node.under_include, ignores=node.ignores
        ).verdict

    def _kind(
        self, entry: os.DirEntry[str], manifest: dict[str, os.stat_result]
    ) -> Kind:
        """What to send for a non-directory entry: a ``symlink``, a ``file``, or a
        file only counted at the destination because its manifest matched it
        (``unchanged``, ``kept``)."""
        if entry.is_symlink():
            return "symlink"
        if self._specials and not entry.is_file(follow_symlinks=False):
            return "special"  # a FIFO, socket or device: recreated, never read
        there = manifest.get(entry.name)
        if there is None:
            return "file"
        st = entry.stat(follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            return "file"  # the sender finds out what it is and reports it
        action, reason = decide(
            self.settings.existing, self.settings.overwrite_compare, st, there
        )
        if action is Action.UNCHANGED and reason != "checksum":
            return "unchanged"
        if action is Action.KEEP:
            return "kept"
        return "file"  # replaced, or contents to compare: the destination decides

    def _queue(
        self, tally: Tally, dir_id: int, node: _Dir, entries: list[tuple[str, Kind]]
    ) -> None:
        self.tree.hold(node)
        while True:
            if self._failure is not None:
                self.tree.release(tally, node)
                raise self._failure
            try:
                self._work.put(_Batch(dir_id, node, entries), timeout=0.2)
                return
            except queue.Full:
                continue

    # -- the control connection ----------------------------------------------------

    def _read_control(self) -> None:
        try:
            while True:
                frame = self.control.read()
                if frame is None:
                    raise ConnectionLostError(
                        f"{self.control.peer} closed control before it finished"
                    )
                kind = frame.header.get("type")
                dir_id = frame.header.get("id")
                if frame.kind is not FrameKind.CONTROL or kind not in (
                    "dir_ready",
                    "dir_failed",
                    "dir_manifest",
                ):
                    if kind == "finished":
                        return
                    if kind == "stop" and frame.kind is FrameKind.CONTROL:
                        reason = frame.header.get("reason")
                        self.runtime.stop(f"the destination stopped: {reason}")
                        continue
                    raise ProtocolError(f"unexpected {kind or frame.kind.name}")
                with self._lock:
                    known = isinstance(dir_id, int) and dir_id in self._announced
                if not isinstance(dir_id, int) or not known:
                    raise ProtocolError(f"{kind} for unknown directory {dir_id!r}")
                if kind == "dir_manifest":
                    self._note_manifest(dir_id, frame.header.get("entries"))
                else:
                    self._ready.put((dir_id, kind == "dir_ready"))
        except (RemoteError, OSError) as exc:
            self._failure = exc

    def _note_manifest(self, dir_id: int, entries: Any) -> None:
        """Keep a part of a directory's manifest until its scan."""
        if not isinstance(entries, list):
            raise ProtocolError("dir_manifest without an entry list")
        files: dict[str, os.stat_result] = {}
        for item in entries:
            if not isinstance(item, list) or len(item) != 2:
                raise ProtocolError("dir_manifest entry is not a [name, meta] pair")
            files[check_name(item[0])] = stat_of(item[1])
        with self._lock:
            self._manifests.setdefault(dir_id, {}).update(files)

    # -- senders -------------------------------------------------------------------

    def _send_loop(self, conn: Connection) -> None:
        tally = self._new_tally()
        while True:
            batch = self._work.get()
            if batch is None:
                return
            try:
                if self._failure is None:
                    self._send_batch(tally, conn, batch)
            except (RemoteError, OSError) as exc:
                self._failure = exc
            finally:
                self.tree.release(tally, batch.node)

    def _send_batch(self, tally: Tally, conn: Connection, batch: _Batch) -> None:
        entries: list[dict[str, Any]] = []
        chunks: list[bytes] = []
        size = 0

        def flush() -> None:
            nonlocal entries, chunks, size
            if entries:
                conn.send(
                    FrameKind.FILES,
                    {"dir": batch.dir_id, "entries": entries},
                    b"".join(chunks),
                )
            entries, chunks, size = [], [], 0

        for name, kind in batch.entries:
            rel = batch.node.child_rel(name)
            sent_as = batch.rename or name
            entry: dict[str, Any]
            if self.runtime.stopping:
                entry, data = {"name": sent_as, "kind": "failed"}, b""
            elif kind == "symlink":
                entry, data = self._symlink(tally, batch.node, name, sent_as, rel)
            elif kind == "special":
                entry, data = self._special(tally, batch.node, name, sent_as, rel)
            elif kind in ("unchanged", "kept"):
                entry, data = self._matched(tally, batch.node, name, sent_as, kind)
            elif self.settings.dry_run is not None:
                entry, data = self._dry_file(tally, batch.node, name, sent_as, rel)
            else:
                opened = self._open(tally, batch.node, name, rel)
                link, first = self._claim(opened[1]) if opened else (None, True)
                if opened is None:
                    entry, data = {"name": sent_as, "kind": "failed"}, b""
                elif not first:
                    os.close(opened[0])
                    entry, data = {"name": sent_as, "kind": "hardlink"}, b""
                    entry["meta"] = meta_of(opened[1])
                    tally["copied.hardlinks"] += 1
                elif opened[1].st_size > SMALL:
                    flush()
                    self._send_large(tally, conn, batch, sent_as, rel, *opened, link)
                    continue
                else:
                    entry, data = self._read_small(tally, sent_as, rel, *opened)
                if link is not None:
                    entry["link"] = link
            if size + len(data) > FRAME_DATA:
                flush()
            entries.append(entry)
            chunks.append(data)
            size += len(data)
        flush()

    def _special(
        self, tally: Tally, node: _Dir, name: str, sent_as: str, rel: str
    ) -> tuple[dict[str, Any], bytes]:
        """A FIFO, socket or device: its metadata (and device number) only."""
        st = self._lstat(tally, node, name, rel)
        if st is None:
            return {"name": sent_as, "kind": "failed"}, b""
        if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
            changed = OSError(errno.EAGAIN, "changed type during the copy")
            self.runtime.fail(tally, rel, "stat", changed)
            return {"name": sent_as, "kind": "failed"}, b""
        return {"name": sent_as, "kind": "special", "meta": meta_of(st)}, b""

    def _lstat(
        self, tally: Tally, node: _Dir, name: str, rel: str
    ) -> os.stat_result | None:
        """An entry's ``lstat``; ``None`` (the error recorded) if it is gone."""
        try:
            return self.runtime.attempt(lambda: os.lstat(name, dir_fd=node.fd))
        except OSError as exc:
            self.runtime.fail(tally, rel, "stat", exc)
            return None

    def _dry_file(
        self, tally: Tally, node: _Dir, name: str, sent_as: str, rel: str
    ) -> tuple[dict[str, Any], bytes]:
        """A file in a dry run: its metadata (and link id), never its data."""
        st = self._lstat(tally, node, name, rel)
        if st is None:
            return {"name": sent_as, "kind": "failed"}, b""
        link, first = self._claim(st)
        entry: dict[str, Any] = {
            "name": sent_as,
            "kind": "file" if first else "hardlink",
            "meta": meta_of(st),
        }
        if link is not None:
            entry["link"] = link
        return entry, b""

    def _matched(
        self, tally: Tally, node: _Dir, name: str, sent_as: str, kind: Kind
    ) -> tuple[dict[str, Any], bytes]:
        """A file the destination's manifest matched: its name and kind, no data (and
        its link id, if later names of its inode link to it)."""
        entry: dict[str, Any] = {"name": sent_as, "kind": kind}
        try:
            st = os.lstat(name, dir_fd=node.fd)
        except OSError:
            st = None  # gone since the scan: the destination keeps what it has
        if st is not None:
            link, first = self._claim(st)
            if link is not None:
                entry["link"] = link
                if not first:  # a later name: link it like any other
                    entry["kind"] = "hardlink"
                    entry["meta"] = meta_of(st)
        tally["unchanged.files" if kind == "unchanged" else "skipped.files"] += 1
        return entry, b""

    def _claim(self, st: os.stat_result) -> tuple[int | None, bool]:
        """``(link id, first name)`` of a regular file's or symlink's inode:
        ``(None, True)`` when it has one name (or the destination cannot link)."""
        if st.st_nlink < 2 or not self._hard_links:
            return None, True
        key = (st.st_dev, st.st_ino)
        with self._lock:
            known = self._links.get(key)
            if known is None:
                self._link_ids += 1
                self._links[key] = [self._link_ids, st.st_nlink - 1]
                return self._link_ids, True
            known[1] -= 1
            if known[1] <= 0:
                del self._links[key]
            return known[0], False

    def _symlink(
        self, tally: Tally, node: _Dir, name: str, sent_as: str, rel: str
    ) -> tuple[dict[str, Any], bytes]:
        """A symlink: its target and metadata, or, for a later name of a symlink
        with several, a ``hardlink`` entry (see :meth:`_claim`)."""
        try:
            st, target = self.runtime.attempt(
                lambda: (
                    os.lstat(name, dir_fd=node.fd),
                    os.readlink(name, dir_fd=node.fd),
                )
            )
        except OSError as exc:
            self.runtime.fail(tally, rel, "read symlink", exc)
            return {"name": sent_as, "kind": "failed"}, b""
        meta = meta_of(st)
        linked = st.st_nlink > 1 and self._symlink_links
        link, first = self._claim(st) if linked else (None, True)
        entry: dict[str, Any]
        if not first:
            tally["copied.hardlinks"] += 1
            entry = {"name": sent_as, "kind": "hardlink", "meta": meta}
        else:
            tally["copied.symlinks"] += 1
            entry = {"name": sent_as, "kind": "symlink", "meta": meta, "target": target}
        if link is not None:
            entry["link"] = link
        return entry, b""

    def _open(
        self, tally: Tally, node: _Dir, name: str, rel: str
    ) -> tuple[int, os.stat_result] | None:
        """Open a regular file for reading; ``None`` (error recorded) otherwise."""
        try:
            fd = self.runtime.attempt(lambda: os.open(name, READ_FLAGS, dir_fd=node.fd))
        except OSError as exc:
            self.runtime.fail(tally, rel, "open", exc)
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                # Replaced since the scan, or a special file for a destination older
                # than 1.4, which cannot make one.
                raise OSError(errno.EOPNOTSUPP, "not a regular file")
        except OSError as exc:
            os.close(fd)
            self.runtime.fail(tally, rel, "open", exc)
            return None
        return fd, st

    def _meta(
        self, tally: Tally, rel: str, fd: int, st: os.stat_result
    ) -> dict[str, Any]:
        """An open entry's metadata for the wire, with the extended attributes (and
        ACLs) the copy keeps; attributes that cannot be read are an error of the
        entry, which travels without them."""
        meta: dict[str, Any] = meta_of(st)
        if self._xattrs:
            try:
                attrs = self._metadata.read_xattrs(fd)
            except OSError as exc:
                self.runtime.fail(tally, rel, "read extended attributes", exc)
                attrs = {}
            if attrs:
                meta["xattrs"] = xattrs_to_wire(attrs)
        return meta

    def _read_small(
        self, tally: Tally, sent_as: str, rel: str, fd: int, st: os.stat_result
    ) -> tuple[dict[str, Any], bytes]:
        try:
            data = _read_all(fd, st.st_size)
            meta = self._meta(tally, rel, fd, st)
        except OSError as exc:
            self.runtime.fail(tally, rel, "read", exc)
            return {"name": sent_as, "kind": "failed"}, b""
        finally:
            os.close(fd)
        meta["size"] = len(data)
        tally["copied.files"] += 1
        tally["copied.bytes"] += len(data)
        return {"name": sent_as, "kind": "file", "meta": meta}, data

    def _send_large(
        self,
        tally: Tally,
        conn: Connection,
        batch: _Batch,
        sent_as: str,
        rel: str,
        fd: int,
        st: os.stat_result,
        link: int | None,
    ) -> None:
        """One large file as ``CHUNK`` frames; the last one says how it ended."""
        base: dict[str, Any] = {"dir": batch.dir_id, "name": sent_as}
        first = True
        meta = self._meta(tally, rel, fd, st)

        def header(offset: int, **end: Any) -> dict[str, Any]:
            nonlocal first
            fields = {**base, "offset": offset, "first": first, **end}
            if first:
                fields["meta"] = meta
                if link is not None:
                    fields["link"] = link
            first = False
            return fields

        try:
            for offset, length in data_extents(fd, st.st_size):
                end = offset + length
                while offset < end:
                    size = min(end - offset, FRAME_DATA)
                    got = conn.send_file(
                        FrameKind.CHUNK, header(offset), fd, offset, size
                    )
                    if got < size:
                        raise OSError(errno.EIO, "file shrank while being sent")
                    offset += size
        except RemoteError:
            raise
        except OSError as exc:
            self.runtime.fail(tally, rel, "read", exc)
            conn.send(FrameKind.CHUNK, header(0, last=True, failed=str(exc)))
            return
        finally:
            os.close(fd)
        conn.send(FrameKind.CHUNK, header(st.st_size, last=True))
        tally["copied.files"] += 1
        tally["copied.bytes"] += st.st_size


def _read_all(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes from the start (fewer if the file shrank)."""
    parts = []
    got = 0
    while got < size:
        data = os.read(fd, size - got)
        if not data:
            break
        parts.append(data)
        got += len(data)
    return b"".join(parts)
