"""Parallel removal of trees through backend ports: ``rrm`` on a URL store
(``memory://``, ``s3://bucket/key``, any fsspec store), an ``rcpd serve`` service
(``rcp://host:port/path``) or a site's own backend.

The same removal as this host's (:mod:`rcp_core.tools.remove.rmtree`), with the
rules of :mod:`rcp_core.tools.remove.removal` (selection, age, dry run, emptied
directories, errors, the run's end), walked one directory at a time through each
operand's :class:`~rcp_core.backends.port.Port`: a directory is listed one level
(:meth:`~rcp_core.backends.port.Port.list`, symlinks not followed; a page at a
time where the port :class:`~rcp_core.backends.port.ListsInPages`, so a prefix of a
million objects is removed in the memory of the pages in flight, by as many
workers as pages) when a worker scans it, each non-directory that goes is removed
(:meth:`~rcp_core.backends.port.Port.remove`, which counts it; where the port
:class:`~rcp_core.backends.port.RemovesInBatches`, a listing's non-directories that
go are removed a batch in a request, an S3 page of a thousand keys in one
``DeleteObjects``: :mod:`rcp_core.engine.portremovals`), each subdirectory is
a work item, and a directory emptied of everything is removed after its last child
(:meth:`~rcp_core.backends.port.Port.remove_dir`: nothing on a store of prefixes,
where a prefix goes with its last key, counted all the same). At most
``max_workers`` (default 16) items run at once: a store answers slowly, in parallel.

Invariants:

- **nothing outside the operands**: every name removed comes from a listing of the
  operand's tree and is one safe component (a name that is not, ``..``, an empty
  component, a key with ``//``, is an entry error, never joined, and its directory
  stays); a listing of ``s3://b/dir`` is of the prefix ``dir/``, so ``dir2/`` is
  never listed; a symlink is removed, never followed (an operand that is one is the
  link);
- **refused up front**, before anything is listed or removed (a
  :class:`~rcp_core.errors.UsageError`, one line naming the flag and the storage):
  ``created_before`` (no port gives birth times), ``modified_before`` where the
  storage's listings give no times (:attr:`~rcp_core.backends.capabilities.
  Capability.LISTED_TIMES`: ``memory://`` has none), ``cross_devices`` where the
  operand's entry tells no device (a store; a service older than protocol 1.12), a
  missing operand without ``missing_ok``, and the top of a storage (a bucket, a
  service host's ``/``) or, where devices are told, a mount point without ``force``;
- **mount points**: where the listings tell each entry's device
  (:attr:`~rcp_core.backends.port.Entry.dev`: this host's, a service's from 1.12), a
  subdirectory on another device than its operand's (a filesystem mounted inside the
  tree) is kept, not entered, with a warning, as this host's removal keeps it, unless
  ``cross_devices``. Whether a storage tells devices is read from the operand's
  entry, not declared as a capability: a service tells them or not by its version;
- **age**: ``modified_before`` reads each entry's
  :attr:`~rcp_core.backends.port.Entry.changed_ns`: its modification time where the
  storage keeps one, else the storage's own time of its last change (an object's
  upload); an entry whose listing gives none stays;
- **counts**: what goes is counted by its kind, a file with its bytes (a listing
  gives sizes at no cost).
"""

from __future__ import annotations

import logging
import posixpath
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pluggy

from rcp_core.backends.capabilities import Capability
from rcp_core.backends.port import Entry, EntryKind, ListsInPages, Port
from rcp_core.engine.portpages import refuse_unsafe
from rcp_core.engine.portremovals import RemovalBatches
from rcp_core.engine.removeentry import count_removed
from rcp_core.errors import UsageError
from rcp_core.run.monitor import Observer
from rcp_core.run.summary import Summary, Tally
from rcp_core.site.builtin import STORE_WORKERS
from rcp_core.tools.remove.removal import Removal, RemoveSettings
from rcp_core.tools.remove.treewalk import Walked, run_walk

log = logging.getLogger("rcp_core")

_KINDS = {
    EntryKind.FILE: "files",
    EntryKind.SYMLINK: "symlinks",
    EntryKind.OTHER: "specials",
}
"""A non-directory's kind in the summary."""


