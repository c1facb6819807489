"""The source role's senders: a batch of one directory's entries sent as frames.

Each data connection's sender thread takes the batches the walk
(:mod:`rcp_core.remote.send`) queued and sends them with one :class:`BatchSender`:

- small files travel together in ``FILES`` frames, a large one alone as ``CHUNK``
  frames (:mod:`rcp_core.remote.sendlarge`: its holes skipped, from the end of a
  partial the destination holds);
- an entry that cannot be read is still sent, as ``failed``, so every count the
  destination waits for is met; the error is recorded here;
- a dry run (``--dry-run``) sends every file's metadata and none of its data;
- a file with more than one name (``st_nlink > 1``) is read once: the first name seen
  travels with its data and a ``link`` id, each later one as a ``hardlink`` entry
  with that id and no data (to a destination that speaks protocol 1.1; an older one
  gets every name as a file). A symlink with more than one name goes the same way: the
  first name as a ``symlink`` with a ``link`` id, the later ones as ``hardlink`` (to a
  destination of 1.9; an older one gets every name as a symlink). An inode is
  forgotten once all its names were seen.

Invariant: the sizes in a frame are the bytes actually read (a file that shrank is sent
as it is now).
"""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rcp_core.engine.existing import Action, decide
from rcp_core.engine.metadata import Metadata
from rcp_core.engine.partials import Prefix
from rcp_core.remote.connection import Connection
from rcp_core.remote.hello import HARD_LINKS, SPECIALS, SYMLINK_LINKS, XATTRS
from rcp_core.remote.meta import OwnerNames, maps_owners, meta_of, xattrs_to_wire
from rcp_core.remote.roleruntime import RoleRun
from rcp_core.remote.sendlarge import FRAME_DATA, Lane, Outgoing, send_large
from rcp_core.remote.wire import FrameKind
from rcp_core.run.summary import Tally
from rcp_core.settings import CopySettings

if TYPE_CHECKING:
    from rcp_core.remote.send import SourceDir

SMALL = 1 << 20
"""Files up to this size travel in ``FILES`` frames; larger ones as ``CHUNK`` runs."""
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


Kind = str
"""What the walk found an entry to be: ``file``, ``symlink``, ``special`` (a FIFO,
socket or device), or a file matched by the destination's manifest: ``unchanged``
or ``kept``."""


@dataclass(frozen=True, slots=True)
class Batch:
    """Entries of one directory for one sender: ``(name, kind)`` pairs (the sender
    stats each file as it reads it, so a file costs no separate ``lstat``)."""

    dir_id: int
    node: SourceDir
    entries: list[tuple[str, Kind]]
    rename: str | None = None
    """The one entry's name at the destination, when it differs (a root file)."""
    partials: Mapping[str, Prefix] = field(default_factory=dict)
    """The destination's partials in this directory, by name there."""


