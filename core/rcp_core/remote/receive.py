"""The destination role: writes what a source sends, with the local copy's rules.

Directories arrive as ``dir`` messages (created ``0700``, or reused), entries in
``FILES`` frames (small files with their bytes, symlinks, entries the source could
not read), large files as runs of ``CHUNK`` frames on one connection, or from
protocol 1.16 split in parts over several (one :class:`~rcp_core.remote.incoming.Incoming`
that every part writes into: :meth:`Receiver.chunk`). Several connections deliver at
once, so every method is thread-safe.

Over 400 lines because it is one class, the destination role, whose steps the dry
run (:class:`rcp_core.remote.dry.DryReceiver`) overrides one by one; its separable
parts are modules of their own (the tree as it arrives,
:mod:`rcp_core.remote.receivedtree`; the hard-link account,
:mod:`rcp_core.remote.hardlinks`; the writers, :mod:`rcp_core.remote.writepool`).

A ``FILES`` frame is checked whole on its connection's thread (names, kinds, sizes,
the directory's count, a hard link's first name); its entries are then written, on a
shared storage, by the destination's work pool
(:mod:`rcp_core.remote.writepool`: a local copy's workers and adaptive concurrency, a
bound on the frames in flight), elsewhere on the connection's thread
(:meth:`Receiver._write_pool` says why), each counted into its directory only once
written. A dry run writes nothing, so its entries are decided on
the connection's thread, in order.

The same invariants as a local copy (:mod:`rcp_core.engine.entries`):

- a new file is created ``0600`` with ``O_EXCL`` and gets its mode and times only after
  its last byte, so an interrupted file never looks finished; one that fails is
  removed;
- an existing entry is replaced only under ``--overwrite``/``--update`` and only by a
  rename of the finished copy over it;
- a directory gets its metadata after every entry and subdirectory in it is done:
  the source says how many entries it sent (``dir_end``), and the directory finishes
  when that many arrived and its subdirectories finished (post-order);
- names are single path components (no ``/``, ``.``, ``..``, NUL:
  :mod:`rcp_core.remote.receivedtree`), and everything is
  created relative to an open directory descriptor with ``O_NOFOLLOW``: a peer cannot
  make the destination write outside its root;
- hard links (:mod:`rcp_core.remote.hardlinks`): a file or symlink entry with a
  ``link`` id is the inode's first name; a ``hardlink`` entry with that id becomes a
  link to where the first name was written, as soon as it is in place (it may arrive
  first, on another connection: it then waits, and its directory is not finished
  before it is linked). If the first name could not be written, every other name of
  the inode is an error;
- ``--delete``: a directory that existed is pruned after its entries, of every name
  the source did not send, except names its filters excluded (unless
  ``--delete-excluded``); a directory the filters only traverse is removed if it
  stayed empty;
- resumes (``--partial``, protocol 1.14): the destination describes the partials a
  cut-off run left in each existing directory, its anchor first
  (:meth:`Receiver.partials`), the source verifies each prefix against its file and
  sends only the rest (:mod:`rcp_core.engine.partials`); a large file is written
  under its partial name, which a failure leaves in place;
- manifests: under ``--overwrite``, ``--update`` or ``--ignore-existing`` the
  destination lists the regular files an existing directory already holds
  (:meth:`Receiver.manifest`), and the source sends the ones that match as
  ``unchanged`` or ``kept`` entries without data, which are only counted here;
- writer processes (protocol 1.15, :mod:`rcp_core.remote.writers`): frames that
  arrive on a writer's own connections are checked and written there, by a
  :class:`~rcp_core.remote.writerprocess.WriterReceiver` (this class, its accounting
  sent here), and applied here by :meth:`Receiver.wrote`; every directory is handed
  to the writers before its ``dir_ready`` (:meth:`Receiver.ready`), and finished
  here only;
- entries run under :class:`~rcp_core.remote.roleruntime.RoleRun`: a write failing with a
  transient error is tried again (a small file's, a symlink's, a special file's, a
  directory's, a hard link's; a large file's chunks are written once: it fails, and a
  rerun copies it), errors are classified by this host's site plugins, a site's
  ``rcp_pre_create`` prepares each new file, and once the run stops (a fatal error,
  or any under ``fail_early``) nothing more is written: the source is told
  (``stop``, protocol 1.10) and what still arrives is only counted off.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import stat
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from rcp_core.engine import destination
from rcp_core.engine.destination import (
    Plan,
    Step,
    commit,
    extraneous,
    make_hard_link,
    make_special,
    make_symlink,
    plan_dir,
    plan_link,
)
from rcp_core.engine.entries import create_file
from rcp_core.engine.filters import Filter, Verdict
from rcp_core.engine.links import located
from rcp_core.engine.metadata import Metadata, Remap
from rcp_core.engine.partials import Prefix, describe, open_partial
from rcp_core.engine.removeentry import Protect, remove_entry
from rcp_core.engine.temporaries import partial_stands_for, sweep
from rcp_core.engine.tree import DIR_FLAGS, UNCOUNTED, Lifecycle
from rcp_core.errors import ProtocolError, UnsafeNameError
from rcp_core.names import check_link_target
from rcp_core.remote.hardlinks import Link, LinkTable
from rcp_core.remote.hello import MAX_PARTS
from rcp_core.remote.incoming import Incoming, Part
from rcp_core.remote.meta import (
    OwnerIds,
    maps_owners,
    meta_of,
    stat_of,
    xattrs_of,
)
from rcp_core.remote.receivedtree import (
    ANCHOR,
    ReceivedDir,
    check_name,
    kind_of,
    link_id,
)
from rcp_core.remote.roleruntime import RoleRun
from rcp_core.remote.writepool import WritePool
from rcp_core.run.summary import Tally, ThreadTallies
from rcp_core.settings import CopySettings, ExistingPolicy
from rcp_core.site.capacity import choose_concurrency, open_files_budget
from rcp_core.site.storage import StorageInfo

if TYPE_CHECKING:
    from rcp_core.remote.writerchannel import Wrote
    from rcp_core.remote.writerhandle import Writer

# With the names of rcp_core.remote.receivedtree that other modules import from here.
log = logging.getLogger("rcp_core")

MANIFEST_PART = 2048
"""Files per ``dir_manifest`` message (about 300 KiB of JSON)."""
PARTIALS_PART = 32
"""Partials per ``dir_partials`` message (at most about 2.2 MiB of JSON)."""
CLOSE_WAIT = 30.0
"""Seconds :meth:`Receiver.close` waits for the writes still in flight."""


def _in_parts(items: Iterator[list[Any]], size: int) -> Iterator[list[list[Any]]]:
    """``items`` in lists of at most ``size`` (the messages of a directory's report)."""
    part: list[list[Any]] = []
    for item in items:
        part.append(item)
        if len(part) >= size:
            yield part
            part = []
    if part:
        yield part


def _regular_files(node: ReceivedDir) -> Iterator[list[Any]]:
    """The regular files in ``node``: ``[name, meta]`` (none if it cannot be read)."""
    try:
        with os.scandir(node.fd) as entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # gone: the entry is then sent and written
                if stat.S_ISREG(st.st_mode):
                    yield [entry.name, meta_of(st)]
    except OSError as exc:
        log.debug("%s: no manifest: %s", node.rel or ".", exc)


class Receiver:
    """Writes one copy into ``parent_fd`` (the destination root's parent directory).

    :param settings: the copy's settings (existing-entry policy, preserve).
    :param parent_fd: open directory that receives the root entry; owned by the
        receiver from now on (closed when the copy ends).
    :param runtime: the role's run state (its host's plugins, retries, the stop).
    :param connections: the data connections frames arrive on; the writers never
        drop below as many (each connection wrote its own frames before the pool),
        the storage's maximum aside.
    """

    def __init__(
        self,
        settings: CopySettings,
        parent_fd: int,
        umask: int,
        runtime: RoleRun,
        connections: int = 1,
    ) -> None:
        self.settings = settings
        self.connections = connections
        self.runtime = runtime
        self.metadata = Metadata(settings.preserve, umask, Remap.of(settings))
        self.owners = OwnerIds() if maps_owners(settings) else None
        """The ids here of the owners' names the source sends."""
        self.counters = ThreadTallies()
        """One tally per thread that wrote (each thread is the only writer of its own)."""
        self.errors = runtime.errors
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._dirs: dict[int, ReceivedDir] = {
            ANCHOR: ReceivedDir(
                parent=None,
                rel="",
                pending=UNCOUNTED,
                id=ANCHOR,
                fd=parent_fd,
                name="",
                st=None,
                fresh=False,
                created=False,
                ready=True,
            )
        }
        self._anchor_fd = parent_fd
        self._described: dict[tuple[int, str], Prefix] = {}
        """(directory id, name) -> the partial described to the source."""
        # The destination knows no .gitignore of the source: its filter decides only
        # for what --delete finds below names the source never sent.
        self.filter = Filter.build(
            includes=settings.includes,
            excludes=settings.excludes,
            filter_file=settings.filter_file,
        )
        self.tree: Lifecycle[ReceivedDir] = Lifecycle(self._finish)
        self._links: LinkTable[ReceivedDir] = LinkTable()
        self._sharing = threading.Lock()
        """Orders what the writer processes learn of the directories."""
        self._shared_with: list[Writer] = []
        self._splitting = threading.Lock()
        self._split: dict[tuple[int, str], Incoming] = {}
        """(directory id, name) -> a split file some of whose parts still arrive."""
        self._writers = self._write_pool()
        """Writes the entries of ``FILES`` frames (``None``: their connections do)."""

    def _write_pool(self) -> WritePool | None:
        """The workers that write ``FILES`` frames' entries, with a local copy's
        bounds for this storage (:func:`rcp_core.site.capacity.choose_concurrency`),
        where more writers than data connections pay: on a shared storage (network,
        parallel or FUSE filesystems, whose every operation waits on a server).
        ``None`` elsewhere: on a local disk (or one not detected) each connection
        writes its own frames.

        Measured (benchmarks/results/compare-s20-pool, two hosts): onto a 0.5 ms
        FUSE destination the pool copied 400 x 1 KiB and 50 x 1 MiB 1.34x faster
        than the connections alone; onto ext4 it was 1.06x (500 x 1 MiB), 1.12x
        (50k x 1 KiB) and 1.25x (the Linux tree) slower, the hand-over between
        threads costing more than a local disk's writes gain from more of them."""
        storage = self.runtime.storage or StorageInfo("unknown")
        if not storage.shared:
            return None
        concurrency = choose_concurrency(
            self.runtime.hook,
            [(storage, storage)],
            self.settings,
            open_files_budget(self.settings),
        )
        floor = max(concurrency.minimum, min(concurrency.maximum, self.connections))
        concurrency = dataclasses.replace(
            concurrency, minimum=floor, initial=max(concurrency.initial, floor)
        )
        return WritePool(concurrency, self.counters)

    def check(self) -> None:
        """Raise what a write in the pool raised besides an entry error (a peer's
        protocol error found while writing, or a defect): the transfer fails."""
        if self._writers is not None:
            self._writers.check()

    # -- bookkeeping -------------------------------------------------------------

    @property
    def tally(self) -> Tally:
        """The calling thread's counters."""
        return self.counters.mine()

    def counts(self) -> dict[str, int]:
        """Every thread's counters, summed."""
        return self.counters.merged()

    def _dir(self, dir_id: Any) -> ReceivedDir:
        with self._lock:
            node = self._dirs.get(dir_id) if isinstance(dir_id, int) else None
        if node is None:
            raise ProtocolError(f"unknown directory id {dir_id!r}")
        return node

    def _fail(self, rel: str, op: str, exc: OSError) -> None:
        self.runtime.fail(self.tally, rel, op, exc)

    def _guarded(
        self, node: ReceivedDir, rel: str, op: str, write: Callable[[], None]
    ) -> bool:
        """``write()``, tried again on transient errors; a failure is recorded and
        marks ``node`` failed. Whether it succeeded."""
        try:
            self.runtime.attempt(write)
        except OSError as exc:
            self._fail(rel, op, exc)
            with self._lock:
                node.incomplete = True
            return False
        return True

    def _stopped(self, node: ReceivedDir) -> bool:
        """Whether the run stopped: nothing more is written (``node`` then counts
        as failed, so its directory keeps what it had: no prune, no metadata)."""
        if not self.runtime.stopping:
            return False
        with self._lock:
            node.incomplete = True
        return True

    def _count(self, node: ReceivedDir, n: int = 1) -> None:
        """``n`` entries of ``node`` arrived and are done; finish it if that was the
        last."""
        self._arrived(node, n)
        self._done(node, n)

    def _arrived(self, node: ReceivedDir, n: int) -> None:
        """``n`` entries of ``node`` arrived (checked against ``dir_end``'s count as
        they arrive, on their connection's thread, before anything of them is done)."""
        with self._lock:
            node.received += n
            if node.expected is not None and node.received > node.expected:
                raise ProtocolError(
                    f"more entries than the {node.expected} counted in {node.rel!r}"
                )

    def _done(self, node: ReceivedDir, n: int = 1) -> None:
        """``n`` entries of ``node`` that arrived are done (written, failed, or
        skipped): finish it if they were the last."""
        if n:
            self.tree.release(self.tally, node, n)

    def _finish(self, tally: Tally, node: ReceivedDir) -> None:
        """Post-order end of a directory: the one finish of a destination directory
        (:func:`rcp_core.engine.destination.finish_dir`, as a local copy's), unless
        the run stopped; then forget it."""
        parent = node.parent
        try:
            if (
                parent is not None  # not the anchor
                and node.st is not None
                and not self.runtime.stopping
                and destination.finish_dir(
                    self.settings,
                    tally,
                    node,
                    self,
                    lambda op, step: self._guarded(node, node.rel, op, step),
                )
            ):
                parent.has_content = True
        except OSError as exc:
            self._fail(node.rel, "finish directory", exc)
            node.incomplete = True
        finally:
            with self._sharing:
                with self._lock:
                    del self._dirs[node.id]  # memory follows the directories in flight
                for writer in self._shared_with:
                    writer.closed(node.id)
            self._release(node)
            if parent is None:
                self.done.set()

    # -- the steps of a directory's finish (destination.FinishSteps) ----------------

    def remove_empty(self, tally: Tally, node: ReceivedDir) -> None:
        assert node.parent is not None
        os.rmdir(node.name, dir_fd=node.parent.fd)

    def clear_leftovers(self, tally: Tally, node: ReceivedDir) -> None:
        for name in sweep(
            node.fd,
            (node.names or set()).__contains__,
            keep_partials=self.settings.resume and node.incomplete,
        ):
            tally["removed.files"] += 1
            log.info("removed %r, left by an interrupted run", node.child_rel(name))

    def prune(self, tally: Tally, node: ReceivedDir) -> None:
        """``--delete``: remove what the source did not send (:meth:`_extraneous`)."""
        for entry, path, protect in self._extraneous(node):
            remove_entry(
                node.fd,
                entry.name,
                entry.stat(follow_symlinks=False),
                tally,
                rel=path,
                protect=protect,
            )

    def set_meta(self, tally: Tally, node: ReceivedDir) -> None:
        assert node.st is not None
        self.metadata.apply(node.xattrs, node.fd, node.st, is_dir=True, times=True)

    def _release(self, node: ReceivedDir) -> None:
        """Close a finished (or abandoned) directory's descriptor."""
        os.close(node.fd)

    def _extraneous(
        self, node: ReceivedDir
    ) -> Iterator[tuple[os.DirEntry[str], str, Protect | None]]:
        """The entries of ``node`` the source did not send, with their filter paths
        and what protects entries below them. Names the source's filters excluded
        stay unless ``--delete-excluded``, and so do excluded entries below a
        removed directory (which then stays, holding them)."""
        filtering = self.filter.active and not self.settings.delete_excluded

        def excluded(path: str, is_dir: bool) -> bool:
            decision = self.filter.decide(
                path, is_dir, under_include=node.under_include, ignores=None
            )
            return decision.verdict is Verdict.EXCLUDE

        names = node.names or set()

        def keeps(name: str, is_dir: bool) -> bool:
            return (
                name in names
                or name in node.protected
                or (filtering and excluded(node.child_path(name), is_dir))
            )

        for entry in extraneous(node.fd, keeps):
            yield entry, node.child_path(entry.name), excluded if filtering else None

    def exclude(self, dir_id: Any, names: Any) -> None:
        """``dir_excluded``: names in a directory that the source's filters left out
        (``--delete`` keeps them)."""
        node = self._dir(dir_id)
        if not isinstance(names, list):
            raise ProtocolError("dir_excluded without a name list")
        checked = {check_name(name) for name in names}
        with self._lock:
            node.protected |= checked

    def close(self, timeout: float = CLOSE_WAIT) -> None:
        """Wait for the writes in flight (at most ``timeout`` seconds), then close
        what an ended or broken transfer left open (nothing, if it finished). A
        directory that writes may still use stays open: its descriptor must not be
        reused under them."""
        drained = self._writers is None or self._writers.close(timeout)
        with self._lock:
            left, self._dirs = list(self._dirs.values()), {}
        if not drained:
            log.warning(
                "%d directories left open under writes still running", len(left)
            )
            return
        self.drop_arrivals()
        for node in left:
            self._release(node)

    # -- writer processes (rcp_core.remote.writers) ----------------------------------

    def ready(self, dir_id: int) -> None:
        """Directory ``dir_id`` is ready for its entries (its ``dir_ready`` goes
        next): the writer processes learn it first, so it is known wherever its
        entries arrive."""
        node = self._dir(dir_id)
        with self._sharing:
            node.ready = True
            if self._shared_with:
                described = self._described_in(node)
                for writer in self._shared_with:
                    writer.opened(node, described)

    def share(self, writer: Writer) -> None:
        """A writer process joins: it learns every directory ready now, then each
        as it becomes ready (:meth:`ready`) and as it is finished; each exactly once."""
        with self._sharing:
            with self._lock:
                ready = [node for node in self._dirs.values() if node.ready]
            for node in ready:
                writer.opened(node, self._described_in(node))
            self._shared_with.append(writer)

    def _described_in(self, node: ReceivedDir) -> dict[str, Prefix]:
        """The partials of ``node`` described to the source and not yet used."""
        with self._lock:
            return {
                name: prefix
                for (dir_id, name), prefix in self._described.items()
                if dir_id == node.id
            }

    def wrote(self, report: Wrote) -> None:
        """A writer process's account of entries of one directory, applied as if
        they had been written here: names seen, arrivals checked against
        ``dir_end``, hard links made, then the entries counted done."""
        node = self._dir(report.dir)
        for name in report.names:  # checked by the writer as they arrived
            self._seen(node, name)
        if report.incomplete:
            with self._lock:
                node.incomplete = True
        if report.has_content:
            node.has_content = True
        self._arrived(node, report.arrived)
        for link in report.announced:
            self._announce(node, link)
        for link, name, written in report.firsts:
            self._first_name(link, node, name, written)
        for link, name, st in report.later:
            self._later_name_done(link, node, name, st)
        self._done(node, report.done)

    # -- manifests -----------------------------------------------------------------

    @property
    def wants_manifests(self) -> bool:
        """Whether existing files may stay (so a manifest can spare their data)."""
        return self.settings.existing in (
            ExistingPolicy.OVERWRITE,
            ExistingPolicy.UPDATE,
            ExistingPolicy.IGNORE_EXISTING,
        )

    def manifest(self, dir_id: int) -> Iterator[list[list[Any]]]:
        """The regular files directory ``dir_id`` held before the copy, as
        ``[name, meta]`` pairs in parts of at most ``MANIFEST_PART`` (nothing for a
        directory made by this copy)."""
        node = self._dir(dir_id)
        if not node.fresh:
            yield from _in_parts(_regular_files(node), MANIFEST_PART)

    # -- partials ------------------------------------------------------------------

    @property
    def resumes(self) -> bool:
        """Whether large files are written resumably (``--partial``, not a dry run)."""
        return self.settings.resume and self.settings.dry_run is None

    def partials(self, dir_id: int) -> Iterator[list[list[Any]]]:
        """The partials directory ``dir_id`` held before the copy, as ``[name,
        prefix]`` pairs in parts of at most ``PARTIALS_PART`` (nothing for a
        directory made by this copy); each is remembered until its file arrives."""
        node = self._dir(dir_id)
        if not node.fresh:
            yield from _in_parts(self._described_partials(node), PARTIALS_PART)

    def _described_partials(self, node: ReceivedDir) -> Iterator[list[Any]]:
        """Each usable, non-empty partial of ``node``: ``[name, prefix]``."""
        try:
            with os.scandir(node.fd) as entries:
                found = [e.name for e in entries if partial_stands_for(e.name)]
            for made in found:
                name = partial_stands_for(made)
                assert name is not None
                fd = open_partial(node.fd, made)
                if fd is None:
                    continue
                try:
                    prefix = describe(fd)
                finally:
                    os.close(fd)
                if prefix.size:
                    with self._lock:
                        self._described[(node.id, name)] = prefix
                    yield [name, prefix.to_wire()]
        except OSError as exc:
            log.debug("%s: partials not described: %s", node.rel or ".", exc)

    def described(self, node: ReceivedDir, name: str) -> Prefix | None:
        """The partial of ``name`` in ``node`` described to the source, given once."""
        with self._lock:
            return self._described.pop((node.id, name), None)

    # -- messages ------------------------------------------------------------------

    def open_dir(
        self, dir_id: Any, parent_id: Any, name: Any, meta: Any, traverse: Any = False
    ) -> bool:
        """``dir``: create or reuse a directory; ``False`` if it cannot be used (the
        source then sends nothing of it; the error is recorded here)."""
        parent = self._dir(parent_id)
        name = check_name(name)
        st = stat_of(meta, self.owners)
        if not isinstance(traverse, bool):
            raise ProtocolError(f"bad traverse flag {traverse!r}")
        self._seen(parent, name)
        if not isinstance(dir_id, int) or dir_id <= ANCHOR:
            raise ProtocolError(f"bad directory id {dir_id!r}")
        with self._lock:
            if dir_id in self._dirs:
                raise ProtocolError(f"directory id {dir_id} sent twice")
        rel = parent.child_rel(name)
        made: list[tuple[int, bool] | None] = []
        if self._stopped(parent) or not self._guarded(
            parent,
            rel,
            "create directory",
            lambda: made.append(self._make_dir(parent, name, st)),
        ):
            return False
        if made[0] is None:
            self.tally["skipped.dirs"] += 1
            return False
        fd, fresh = made[0]
        path = "" if parent.id == ANCHOR else parent.child_path(name)
        under = parent.under_include or (
            self.filter.active
            and bool(path)
            and self.filter.decide(
                path, True, under_include=parent.under_include, ignores=None
            ).verdict
            is Verdict.INCLUDE
        )
        node = ReceivedDir(
            parent=parent,
            rel=rel,
            pending=UNCOUNTED,
            id=dir_id,
            fd=fd,
            name=name,
            st=st,
            fresh=fresh,
            created=fresh,
            path=path,
            under_include=under,
            traverse_only=traverse,
            names=None if fresh else set(),
        )
        with self._lock:
            self._dirs[dir_id] = node
        self.tree.hold(parent)
        return True

    def _seen(self, node: ReceivedDir, name: str) -> None:
        """The source sent ``name`` in ``node`` (``--delete`` keeps it)."""
        if node.names is not None:
            with self._lock:
                node.names.add(name)

    def _make_dir(
        self, parent: ReceivedDir, name: str, st: os.stat_result
    ) -> tuple[int, bool] | None:
        """Create or reuse the directory ``name`` (:func:`plan_dir`): its descriptor
        and whether this copy made it; ``None`` when the policy keeps the entry of
        another kind that is there (its subtree is not copied)."""
        decided = plan_dir(self.settings, st, self._existing(parent, name))
        if decided.step is Step.KEEP:
            return None
        if decided.step is Step.REPLACE:
            assert decided.old is not None
            remove_entry(parent.fd, name, decided.old, self.tally)
        if decided.step is not Step.REUSE:
            os.mkdir(name, 0o700, dir_fd=parent.fd)
        fd = os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=parent.fd)
        return fd, decided.step is not Step.REUSE

    def _existing(self, parent: ReceivedDir, name: str) -> os.stat_result | None:
        return destination.existing(parent.fd, parent.fresh, name)

    def end_dir(self, dir_id: Any, count: Any, xattrs: Any = None) -> None:
        """``dir_end``: the source sent ``count`` entries of this directory (and its
        extended attributes, applied when it is finished)."""
        node = self._dir(dir_id)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ProtocolError(f"bad entry count {count!r}")
        attrs = xattrs_of({"xattrs": xattrs}) if xattrs is not None else None
        with self._lock:
            if node.expected is not None:
                raise ProtocolError(f"dir_end sent twice for directory {dir_id}")
            if count < node.received:
                raise ProtocolError(
                    f"dir_end counts {count} entries, {node.received} were sent"
                )
            node.expected = count
            node.xattrs = attrs
        self.tree.release(self.tally, node, UNCOUNTED - count)

    def files(self, header: dict[str, Any], data: memoryview) -> None:
        """A ``FILES`` frame: entries of one directory, file bytes in order. The whole
        frame is checked here, on its connection's thread; the entries' writes then
        go to the write pool (:mod:`rcp_core.remote.writepool`), which copies the
        frame's bytes (its buffer is the connection's, reused by the next read), or
        run here, in order, without one."""
        node = self._dir(header.get("dir"))
        entries = header.get("entries")
        if not isinstance(entries, list):
            raise ProtocolError("FILES frame without an entry list")
        writers = self._writers
        if writers is not None:
            writers.check()
            if len(data):
                data = memoryview(bytes(data))
        writes: list[Callable[[], None]] = []
        offset = 0
        for entry in entries:
            if not isinstance(entry, dict):
                raise ProtocolError("FILES entry is not an object")
            size, write = self._entry(node, entry, data, offset)
            offset += size
            if write is not None:
                writes.append(write)
        if offset != len(data):
            raise ProtocolError(
                f"FILES frame carries {len(data)} bytes, its entries {offset}"
            )
        self._arrived(node, len(entries))
        self._done(node, len(entries) - len(writes))
        if writers is None:
            for write in writes:
                write()
        else:
            writers.submit(writes, len(data), data)

    def _entry(
        self, node: ReceivedDir, entry: dict[str, Any], data: memoryview, offset: int
    ) -> tuple[int, Callable[[], None] | None]:
        """Check one entry: the number of data bytes it uses, and its write, which
        counts the entry done once it is (a later name of an inode whose first one
        is not in place yet waits, and is counted when it is linked); ``None`` for an
        entry with nothing to write, done already."""
        name = check_name(entry.get("name"))
        kind = entry.get("kind")
        rel = node.child_rel(name)
        link = link_id(entry.get("link"), rel)
        self._seen(node, name)
        if kind != "failed":
            node.has_content = True  # set only ever to True: no lock needed
        if kind == "failed":  # the source could not read it, and said so
            with self._lock:
                node.incomplete = True
            if link is not None:
                self._first_name(link, node, name, written=False)
            return 0, None
        if kind in ("unchanged", "kept"):  # matched the manifest: nothing to write
            self._matched(node, name, kind)
            if link is not None:
                self._first_name(link, node, name, written=True)
            return 0, None
        st = stat_of(entry.get("meta"), self.owners)
        if kind == "file":
            size = 0 if self.settings.dry_run else st.st_size  # a dry run sends none
            if offset + size > len(data):
                raise ProtocolError(f"{rel}: {size} bytes announced, fewer sent")
            attrs = xattrs_of(entry.get("meta"))
            view = data[offset : offset + size]
            self._announce(node, link)
            return size, lambda: self._entry_done(
                node,
                name,
                link,
                "write",
                lambda: self._write_file(node, name, st, view, attrs),
            )
        if kind == "hardlink":
            if link is None:
                raise ProtocolError(f"{rel}: a hard link without its link id")
            later = link
            return 0, lambda: self._later_name_done(later, node, name, st)
        if kind == "special":
            return 0, lambda: self._entry_done(
                node,
                name,
                None,
                "create special file",
                lambda: self._write_special(node, name, st),
            )
        if kind == "symlink":
            try:
                target = check_link_target(entry.get("target"))
            except UnsafeNameError as exc:
                raise ProtocolError(f"{rel}: bad symlink target: {exc}") from exc
            self._announce(node, link)
            return 0, lambda: self._entry_done(
                node,
                name,
                link,
                "create symlink",
                lambda: self._write_symlink(node, name, st, target),
            )
        raise ProtocolError(f"{rel}: unknown entry kind {kind!r}")

    def _entry_done(
        self,
        node: ReceivedDir,
        name: str,
        link: int | None,
        op: str,
        write: Callable[[], None],
    ) -> None:
        """Write one entry of a ``FILES`` frame (nothing once the run stopped), tell
        the names of its inode that wait for it, and count it done."""
        written = not self._stopped(node) and self._guarded(
            node, node.child_rel(name), op, write
        )
        if link is not None:
            self._first_name(link, node, name, written)
        self._done(node)

    def _later_name_done(
        self, link_id: int, node: ReceivedDir, name: str, st: os.stat_result
    ) -> None:
        """A ``hardlink`` entry: linked and counted now, or when its first name is."""
        if self._later_name(link_id, node, name, st):
            self._done(node)

    def _matched(self, node: ReceivedDir, name: str, kind: str) -> None:
        """A file the manifest matched (``unchanged`` or ``kept``): count it."""
        self.tally["unchanged.files" if kind == "unchanged" else "skipped.files"] += 1

    # -- hard links ----------------------------------------------------------------

    def _announce(self, node: ReceivedDir, link_id: int | None) -> None:
        """The first name of inode ``link_id`` arrived in ``node`` (its write may
        come later)."""
        self._links.announce(link_id)

    def _first_name(
        self, link_id: int, node: ReceivedDir, name: str, written: bool
    ) -> None:
        """The inode's first name is done (``written``: it is in place); link the
        names that waited for it, and count them into their directories."""
        link, waiting = self._links.first_name(link_id, node.child_rel(name), written)
        for later, later_name, st in waiting:
            self._link(link, later, later_name, st)
            self._done(later)  # it arrived (and was checked) with its frame

    def _later_name(
        self, link_id: int, node: ReceivedDir, name: str, st: os.stat_result
    ) -> bool:
        """A later name of a multiply-linked inode: linked now (``True``), or waiting
        for the first name (``False``: counted when it is linked)."""
        link = self._links.later_name(link_id, node, name, st)
        if link is None:
            return False
        self._link(link, node, name, st)
        return True

    def _link(
        self, link: Link[ReceivedDir], node: ReceivedDir, name: str, st: os.stat_result
    ) -> None:
        """Make ``name`` another name of the first one's copy (nothing once the run
        stopped)."""
        if not self._stopped(node):
            self._guarded(
                node,
                node.child_rel(name),
                "hard link",
                lambda: self._make_link(link, node, name),
            )

    def _make_link(self, link: Link[ReceivedDir], node: ReceivedDir, name: str) -> None:
        """Link ``name`` to the first name's copy, as :func:`plan_link` decides."""
        if link.path is None:
            raise OSError(errno.EIO, "the inode's first name was not copied")
        with located(self._anchor_fd, link.path) as first:
            old = self._existing(node, name)
            there = os.lstat(first[1], dir_fd=first[0]) if old is not None else None
            decided = plan_link(self.settings, old, there)
            if decided.stays(self.tally, "hardlinks") is None:
                make_hard_link(node.fd, name, first, decided, self.tally)

    # -- writing -------------------------------------------------------------------

    def _target(
        self, node: ReceivedDir, name: str, st: os.stat_result, link: str | None = None
    ) -> Plan | None:
        """How to write ``name`` (:func:`rcp_core.engine.destination.plan`), or
        ``None`` when the entry there stays (counted).

        :param link: a symlink's target (an existing symlink to it is unchanged).
        """
        decided = self._decide(node, name, st, link)
        return None if decided.stays(self.tally, kind_of(st)) else decided

    def _decide(
        self, node: ReceivedDir, name: str, st: os.stat_result, link: str | None = None
    ) -> Plan:
        """What happens to ``name``; reads only.

        :raises FileExistsError: it exists and the policy is the default (error).
        """
        old = self._existing(node, name)
        return destination.plan(
            self.settings, self.metadata, node.fd, name, st, old, link=link
        )

    def create(self, node: ReceivedDir, name: str, size: int) -> int:
        """A new file ``name`` in ``node``, open for writing (see
        :func:`rcp_core.engine.entries.create_file`: a site may have prepared it)."""
        hook = self.runtime.hook if self.runtime.pre_create else None
        return create_file(hook, node.fd, name, size, self.runtime.storage)

    def commit(self, node: ReceivedDir, made: str, name: str, decided: Plan) -> None:
        """Put the complete file ``made`` in place as ``name``
        (:func:`rcp_core.engine.destination.commit`)."""
        commit(node.fd, made, name, decided.old, self.tally)

    def _write_file(
        self,
        node: ReceivedDir,
        name: str,
        st: os.stat_result,
        data: memoryview,
        attrs: dict[str, bytes] | None,
    ) -> None:
        decided = self._target(node, name, st)
        if decided is None:
            return
        made = decided.new_name(name)
        fd = self.create(node, made, st.st_size)
        try:
            view = data
            while view:
                view = view[os.write(fd, view) :]
            self.metadata.apply(attrs, fd, st, is_dir=False, times=True)
        except BaseException:
            os.close(fd)
            os.unlink(made, dir_fd=node.fd)
            raise
        os.close(fd)
        self.commit(node, made, name, decided)
        self.tally["copied.files"] += 1
        self.tally["copied.bytes"] += len(data)

    def _write_symlink(
        self, node: ReceivedDir, name: str, st: os.stat_result, target_path: str
    ) -> None:
        decided = self._target(node, name, st, link=target_path)
        if decided is not None:
            make_symlink(
                node.fd, name, target_path, st, decided, self.metadata, self.tally
            )

    def _write_special(self, node: ReceivedDir, name: str, st: os.stat_result) -> None:
        """A FIFO, socket or device, made as a local copy makes it
        (:func:`rcp_core.engine.destination.make_special`)."""
        if (
            stat.S_ISREG(st.st_mode)
            or stat.S_ISDIR(st.st_mode)
            or stat.S_ISLNK(st.st_mode)
        ):
            raise ProtocolError(f"{name}: a special entry of another type")
        decided = self._target(node, name, st)
        if decided is not None:
            make_special(
                node.fd,
                name,
                st,
                decided,
                self.metadata,
                self.tally,
                skip_specials=self.settings.skip_specials,
            )

    # -- large files ---------------------------------------------------------------

    def chunk(
        self, header: dict[str, Any], data: memoryview, current: Part | None
    ) -> Part | None:
        """A ``CHUNK`` frame. A connection carries one run of a large file's frames
        at a time (the whole file, or one part of a split one), so its reader passes
        the run in progress (``current``) and gets it back, or ``None`` once it
        ended."""
        first, last = header.get("first") is True, header.get("last") is True
        if first != (current is None):
            raise ProtocolError("CHUNK frame out of order")
        if current is None:
            current = self._start_part(header)
        offset = header.get("offset")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ProtocolError(f"bad chunk offset {offset!r}")
        failed = header.get("failed")
        current.file.write(offset, data)
        if not last:
            return current
        if current.file.end_part(failed if isinstance(failed, str) else None):
            self._forget_split(current.file)
        return None

    def cut(self, current: Part) -> None:
        """The connection carrying ``current`` broke: its file is removed once
        every part ended (a partial stays)."""
        if current.file.cut():
            self._forget_split(current.file)

    def _start_part(self, header: dict[str, Any]) -> Part:
        """The first frame of a run: a whole large file, or a part of a split one
        (``part``: ``[index, parts]``, protocol 1.16), which the first of its parts
        to arrive creates and the others join."""
        node = self._dir(header.get("dir"))
        name = check_name(header.get("name"))
        st = stat_of(header.get("meta"), self.owners)
        link = link_id(header.get("link"), node.child_rel(name))
        kept = header.get("kept", 0)
        if not isinstance(kept, int) or isinstance(kept, bool) or kept < 0:
            raise ProtocolError(f"bad kept length {kept!r}")
        split = header.get("part")
        if split is None:
            return self._incoming(node, name, st, link, kept, header, 1).start(0)
        index, parts = _part_of(name, split)
        with self._splitting:
            file = self._split.get((node.id, name))
            if file is None:
                log.debug("%s arrives in %d parts", node.child_rel(name), parts)
                file = self._incoming(node, name, st, link, kept, header, parts)
                self._split[(node.id, name)] = file
            elif (file.parts, file.st.st_size, file.asked) != (parts, st.st_size, kept):
                raise ProtocolError(f"{name}: parts that disagree")
            return file.start(index)

    def _incoming(
        self,
        node: ReceivedDir,
        name: str,
        st: os.stat_result,
        link: int | None,
        kept: int,
        header: dict[str, Any],
        parts: int,
    ) -> Incoming:
        """Create (or resume) a large file that starts arriving."""
        self._seen(node, name)
        node.has_content = True
        prefix = self.described(node, name) if self.resumes else None
        if kept and (prefix is None or kept > prefix.size):
            raise ProtocolError(f"{name}: keeps more than was described")
        file = Incoming(self, node, name, st, link, (prefix, kept), parts)
        file.attrs = xattrs_of(header.get("meta"))
        return file

    def _forget_split(self, file: Incoming) -> None:
        if file.parts > 1:
            with self._splitting:
                if self._split.get((file.node.id, file.name)) is file:
                    del self._split[(file.node.id, file.name)]

    def drop_arrivals(self) -> None:
        """Remove the split files whose parts will not all come (the transfer
        ended without them; a partial stays). Only once no connection is read."""
        with self._splitting:
            left, self._split = list(self._split.values()), {}
        for file in left:
            file.discard()


def _part_of(name: str, split: Any) -> tuple[int, int]:
    """A first ``CHUNK``'s ``part``: ``[index, parts]``, 2 <= parts <= MAX_PARTS."""
    if (
        isinstance(split, list)
        and len(split) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) for n in split)
        and 2 <= split[1] <= MAX_PARTS
        and 0 <= split[0] < split[1]
    ):
        return split[0], split[1]
    raise ProtocolError(f"{name}: bad part {split!r}")
