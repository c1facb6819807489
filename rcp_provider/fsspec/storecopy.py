"""Trees to and from any fsspec filesystem: the engine's generic backend.

The engine's fast path copies POSIX trees (:mod:`rcp_core.engine`) and trees on
``rcpd`` hosts; everything else fsspec reaches -- ``memory://``, an object store whose
fsspec package is installed, a local directory seen through fsspec -- is copied here:
slower, generic, with the engine's rules where they apply:

- **operands** as ``rcp``'s: the source is copied to exactly ``destination``, or into
  it under its own name when ``into`` (a trailing ``/``); a missing source, an
  existing destination under ``ExistingPolicy.ERROR``, a missing parent directory on
  a filesystem with directories (not an object store's prefix) and a destination
  inside its source are :class:`~rcp_core.errors.UsageError` before anything is
  written;
- **bounded parallelism**: the source is listed first, directories are made (parents
  first), then at most ``max_workers`` files (default 16) are copied at once, each by
  one thread; the rest wait in a bounded queue;
- **existing files**: by the local copy's rules (:func:`rcp_core.existing.decide`):
  ``ERROR`` refuses an existing destination, ``IGNORE_EXISTING`` keeps every existing
  file, ``OVERWRITE`` replaces those that differ and ``UPDATE`` those older than the
  source; "differ" is by ``overwrite_compare``: the size, and the
  mtime where both sides keep settable ones (:attr:`Capability.MTIMES`: an object
  store's time is its upload's, never the source's, so a pair with a store compares
  by size, and ``UPDATE`` replaces what differs in size);
- **refused, never ignored**: what this engine or the pair cannot do
  (:func:`rcp_core.backends.capabilities.refusals`: filters, mirroring, following
  symlinked directories, ``--preserve`` of what a side does not keep,
  comparing more than size and mtime, helper processes, a descriptor budget) is a
  :class:`~rcp_core.errors.UsageError` before anything is written;
- **cancel**: setting ``cancel`` stops the copy: no file is started after it, a file
  being copied stops at its next chunk and is never published, and the run raises
  :class:`~rcp_core.errors.CopyFailedError` (``stopped``);
- **dry runs**: with ``dry_run``, nothing is written; each decision is said in the
  local copy's words (:meth:`rcp_core.settings.DryRun.line`: ``would copy``,
  ``would replace``, ``unchanged``, ``keep``, with the reason at ``explain``);
- **throttle**: ``ops_throttle`` entries per second at most;
- **nothing half-written under its name**: a POSIX destination file is written to a
  temporary beside it and renamed into place when complete; a store's file is opened
  with ``autocommit=False`` and committed only once every byte is written (discarded
  otherwise), and a local file's upload (``put_file``) publishes the object when it
  ends;
- **metadata**: a POSIX destination gets the source's mtime and permission bits where
  the source has them (``preserve``), directories after their files;
- **errors**: the run runtime's (:class:`rcp_core.runtime.Runtime`): transient ones,
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
:mod:`rcp_provider.fsspec.storetree`. This module is over 400 lines because the
engine's per-entry operations, its run and its progress live together until the
per-directory walk replaces the whole-tree listing (issue 24's next step).

The result is the engine's :class:`~rcp_core.summary.Summary`; ``on_progress`` gets
:class:`~rcp_core.progress.Progress` snapshots from a ticker thread.
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
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from rcp_core.backends.capabilities import Capability, refuse
from rcp_core.backends.routing import Engine
from rcp_core.errors import CopyFailedError, UsageError
from rcp_core.existing import NEW, Action, decide
from rcp_core.plugins import plugin_manager
from rcp_core.progress import Progress
from rcp_core.runtime import Runtime
from rcp_core.settings import CompareAttr, CopySettings, ExistingPolicy
from rcp_core.summary import Resources, Summary, Tally, ThreadTallies
from rcp_provider.fsspec.storetree import (
    Item,
    Place,
    mtime_of,
    source_items,
    stat_of,
    tree_infos,
)

log = logging.getLogger("rcp_core")

DEFAULT_WORKERS = 16
"""Files in flight when the settings do not say (stores answer slowly, in parallel)."""
CHUNK = 4 << 20
"""Bytes read and written at a time between two stores."""
CANCEL_POLL = 0.1
"""Seconds between looks at a cancel request."""


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
    run = _Run(source, _target(source, destination, into, settings), settings)
    ticker = _Ticker(run, on_progress, progress_interval, started, cancel)
    ticker.start()
    try:
        run.copy()
    finally:
        ticker.stop()
    if run.crash is not None:
        raise run.crash
    counts = run.counters.merged()
    summary = Summary(
        counts, Resources.since(started, usage), tuple(run.errors.report())
    )
    if counts["errors"] or run.stop_reason == "cancelled":
        raise CopyFailedError(summary, list(summary.errors), run.stopping)
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
    if (
        destination.backend.has(Capability.DIRECTORIES)
        and parent
        and not destination.fs.isdir(parent)
    ):
        raise UsageError(f"{path}: its parent directory does not exist")
    if settings.existing is ExistingPolicy.ERROR and target.fs.exists(path):
        raise UsageError(f"{path} exists (choose a policy that allows changing it)")
    if type(source.fs) is type(target.fs) and (
        path == source.path or path.startswith(source.path.rstrip("/") + "/")
    ):
        raise UsageError(f"{path} is inside its source {source.path}")
    return target


class _Stopped(Exception):
    """A file's copy abandoned because the run stopped."""


