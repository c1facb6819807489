"""What the generic engine does with a file its destination already holds: the local
copy's rules (:func:`rcp_core.engine.existing.decide`) on two ports' entries, asking a
store only what its listing did not tell.

Invariants:

- **times count only where both sides keep settable ones** (:attr:`ExistingFiles.timed`,
  :attr:`~rcp_core.backends.capabilities.Capability.MTIMES`): elsewhere ``mtime`` is
  not compared and ``update`` replaces what differs, as ``overwrite`` does;
- **a proof by checksum costs no request**: where a side's listing lacked its mtime
  (an S3 object's), a same-size pair is unchanged when its store's recorded MD5
  (:attr:`~rcp_core.backends.port.Entry.checksum`) was recorded after the other
  side last changed and the other side's bytes (hashed here, from this host's file
  of at most :data:`HASHED_NOT_ASKED` bytes) or recorded MD5 match it; a mismatch
  proves nothing (:mod:`rcp_core.backends.checksums`), so then, as where there is no
  checksum, each side the policy reads the time of is completed
  (:meth:`~rcp_core.backends.port.Port.complete`: one request);
- **contents where asked** (``--overwrite-compare checksum``): a pair whose metadata
  agree is unchanged only when its bytes are the same: proven by a recorded MD5
  where one matches, else by reading both sides (:meth:`ExistingFiles._same_contents`);
- **nothing is written here**: a decision only reads (a dry run decides alike).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable

from rcp_core.backends import checksums
from rcp_core.backends.capabilities import Capability
from rcp_core.backends.checksums import StoreChecksum
from rcp_core.backends.port import Entry, EntryKind, KeepsSymlinks, Port
from rcp_core.engine.existing import COMPARE_CHUNK, NEW, Action, decide
from rcp_core.settings import CompareAttr, CopySettings, ExistingPolicy

CONTENTS_ASKED = "checksum"
"""The reason :func:`~rcp_core.engine.existing.decide` gives where the metadata agree
and ``checksum`` asks for the contents to be compared."""
HASHED_NOT_ASKED = 16 << 20
"""The largest file of this host hashed to tell it unchanged from an object whose
listing lacked its mtime, rather than one request for the object's metadata: MD5
reads 16 MiB in about the time a store answers one request."""


class ExistingFiles:
    """One copy's decisions on what its destination holds."""

    def __init__(
        self,
        source: Port,
        target: Port,
        settings: CopySettings,
        stopping: Callable[[], bool],
    ) -> None:
        self.source, self.target, self.settings = source, target, settings
        self.stopping = stopping
        self.timed = all(
            port.backend.has(Capability.MTIMES) for port in (source, target)
        )
        """Whether mtimes tell files apart: both sides keep settable ones."""

    def decided(
        self, rel: str, entry: Entry, there: Entry | None
    ) -> tuple[Entry, Action, str]:
        """The source file ``rel`` (completed where the decision read its time) and
        what the policy does with it. Where times count (:attr:`timed`) and a side's
        listing lacked its mtime (an S3 object's), a pair of the same size whose
        bytes the store's recorded checksum proves the same is unchanged
        (:meth:`_same_bytes`: no request); else each side the policy reads the time
        of is completed first (:meth:`Port.complete`: one request), the source and
        the destination alike (``--update`` always, ``-o`` where the sizes are the
        same)."""
        if there is None:
            return entry, Action.REPLACE, NEW
        policy = self.settings.existing
        reads_times = (
            self.timed
            and there.kind is EntryKind.FILE
            and (
                policy is ExistingPolicy.UPDATE
                or (policy is ExistingPolicy.OVERWRITE and there.size == entry.size)
            )
        )
        if reads_times and None in (entry.mtime_ns, there.mtime_ns):
            if self._same_bytes(rel, entry, there):
                return entry, Action.UNCHANGED, "same size and checksum"
            if entry.mtime_ns is None:
                entry = self.source.complete(rel, entry)
            if there.mtime_ns is None:
                there = self.target.complete(rel, there)
        action, reason = self.decision(entry, there)
        if action is Action.UNCHANGED and reason == CONTENTS_ASKED:  # two files
            if not self._same_contents(rel, entry, there):
                return entry, Action.REPLACE, "content differs"
            return entry, action, "identical contents"
        return entry, action, reason

    def link_decided(
        self, rel: str, entry: Entry, there: Entry | None
    ) -> tuple[Entry, Action, str]:
        """The source symlink ``rel`` and what the policy does with it: as
        :meth:`decision` says, but a symlink there with the same target is
        unchanged where the policy would replace it. The same target is proven by
        the MD5 a store recorded of one side's link object (:func:`same_link`:
        no request), else by both targets, each read once, where its listing lacked
        it (:meth:`~rcp_core.backends.port.KeepsSymlinks.read_link`, which also
        completes a store's link: ``--update`` first reads a side whose listing
        lacked its time). The source is returned with its target wherever it is to
        be made. Both ports keep symlinks.

        :raises OSError: a target could not be read.
        """
        source, target = self.source, self.target
        assert isinstance(source, KeepsSymlinks), "a copy that keeps symlinks"
        assert isinstance(target, KeepsSymlinks), "a copy that keeps symlinks"
        two_links = there is not None and there.kind is EntryKind.SYMLINK
        update = self.settings.existing is ExistingPolicy.UPDATE
        if not two_links or (update and entry.mtime_ns is None):
            entry = source.read_link(rel, entry)
        if there is None:
            return entry, Action.REPLACE, NEW
        if two_links and update and there.mtime_ns is None:
            there = target.read_link(rel, there)
        action, reason = self.decision(entry, there)
        if action is not Action.REPLACE or not two_links:
            return entry, action, reason
        if same_link(entry, there):
            return entry, Action.UNCHANGED, "same target (its recorded MD5)"
        entry = source.read_link(rel, entry)
        if target.read_link(rel, there).target == entry.target:
            return entry, Action.UNCHANGED, "same target"
        return entry, action, reason

    def _same_bytes(self, rel: str, entry: Entry, there: Entry) -> bool:
        """Whether the same-size pair ``rel`` is proven to hold the same bytes
        without asking a store: a side whose listing lacked its mtime recorded a
        checksum (:attr:`Entry.checksum`) after the other side last changed (so the
        time it kept is the other's, barring a time set back by hand), and the
        other side's recorded checksum is the same, or its bytes, read here from
        this host's file of at most :data:`HASHED_NOT_ASKED` bytes, match it
        (:func:`rcp_core.backends.checksums.matches`). ``False`` where nothing is
        proven: the caller asks the store (:func:`proven_same`)."""
        # The side without its mtime (the destination, when both lack one).
        other, stored = (entry, there) if there.mtime_ns is None else (there, entry)
        if (
            entry.size != there.size
            or stored.checksum is None
            or stored.modified_ns is None
            or other.changed_ns is None
            or other.changed_ns >= stored.modified_ns
        ):
            return False
        return proven_same(
            self.source,
            self.target,
            rel,
            entry.size,
            (entry.checksum, there.checksum),
            self.stopping,
            hashed_at_most=HASHED_NOT_ASKED,
        )

    def _same_contents(self, rel: str, entry: Entry, there: Entry) -> bool:
        """Whether the same-size pair ``rel`` holds the same bytes
        (``--overwrite-compare checksum``): the same MD5 both stores recorded, or
        one store's MD5 matching the other side's bytes read from this host; else
        (or where those do not match: a mismatch proves nothing) both sides read
        and compared, :data:`COMPARE_CHUNK` at a time.

        :raises OSError: a side could not be read (the entry's error).
        """
        stopping = self.stopping
        recorded = (entry.checksum, there.checksum)
        if proven_same(self.source, self.target, rel, entry.size, recorded, stopping):
            return True
        with self.source.read(rel) as mine, self.target.read(rel) as theirs:
            while not stopping():  # a stop ends it unproven: no copy starts then
                a, b = mine.read(COMPARE_CHUNK), theirs.read(COMPARE_CHUNK)
                if a != b:
                    return False
                if not a:
                    return True
        return False

    def decision(self, entry: Entry, there: Entry) -> tuple[Action, str]:
        """What the policy does with the existing ``there``: the local copy's rules
        (:func:`rcp_core.engine.existing.decide`) on both sides' entries. Where a side
        has no settable mtime (:attr:`timed` false) times tell nothing: ``mtime`` is
        not compared and ``update`` replaces what differs, as ``overwrite`` does."""
        policy, compare = self.settings.existing, self.settings.overwrite_compare
        if not self.timed:
            compare = compare - {CompareAttr.MTIME}
            if policy is ExistingPolicy.UPDATE:
                policy = ExistingPolicy.OVERWRITE
        return decide(policy, compare, entry.stat(), there.stat())


