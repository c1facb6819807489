"""The copy run: work items over open directory descriptors, served by a work pool.

Work items (run by :class:`~rcp_core.pool.WorkPool`) are:

- *visit* a directory: open it relative to its parent, create or reuse its
  destination, then scan it;
- *scan* a chunk of a directory's entries (``os.scandir`` on the descriptor): child
  directories become visit items, other entries become batches; an unfinished scan
  pushes its own continuation *below* its children;
- copy a *batch* of entries of one directory (small files share one item; a batch
  splits itself when other workers are idle, so large files still spread).

Workers pop the most recent item first, so the walk is depth-first and the stack holds
at most about ``SCAN_CHUNK`` items per directory on the current paths: memory stays
flat however large the tree is. Threads release the GIL in every syscall, which is
where a copy spends its time on parallel and network filesystems.

Before the run, the plugins (:mod:`rcp_core.plugins`) describe each job's storage and
choose the concurrency; during it, the monitor (:mod:`rcp_core.monitor`) adapts the
number of items in flight with :class:`~rcp_core.tuning.Controller`.

A directory is finished (metadata applied, ``--delete`` pruning, descriptors closed)
when the last item referring to it completes; see :mod:`rcp_core.tree`.
"""

from __future__ import annotations

import os
import resource
import stat
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import pluggy

from rcp_core.capacity import choose_concurrency, open_files_budget, storage_of
from rcp_core.chunks import Chunking
from rcp_core.context import Context, log
from rcp_core.dirs import finish_dir, gitignores, make_dst_dir
from rcp_core.entries import copy_file, copy_other, copy_symlink
from rcp_core.errors import CopyFailedError, Kind, retrying
from rcp_core.filters import GitIgnores, Verdict
from rcp_core.monitor import Monitor, Observer
from rcp_core.paths import Job, plan_jobs
from rcp_core.plugins import plugin_manager, site_implemented
from rcp_core.pool import WorkPool
from rcp_core.settings import CopySettings
from rcp_core.storage import StorageInfo
from rcp_core.summary import Resources, Summary, Tally, merge
from rcp_core.tree import DIR_FLAGS, DirNode
from rcp_core.tuning import Controller

if TYPE_CHECKING:
    from os import _ScandirIterator as ScandirIterator

SCAN_CHUNK = 256
BATCH = 32

Op = Callable[[Context, Tally, DirNode, str, str, str], None]
"""Copies one non-directory entry: ``op(ctx, tally, node, name, dst_name, rel)``."""


