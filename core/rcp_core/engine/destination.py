"""One destination directory of this host: what happens to each entry, and putting it
in place.

The destination half of this host's backend, for every engine that writes here: the
local copy (:mod:`rcp_core.engine.entries`, :mod:`rcp_core.engine.dirs`), the remote
destination role (:mod:`rcp_core.remote.receive`) and its dry run
(:mod:`rcp_core.remote.dry`). Each rule exists once, here, so a local and a remote
copy decide and write alike:

- **plan, then mutate**: :func:`plan` decides from ``lstat`` results alone (and, for
  a symlink, the target already there) before anything is changed, by the policy
  (:func:`rcp_core.engine.existing.decide`); under the default policy an entry found
  where the copy goes is an error (the operand rules refuse an existing destination
  up front; one made since is never overwritten);
- **nothing half-written under a name**: a replacement is made under a temporary
  name (:func:`rcp_core.engine.temporaries.temp_name`) and :func:`commit` renames it
  over the old entry once it is complete; a directory in the way is removed only
  then, so a failed write costs the user nothing; no temporary outlives its call;
- **a symlink already right is not remade**: the same target with the same kept
  metadata is unchanged, the same target with other metadata gets them in place
  (:attr:`Step.RETOUCH`: a killed run made it but never set them);
- **specials** are made ``0600`` and given their metadata after; one this process
  may not make is skipped under ``skip_specials``;
- **a directory finishes once** (:func:`finish_dir`, post-order, after every entry
  and subdirectory in it): an empty one the filters only traversed is removed,
  one that existed loses a killed run's temporaries and is pruned under
  ``--delete`` (only after a clean subtree), then it gets its metadata, last;
- every call is relative to an open directory descriptor and never follows a
  symlink at the destination.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

from rcp_core.engine.existing import NEW, Action, decide
from rcp_core.engine.metadata import Metadata
from rcp_core.engine.partials import place_new
from rcp_core.engine.removeentry import remove_entry
from rcp_core.engine.temporaries import temp_name
from rcp_core.run.summary import Tally
from rcp_core.settings import CopySettings, ExistingPolicy


class Step(enum.Enum):
    """What happens to one destination entry."""

    CREATE = "create"
    """Nothing is there: make it under its own name."""
    REPLACE = "replace"
    """Make it under a temporary name, then rename it over what is there."""
    UNCHANGED = "unchanged"
    """What is there is already the copy."""
    KEEP = "keep"
    """The policy keeps what is there (ignore-existing, update with a newer one)."""
    RETOUCH = "retouch"
    """A symlink with the right target: give it the source's metadata in place."""
    REUSE = "reuse"
    """A directory where a directory goes: merge into it."""


@dataclass(frozen=True, slots=True)
class Plan:
    """The decision for one entry: its :class:`Step`, what is there (``old``,
    ``None`` when nothing is) and why (a dry run's reason)."""

    step: Step
    old: os.stat_result | None
    reason: str

    def new_name(self, name: str) -> str:
        """The name to make the entry under: its own if nothing is there, else a
        temporary one (:func:`commit` puts it in place)."""
        return name if self.old is None else temp_name(name)

    def stays(self, tally: Tally, kind: str) -> str | None:
        """If the entry there stays as it is (unchanged, or kept by the policy):
        count it (``unchanged.KIND``, ``skipped.KIND``) and give the dry run's word
        for it (``unchanged``, ``keep``); ``None`` when the plan writes."""
        if self.step is Step.UNCHANGED:
            tally["unchanged." + kind] += 1
            return "unchanged"
        if self.step is Step.KEEP:
            tally["skipped." + kind] += 1
            return "keep"
        return None


CREATE = Plan(Step.CREATE, None, NEW)
"""The plan of every entry that is not there yet."""

_STEP_OF = {
    Action.REPLACE: Step.REPLACE,
    Action.UNCHANGED: Step.UNCHANGED,
    Action.KEEP: Step.KEEP,
}


def existing(dst_fd: int | None, fresh: bool, name: str) -> os.stat_result | None:
    """``lstat`` of ``name`` in ``dst_fd``; ``None`` when nothing is there, or
    nothing can be (a ``fresh`` directory, made by this copy, or none at all)."""
    if fresh or dst_fd is None:
        return None
    try:
        return os.lstat(name, dir_fd=dst_fd)
    except FileNotFoundError:
        return None


