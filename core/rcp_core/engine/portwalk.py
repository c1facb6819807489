"""The generic engine's walk: one directory at a time, between any two backend ports.

The generic copy (:mod:`rcp_core.engine.portcopy`) visits its trees here, as the
local engine's walk (:mod:`rcp_core.engine.walk`) visits POSIX trees through fds:
the work is items of a :class:`~rcp_core.run.pool.WorkPool` (a directory's scan,
each of its files, each subdirectory's visit), at most ``max_workers`` running at
once, depth first; each directory in flight is a :class:`PortDir` counted by the one
:class:`~rcp_core.engine.tree.Lifecycle`. Everything it does to storage goes through
the ports (:class:`rcp_core.backends.port.Port`).

Invariants:

- **memory follows the directories in flight**, never the tree: a directory's source
  and destination are listed one level (:meth:`~rcp_core.backends.port.Port.list`)
  when its scan runs, and the listings are dropped when it is finished; a source
  that lists in pages is scanned a page at a time (:mod:`~rcp_core.engine.portpages`),
  so a directory's memory follows its pages in flight;
- **parents before children**: a subdirectory's destination is made (or found) before
  its entries are pushed, so a file's directory exists when the file is written;
- **filters** decide each listed entry as the local walk does
  (:meth:`~rcp_core.engine.filters.Filter.decide`, with the parent's
  ``under_include`` and ``.gitignore`` stack; a directory's own ``.gitignore`` is
  read from the source before its entries are decided); an excluded entry is
  skipped and counted, an excluded directory is not listed;
- **post-order finish**, once a directory's files and subdirectories are done, unless
  the run stopped: a traverse-only directory this run made and left empty is removed;
  ``delete`` prunes what the source does not list, only when nothing in the subtree
  failed and the directory existed before the run; then the directory's metadata is
  set (where the destination keeps it; not on an existing one under
  ``ignore-existing``);
- **pruning** removes only destination names the source directory does not list
  (names from a port's listing: each one safe component); names the filters exclude
  are kept unless ``delete_excluded``, and so are the directories holding them
  (:meth:`~rcp_core.backends.port.Port.remove`); files a batch in a request where
  the destination removes in batches (:mod:`~rcp_core.engine.portremovals`).

Over 400 lines because :class:`PortWalk` is one walk: its work items (a directory's
scan and its pages, a file, a subdirectory's visit, the post-order finish with its
pruning) share the walk's state, each method short.
"""

from __future__ import annotations

import enum
import errno
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rcp_core.backends.port import Entry, EntryKind, Listing, ListsInPages, Protect
from rcp_core.engine.filters import Filter, GitIgnores, Verdict
from rcp_core.engine.portpages import PagedScan, refuse_unsafe
from rcp_core.engine.portremovals import RemovalBatches
from rcp_core.engine.tree import Lifecycle, Node, joined
from rcp_core.run.pool import WorkPool
from rcp_core.run.summary import Tally
from rcp_core.settings import ExistingPolicy

if TYPE_CHECKING:
    from rcp_core.engine.portcopy import PortCopy


class Made(enum.Enum):
    """What became of a source directory's destination."""

    CREATED = "created"
    FOUND = "found"
    KEPT = "kept"
    """An entry of another kind the policy keeps: the subtree is not entered."""


@dataclass(slots=True, eq=False, kw_only=True)
class PortDir(Node["PortDir"]):
    """One source directory being copied; ``rel`` is relative to the source root.

    :param entry: the source directory (its metadata, set at the finish).
    :param fresh: its destination was made by this run (nothing there to list or
        prune); ``created`` the same, counted as copied.
    :param traverse_only: entered only to look for included entries.
    :param under_include: it or an ancestor matched an include rule.
    :param ignores: the ``.gitignore`` stack in effect below it.
    :param names: every safe name its source lists (what ``delete`` keeps).
    :param there: its destination's entries by name (``delete`` only).
    """

    entry: Entry
    fresh: bool = False
    created: bool = False
    traverse_only: bool = False
    under_include: bool = False
    ignores: GitIgnores | None = None
    has_content: bool = False
    names: frozenset[str] = frozenset()
    there: dict[str, Entry] = field(default_factory=dict)