class BatchSender:
    """Sends batches of one copy's source entries, on any of its data connections.

    :param version: the destination's protocol version (what it can receive).
    """

    def __init__(
        self, settings: CopySettings, runtime: RoleRun, version: tuple[int, int]
    ) -> None:
        self.settings = settings
        self.runtime = runtime
        # Reads the attributes --preserve keeps (xattrs, acls); none for an older peer.
        self._metadata = Metadata(settings.preserve, umask=0)
        self.names = OwnerNames() if maps_owners(settings) else None
        """Names each entry's owner on the wire (owners kept by name)."""
        self.xattrs = self._metadata.copy_xattrs and version >= XATTRS
        """Whether entries travel with their extended attributes (and ACLs)."""
        self._specials = version >= SPECIALS
        self._hard_links = version >= HARD_LINKS
        self._symlink_links = version >= SYMLINK_LINKS
        self._lock = threading.Lock()
        self._links: dict[tuple[int, int], list[int]] = {}
        """(device, inode) -> [its link id, names still to see]."""
        self._link_ids = 0

    def kind(
        self, entry: os.DirEntry[str], manifest: dict[str, os.stat_result]
    ) -> Kind:
        """What to send for a non-directory entry: a ``symlink``, a ``file``, or a
        file only counted at the destination because its manifest matched it
        (``unchanged``, ``kept``)."""
        if entry.is_symlink():
            return "symlink"
        if self._specials and not entry.is_file(follow_symlinks=False):
            return "special"  # a FIFO, socket or device: recreated, never read
        there = manifest.get(entry.name)
        if there is None:
            return "file"
        st = entry.stat(follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            return "file"  # the sender finds out what it is and reports it
        action, reason = decide(
            self.settings.existing, self.settings.overwrite_compare, st, there
        )
        if action is Action.UNCHANGED and reason != "checksum":
            return "unchanged"
        if action is Action.KEEP:
            return "kept"
        return "file"  # replaced, or contents to compare: the destination decides

    def send(self, tally: Tally, conn: Connection, batch: Batch, lane: Lane) -> None:
        """Send ``batch`` on ``conn``: small files together in ``FILES`` frames, a
        large one alone as ``CHUNK`` frames (split over the connections of ``lane``
        when it is large enough), after it hands the entries behind it back to
        ``lane``."""
        entries: list[dict[str, Any]] = []
        chunks: list[bytes] = []
        size = 0

        def flush() -> None:
            nonlocal entries, chunks, size
            if entries:
                conn.send(
                    FrameKind.FILES,
                    {"dir": batch.dir_id, "entries": entries},
                    b"".join(chunks),
                )
            entries, chunks, size = [], [], 0

        for at, (name, kind) in enumerate(batch.entries):
            rel = batch.node.child_rel(name)
            sent_as = batch.rename or name
            entry: dict[str, Any]
            if self.runtime.stopping:
                entry, data = {"name": sent_as, "kind": "failed"}, b""
            elif kind == "symlink":
                entry, data = self._symlink(tally, batch.node, name, sent_as, rel)
            elif kind == "special":
                entry, data = self._special(tally, batch.node, name, sent_as, rel)
            elif kind in ("unchanged", "kept"):
                entry, data = self._matched(tally, batch.node, name, sent_as, kind)
            elif self.settings.dry_run is not None:
                entry, data = self._dry_file(tally, batch.node, name, sent_as, rel)
            else:
                opened = self._open(tally, batch.node, name, rel)
                link, first = self._claim(opened[1]) if opened else (None, True)
                if opened is None:
                    entry, data = {"name": sent_as, "kind": "failed"}, b""
                elif not first:
                    os.close(opened[0])
                    entry, data = {"name": sent_as, "kind": "hardlink"}, b""
                    entry["meta"] = meta_of(opened[1], self.names)
                    tally["copied.hardlinks"] += 1
                elif opened[1].st_size > SMALL:
                    flush()
                    if rest := batch.entries[at + 1 :]:
                        lane.hand_back(dataclasses.replace(batch, entries=rest))
                    fd, st = opened
                    outgoing = Outgoing(
                        (fd, st, self.meta(tally, rel, fd, st)),
                        {"dir": batch.dir_id, "name": sent_as},
                        rel,
                        link,
                    )
                    send_large(
                        conn,
                        self.runtime,
                        tally,
                        outgoing,
                        batch.partials.get(sent_as),
                        lane,
                    )
                    return
                else:
                    entry, data = self._read_small(tally, sent_as, rel, *opened)
                if link is not None:
                    entry["link"] = link
            if size + len(data) > FRAME_DATA:
                flush()
            entries.append(entry)
            chunks.append(data)
            size += len(data)
        flush()

    def _special(
        self, tally: Tally, node: SourceDir, name: str, sent_as: str, rel: str
    ) -> tuple[dict[str, Any], bytes]:
        """A FIFO, socket or device: its metadata (and device number) only."""
        st = self._lstat(tally, node, name, rel)
        if st is None:
            return {"name": sent_as, "kind": "failed"}, b""
        if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
            changed = OSError(errno.EAGAIN, "changed type during the copy")
            self.runtime.fail(tally, rel, "stat", changed)
            return {"name": sent_as, "kind": "failed"}, b""
        return {
            "name": sent_as,
            "kind": "special",
            "meta": meta_of(st, self.names),
        }, b""

    def _lstat(
        self, tally: Tally, node: SourceDir, name: str, rel: str
    ) -> os.stat_result | None:
        """An entry's ``lstat``; ``None`` (the error recorded) if it is gone."""
        try:
            return self.runtime.attempt(lambda: os.lstat(name, dir_fd=node.fd))
        except OSError as exc:
            self.runtime.fail(tally, rel, "stat", exc)
            return None

    def _dry_file(
        self, tally: Tally, node: SourceDir, name: str, sent_as: str, rel: str
    ) -> tuple[dict[str, Any], bytes]:
        """A file in a dry run: its metadata (and link id), never its data."""
        st = self._lstat(tally, node, name, rel)
        if st is None:
            return {"name": sent_as, "kind": "failed"}, b""
        link, first = self._claim(st)
        entry: dict[str, Any] = {
            "name": sent_as,
            "kind": "file" if first else "hardlink",
            "meta": meta_of(st, self.names),
        }
        if link is not None:
            entry["link"] = link
        return entry, b""

    def _matched(
        self, tally: Tally, node: SourceDir, name: str, sent_as: str, kind: Kind
    ) -> tuple[dict[str, Any], bytes]:
        """A file the destination's manifest matched: its name and kind, no data (and
        its link id, if later names of its inode link to it)."""
        entry: dict[str, Any] = {"name": sent_as, "kind": kind}
        try:
            st = os.lstat(name, dir_fd=node.fd)
        except OSError:
            st = None  # gone since the scan: the destination keeps what it has
        if st is not None:
            link, first = self._claim(st)
            if link is not None:
                entry["link"] = link
                if not first:  # a later name: link it like any other
                    entry["kind"] = "hardlink"
                    entry["meta"] = meta_of(st, self.names)
        tally["unchanged.files" if kind == "unchanged" else "skipped.files"] += 1
        return entry, b""

    def _claim(self, st: os.stat_result) -> tuple[int | None, bool]:
        """``(link id, first name)`` of a regular file's or symlink's inode:
        ``(None, True)`` when it has one name (or the destination cannot link)."""
        if st.st_nlink < 2 or not self._hard_links:
            return None, True
        key = (st.st_dev, st.st_ino)
        with self._lock:
            known = self._links.get(key)
            if known is None:
                self._link_ids += 1
                self._links[key] = [self._link_ids, st.st_nlink - 1]
                return self._link_ids, True
            known[1] -= 1
            if known[1] <= 0:
                del self._links[key]
            return known[0], False

    def _symlink(
        self, tally: Tally, node: SourceDir, name: str, sent_as: str, rel: str
    ) -> tuple[dict[str, Any], bytes]:
        """A symlink: its target and metadata, or, for a later name of a symlink
        with several, a ``hardlink`` entry (see :meth:`_claim`)."""
        try:
            st, target = self.runtime.attempt(
                lambda: (
                    os.lstat(name, dir_fd=node.fd),
                    os.readlink(name, dir_fd=node.fd),
                )
            )
        except OSError as exc:
            self.runtime.fail(tally, rel, "read symlink", exc)
            return {"name": sent_as, "kind": "failed"}, b""
        meta = meta_of(st, self.names)
        linked = st.st_nlink > 1 and self._symlink_links
        link, first = self._claim(st) if linked else (None, True)
        entry: dict[str, Any]
        if not first:
            tally["copied.hardlinks"] += 1
            entry = {"name": sent_as, "kind": "hardlink", "meta": meta}
        else:
            tally["copied.symlinks"] += 1
            entry = {"name": sent_as, "kind": "symlink", "meta": meta, "target": target}
        if link is not None:
            entry["link"] = link
        return entry, b""

    def _open(
        self, tally: Tally, node: SourceDir, name: str, rel: str
    ) -> tuple[int, os.stat_result] | None:
        """Open a regular file for reading; ``None`` (error recorded) otherwise."""
        try:
            fd = self.runtime.attempt(lambda: os.open(name, READ_FLAGS, dir_fd=node.fd))
        except OSError as exc:
            self.runtime.fail(tally, rel, "open", exc)
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                # Replaced since the scan, or a special file for a destination older
                # than 1.4, which cannot make one.
                raise OSError(errno.EOPNOTSUPP, "not a regular file")
        except OSError as exc:
            os.close(fd)
            self.runtime.fail(tally, rel, "open", exc)
            return None
        return fd, st

    def meta(
        self, tally: Tally, rel: str, fd: int, st: os.stat_result
    ) -> dict[str, Any]:
        """An open entry's metadata for the wire, with the extended attributes (and
        ACLs) the copy keeps; attributes that cannot be read are an error of the
        entry, which travels without them."""
        meta: dict[str, Any] = meta_of(st, self.names)
        if self.xattrs:
            try:
                attrs = self._metadata.read_xattrs(fd)
            except OSError as exc:
                self.runtime.fail(tally, rel, "read extended attributes", exc)
                attrs = {}
            if attrs:
                meta["xattrs"] = xattrs_to_wire(attrs)
        return meta

    def _read_small(
        self, tally: Tally, sent_as: str, rel: str, fd: int, st: os.stat_result
    ) -> tuple[dict[str, Any], bytes]:
        try:
            data = _read_all(fd, st.st_size)
            meta = self.meta(tally, rel, fd, st)
        except OSError as exc:
            self.runtime.fail(tally, rel, "read", exc)
            return {"name": sent_as, "kind": "failed"}, b""
        finally:
            os.close(fd)
        meta["size"] = len(data)
        tally["copied.files"] += 1
        tally["copied.bytes"] += len(data)
        return {"name": sent_as, "kind": "file", "meta": meta}, data


def _read_all(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes from the start (fewer if the file shrank)."""
    parts = []
    got = 0
    while got < size:
        data = os.read(fd, size - got)
        if not data:
            break
        parts.append(data)
        got += len(data)
    return b"".join(parts)
