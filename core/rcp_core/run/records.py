"""What a run records: its errors (:class:`ErrorLog`: deduplicated, counted) and,
when asked, what it changed: one :class:`Change` per entry it created, replaced,
updated, linked or removed, and one per error. ``--itemize-changes`` prints each
change as rsync's itemized line (:meth:`Change.itemized`), ``--log-file`` appends
each to a file as a JSON line (:meth:`Change.json`).

Invariants:

- a change is recorded after it happened: the entry is complete under its own name
  (or removed), so the record never names a half-written file as copied;
- an error is recorded where the run counts it (:class:`ErrorLog`), so the log file
  holds every error, not only each kind's first;
- a record is one whole line, written under a lock: the lines of workers and of
  helper processes (whose changes travel to the caller, which owns the outputs)
  interleave by line only;
- a dry run records nothing: its own lines say what would change.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TextIO

from rcp_core.errors import UsageError

if TYPE_CHECKING:
    from rcp_core.errors import EntryError
    from rcp_core.settings import CopySettings, Preserve

log = logging.getLogger("rcp_core")

MAX_DISTINCT_ERRORS = 20

NEW = "+++++++++"
"""rsync's attribute letters of an entry that was not there."""
_SAME = "........."

_TYPE_LETTER = {
    "file": "f",
    "dir": "d",
    "symlink": "L",
    "device": "D",
    "special": "S",
}
_UPDATE_LETTER = {"create": "c", "replace": "c", "update": ".", "link": "h"}


def kind_of(mode: int) -> str:
    """The kind a change names an entry of ``mode`` by: ``file``, ``dir``,
    ``symlink``, ``device`` (character or block) or ``special`` (FIFO, socket)."""
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special"


def differences(
    kind: str,
    new: tuple[int | None, int | None, int | None, int | None, int | None],
    old: tuple[int | None, int | None, int | None, int | None, int | None],
    preserve: Preserve,
) -> str:
    """rsync's nine attribute letters (``cstpoguax``) of an entry replaced: ``s``
    its size, ``t`` its mtime, ``p`` its permission bits, ``o``/``g`` its owner and
    group, where they differ and the copy keeps them; a dot for each other.

    :param new: the source's (size, mtime_ns, mode bits, uid, gid); ``None`` where
        the storage does not say.
    :param old: the same of what the destination held.
    """
    size, mtime, mode, uid, gid = (
        a is not None and b is not None and a != b
        for a, b in zip(new, old, strict=True)
    )
    return "".join(
        (
            ".",
            "s" if size and kind == "file" else ".",
            "t" if mtime and preserve.times else ".",
            "p" if mode and preserve.mode else ".",
            "o" if uid and preserve.owner else ".",
            "g" if gid and preserve.owner else ".",
            "...",
        )
    )


def of_stat(st: os.stat_result) -> tuple[int, int, int, int, int]:
    """The attributes :func:`differences` compares, of an ``lstat``."""
    return (
        st.st_size,
        st.st_mtime_ns,
        stat.S_IMODE(st.st_mode),
        st.st_uid,
        st.st_gid,
    )