@dataclass(slots=True, eq=False, kw_only=True)
class _PortDir(Walked):
    """A directory being emptied through ``port`` (its operand's tree; ``rel`` is
    relative to it): on the device ``dev`` where the listings tell devices."""

    port: Port
    dev: int | None


def remove_ports(
    ports: Sequence[Port],
    settings: RemoveSettings | None = None,
    *,
    plugins: pluggy.PluginManager | Iterable[object] | None = None,
    on_progress: Observer | None = None,
    progress_interval: float = 1.0,
    cancel: threading.Event | None = None,
) -> Summary:
    """Remove the trees at the roots of ``ports`` as ``settings`` say; the summary.

    :raises UsageError: what the module refuses up front; nothing was removed.
    :raises CopyFailedError: something was not removed that should have been, or
        the removal was cancelled (the partial summary; entries the filters and age
        rules keep are not failures).
    """
    return run_walk(
        "remove",
        _PortRemoval,
        _operand,
        ports,
        settings or RemoveSettings(),
        plugins,
        on_progress,
        progress_interval,
        cancel,
    )


def refuse(settings: RemoveSettings, port: Port) -> None:
    """Refuse what a removal through ``port`` cannot honour whatever its operand
    (see the module; ``cross_devices`` is :func:`_operand`'s to refuse).

    :raises UsageError: naming the flags and the storage, on one line.
    """
    backend = port.backend
    flags = []
    if settings.created_before is not None:
        flags.append("--created-before (birth times are read on local paths only)")
    if settings.modified_before is not None and not backend.has(
        Capability.LISTED_TIMES
    ):
        flags.append("--modified-before (its listings give no times)")
    if flags:
        raise UsageError(f"not supported on {backend.name}: " + ", ".join(flags))


def _operand(port: Port, settings: RemoveSettings) -> tuple[Port, Entry] | None:
    """The operand and its entry (a symlink not followed), once what the removal
    refuses is refused and the operand is known to exist and may be removed;
    ``None`` for one that does not exist, with ``missing_ok``.

    :raises UsageError: :func:`refuse`'s, it does not exist, or it is the top of its
        storage.
    """
    refuse(settings, port)
    shown = port.describe("")
    entry = port.stat("", follow=False)
    if entry is None:
        if settings.missing_ok:
            log.info("%s: not there; nothing to remove", shown)
            return None
        raise UsageError(f"{shown}: no such file or directory")
    if settings.cross_devices and entry.dev is None:
        raise UsageError(
            f"not supported on {port.backend.name}: --cross-devices "
            "(its listings tell no devices)"
        )
    parent = port.parent()
    if parent is None and not settings.force:
        raise UsageError(f"{shown}: refusing to remove the top of a storage (--force)")
    if parent is not None and entry.is_dir and entry.dev is not None:
        above = None if settings.force else parent.stat("", follow=False)
        if above is not None and above.dev is not None and above.dev != entry.dev:
            raise UsageError(f"{shown}: refusing to remove a mount point (--force)")
    return port, entry