def plan(
    settings: CopySettings,
    metadata: Metadata,
    dst_fd: int | None,
    name: str,
    st: os.stat_result,
    old: os.stat_result | None,
    link: str | None = None,
) -> Plan:
    """What happens to ``name`` (a non-directory: ``st`` is the source's ``lstat``)
    where ``old`` is there; reads only.

    :param link: a symlink's target (an existing symlink to it is kept or retouched).
    :raises FileExistsError: something is there and the policy is the default.
    """
    if old is None:
        return CREATE
    if settings.existing is ExistingPolicy.ERROR:
        raise FileExistsError(errno.EEXIST, "destination exists")
    action, reason = decide(
        settings.existing, settings.overwrite_compare, metadata.compared(st), old
    )
    if (
        action is Action.REPLACE
        and link is not None
        and dst_fd is not None
        and stat.S_ISLNK(old.st_mode)
        and os.readlink(name, dir_fd=dst_fd) == link
    ):
        if metadata.agrees_by_name(st, old):
            return Plan(Step.UNCHANGED, old, "same target")
        return Plan(Step.RETOUCH, old, "same target, other metadata")
    return Plan(_STEP_OF[action], old, reason)


def plan_dir(
    settings: CopySettings, st: os.stat_result, old: os.stat_result | None
) -> Plan:
    """What happens where the source directory ``st`` goes and ``old`` is there: a
    directory is reused (merged into, whatever the policy); an entry of another kind
    is kept by the policy (the subtree is then not copied) or removed for the new
    directory (a directory cannot be renamed over it: it goes first).

    :raises FileExistsError: another kind of entry is there and the policy is the
        default.
    """
    if old is None:
        return CREATE
    action, reason = decide(settings.existing, settings.overwrite_compare, st, old)
    if action is Action.REUSE:
        return Plan(Step.REUSE, old, reason)
    if settings.existing is ExistingPolicy.ERROR:
        raise FileExistsError(errno.EEXIST, "destination exists")
    return Plan(_STEP_OF[action], old, reason)


def plan_link(
    settings: CopySettings, old: os.stat_result | None, first: os.stat_result | None
) -> Plan:
    """What happens to a later name of a multiply-linked inode where ``old`` is
    there, ``first`` being the ``lstat`` of the inode's copy (read only when ``old``
    is): a name that already is that inode is unchanged; another entry is kept under
    ``ignore-existing``, an error under the default policy, else replaced.

    :raises FileExistsError: something is there and the policy is the default.
    """
    if old is None:
        return CREATE
    if first is not None and (first.st_dev, first.st_ino) == (old.st_dev, old.st_ino):
        return Plan(Step.UNCHANGED, old, "already linked")
    if settings.existing is ExistingPolicy.IGNORE_EXISTING:
        return Plan(Step.KEEP, old, "destination exists")
    if settings.existing is ExistingPolicy.ERROR:
        raise FileExistsError(errno.EEXIST, "destination exists")
    return Plan(Step.REPLACE, old, "exists")


def make_hard_link(
    dst_fd: int,
    name: str,
    first: tuple[int, str],
    decided: Plan,
    tally: Tally,
) -> None:
    """Make ``name`` another name of ``first`` (its directory's descriptor and its
    name there), as ``decided`` (a step that writes), counted ``copied.hardlinks``."""
    made = decided.new_name(name)
    first_dir, first_name = first
    os.link(
        first_name, made, src_dir_fd=first_dir, dst_dir_fd=dst_fd, follow_symlinks=False
    )
    commit(dst_fd, made, name, decided.old, tally)
    tally["copied.hardlinks"] += 1


def rename_over(
    dir_fd: int, tmp: str, name: str, first: Callable[[], None] | None = None
) -> None:
    """Rename the finished ``tmp`` over ``name`` in ``dir_fd`` (after ``first``, if
    given); if anything fails, ``tmp`` is removed: no temporary name outlives this."""
    try:
        if first is not None:
            first()
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def commit(
    dst_fd: int, made: str, name: str, old: os.stat_result | None, tally: Tally
) -> None:
    """Put the complete entry ``made`` (its :meth:`Plan.new_name`, or a partial) in
    place as ``name``: nothing to do when it was made under its own name; where
    nothing was, only while nothing is (:func:`rcp_core.engine.partials.place_new`);
    else a directory in the way goes now (counted removed), and ``made`` is renamed
    over ``name``."""
    if made == name:
        return
    if old is None:
        place_new(dst_fd, made, name)
        return

    def clear_way() -> None:
        if stat.S_ISDIR(old.st_mode):
            remove_entry(dst_fd, name, old, tally)

    rename_over(dst_fd, made, name, first=clear_way)