class Engine:
    """One copy run. Build it, call :meth:`run` once.

    :param jobs: planned by :func:`rcp_core.paths.plan_jobs`.
    :param plugins: the run's plugin manager (:func:`rcp_core.plugins.plugin_manager`
        by default: built-in plugin plus installed site plugins).
    :param on_progress: called from the monitor thread every ``progress_interval``
        seconds, and once at the end, with a :class:`~rcp_core.progress.Progress`.
    :param cancel: set it from any thread to stop the run as soon as possible.
    """

    def __init__(
        self,
        jobs: Sequence[Job],
        settings: CopySettings,
        *,
        plugins: pluggy.PluginManager | None = None,
        on_progress: Observer | None = None,
        progress_interval: float = 1.0,
        cancel: threading.Event | None = None,
    ) -> None:
        self.jobs = jobs
        self.settings = settings
        self.hook = (plugins or plugin_manager()).hook
        self.max_open_files = open_files_budget(settings)
        storage: Mapping[Job, tuple[StorageInfo, StorageInfo]] = {
            job: (
                # The trees themselves: a source or an existing destination may be a
                # mount point (``rcp /mnt/nfs /data/x``), unlike their parents.
                storage_of(self.hook, job.src, settings.dereference or job.follow_root),
                storage_of(
                    self.hook,
                    job.dst if job.dst_exists else job.dst_parent,
                    follow=False,
                ),
            )
            for job in jobs
        }
        self.concurrency = choose_concurrency(
            self.hook, storage.values(), settings, self.max_open_files
        )
        umask = os.umask(0o022)
        os.umask(umask)
        self.ctx = Context(settings, umask, self.hook, storage)
        self.retry = retrying(settings.retries, settings.retry_delay)
        self.pool = WorkPool(
            self.concurrency.maximum,
            self.concurrency.initial,
            on_crash=lambda exc: self.ctx.stop(f"internal error: {exc!r}"),
        )
        if self.concurrency.chunk_size:
            self.ctx.chunking = Chunking(
                self.concurrency.chunk_size,
                spawn=lambda work: self.pool.push(_help, work),
                helpers=lambda: self.pool.limit - 1,
            )
        self.observers: list[Observer] = [on_progress] if on_progress else []
        if site_implemented(self.hook.rcp_progress):
            self.observers.append(lambda p: self.hook.rcp_progress(progress=p))
        self.progress_interval = progress_interval
        self.cancel = cancel or threading.Event()
        self._pending_lock = threading.Lock()
        self.limits: list[int] = []
        """The limits the controller chose, one per tick (for tests and reports)."""

    def _hold(self, node: DirNode, n: int = 1) -> None:
        with self._pending_lock:
            node.pending += n

    def _release(self, tally: Tally, node: DirNode | None) -> None:
        """Drop one reference; finish each directory whose last reference this was."""
        while node is not None:
            with self._pending_lock:
                node.pending -= 1
                if node.pending:
                    return
            parent = node.parent
            finish_dir(self.ctx, tally, node, self._guarded)
            node = parent

    # -- entries ----------------------------------------------------------------

    def _guarded(
        self, tally: Tally, node: DirNode, op: str, rel: str, fn: Callable[[], None]
    ) -> bool:
        """Run ``fn``, retrying transient errors; record others. ``True`` on success."""
        try:
            try:
                fn()
            except OSError as exc:
                kind = self.ctx.classify(exc, node)
                if kind is not Kind.TRANSIENT or not self.settings.retries:
                    raise
                self.retry(fn, lambda e: self.ctx.classify(e, node))
        except OSError as exc:
            error = self.ctx.error(op, node.display(rel), exc, node)
            self.ctx.fail(tally, node, error)
            return False
        return True

    def _entry(
        self, tally: Tally, node: DirNode, name: str, dst_name: str, rel: str, op: Op
    ) -> None:
        ctx = self.ctx
        if ctx.throttle is not None:
            ctx.throttle.take()
        if self._guarded(
            tally,
            node,
            "copy",
            rel,
            lambda: op(ctx, tally, node, name, dst_name, rel),
        ):
            node.has_content = True

    def _batch(self, tally: Tally, node: DirNode, batch: list[tuple[str, Op]]) -> None:
        for i, (name, op) in enumerate(batch):
            if self.ctx.stopping:
                break
            if self.pool.starving and len(batch) - i > 1:
                # Others are idle: give them the rest, so big files spread out.
                self._hold(node)
                self.pool.push(self._batch, node, batch[i + 1 :])
                self._entry(tally, node, name, name, node.child_rel(name), op)
                break
            self._entry(tally, node, name, name, node.child_rel(name), op)
        self._release(tally, node)

    # -- directories ------------------------------------------------------------

    def _visit(
        self, tally: Tally, parent: DirNode, name: str, dst_name: str, rel: str
    ) -> None:
        """Open the source directory, create or reuse its destination, scan it."""
        node: DirNode | None = None
        if not self.ctx.stopping:
            holder: list[DirNode | None] = [None]

            def open_dir() -> None:
                holder[0] = self._open_dir(tally, parent, name, dst_name, rel)

            self._guarded(tally, parent, "copy directory", rel, open_dir)
            node = holder[0]
        if node is None:
            self._release(tally, parent)
            return
        self._scan(tally, node, None)

    def _open_dir(
        self, tally: Tally, parent: DirNode, name: str, dst_name: str, rel: str
    ) -> DirNode | None:
        ctx = self.ctx
        follow = ctx.settings.dereference or (
            parent.job is not None and parent.job.follow_root
        )
        flags = DIR_FLAGS if follow else DIR_FLAGS | os.O_NOFOLLOW
        src_fd = os.open(name, flags, dir_fd=parent.src_fd)
        try:
            st = os.fstat(src_fd)
            if ctx.settings.dereference and parent.ancestors_contain(st):
                raise OSError(40, "symlink loop: directory contains itself", name)
            decision = (
                ctx.filter.decide(
                    rel,
                    True,
                    under_include=parent.under_include,
                    ignores=parent.ignores,
                )
                if ctx.filter.active and rel
                else None
            )
            node = DirNode(
                parent=parent,
                name=name,
                dst_name=dst_name,
                rel=rel,
                src_fd=src_fd,
                dst_fd=None,
                st=st,
                anchor=parent.anchor or parent,
                under_include=parent.under_include
                or (decision is not None and decision.verdict is Verdict.INCLUDE),
                traverse_only=decision is not None
                and decision.verdict is Verdict.TRAVERSE,
                ignores=parent.ignores,
            )
            if not make_dst_dir(self.ctx, tally, parent, node):
                os.close(src_fd)
                return None
        except BaseException:
            os.close(src_fd)
            raise
        if ctx.filter.gitignore:
            node.ignores = gitignores(node)
        return node

    def _classify(self, entry: os.DirEntry[str]) -> Op | None:
        """The copy op for a non-directory entry; ``None`` means it is a directory.

        An entry whose type cannot be read (a -L loop, a vanished entry) goes to
        ``copy_other``, which reports it as that entry's error.
        """
        follow = self.settings.dereference
        try:
            if entry.is_dir(follow_symlinks=follow):
                return None
            if entry.is_file(follow_symlinks=follow):
                return copy_file
        except OSError:
            return copy_other
        if entry.is_symlink() and not follow:
            return copy_symlink
        return copy_other

    def _scan(
        self, tally: Tally, node: DirNode, it: ScandirIterator[str] | None
    ) -> None:
        """Read up to ``SCAN_CHUNK`` entries and push their work; continue later."""
        ctx = self.ctx
        try:
            if it is None:
                it = os.scandir(node.src_fd)
            if ctx.stopping:
                it.close()
                self._release(tally, node)
                return
            dirs: list[tuple[str, str]] = []
            files: list[tuple[str, Op]] = []
            done = True
            filtering = ctx.filter.active
            for entry in it:
                name = entry.name
                op = self._classify(entry)
                if filtering and not self._included(tally, node, name, op is None):
                    continue
                if op is None:
                    dirs.append((name, node.child_rel(name)))
                else:
                    files.append((name, op))
                if len(dirs) + len(files) >= SCAN_CHUNK:
                    done = False
                    break
        except OSError as exc:
            self.ctx.fail(
                tally,
                node,
                self.ctx.error("read directory", node.display(node.rel), exc, node),
            )
            if it is not None:
                it.close()
            self._release(tally, node)
            return
        if not done:
            self._hold(node)
            self.pool.push(self._scan, node, it)
        else:
            it.close()
        self._hold(node, len(dirs) + (len(files) + BATCH - 1) // BATCH)
        for start in range(0, len(files), BATCH):
            self.pool.push(self._batch, node, files[start : start + BATCH])
        for name, rel in dirs:
            self.pool.push(self._visit, node, name, name, rel)
        self._release(tally, node)

    def _included(self, tally: Tally, node: DirNode, name: str, is_dir: bool) -> bool:
        rel = node.child_rel(name)
        decision = self.ctx.filter.decide(
            rel, is_dir, under_include=node.under_include, ignores=node.ignores
        )
        if decision.verdict is not Verdict.EXCLUDE:
            return True
        kind = "dir" if is_dir else "entry"
        tally["skipped.dirs" if is_dir else "skipped.files"] += 1
        self.ctx.dry("skip", kind, node, rel, f"excluded by {decision.pattern}")
        return False

    # -- the run ----------------------------------------------------------------

    def _start_job(self, tally: Tally, job: Job) -> None:
        ctx = self.ctx
        src_fd = os.open(job.src_parent, DIR_FLAGS)
        try:
            dst_fd = os.open(job.dst_parent, DIR_FLAGS)
        except BaseException:
            os.close(src_fd)
            raise
        anchor = DirNode(
            parent=None,
            name="",
            dst_name="",
            rel="",
            src_fd=src_fd,
            dst_fd=dst_fd,
            st=None,
            anchor=None,
            job=job,
            fresh=False,
            ignores=GitIgnores.root() if ctx.filter.gitignore else None,
        )
        try:
            anchor.dst_dev = os.fstat(dst_fd).st_dev
            st = os.stat(
                job.src_name,
                dir_fd=src_fd,
                follow_symlinks=self.settings.dereference or job.follow_root,
            )
        except BaseException:
            anchor.close()
            raise
        if stat.S_ISDIR(st.st_mode):
            self._hold(anchor)
            self.pool.push(self._visit, anchor, job.src_name, job.dst_name, "")
        else:
            op: Op = copy_file if stat.S_ISREG(st.st_mode) else copy_other
            if stat.S_ISLNK(st.st_mode):
                op = copy_symlink
            self._hold(anchor)
            self.pool.push(self._root_entry, anchor, job, op)
        self._release(tally, anchor)

    def _root_entry(self, tally: Tally, anchor: DirNode, job: Job, op: Op) -> None:
        self._entry(tally, anchor, job.src_name, job.dst_name, "", op)
        self._release(tally, anchor)

    def run(self) -> Summary:
        """Copy everything; return the summary or raise :class:`CopyFailedError`.

        The ``rcp_run_finished`` hook sees the summary (or the failure) either way.
        """
        usage = resource.getrusage(resource.RUSAGE_SELF)
        controller = Controller(self.concurrency) if self.concurrency.adaptive else None
        monitor = Monitor(
            self.pool,
            controller,
            self.observers,
            self.progress_interval,
            self.cancel,
            on_cancel=lambda: self.ctx.stop("cancelled"),
        )
        setup = Tally()
        self.pool.tallies.append(setup)
        for job in self.jobs:
            try:
                self._start_job(setup, job)
            except OSError as exc:
                setup["errors"] += 1
                self.ctx.errors.add(self.ctx.error("start", job.src_name, exc))
        monitor.start()
        try:
            self.pool.run()
        except BaseException as exc:
            self.hook.rcp_run_finished(summary=None, error=exc)
            raise
        finally:
            monitor.stop()
            self.limits = monitor.limits
            log.debug(
                "concurrency %s: limits %s",
                self.concurrency,
                ",".join(map(str, self.limits)),
            )
        counts = merge(self.pool.tallies)
        summary = Summary(
            counts=counts,
            resources=Resources.since(monitor.started, usage),
            errors=tuple(self.ctx.errors.report()),
            dry_run=self.settings.dry_run is not None,
        )
        failure: CopyFailedError | None = None
        if counts["errors"] or self.ctx.stop_reason == "cancelled":
            failure = CopyFailedError(
                summary, list(summary.errors), stopped=self.ctx.stopping
            )
        self.hook.rcp_run_finished(summary=summary, error=failure)
        if failure is not None:
            raise failure
        return summary


def _help(tally: Tally, work: Callable[[], None]) -> None:
    """A pool item that helps copy another worker's large file."""
    work()


def copy(
    sources: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    destination: str | os.PathLike[str],
    settings: CopySettings | None = None,
    *,
    plugins: pluggy.PluginManager | Iterable[object] | None = None,
    on_progress: Observer | None = None,
    progress_interval: float = 1.0,
    cancel: threading.Event | None = None,
) -> Summary:
    """Copy ``sources`` to ``destination`` with rcp's operand rules.

    A ``destination`` string ending in ``/`` means "into this directory" (needed for
    several sources); otherwise it is the exact name of the copy.

    :param plugins: a plugin manager, or plugin objects to register besides the
        built-in and installed ones (tests, per-call overrides).
    :raises UsageError: bad operands or settings; nothing was touched.
    :raises CopyFailedError: some entries failed; ``.summary`` has the partial counts.
    """
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    operands = [os.fspath(s) for s in sources] + [os.fspath(destination)]
    settings = settings or CopySettings()
    jobs = plan_jobs(operands, settings)
    log.debug("copying %d source(s)", len(jobs))
    if not isinstance(plugins, pluggy.PluginManager):
        plugins = plugin_manager(plugins or ())
    return Engine(
        jobs,
        settings,
        plugins=plugins,
        on_progress=on_progress,
        progress_interval=progress_interval,
        cancel=cancel,
    ).run()
