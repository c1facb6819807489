"""The store engine's walk: one directory at a time, through the one directory lifecycle.

The store copy (:mod:`rcp_provider.fsspec.storecopy`) visits its trees here, as the
local engine's walk (:mod:`rcp_core.engine.walk`) visits POSIX trees: the work is items of a
:class:`~rcp_core.run.pool.WorkPool` (a directory's scan, each of its files, each
subdirectory's visit), at most ``max_workers`` running at once, depth first; each
directory in flight is a :class:`StoreDir` counted by the one
:class:`~rcp_core.engine.tree.Lifecycle`.

Invariants:

- **memory follows the directories in flight**, never the tree: a directory's source
  and destination are listed one level (:func:`~rcp_provider.fsspec.storetree.list_dir`)
  when its scan runs, and the listings are dropped when it is finished;
- **parents before children**: a subdirectory's destination is made (or found) before
  its entries are pushed, so a file's directory exists when the file is written;
- **filters** decide each listed entry as the local walk does
  (:meth:`~rcp_core.engine.filters.Filter.decide`, with the parent's ``under_include`` and
  ``.gitignore`` stack; a directory's own ``.gitignore`` is read from the source
  before its entries are decided); an excluded entry is skipped and counted, an
  excluded directory is not listed;
- **post-order finish**, once a directory's files and subdirectories are done, unless
  the run stopped: a traverse-only directory this run made and left empty is removed;
  ``delete`` prunes what the source does not list, only when nothing in the subtree
  failed and the directory existed before the run; then the directory's metadata is
  set (on a POSIX destination; not on an existing one under ``ignore-existing``);
- **pruning** removes only destination names the source directory does not list
  (each destination name checked by :mod:`rcp_core.names` before it is joined); names
  the filters exclude are kept unless ``delete_excluded``, and so are the directories
  holding them; on a POSIX destination it is the local engine's fd-relative removal
  (:func:`rcp_core.engine.removeentry.remove_entry`: never through a symlink).
"""

from __future__ import annotations

import enum
import errno
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rcp_core.engine.filters import Filter, GitIgnores, Verdict
from rcp_core.engine.removeentry import Protect, remove_entry
from rcp_core.engine.tree import DIR_FLAGS, Lifecycle, Node, joined
from rcp_core.errors import UnsafeNameError
from rcp_core.names import check_relative
from rcp_core.run.pool import WorkPool
from rcp_core.run.summary import Tally
from rcp_core.settings import ExistingPolicy
from rcp_provider.fsspec.storetree import Item, Listing, list_dir, relative

if TYPE_CHECKING:
    from rcp_provider.fsspec.storecopy import StoreCopy


class Made(enum.Enum):
    """What became of a source directory's destination."""

    CREATED = "created"
    FOUND = "found"
    KEPT = "kept"
    """An entry of another kind the policy keeps: the subtree is not entered."""


@dataclass(slots=True, eq=False, kw_only=True)
class StoreDir(Node["StoreDir"]):
    """One source directory being copied; ``rel`` is relative to the source root.

    :param info: the source directory's fsspec info (its metadata, set at the finish).
    :param fresh: its destination was made by this run (nothing there to list or
        prune); ``created`` the same, counted as copied.
    :param traverse_only: entered only to look for included entries.
    :param under_include: it or an ancestor matched an include rule.
    :param ignores: the ``.gitignore`` stack in effect below it.
    :param names: every safe name its source lists (what ``delete`` keeps).
    :param there: its destination's entries by name (``delete`` only).
    """

    info: dict[str, Any]
    fresh: bool = False
    created: bool = False
    traverse_only: bool = False
    under_include: bool = False
    ignores: GitIgnores | None = None
    has_content: bool = False
    names: frozenset[str] = frozenset()
    there: dict[str, dict[str, Any]] = field(default_factory=dict)


