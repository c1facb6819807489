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

from rcp_core.engine.context import Context
from rcp_core.engine.destination import Step, extraneous, plan_dir
from rcp_core.engine.entries import existing
from rcp_core.engine.filters import GitIgnores, Verdict
from rcp_core.engine.removeentry import Protect, remove_entry
from rcp_core.engine.temporaries import sweep
from rcp_core.engine.tree import DIR_FLAGS, DirNode
from rcp_core.run.summary import Tally
from rcp_core.settings import ExistingPolicy

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
            remove_entry(dst_fd, entry.name, st, tally, rel=rel, protect=protect)


def clear_leftovers(ctx: Context, tally: Tally, node: DirNode) -> None:
    """Remove what an interrupted run left in this existing directory: temporaries
    of names the source has (:func:`rcp_core.engine.temporaries.sweep`), counted as removed
    files."""
    assert node.dst_fd is not None
    found = sweep(
        node.dst_fd,
        lambda name: in_source(node.src_fd, name),
        dry=ctx.dry_run is not None,
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


def finish_dir(ctx: Context, tally: Tally, node: DirNode, guarded: Guarded) -> None:
    """All children are done: prune, apply metadata, close (post-order).

    :param guarded: runs a step, retrying transient errors and recording others.
    """
    parent = node.parent
    try:
        if parent is None or node.st is None:
            return  # an anchor: nothing of its own to finish
        if ctx.stopping:
            return
        if node.traverse_only and not node.has_content:
            if node.created and ctx.dry_run is None and parent.dst_fd is not None:
                os.rmdir(node.dst_name, dir_fd=parent.dst_fd)
            return
        if not node.fresh and node.dst_fd is not None:
            guarded(
                tally,
                node,
                "remove temporaries",
                node.rel,
                lambda: clear_leftovers(ctx, tally, node),
            )
        if ctx.settings.delete and not node.incomplete and not node.fresh:
            guarded(
                tally,
                node,
                "delete",
                node.rel,
                lambda: prune(ctx, tally, node),
            )
        keep_existing = ctx.settings.existing is ExistingPolicy.IGNORE_EXISTING
        if (
            ctx.dry_run is None
            and node.dst_fd is not None
            and (node.created or not keep_existing)
        ):
            st, dst_fd = node.st, node.dst_fd
            guarded(
                tally,
                node,
                "set directory metadata",
                node.rel,
                lambda: ctx.metadata.apply(
                    node.src_fd, dst_fd, st, is_dir=True, times=True
                ),
            )
        tally["copied.dirs" if node.created else "unchanged.dirs"] += 1
        parent.has_content = True
    except OSError as exc:
        ctx.fail(
            tally,
            node,
            ctx.error("finish directory", node.display(node.rel), exc, node),
        )
    finally:
        node.close()
