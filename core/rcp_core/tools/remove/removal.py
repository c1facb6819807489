"""What every removal shares, whatever the storage: its settings, the rules that choose
what goes, the words of a dry run, the post-order removal of emptied directories, and
the run's life.

Two walks remove trees, each a :class:`Removal`, a
:class:`~rcp_core.tools.remove.treewalk.TreeRun` (the run, the filters, the
post-order lifecycle, the errors that every walk shares with ``rchm``'s): the local
one through directory descriptors (:mod:`rcp_core.tools.remove.rmtree`, the fast path
for this host's paths, on :mod:`rcp_core.tools.remove.localwalk`) and the one through
a backend port (:mod:`rcp_core.tools.remove.portremove`: a URL store, an ``rcpd
serve`` service, a site's backend). Each lists a directory when a worker scans it and
hands every listed entry to the rules here; each directory is a node of the one
:class:`~rcp_core.engine.tree.Lifecycle`, finished after its last child.

Invariants (both walks):

- **selection**: the walk's (an excluded entry stays, counted ``skipped.*``), and
  so does every directory holding it;
- **age rules** apply to everything but directories: an entry goes only if modified
  before ``modified_before`` (:meth:`Removal.too_young`); a time the storage does not
  give keeps the entry, never guessed (each walk says where its times come from);
- **a directory goes only when emptied**: after its last child, and only if nothing
  beneath it stays (a rule kept it, a failure, or the run stopped: ``incomplete``
  folds upwards, :meth:`Removal.finish`);
- **dry runs** change nothing: each entry that would go is logged in the same words
  (``would remove 'PATH'``, a directory ``'PATH/'``) and counted as removed;
- **errors**: an entry already gone is not an error; transient errors are tried again
  (:meth:`~rcp_core.run.runtime.Runtime.attempt`), others recorded with the entry
  kept; fatal ones and ``fail_early`` stop the run, which then raises
  :class:`~rcp_core.errors.CopyFailedError` ("remove",
  :meth:`~rcp_core.tools.remove.treewalk.TreeRun.run`).
"""

from __future__ import annotations

import abc
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from rcp_core.run.summary import Tally
from rcp_core.tools.remove.treewalk import TreeRun, Walked, WalkSettings

log = logging.getLogger("rcp_core")


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveSettings(WalkSettings):
    """How a removal runs: a walk's settings (selection, dry run, errors, devices,
    workers, retries: :class:`~rcp_core.tools.remove.treewalk.WalkSettings`), and

    :param modified_before: only entries modified before this time (epoch seconds) go.
    :param created_before: only entries born before this time go.
    :param force: allow ``/``, mount points and the top of a storage as operands.
    :param missing_ok: an operand that does not exist is no error (``rm -f``).
    """

    modified_before: float | None = None
    created_before: float | None = None
    force: bool = False
    missing_ok: bool = False


D = TypeVar("D", bound=Walked)


class Removal(TreeRun[D]):
    """One removal run: a walk (:class:`~rcp_core.tools.remove.treewalk.TreeRun`)
    whose storage also says how it removes an emptied directory; the removal's rules
    (the module's invariants)."""

    WHAT: ClassVar[str] = "remove"
    settings: RemoveSettings

    @abc.abstractmethod
    def remove_dir(self, node: D) -> None:
        """Remove ``node``'s emptied directory (raises ``OSError``)."""

    def too_young(self, modified: float | None) -> bool:
        """Whether ``--modified-before`` keeps an entry modified at ``modified``
        (epoch seconds; ``None``: its storage does not say, so it stays)."""
        before = self.settings.modified_before
        return before is not None and (modified is None or modified >= before)

    def kept(self, tally: Tally, node: D | None, kind: str) -> None:
        """A non-directory of the summary ``kind`` an age rule keeps."""
        if node is not None:
            node.incomplete = True
        tally[f"skipped.{kind}"] += 1

    def drop(
        self,
        tally: Tally,
        node: D | None,
        where: str,
        name: str,
        unlink: Callable[[], object],
    ) -> bool:
        """Remove ``name`` (a non-directory of ``where``, as messages name them) by
        ``unlink``, or in a dry run say it would go; whether it went (the caller counts
        it). Gone meanwhile is not gone by this run; a failure is recorded and keeps
        ``node``."""
        if self.settings.dry_run:
            would_remove(os.path.join(where, name))
            return True
        try:
            self.attempt(unlink)
        except FileNotFoundError:
            return False  # gone meanwhile
        except OSError as exc:
            if node is not None:
                node.incomplete = True
            self.failed(tally, "remove", os.path.join(where, name), exc)
            return False
        return True

    def finish(self, tally: Tally, node: D) -> None:
        """Everything beneath ``node`` is done: close it, and remove it unless
        something beneath it stays (then it stays too)."""
        self.close(node)
        if node.incomplete or self.stopping or not self._rmdir(tally, node):
            node.incomplete = True

    def _rmdir(self, tally: Tally, node: D) -> bool:
        """Remove ``node``'s (empty) directory; whether it is gone."""
        if self.settings.dry_run:
            would_remove(node.display + "/")
            tally["removed.dirs"] += 1
            return True
        try:
            self.attempt(lambda: self.remove_dir(node))
        except FileNotFoundError:
            return True
        except OSError as exc:
            self.failed(tally, "remove directory", node.display, exc)
            return False
        tally["removed.dirs"] += 1
        return True


def would_remove(path: str) -> None:
    """A dry run's line for one entry (a directory's ``path`` ends in ``/``)."""
    log.info("would remove %r", path)
