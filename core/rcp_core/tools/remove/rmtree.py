"""Parallel removal of this host's trees, through descriptors: the fast path of
``rrm`` and ``RcpFileSystem.rm`` (a URL's removal goes through its backend port,
:mod:`rcp_core.tools.remove.portremove`).

The walk is :mod:`rcp_core.tools.remove.localwalk`'s (shared with ``rchm``): every
directory is opened once, relative to its parent's descriptor and never through a
symlink, and scanned by one worker that unlinks its non-directories there
(``unlinkat``); each subdirectory is a work item of the pool, so as many directories
are emptied at once as the limit allows. A directory is removed after its last child,
by the worker that finished that child (:meth:`Removal.finish
<rcp_core.tools.remove.removal.Removal.finish>`).

The rules every removal keeps (selection, age, dry run, emptied directories, errors,
the run's end) are :mod:`rcp_core.tools.remove.removal`'s; those of every local walk
(nothing outside the operands, mount points inside kept unless ``cross_devices``,
descriptors) :mod:`~rcp_core.tools.remove.localwalk`'s. Besides them:

- ``/`` and mount points as operands are refused unless ``force``;
- **age rules**: ``modified_before`` reads the ``mtime``; ``created_before`` the
  birth time (``statx``), an unknown one keeps the entry;
- **files go by the listing's type** (``d_type``, as ``rm -rf``): a file is looked at
  (``stat``, :attr:`LocalWalk.stat_files`) only for the age rules, so its bytes are
  counted only then (on shared storage each look is a round trip beside the unlink,
  and on Lustre a size is a glimpse of every object; through latencyfs at 0.5 ms,
  4,000 files, looking at each made a removal a third slower). A removal through a
  port counts bytes from its listings' sizes, which cost nothing more.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import pluggy

from rcp_core.engine.removeentry import count_removed
from rcp_core.errors import UsageError
from rcp_core.run.monitor import Observer
from rcp_core.run.summary import Summary, Tally
from rcp_core.tools.remove.birth import birth_time
from rcp_core.tools.remove.localwalk import LocalDir, LocalWalk, Looked
from rcp_core.tools.remove.removal import Removal, RemoveSettings
from rcp_core.tools.remove.treewalk import run_walk

log = logging.getLogger("rcp_core")


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
    return run_walk(
        "remove",
        _Removal,
        lambda path, settings: _checked(os.fspath(path), settings),
        paths,
        settings or RemoveSettings(),
        plugins,
        on_progress,
        progress_interval,
        cancel,
    )


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


class _Removal(LocalWalk, Removal[LocalDir]):
    """One local removal run: the local walk, whose non-directories are unlinked
    and whose emptied directories are removed."""

    def __init__(self, settings: RemoveSettings, *args: Any) -> None:
        super().__init__(settings, *args)
        self.stat_files = (
            settings.modified_before is not None or settings.created_before is not None
        )

    def leaf(
        self, tally: Tally, node: LocalDir, name: str, kind: str, st: Looked
    ) -> None:
        """Remove ``name`` of ``node``, a non-directory of the summary ``kind``
        (files, symlinks or specials), if the age rules let it go; counted by its
        kind, a file with its bytes where it was looked at (``st``: the age rules
        only, :attr:`stat_files`)."""
        dir_fd, where = node.fd, node.display
        if st is not None and not self._old_enough(tally, dir_fd, where, name, st):
            self.kept(tally, node, kind)
        elif self.drop(
            tally, node, where, name, lambda: os.unlink(name, dir_fd=dir_fd)
        ):
            if st is None:
                tally[f"removed.{kind}"] += 1
            else:
                count_removed(tally, st)

    def _old_enough(
        self, tally: Tally, dir_fd: int, where: str, name: str, st: os.stat_result
    ) -> bool:
        """Whether the age rules let ``name`` go: its ``mtime``, and its birth time
        (``statx``; unknown keeps it)."""
        if self.too_young(st.st_mtime):
            return False
        created_before = self.settings.created_before
        if created_before is None:
            return True
        try:
            born = birth_time(dir_fd, name)
        except OSError as exc:
            self.failed(tally, "stat", os.path.join(where, name), exc)
            return False
        return born is not None and born < created_before

    def remove_dir(self, node: LocalDir) -> None:
        os.rmdir(node.name, dir_fd=node.parent_fd)