class StoreWalk:
    """Walks one copy's source and visits its entries through ``copy``'s operations."""

    def __init__(self, copy: StoreCopy) -> None:
        self.copy = copy
        self.source, self.target = copy.source, copy.target
        settings = copy.settings
        self.filter = Filter.build(
            includes=settings.includes,
            excludes=settings.excludes,
            filter_file=settings.filter_file,
            gitignore=settings.gitignore,
        )
        self.pool = WorkPool(copy.workers, copy.workers, self._crashed)
        self.tree: Lifecycle[StoreDir] = Lifecycle(self._finish)

    def run(self, info: dict[str, Any], there: dict[str, Any] | None) -> None:
        """Copy the source root (its fsspec ``info``) onto the target (``there``:
        what is there, if anything); returns when every entry is done.

        :raises Exception: what an item raised that is no entry error (a bug).
        """
        setup = Tally()
        self.pool.tallies.append(setup)
        root = Item("", info)
        if not root.is_dir:
            self.pool.push(self._file, None, root, there)
        else:
            node = StoreDir(parent=None, rel="", info=info)
            self.pool.push(self._visit, node, there)
        self.pool.run()

    def _crashed(self, exc: BaseException) -> None:
        self.copy.stop(f"internal error: {exc!r}")

    def _file(
        self,
        tally: Tally,
        node: StoreDir | None,
        item: Item,
        there: dict[str, Any] | None,
    ) -> None:
        try:
            done = self.copy.entry(
                tally,
                "copy",
                item.rel,
                lambda: self.copy.copy_entry(item, there, tally),
            )
            if node is not None:
                if done:
                    node.has_content = True
                else:
                    node.incomplete = True
        finally:
            self.tree.release(tally, node)

    def _visit(
        self, tally: Tally, node: StoreDir, there: dict[str, Any] | None
    ) -> None:
        """Make or find the destination of ``node``, then scan it; a directory kept
        by the policy, or one that could not be made, is not entered."""
        item = Item(node.rel, node.info)
        made = self.copy.entry(
            tally,
            "create directory",
            node.rel,
            lambda: self.copy.make_dir(item, there, tally),
        )
        if made is None or made is Made.KEPT:
            if node.parent is not None:
                node.parent.incomplete |= made is None
                self.tree.release(tally, node.parent)
            return
        node.created = node.fresh = made is Made.CREATED
        self._scan(tally, node)

    def _scan(self, tally: Tally, node: StoreDir) -> None:
        """List ``node``'s source (and, if it existed, destination) and push its
        entries; then drop the scan's own reference."""
        copy = self.copy
        try:
            if copy.stopping:
                node.incomplete = True
                return
            listing = list_dir(self.source, self.source.join(node.rel), follow=True)
            tally["scanned.dirs"] += 1
            there = {} if node.fresh else self._destination(node)
            ignore_file = listing.infos.get(".gitignore", {})
            if self.filter.gitignore and ignore_file.get("type") == "file":
                node.ignores = self._gitignores(node)
            if copy.settings.delete:
                node.names, node.there = frozenset(listing.infos), there
            self._push(tally, node, listing, there)
        except OSError as exc:
            node.incomplete = True
            copy.record(tally, copy.error("read directory", node.rel or ".", exc))
        finally:
            self.tree.release(tally, node)

    def _destination(self, node: StoreDir) -> dict[str, dict[str, Any]]:
        """What the destination directory of ``node`` holds, by name ({} if nothing:
        an object store's prefix need not exist). A name that is not safe is left
        out: no source name (all safe) matches it, and it is never joined."""
        try:
            return list_dir(self.target, self.target.join(node.rel), follow=False).infos
        except FileNotFoundError:
            return {}

    def _gitignores(self, node: StoreDir) -> GitIgnores:
        """``node``'s stack with its source's ``.gitignore`` (read as git reads it)."""
        path = self.source.join(joined(node.rel, ".gitignore"))
        text = self.source.fs.cat_file(path).decode("utf-8", "surrogateescape")
        return (node.ignores or GitIgnores.root()).with_file(node.rel, text)

    def _push(
        self,
        tally: Tally,
        node: StoreDir,
        listing: Listing,
        there: dict[str, dict[str, Any]],
    ) -> None:
        """Decide each listed entry; push the files and subdirectories that go."""
        copy = self.copy
        tally["skipped.symlinks"] += listing.skipped_links
        for name, unsafe in sorted(listing.unsafe.items()):
            node.incomplete = True
            reason = f"unsafe name: {unsafe.reason}"
            error = OSError(errno.EINVAL, reason)
            copy.record(tally, copy.error("list", joined(node.rel, name), error))
        tally["found.entries"] += len(listing.infos)
        for name, info in sorted(listing.infos.items()):
            item = Item(node.child_rel(name), info)
            verdict = Verdict.INCLUDE
            if self.filter.active:
                decision = self.filter.decide(
                    item.rel,
                    item.is_dir,
                    under_include=node.under_include,
                    ignores=node.ignores,
                )
                verdict = decision.verdict
                if verdict is Verdict.EXCLUDE:
                    tally["skipped.dirs" if item.is_dir else "skipped.files"] += 1
                    kind = "dir" if item.is_dir else "entry"
                    copy.dry("skip", kind, item.rel, f"excluded by {decision.pattern}")
                    continue
            self.tree.hold(node)
            if not item.is_dir:
                self.pool.push(self._file, node, item, there.get(name))
                continue
            tally["found.dirs"] += 1
            child = StoreDir(
                parent=node,
                rel=item.rel,
                info=info,
                traverse_only=verdict is Verdict.TRAVERSE,
                under_include=node.under_include or verdict is Verdict.INCLUDE,
                ignores=node.ignores,
            )
            self.pool.push(self._visit, child, there.get(name))

    def _finish(self, tally: Tally, node: StoreDir) -> None:
        """Post-order: what a directory needs once all below it is done (see the
        module's invariants)."""
        copy = self.copy
        if copy.stopping:
            return
        item = Item(node.rel, node.info)
        dry = copy.settings.dry_run is not None
        if node.traverse_only and not node.has_content:
            if node.created and not dry and self.target.has_directories:
                path = self.target.join(node.rel)
                copy.entry(
                    tally,
                    "remove directory",
                    node.rel,
                    lambda: self.target.fs.rmdir(path),
                )
            return
        prunes = copy.settings.delete and not node.incomplete and not node.fresh
        if prunes and not copy.entry(
            tally, "delete", node.rel, lambda: self._prune(tally, node)
        ):
            node.incomplete = True
        keep_existing = copy.settings.existing is ExistingPolicy.IGNORE_EXISTING
        if self.target.posix and not dry and (node.created or not keep_existing):
            copy.entry(tally, "set metadata", node.rel, lambda: copy.set_meta(item))
        tally["copied.dirs" if node.created else "unchanged.dirs"] += 1
        if node.parent is not None:
            node.parent.has_content = True

    def _excluded(self, node: StoreDir) -> Protect:
        """Whether the filters exclude a destination entry below ``node``."""

        def excluded(rel: str, is_dir: bool) -> bool:
            decision = self.filter.decide(
                rel, is_dir, under_include=node.under_include, ignores=node.ignores
            )
            return decision.verdict is Verdict.EXCLUDE

        return excluded

    def _prune(self, tally: Tally, node: StoreDir) -> bool:
        """``delete``: remove what ``node``'s destination holds and its source does
        not list (the module's pruning invariant)."""
        copy, settings = self.copy, self.copy.settings
        excluded = self._excluded(node)
        protect = None
        if self.filter.active and not settings.delete_excluded:
            protect = excluded
        for name, info in sorted(node.there.items()):
            rel = node.child_rel(name)
            is_dir = info.get("type") == "directory"
            if self.filter.active and excluded(rel, is_dir):
                if not settings.delete_excluded:
                    continue  # protected: excluded names are not ours to remove
            elif name in node.names:
                continue
            copy.dry("remove", "entry", rel, "not in source")
            if settings.dry_run is None:
                self._remove(tally, rel, info, protect)
        return True

    def _remove(
        self, tally: Tally, rel: str, info: dict[str, Any], protect: Protect | None
    ) -> None:
        """Remove the destination entry ``rel`` (a whole tree if it is a directory),
        keeping what ``protect`` claims and the directories holding it."""
        if self.target.posix:
            parent, name = os.path.split(self.target.join(rel))
            fd = os.open(parent, DIR_FLAGS | os.O_NOFOLLOW)
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                remove_entry(fd, name, st, tally, rel=rel, protect=protect)
            finally:
                os.close(fd)
            return
        fs, path = self.target.fs, self.target.join(rel)
        if info.get("type") != "directory":
            fs.rm_file(path)
            tally["removed.files"] += 1
            tally["removed.bytes"] += int(info.get("size") or 0)
            return
        files, dirs, kept = _below(fs, path, rel, protect)
        for file_path, size in files:
            fs.rm_file(file_path)
            tally["removed.files"] += 1
            tally["removed.bytes"] += size
        if not self.target.has_directories:
            return  # a prefix: it goes with its last key
        for dir_rel in sorted(dirs, key=lambda d: -d.count("/")):
            if dir_rel not in kept:
                fs.rmdir(self.target.join(dir_rel))
                tally["removed.dirs"] += 1


