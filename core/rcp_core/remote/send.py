"""The source role: walks the source tree and sends it to a destination.

Over 400 lines because it is one class, the source role, whose walk, directory
announcements and senders share its state (the directories in flight, the queue of
batches, the failure); its separable parts are modules of their own (a batch as
frames, :mod:`rcp_core.remote.sendbatch`; a large file,
:mod:`rcp_core.remote.sendlarge`; the control connection's answers,
:mod:`rcp_core.remote.sendcontrol`; late data connections,
:mod:`rcp_core.remote.latedata`).

One *walker* (the caller's thread) and one *sender* thread per data connection (a
destination's writer processes add connections while it runs, protocol 1.15:
:meth:`Sender.add_data`):

- The walker announces every directory with ``dir`` on the control connection and
  scans it only once the destination answered ``dir_ready`` (a directory that could
  not be made is answered ``dir_failed``: its subtree is not read). Scanning a
  directory announces its subdirectories, queues its files in batches and ends with
  ``dir_end`` and the number of entries queued, so the destination can finish the
  directory when that many arrived.
- Senders take batches from a bounded queue (the walk never runs far ahead of the
  network: :mod:`rcp_core.remote.sendwork`) and send them as frames
  (:mod:`rcp_core.remote.sendbatch`: small files together, large ones as chunks with
  their holes kept, an unreadable entry as ``failed``, a file or symlink with several
  names read once). A sender that meets a large file hands the rest of its batch
  back for the others; a large file with 128 MiB or more to send is split (protocol
  1.16, :mod:`rcp_core.remote.sendlarge`) over the connections of its sender's
  group, those of the destination process that writes it (0: the destination's
  own; a writer process's number, which its late connections say).
- Filters (``--include``/``--exclude``/``--gitignore``) are applied here, as a local
  copy applies them: an excluded entry is not sent (under ``--delete`` its name is,
  in ``dir_excluded``, so the destination keeps it), a directory the filters only
  traverse is announced with ``traverse`` (removed there if it stays empty).
- Entries run under :class:`~rcp_core.remote.roleruntime.RoleRun`: transient errors of
  reads are retried, errors are classified by this host's site plugins, the walk takes
  one ``ops_throttle`` token per entry, and once the run stops (a fatal error, any
  error under ``fail_early``, or the destination's ``stop``, protocol 1.10) nothing
  more is read: directories not yet scanned end with a count of 0, queued entries go
  as ``failed``.
- A file the destination's manifest of an existing directory (``dir_manifest``:
  :mod:`rcp_core.remote.sendcontrol`) matches goes as ``unchanged`` or ``kept``,
  without data (:meth:`~rcp_core.remote.sendbatch.BatchSender.kind`).
- Under ``--partial`` (protocol 1.14) the walk waits, before it sends any file,
  for the destination to describe the partials of its anchor (directory 0); a large
  file the destination holds a partial of goes from the prefix the sender verified
  (:mod:`rcp_core.engine.partials`).

Invariant: a directory's descriptor stays open until its last batch is sent.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rcp_core.engine.filters import Filter, GitIgnores, Verdict
from rcp_core.engine.tree import DIR_FLAGS, Lifecycle, Node, joined
from rcp_core.errors import PeerTimeoutError, RemoteError
from rcp_core.remote.connection import Connection
from rcp_core.remote.hello import FILTERS, RESUME, SPLIT
from rcp_core.remote.meta import OwnerNames, maps_owners, meta_of
from rcp_core.remote.receivedtree import ANCHOR
from rcp_core.remote.roleruntime import RoleRun
from rcp_core.remote.sendbatch import Batch, BatchSender, Kind
from rcp_core.remote.sendcontrol import Answers
from rcp_core.remote.sendlarge import Lane, OutgoingPart, send_part
from rcp_core.remote.sendwork import Work
from rcp_core.run.summary import Tally, merge
from rcp_core.settings import CopySettings

log = logging.getLogger("rcp_core")

BATCH_ENTRIES = 256
EXCLUDED_PART = 4096
"""Names per ``dir_excluded`` message."""
QUEUE_DEPTH = 64


@dataclass(slots=True, eq=False)
class SourceDir(Node["SourceDir"]):
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


def _close(tally: Tally, node: SourceDir) -> None:
    """A directory's finish: its descriptor closes."""
    os.close(node.fd)


@dataclass(frozen=True, slots=True)
class _Announced:
    """A directory announced to the destination, scanned once it is ready there."""

    parent: SourceDir
    name: str
    rel: str
    path: str
    under_include: bool


