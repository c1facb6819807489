"""The backend port: the storage operations the generic engine needs, one directory at
a time.

A :class:`Port` is a tree on some storage, named by paths relative to its root (``""``
is the root, components joined by ``/``). The generic engine
(:mod:`rcp_core.engine.portcopy`) copies between any two ports and the port comparison
(:mod:`rcp_core.tools.verify.portcompare`) compares any two; this host's files are
:class:`rcp_core.engine.posixport.PosixPort`, any fsspec store the provider's port
(``rcp_provider.fsspec.storetree.port_of``: a ``Place``, a service's
``ServicePlace``), and a site may provide its own through the ``rcp_backend_for``
hook.

Invariants every port keeps:

- **one level at a time**: :meth:`Port.list` lists one directory, never a tree, so
  the engine's memory follows the directories in flight; a port that
  :class:`ListsInPages` gives a large directory a page at a time, so its memory
  follows the pages in flight;
- **names checked**: every name a listing gives is one safe component
  (:func:`rcp_core.names.check_component`); the rest are in :attr:`Listing.unsafe`
  and nothing below one is ever listed;
- **nothing half-written under its name**: :meth:`Port.write` publishes the file only
  once every chunk is written, and leaves nothing under the name if the chunks stop
  with an exception;
- **no writing through a symlink**: a destination's symlink is an entry of its own
  (:attr:`EntryKind.SYMLINK` when not followed), replaced or removed, never entered;
- **symlinks kept where both sides hold them** (:func:`keeps_symlinks`): a source
  is then listed without following them, and each is made again with its target;
  elsewhere a source is listed following them (to a file: the file; else skipped);
- **errors are OSError** (an entry error of the run) for what the storage refuses or
  cannot do; anything else is a defect that stops the run;
- **trees name trees**: :meth:`Port.at` and :meth:`Port.parent` are ports of the
  same storage, made without I/O, so a front-end applies ``rcp``'s operand rules
  (:func:`rcp_core.paths.port_target`) to any port before anything is written.

Over 400 lines because the port is one contract: :class:`Port` and the optional
parts a storage may add to it (pages, symlinks, ranges, reads that complete an
entry, removals in batches), each a short declaration whose docstring states its invariant.
"""

from __future__ import annotations

import enum
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol, runtime_checkable

from rcp_core.backends.capabilities import Backend, Capability
from rcp_core.backends.checksums import StoreChecksum
from rcp_core.errors import UnsafeNameError
from rcp_core.run.summary import Tally
from rcp_core.settings import Preserve

DIGEST_RANGE = 256 << 20
"""The most bytes one :meth:`Port.digest` is asked to hash: about a quarter second of
BLAKE3 on one core (what one ``digest`` request of a service may hash,
:data:`rcp_core.remote.filewire.MAX_DIGEST`)."""

Protect = Callable[[str, bool], bool]
"""``protect(rel, is_dir)``: keep this entry when removing a tree (``rel`` relative
to the port's root)."""