@dataclass(frozen=True, slots=True)
class Change:
    """One entry's change, or one error.

    :param path: the destination entry: its path relative to the destination's
        parent directory (a copy's name, then the path below it), or a store's URL.
    :param action: ``create``, ``replace`` (new content under the old name),
        ``update`` (only its metadata), ``link`` (a hard link to ``target``),
        ``remove`` or ``error``.
    :param kind: :func:`kind_of`'s word (``file`` for a hard link; ``entry`` for
        an error).
    :param attributes: rsync's nine attribute letters (:data:`NEW` for a new entry).
    :param bytes: data written.
    :param method: how the data was written (``reflink``, ``copy_file_range``, ...).
    :param target: a symlink's target, or the path a hard link shares its inode with.
    :param error: what failed.
    """

    path: str
    action: str
    kind: str
    attributes: str = NEW
    bytes: int = 0
    method: str | None = None
    target: str | None = None
    error: str | None = None

    def itemized(self) -> str:
        """rsync's ``--itemize-changes`` line: ``YXcstpoguax PATH``."""
        if self.action == "remove":
            return f"*deleting   {self.path}{'/' if self.kind == 'dir' else ''}"
        update = (
            ">"
            if self.kind == "file" and self.action in ("create", "replace")
            else (_UPDATE_LETTER.get(self.action, "*"))
        )
        line = f"{update}{_TYPE_LETTER[self.kind]}{self.attributes} {self.path}"
        if self.kind == "dir":
            return line + "/"
        if self.target is not None:
            return f"{line} {'=>' if self.action == 'link' else '->'} {self.target}"
        return line

    def json(self) -> str:
        """One line of ``--log-file``: the time (UTC, ISO 8601), path, action, kind,
        bytes, method and error (``null`` when there is none), and the target when
        there is one."""
        record: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "path": self.path,
            "action": self.action,
            "kind": self.kind,
            "bytes": self.bytes,
            "method": self.method,
            "error": self.error,
        }
        if self.target is not None:
            record["target"] = self.target
        return json.dumps(record, ensure_ascii=False)


class ChangeSink(Protocol):
    """Where a run's workers put its changes."""

    def add(self, change: Change) -> None: ...


class ChangeLog:
    """The run's record, in the process that owns the output: itemized lines go to
    the ``rcp_core`` logger (the tools print them on stdout), JSON lines to the
    log file, appended to. Close it when the run ends.

    :raises UsageError: the log file cannot be opened (nothing was touched yet).
    """

    def __init__(self, itemize: bool, log_file: str | None) -> None:
        self.itemize = itemize
        self._lock = threading.Lock()
        self._file: TextIO | None = None
        if log_file is not None:
            try:
                self._file = open(log_file, "a", encoding="utf-8")  # noqa: SIM115
            except OSError as exc:
                raise UsageError(
                    f"cannot open --log-file {log_file!r}: {exc.strerror or exc}"
                ) from exc

    @classmethod
    def of(cls, settings: CopySettings) -> ChangeLog | None:
        """The record ``settings`` ask for; ``None`` when they ask for none (or
        for a dry run's, which records nothing)."""
        if settings.dry_run is not None:
            return None
        if not settings.itemize_changes and settings.log_file is None:
            return None
        return cls(settings.itemize_changes, settings.log_file)

    def add(self, change: Change) -> None:
        if self.itemize and change.action != "error":
            log.info("%s", change.itemized())
        if self._file is not None:
            line = change.json() + "\n"
            with self._lock:
                self._file.write(line)

    def error(self, error: EntryError) -> None:
        """Record one of the run's errors (the log file only: the errors are
        reported as errors)."""
        if self._file is not None:
            self.add(Change(error.path, "error", "entry", _SAME, error=str(error)))

    def close(self) -> None:
        if self._file is not None:
            with self._lock:
                self._file.close()


class ErrorLog:
    """Deduplicated errors: each distinct kind (:attr:`EntryError.key`) is logged
    once, then only counted; the first of each kind is kept as its example. Each
    is also told to :attr:`changes` when the run records its changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._first: dict[str, EntryError] = {}
        self.changes: ChangeLog | None = None

    def add(self, error: EntryError) -> None:
        key = error.key
        with self._lock:
            self._counts[key] += 1
            first = key not in self._first
            if first:
                self._first[key] = error
        if first:
            log.error("%s", error)
        if self.changes is not None:
            self.changes.error(error)

    def report(self) -> list[tuple[str, int, str]]:
        """The most frequent distinct errors, at most ``MAX_DISTINCT_ERRORS``:
        ``(kind, count, the first one's path)``."""
        with self._lock:
            return [
                (key, count, self._first[key].path)
                for key, count in self._counts.most_common(MAX_DISTINCT_ERRORS)
            ]

    def messages(self) -> list[str]:
        """The same, as one line each: the first error of a kind, and how many more
        there were (what a remote role reports to its master)."""
        with self._lock:
            return [
                str(self._first[key])
                + (f" (and {count - 1} more like it)" if count > 1 else "")
                for key, count in self._counts.most_common(MAX_DISTINCT_ERRORS)
            ]
