"""Declarative test trees: a spec maps relative paths to entries, `make_tree` builds it.

A spec is a mapping of relative POSIX paths (str; non-UTF-8 names as surrogateescape) to
`bytes` (a file with that content) or one of the frozen markers below. The key "." may
hold a `Dir` that gives the root directory its metadata.

Invariants of `make_tree`:
- Parents are created before children; a parent not named in the spec is made with
  `mkdir` defaults and gets no explicit metadata.
- Hard links are made after every other entry, so a `HardLink` may name a file that
  sorts after it. A hard link shares its inode, so it carries no metadata of its own.
- Metadata goes on after all entries exist, in the order owner, xattrs, mode, mtime
  (chown clears set-id bits; utime comes last because the others change ctime only).
  Directories get theirs deepest first, since creating a child bumps the parent's mtime.
- An entry without `mode`/`mtime_ns` keeps what creation gave it (umask, now).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

Owner = tuple[int, int]


@dataclass(frozen=True, slots=True)
class File:
    """A regular file; plain `bytes` in a spec is shorthand for `File(data)`."""

    data: bytes = b""
    mode: int | None = None
    mtime_ns: int | None = None
    owner: Owner | None = None
    xattrs: Mapping[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Dir:
    mode: int | None = None
    mtime_ns: int | None = None
    owner: Owner | None = None
    xattrs: Mapping[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Symlink:
    """A symbolic link; the target is stored verbatim and may dangle."""

    target: str | bytes
    mtime_ns: int | None = None
    owner: Owner | None = None


@dataclass(frozen=True, slots=True)
class HardLink:
    """Another name for the regular file (or fifo, or symlink) at spec key `target`
    (of a symlink: the link itself, as `ln` makes it, never what it points at)."""

    target: str


@dataclass(frozen=True, slots=True)
class Fifo:
    mode: int | None = None
    mtime_ns: int | None = None
    owner: Owner | None = None


@dataclass(frozen=True, slots=True)
class Sparse:
    """A `size`-byte file that is a hole except for `data_at` {offset: bytes}.

    The chunks must lie inside the file and not overlap (the result would depend on
    write order).
    """

    size: int
    data_at: Mapping[int, bytes] = field(default_factory=dict)
    mode: int | None = None
    mtime_ns: int | None = None
    owner: Owner | None = None
    xattrs: Mapping[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        end = 0
        for offset, chunk in sorted(self.data_at.items()):
            if offset < end:
                raise ValueError(f"data at {offset} overlaps data before {end}")
            end = offset + len(chunk)
            if offset < 0 or end > self.size:
                raise ValueError(
                    f"data at {offset} (+{len(chunk)}) outside {self.size}"
                )

    def content(self) -> bytes:
        """The bytes a reader sees: zeros in the holes."""
        buf = bytearray(self.size)
        for offset, chunk in sorted(self.data_at.items()):
            buf[offset : offset + len(chunk)] = chunk
        return bytes(buf)


Entry = bytes | File | Dir | Symlink | HardLink | Fifo | Sparse
Spec = Mapping[str, Entry]


def make_tree(root: Path, spec: Spec) -> Path:
    """Build `spec` under `root` (made if missing; may already hold other entries)."""
    root.mkdir(parents=True, exist_ok=True)
    parts = {rel: _parts(rel, entry) for rel, entry in spec.items()}
    ordered = sorted(spec, key=lambda rel: parts[rel])
    links: list[tuple[Path, HardLink]] = []
    for rel in ordered:
        entry = spec[rel]
        path = root.joinpath(*parts[rel])
        if not parts[rel]:
            continue  # the root: exists already, gets metadata below
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(entry, HardLink):
            links.append((path, entry))
        else:
            _create(path, entry)
    for path, link in links:
        target = spec.get(link.target)
        if not isinstance(target, bytes | File | Sparse | Fifo | Symlink):
            raise ValueError(
                f"hard link {path} -> {link.target!r}: not a file, fifo or symlink"
            )
        os.link(root.joinpath(*parts[link.target]), path, follow_symlinks=False)
    # Non-directories first, then directories deepest first (root "." last).
    for rel in sorted(
        ordered, key=lambda r: (isinstance(spec[r], Dir), -len(parts[r]))
    ):
        _apply_metadata(root.joinpath(*parts[rel]), spec[rel])
    return root


def _parts(rel: str, entry: Entry) -> tuple[str, ...]:
    if rel == ".":
        if not isinstance(entry, Dir):
            raise ValueError("spec key '.' (the root) must be a Dir")
        return ()
    parts = tuple(rel.split("/"))
    if rel.startswith("/") or posixpath.normpath(rel) != rel or ".." in parts:
        raise ValueError(f"spec key {rel!r} is not a normalized relative path")
    return parts


def _create(path: Path, entry: Entry) -> None:
    if isinstance(entry, bytes | File):
        data = entry if isinstance(entry, bytes) else entry.data
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    elif isinstance(entry, Sparse):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            os.ftruncate(fd, entry.size)
            for offset, chunk in entry.data_at.items():
                os.pwrite(fd, chunk, offset)
        finally:
            os.close(fd)
    elif isinstance(entry, Dir):
        path.mkdir()
    elif isinstance(entry, Symlink):
        os.symlink(entry.target, path)
    elif isinstance(entry, Fifo):
        os.mkfifo(path, 0o666)
    else:  # pragma: no cover - HardLink is handled by the caller
        raise TypeError(f"cannot create {entry!r}")


def _apply_metadata(path: Path, entry: Entry) -> None:
    if isinstance(entry, bytes | HardLink):
        return
    if entry.owner is not None:
        os.chown(path, *entry.owner, follow_symlinks=False)
    if isinstance(entry, File | Dir | Sparse):
        for name, value in entry.xattrs.items():
            os.setxattr(path, name, value, follow_symlinks=False)
    if not isinstance(entry, Symlink) and entry.mode is not None:
        os.chmod(path, entry.mode)
    if entry.mtime_ns is not None:
        atime_ns = os.lstat(path).st_atime_ns
        os.utime(path, ns=(atime_ns, entry.mtime_ns), follow_symlinks=False)