class EntryKind(enum.Enum):
    """What an entry is."""

    FILE = "file"
    DIRECTORY = "directory"
    SYMLINK = "symlink"
    OTHER = "other"
    """A FIFO, socket or device."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry as a port sees it. What a storage does not keep is ``None``, and a
    comparison compares an attribute only where both sides have it.

    :param kind: what it is.
    :param size: its size in bytes (a file's data; 0 where the storage has none).
    :param mode: its ``st_mode`` where the storage keeps one: the permission bits,
        and the file type where the storage gives it (a FIFO, socket or device is
        told apart from another only by these).
    :param mtime_ns: its settable modification time, where the storage keeps one
        (:attr:`~rcp_core.backends.capabilities.Capability.MTIMES`): compared by the
        policy and kept by a copy.
    :param modified_ns: when the storage says it last changed (an object store's
        upload time included): what a destination with times gets when there is no
        ``mtime_ns``; never compared.
    :param uid: its owner, where the storage has owners.
    :param gid: its group, where the storage has owners.
    :param target: a symlink's target, where the listing gives it (an entry listed
        without following symlinks).
    :param rdev: a device's number, where the storage has devices.
    :param dev: the device of the filesystem it is on, where the storage tells
        (this host's ``lstat``, a service's listing from protocol 1.12): a directory
        on another device than its tree's is a mount point (``rrm`` keeps it). Never
        compared, nor part of :meth:`stat`: it says where an entry is, not what.
    :param checksum: the MD5 its store recorded of a file's bytes (a symlink
        object's: its target's), where its listing gives one
        (:mod:`rcp_core.backends.checksums`): what tells an object unchanged
        without a request of its own. Never part of an entry's equality.
    """

    kind: EntryKind
    size: int = 0
    mode: int | None = None
    mtime_ns: int | None = None
    modified_ns: int | None = None
    uid: int | None = None
    gid: int | None = None
    target: str | None = None
    rdev: int | None = None
    dev: int | None = field(default=None, compare=False)
    checksum: StoreChecksum | None = field(default=None, compare=False)

    @property
    def is_dir(self) -> bool:
        return self.kind is EntryKind.DIRECTORY

    @property
    def changed_ns(self) -> int | None:
        """When it last changed, as well as the storage says: ``mtime_ns``, else
        ``modified_ns`` (what a destination with times is given, and what ``rrm
        --modified-before`` reads); ``None`` where the storage says neither."""
        return self.mtime_ns if self.mtime_ns is not None else self.modified_ns

    def stat(self) -> os.stat_result:
        """As a stat result, for the local copy's rules
        (:func:`rcp_core.engine.existing.decide`) and a comparison's
        (:mod:`rcp_core.tools.verify.differences`): its type (``mode``'s where it
        gives one), size, permission bits (``0o644`` without a mode), modification
        time (:attr:`changed_ns`: an object without a kept mtime is as old as its
        upload, which is what a copy of it was given; 0 without either), owner and
        device number (0 without them)."""
        kind = _IFMT[self.kind]
        perms = 0o644
        if self.mode is not None:
            kind = stat.S_IFMT(self.mode) or kind
            perms = stat.S_IMODE(self.mode)
        mtime_ns = self.changed_ns or 0
        seconds = mtime_ns // 10**9
        owner = (self.uid or 0, self.gid or 0)
        return os.stat_result(
            (kind | perms, 0, 0, 1, *owner, self.size, seconds, seconds, seconds),
            {
                "st_mtime_ns": mtime_ns,
                "st_atime_ns": mtime_ns,
                "st_ctime_ns": mtime_ns,
                "st_rdev": self.rdev or 0,
            },
        )


_IFMT = {
    EntryKind.FILE: stat.S_IFREG,
    EntryKind.DIRECTORY: stat.S_IFDIR,
    EntryKind.SYMLINK: stat.S_IFLNK,
    EntryKind.OTHER: stat.S_IFIFO,
}


@dataclass(frozen=True, slots=True)
class Listing:
    """One directory's entries, one level.

    :param entries: by name; each name is one safe component.
    :param unsafe: the listed names that are not safe, and why, by how they were
        listed (a prefix with its ``/``: ``set//z`` lists ``/`` in ``set``).
    :param skipped_links: symlinks a following listing did not follow (to a
        directory, dangling, out of a service's roots).
    """

    entries: dict[str, Entry]
    unsafe: dict[str, UnsafeNameError]
    skipped_links: int = 0


