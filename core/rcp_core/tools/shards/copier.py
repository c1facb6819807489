"""Running a shard plan: copy one shard, then finalize the shared directories.

:func:`copy_shard` creates the plan's *parents* at the destination (several shards
may do so at once), then copies the shard's units in one run. :func:`finalize`, once
every shard is done, gives the parents their sources' metadata, deepest first. Both
are in :mod:`rcp_core.tools.shards.planner`.

Between paths of this host, a shard is one run of the local
:class:`~rcp_core.engine.copyrun.Engine`, one :class:`~rcp_core.paths.Job` per unit,
its parents made ``0700`` (like any directory that engine creates) and given their
metadata through descriptors. Where either side is a backend port (a plan of a URL
store's tree, whose root is its URL; a destination that is a store, a service or a
site's backend), a shard is one run of the generic engine
(:func:`rcp_core.engine.portcopy.copy_units`), its parents made by
:meth:`~rcp_core.backends.port.Port.make_dir` and finalized by
:meth:`~rcp_core.backends.port.Port.set_meta` (where the destination keeps mode and
times: nothing on an object store, whose prefixes need no making either).

Invariants:

- a shard writes only inside its own units, besides creating the shared parents, so
  shards can run concurrently on one destination;
- every refusal (:class:`~rcp_core.errors.UsageError`) happens before anything is
  written: bad index, settings whose meaning depends on the whole tree (filters,
  ``--delete``, ``-L``, dry runs), a destination that is the source or inside it, a
  non-directory where a parent goes, under the default policy an existing unit, a
  source port that is not the plan's root, and what the generic engine cannot honour
  for the pair;
- parents are merged into whatever the policy: every shard needs them;
- a shard is one engine run, so its summary, progress and ``rcp_run_finished`` call
  are the run's, and names of one inode in any of its units stay hard links (as in
  ``rcp A B DST/``). Shards do not share a run: names in different shards are copied
  as separate files with equal content.
"""

from __future__ import annotations

import errno
import functools
import os
import resource
import stat
import threading
import time
from collections.abc import Callable, Iterable

import pluggy

from rcp_core.backends import routing
from rcp_core.backends.capabilities import Capability, refuse
from rcp_core.backends.operands import split_url
from rcp_core.backends.port import Port, keep_meta
from rcp_core.engine.context import log
from rcp_core.engine.copyrun import Engine
from rcp_core.engine.metadata import Metadata, Remap
from rcp_core.engine.portcopy import copy_units
from rcp_core.engine.posixport import PosixPort
from rcp_core.engine.tree import DIR_FLAGS
from rcp_core.errors import EntryError, UsageError
from rcp_core.paths import Job
from rcp_core.run.monitor import Observer
from rcp_core.run.runtime import Runtime
from rcp_core.run.summary import KEYS, Resources, Summary
from rcp_core.settings import CopySettings, ExistingPolicy
from rcp_core.site.plugins import plugin_manager
from rcp_core.tools.shards.manifest import ShardPlan


def _under(dst: str, rel: str) -> str:
    return os.path.join(dst, rel) if rel else dst


def _depth(rel: str) -> int:
    return rel.count("/") + 1 if rel else 0


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


Destination = str | os.PathLike[str] | Port
"""Where a shard goes: a path of this host, or a backend port's tree."""


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


def _ports(
    plan: ShardPlan, destination: Destination, source: Port | None
) -> tuple[Port, Port] | None:
    """The source and destination ports, checked as :func:`_destination` checks
    paths, when either side is a port (or the plan's root a URL); ``None`` between
    paths of this host (the local engine's).

    :raises UsageError: a URL root without its port, a port that is not the plan's
        root, the root not a directory, a destination in the source or without its
        parent (on a storage with directories).
    """
    local = isinstance(destination, (str, os.PathLike))
    if source is None and local and split_url(plan.root) is None:
        return None  # between paths of this host
    if source is None:
        if split_url(plan.root) is not None:
            raise UsageError(f"the plan's source {plan.root!r} needs its backend port")
        source = PosixPort(plan.root)
    if source.describe("") != plan.root:
        raise UsageError(
            f"the source {source.describe('')!r} is not the plan's {plan.root!r}"
        )
    if isinstance(destination, (str, os.PathLike)):
        dst: Port = PosixPort(os.path.abspath(os.fspath(destination)))
    else:
        dst = destination
    root = source.stat("")
    if root is None or not root.is_dir:
        raise UsageError(f"source {plan.root!r} is not a directory here")
    shown = dst.describe("")
    if source.holds(dst):
        raise UsageError(f"destination {shown!r} is the source or inside it")
    parent = dst.parent()
    if dst.backend.has(Capability.DIRECTORIES) and parent is not None:
        above = parent.stat("")
        if above is None or not above.is_dir:
            raise UsageError(f"destination parent of {shown!r} does not exist")
    return source, dst


def _make_parents(plan: ShardPlan, dst: Port, make: Callable[[str], None]) -> None:
    """Make the plan's parents at ``dst`` (by ``make``, ancestors first); another
    shard may make the same ones at the same time. A non-directory (or a symlink) in
    the way is refused before anything is made."""
    for rel in plan.parents:
        there = dst.stat(rel, follow=False)
        if there is not None and not there.is_dir:
            raise UsageError(f"destination {dst.describe(rel)!r} is not a directory")
    for rel in plan.parents:  # sorted: ancestors first
        make(rel)


