"""The destination role: writes what a source sends, with the local copy's rules.

Directories arrive as ``dir`` messages (created ``0700``, or reused), entries in
``FILES`` frames (small files with their bytes, symlinks, entries the source could
not read), large files as runs of ``CHUNK`` frames on one connection. Several
connections deliver at once, so every method is thread-safe.

The same invariants as a local copy (:mod:`rcp_core.entries`):

- a new file is created ``0600`` with ``O_EXCL`` and gets its mode and times only after
  its last byte, so an interrupted file never looks finished; one that fails is
  removed;
- an existing entry is replaced only under ``--overwrite``/``--update`` and only by a
  rename of the finished copy over it;
- a directory gets its metadata after every entry and subdirectory in it is done:
  the source says how many entries it sent (``dir_end``), and the directory finishes
  when that many arrived and its subdirectories finished (post-order);
- names are single path components (no ``/``, ``.``, ``..``, NUL), and everything is
  created relative to an open directory descriptor with ``O_NOFOLLOW``: a peer cannot
  make the destination write outside its root.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import threading
from dataclasses import dataclass
from typing import Any

from rcp_core.entries import NEW_FILE_FLAGS, rename_over, temp_name
from rcp_core.errors import ProtocolError, entry_error
from rcp_core.existing import Action, decide
from rcp_core.metadata import Metadata
from rcp_core.remote.meta import stat_of
from rcp_core.remove import remove_entry
from rcp_core.settings import CopySettings, ExistingPolicy
from rcp_core.summary import Tally, merge
from rcp_core.tree import DIR_FLAGS

log = logging.getLogger("rcp_core")

ANCHOR = 0
"""Directory id of the destination root's parent, which exists before the copy."""


def check_name(name: Any) -> str:
    """A single, harmless path component; :class:`ProtocolError` otherwise."""
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or "/" in name
        or "\0" in name
    ):
        raise ProtocolError(f"bad entry name {name!r}")
    return name


@dataclass(slots=True, eq=False)
class _Dir:
    """A destination directory being filled."""

    id: int
    fd: int
    parent: _Dir | None
    name: str
    rel: str
    st: os.stat_result | None  # the source's metadata; None for the anchor
    fresh: bool
    created: bool
    expected: int | None = None
    received: int = 0
    children: int = 0
    failed: bool = False

    def child_rel(self, name: str) -> str:
        return f"{self.rel}/{name}" if self.rel else name


