"""Running a shard plan: copy one shard, then finalize the shared directories.

:func:`copy_shard` creates the plan's *parents* at the destination (``0700``, like any
directory the engine creates; several shards may do so at once), then copies the
shard's units in one run of the :class:`~rcp_core.engine.copyrun.Engine`, one
:class:`~rcp_core.paths.Job` per unit. :func:`finalize`, once every shard is done,
gives the parents their sources' metadata, deepest first. Both are in
:mod:`rcp_core.tools.shards.planner`.

Invariants:

- a shard writes only inside its own units, besides creating the shared parents, so
  shards can run concurrently on one destination;
- every refusal (:class:`~rcp_core.errors.UsageError`) happens before anything is
  written: bad index, settings whose meaning depends on the whole tree (filters,
  ``--delete``, ``-L``, dry runs), a destination that is the source or inside it, a
  non-directory where a parent goes, and, under the default policy, an existing unit;
- parents are merged into whatever the policy: every shard needs them;
- a shard is one engine run, so its summary, progress and ``rcp_run_finished`` call
  are the run's, and names of one inode in any of its units stay hard links (as in
  ``rcp A B DST/``). Shards do not share a run: names in different shards are copied
  as separate files with equal content.
"""

from __future__ import annotations

import os
import resource
import stat
import threading
import time
from collections.abc import Iterable

import pluggy

from rcp_core.engine.context import log
from rcp_core.engine.copyrun import Engine
from rcp_core.engine.metadata import Metadata
from rcp_core.engine.tree import DIR_FLAGS
from rcp_core.errors import EntryError, UsageError
from rcp_core.paths import Job
from rcp_core.run.monitor import Observer
from rcp_core.run.runtime import Runtime
from rcp_core.run.summary import KEYS, Resources, Summary
from rcp_core.settings import CopySettings, ExistingPolicy
from rcp_core.site.plugins import plugin_manager
from rcp_core.tools.shards.manifest import ShardPlan


def _refuse(settings: CopySettings) -> None:
    """Settings whose meaning depends on the whole tree, which a shard does not see."""
    if settings.includes or settings.excludes or settings.filter_file:
        raise UsageError("filters are not supported for a sharded copy")
    if settings.gitignore:
        raise UsageError("--gitignore is not supported for a sharded copy")
    if settings.delete:
        raise UsageError("--delete is not supported for a sharded copy")
    if settings.dereference:
        raise UsageError("-L (dereference) is not supported for a sharded copy")
    if settings.dry_run is not None:
        raise UsageError("a dry run is not supported for a sharded copy")


def _destination(plan: ShardPlan, destination: str | os.PathLike[str]) -> str:
    """The absolute destination root, checked against the source like plan_jobs
    (a machine that does not see the source fails here, not once per unit)."""
    if not os.path.isdir(plan.root):
        raise UsageError(f"source {plan.root!r} is not a directory here")
    dst = os.path.abspath(os.fspath(destination))
    real, source = os.path.realpath(dst), os.path.realpath(plan.root)
    if real == source or real.startswith(source.rstrip("/") + "/"):
        raise UsageError(f"destination {dst!r} is the source or inside it")
    if not os.path.isdir(os.path.dirname(dst)):
        raise UsageError(f"destination parent of {dst!r} does not exist")
    return dst


def _under(dst: str, rel: str) -> str:
    return os.path.join(dst, rel) if rel else dst


def _depth(rel: str) -> int:
    return rel.count("/") + 1 if rel else 0


def _make_parents(plan: ShardPlan, dst: str) -> None:
    """Create the plan's parents ``0700`` (finalize widens them); another shard may
    create the same ones at the same time. A non-directory (or a symlink) in the way
    is refused before anything is created."""
    for rel in plan.parents:
        try:
            st = os.lstat(_under(dst, rel))
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise UsageError(f"destination {_under(dst, rel)!r} is not a directory")
    for rel in plan.parents:  # sorted: ancestors first
        path = _under(dst, rel)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                raise UsageError(f"destination {path!r} is not a directory") from None


def _jobs(plan: ShardPlan, units: Iterable[str], dst: str) -> list[Job]:
    jobs = []
    for rel in units:
        parent, name = os.path.split(rel)
        src_parent, dst_parent = _under(plan.root, parent), _under(dst, parent)
        exists = os.path.lexists(os.path.join(dst_parent, name))
        jobs.append(Job(src_parent, name, dst_parent, name, exists, follow_root=False))
    return jobs