def _below(
    fs: Any, path: str, rel: str, protect: Protect | None
) -> tuple[list[tuple[str, int]], list[str], set[str]]:
    """What removing the store directory ``path`` (at ``rel``) removes: its files
    (path, size) and directories (relative paths, ``rel`` itself included), and the
    directories that stay because they hold an entry ``protect`` claims or one whose
    name is not safe (never joined, never removed)."""
    files: list[tuple[str, int]] = []
    dirs: list[str] = [rel]
    kept: set[str] = set()
    protected: list[str] = []
    for listed, info in sorted(fs.find(path, withdirs=True, detail=True).items()):
        sub = relative(listed, path)
        if not sub:
            continue
        is_dir = info.get("type") == "directory" or sub.endswith("/")
        sub = sub.rstrip("/") if is_dir else sub
        try:
            entry_rel = joined(rel, check_relative(sub))
        except UnsafeNameError:
            kept.update(_holding(rel, sub))
            continue
        if any(entry_rel.startswith(p + "/") for p in protected) or (
            protect is not None and protect(entry_rel, is_dir)
        ):
            protected.append(entry_rel)
            kept.update(_holding(rel, sub))
            continue
        if is_dir:
            dirs.append(entry_rel)
        else:
            files.append((listed, int(info.get("size") or 0)))
    return files, dirs, kept


def _holding(rel: str, sub: str) -> set[str]:
    """``rel`` and the directories between it and its entry ``sub``."""
    found, current = {rel}, rel
    for part in sub.split("/")[:-1]:
        current = joined(current, part)
        found.add(current)
    return found