class _Run(Runtime):
    """One copy's state: its runtime (errors, retries, stop, throttle, classified by
    this host's site plugins) and its tallies (one per thread)."""

    def __init__(self, source: Place, target: Place, settings: CopySettings) -> None:
        super().__init__(
            plugin_manager().hook,
            retries=settings.retries,
            retry_delay=settings.retry_delay,
            fail_early=settings.fail_early,
            ops_throttle=settings.ops_throttle,
        )
        self.source, self.target, self.settings = source, target, settings
        self.counters = ThreadTallies()
        self.pending = 0
        self.crash: BaseException | None = None
        """The first exception a worker raised that is no entry error."""
        self._lock = threading.Lock()
        self.workers = settings.max_workers or DEFAULT_WORKERS
        self._room = threading.BoundedSemaphore(2 * self.workers)
        """Files submitted and not yet done: the workers' and as many waiting."""
        self.timed = all(
            place.backend.has(Capability.MTIMES) for place in (source, target)
        )
        """Whether mtimes tell files apart: both sides keep settable ones."""

    def tally(self) -> Tally:
        """This thread's counters (each thread writes only its own)."""
        return self.counters.mine()

    def copy(self) -> None:
        items = list(source_items(self.source, self.tally()))
        existing = _existing(self.target)
        for item in items:
            if item.unsafe is not None:
                self._attempt("list", item, self._unsafe, existing)
        items = [item for item in items if item.unsafe is None]
        dirs = [item for item in items if item.is_dir]
        for item in sorted(dirs, key=lambda item: item.rel.count("/")):
            self._attempt("create directory", item, self._make_dir, existing)
        for item in items:
            if item.is_special:
                self._attempt("copy", item, self._special, existing)
        files = [item for item in items if not item.is_dir and not item.is_special]
        self._parallel(files, existing)
        for item in sorted(dirs, key=lambda item: -item.rel.count("/")):
            if self.target.posix and self.settings.dry_run is None:
                self._attempt("set metadata", item, self._set_meta, existing)

    def _parallel(self, files: list[Item], existing: dict[str, dict[str, Any]]) -> None:
        """Copy ``files``, ``max_workers`` at once; at most twice that many wait."""
        log.debug(
            "store copy: %d files, %d in flight at most", len(files), self.workers
        )
        with ThreadPoolExecutor(self.workers, thread_name_prefix="rcp-store") as pool:
            for item in files:
                if self.stopping:
                    break
                self._room.acquire()
                with self._lock:
                    self.pending += 1
                future = pool.submit(
                    self._attempt, "copy", item, self._copy_file, existing
                )
                future.add_done_callback(self._done)

    def _done(self, future: Future[None]) -> None:
        """A file's copy ended; one that raised what is no entry error (a bug, a
        store's) stops the run, which raises it (:attr:`crash`)."""
        crash = future.exception()
        with self._lock:
            self.pending -= 1
            if crash is not None and self.crash is None:
                self.crash = crash
        if crash is not None:
            self.stop(f"internal error: {crash!r}")
        self._room.release()

    def _attempt(
        self,
        op: str,
        item: Item,
        action: Callable[[Item, dict[str, Any] | None, Tally], None],
        existing: dict[str, dict[str, Any]],
    ) -> None:
        """Run ``action`` for ``item`` (transient errors retried); count a failure."""
        tally = self.tally()
        if self.throttle is not None and not self.stopping:
            self.throttle.take()  # may wait: the run may stop meanwhile
        if self.stopping:
            return
        try:
            self.attempt(lambda: action(item, existing.get(item.rel), tally))
        except _Stopped:
            return  # left as it was: the stop is the run's outcome, not this entry's
        except OSError as exc:
            self.record(tally, self.error(op, item.rel or ".", exc))

    def _special(self, item: Item, there: dict[str, Any] | None, tally: Tally) -> None:
        """A FIFO, socket or device: skipped with ``skip_specials``, else an error."""
        if self.settings.skip_specials:
            self._dry("skip", "special", item, "--skip-specials")
        else:
            raise OSError(
                errno.EOPNOTSUPP,
                "a FIFO, socket or device cannot be copied to or from a URL "
                "(--skip-specials skips it)",
            )
        tally["skipped.specials"] += 1

    def _unsafe(self, item: Item, there: dict[str, Any] | None, tally: Tally) -> None:
        """A name that is not safe: an ``EINVAL`` entry error, and nothing is read or
        written."""
        assert item.unsafe is not None
        reason = f"unsafe name: {item.unsafe.reason}"
        raise OSError(errno.EINVAL, reason) from item.unsafe

    def _make_dir(self, item: Item, there: dict[str, Any] | None, tally: Tally) -> None:
        if there is not None and there.get("type") == "directory":
            tally["unchanged.dirs"] += 1
            return
        tally["copied.dirs"] += 1
        if not self._dry("create", "dir", item, NEW):
            self.target.fs.makedirs(self.target.join(item.rel), exist_ok=True)

    def _copy_file(
        self, item: Item, there: dict[str, Any] | None, tally: Tally
    ) -> None:
        action, reason = (
            (Action.REPLACE, NEW) if there is None else (self._decision(item, there))
        )
        if action is Action.UNCHANGED:
            tally["unchanged.files"] += 1
            self._dry("unchanged", "file", item, reason)
            return
        if action is Action.KEEP:
            tally["skipped.files"] += 1
            self._dry("keep", "file", item, reason)
            return
        size = int(item.info.get("size") or 0)
        if self._dry("copy" if there is None else "replace", "file", item, reason):
            tally["copied.files"] += 1
            tally["copied.bytes"] += size
            return
        src, dst = self.source.join(item.rel), self.target.join(item.rel)
        if self.target.posix:
            self._to_posix(src, dst, tally)
            self._set_meta(item, there, tally)
        elif self.source.posix:
            self.target.fs.put_file(src, dst)
            tally.moved(int(item.info.get("size") or 0))
        elif self.source.fs is self.target.fs:
            self.target.fs.cp_file(src, dst)
            tally.moved(int(item.info.get("size") or 0))
        else:
            with self.source.fs.open(src, "rb") as reader:
                self._publish(reader, dst, tally)
        tally["copied.files"] += 1
        tally["copied.bytes"] += int(item.info.get("size") or 0)

    def _decision(self, item: Item, there: dict[str, Any]) -> tuple[Action, str]:
        """What the policy does with the existing ``there``: the local copy's rules
        (:func:`rcp_core.existing.decide`) on both sides' infos. Where a side has no
        settable mtime (:attr:`timed` false) times tell nothing: ``mtime`` is not
        compared and ``update`` replaces what differs, as ``overwrite`` does."""
        policy, compare = self.settings.existing, self.settings.overwrite_compare
        if not self.timed:
            compare = compare - {CompareAttr.MTIME}
            if policy is ExistingPolicy.UPDATE:
                policy = ExistingPolicy.OVERWRITE
        return decide(policy, compare, stat_of(item.info), stat_of(there))

    def _dry(self, action: str, kind: str, item: Item, reason: str) -> bool:
        """Say one dry-run line (:meth:`DryRun.line`, the one phrasing); whether
        this is a dry run (then nothing is written)."""
        if self.settings.dry_run is None:
            return False
        line = self.settings.dry_run.line(
            action, kind, self.target.join(item.rel), reason
        )
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

    def _set_meta(self, item: Item, there: dict[str, Any] | None, tally: Tally) -> None:
        """The source's permission bits and mtime, where it has them, on a POSIX
        destination."""
        path = self.target.join(item.rel)
        mode, mtime = item.info.get("mode"), mtime_of(item.info)
        if self.settings.preserve.mode and isinstance(mode, int):
            os.chmod(path, stat.S_IMODE(mode))
        if self.settings.preserve.times and mtime is not None:
            mtime_ns = round(mtime * 1e9)  # as stat_of reads it back
            os.utime(path, ns=(mtime_ns, mtime_ns))