class _PortRemoval(Removal[_PortDir]):
    """One removal through ports: a fixed number of workers (no controller: a
    store's latency, not this host's CPU, sets the pace)."""

    def __init__(
        self,
        settings: RemoveSettings,
        plugins: pluggy.PluginManager,
        operands: list[tuple[Port, Entry]],
    ) -> None:
        workers = settings.max_workers or STORE_WORKERS
        super().__init__(settings, plugins, (workers, workers))
        self.operands = operands

    def execute(self) -> None:
        setup = Tally()
        self.pool.tallies.append(setup)
        for port, entry in self.operands:
            if not entry.is_dir:
                self.pool.push(self._leaf, port, entry)
                continue
            # The operand itself is never filtered, nor does it match an include.
            node = _PortDir(
                parent=None,
                rel="",
                port=port,
                dev=entry.dev,
                display=port.describe(""),
                under_include=not self.filter.includes,
            )
            self.pool.push(self._scan, node)
        self.pool.run()

    def _leaf(self, tally: Tally, port: Port, entry: Entry) -> None:
        """An operand that is not a directory."""
        where, name = posixpath.split(port.describe(""))
        if self._goes(tally, None, entry):
            self._drop(tally, None, port, "", where, name, entry)

    def _scan(self, tally: Tally, node: _PortDir) -> None:
        """List ``node`` one level (tried again on a transient error; a page at a
        time where its port lists in pages, :meth:`_page`) and hand each entry to
        the rules; then drop the scan's own reference."""
        try:
            if self.stopping:
                node.incomplete = True
                return
            port = node.port
            if isinstance(port, ListsInPages):
                self.tree.hold(node)  # the first page's, released by it
                self._page(tally, node, None)
                return
            listing = self.attempt(lambda: port.list(node.rel, follow=False))
            refuse_unsafe(self, tally, node, listing)
            self._empty(tally, node, listing.entries)
        except OSError as exc:
            node.incomplete = True
            self.failed(tally, "read directory", node.display, exc)
        finally:
            self.tree.release(tally, node)

    def _page(self, tally: Tally, node: _PortDir, after: object | None) -> None:
        """One page of ``node``'s listing: the next page pushed first (an idle
        worker lists it while this one removes this page's entries), then each
        entry handed to the rules; then drop the page's reference."""
        try:
            if self.stopping:
                node.incomplete = True
                return
            port = node.port
            assert isinstance(port, ListsInPages), "paged only where it lists in pages"
            page = self.attempt(lambda: port.page(node.rel, follow=False, after=after))
            if page.after is not None:
                self.tree.hold(node)
                self.pool.push(self._page, node, page.after)
            refuse_unsafe(self, tally, node, page.listing)
            self._empty(tally, node, page.listing.entries)
        except OSError as exc:
            node.incomplete = True
            self.failed(tally, "read directory", node.display, exc)
        finally:
            self.tree.release(tally, node)

    def _empty(self, tally: Tally, node: _PortDir, entries: dict[str, Entry]) -> None:
        """Each listed entry of ``node``, until the run stops: the non-directories
        that go removed a batch at a time where the port removes in batches (not in
        a dry run, which removes nothing)."""
        port = node.port

        def one(name: str, entry: Entry) -> None:
            rel = node.child_rel(name)
            self._drop(tally, node, port, rel, node.display, name, entry)

        if self.settings.dry_run:
            batches = None
        else:
            batches = RemovalBatches(port, node.rel, tally, self.attempt, one)
        for name, entry in entries.items():
            if self.stopping:
                node.incomplete = True
                return
            if not self._entry(tally, node, name, entry):
                continue
            if batches is None:
                one(name, entry)
            else:
                batches.add(name, entry)
        if batches is not None:
            batches.flush()

    def _entry(self, tally: Tally, node: _PortDir, name: str, entry: Entry) -> bool:
        """One listed entry of ``node``: kept, or queued (a directory); whether it
        is a non-directory that goes (the age rule let it)."""
        rel = node.child_rel(name)
        under = node.under_include
        if self.filter.active:
            selected = self.selected(tally, node, rel, entry.is_dir)
            if selected is None:
                return False
            under = selected
        if not entry.is_dir:
            return under and self._goes(tally, node, entry)
        display = posixpath.join(node.display, name)
        if (
            node.dev is not None
            and entry.dev is not None
            and entry.dev != node.dev
            and not self.settings.cross_devices
        ):
            node.incomplete = True
            tally["skipped.dirs"] += 1
            log.warning("%s: another filesystem is mounted here; kept", display)
            return False
        self.tree.hold(node)
        child = _PortDir(
            parent=node,
            rel=rel,
            port=node.port,
            dev=entry.dev,
            display=display,
            under_include=under,
        )
        self.pool.push(self._scan, child)
        return False

    def _goes(self, tally: Tally, node: _PortDir | None, entry: Entry) -> bool:
        """Whether the age rule lets the non-directory ``entry`` go (else it is
        kept, counted)."""
        changed = entry.changed_ns
        if self.too_young(changed / 1e9 if changed is not None else None):
            self.kept(tally, node, _KINDS[entry.kind])
            return False
        return True

    def _drop(
        self,
        tally: Tally,
        node: _PortDir | None,
        port: Port,
        rel: str,
        where: str,
        name: str,
        entry: Entry,
    ) -> None:
        """Remove the non-directory ``rel`` of ``port``, one that goes (the port
        counts it; a dry run counts it here)."""
        gone = self.drop(
            tally, node, where, name, lambda: port.remove(rel, entry, tally, None)
        )
        if gone and self.settings.dry_run:
            count_removed(tally, entry.stat())

    def remove_dir(self, node: _PortDir) -> None:
        node.port.remove_dir(node.rel)
