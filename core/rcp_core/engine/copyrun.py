"""A copy run: plan the storage and concurrency, walk the jobs, summarise.

:class:`Engine` decides everything that is fixed for a run before it starts -- each
job's storage (the plugins' ``rcp_detect_storage``), the concurrency
(``rcp_choose_concurrency`` within the descriptor budget), large-file chunking and
helper processes -- then runs the work items of :mod:`rcp_core.engine.walk` on a
:class:`~rcp_core.run.pool.WorkPool` while the monitor (:mod:`rcp_core.run.monitor`) adapts
the number in flight with :class:`~rcp_core.run.tuning.Controller` and reports progress.
Helper processes (:mod:`rcp_core.engine.helpers.caller`, started on demand by
:mod:`rcp_core.engine.helpers.ondemand`) take file batches off the same pool.

The run ends with a :class:`~rcp_core.run.summary.Summary`, or
:class:`~rcp_core.errors.CopyFailedError` carrying it when anything was not copied;
the ``rcp_run_finished`` hook sees either.
"""

from __future__ import annotations

import logging
import os
import resource
import stat
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from rcp_core.engine.helpers.team import Team

from rcp_core.backends import routing
from rcp_core.backends.capabilities import DECLARED, refuse
from rcp_core.backends.routing import Storage
from rcp_core.engine.context import Context, log
from rcp_core.engine.entries import copy_file, copy_other, copy_symlink
from rcp_core.engine.filters import GitIgnores
from rcp_core.engine.helpers.ondemand import Crew
from rcp_core.engine.tree import DIR_FLAGS, DirNode
from rcp_core.engine.walk import Op, Walker, chunking
from rcp_core.errors import vanished
from rcp_core.paths import Job, plan_jobs
from rcp_core.run.monitor import Monitor, Observer
from rcp_core.run.pool import WorkPool
from rcp_core.run.records import ChangeLog
from rcp_core.run.summary import Resources, Summary, Tally, merge
from rcp_core.run.tuning import Controller
from rcp_core.settings import CopySettings
from rcp_core.site.capacity import choose_concurrency, open_files_budget, storage_of
from rcp_core.site.plugins import BUILTIN, plugin_manager, site_implemented
from rcp_core.site.storage import StorageInfo