def page_key(name: str, is_dir: bool) -> str:
    """Where an entry sorts in a paged listing: as an object store orders its keys
    (by code point, the order of their UTF-8 bytes), a directory as its name with a
    ``/`` after it (the prefix its keys share)."""
    return f"{name}/" if is_dir else name


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a directory's listing (:class:`ListsInPages`).

    :param listing: its entries (and unsafe names), each name once over all pages.
    :param after: where the next page starts (opaque: what the port needs to ask
        for it), ``None`` after the last.
    """

    listing: Listing
    after: object | None


@runtime_checkable
class ListsInPages(Protocol):
    """A port that lists a directory a page at a time: the directory's
    :meth:`Port.list` cut into pages, each page's entries after the previous
    page's in :func:`page_key` order, so two such listings of directories can be
    walked side by side with a window of a page (a million-key prefix lists in
    the memory of a page)."""

    def page(self, rel: str, *, follow: bool, after: object | None) -> Page:
        """The page of the directory ``rel`` that starts at ``after`` (``None``:
        the first, else a page's :attr:`Page.after`); asked again with the same
        ``after`` it starts at the same place (a page whose request failed is
        asked for again).

        :raises FileNotFoundError: nothing is there (asked for the first page).
        """
        ...


@runtime_checkable
class RemovesInBatches(Protocol):
    """A port whose storage can remove many objects in one request (S3's
    ``DeleteObjects``: a thousand), where each :meth:`Port.remove` is a request of
    its own."""

    def batch_most(self, rel: str) -> int:
        """How many non-directories of the directory ``rel`` one
        :meth:`remove_batch` removes at most; 1 where each is a request of its own
        (a batch is then no faster than :meth:`Port.remove`)."""
        ...

    def remove_batch(self, rel: str, entries: dict[str, Entry]) -> dict[str, OSError]:
        """Remove the non-directories ``entries`` (by name, at most
        :meth:`batch_most`) of the directory ``rel`` in one request; what it could
        not remove, by name, with why. A name gone already is removed. Counts
        nothing: the caller counts what went.

        :raises OSError: the request failed (some may have gone: asked again, it
            removes the rest).
        """
        ...


def keep_meta(port: Port, rel: str, entry: Entry, preserve: Preserve) -> None:
    """``port.set_meta`` of ``entry`` on ``rel`` as ``preserve`` asks: ``owner`` only
    with ``-p owner``, which is refused before a run where a side keeps no owners
    (so a port without the argument is never given it)."""
    if preserve.owner:
        port.set_meta(rel, entry, preserve.mode, preserve.times, owner=True)
    else:
        port.set_meta(rel, entry, preserve.mode, preserve.times)


@runtime_checkable
class KeepsSymlinks(Protocol):
    """A port whose storage holds symlinks (it declares
    :attr:`~rcp_core.backends.capabilities.Capability.SYMLINKS`): this host's
    files, and an object store's ``NAME.rclonelink`` objects
    (``rcp_provider.fsspec.storelinks``). Between two of these a copy keeps each
    symlink as a symlink with its target (:func:`keeps_symlinks`); its listings
    give them unfollowed."""

    def read_link(self, rel: str, entry: Entry) -> Entry:
        """The symlink ``rel`` as its listing gave it (``entry``), with its
        :attr:`Entry.target` (checked: :func:`rcp_core.names.check_link_target`)
        and what only a request of its own tells (an S3 object's metadata). An
        entry with its target is whole (a listing gave it, or this read it): it is
        returned as it is, nothing read.

        :raises OSError: it cannot be read, or its target is not one a symlink
            can have (``EINVAL``).
        """
        ...

    def make_symlink(self, rel: str, link: Entry, replacing: Entry | None) -> None:
        """Make ``rel`` the symlink ``link`` (its :attr:`Entry.target`, and the
        metadata a storage keeps with it: as :meth:`Port.write`'s ``kept``),
        whole or not at all; ``replacing`` a file or a symlink there, which it
        replaces (an entry of another kind: as :meth:`Port.write` would)."""
        ...


def keeps_symlinks(source: Port, target: Port) -> bool:
    """Whether a copy from ``source`` to ``target`` keeps symlinks as symlinks:
    both declare them and both can read and make them (:class:`KeepsSymlinks`).
    Otherwise a source's symlink is followed to its file, or skipped."""
    return all(
        port.backend.has(Capability.SYMLINKS) and isinstance(port, KeepsSymlinks)
        for port in (source, target)
    )


@runtime_checkable
class ReadsRanges(Protocol):
    """A port that reads a byte range of a file in a request of its own (an S3
    ``GetObject`` with a ``Range``), so a large file is read by several streams
    at once (:mod:`rcp_core.engine.portranges`)."""

    def read_range(
        self, rel: str, entry: Entry, offset: int, length: int
    ) -> AbstractContextManager[tuple[BinaryIO, Entry]]:
        """``length`` bytes of the file ``rel`` (listed as ``entry``) from
        ``offset``, and ``entry`` completed as :meth:`ReadsCompleted.read_completed`
        completes it. Every range is of the object the listing gave (its recorded
        checksum, where listed, is asked for: a replaced object is an error).

        :raises OSError: the store's error; fewer bytes than asked is ``EIO``.
        """
        ...


class RangeWriter(Protocol):
    """A file being written at offsets (:meth:`WritesRanges.write_ranges`): under a
    temporary name until :meth:`commit`, removed by :meth:`discard`."""

    def write_at(self, offset: int, data: bytes) -> None:
        """Write ``data`` at ``offset`` (from any thread)."""
        ...

    def commit(self) -> None:
        """Publish the file whole under its name (replacing what was there)."""
        ...

    def discard(self) -> None:
        """Remove what was written; nothing is left under the name."""
        ...


@runtime_checkable
class WritesRanges(Protocol):
    """A port that writes a file at offsets, in any order (this host's files:
    ``pwrite`` into a temporary), so several streams of a large file write it at
    once."""

    def write_ranges(self, rel: str, size: int) -> RangeWriter:
        """The file ``rel`` of ``size`` bytes, open to be written at offsets."""
        ...


@runtime_checkable
class ReadsCompleted(Protocol):
    """A port whose read of a file tells, in the same request, what
    :meth:`Port.complete` would ask for (an S3 ``GetObject``'s response carries the
    object's user metadata): one request per file where there would be two."""

    def read_completed(
        self, rel: str, entry: Entry
    ) -> AbstractContextManager[tuple[BinaryIO, Entry]]:
        """The file ``rel`` open for reading, and ``entry`` (its listing's)
        completed as :meth:`Port.complete` completes it."""
        ...


class Port(Protocol):
    """A tree on some storage (see the module's invariants)."""

    @property
    def backend(self) -> Backend:
        """What the storage keeps (its declared capabilities)."""
        ...

    @property
    def local_path(self) -> str | None:
        """The root as a path of this host, if it is one (the data path may then
        use the storage's own upload from a local file)."""
        ...

    def describe(self, rel: str) -> str:
        """``rel`` as users name it (a path, a URL)."""
        ...

    @property
    def name(self) -> str:
        """The root's own name, its last component (what ``DST/`` receives it
        under); ``""`` at the top of the storage."""
        ...

    def at(self, rel: str) -> Port:
        """The tree at ``rel`` below the root (safe components; it need not exist),
        a port of the same storage."""
        ...

    def parent(self) -> Port | None:
        """The tree holding the root, a port of the same storage; ``None`` at the
        top of the storage (nothing above it can be missing)."""
        ...

    def holds(self, other: Port) -> bool:
        """Whether ``other``'s root is this root or below it, on the same storage
        (so copying this tree there would copy into itself)."""
        ...

    def stat(self, rel: str, *, follow: bool = True) -> Entry | None:
        """The entry at ``rel`` (a symlink there followed, unless not ``follow``:
        then it is a :attr:`EntryKind.SYMLINK` entry), ``None`` if nothing is."""
        ...

    def complete(self, rel: str, entry: Entry) -> Entry:
        """The file ``rel`` as its listing gave it (``entry``), with what only a
        request of its own tells (an S3 object's user metadata, which no listing
        carries); ``entry`` itself where the listing told all there is."""
        ...

    def list(self, rel: str, *, follow: bool) -> Listing:
        """The directory ``rel``'s entries. With ``follow`` (a source), a symlink is
        its target's file when it leads to one, else skipped and counted; without
        it, a symlink is a :attr:`EntryKind.SYMLINK` entry.

        :raises FileNotFoundError: nothing is there.
        """
        ...

    def make_dir(self, rel: str, replacing: Entry | None) -> None:
        """Make the directory ``rel`` (its parent exists); ``replacing`` an entry of
        another kind there, which goes first where the storage cannot hold both."""
        ...

    def remove_dir(self, rel: str) -> None:
        """Remove the empty directory ``rel`` (on a store of prefixes, only its
        marker object where it has one: the prefix goes with its last key)."""
        ...

    def remove(
        self, rel: str, entry: Entry, tally: Tally, protect: Protect | None
    ) -> None:
        """Remove ``rel`` (a whole tree if a directory), counting what goes as
        ``removed.*``; keep what ``protect`` claims and the directories holding it."""
        ...

    def read(self, rel: str) -> AbstractContextManager[BinaryIO]:
        """The file ``rel``, open for reading from its start (a store's may be a
        stream that cannot seek)."""
        ...

    def write(self, rel: str, chunks: Iterator[bytes], kept: Entry) -> None:
        """Write ``chunks`` to the file ``rel``, published whole when they end
        (replacing what was there); nothing under the name if they raise.
        ``kept``: the source file's attributes this copy keeps (what
        ``--preserve`` asks); a storage that keeps them with the data (an object's
        metadata) writes them here, one that sets them after it
        (:meth:`set_meta`) ignores it."""
        ...

    def digest(self, rel: str, offset: int, length: int) -> bytes | None:
        """The BLAKE3 digest of ``length`` bytes (at most :data:`DIGEST_RANGE`) of
        the file ``rel`` from ``offset`` (fewer only where the file ends), taken
        where the data is (a service hashes on its host: no data crosses the
        network); ``None`` where this port has no such way, and the comparison reads
        the file through :meth:`read`."""
        ...

    def copy_in(self, source: Port, src_rel: str, rel: str, kept: Entry) -> bool:
        """Copy ``source``'s file ``src_rel`` to ``rel`` by a path faster than
        streaming it through this process (the storage's server-side copy, its
        upload of a local file), if the pair has one; whether it did. ``kept`` as
        for :meth:`write`, but without the mtime where the source's listing lacked
        it and its read would tell it (:class:`ReadsCompleted`): a storage that
        would write that time then returns ``False``, and the file is streamed,
        its time taken from the read."""
        ...

    def set_meta(
        self, rel: str, entry: Entry, mode: bool, times: bool, owner: bool = False
    ) -> None:
        """Give ``rel`` the ``entry``'s owner (``owner``: where permitted),
        permission bits (``mode``) and modification time (``times``) where this
        storage keeps them; nothing elsewhere. ``owner`` is given only when asked
        (:func:`keep_meta`), so a port written before it (a site's) still
        serves."""
        ...
