"""Confining a service's paths to the directories it serves.

An ``rcpd serve`` service reads and writes only beneath its ``--root`` directories.
A path from a client is checked as text (absolute, no ``.`` or ``..`` components,
under a root), then resolved one component at a time from the root's open descriptor
with ``O_NOFOLLOW``: a symlink anywhere on the way, even one swapped in after the
check, fails the walk instead of leading out. The engine then gets the checked
directory as ``/proc/self/fd/N/...``, the kernel's reference to that very
directory, never a string it would resolve again.

Inside a tree the engine itself never follows a symlink (it walks by descriptors with
``O_NOFOLLOW``), so confining the operands confines the whole copy; a service refuses
settings that would follow symlinks (``dereference``). A file request that follows a
symlink takes its target as text (:func:`link_target`) and confines it again like any
path a client sends; a walk that failed on a directory that is missing or may not be
entered is that OS error to a client (:func:`walk_errno`), not a refusal.

Invariants:

- a :class:`Confined` path's parent descriptor is a directory beneath a root, reached
  without following any symlink; the descriptor stays open until :meth:`close`;
- a destination is never a root itself (the copy would replace or create the root in
  a directory the service does not serve); ``ROOT/`` names the inside of a root.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from rcp_core.errors import PathRefusedError, UnsafeNameError
from rcp_core.names import check_component

_WALK = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Confined:
    """A path checked to lie beneath a root.

    :param fd: an ``O_PATH`` descriptor of the directory that holds the entry (or,
        for ``name == ""``, the directory itself).
    :param name: the entry's name in that directory; ``""`` for the directory.
    :param shown: the client's path, for messages.
    """

    fd: int
    name: str
    shown: str

    @property
    def path(self) -> str:
        """The path to hand to the engine: through the descriptor, never re-resolved
        (a trailing ``/`` when it names a directory's inside)."""
        return f"/proc/self/fd/{self.fd}/{self.name}"

    def close(self) -> None:
        os.close(self.fd)


class Roots:
    """The directories a service serves, opened once at start.

    :param roots: absolute paths of existing directories (a symlink among them is
        resolved now, by the administrator's choice, and not again).
    :raises PathRefusedError: a root is relative, missing or not a directory.
    """

    def __init__(self, roots: Sequence[str]) -> None:
        if not roots:
            raise PathRefusedError("a service needs at least one --root")
        self._roots: list[tuple[tuple[str, ...], int]] = []
        for root in roots:
            if not os.path.isabs(root):
                raise PathRefusedError(f"root {root!r} is not an absolute path")
            try:
                fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as exc:
                raise PathRefusedError(f"root {root!r}: {exc.strerror}") from exc
            self._roots.append((_components(os.path.normpath(root)), fd))
        # The longest root first: a path under nested roots is resolved in the inner.
        self._roots.sort(key=lambda item: len(item[0]), reverse=True)

    @property
    def paths(self) -> list[str]:
        return ["/" + "/".join(parts) for parts, _ in self._roots]

    def source(self, path: str) -> Confined:
        """A source operand: an entry beneath a root, or a root itself.

        A trailing slash (follow a symlink, in ``rcp``'s operand rules) is accepted
        only when the entry is not a symlink, and dropped.
        """
        parts, root_fd, depth = self._locate(path)
        if len(parts) == depth:  # the root itself: read through its parent
            real = os.readlink(f"/proc/self/fd/{root_fd}")
            if real == "/":
                raise PathRefusedError("refusing to copy '/' as a source")
            parent = os.open("..", _WALK, dir_fd=root_fd)
            return Confined(parent, os.path.basename(real), path)
        confined = self._parent(parts, root_fd, depth, path)
        if path.endswith("/"):
            try:
                st = os.lstat(confined.name, dir_fd=confined.fd)
            except OSError:
                st = None  # missing: the engine reports it as for any source
            if st is not None and stat.S_ISLNK(st.st_mode):
                confined.close()
                raise PathRefusedError(
                    f"{path}: a service does not follow a symlink operand"
                )
        return confined

    def destination(self, path: str) -> Confined:
        """A destination operand: ``DIR/`` is the inside of a directory beneath (or
        at) a root; otherwise an entry's name in such a directory, never a root."""
        parts, root_fd, depth = self._locate(path)
        if path.endswith("/"):
            fd = self._walk(root_fd, parts[depth:], path)
            return Confined(fd, "", path)
        if len(parts) == depth:
            raise PathRefusedError(
                f"{path} is a root; name the inside of it as {path.rstrip('/')}/"
            )
        return self._parent(parts, root_fd, depth, path)

    def is_root(self, path: str) -> bool:
        """Whether ``path`` names one of the roots itself.

        :raises PathRefusedError: it is not beneath a root.
        """
        parts, _, depth = self._locate(path)
        return len(parts) == depth

    def parents_made(self, path: str, mode: int) -> Confined:
        """A destination entry's name in its directory, as :meth:`destination` gives
        it, after making the directories on the way that are missing (``mode``, less
        the umask), as ``mkdir -p`` would; the walk still follows no symlink."""
        parts, root_fd, depth = self._locate(path)
        if len(parts) == depth:
            raise PathRefusedError(f"{path} is a root")
        fd = self._walk(root_fd, parts[depth:-1], path, make=mode)
        return Confined(fd, parts[-1], path)

    def close(self) -> None:
        for _, fd in self._roots:
            os.close(fd)
        self._roots = []

    def _locate(self, path: str) -> tuple[tuple[str, ...], int, int]:
        """``path``'s components, the descriptor of the root it is under, and how
        many of its components the root has."""
        if not isinstance(path, str) or not path.startswith("/"):
            raise PathRefusedError(f"{path!r} is not an absolute path")
        parts = tuple(part for part in path.split("/") if part)
        try:
            for part in parts:
                check_component(part)
        except UnsafeNameError as exc:
            raise PathRefusedError(f"{path!r}: {exc.reason}") from exc
        for root_parts, fd in self._roots:
            if parts[: len(root_parts)] == root_parts:
                return parts, fd, len(root_parts)
        raise PathRefusedError(f"{path} is outside this service's roots")

    def _parent(
        self, parts: tuple[str, ...], root_fd: int, depth: int, path: str
    ) -> Confined:
        fd = self._walk(root_fd, parts[depth:-1], path)
        return Confined(fd, parts[-1], path)

    @staticmethod
    def _walk(
        root_fd: int, parts: Sequence[str], path: str, make: int | None = None
    ) -> int:
        """Open ``parts`` below ``root_fd`` one by one, following no symlink; with
        ``make``, a missing one is made first with that mode."""
        fd = os.dup(root_fd)
        for part in parts:
            try:
                if make is not None:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, make, dir_fd=fd)
                child = os.open(part, _WALK, dir_fd=fd)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise PathRefusedError(
                        f"{path}: {part!r} is a symlink or not a directory"
                    ) from exc
                if exc.errno == errno.ENOENT:
                    raise PathRefusedError(f"{path}: {part!r} does not exist") from exc
                raise PathRefusedError(f"{path}: {exc.strerror}") from exc
            os.close(fd)
            fd = child
        return fd