class Sender:
    """Sends sources (each a directory or a single entry) under their destination
    names, all into the destination's directory 0.

    :param sources: ``(path, name at the destination)`` pairs.

    :param control: the control connection to the destination (its reader is ours).
    :param data: the data connections; one sender thread each (more may join:
        :meth:`add_data`).
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
        self.names = OwnerNames() if maps_owners(settings) else None
        """Names each directory's owner on the wire (owners kept by name)."""
        self.sources = list(sources)
        self.runtime = runtime or RoleRun(settings, self.sources[0][0], source=True)
        self.control = control
        self.data = data
        self.tallies: list[Tally] = []
        self.errors = self.runtime.errors
        self._lock = threading.Lock()
        self.tree: Lifecycle[SourceDir] = Lifecycle(_close)
        self._ids = 0
        self._announced: dict[int, _Announced] = {}
        self.filter = Filter.build(
            includes=settings.includes,
            excludes=settings.excludes,
            filter_file=settings.filter_file,
            gitignore=settings.gitignore,
        )
        self._filters_wire = control.version >= FILTERS
        self.batches = BatchSender(settings, self.runtime, control.version)
        self._protect = (
            settings.delete and not settings.delete_excluded and self._filters_wire
        )
        self.answers = Answers(
            control,
            self.runtime,
            self._is_announced,
            settings.resume and settings.dry_run is None and control.version >= RESUME,
        )
        self._work = Work(QUEUE_DEPTH)
        self._split = control.version >= SPLIT
        self._widths: dict[int, int] = {}
        """Connections per group (0: the destination's own; 1 and on: its writer
        processes'; below 0: a late connection of a destination older than 1.16)."""
        self._failure: BaseException | None = None
        self._senders: list[threading.Thread] = []
        self._running = False
        self._waiting: list[tuple[Connection, int | None]] = [
            (conn, 0) for conn in data
        ]
        """Connections whose sender :meth:`run` starts, with their groups."""
        self._drained = False
        """Every sender has ended: no more are added."""

    # -- the walk ----------------------------------------------------------------

    def run(self) -> dict[str, int]:
        """Send everything; the source side's counts. Raises what broke the transfer."""
        tally = self._new_tally()
        with self._lock:
            self._running = True
            for conn, group in self._waiting:
                self._start_sender(conn, group)
            self._waiting = []
        reader = threading.Thread(target=self._read_answers, daemon=True)
        reader.start()
        try:
            self._walk(tally)
        finally:
            self._work.end()
            self._join_senders()
            for part in self._work.leftover_parts():
                part.file.abandon()
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

    def add_data(self, conn: Connection, group: int | None) -> bool:
        """A data connection the destination added while the copy runs (its writer
        processes', protocol 1.15; ``group``: the writer's number, 1.16): one more
        sender takes batches for it, until the walk has ended and every batch is
        sent. ``False`` once every sender has ended (the caller closes it)."""
        with self._lock:
            if self._drained:
                return False
            self.data.append(conn)
            if not self._running:  # run() starts it with the others
                self._waiting.append((conn, group))
                return True
            self._start_sender(conn, group)
        return True

    def _join_senders(self) -> None:
        """Wait for every sender, those that join meanwhile too."""
        joined = 0
        while True:
            with self._lock:
                left = self._senders[joined:]
                if not left:
                    self._drained = True
                    return
            for thread in left:
                thread.join()
            joined += len(left)

    def _start_sender(self, conn: Connection, group: int | None) -> None:
        """A sender thread for ``conn``, one of the connections of ``group`` (a
        group of its own when ``None``). Called under the lock."""
        if group is None:
            group = -1 - len(self._widths)
        self._widths[group] = self._widths.get(group, 0) + 1
        lane = Lane(
            functools.partial(self._width, group),
            lambda parts: self._work.share(group, parts),
            self._hand_back,
        )
        thread = threading.Thread(
            target=self._send_loop, args=(conn, group, lane), daemon=True
        )
        self._senders.append(thread)
        thread.start()

    def _new_tally(self) -> Tally:
        tally = Tally()
        with self._lock:
            self.tallies.append(tally)
        return tally

    def _walk(self, tally: Tally) -> None:
        entries = 0
        partials = self.answers.anchor_partials(self.stall, self._failed)
        for src, dst_name in self.sources:
            parent, name = os.path.split(os.path.abspath(src))
            anchor = SourceDir(
                parent=None, rel="", fd=os.open(parent or "/", DIR_FLAGS)
            )
            try:
                st = os.lstat(name, dir_fd=anchor.fd)
                if stat.S_ISDIR(st.st_mode):
                    root = _Announced(anchor, name, name, "", False)
                    self._announce(anchor, ANCHOR, root, dst_name, st)
                else:
                    kind = "symlink" if stat.S_ISLNK(st.st_mode) else "file"
                    self._queue(
                        tally, Batch(ANCHOR, anchor, [(name, kind)], dst_name, partials)
                    )
                    entries += 1
            finally:
                self.tree.release(tally, anchor)
        self.control.send_control("dir_end", dir=ANCHOR, count=entries)
        pending = len(self._announced)
        while pending:
            dir_id, ok = self.answers.next_ready(self.stall, self._failed)
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

    def _announce(
        self,
        parent: SourceDir,
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
            "dir",
            id=dir_id,
            parent=parent_id,
            name=dst_name,
            meta=meta_of(st, self.names),
            **extra,
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
        node = SourceDir(
            parent=None,
            rel=rel,
            fd=fd,
            path=announced.path,
            under_include=announced.under_include,
        )
        if self.filter.gitignore:
            ignores = parent.ignores or GitIgnores.root()
            node.ignores = ignores.with_dir(fd, announced.path)
        manifest = self.answers.manifest(dir_id)
        partials = self.answers.partials(dir_id)
        kind_of = self.batches.kind
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
                        kind = kind_of(entry, manifest)
                    except OSError as exc:
                        self.runtime.fail(
                            tally, node.child_rel(entry.name), "stat", exc
                        )
                        continue
                    batch.append((entry.name, kind))
                    count += 1
                    if len(batch) >= BATCH_ENTRIES:
                        self._queue(tally, Batch(dir_id, node, batch, None, partials))
                        batch = []
        except OSError as exc:
            self.runtime.fail(tally, rel, "read directory", exc)
        if batch:
            self._queue(tally, Batch(dir_id, node, batch, None, partials))
        if self._protect:
            for start in range(0, len(excluded), EXCLUDED_PART):
                part = excluded[start : start + EXCLUDED_PART]
                self.control.send_control("dir_excluded", dir=dir_id, names=part)
        end: dict[str, Any] = {}
        if self.batches.xattrs:
            attrs = self.batches.meta(tally, rel, fd, os.fstat(fd)).get("xattrs")
            if attrs:
                end["xattrs"] = attrs
        self.control.send_control("dir_end", dir=dir_id, count=count, **end)
        self.tree.release(tally, node)
        return subdirs

    def _verdict(self, node: SourceDir, path: str, is_dir: bool) -> Verdict | None:
        """The filters' verdict on ``path`` (``None`` when no filter is active)."""
        if not self.filter.active:
            return None
        return self.filter.decide(
            path, is_dir, under_include=node.under_include, ignores=node.ignores
        ).verdict

    def _queue(self, tally: Tally, batch: Batch) -> None:
        self.tree.hold(batch.node)
        while True:
            if self._failure is not None:
                self.tree.release(tally, batch.node)
                raise self._failure
            if self._work.put(batch, timeout=0.2):
                return

    # -- the control connection ----------------------------------------------------

    def _read_answers(self) -> None:
        try:
            self.answers.read()
        except (RemoteError, OSError) as exc:
            self._failure = exc

    def _failed(self) -> BaseException | None:
        return self._failure

    def _is_announced(self, dir_id: int) -> bool:
        with self._lock:
            return dir_id in self._announced

    # -- senders -------------------------------------------------------------------

    def _width(self, group: int) -> int:
        """The connections a file a sender of ``group`` splits may use: its group's,
        counting those still to attach (a writer dials as many as its destination:
        a part queued for one that never comes waits for its splitter)."""
        if not self._split:
            return 1
        with self._lock:
            return max(self._widths[group], self._widths[0] if group > 0 else 0)

    def _hand_back(self, batch: Batch) -> None:
        self.tree.hold(batch.node)
        self._work.hand_back(batch)

    def _send_loop(self, conn: Connection, group: int, lane: Lane) -> None:
        tally = self._new_tally()
        while True:
            item = self._work.take(group)
            if item is None:
                return
            if isinstance(item, OutgoingPart):
                self._send_part(tally, conn, item)
                continue
            try:
                if self._failure is None:
                    self.batches.send(tally, conn, item, lane)
            except (RemoteError, OSError) as exc:
                self._failure = exc
            finally:
                self.tree.release(tally, item.node)
                self._work.sent()

    def _send_part(self, tally: Tally, conn: Connection, part: OutgoingPart) -> None:
        """A part of a split file (protocol 1.16), abandoned once the transfer
        failed."""
        if self._failure is not None:
            part.file.abandon()
            return
        try:
            send_part(conn, self.runtime, tally, part)
        except (RemoteError, OSError) as exc:
            self._failure = exc