def make_symlink(
    dst_fd: int,
    name: str,
    target: str,
    st: os.stat_result,
    decided: Plan,
    metadata: Metadata,
    tally: Tally,
) -> None:
    """Make ``name`` the symlink to ``target`` with the source's metadata (``st``) as
    ``decided`` (a step that writes), counted ``copied.symlinks``; on failure what
    this call made is gone."""
    if decided.step is Step.RETOUCH:
        metadata.apply_by_name(dst_fd, name, st)
        tally["copied.symlinks"] += 1
        return
    made = decided.new_name(name)
    os.symlink(target, made, dir_fd=dst_fd)
    _settle(dst_fd, made, name, st, decided, metadata, tally)
    tally["copied.symlinks"] += 1


def make_special(
    dst_fd: int,
    name: str,
    st: os.stat_result,
    decided: Plan,
    metadata: Metadata,
    tally: Tally,
    *,
    skip_specials: bool,
) -> bool:
    """Make ``name`` the FIFO, socket or device ``st`` describes, as ``decided``,
    counted ``copied.specials``; ``False`` when it was skipped (counted
    ``skipped.specials``: one this process may not make, with ``skip_specials``)."""
    made = decided.new_name(name)
    try:
        if stat.S_ISFIFO(st.st_mode):
            os.mkfifo(made, 0o600, dir_fd=dst_fd)
        else:
            kind = stat.S_IFMT(st.st_mode)
            os.mknod(made, kind | 0o600, st.st_rdev, dir_fd=dst_fd)
    except PermissionError:
        if not skip_specials:
            raise
        tally["skipped.specials"] += 1
        return False
    _settle(dst_fd, made, name, st, decided, metadata, tally)
    tally["copied.specials"] += 1
    return True


def _settle(
    dst_fd: int,
    made: str,
    name: str,
    st: os.stat_result,
    decided: Plan,
    metadata: Metadata,
    tally: Tally,
) -> None:
    """Give the symlink or special ``made`` its metadata and put it in place; it is
    removed if either fails."""
    try:
        metadata.apply_by_name(dst_fd, made, st)
        commit(dst_fd, made, name, decided.old, tally)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(made, dir_fd=dst_fd)
        raise


def extraneous(
    dst_fd: int, keeps: Callable[[str, bool], bool]
) -> Iterator[os.DirEntry[str]]:
    """The entries of the directory ``dst_fd`` that ``keeps(name, is_dir)`` does not
    claim (``--delete`` removes them); symlinks are entries, never followed."""
    with os.scandir(dst_fd) as entries:
        for entry in entries:
            if not keeps(entry.name, entry.is_dir(follow_symlinks=False)):
                yield entry


class Finishing(Protocol):
    """What :func:`finish_dir` reads of a directory in flight (read when each step
    is due: a step that failed may have made the node ``incomplete``)."""

    created: bool
    """This copy made it."""
    fresh: bool
    """It did not exist before this copy (nothing of an earlier run is in it)."""
    traverse_only: bool
    """The filters only descend into it, for matches below."""
    has_content: bool
    """Something was copied into it."""
    incomplete: bool
    """Something below it was not done (:mod:`rcp_core.engine.tree`)."""


N = TypeVar("N", bound=Finishing, contravariant=True)


class FinishSteps(Protocol[N]):
    """The steps of a directory's finish, as one engine carries them out (a dry run
    says them instead)."""

    def remove_empty(self, tally: Tally, node: N) -> None:
        """Remove the directory, which this copy made and left empty."""

    def clear_leftovers(self, tally: Tally, node: N) -> None:
        """Remove the temporaries a killed run left of names the source has
        (:func:`rcp_core.engine.temporaries.sweep`)."""

    def prune(self, tally: Tally, node: N) -> None:
        """``--delete``: remove what the source does not have (:func:`extraneous`)."""

    def set_meta(self, tally: Tally, node: N) -> None:
        """Give the directory the source's metadata."""


def finish_dir(
    settings: CopySettings,
    tally: Tally,
    node: N,
    steps: FinishSteps[N],
    run: Callable[[str, Callable[[], None]], object],
) -> bool:
    """Finish ``node``, every entry and subdirectory of it done (see the module):
    whether it holds content for its parent (a traverse-only directory left empty
    does not; it is removed if this copy made it).

    :param run: ``run(op, step)`` carries out one step with the engine's error
        handling (retries of transient errors; a failure recorded, the node made
        incomplete).
    """
    if node.traverse_only and not node.has_content:
        if node.created:
            steps.remove_empty(tally, node)
        return False
    if not node.fresh:
        run("remove temporaries", lambda: steps.clear_leftovers(tally, node))
    if settings.delete and not node.incomplete and not node.fresh:
        run("delete", lambda: steps.prune(tally, node))
    if node.created or settings.existing is not ExistingPolicy.IGNORE_EXISTING:
        run("set directory metadata", lambda: steps.set_meta(tally, node))
    tally["copied.dirs" if node.created else "unchanged.dirs"] += 1
    return True
