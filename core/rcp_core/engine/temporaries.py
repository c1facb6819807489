"""Temporary names: what a replacement is written under, and what a killed run left.

An existing destination entry is replaced through a temporary in the same directory,
``.rcp-XXXXXXXX.NAME`` (eight random hex digits, then the name it stands in for),
renamed over ``NAME`` when complete. A run that ends normally never leaves one (every
failure path removes its temporary); a run that is killed (SIGKILL, power loss) can.
The next run into that directory removes them (:func:`sweep`), so rerunning an
interrupted copy yields an exact copy.

A path-named entry is made beside its name by :class:`Beside` (or the block of
:func:`made_beside`): the name holds the old entry or the whole new one, never a
part, and the temporary is gone whichever way it ends.

Under ``--partial`` a large file is written under the one name
``.rcp-partial.NAME`` (:func:`partial_name`) instead, which a cut-off copy leaves
for the next run to resume from (:mod:`rcp_core.engine.partials`).

What :func:`sweep` removes, and nothing else: a non-directory whose name has exactly
one of those shapes, standing in for a name the source directory has; partials only
when they are not kept for a resume. A name of :data:`TRUNCATED` bytes or more after
the prefix may be a truncation of a longer name and is never removed (a source name
that long cannot be told from another).
"""

from __future__ import annotations

import contextlib
import logging
import os
import string
from collections.abc import Callable, Iterator

log = logging.getLogger("rcp_core")

PREFIX = ".rcp-"
_HEX = frozenset(string.hexdigits.lower())
_HEAD = len(PREFIX) + 8 + 1
"""``.rcp-`` + eight hex digits + ``.``: what comes before the name."""
TRUNCATED = 255 - _HEAD
"""Bytes of the name a temporary can hold: longer names are cut to this many."""
PARTIAL = ".rcp-partial."
"""The prefix of a resumable partial file's name."""
PARTIAL_TRUNCATED = 255 - len(PARTIAL)
"""Bytes of the name a partial's name can hold: longer names are cut to this many."""


def temp_name(name: str) -> str:
    """A unique hidden name next to ``name``, at most 255 bytes long."""
    prefix = f"{PREFIX}{os.urandom(4).hex()}."
    raw = os.fsencode(name)[:TRUNCATED]
    return prefix + os.fsdecode(raw)


class Beside:
    """A temporary name beside ``path`` (:func:`temp_name`), for an entry made
    there: :meth:`commit` renames it over ``path``; :meth:`discard`, or a failed
    commit, removes it."""

    def __init__(self, path: str) -> None:
        directory, name = os.path.split(path)
        self.path, self.temporary = path, os.path.join(directory, temp_name(name))

    def commit(self) -> None:
        """Rename the temporary over ``path`` (a directory there stays: ``EISDIR``,
        ``ENOTEMPTY``); removed where that fails."""
        try:
            os.replace(self.temporary, self.path)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Remove the temporary, if anything was made under it."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.temporary)


@contextlib.contextmanager
def made_beside(path: str) -> Iterator[str]:
    """The temporary name of a :class:`Beside` ``path``, for the block to make an
    entry under: committed when the block ends, discarded when it raises."""
    beside = Beside(path)
    try:
        yield beside.temporary
    except BaseException:
        beside.discard()
        raise
    beside.commit()


def partial_name(name: str) -> str:
    """The one name under which ``name``'s resumable partial is written, at most 255
    bytes long (a longer ``name`` is cut: two names may then share it, which the
    prefix's verification against the source makes harmless)."""
    return PARTIAL + os.fsdecode(os.fsencode(name)[:PARTIAL_TRUNCATED])


def partial_stands_for(name: str) -> str | None:
    """The name the partial ``name`` is of; ``None`` when ``name`` is no partial, or
    may hold a truncated name."""
    if not name.startswith(PARTIAL) or len(name) == len(PARTIAL):
        return None
    original = name[len(PARTIAL) :]
    return original if len(os.fsencode(original)) < PARTIAL_TRUNCATED else None


def stands_for(name: str) -> str | None:
    """The name the temporary ``name`` replaces; ``None`` when ``name`` is not a
    temporary, or may hold a truncated name."""
    if len(name) <= _HEAD or not name.startswith(PREFIX) or name[_HEAD - 1] != ".":
        return None
    if not _HEX.issuperset(name[len(PREFIX) : _HEAD - 1]):
        return None
    original = name[_HEAD:]
    return original if len(os.fsencode(original)) < TRUNCATED else None


def sweep(
    dir_fd: int,
    in_source: Callable[[str], bool],
    *,
    dry: bool = False,
    keep_partials: bool = False,
) -> list[str]:
    """Remove the temporaries an interrupted run left in the directory ``dir_fd``
    (see the module docstring); the names removed.

    :param in_source: whether the source directory has an entry of that name.
    :param dry: only name them.
    :param keep_partials: leave the partials (a resume may use them).
    """
    removed = []
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            original = stands_for(entry.name)
            if original is None and not keep_partials:
                original = partial_stands_for(entry.name)
            if original is None or entry.is_dir(follow_symlinks=False):
                continue
            if not in_source(original):
                continue
            if dry:
                removed.append(entry.name)
                continue
            try:
                os.unlink(entry.name, dir_fd=dir_fd)
            except FileNotFoundError:
                continue  # gone meanwhile
            except IsADirectoryError:
                continue  # a directory took the name since it was listed
            removed.append(entry.name)
    return removed
