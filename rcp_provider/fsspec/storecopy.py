"""Trees to and from any fsspec filesystem: the engine's generic backend.

The engine's fast path copies POSIX trees (:mod:`rcp_core.engine`) and trees on
``rcpd`` hosts; everything else fsspec reaches -- ``memory://``, an object store whose
fsspec package is installed, a local directory seen through fsspec -- is copied here:
slower, generic, with the engine's rules where they apply:

- **operands** as ``rcp``'s: the source is copied to exactly ``destination``, or into
  it under its own name when ``into`` (a trailing ``/``); a missing source, an
  existing destination under ``ExistingPolicy.ERROR`` and a destination inside its
  source are :class:`~rcp_core.errors.UsageError` before anything is written;
- **bounded parallelism**: the source is listed first, directories are made (parents
  first), then at most ``max_workers`` files (default 16) are copied at once, each by
  one thread; the rest wait in a bounded queue;
- **existing files**: ``ERROR`` refuses an existing destination, ``IGNORE_EXISTING``
  keeps every existing file, ``OVERWRITE`` replaces those that differ and ``UPDATE``
  those older than the source; "differ" is by ``overwrite_compare``: the size, and the
  mtime where both sides have one (an object store's time is its upload's, so most
  stores compare by size);
- **refused, never ignored**: what this backend cannot do (:func:`unsupported`:
  filters, mirroring, dry runs, following symlinked directories, owners, extended
  attributes and ACLs, comparing more than size and mtime, helper processes, a
  descriptor budget) is a :class:`~rcp_core.errors.UsageError` before anything is
  written;
- **throttle**: ``ops_throttle`` entries per second at most;
- **nothing half-written under its name**: a POSIX destination file is written to a
  temporary beside it and renamed into place when complete; a store publishes an
  object when its upload ends (the store's own ``put_file``/``open``);
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

The result is the engine's :class:`~rcp_core.summary.Summary`; ``on_progress`` gets
:class:`~rcp_core.progress.Progress` snapshots from a ticker thread.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import logging
import os
import posixpath
import resource
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from rcp_core.errors import CopyFailedError, UnsafeNameError, UsageError
from rcp_core.names import check_relative
from rcp_core.plugins import plugin_manager
from rcp_core.progress import Progress
from rcp_core.runtime import Runtime
from rcp_core.settings import CompareAttr, CopySettings, ExistingPolicy, PreserveAttr
from rcp_core.summary import Resources, Summary, Tally, ThreadTallies

log = logging.getLogger("rcp_core")

DEFAULT_WORKERS = 16
"""Files in flight when the settings do not say (stores answer slowly, in parallel)."""
CHUNK = 4 << 20
"""Bytes read and written at a time between two stores."""
COMPARED = frozenset({CompareAttr.SIZE, CompareAttr.MTIME})
"""What ``overwrite_compare`` may name here: what every fsspec listing can give."""
KEPT = frozenset({PreserveAttr.MODE, PreserveAttr.TIMES})
"""What ``preserve`` may name here: a POSIX destination gets them, a store has none."""


def unsupported(settings: CopySettings) -> list[str]:
    """The options in ``settings`` this backend does not honour, as flags."""
    compare = ",".join(sorted(a.value for a in settings.overwrite_compare - COMPARED))
    preserve = ",".join(sorted(a.value for a in settings.preserve.attrs - KEPT))
    flags = {
        "--delete": settings.delete,
        "--delete-excluded": settings.delete_excluded,
        "--include/--exclude": bool(settings.includes or settings.excludes),
        "--filter-file": settings.filter_file is not None,
        "--gitignore": settings.gitignore,
        "--dereference": settings.dereference,
        "--dry-run": settings.dry_run is not None,
        f"--overwrite-compare {compare}": bool(compare),
        f"--preserve {preserve}": bool(preserve),
        "--max-processes": settings.max_processes is not None,
        "--max-open-files": settings.max_open_files is not None,
        "--link-dest": settings.link_dest is not None,
    }
    return [flag for flag, given in flags.items() if given]


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

    def join(self, rel: str) -> str:
        return posixpath.join(self.path, rel) if rel else self.path


@dataclass(frozen=True, slots=True)
class Item:
    """One entry of the source tree: its path relative to the root, and fsspec's info
    (``type``, ``size``, maybe ``mtime`` and ``mode``); or, with ``unsafe``, a name a
    store listed that is not safe (its info empty), which is only reported."""

    rel: str
    info: dict[str, Any]
    unsafe: UnsafeNameError | None = None

    @property
    def is_dir(self) -> bool:
        return bool(self.info.get("type") == "directory")

    @property
    def is_special(self) -> bool:
        """A FIFO, socket or device of a POSIX source (no store has one)."""
        return bool(self.info.get("type") == "other")


def copy_tree(
    source: Place,
    destination: Place,
    settings: CopySettings | None = None,
    *,
    into: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
    progress_interval: float = 1.0,
) -> Summary:
    """Copy ``source`` to ``destination`` (into it under the source's name with
    ``into``); the summary.

    :raises UsageError: a missing source, an existing destination the policy does not
        allow, a destination inside its source, or settings this backend does not
        honour (:func:`unsupported`); nothing was written.
    :raises CopyFailedError: some entries were not copied (the partial summary).
    :raises Exception: what a worker raised that is no entry error (a store's or this
        code's defect): the copy stopped, and never ends as if it were complete.
    """
    settings = settings or CopySettings()
    refused = unsupported(settings)
    if refused:
        raise UsageError(f"not supported to or from a URL: {', '.join(refused)}")
    started, usage = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    run = _Run(source, _target(source, destination, into, settings), settings)
    ticker = _Ticker(run, on_progress, progress_interval, started)
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
    if counts["errors"]:
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
    if destination.posix and not os.path.isdir(os.path.dirname(path) or "/"):
        raise UsageError(f"{path}: its parent directory does not exist")
    if settings.existing is ExistingPolicy.ERROR and target.fs.exists(path):
        raise UsageError(f"{path} exists (choose a policy that allows changing it)")
    if type(source.fs) is type(target.fs) and (
        path == source.path or path.startswith(source.path.rstrip("/") + "/")
    ):
        raise UsageError(f"{path} is inside its source {source.path}")
    return target


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

    def tally(self) -> Tally:
        """This thread's counters (each thread writes only its own)."""
        return self.counters.mine()

    def copy(self) -> None:
        items = list(_listing(self.source, self.tally()))
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
            if self.target.posix:
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
        if self.stopping:
            return
        if self.throttle is not None:
            self.throttle.take()
        try:
            self.attempt(lambda: action(item, existing.get(item.rel), tally))
        except OSError as exc:
            self.record(tally, self.error(op, item.rel or ".", exc))

    def _special(self, item: Item, there: dict[str, Any] | None, tally: Tally) -> None:
        """A FIFO, socket or device: skipped with ``skip_specials``, else an error."""
        if not self.settings.skip_specials:
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
        self.target.fs.makedirs(self.target.join(item.rel), exist_ok=True)
        tally["copied.dirs"] += 1

    def _copy_file(
        self, item: Item, there: dict[str, Any] | None, tally: Tally
    ) -> None:
        if there is not None and self._keep(item.info, there):
            tally["unchanged.files"] += 1
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
            with (
                self.source.fs.open(src, "rb") as reader,
                self.target.fs.open(dst, "wb") as writer,
            ):
                _pump(reader, writer, tally)
        tally["copied.files"] += 1
        tally["copied.bytes"] += int(item.info.get("size") or 0)

    def _keep(self, info: dict[str, Any], there: dict[str, Any]) -> bool:
        """Whether the existing destination file stays, by the policy."""
        policy = self.settings.existing
        if policy is ExistingPolicy.IGNORE_EXISTING:
            return True
        compare = self.settings.overwrite_compare
        same_size = CompareAttr.SIZE not in compare or (
            info.get("size") == there.get("size")
        )
        mtimes = _mtime(info), _mtime(there)
        if mtimes[0] is None or mtimes[1] is None:
            return same_size
        if policy is ExistingPolicy.UPDATE and mtimes[0] <= mtimes[1]:
            return True
        same_mtime = CompareAttr.MTIME not in compare or (
            int(mtimes[0]) == int(mtimes[1])
        )
        return same_size and same_mtime

    def _to_posix(self, src: str, dst: str, tally: Tally) -> None:
        """Write ``dst`` through a temporary beside it, renamed into place."""
        directory, name = os.path.split(dst)
        temporary = os.path.join(directory, f".rcp-{secrets.token_hex(6)}-{name}")
        try:
            with self.source.fs.open(src, "rb") as reader, open(temporary, "xb") as out:
                _pump(reader, out, tally)
            os.replace(temporary, dst)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise

    def _set_meta(self, item: Item, there: dict[str, Any] | None, tally: Tally) -> None:
        """The source's permission bits and mtime, where it has them, on a POSIX
        destination."""
        path = self.target.join(item.rel)
        mode, mtime = item.info.get("mode"), _mtime(item.info)
        if self.settings.preserve.mode and isinstance(mode, int):
            os.chmod(path, stat.S_IMODE(mode))
        if self.settings.preserve.times and mtime is not None:
            os.utime(path, (mtime, mtime))


def _pump(reader: Any, writer: Any, tally: Tally) -> None:
    """All of ``reader`` into ``writer``, counted as it moves."""
    while data := reader.read(CHUNK):
        writer.write(data)
        tally.moved(len(data))


def _listing(place: Place, tally: Tally) -> Iterator[Item]:
    """Every entry below ``place`` (``place`` itself as ``""``), parents before
    children; a store's names that are not safe come first, as ``unsafe`` items. A
    POSIX tree (its names from this host's kernel) is walked without following
    symlinked directories."""
    if not place.posix:
        tree = tree_infos(place)
        for rel, error in sorted(tree.unsafe.items()):
            yield Item(rel, {}, error)
        for rel, entry in sorted(tree.infos.items()):
            yield Item(rel, entry)
        return
    info = place.fs.info(place.path)
    yield Item("", info)
    if info.get("type") != "directory":
        return
    for top, dirs, files in os.walk(place.path):  # never into a symlinked directory
        rel_top = os.path.relpath(top, place.path)
        for name in sorted(dirs + files):
            path = os.path.join(top, name)
            rel = name if rel_top == "." else os.path.join(rel_top, name)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                try:
                    st = os.stat(path)
                except FileNotFoundError:
                    tally["skipped.symlinks"] += 1  # dangling: nothing to copy
                    continue
                if stat.S_ISDIR(st.st_mode):
                    tally["skipped.symlinks"] += 1
                    continue
            kind = "directory" if stat.S_ISDIR(st.st_mode) else "file"
            if kind == "file" and not stat.S_ISREG(st.st_mode):
                kind = "other"
            yield Item(rel, _posix_info(path, st, kind))


def _posix_info(path: str, st: os.stat_result, kind: str) -> dict[str, Any]:
    return {
        "name": path,
        "type": kind,
        "size": st.st_size,
        "mode": st.st_mode,
        "mtime": st.st_mtime,
    }


def _existing(target: Place) -> dict[str, dict[str, Any]]:
    """What is already at the destination, by relative path ({} if nothing). A name
    there that is not safe is left out: no source entry (all safe) can match it."""
    return tree_infos(target).infos if target.fs.exists(target.path) else {}


@dataclass(frozen=True, slots=True)
class Tree:
    """A tree as its filesystem lists it.

    :param infos: fsspec's infos by safe relative path (:func:`check_relative`), the
        root itself as ``""``.
    :param unsafe: the names listed that are not safe, as listed (relative to the
        root), and why; none of them is in ``infos``, nor is anything below them
        (a name below an unsafe one is unsafe itself).
    """

    infos: dict[str, dict[str, Any]]
    unsafe: dict[str, UnsafeNameError]


def tree_infos(place: Place) -> Tree:
    """The tree at ``place``, listed by fsspec's ``find``. A listed name ending in
    ``/`` (an object store's directory marker) is the directory without it.

    :raises FileNotFoundError: nothing is there.
    """
    info = place.fs.info(place.path)
    tree = Tree({"": info}, {})
    if info.get("type") == "directory":
        listing = place.fs.find(place.path, withdirs=True, detail=True)
        for path, entry in listing.items():
            rel = relative(path, str(info["name"]))
            if not rel:
                continue
            if rel.endswith("/"):
                rel, entry = rel[:-1], {**entry, "type": "directory"}
            try:
                check_relative(rel)
            except UnsafeNameError as exc:
                tree.unsafe[rel] = exc
                continue
            tree.infos.setdefault(rel, entry)
    return tree


def relative(path: str, root: str) -> str | None:
    """``path`` relative to ``root``, as the filesystem names both (a store's root may
    be ``""``); ``None`` outside it."""
    root = root.rstrip("/")
    if not root:
        return path.lstrip("/")
    if path.rstrip("/") == root:
        return ""
    return path[len(root) + 1 :] if path.startswith(root + "/") else None


def _mtime(info: dict[str, Any]) -> float | None:
    """An entry's modification time in seconds, if its filesystem gives one."""
    for key in ("mtime", "LastModified", "last_modified", "updated"):
        value = info.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, datetime.datetime):
            return value.timestamp()
    return None


class _Ticker:
    """Hands ``on_progress`` a snapshot every ``interval`` seconds, and a final one."""

    def __init__(
        self,
        run: _Run,
        on_progress: Callable[[Progress], None] | None,
        interval: float,
        started: float,
    ) -> None:
        self.run, self.on_progress, self.interval = run, on_progress, interval
        self.started = started
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)

    def start(self) -> None:
        if self.on_progress is not None:
            self._thread.start()

    def stop(self) -> None:
        if self.on_progress is None:
            return
        self._stop.set()
        self._thread.join()
        self.on_progress(self._snapshot(final=True))

    def _tick(self) -> None:
        assert self.on_progress is not None
        while not self._stop.wait(self.interval):
            self.on_progress(self._snapshot())

    def _snapshot(self, final: bool = False) -> Progress:
        counts = self.run.counters.merged()
        elapsed = time.monotonic() - self.started
        return Progress(counts, elapsed, self.run.pending, final)
