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
- **nothing is written here**: a decision only reads (a dry run decides alike).
"""

from __future__ import annotations

from collections.abc import Callable

from rcp_core.backends import checksums
from rcp_core.backends.capabilities import Capability
from rcp_core.backends.port import Entry, EntryKind, Port
from rcp_core.engine.existing import NEW, Action, decide
from rcp_core.settings import CompareAttr, CopySettings, ExistingPolicy

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
        return entry, *self.decision(entry, there)

    def _same_bytes(self, rel: str, entry: Entry, there: Entry) -> bool:
        """Whether the same-size pair ``rel`` is proven to hold the same bytes
        without asking a store: a side whose listing lacked its mtime recorded a
        checksum (:attr:`Entry.checksum`) after the other side last changed (so the
        time it kept is the other's, barring a time set back by hand), and the
        other side's recorded checksum is the same, or its bytes, read here from
        this host's file of at most :data:`HASHED_NOT_ASKED` bytes, match it
        (:func:`rcp_core.backends.checksums.matches`). ``False`` where nothing is
        proven: the caller asks the store."""
        if there.mtime_ns is None:  # the destination's checksum, when both lack one
            other_port, other, stored = self.source, entry, there
        else:
            other_port, other, stored = self.target, there, entry
        if (
            entry.size != there.size
            or stored.checksum is None
            or stored.modified_ns is None
            or other.changed_ns is None
            or other.changed_ns >= stored.modified_ns
        ):
            return False
        if other.checksum is not None:
            return other.checksum == stored.checksum
        if other_port.local_path is None or other.size > HASHED_NOT_ASKED:
            return False
        with other_port.read(rel) as reader:
            same = checksums.matches(stored.checksum, reader, other.size, self.stopping)
        return bool(same)

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
