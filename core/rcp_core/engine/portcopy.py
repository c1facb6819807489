"""The generic engine: a tree copied between any two backend ports.

The fd-relative fast path (:mod:`rcp_core.engine.copyrun`) copies between trees of
this host, and the remote roles between hosts; a copy with a store on either side
(``memory://``, an object store, any fsspec filesystem, a site's own backend) is
copied here, through the ports (:class:`rcp_core.backends.port.Port`), with the
engine's rules:

- **operands** as ``rcp``'s (:func:`rcp_core.paths.port_target`): the source is
  copied to exactly ``destination``, or into it under its own name with ``into``;
  what the rules refuse is refused before anything is written;
- **one directory at a time** (:mod:`rcp_core.engine.portwalk`): each directory is
  listed one level when its turn comes, so memory follows the directories in
  flight, never the tree; a directory's destination is made before its entries, its
  metadata set after them; the entries worked on at once, each by one thread, are
  the plugins' choice for the two ports' storage (a store's: 16 to start, 2 to 64),
  moved by the adaptive controller, or ``max_workers`` exactly;
- **existing files**: by the local copy's rules
  (:func:`rcp_core.engine.existing.decide`): ``IGNORE_EXISTING`` keeps every
  existing file, ``OVERWRITE`` replaces those that differ and ``UPDATE`` those older
  than the source; "differ" is by ``overwrite_compare``: the size, and the mtime
  where both sides keep settable ones (:attr:`Capability.MTIMES`: S3, GCS and
  Azure in an object's metadata; ``memory://`` keeps none, so a pair with it
  compares by size, and ``UPDATE`` replaces what differs in size); where a side's
  listing lacked its mtime (an S3 object's), a same-size pair is unchanged when the
  checksum its store recorded proves the bytes the same
  (:mod:`rcp_core.engine.portexisting`: no request), else that side is completed
  (:meth:`~rcp_core.backends.port.Port.complete`: one request) where the policy
  reads its time, and a source file before it is copied (the time its copy keeps),
  unless its port's read tells it (:class:`~rcp_core.backends.port.ReadsCompleted`:
  an S3 GET carries the metadata; a server-side copy keeps the object's own);
- **filters and mirroring** as the local copy's: ``includes``, ``excludes``, a
  ``filter_file`` and ``gitignore`` choose the entries; ``delete`` removes what the
  source does not have, ``delete_excluded`` also what the filters exclude (the
  walk's invariants);
- **refused, never ignored**: what this engine or the pair cannot do
  (:func:`rcp_core.backends.capabilities.refusals`) is a
  :class:`~rcp_core.errors.UsageError` before anything is written;
- **the data path** of each file: the destination's own faster path where the pair
  has one (:meth:`~rcp_core.backends.port.Port.copy_in`: a store's server-side
  copy, its upload of a local file), a large file in ranges at once where the pair
  can (:mod:`~rcp_core.engine.portranges`: a store to this host), else streamed in
  chunks through this process; either way the file is published whole or not at
  all;
- **cancel**: setting ``cancel`` stops the copy: no entry is started after it, a file
  being streamed stops at its next chunk and is never published, and the run raises
  :class:`~rcp_core.errors.CopyFailedError` (``stopped``);
- **dry runs**: with ``dry_run``, nothing is written; each decision is said in the
  local copy's words (:meth:`rcp_core.settings.DryRun.line`);
- **throttle**: ``ops_throttle`` entries per second at most;
- **metadata**: the source's mode and mtime, where the destination keeps them
  (``preserve``): with the data where a storage keeps them there (``kept``, an
  object's metadata), else set after it, directories after their files;
- **the end**: the run runtime's (:meth:`~rcp_core.run.runtime.Runtime.conclude`):
  the site plugins' ``rcp_run_finished`` sees the summary or the failure, as for a
  local copy;
- **errors**: the run runtime's (:class:`rcp_core.run.runtime.Runtime`): transient
  ones, as this host's site plugins classify them, are retried with backoff; others
  are collected and deduplicated, and the run raises
  :class:`~rcp_core.errors.CopyFailedError` with its partial summary
  (``fail_early``: at the first, the entries not started are not copied);
- **symlinks** are made again with their targets where both ports keep them
  (:func:`~rcp_core.backends.port.keeps_symlinks`; one with the same target is
  unchanged: :meth:`ExistingFiles.link_decided`), a symlink a file replaces removed
  first (it holds no data); elsewhere followed to files by the source's listing, a
  link to a directory skipped (counted ``skipped.symlinks``, never looped through);
- **specials** of a source (FIFOs, sockets, devices) cannot be recreated here: each
  is an entry error, or counted ``skipped.specials`` with ``skip_specials``;
- **names** come from the ports' listings, each one safe component; a name a store
  listed that is not safe is an entry error (``list``), nothing below it is listed.

The result is the engine's :class:`~rcp_core.run.summary.Summary`; ``on_progress``
gets :class:`~rcp_core.run.progress.Progress` snapshots from the engine's monitor
thread (:class:`rcp_core.run.monitor.Monitor`), which also watches ``cancel``.

Over 400 lines because :class:`PortCopy` is one class, every single-entry operation
of the generic copy (a directory, a file, a symlink, a special) on one runtime, each
method short, the decisions in :mod:`~rcp_core.engine.portexisting` and the walk in
:mod:`~rcp_core.engine.portwalk`.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import resource
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, BinaryIO, TypeVar

import pluggy

from rcp_core.backends.capabilities import refuse
from rcp_core.backends.port import (
    Entry,
    EntryKind,
    KeepsSymlinks,
    Port,
    ReadsCompleted,
    ReadsRanges,
    WritesRanges,
    keep_meta,
    keeps_symlinks,
)
from rcp_core.backends.routing import Engine
from rcp_core.engine import portranges
from rcp_core.engine.existing import NEW, Action
from rcp_core.engine.portexisting import ExistingFiles
from rcp_core.engine.portwalk import Made, PortWalk
from rcp_core.paths import port_target
from rcp_core.run.progress import Progress
from rcp_core.run.records import NEW as NEW_ENTRY
from rcp_core.run.records import Change, ChangeLog, differences
from rcp_core.run.runtime import Runtime
from rcp_core.run.summary import Resources, Summary, Tally
from rcp_core.run.tuning import Concurrency, Controller
from rcp_core.settings import CopySettings
from rcp_core.site.capacity import choose_concurrency, open_files_budget, port_storage
from rcp_core.site.plugins import plugin_manager

log = logging.getLogger("rcp_core")

CHUNK = 4 << 20
"""Bytes read and written at a time when a file is streamed."""

T = TypeVar("T")


def copy_tree(
    source: Port,
    destination: Port,
    settings: CopySettings | None = None,
    *,
    into: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
    progress_interval: float = 1.0,
    cancel: threading.Event | None = None,
    plugins: Iterable[object] = (),
) -> Summary:
    """Copy ``source``'s root to ``destination`` (into it under the source's name
    with ``into``: ``rcp SRC DST/``); the summary.

    :param plugins: site plugins beside the installed ones (tests, per-call
        overrides), as :func:`rcp_core.site.plugins.plugin_manager` takes them.

    :raises UsageError: settings the pair cannot honour (refused first), or the
        operand rules (:func:`rcp_core.paths.port_target`); nothing was written.
    :raises CopyFailedError: some entries were not copied, or ``cancel`` stopped the
        copy (the partial summary).
    :raises Exception: what a worker raised that is no entry error (a store's or this
        code's defect): the copy stopped, and never ends as if it were complete.
    """
    settings = settings or CopySettings()
    refuse(settings, Engine.STORE, source.backend, destination.backend)
    target, entry = port_target(source, destination, into, settings.existing)
    return _run(
        source,
        target,
        settings,
        lambda walk: walk.run(entry, target.stat("")),
        plugins,
        on_progress,
        progress_interval,
        cancel,
    )


def copy_units(
    source: Port,
    target: Port,
    units: Sequence[str],
    settings: CopySettings | None = None,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    progress_interval: float = 1.0,
    cancel: threading.Event | None = None,
    plugins: pluggy.PluginManager | Iterable[object] = (),
) -> Summary:
    """Copy each of ``units`` (paths below ``source``'s root: a shard's) to the same
    path below ``target``'s, in one run, each as :func:`copy_tree` copies a root
    (their parents exist at the target); the summary. No operand rules: the units'
    caller checked its operands (:mod:`rcp_core.tools.shards.copier`).

    :raises UsageError: settings the pair cannot honour; nothing was written.
    :raises CopyFailedError: as :func:`copy_tree`; a unit the source no longer has
        is a failed entry.
    """
    settings = settings or CopySettings()
    refuse(settings, Engine.STORE, source.backend, target.backend)
    return _run(
        source,
        target,
        settings,
        lambda walk: walk.run_units(units),
        plugins,
        on_progress,
        progress_interval,
        cancel,
    )


def _run(
    source: Port,
    target: Port,
    settings: CopySettings,
    start: Callable[[PortWalk], None],
    plugins: pluggy.PluginManager | Iterable[object],
    on_progress: Callable[[Progress], None] | None,
    progress_interval: float,
    cancel: threading.Event | None,
) -> Summary:
    """One copy run from ``source`` to ``target``: ``start`` runs its walk under the
    runtime's monitor; then the run's end (:meth:`Runtime.conclude`)."""
    started, usage = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    if not isinstance(plugins, pluggy.PluginManager):
        plugins = plugin_manager(plugins)
    hook = plugins.hook
    storage = (port_storage(hook, source), port_storage(hook, target))
    concurrency = choose_concurrency(
        hook, [storage], settings, open_files_budget(settings)
    )
    copy = PortCopy(source, target, settings, hook, concurrency)
    walk = PortWalk(copy)
    changes = ChangeLog.of(settings)
    copy.record_changes(changes)
    try:
        counts = copy.monitored(
            walk.pool,
            lambda: start(walk),
            controller=Controller(concurrency) if concurrency.adaptive else None,
            on_progress=on_progress,
            progress_interval=progress_interval,
            cancel=cancel,
        )
        resources = Resources.since(started, usage)
        return copy.conclude(counts, resources, dry_run=settings.dry_run is not None)
    finally:
        if changes is not None:
            changes.close()


_KINDS = {
    EntryKind.FILE: "file",
    EntryKind.DIRECTORY: "dir",
    EntryKind.SYMLINK: "symlink",
    EntryKind.OTHER: "special",
}


def _attributes(
    entry: Entry,
) -> tuple[int | None, int | None, int | None, int | None, int | None]:
    """What :func:`~rcp_core.run.records.differences` compares, of a port's entry."""
    mode = None if entry.mode is None else entry.mode & 0o7777
    return entry.size, entry.mtime_ns, mode, entry.uid, entry.gid


class _Stopped(Exception):
    """A file's copy abandoned because the run stopped."""


class PortCopy(Runtime):
    """One copy's operations on single entries, and its runtime (errors, retries,
    stop, throttle, classified by this host's site plugins)."""

    def __init__(
        self,
        source: Port,
        target: Port,
        settings: CopySettings,
        hook: Any,
        concurrency: Concurrency,
    ) -> None:
        super().__init__(
            hook,
            retries=settings.retries,
            retry_delay=settings.retry_delay,
            fail_early=settings.fail_early,
            ops_throttle=settings.ops_throttle,
        )
        self.source, self.target, self.settings = source, target, settings
        self.concurrency = concurrency
        """Entries in flight, and the bounds the controller moves them in
        (:func:`~rcp_core.site.capacity.choose_concurrency`: the plugins' choice
        for the two ports' storage, ``--max-workers`` fixing it)."""
        self.existing = ExistingFiles(source, target, settings, lambda: self.stopping)
        """What the policy does with what the destination holds."""
        self.follows_links = not keeps_symlinks(source, target)
        """Whether the source is listed following its symlinks (a side keeps
        none)."""

    def entry(self, tally: Tally, op: str, rel: str, step: Callable[[], T]) -> T | None:
        """``step``'s result (transient errors retried), after a throttle token;
        ``None`` when it failed (recorded as ``op`` on ``rel``) or the run stopped."""
        if self.throttle is not None and not self.stopping:
            self.throttle.take()  # may wait: the run may stop meanwhile
        if self.stopping:
            return None
        try:
            return self.attempt(step)
        except _Stopped:
            return (
                None  # left as it was: the stop is the run's outcome, not this entry's
            )
        except OSError as exc:
            self.record(tally, self.error(op, rel or ".", exc))
            return None

    def make_dir(
        self, rel: str, entry: Entry, there: Entry | None, tally: Tally
    ) -> Made:
        """Find or make the destination of the source directory ``rel``. An entry
        of another kind there is kept if the policy keeps it, else replaced (on a
        store of prefixes the directory is made beside it: a key and a prefix may
        share a name)."""
        if there is not None and there.is_dir:
            return Made.FOUND
        reason = NEW
        if there is not None:
            action, reason = self.existing.decision(entry, there)
            if action is Action.KEEP:
                tally["skipped.dirs"] += 1
                self.dry("keep", "dir", rel, reason)
                return Made.KEPT
        if not self.dry("create", "dir", rel, reason):
            self.target.make_dir(rel, there)
            if self.changes is not None:
                self.changed(rel, "replace" if there else "create", entry, there)
        return Made.CREATED

    def copy_entry(
        self, rel: str, entry: Entry, there: Entry | None, tally: Tally
    ) -> bool:
        """Copy the source's non-directory ``rel`` as the policy says; ``True``
        (it is done)."""
        if entry.kind is EntryKind.OTHER:
            self._special(rel, tally)
        elif entry.kind is EntryKind.SYMLINK:
            self._copy_link(rel, entry, there, tally)
        else:
            self._copy_file(rel, entry, there, tally)
        return True

    def _copy_link(
        self, rel: str, entry: Entry, there: Entry | None, tally: Tally
    ) -> None:
        """Make the source's symlink ``rel`` again, as the policy says."""
        target = self.target
        if self.follows_links or not isinstance(target, KeepsSymlinks):
            raise OSError(errno.EOPNOTSUPP, "a symlink where none is kept")
        entry, action, reason = self.existing.link_decided(rel, entry, there)
        if action is not Action.REPLACE:
            stays = "unchanged" if action is Action.UNCHANGED else "skipped"
            tally[f"{stays}.symlinks"] += 1
            self.dry(action.value, "symlink", rel, reason)
            return
        tally["copied.symlinks"] += 1
        word = "copy" if there is None else "replace"
        if not self.dry(word, "symlink", rel, f"-> {entry.target}"):
            kept = dataclasses.replace(self.kept(entry), target=entry.target)
            target.make_symlink(rel, kept, there)
            self.set_meta(rel, entry)
            if self.changes is not None:
                self.changed(rel, word.replace("copy", "create"), entry, there)

    def _special(self, rel: str, tally: Tally) -> None:
        """A FIFO, socket or device: skipped with ``skip_specials``, else an error."""
        if not self.settings.skip_specials:
            raise OSError(
                errno.EOPNOTSUPP,
                "a FIFO, socket or device cannot be copied to or from a URL "
                "(--skip-specials skips it)",
            )
        self.dry("skip", "special", rel, "--skip-specials")
        tally["skipped.specials"] += 1

    def _copy_file(
        self, rel: str, entry: Entry, there: Entry | None, tally: Tally
    ) -> None:
        entry, action, reason = self.existing.decided(rel, entry, there)
        if action is Action.UNCHANGED:
            tally["unchanged.files"] += 1
            self.dry("unchanged", "file", rel, reason)
            return
        if action is Action.KEEP:
            tally["skipped.files"] += 1
            self.dry("keep", "file", rel, reason)
            return
        if self.dry("copy" if there is None else "replace", "file", rel, reason):
            tally["copied.files"] += 1
            tally["copied.bytes"] += entry.size
            return
        source, target = self.source, self.target
        if there is not None and there.kind is EntryKind.SYMLINK:
            # A link's own name may differ (a store's link object): it goes first.
            target.remove(rel, there, Tally(), None)
        incomplete = self.existing.timed and entry.mtime_ns is None
        if incomplete and not isinstance(source, ReadsCompleted):
            entry = source.complete(rel, entry)  # the time its copy keeps: a request
        method = "stream"
        if target.copy_in(source, rel, rel, self.kept(entry)):
            tally.moved(entry.size)
            method = "server-side"
        elif (
            entry.size >= portranges.RANGED_LEAST
            and isinstance(source, ReadsRanges)
            and isinstance(target, WritesRanges)
        ):
            method = "ranges"
            try:
                entry = portranges.copy_ranges(
                    source, target, rel, entry, tally.moved, lambda: self.stopping
                )
            except portranges.Stopped as exc:
                raise _Stopped from exc
        elif incomplete and isinstance(source, ReadsCompleted):
            with source.read_completed(rel, entry) as (reader, entry):
                chunks = self._chunks(reader, tally)
                target.write(rel, chunks, self.kept(entry))
        else:
            with source.read(rel) as reader:
                target.write(rel, self._chunks(reader, tally), self.kept(entry))
        self.set_meta(rel, entry)
        tally["copied.files"] += 1
        tally["copied.bytes"] += entry.size
        if self.changes is not None:
            done = "create" if there is None else "replace"
            self.changed(rel, done, entry, there, method=method)

    def kept(self, entry: Entry) -> Entry:
        """What of the source file ``entry`` its copy keeps, as ``preserve`` asks:
        its permission bits, its time (:attr:`Entry.changed_ns`) and its owner."""
        preserve = self.settings.preserve
        return Entry(
            entry.kind,
            entry.size,
            entry.mode if preserve.mode else None,
            entry.changed_ns if preserve.times else None,
            uid=entry.uid if preserve.owner else None,
            gid=entry.gid if preserve.owner else None,
        )

    def changed(
        self,
        rel: str,
        action: str,
        entry: Entry,
        there: Entry | None,
        *,
        method: str | None = None,
    ) -> None:
        """Record that ``rel`` was changed (``entry``: the source's, or what was
        removed; ``there``: what the destination held, ``None`` if nothing); call
        it only when the run records changes (:attr:`changes`)."""
        assert self.changes is not None
        kind = _KINDS[entry.kind]
        attributes = (
            NEW_ENTRY
            if there is None
            else differences(
                kind, _attributes(entry), _attributes(there), self.settings.preserve
            )
        )
        file = entry.kind is EntryKind.FILE and action != "remove"
        self.changes.add(
            Change(
                self.target.describe(rel),
                action,
                kind,
                attributes,
                bytes=entry.size if file else 0,
                method=method,
                target=entry.target if entry.kind is EntryKind.SYMLINK else None,
            )
        )

    def dry(self, action: str, kind: str, rel: str, reason: str) -> bool:
        """Say one dry-run line (:meth:`DryRun.line`, the one phrasing); whether
        this is a dry run (then nothing is written)."""
        if self.settings.dry_run is None:
            return False
        where = self.target.describe(rel)
        line = self.settings.dry_run.line(action, kind, where, reason)
        if line is not None:
            log.info("%s", line)
        return True

    def _chunks(self, reader: BinaryIO, tally: Tally) -> Iterator[bytes]:
        """``reader``'s data, counted as it moves.

        :raises _Stopped: the run stopped first (the port drops what was written).
        """
        while data := reader.read(CHUNK):
            if self.stopping:
                raise _Stopped
            tally.moved(len(data))
            yield data

    def set_meta(self, rel: str, entry: Entry) -> None:
        """The source's owner, mode and mtime on ``rel``, as ``preserve`` asks and
        where the destination keeps them (a source directory's completed first
        where its listing had neither: an object store's marker)."""
        if entry.is_dir and entry.mtime_ns is None and entry.mode is None:
            entry = self.source.complete(rel, entry)
        keep_meta(self.target, rel, entry, self.settings.preserve)