class Receiver:
    """Writes one copy into ``parent_fd`` (the destination root's parent directory).

    :param settings: the copy's settings (existing-entry policy, preserve).
    :param parent_fd: open directory that receives the root entry; owned by the
        receiver from now on (closed when the copy ends).
    """

    def __init__(self, settings: CopySettings, parent_fd: int, umask: int) -> None:
        self.settings = settings
        self.metadata = Metadata(settings.preserve, umask)
        self.tallies: list[Tally] = []
        """One per thread that wrote (each thread is the only writer of its own)."""
        self._local = threading.local()
        self.errors: list[str] = []
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._dirs: dict[int, _Dir] = {
            ANCHOR: _Dir(
                ANCHOR, parent_fd, None, "", "", None, fresh=False, created=False
            )
        }

    # -- bookkeeping -------------------------------------------------------------

    @property
    def tally(self) -> Tally:
        """The calling thread's counters."""
        tally: Tally | None = getattr(self._local, "tally", None)
        if tally is None:
            tally = self._local.tally = Tally()
            with self._lock:
                self.tallies.append(tally)
        return tally

    def counts(self) -> dict[str, int]:
        """Every thread's counters, summed."""
        with self._lock:
            return merge(self.tallies)

    def _dir(self, dir_id: Any) -> _Dir:
        with self._lock:
            node = self._dirs.get(dir_id) if isinstance(dir_id, int) else None
        if node is None:
            raise ProtocolError(f"unknown directory id {dir_id!r}")
        return node

    def _fail(self, rel: str, op: str, exc: OSError) -> None:
        error = entry_error(op, rel or ".", exc)
        self.tally["errors"] += 1
        with self._lock:
            self.errors.append(str(error))
        log.error("%s", error)

    def _count(self, node: _Dir, n: int = 1) -> None:
        """``n`` entries of ``node`` are done; finish it if that was the last."""
        with self._lock:
            node.received += n
        self._maybe_finish(node)

    def _maybe_finish(self, node: _Dir | None) -> None:
        while node is not None:
            with self._lock:
                if node.expected is None or node.received < node.expected:
                    return
                if node.children:
                    return
                node.expected = None  # finish once
                parent = node.parent
                if parent is not None:
                    parent.children -= 1
                    if node.failed:
                        parent.failed = True
            self._finish(node)
            node = parent

    def _finish(self, node: _Dir) -> None:
        try:
            if node.st is not None:
                self.metadata.apply(None, node.fd, node.st, is_dir=True, times=True)
                self.tally["copied.dirs" if node.created else "unchanged.dirs"] += 1
        except OSError as exc:
            self._fail(node.rel, "set directory metadata", exc)
        finally:
            with self._lock:
                del self._dirs[node.id]  # memory follows the directories in flight
            os.close(node.fd)
            if node.parent is None:
                self.done.set()

    def close(self) -> None:
        """Close what an ended or broken transfer left open (nothing, if it finished)."""
        with self._lock:
            left, self._dirs = list(self._dirs.values()), {}
        for node in left:
            os.close(node.fd)

    # -- messages ------------------------------------------------------------------

    def open_dir(self, dir_id: Any, parent_id: Any, name: Any, meta: Any) -> bool:
        """``dir``: create or reuse a directory; ``False`` if it cannot be used (the
        source then sends nothing of it; the error is recorded here)."""
        parent = self._dir(parent_id)
        name = check_name(name)
        st = stat_of(meta)
        if not isinstance(dir_id, int) or dir_id <= ANCHOR:
            raise ProtocolError(f"bad directory id {dir_id!r}")
        with self._lock:
            if dir_id in self._dirs:
                raise ProtocolError(f"directory id {dir_id} sent twice")
        rel = parent.child_rel(name)
        try:
            fd, fresh = self._make_dir(parent, name, st)
        except OSError as exc:
            self._fail(rel, "create directory", exc)
            with self._lock:
                parent.failed = True
            return False
        with self._lock:
            self._dirs[dir_id] = _Dir(
                dir_id, fd, parent, name, rel, st, fresh, created=fresh
            )
            parent.children += 1
        return True

    def _make_dir(
        self, parent: _Dir, name: str, st: os.stat_result
    ) -> tuple[int, bool]:
        old = self._existing(parent, name)
        if old is not None and self.settings.existing is ExistingPolicy.ERROR:
            raise FileExistsError(errno.EEXIST, "destination exists")
        if old is not None and not stat.S_ISDIR(old.st_mode):
            action, _ = decide(
                self.settings.existing, self.settings.overwrite_compare, st, old
            )
            if action is not Action.REPLACE:
                raise FileExistsError(errno.EEXIST, "exists and is not a directory")
            remove_entry(parent.fd, name, old, self.tally)
            old = None
        if old is None:
            os.mkdir(name, 0o700, dir_fd=parent.fd)
        fd = os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=parent.fd)
        return fd, old is None

    def _existing(self, parent: _Dir, name: str) -> os.stat_result | None:
        if parent.fresh:
            return None
        try:
            return os.lstat(name, dir_fd=parent.fd)
        except FileNotFoundError:
            return None

    def end_dir(self, dir_id: Any, count: Any) -> None:
        """``dir_end``: the source sent ``count`` entries of this directory."""
        node = self._dir(dir_id)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ProtocolError(f"bad entry count {count!r}")
        with self._lock:
            if node.expected is not None:
                raise ProtocolError(f"dir_end sent twice for directory {dir_id}")
            node.expected = count
        self._maybe_finish(node)

    def files(self, header: dict[str, Any], data: memoryview) -> None:
        """A ``FILES`` frame: entries of one directory, file bytes in order."""
        node = self._dir(header.get("dir"))
        entries = header.get("entries")
        if not isinstance(entries, list):
            raise ProtocolError("FILES frame without an entry list")
        offset = 0
        done = 0
        try:
            for entry in entries:
                if not isinstance(entry, dict):
                    raise ProtocolError("FILES entry is not an object")
                size = self._entry(node, entry, data, offset)
                offset += size
                done += 1
            if offset != len(data):
                raise ProtocolError(
                    f"FILES frame carries {len(data)} bytes, its entries {offset}"
                )
        finally:
            self._count(node, done)

    def _entry(
        self, node: _Dir, entry: dict[str, Any], data: memoryview, offset: int
    ) -> int:
        """Write one entry; the number of data bytes it used."""
        name = check_name(entry.get("name"))
        kind = entry.get("kind")
        rel = node.child_rel(name)
        if kind == "failed":  # the source could not read it, and said so
            with self._lock:
                node.failed = True
            return 0
        st = stat_of(entry.get("meta"))
        if kind == "file":
            size = st.st_size
            if offset + size > len(data):
                raise ProtocolError(f"{rel}: {size} bytes announced, fewer sent")
            try:
                self._write_file(node, name, st, data[offset : offset + size])
            except OSError as exc:
                self._fail(rel, "write", exc)
                with self._lock:
                    node.failed = True
            return size
        if kind == "symlink":
            target = entry.get("target")
            if not isinstance(target, str) or not target or "\0" in target:
                raise ProtocolError(f"{rel}: bad symlink target {target!r}")
            try:
                self._write_symlink(node, name, st, target)
            except OSError as exc:
                self._fail(rel, "create symlink", exc)
                with self._lock:
                    node.failed = True
            return 0
        raise ProtocolError(f"{rel}: unknown entry kind {kind!r}")

    # -- writing -------------------------------------------------------------------

    def _target(
        self, node: _Dir, name: str, st: os.stat_result, link: str | None = None
    ) -> str | None:
        """The name to create, or ``None`` when the existing entry stays.

        :param link: a symlink's target (an existing symlink to it is unchanged).
        """
        old = self._existing(node, name)
        if old is None:
            return name
        if self.settings.existing is ExistingPolicy.ERROR:
            raise FileExistsError(errno.EEXIST, "destination exists")
        action, _ = decide(
            self.settings.existing, self.settings.overwrite_compare, st, old
        )
        if (
            action is Action.REPLACE
            and stat.S_ISLNK(st.st_mode)
            and stat.S_ISLNK(old.st_mode)
            and os.readlink(name, dir_fd=node.fd) == link
        ):
            action = Action.UNCHANGED
        if action is Action.UNCHANGED:
            kind = "symlinks" if stat.S_ISLNK(st.st_mode) else "files"
            self.tally[f"unchanged.{kind}"] += 1
            return None
        if action is Action.KEEP:
            kind = "symlinks" if stat.S_ISLNK(st.st_mode) else "files"
            self.tally[f"skipped.{kind}"] += 1
            return None
        if action is Action.REPLACE and stat.S_ISDIR(old.st_mode):
            remove_entry(node.fd, name, old, self.tally)
            return name
        return temp_name(name)

    def _commit(self, node: _Dir, tmp: str, name: str) -> None:
        if tmp != name:
            rename_over(node.fd, tmp, name)

    def _write_file(
        self, node: _Dir, name: str, st: os.stat_result, data: memoryview
    ) -> None:
        target = self._target(node, name, st)
        if target is None:
            return
        fd = os.open(target, NEW_FILE_FLAGS, 0o600, dir_fd=node.fd)
        try:
            view = data
            while view:
                view = view[os.write(fd, view) :]
            self.metadata.apply(None, fd, st, is_dir=False, times=True)
        except BaseException:
            os.close(fd)
            os.unlink(target, dir_fd=node.fd)
            raise
        os.close(fd)
        self._commit(node, target, name)
        self.tally["copied.files"] += 1
        self.tally["copied.bytes"] += len(data)

    def _write_symlink(
        self, node: _Dir, name: str, st: os.stat_result, target_path: str
    ) -> None:
        target = self._target(node, name, st, link=target_path)
        if target is None:
            return
        os.symlink(target_path, target, dir_fd=node.fd)
        try:
            self.metadata.apply_by_name(node.fd, target, st)
            self._commit(node, target, name)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target, dir_fd=node.fd)
            raise
        self.tally["copied.symlinks"] += 1

    # -- large files ---------------------------------------------------------------

    def chunk(
        self, header: dict[str, Any], data: memoryview, current: Incoming | None
    ) -> Incoming | None:
        """A ``CHUNK`` frame. A connection carries one large file at a time, so its
        reader passes the file in progress (``current``) and gets it back, or
        ``None`` once the file is finished."""
        first, last = header.get("first") is True, header.get("last") is True
        if first != (current is None):
            raise ProtocolError("CHUNK frame out of order")
        if current is None:
            node = self._dir(header.get("dir"))
            name = check_name(header.get("name"))
            st = stat_of(header.get("meta"))
            current = Incoming(self, node, name, st)
        offset = header.get("offset")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ProtocolError(f"bad chunk offset {offset!r}")
        failed = header.get("failed")
        current.write(offset, data)
        if not last:
            return current
        if isinstance(failed, str):
            current.abort(failed)
        else:
            current.finish()
        return None