def copy_shard(
    plan: ShardPlan,
    index: int,
    destination: str | os.PathLike[str],
    settings: CopySettings | None = None,
    *,
    plugins: pluggy.PluginManager | Iterable[object] | None = None,
    on_progress: Observer | None = None,
    progress_interval: float = 1.0,
    cancel: threading.Event | None = None,
) -> Summary:
    """Copy shard ``index`` of ``plan`` into ``destination`` (the copy of the root).

    Parents are created here but not counted (:func:`finalize` counts them).
    Arguments as for :func:`rcp_core.copy`.

    :raises UsageError: see the module docstring; nothing was touched.
    :raises CopyFailedError: some entries failed; ``.summary`` has the partial counts.
    """
    start = time.monotonic()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    settings = settings or CopySettings()
    _refuse(settings)
    if not 0 <= index < len(plan.shards):
        raise UsageError(f"shard {index} does not exist (plan has {len(plan.shards)})")
    shard = plan.shards[index]
    dst = _destination(plan, destination)
    if settings.existing is ExistingPolicy.ERROR:
        for rel in shard.units:
            if os.path.lexists(os.path.join(dst, rel)):
                raise UsageError(
                    f"destination {os.path.join(dst, rel)!r} exists "
                    "(use --overwrite, --update or --ignore-existing)"
                )
    if not isinstance(plugins, pluggy.PluginManager):
        plugins = plugin_manager(plugins or ())
    _make_parents(plan, dst)
    if not shard.units:
        # No unit (an empty tree): no job for the engine, but the root exists now.
        summary = Summary(
            counts=dict.fromkeys(KEYS, 0),
            resources=Resources.since(start, usage, children),
        )
        plugins.hook.rcp_run_finished(summary=summary, error=None)
        return summary
    log.debug("copying shard %d: %d unit(s)", index, len(shard.units))
    engine = Engine(
        _jobs(plan, shard.units, dst),
        settings,
        plugins=plugins,
        on_progress=on_progress,
        progress_interval=progress_interval,
        cancel=cancel,
    )
    return engine.run()


def finalize(
    plan: ShardPlan,
    destination: str | os.PathLike[str],
    settings: CopySettings | None = None,
) -> int:
    """Give the plan's parents at ``destination`` their sources' metadata (what
    ``settings.preserve`` keeps), deepest first; return how many were set.

    Run it after every shard finished. Every directory is tried; the first failure is
    raised afterwards (transient ones, as this host's site plugins classify them, are
    retried first).

    :raises UsageError: a parent is missing at the destination (a shard did not run)
        or is not a directory; nothing was changed.
    :raises EntryError: setting some directory's metadata failed.
    """
    settings = settings or CopySettings()
    dst = os.path.abspath(os.fspath(destination))
    for rel in plan.parents:
        path = _under(dst, rel)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            raise UsageError(
                f"destination directory {path!r} is missing: did every shard run?"
            ) from None
        if not stat.S_ISDIR(st.st_mode):
            raise UsageError(f"destination {path!r} is not a directory")
    umask = os.umask(0o022)
    os.umask(umask)
    metadata = Metadata(settings.preserve, umask)
    run = Runtime(
        plugin_manager().hook,
        retries=settings.retries,
        retry_delay=settings.retry_delay,
        fail_early=False,
    )
    done = 0
    failures: list[EntryError] = []
    for rel in sorted(plan.parents, key=lambda r: (-_depth(r), r)):
        # The root may be a symlink to the tree, as in plan_shards; nothing below is.
        nofollow = os.O_NOFOLLOW if rel else 0

        def apply(rel: str = rel, nofollow: int = nofollow) -> None:
            src_fd = os.open(_under(plan.root, rel), DIR_FLAGS | nofollow)
            try:
                dst_fd = os.open(_under(dst, rel), DIR_FLAGS | os.O_NOFOLLOW)
                try:
                    st = os.fstat(src_fd)
                    metadata.apply(src_fd, dst_fd, st, is_dir=True, times=True)
                finally:
                    os.close(dst_fd)
            finally:
                os.close(src_fd)

        try:
            run.attempt(apply)
        except OSError as exc:
            failures.append(EntryError("set directory metadata", rel or ".", exc))
        else:
            done += 1
    if failures:
        log.warning("finalize: %d directory metadata failure(s)", len(failures))
        raise failures[0]
    return done
