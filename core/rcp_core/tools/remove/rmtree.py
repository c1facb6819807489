"""Parallel removal of trees: the engine behind ``rrm`` and ``RcpFileSystem.rm``.

Like the copy's walk, every directory is opened once, relative to its parent's
descriptor and never through a symlink (``O_NOFOLLOW``), and scanned by one worker
that unlinks its non-directories there (``unlinkat``); each subdirectory is a work
item of the pool, so as many directories are emptied at once as the limit allows (the
storage plugin's starting point, moved by the adaptive controller: on shared storage
every unlink waits a round trip, which many in flight hide; on a local disk the
kernel's unlink work overlaps in as many threads as the copy would use processes). A
directory is removed after its last child, by the worker that finished that child:
each node counts the work still in flight beneath it.

Invariants:

- **nothing outside the operands**: symlinks are removed, never followed (an operand
  that is a symlink is the link); a directory on another filesystem than its parent
  (a mount point inside the tree) is kept, not entered, unless ``cross_devices``;
  ``/`` and mount points as operands are refused unless ``force``;
- **a directory goes only when emptied**: what the filters keep, what the age rules
  keep and what failed keep their directories, up to the operand;
- **age rules** apply to everything but directories: an entry goes only if modified
  (``mtime``) before ``modified_before`` and born (``statx`` birth time) before
  ``created_before``; an unknown birth time keeps the entry, never guessed;
- **dry runs** change nothing: each entry that would go is logged and counted;
- **files go by the listing's type** (``d_type``, as ``rm -rf``): a file is looked at
  (``stat``) only for the age rules, so its bytes are counted only then (on shared
  storage each look is a round trip; on a local disk the looks made a removal a fifth
  slower than ``rm -rf``);
- **errors**: transient ones are retried, others recorded (deduplicated) with the
  entry kept; fatal ones (a read-only filesystem) and ``fail_early`` stop the run,
  which then raises :class:`~rcp_core.errors.CopyFailedError` ("remove") with the
  partial summary; an entry already gone is not an error;
- a directory is opened when a worker scans it, not when it is queued, and closed
  when it is finished: descriptors follow the directories being emptied (and their
  ancestors), not the width of the tree.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import resource
import stat
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pluggy

from rcp_core.engine.filters import Filter, Verdict
from rcp_core.engine.removeentry import count_removed
from rcp_core.engine.tree import DIR_FLAGS, Lifecycle, Node
from rcp_core.errors import UsageError
from rcp_core.run.monitor import Monitor, Observer
from rcp_core.run.pool import WorkPool
from rcp_core.run.runtime import Runtime
from rcp_core.run.summary import Resources, Summary, Tally, merge
from rcp_core.run.tuning import Concurrency, Controller
from rcp_core.settings import RETRIES, RETRY_DELAY, CopySettings
from rcp_core.site.capacity import choose_concurrency, open_files_budget, storage_of
from rcp_core.site.plugins import plugin_manager
from rcp_core.tools.remove.birth import birth_time

log = logging.getLogger("rcp_core")

_DIR = DIR_FLAGS | os.O_NOFOLLOW


@dataclass(frozen=True, slots=True)
class RemoveSettings:
    """How a removal runs.

    :param includes: only entries these globs match go (see :mod:`rcp_core.engine.filters`;
        paths relative to each operand).
    :param excludes: entries these match stay, and so do their directories.
    :param modified_before: only entries modified before this time (epoch seconds) go.
    :param created_before: only entries born before this time go.
    :param dry_run: log and count what would go; change nothing.
    :param fail_early: stop at the first error.
    :param force: allow ``/`` and mount points as operands.
    :param missing_ok: an operand that does not exist is no error (``rm -f``).
    :param cross_devices: enter directories on other filesystems inside the tree.
    :param max_workers: directories emptied at once, fixed; ``None`` adapts.
    :param retries: tries again of an operation failing with a transient error.
    """

    includes: Sequence[str] = ()
    excludes: Sequence[str] = ()
    modified_before: float | None = None
    created_before: float | None = None
    dry_run: bool = False
    fail_early: bool = False
    force: bool = False
    missing_ok: bool = False
    cross_devices: bool = False
    max_workers: int | None = None
    retries: int = RETRIES
    retry_delay: float = RETRY_DELAY

    def __post_init__(self) -> None:
        if self.max_workers is not None and self.max_workers < 1:
            raise UsageError("max_workers must be at least 1")
        if self.retries < 0:
            raise UsageError("retries must not be negative")


@dataclass(slots=True, eq=False)
class _Dir(Node["_Dir"]):
    """A directory being emptied. ``rel`` is relative to the operand; ``incomplete``
    means something beneath it stays (kept by a rule, failed, or the run stopped),
    so it stays too. Its references are its own scan and its subdirectories in
    flight.

    :param parent_fd: the directory holding ``name`` (the parent node's ``fd``, or
        the operand's parent).
    :param display: how messages name it.
    :param dev: its device (from the parent's listing): it must still be on it when
        opened.
    :param fd: its descriptor, opened when it is scanned (-1 until then), closed when
        it is finished.
    """

    parent_fd: int
    name: str
    display: str
    dev: int
    under_include: bool
    fd: int = -1


def remove(
    paths: Sequence[str | os.PathLike[str]],
    settings: RemoveSettings | None = None,
    *,
    plugins: pluggy.PluginManager | Iterable[object] | None = None,
    on_progress: Observer | None = None,
    progress_interval: float = 1.0,
    cancel: threading.Event | None = None,
) -> Summary:
    """Remove ``paths`` (whole trees) as ``settings`` say; the summary.

    :raises UsageError: a missing operand (unless ``missing_ok``), ``/`` or a mount
        point without ``force``, or a bad filter; nothing was removed.
    :raises CopyFailedError: something was not removed that should have been, or
        the removal was cancelled (the partial summary; kept entries of filters and
        age rules are not failures).
    """
    settings = settings or RemoveSettings()
    if not isinstance(plugins, pluggy.PluginManager):
        plugins = plugin_manager(plugins or ())
    if not paths:
        raise UsageError("nothing to remove")
    checked = (_checked(os.fspath(path), settings) for path in paths)
    operands = [path for path in checked if path is not None]
    started, usage = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    if not operands:  # all missing, and that is fine: nothing to do
        summary = Summary(merge([]), Resources.since(started, usage))
        plugins.hook.rcp_run_finished(summary=summary, error=None)
        return summary
    run = _Removal(settings, plugins, operands)
    monitor = Monitor(
        run.pool,
        Controller(run.concurrency) if run.concurrency.adaptive else None,
        [on_progress] if on_progress else [],
        progress_interval,
        cancel or threading.Event(),
        on_cancel=lambda: run.stop("cancelled"),
    )
    monitor.start()
    try:
        run.execute()
    except BaseException as exc:
        plugins.hook.rcp_run_finished(summary=None, error=exc)
        raise
    finally:
        monitor.stop()
    counts = merge(run.pool.tallies)
    return run.conclude(counts, Resources.since(started, usage), what="remove")


def _threads_for_processes(chosen: Concurrency) -> Concurrency:
    """The removal's concurrency from the copy's: no helper processes, and where the
    copy would spread over processes (a CPU-bound local disk), at least as many
    threads. A removal's work is ``unlink`` in the kernel, where the GIL is free, so
    threads overlap as the copy's processes do (50,000 files on ext4: one worker
    0.95 s, two 0.70 s, ``rm -rf`` 0.88 s). A fixed setting stays as set."""
    floor = min(chosen.processes, chosen.maximum) if chosen.adaptive else 1
    return dataclasses.replace(
        chosen,
        processes=1,
        aside=0,
        initial=max(chosen.initial, floor),
        minimum=max(chosen.minimum, floor),
    )


def _kind(entry: os.DirEntry[str]) -> str:
    """A non-directory's kind in the summary, from the listing (no ``stat``)."""
    if entry.is_symlink():
        return "symlinks"
    return "files" if entry.is_file(follow_symlinks=False) else "specials"


def _count(tally: Tally, kind: str, st: os.stat_result | None) -> None:
    """Count one removed non-directory (and its bytes, when it was looked at)."""
    if st is None:
        tally[f"removed.{kind}"] += 1
    else:
        count_removed(tally, st)


def _checked(path: str, settings: RemoveSettings) -> str | None:
    """The operand, absolute, once it is known to exist and may be removed; ``None``
    for one that does not exist, with ``missing_ok``."""
    if not path:
        raise UsageError("an empty path")
    absolute = os.path.abspath(path)
    if not os.path.lexists(absolute):
        if settings.missing_ok:
            log.info("%s: not there; nothing to remove", path)
            return None
        raise UsageError(f"{path}: no such file or directory")
    if not settings.force:
        if os.path.realpath(absolute) == "/":
            raise UsageError(f"{path}: refusing to remove / (--force to insist)")
        if os.path.ismount(absolute):
            raise UsageError(f"{path}: refusing to remove a mount point (--force)")
    return absolute


class _Removal(Runtime):
    """One removal run: its runtime (errors, retries, stop), pool and filters."""

    def __init__(
        self,
        settings: RemoveSettings,
        plugins: pluggy.PluginManager,
        operands: list[str],
    ) -> None:
        super().__init__(
            plugins.hook,
            retries=settings.retries,
            retry_delay=settings.retry_delay,
            fail_early=settings.fail_early,
        )
        self.settings = settings
        self.operands = operands
        self.filter = Filter.build(
            includes=settings.includes, excludes=settings.excludes
        )
        budget = open_files_budget(CopySettings())
        storage = [
            (info, info)
            for info in (storage_of(self.hook, path, follow=False) for path in operands)
        ]
        chosen = choose_concurrency(
            self.hook, storage, CopySettings(max_workers=settings.max_workers), budget
        )
        self.concurrency = _threads_for_processes(chosen)
        self.stat_files = (
            settings.modified_before is not None or settings.created_before is not None
        )
        """Look at each file: only for the age rules (``rm -rf`` does not either)."""
        self.pool = WorkPool(
            self.concurrency.maximum, self.concurrency.initial, self._crashed
        )
        self.tree = Lifecycle(self._finish)
        self._parent_fds: list[int] = []

    def execute(self) -> None:
        setup = Tally()
        self.pool.tallies.append(setup)
        try:
            for path in self.operands:
                self._start(setup, path)
            self.pool.run()
        finally:
            for fd in self._parent_fds:
                os.close(fd)

    def _crashed(self, exc: BaseException) -> None:
        self.stop(f"internal error: {exc!r}")

    def _start(self, tally: Tally, path: str) -> None:
        parent, name = os.path.split(path.rstrip("/") or "/")
        parent_fd = os.open(parent or "/", DIR_FLAGS)
        self._parent_fds.append(parent_fd)
        try:
            st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except OSError as exc:
            self._failed(tally, "stat", path, exc)
            return
        if not stat.S_ISDIR(st.st_mode):
            self.pool.push(self._leaf, parent_fd, name, path, st)
            return
        # The operand itself is never filtered, nor does it match an include.
        root_included = not self.filter.includes
        node = _Dir(
            parent=None,
            rel="",
            parent_fd=parent_fd,
            name=name,
            display=path,
            dev=st.st_dev,
            under_include=root_included,
        )
        self.pool.push(self._scan, node)

    def _leaf(
        self, tally: Tally, parent_fd: int, name: str, display: str, st: os.stat_result
    ) -> None:
        """An operand that is not a directory."""
        if stat.S_ISLNK(st.st_mode):
            kind = "symlinks"
        else:
            kind = "files" if stat.S_ISREG(st.st_mode) else "specials"
        self._unlink(tally, parent_fd, os.path.dirname(display), name, kind, st)

    def _scan(self, tally: Tally, node: _Dir) -> None:
        """Open ``node`` (only now: a queued directory holds no descriptor), unlink
        its entries (those that go), queue its subdirectories."""
        try:
            if not self.stopping:
                node.fd = os.open(node.name, _DIR, dir_fd=node.parent_fd)
                if os.fstat(node.fd).st_dev != node.dev:
                    raise OSError(errno.EXDEV, "replaced by a mount point meanwhile")
                self._empty(tally, node)
        except OSError as exc:
            node.incomplete = True
            self._failed(tally, "read directory", node.display, exc)
        finally:
            self.tree.release(tally, node)

    def _empty(self, tally: Tally, node: _Dir) -> None:
        """Each entry of the open directory ``node``, until the run stops."""
        with os.scandir(node.fd) as entries:
            for entry in entries:
                if self.stopping:
                    node.incomplete = True
                    return
                self._entry(tally, node, entry)

    def _entry(self, tally: Tally, node: _Dir, entry: os.DirEntry[str]) -> None:
        """One entry of ``node``: removed, kept, or queued. A file costs no path
        arithmetic unless the filters or a message need its path."""
        name = entry.name
        try:
            is_dir = entry.is_dir(follow_symlinks=False)  # the listing's type: no stat
            st = (
                entry.stat(follow_symlinks=False) if is_dir or self.stat_files else None
            )
        except FileNotFoundError:
            return  # gone meanwhile: nothing to remove
        except OSError as exc:
            node.incomplete = True
            self._failed(tally, "stat", os.path.join(node.display, name), exc)
            return
        under = node.under_include
        if self.filter.active:
            verdict = self.filter.decide(
                node.child_rel(name), is_dir, under_include=under, ignores=None
            ).verdict
            if verdict is Verdict.EXCLUDE:
                node.incomplete = True
                tally["skipped.dirs" if is_dir else "skipped.files"] += 1
                return
            under = verdict is Verdict.INCLUDE
        if not is_dir:
            if under:
                self._unlink(tally, node.fd, node.display, name, _kind(entry), st, node)
            return
        assert st is not None
        display = os.path.join(node.display, name)
        if st.st_dev != node.dev and not self.settings.cross_devices:
            node.incomplete = True
            tally["skipped.dirs"] += 1
            log.warning("%s: another filesystem is mounted here; kept", display)
            return
        self.tree.hold(node)
        child = _Dir(
            parent=node,
            rel=node.child_rel(name),
            parent_fd=node.fd,
            name=name,
            display=display,
            dev=st.st_dev,
            under_include=under,
        )
        self.pool.push(self._scan, child)

    def _unlink(
        self,
        tally: Tally,
        dir_fd: int,
        where: str,
        name: str,
        kind: str,
        st: os.stat_result | None,
        node: _Dir | None = None,
    ) -> None:
        """Remove ``name`` of ``dir_fd`` (``where`` in messages), a non-directory of
        the summary ``kind`` (files, symlinks or specials), if the age rules let it
        go; ``st`` when it was looked at."""
        if st is not None and not self._old_enough(tally, dir_fd, where, name, st):
            if node is not None:
                node.incomplete = True
            tally[f"skipped.{kind}"] += 1
            return
        if self.settings.dry_run:
            log.info("would remove %r", os.path.join(where, name))
            _count(tally, kind, st)
            return
        try:
            self.attempt(lambda: os.unlink(name, dir_fd=dir_fd))
        except FileNotFoundError:
            return  # gone meanwhile
        except OSError as exc:
            if node is not None:
                node.incomplete = True
            self._failed(tally, "remove", os.path.join(where, name), exc)
            return
        _count(tally, kind, st)

    def _old_enough(
        self, tally: Tally, dir_fd: int, where: str, name: str, st: os.stat_result
    ) -> bool:
        settings = self.settings
        if (
            settings.modified_before is not None
            and st.st_mtime >= settings.modified_before
        ):
            return False
        if settings.created_before is None:
            return True
        try:
            born = birth_time(dir_fd, name)
        except OSError as exc:
            self._failed(tally, "stat", os.path.join(where, name), exc)
            return False
        return born is not None and born < settings.created_before

    def _finish(self, tally: Tally, node: _Dir) -> None:
        """Everything beneath ``node`` is done: close it, and remove it unless
        something beneath it stays (then it stays too)."""
        if node.fd >= 0:
            os.close(node.fd)
        if node.incomplete or self.stopping or not self._rmdir(tally, node):
            node.incomplete = True

    def _rmdir(self, tally: Tally, node: _Dir) -> bool:
        """Remove ``node``'s (empty) directory; whether it is gone."""
        if self.settings.dry_run:
            log.info("would remove %r", node.display + "/")
            tally["removed.dirs"] += 1
            return True
        try:
            self.attempt(lambda: os.rmdir(node.name, dir_fd=node.parent_fd))
        except FileNotFoundError:
            return True
        except OSError as exc:
            self._failed(tally, "remove directory", node.display, exc)
            return False
        tally["removed.dirs"] += 1
        return True

    def _failed(self, tally: Tally, op: str, display: str, exc: OSError) -> None:
        self.record(tally, self.error(op, display, exc))