def same_link(a: Entry, b: Entry) -> bool:
    """Whether the MD5 a store recorded of one symlink's link object proves it
    holds the other's target (read). ``False`` where nothing is proven."""
    for link, stored in ((a, b), (b, a)):
        if link.target is None or stored.checksum is None:
            continue
        wanted = os.fsencode(link.target)
        if stored.size == len(wanted) and checksums.matches(
            stored.checksum, io.BytesIO(wanted), len(wanted)
        ):
            return True
    return False


def proven_same(
    source: Port,
    target: Port,
    rel: str,
    size: int,
    recorded: tuple[StoreChecksum | None, StoreChecksum | None],
    stopping: Callable[[], bool],
    *,
    hashed_at_most: int | None = None,
) -> bool:
    """Whether the MD5 a store recorded proves the same-size pair ``rel`` of
    ``source`` and ``target`` the same, reading no store: both sides' recorded MD5s
    (``recorded``: the source's, the target's) are equal, or one side's matches the
    other side's bytes, read from this host's file (of at most ``hashed_at_most``
    bytes, where given). ``False`` where nothing is proven (a mismatch proves
    nothing: :mod:`rcp_core.backends.checksums`).

    :raises OSError: this host's file could not be read.
    """
    mine, theirs = recorded
    if mine is not None and theirs is not None:
        return mine == theirs
    known, port = (mine, target) if mine is not None else (theirs, source)
    if known is None or port.local_path is None:
        return False
    if hashed_at_most is not None and size > hashed_at_most:
        return False
    with port.read(rel) as reader:
        return bool(checksums.matches(known, reader, size, stopping))