def _components(path: str) -> tuple[str, ...]:
    return tuple(part for part in path.split("/") if part)


def link_target(path: str, target: str) -> str:
    """The path the symlink ``path`` points at, as text.

    ``..`` at the start of a relative target leaves a directory that ``path`` was
    reached through, which is a real one (the walk follows no symlink); ``..`` after
    a name of the target is refused, since that name may be a symlink the kernel would
    follow first.
    """
    parts = [] if target.startswith("/") else path.rstrip("/").split("/")[:-1]
    named = False
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part != "..":
            parts.append(part)
            named = True
        elif named:
            raise PathRefusedError(f"{path}: symlink target {target!r} has '..' inside")
        elif parts:
            parts.pop()
    return "/" + "/".join(p for p in parts if p)


def walk_errno(exc: PathRefusedError) -> int | None:
    """The errno of a walk that failed on a directory that is missing or may not be
    entered: the client sees that as the OS error; ``None`` for a refusal (outside
    the roots, ``..``, a symlink or non-directory on the way)."""
    cause = exc.__cause__
    if not isinstance(cause, OSError) or cause.errno in (errno.ELOOP, errno.ENOTDIR):
        return None
    return cause.errno


class Operands(list[Confined]):
    """A copy's confined operands, sources then the destination; close them
    after."""

    def close(self) -> None:
        for operand in self:
            operand.close()


def shown(message: str, confined: Sequence[Confined]) -> str:
    """``message`` with descriptor paths written as the client's paths."""
    for c in confined:
        parent = c.shown.rstrip("/") if not c.name else c.shown.rsplit("/", 1)[0]
        message = message.replace(f"/proc/self/fd/{c.fd}", parent or "/")
    return message
