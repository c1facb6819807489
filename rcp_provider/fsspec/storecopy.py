"""Trees to and from any fsspec filesystem: the engine's generic backend.

The engine's fast path copies POSIX trees (:mod:`rcp_core.engine.copyrun`) and trees on
``rcpd`` hosts; everything else fsspec reaches -- ``memory://``, an object store whose
fsspec package is installed, a local directory seen through fsspec -- is copied here:
slower, generic, with the engine's rules where they apply:

- **operands** as ``rcp``'s: the source is copied to exactly ``destination``, or into
  it under its own name when ``into`` (a trailing ``/``); a missing source, an
  existing destination under ``ExistingPolicy.ERROR``, a missing parent directory on
  a filesystem with directories (not an object store's prefix) and a destination
  inside its source are :class:`~rcp_core.errors.UsageError` before anything is
  written;
- **one directory at a time** (:mod:`rcp_provider.fsspec.storewalk`): each directory
  is listed one level when its turn comes, so memory follows the directories in
  flight, never the tree; a directory's destination is made before its entries, its
  metadata set after them; at most ``max_workers`` (default 16) entries are worked
  on at once, each by one thread;
- **existing files**: by the local copy's rules (:func:`rcp_core.engine.existing.decide`):
  ``ERROR`` refuses an existing destination, ``IGNORE_EXISTING`` keeps every existing
  file, ``OVERWRITE`` replaces those that differ and ``UPDATE`` those older than the
  source; "differ" is by ``overwrite_compare``: the size, and the
  mtime where both sides keep settable ones (:attr:`Capability.MTIMES`: an object
  store's time is its upload's, never the source's, so a pair with a store compares
  by size, and ``UPDATE`` replaces what differs in size);
- **filters and mirroring** as the local copy's: ``includes``, ``excludes``, a
  ``filter_file`` and ``gitignore`` choose the entries; ``delete`` removes what the
  source does not have, ``delete_excluded`` also what the filters exclude (the
  walk's invariants);
- **refused, never ignored**: what this engine or the pair cannot do
  (:func:`rcp_core.backends.capabilities.refusals`: following symlinked
  directories, ``--preserve`` of what a side does not keep, comparing more than
  size and mtime, helper processes, a descriptor budget, ``link_dest``) is a
  :class:`~rcp_core.errors.UsageError` before anything is written;
- **cancel**: setting ``cancel`` stops the copy: no file is started after it, a file
  being copied stops at its next chunk and is never published, and the run raises
  :class:`~rcp_core.errors.CopyFailedError` (``stopped``);
- **dry runs**: with ``dry_run``, nothing is written; each decision is said in the
  local copy's words (:meth:`rcp_core.settings.DryRun.line`: ``would copy``,
  ``would replace``, ``unchanged``, ``keep``, ``would remove``, with the reason at
  ``explain``);
- **throttle**: ``ops_throttle`` entries per second at most;
- **nothing half-written under its name**: a POSIX destination file is written to a
  temporary beside it and renamed into place when complete; a store's file is opened
  with ``autocommit=False`` and committed only once every byte is written (discarded
  otherwise), and a local file's upload (``put_file``) publishes the object when it
  ends;
- **metadata**: a POSIX destination gets the source's mtime and permission bits where
  the source has them (``preserve``), directories after their files;
- **errors**: the run runtime's (:class:`rcp_core.run.runtime.Runtime`): transient ones,
  as this host's site plugins classify them, are retried with backoff; others are
  collected and deduplicated, and the run raises
  :class:`~rcp_core.errors.CopyFailedError` with its partial summary
  (``fail_early``: at the first, the files not started are not copied);
- **symlinks** of a POSIX source: a store has none, so a link to a file is copied as
  the file it points to, and a link to a directory is not followed (counted
  ``skipped.symlinks``, never looped through);
- **specials** of a POSIX source (FIFOs, sockets, devices) cannot be recreated here:
  each is an entry error, or counted ``skipped.specials`` with ``skip_specials``.
- **names** a store lists are checked (:mod:`rcp_core.names`) before one is joined
  to a path: one that is not a safe relative path (an empty, ``.`` or ``..``
  segment, a NUL, absolute) is an entry error, never a read or a write, and the rest
  is copied; a key ending in ``/`` (a store's directory marker) is its directory.

What a tree is made of here (places, listings, infos read as stat results) is
:mod:`rcp_provider.fsspec.storetree`; how it is walked,
:mod:`rcp_provider.fsspec.storewalk`; this module holds the operations on one entry.

The result is the engine's :class:`~rcp_core.run.summary.Summary`; ``on_progress`` gets
:class:`~rcp_core.run.progress.Progress` snapshots from the engine's monitor thread
(:class:`rcp_core.run.monitor.Monitor`), which also watches ``cancel``.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import posixpath
import resource
import secrets
import stat
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from rcp_core.backends.capabilities import Capability, refuse
from rcp_core.backends.routing import Engine
from rcp_core.engine.existing import NEW, Action, decide
from rcp_core.errors import CopyFailedError, UsageError
from rcp_core.run.monitor import Monitor
from rcp_core.run.progress import Progress
from rcp_core.run.runtime import Runtime
from rcp_core.run.summary import Resources, Summary, Tally, merge
from rcp_core.settings import CompareAttr, CopySettings, ExistingPolicy
from rcp_core.site.plugins import plugin_manager
from rcp_provider.fsspec.storetree import Item, Place, mtime_of, stat_of
from rcp_provider.fsspec.storewalk import Made, StoreWalk

log = logging.getLogger("rcp_core")

DEFAULT_WORKERS = 16
"""Entries in flight when the settings do not say (stores answer slowly, in parallel)."""
CHUNK = 4 << 20
"""Bytes read and written at a time between two stores."""

T = TypeVar("T")


def copy_tree(
    source: Place,
    destination: Place,
    settings: CopySettings | None = None,
    *,
    into: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
    progress_interval: float = 1.0,
    cancel: threading.Event | None = None,
) -> Summary:
    """Copy ``source`` to ``destination`` (into it under the source's name with
    ``into``); the summary.

    :raises UsageError: a missing source, an existing destination the policy does not
        allow, a missing parent directory, a destination inside its source, or
        settings the pair cannot honour; nothing was written.
    :raises CopyFailedError: some entries were not copied, or ``cancel`` stopped the
        copy (the partial summary).
    :raises Exception: what a worker raised that is no entry error (a store's or this
        code's defect): the copy stopped, and never ends as if it were complete.
    """
    settings = settings or CopySettings()
    refuse(settings, Engine.STORE, source.backend, destination.backend)
    started, usage = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    target = _target(source, destination, into, settings)
    info = source.fs.info(source.path)
    copy = StoreCopy(source, target, settings)
    walk = StoreWalk(copy)
    monitor = Monitor(
        walk.pool,
        None,
        [on_progress] if on_progress is not None else [],
        progress_interval,
        cancel or threading.Event(),
        lambda: copy.stop("cancelled"),
    )
    monitor.start()
    try:
        walk.run(info, _there(target))
    finally:
        monitor.stop()
    counts = merge(walk.pool.tallies)
    summary = Summary(
        counts, Resources.since(started, usage), tuple(copy.errors.report())
    )
    if counts["errors"] or copy.stop_reason == "cancelled":
        raise CopyFailedError(summary, list(summary.errors), copy.stopping)
    return summary


def _target(
    source: Place, destination: Place, into: bool, settings: CopySettings
) -> Place:
    """Where the source goes, checked by ``rcp``'s operand rules."""
    if not source.fs.exists(source.path):
        raise UsageError(f"{source.path}: the source does not exist")
    path = destination.path
    if into:
        path = posixpath.join(path, posixpath.basename(source.path.rstrip("/")))
    target = Place(destination.fs, path)
    parent = posixpath.dirname(path.rstrip("/"))
    if target.has_directories and parent and not destination.fs.isdir(parent):
        raise UsageError(f"{path}: its parent directory does not exist")
    if settings.existing is ExistingPolicy.ERROR and target.fs.exists(path):
        raise UsageError(f"{path} exists (choose a policy that allows changing it)")
    if type(source.fs) is type(target.fs) and (
        path == source.path or path.startswith(source.path.rstrip("/") + "/")
    ):
        raise UsageError(f"{path} is inside its source {source.path}")
    return target


def _there(target: Place) -> dict[str, Any] | None:
    """What is at the target (its fsspec info), or ``None``."""
    try:
        info: dict[str, Any] = target.fs.info(target.path)
    except FileNotFoundError:
        return None
    return info


class _Stopped(Exception):
    """A file's copy abandoned because the run stopped."""


class StoreCopy(Runtime):
    """One copy's operations on single entries, and its runtime (errors, retries,
    stop, throttle, classified by this host's site plugins)."""

    def __init__(self, source: Place, target: Place, settings: CopySettings) -> None:
        super().__init__(
            plugin_manager().hook,
            retries=settings.retries,
            retry_delay=settings.retry_delay,
            fail_early=settings.fail_early,
            ops_throttle=settings.ops_throttle,
        )
        self.source, self.target, self.settings = source, target, settings
        self.workers = settings.max_workers or DEFAULT_WORKERS
        self.timed = all(
            place.backend.has(Capability.MTIMES) for place in (source, target)
        )
        """Whether mtimes tell files apart: both sides keep settable ones."""

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

    def make_dir(self, item: Item, there: dict[str, Any] | None, tally: Tally) -> Made:
        """Find or make the destination of the source directory ``item``. An entry
        of another kind there is kept if the policy keeps it, else replaced: on a
        POSIX destination it is removed first (a symlink there is never written
        through), on a store the directory is made beside it as the store allows
        (an object store's key and prefix may share a name)."""
        if there is not None and there.get("type") == "directory":
            return Made.FOUND
        reason = NEW
        if there is not None:
            action, reason = self.decision(item, there)
            if action is Action.KEEP:
                tally["skipped.dirs"] += 1
                self.dry("keep", "dir", item.rel, reason)
                return Made.KEPT
        if not self.dry("create", "dir", item.rel, reason):
            path = self.target.join(item.rel)
            if there is not None and self.target.posix:
                os.unlink(path)  # replaced, never written through (a symlink)
            self.target.fs.makedirs(path, exist_ok=True)
        return Made.CREATED

    def copy_entry(
        self, item: Item, there: dict[str, Any] | None, tally: Tally
    ) -> bool:
        """Copy the source's non-directory ``item`` as the policy says; ``True``
        (it is done)."""
        if item.is_special:
            self._special(item, tally)
        else:
            self._copy_file(item, there, tally)
        return True

    def _special(self, item: Item, tally: Tally) -> None:
        """A FIFO, socket or device: skipped with ``skip_specials``, else an error."""
        if not self.settings.skip_specials:
            raise OSError(
                errno.EOPNOTSUPP,
                "a FIFO, socket or device cannot be copied to or from a URL "
                "(--skip-specials skips it)",
            )
        self.dry("skip", "special", item.rel, "--skip-specials")
        tally["skipped.specials"] += 1

    def _copy_file(
        self, item: Item, there: dict[str, Any] | None, tally: Tally
    ) -> None:
        action, reason = (
            (Action.REPLACE, NEW) if there is None else (self.decision(item, there))
        )
        if action is Action.UNCHANGED:
            tally["unchanged.files"] += 1
            self.dry("unchanged", "file", item.rel, reason)
            return
        if action is Action.KEEP:
            tally["skipped.files"] += 1
            self.dry("keep", "file", item.rel, reason)
            return
        size = int(item.info.get("size") or 0)
        if self.dry("copy" if there is None else "replace", "file", item.rel, reason):
            tally["copied.files"] += 1
            tally["copied.bytes"] += size
            return
        src, dst = self.source.join(item.rel), self.target.join(item.rel)
        if self.target.posix:
            self._to_posix(src, dst, tally)
            self.set_meta(item)
        elif self.source.posix:
            self.target.fs.put_file(src, dst)
            tally.moved(size)
        elif self.source.fs is self.target.fs:
            self.target.fs.cp_file(src, dst)
            tally.moved(size)
        else:
            with self.source.fs.open(src, "rb") as reader:
                self._publish(reader, dst, tally)
        tally["copied.files"] += 1
        tally["copied.bytes"] += size

    def decision(self, item: Item, there: dict[str, Any]) -> tuple[Action, str]:
        """What the policy does with the existing ``there``: the local copy's rules
        (:func:`rcp_core.engine.existing.decide`) on both sides' infos. Where a side has no
        settable mtime (:attr:`timed` false) times tell nothing: ``mtime`` is not
        compared and ``update`` replaces what differs, as ``overwrite`` does."""
        policy, compare = self.settings.existing, self.settings.overwrite_compare
        if not self.timed:
            compare = compare - {CompareAttr.MTIME}
            if policy is ExistingPolicy.UPDATE:
                policy = ExistingPolicy.OVERWRITE
        return decide(policy, compare, stat_of(item.info), stat_of(there))

    def dry(self, action: str, kind: str, rel: str, reason: str) -> bool:
        """Say one dry-run line (:meth:`DryRun.line`, the one phrasing); whether
        this is a dry run (then nothing is written)."""
        if self.settings.dry_run is None:
            return False
        line = self.settings.dry_run.line(action, kind, self.target.join(rel), reason)
        if line is not None:
            log.info("%s", line)
        return True

    def _to_posix(self, src: str, dst: str, tally: Tally) -> None:
        """Write ``dst`` through a temporary beside it, renamed into place."""
        directory, name = os.path.split(dst)
        temporary = os.path.join(directory, f".rcp-{secrets.token_hex(6)}-{name}")
        try:
            with self.source.fs.open(src, "rb") as reader, open(temporary, "xb") as out:
                self._pump(reader, out, tally)
            os.replace(temporary, dst)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise

    def _publish(self, reader: Any, dst: str, tally: Tally) -> None:
        """All of ``reader`` into the store's file ``dst``, which appears only once
        complete: written with ``autocommit=False``, committed at the end,
        discarded if anything fails or the run stops."""
        writer = self.target.fs.open(dst, "wb", autocommit=False)
        try:
            self._pump(reader, writer, tally)
            writer.close()
        except BaseException:
            writer.discard()
            raise
        writer.commit()

    def _pump(self, reader: Any, writer: Any, tally: Tally) -> None:
        """All of ``reader`` into ``writer``, counted as it moves.

        :raises _Stopped: the run stopped first (the caller drops what was written).
        """
        while data := reader.read(CHUNK):
            if self.stopping:
                raise _Stopped
            writer.write(data)
            tally.moved(len(data))

    def set_meta(self, item: Item) -> None:
        """The source's permission bits and mtime, where it has them, on a POSIX
        destination."""
        path = self.target.join(item.rel)
        mode, mtime = item.info.get("mode"), mtime_of(item.info)
        if self.settings.preserve.mode and isinstance(mode, int):
            os.chmod(path, stat.S_IMODE(mode))
        if self.settings.preserve.times and mtime is not None:
            mtime_ns = round(mtime * 1e9)  # as stat_of reads it back
            os.utime(path, ns=(mtime_ns, mtime_ns))