class Engine:
    """One copy run. Build it, call :meth:`run` once.

    :param jobs: planned by :func:`rcp_core.paths.plan_jobs`.
    :param plugins: the run's plugin manager (:func:`rcp_core.site.plugins.plugin_manager`
        by default: built-in plugin plus installed site plugins).
    :param on_progress: called from the monitor thread every ``progress_interval``
        seconds, and once at the end, with a :class:`~rcp_core.run.progress.Progress`.
    :param cancel: set it from any thread to stop the run as soon as possible.
    :raises UsageError: settings the local engine does not honour (nothing is
        touched).
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
        local = DECLARED[Storage.LOCAL]
        refuse(settings, routing.Engine.LOCAL, local, local)
        self.jobs = jobs
        self.settings = settings
        self.plugins = plugins or plugin_manager()
        self.hook = self.plugins.hook
        self.max_open_files = open_files_budget(settings)
        storage: Mapping[Job, tuple[StorageInfo, StorageInfo]] = {
            job: (
                # The trees themselves: a source or an existing destination may be a
                # mount point (``rcp /mnt/nfs /data/x``), unlike their parents.
                _source_storage(self.hook, job, settings.dereference),
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
        self.pool = WorkPool(
            self.concurrency.maximum,
            self.concurrency.initial,
            on_crash=lambda exc: self.ctx.stop(f"internal error: {exc!r}"),
            aside=self.concurrency.aside,
        )
        if self.concurrency.chunk_size:
            self.ctx.chunking = chunking(self.pool, self.concurrency.chunk_size)
        self.walker = Walker(self.ctx, self.pool)
        if self.concurrency.aside:
            self.ctx.aside = self.walker.step_aside
        self.crew = self._crew(umask, storage)
        self.observers: list[Observer] = [on_progress] if on_progress else []
        if site_implemented(self.hook.rcp_progress):
            self.observers.append(lambda p: self.hook.rcp_progress(progress=p))
        self.progress_interval = progress_interval
        self.cancel = cancel or threading.Event()
        self.limits: list[int] = []
        """The limits the controller chose, one per tick (for tests and reports)."""

    def _crew(
        self, umask: int, storage: Mapping[Job, tuple[StorageInfo, StorageInfo]]
    ) -> Crew | None:
        """Helper processes, where the concurrency asks for them and they can help
        (built when they start: :mod:`rcp_core.engine.helpers.ondemand`).

        Not for a run without a directory to walk, nor under ``--ops-throttle`` (one
        bucket per process would multiply the rate), nor with plugins a helper cannot
        load itself (registered objects rather than installed entry points).
        """
        helpers = self.concurrency.processes - 1
        if helpers < 1 or self.settings.ops_throttle:
            return None
        if not any(os.path.isdir(job.src) for job in self.jobs):
            return None
        installed = {id(plugin) for plugin, _ in self.plugins.list_plugin_distinfo()}
        for name, plugin in self.plugins.list_name_plugin():
            if name != BUILTIN and id(plugin) not in installed:
                log.debug("plugin %s is not installed: copying in one process", name)
                return None
        asked = self.settings.max_processes is not None

        def build(eager: bool) -> Team:
            # Imported here: a run whose helpers never start (a small tree, a few
            # large files) does not pay for sockets, pickle and subprocess.
            from rcp_core.engine.helpers.channel import Setup
            from rcp_core.engine.helpers.team import Team

            setup = Setup(
                settings=self.settings,
                umask=umask,
                jobs=list(self.jobs),
                storage=[storage[job] for job in self.jobs],
                concurrency=self.concurrency,
                entry_points=bool(installed),
                log_level=logging.getLogger("rcp_core").getEffectiveLevel(),
            )
            return Team(self.walker, setup, helpers, eager=eager)

        return Crew(build, eager=asked, limit=self.concurrency.initial)

    def _start_job(self, tally: Tally, job: Job) -> None:
        try:
            src_fd = os.open(job.src_parent, DIR_FLAGS)
        except FileNotFoundError as exc:  # planned, gone since
            raise vanished(exc) from exc
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
            ignores=GitIgnores.root() if self.ctx.filter.gitignore else None,
        )
        try:
            anchor.dst_dev = os.fstat(dst_fd).st_dev
            try:
                st = os.stat(
                    job.src_name,
                    dir_fd=src_fd,
                    follow_symlinks=self.settings.dereference or job.follow_root,
                )
            except FileNotFoundError as exc:  # planned, gone since
                raise vanished(exc) from exc
        except BaseException:
            anchor.close()
            raise
        walker = self.walker
        walker.hold(anchor)
        tally["found.entries"] += 1
        if stat.S_ISDIR(st.st_mode):
            tally["found.dirs"] += 1
            self.pool.push(walker.visit, anchor, job.src_name, job.dst_name, "")
        else:
            op: Op = copy_file if stat.S_ISREG(st.st_mode) else copy_other
            if stat.S_ISLNK(st.st_mode):
                op = copy_symlink
            self.pool.push(walker.root_entry, anchor, job.src_name, job.dst_name, op)
        walker.release(tally, anchor)

    def run(self) -> Summary:
        """Copy everything; return the summary or raise :class:`CopyFailedError`.

        The ``rcp_run_finished`` hook sees the summary (or the failure) either way.
        The record of changes it keeps (:mod:`rcp_core.run.records`) is complete
        when it returns.
        """
        changes = ChangeLog.of(self.settings)
        self.ctx.record_changes(changes)
        try:
            return self._run()
        finally:
            if changes is not None:
                changes.close()

    def _run(self) -> Summary:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        controller = Controller(self.concurrency) if self.concurrency.adaptive else None
        crew = self.crew
        monitor = Monitor(
            self.pool,
            controller,
            self.observers,
            self.progress_interval,
            self.cancel,
            on_cancel=lambda: self.ctx.stop("cancelled"),
            elsewhere=crew.tallies if crew else (),
            on_backlog=crew.start if crew else None,
            on_limit=crew.set_limit if crew else None,
        )
        setup = Tally()
        self.pool.tallies.append(setup)
        for job in self.jobs:
            try:
                self._start_job(setup, job)
            except OSError as exc:
                self.ctx.record(setup, self.ctx.error("start", job.src, exc))
        monitor.start()
        try:
            if crew is not None and crew.eager:
                crew.start()
            self.pool.run()
        except BaseException as exc:
            self.hook.rcp_run_finished(summary=None, error=exc)
            raise
        finally:
            if crew is not None:
                crew.close()
            monitor.stop()
            self.limits = monitor.limits
            log.debug(
                "concurrency %s: limits %s; helper batches %d",
                self.concurrency,
                ",".join(map(str, self.limits)),
                crew.batches if crew else 0,
            )
        counts = merge([*self.pool.tallies, *(crew.tallies if crew else ())])
        return self.ctx.conclude(
            counts,
            Resources.since(monitor.started, usage, children),
            dry_run=self.settings.dry_run is not None,
        )


def _source_storage(hook: pluggy.HookRelay, job: Job, dereference: bool) -> StorageInfo:
    """The storage of ``job``'s source, or of its parent where the source vanished
    since the job was planned, its nearest existing ancestor's (its start then
    fails as a vanished source, and the run's other jobs go on: an ``rcp-shard``
    unit removed after the plan)."""
    try:
        return storage_of(hook, job.src, dereference or job.follow_root)
    except FileNotFoundError:
        path = job.src_parent
        while not os.path.exists(path):
            path = os.path.dirname(path)
        return storage_of(hook, path)


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