class PortWalk:
    """Walks one copy's source and visits its entries through ``copy``'s operations."""

    def __init__(self, copy: PortCopy) -> None:
        self.copy = copy
        self.source, self.target = copy.source, copy.target
        settings = copy.settings
        self.filter = Filter.of(settings)
        chosen = copy.concurrency
        self.pool = WorkPool(chosen.maximum, chosen.initial, self._crashed)
        self.paged_source = (
            self.source if isinstance(self.source, ListsInPages) else None
        )
        self.paged_target = (
            self.target if isinstance(self.target, ListsInPages) else None
        )
        self.tree: Lifecycle[PortDir] = Lifecycle(self._finish)

    def run(self, entry: Entry, there: Entry | None) -> None:
        """Copy the source root (``entry``) onto the target (``there``: what is
        there, if anything); returns when every entry is done.

        :raises Exception: what an item raised that is no entry error (a bug).
        """
        self.pool.tallies.append(Tally())
        self._enter("", entry, there)
        self.pool.run()

    def run_units(self, units: Sequence[str]) -> None:
        """Copy each of ``units`` (paths below both roots: a shard's) as a root is
        copied, each looked at by a worker; returns when every entry is done. A unit
        the source no longer has is an entry error.

        :raises Exception: what an item raised that is no entry error (a bug).
        """
        self.pool.tallies.append(Tally())
        for rel in units:
            self.pool.push(self._unit, rel)
        self.pool.run()

    def _unit(self, tally: Tally, rel: str) -> None:
        copy = self.copy
        found = copy.entry(
            tally, "stat", rel, lambda: (self.source.stat(rel), self.target.stat(rel))
        )
        if found is None:
            return
        entry, there = found
        if entry is None:
            gone = FileNotFoundError(errno.ENOENT, "gone since the plan")
            copy.record(tally, copy.error("stat", rel, gone))
            return
        self._enter(rel, entry, there)

    def _enter(self, rel: str, entry: Entry, there: Entry | None) -> None:
        """Push the copy of ``rel`` (a root: no parent waits for it) onto
        ``there``."""
        if not entry.is_dir:
            self.pool.push(self._file, None, rel, entry, there)
        else:
            node = PortDir(parent=None, rel=rel, entry=entry)
            self.pool.push(self._visit, node, there)

    def _crashed(self, exc: BaseException) -> None:
        self.copy.stop(f"internal error: {exc!r}")

    def _file(
        self,
        tally: Tally,
        node: PortDir | None,
        rel: str,
        entry: Entry,
        there: Entry | None,
    ) -> None:
        try:
            done = self.copy.entry(
                tally,
                "copy",
                rel,
                lambda: self.copy.copy_entry(rel, entry, there, tally),
            )
            if node is not None:
                if done:
                    node.has_content = True
                else:
                    node.incomplete = True
        finally:
            self.tree.release(tally, node)

    def _visit(self, tally: Tally, node: PortDir, there: Entry | None) -> None:
        """Make or find the destination of ``node``, then scan it; a directory kept
        by the policy, or one that could not be made, is not entered."""
        made = self.copy.entry(
            tally,
            "create directory",
            node.rel,
            lambda: self.copy.make_dir(node.rel, node.entry, there, tally),
        )
        if made is None or made is Made.KEPT:
            if node.parent is not None:
                node.parent.incomplete |= made is None
                self.tree.release(tally, node.parent)
            return
        node.created = node.fresh = made is Made.CREATED
        self._scan(tally, node)

    def _scan(self, tally: Tally, node: PortDir) -> None:
        """List ``node``'s source (and, if it existed, destination; each listing
        tried again on a transient error) and push its entries, a page at a time
        where :meth:`_pages` says so; then drop the scan's own reference."""
        copy = self.copy
        try:
            if copy.stopping:
                node.incomplete = True
                return
            scan = self._pages(node)
            if scan is not None:
                tally["scanned.dirs"] += 1
                self.tree.hold(node)  # the page's own, released by it
                self._page(tally, node, scan)
                return
            follow = copy.follows_links
            listing = copy.attempt(lambda: self.source.list(node.rel, follow=follow))
            tally["scanned.dirs"] += 1
            there = {} if node.fresh else self._destination(node).entries
            ignore_file = listing.entries.get(".gitignore")
            if self.filter.gitignore and _is_file(ignore_file):
                node.ignores = self._gitignores(node)
            if copy.settings.delete:
                node.names, node.there = frozenset(listing.entries), there
            self._push(tally, node, listing, there)
        except OSError as exc:
            node.incomplete = True
            copy.record(tally, copy.error("read directory", node.rel or ".", exc))
        finally:
            self.tree.release(tally, node)

    def _pages(self, node: PortDir) -> PagedScan | None:
        """How ``node`` is listed a page at a time, if it is
        (:mod:`~rcp_core.engine.portpages`): its source
        :class:`~rcp_core.backends.port.ListsInPages`, and neither ``delete`` (which
        needs every name on both sides) nor ``.gitignore`` rules (a directory's own
        may come on any page) ask for the whole listing first. The destination is
        read beside it where it lists in pages too, else listed whole."""
        source, target = self.paged_source, self.paged_target
        if source is None or self.copy.settings.delete or self.filter.gitignore:
            return None
        attempt, follow = self.copy.attempt, self.copy.follows_links
        if target is not None and not node.fresh:
            return PagedScan(source, node.rel, attempt, follow, target=target)
        there = None if node.fresh else self._destination(node)
        return PagedScan(source, node.rel, attempt, follow, whole=there)

    def _page(self, tally: Tally, node: PortDir, scan: PagedScan) -> None:
        """Push the entries of ``node``'s next page; the scan of the page after it
        goes below them (the pool pops the newest first), so the pages in flight
        stay few. A page that cannot be listed is an entry error of the directory
        (then incomplete), and its scan ends there."""
        try:
            if self.copy.stopping:
                node.incomplete = True
                return
            listing, there = scan.next_page()
            if scan.more:  # ``scan`` is the next page's from here
                self.tree.hold(node)
                self.pool.push(self._page, node, scan)
            self._push(tally, node, listing, there.entries)
        except OSError as exc:
            node.incomplete = True
            self.copy.record(
                tally, self.copy.error("read directory", node.rel or ".", exc)
            )
        finally:
            self.tree.release(tally, node)

    def _destination(self, node: PortDir) -> Listing:
        """What the destination directory of ``node`` holds (nothing where nothing
        is there: an object store's prefix need not exist). A name that is not safe
        is never matched: no source name (all safe) is one, and it is never
        joined."""
        try:
            return self.copy.attempt(lambda: self.target.list(node.rel, follow=False))
        except FileNotFoundError:
            return Listing({}, {})

    def _gitignores(self, node: PortDir) -> GitIgnores:
        """``node``'s stack with its source's ``.gitignore`` (read as git reads it)."""
        with self.source.read(joined(node.rel, ".gitignore")) as ignore_file:
            text = ignore_file.read().decode("utf-8", "surrogateescape")
        return (node.ignores or GitIgnores.root()).with_file(node.rel, text)

    def _push(
        self,
        tally: Tally,
        node: PortDir,
        listing: Listing,
        there: dict[str, Entry],
    ) -> None:
        """Decide each listed entry; push the files and subdirectories that go."""
        copy = self.copy
        tally["skipped.symlinks"] += listing.skipped_links
        refuse_unsafe(copy, tally, node, listing)
        tally["found.entries"] += len(listing.entries)
        for name, entry in sorted(listing.entries.items()):
            rel = node.child_rel(name)
            verdict = Verdict.INCLUDE
            if self.filter.active:
                decision = self.filter.decide(
                    rel,
                    entry.is_dir,
                    under_include=node.under_include,
                    ignores=node.ignores,
                )
                verdict = decision.verdict
                if verdict is Verdict.EXCLUDE:
                    tally["skipped.dirs" if entry.is_dir else "skipped.files"] += 1
                    kind = "dir" if entry.is_dir else "entry"
                    copy.dry("skip", kind, rel, f"excluded by {decision.pattern}")
                    continue
            self.tree.hold(node)
            if not entry.is_dir:
                self.pool.push(self._file, node, rel, entry, there.get(name))
                continue
            tally["found.dirs"] += 1
            child = PortDir(
                parent=node,
                rel=rel,
                entry=entry,
                traverse_only=verdict is Verdict.TRAVERSE,
                under_include=node.under_include or verdict is Verdict.INCLUDE,
                ignores=node.ignores,
            )
            self.pool.push(self._visit, child, there.get(name))

    def _finish(self, tally: Tally, node: PortDir) -> None:
        """Post-order: what a directory needs once all below it is done (see the
        module's invariants)."""
        copy = self.copy
        if copy.stopping:
            return
        dry = copy.settings.dry_run is not None
        if node.traverse_only and not node.has_content:
            if node.created and not dry:
                copy.entry(
                    tally,
                    "remove directory",
                    node.rel,
                    lambda: self.target.remove_dir(node.rel),
                )
            return
        prunes = copy.settings.delete and not node.incomplete and not node.fresh
        if prunes and not copy.entry(
            tally, "delete", node.rel, lambda: self._prune(tally, node)
        ):
            node.incomplete = True
        keep_existing = copy.settings.existing is ExistingPolicy.IGNORE_EXISTING
        if not dry and (node.created or not keep_existing):
            copy.entry(
                tally,
                "set metadata",
                node.rel,
                lambda: copy.set_meta(node.rel, node.entry),
            )
        tally["copied.dirs" if node.created else "unchanged.dirs"] += 1
        if node.parent is not None:
            node.parent.has_content = True

    def _excluded(self, node: PortDir) -> Protect:
        """Whether the filters exclude a destination entry below ``node``."""

        def excluded(rel: str, is_dir: bool) -> bool:
            decision = self.filter.decide(
                rel, is_dir, under_include=node.under_include, ignores=node.ignores
            )
            return decision.verdict is Verdict.EXCLUDE

        return excluded

    def _prune(self, tally: Tally, node: PortDir) -> bool:
        """``delete``: remove what ``node``'s destination holds and its source does
        not list (the module's pruning invariant)."""
        copy, settings = self.copy, self.copy.settings
        excluded = self._excluded(node)
        protect = None
        if self.filter.active and not settings.delete_excluded:
            protect = excluded
        target = self.target

        def gone(name: str, entry: Entry) -> None:
            if copy.changes is not None:
                copy.changed(node.child_rel(name), "remove", entry, None)

        def one(name: str, entry: Entry) -> None:
            target.remove(node.child_rel(name), entry, tally, protect)
            gone(name, entry)

        files = RemovalBatches(target, node.rel, tally, copy.attempt, one, gone)
        for name, entry in sorted(node.there.items()):
            rel = node.child_rel(name)
            is_dir = entry.is_dir
            if self.filter.active and excluded(rel, is_dir):
                if not settings.delete_excluded:
                    continue  # protected: excluded names are not ours to remove
            elif name in node.names:
                continue
            copy.dry("remove", "entry", rel, "not in source")
            if settings.dry_run is not None:
                continue
            if is_dir:
                one(name, entry)
            else:
                files.add(name, entry)
        files.flush()
        return True


def _is_file(entry: Entry | None) -> bool:
    return entry is not None and entry.kind is EntryKind.FILE