class Incoming:
    """A large file arriving in ``CHUNK`` frames: written at their offsets (gaps stay
    holes), sized and given its metadata at the last one.

    An error while writing is recorded once; the rest of the file's frames are read
    and dropped (``gone``), so the connection stays usable.
    """

    def __init__(
        self, receiver: Receiver, node: _Dir, name: str, st: os.stat_result
    ) -> None:
        self.receiver, self.node, self.name, self.st = receiver, node, name, st
        self.fd: int | None = None
        self.target: str | None = None
        self.written = 0
        self.gone = False
        try:
            self.target = receiver._target(node, name, st)
            if self.target is not None:
                self.fd = os.open(self.target, NEW_FILE_FLAGS, 0o600, dir_fd=node.fd)
        except OSError as exc:
            self._failed("create", exc)

    def _failed(self, op: str, exc: OSError) -> None:
        self.receiver._fail(self.node.child_rel(self.name), op, exc)
        with self.receiver._lock:
            self.node.failed = True
        self.discard()
        self.gone = True

    def discard(self) -> None:
        """Remove what was written so far (the transfer broke off)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            assert self.target is not None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.target, dir_fd=self.node.fd)

    def write(self, offset: int, data: memoryview) -> None:
        if self.fd is None:
            return
        if offset + len(data) > self.st.st_size:
            raise ProtocolError(f"{self.name}: chunk beyond the announced size")
        try:
            view = data
            while view:
                n = os.pwrite(self.fd, view, offset)
                view, offset = view[n:], offset + n
            self.written += len(data)
        except OSError as exc:
            self._failed("write", exc)

    def finish(self) -> None:
        """The last frame arrived: size, metadata, rename into place, count."""
        if self.fd is not None:
            assert self.target is not None
            try:
                os.ftruncate(self.fd, self.st.st_size)
                self.receiver.metadata.apply(
                    None, self.fd, self.st, is_dir=False, times=True
                )
            except OSError as exc:
                self._failed("write", exc)
            else:
                os.close(self.fd)
                self.fd = None
                try:
                    self.receiver._commit(self.node, self.target, self.name)
                except OSError as exc:
                    self._failed("rename into place", exc)
                else:
                    tally = self.receiver.tally
                    tally["copied.files"] += 1
                    tally["copied.bytes"] += self.st.st_size
        self.receiver._count(self.node)

    def abort(self, reason: str) -> None:
        """The source could not read the file to the end: nothing of it stays."""
        self.discard()
        with self.receiver._lock:
            self.node.failed = True
        log.debug("%s: source gave up: %s", self.name, reason)
        self.receiver._count(self.node)