def _private_dir(path: str) -> None:
    """Make the directory ``path`` ``0700`` (:func:`finalize` widens it), or find it."""
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
    destination: Destination,
    settings: CopySettings | None = None,
    *,
    source: Port | None = None,
    plugins: pluggy.PluginManager | Iterable[object] | None = None,
    on_progress: Observer | None = None,
    progress_interval: float = 1.0,
    cancel: threading.Event | None = None,
) -> Summary:
    """Copy shard ``index`` of ``plan`` into ``destination`` (the copy of the root:
    a path, or a port's tree).

    Parents are created here but not counted (:func:`finalize` counts them).
    Arguments as for :func:`rcp_core.copy`.

    :param source: the plan's root as a backend port (required for a URL root; a
        path root is this host's).
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
    pair = _ports(plan, destination, source)
    if pair is None:
        assert isinstance(destination, (str, os.PathLike))  # as _ports said
        dst = _destination(plan, destination)
        target: Port = PosixPort(dst)
    else:
        target = pair[1]
        refuse(settings, routing.Engine.STORE, pair[0].backend, target.backend)
    if settings.existing is ExistingPolicy.ERROR:
        for rel in shard.units:
            if target.stat(rel, follow=False) is not None:
                raise UsageError(
                    f"destination {target.describe(rel)!r} exists "
                    "(use --overwrite, --update or --ignore-existing)"
                )
    if not isinstance(plugins, pluggy.PluginManager):
        plugins = plugin_manager(plugins or ())
    if pair is None:
        _make_parents(plan, target, lambda rel: _private_dir(_under(dst, rel)))
    else:
        _make_parents(plan, target, lambda rel: target.make_dir(rel, None))
    if not shard.units:
        # No unit (an empty tree): no job for the engine, but the root exists now.
        summary = Summary(
            counts=dict.fromkeys(KEYS, 0),
            resources=Resources.since(start, usage, children),
        )
        plugins.hook.rcp_run_finished(summary=summary, error=None)
        return summary
    log.debug("copying shard %d: %d unit(s)", index, len(shard.units))
    if pair is not None:
        return copy_units(
            pair[0],
            target,
            shard.units,
            settings,
            plugins=plugins,
            on_progress=on_progress,
            progress_interval=progress_interval,
            cancel=cancel,
        )
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
    destination: Destination,
    settings: CopySettings | None = None,
    *,
    source: Port | None = None,
) -> int:
    """Give the plan's parents at ``destination`` their sources' metadata (what
    ``settings.preserve`` keeps, where the destination keeps it), deepest first;
    return how many were set.

    Run it after every shard finished. Every directory is tried; the first failure is
    raised afterwards (transient ones, as this host's site plugins classify them, are
    retried first).

    :param source: the plan's root as a backend port (as :func:`copy_shard`).
    :raises UsageError: a parent is missing at the destination (a shard did not run;
        a store of prefixes has no directories to miss) or is not a directory;
        nothing was changed.
    :raises EntryError: setting some directory's metadata failed.
    """
    settings = settings or CopySettings()
    pair = _ports(plan, destination, source)
    if pair is None:
        assert isinstance(destination, (str, os.PathLike))  # as _ports said
        dst = os.path.abspath(os.fspath(destination))
        target: Port = PosixPort(dst)
        apply = _metadata_by_fd(plan, dst, settings)
    else:
        target = pair[1]
        apply = _metadata_by_port(*pair, settings)
    if target.backend.has(Capability.DIRECTORIES):
        for rel in plan.parents:
            there = target.stat(rel, follow=False)
            if there is None:
                raise UsageError(
                    f"destination directory {target.describe(rel)!r} is missing: "
                    "did every shard run?"
                )
            if not there.is_dir:
                raise UsageError(
                    f"destination {target.describe(rel)!r} is not a directory"
                )
    run = Runtime(
        plugin_manager().hook,
        retries=settings.retries,
        retry_delay=settings.retry_delay,
        fail_early=False,
    )
    done = 0
    failures: list[EntryError] = []
    for rel in sorted(plan.parents, key=lambda r: (-_depth(r), r)):
        try:
            run.attempt(functools.partial(apply, rel))
        except OSError as exc:
            failures.append(EntryError("set directory metadata", rel or ".", exc))
        else:
            done += 1
    if failures:
        log.warning("finalize: %d directory metadata failure(s)", len(failures))
        raise failures[0]
    return done


def _metadata_by_fd(
    plan: ShardPlan, dst: str, settings: CopySettings
) -> Callable[[str], None]:
    """Setting one parent's metadata between paths of this host, through
    descriptors (owner, mode, xattrs, times, as ``preserve`` says)."""
    umask = os.umask(0o022)
    os.umask(umask)
    metadata = Metadata(settings.preserve, umask, Remap.of(settings))

    def apply(rel: str) -> None:
        # The root may be a symlink to the tree, as in plan_shards; nothing below is.
        nofollow = os.O_NOFOLLOW if rel else 0
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

    return apply


def _metadata_by_port(
    source: Port, target: Port, settings: CopySettings
) -> Callable[[str], None]:
    """Setting one parent's metadata through the ports: the source directory's
    owner, mode and mtime, where the destination keeps them."""
    preserve = settings.preserve

    def apply(rel: str) -> None:
        entry = source.stat(rel)
        if entry is None:
            raise FileNotFoundError(errno.ENOENT, "gone from the source", rel)
        keep_meta(target, rel, entry, preserve)

    return apply