def _existing(target: Place) -> dict[str, dict[str, Any]]:
    """What is already at the destination, by relative path ({} if nothing). A name
    there that is not safe is left out: no source entry (all safe) can match it."""
    return tree_infos(target).infos if target.fs.exists(target.path) else {}


class _Ticker:
    """Hands ``on_progress`` a snapshot every ``interval`` seconds, and a final one;
    stops the run within :data:`CANCEL_POLL` seconds of ``cancel`` being set."""

    def __init__(
        self,
        run: _Run,
        on_progress: Callable[[Progress], None] | None,
        interval: float,
        started: float,
        cancel: threading.Event | None,
    ) -> None:
        self.run, self.on_progress, self.interval = run, on_progress, interval
        self.started, self.cancel = started, cancel
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)

    def start(self) -> None:
        if self.on_progress is not None or self.cancel is not None:
            self._thread.start()

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self._stop.set()
        self._thread.join()
        if self.on_progress is not None:
            self.on_progress(self._snapshot(final=True))

    def _tick(self) -> None:
        shown = time.monotonic()
        while not self._stop.wait(CANCEL_POLL if self.cancel else self.interval):
            if self.cancel is not None and self.cancel.is_set():
                self.run.stop("cancelled")
            if self.on_progress is not None and (
                time.monotonic() - shown >= self.interval
            ):
                shown = time.monotonic()
                self.on_progress(self._snapshot())

    def _snapshot(self, final: bool = False) -> Progress:
        counts = self.run.counters.merged()
        elapsed = time.monotonic() - self.started
        return Progress(counts, elapsed, self.run.pending, final)
