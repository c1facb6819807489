"""Destination directories: create or reuse, gitignore stacks, pruning, finishing.

- A directory is created ``0700`` (the copy must be able to write into it); its final
  mode and times come after its children (:mod:`rcp_core.engine.tree`).
- An existing directory is merged into; an entry of another type is replaced only under
  a policy that allows it, after the source directory opened (plan, then mutate).
- Pruning removes only destination entries the source lacks, never follows symlinks, and
  keeps names the filters exclude unless ``delete_excluded``.
- Finishing (post-order, once every child is done): remove the temporaries a killed
  run left in an existing directory, prune if the subtree had no error,
  remove a traverse-only directory that stayed empty, apply the directory's metadata
  (not to an existing directory under ignore-existing), close its descriptors.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from rcp_core.engine import destination
from rcp_core.engine.context import Context
from rcp_core.engine.destination import Step, extraneous, plan_dir
from rcp_core.engine.entries import existing
from rcp_core.engine.filters import GitIgnores, Verdict
from rcp_core.engine.removeentry import Protect, remove_entry
from rcp_core.engine.temporaries import sweep
from rcp_core.engine.tree import DIR_FLAGS, DirNode
from rcp_core.run.records import Change, kind_of
from rcp_core.run.summary import Tally

log = logging.getLogger("rcp_core")

Guarded = Callable[[Tally, DirNode, str, str, Callable[[], None]], bool]
"""``guarded(tally, node, op, rel, step)``: the engine's error handling for one step."""


def make_dst_dir(ctx: Context, tally: Tally, parent: DirNode, node: DirNode) -> bool:
    """Create or reuse the destination directory; ``False`` to skip the subtree."""
    assert node.st is not None
    decided = plan_dir(ctx.settings, node.st, existing(parent, node.dst_name))
    if decided.step is Step.KEEP:
        tally["skipped.dirs"] += 1
        ctx.dry("keep", "dir", node, node.rel, decided.reason)
        return False
    if decided.step is Step.REPLACE:
        ctx.dry("replace", "dir", node, node.rel, decided.reason)
        if ctx.dry_run is None:
            assert parent.dst_fd is not None
            assert decided.old is not None
            remove_entry(parent.dst_fd, node.dst_name, decided.old, tally)
    if decided.step is not Step.REUSE:
        node.fresh = node.created = True
        if ctx.dry_run is not None:
            ctx.dry("create", "dir", node, node.rel)
            return True
        assert parent.dst_fd is not None
        os.mkdir(node.dst_name, 0o700, dir_fd=parent.dst_fd)
        if ctx.changes is not None:
            action = "create" if decided.old is None else "replace"
            ctx.changed(node, node.rel, action, "dir", node.st, decided.old)
    if ctx.dry_run is None or not node.created:
        assert parent.dst_fd is not None
        node.dst_fd = os.open(
            node.dst_name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=parent.dst_fd
        )
        node.dst_dev = os.fstat(node.dst_fd).st_dev
    return True


def gitignores(node: DirNode) -> GitIgnores:
    """The gitignore stack for ``node``: its parent's plus its own ``.gitignore``."""
    ignores = node.ignores if node.ignores is not None else GitIgnores.root()
    return ignores.with_dir(node.src_fd, node.rel)


def prune(ctx: Context, tally: Tally, node: DirNode) -> None:
    """``--delete``: remove destination entries the source does not have.

    Entries the filters exclude are protected unless ``delete_excluded``, also
    inside an extraneous directory (which then stays, holding them); an excluded
    entry that the source does have is removed only with ``delete_excluded``.
    """
    if node.dst_fd is None:
        return
    dst_fd = node.dst_fd

    def excluded(rel: str, is_dir: bool) -> bool:
        decision = ctx.filter.decide(
            rel, is_dir, under_include=node.under_include, ignores=node.ignores
        )
        return decision.verdict is Verdict.EXCLUDE

    protect: Protect | None = None
    if ctx.filter.active and not ctx.settings.delete_excluded:
        protect = excluded

    def keeps(name: str, is_dir: bool) -> bool:
        if ctx.filter.active and excluded(node.child_rel(name), is_dir):
            return not ctx.settings.delete_excluded  # excluded names are not ours
        return in_source(node.src_fd, name)

    for entry in extraneous(dst_fd, keeps):
        rel = node.child_rel(entry.name)
        ctx.dry("remove", "entry", node, rel, "not in source")
        if ctx.dry_run is None:
            st = entry.stat(follow_symlinks=False)
            gone = remove_entry(dst_fd, entry.name, st, tally, rel=rel, protect=protect)
            if gone and ctx.changes is not None:
                ctx.changes.add(
                    Change(node.dst_path(rel), "remove", kind_of(st.st_mode))
                )


def clear_leftovers(ctx: Context, tally: Tally, node: DirNode) -> None:
    """Remove what an interrupted run left in this existing directory: temporaries
    of names the source has (:func:`rcp_core.engine.temporaries.sweep`), counted as
    removed files; under ``--partial`` partials stay while the directory is
    incomplete (a resume needs them), once it is complete they are stale."""
    assert node.dst_fd is not None
    found = sweep(
        node.dst_fd,
        lambda name: in_source(node.src_fd, name),
        dry=ctx.dry_run is not None,
        keep_partials=ctx.settings.resume and node.incomplete,
    )
    for name in found:
        rel = node.child_rel(name)
        ctx.dry("remove", "temporary", node, rel, "left by an interrupted run")
        if ctx.dry_run is None:
            tally["removed.files"] += 1
            log.info("removed %r, left by an interrupted run", node.dst_path(rel))


def in_source(src_fd: int, name: str) -> bool:
    """Whether the source directory ``src_fd`` has an entry ``name``."""
    try:
        os.lstat(name, dir_fd=src_fd)
    except FileNotFoundError:
        return False
    return True


class _Steps:
    """A local copy's steps of a directory's finish
    (:class:`rcp_core.engine.destination.FinishSteps`); a dry run says them."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def remove_empty(self, tally: Tally, node: DirNode) -> None:
        parent = node.parent
        if (
            self.ctx.dry_run is None
            and parent is not None
            and parent.dst_fd is not None
        ):
            os.rmdir(node.dst_name, dir_fd=parent.dst_fd)

    def clear_leftovers(self, tally: Tally, node: DirNode) -> None:
        if node.dst_fd is not None:
            clear_leftovers(self.ctx, tally, node)

    def prune(self, tally: Tally, node: DirNode) -> None:
        prune(self.ctx, tally, node)

    def set_meta(self, tally: Tally, node: DirNode) -> None:
        if self.ctx.dry_run is None and node.dst_fd is not None:
            assert node.st is not None
            self.ctx.metadata.apply(
                node.src_fd, node.dst_fd, node.st, is_dir=True, times=True
            )


def finish_dir(ctx: Context, tally: Tally, node: DirNode, guarded: Guarded) -> None:
    """All children are done: the one finish of a destination directory
    (:func:`rcp_core.engine.destination.finish_dir`), unless the run stopped; then
    close it.

    :param guarded: runs a step, retrying transient errors and recording others.
    """
    parent = node.parent
    try:
        if parent is None or node.st is None:
            return  # an anchor: nothing of its own to finish
        if ctx.stopping:
            return
        if destination.finish_dir(
            ctx.settings,
            tally,
            node,
            _Steps(ctx),
            lambda op, step: guarded(tally, node, op, node.rel, step),
        ):
            parent.has_content = True
    except OSError as exc:
        ctx.fail(
            tally,
            node,
            ctx.error("finish directory", node.display(node.rel), exc, node),
        )
    finally:
        node.close()
