"""What a verification compares: the rules that make a copy's check compare what the
copy was asked to copy, and no more.

``Scope()`` (:data:`EVERYTHING`) compares everything (``rcmp``); :meth:`Scope.of` is a
copy's, the same on every path (:mod:`rcp_core.tools.verify.pairwalk` for local trees,
:mod:`rcp_core.tools.verify.portcompare` for any other pair of backend ports).

Invariants:

- every rule is the copy's own, from the same code: the filters are
  :class:`~rcp_core.engine.filters.Filter`, what an existing-entry policy keeps is
  :func:`~rcp_core.engine.existing.decide`; nothing here reads a tree but :func:`snapshot`;
- the root is never filtered (as the copy never filters its operand);
- :func:`snapshot` never follows a symlink below the root, and records the tree as it
  is before the copy, through its backend port (any storage): what ``existing``'s
  policy then kept is recognised by comparing the source entry with that record, not
  with what the copy left.
"""

from __future__ import annotations

import enum
import functools
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from rcp_core.engine.existing import Action, decide
from rcp_core.engine.filters import Filter, GitIgnores, Verdict
from rcp_core.engine.tree import joined
from rcp_core.run.runtime import retrying
from rcp_core.settings import RETRIES, RETRY_DELAY, CopySettings, ExistingPolicy

if TYPE_CHECKING:
    from rcp_core.backends.port import Port

D = TypeVar("D")
Listed = tuple[D, list[tuple[str, bool]], GitIgnores | None]
"""A source directory listed: its handle, its entries (is each a directory), the
ignores below it."""

SPECIALS = frozenset({stat.S_IFIFO, stat.S_IFSOCK, stat.S_IFCHR, stat.S_IFBLK})
"""File types a copy may skip when it cannot recreate them (``skip_specials``)."""


class Left(enum.Enum):
    """How a copy's policy left an entry that was in the destination before it."""

    ALONE = "alone"
    """Kept as it was (ignore-existing, or update with a destination at least as
    new): not compared, nor anything below it."""
    METADATA = "metadata"
    """A directory merged into under ignore-existing: it keeps its own attributes;
    its entries are compared one by one."""


@dataclass(frozen=True, slots=True)
class Scope:
    """What a copy was asked to copy, so that verifying it compares that and no more.

    ``Scope()`` compares everything (``rcmp``); :meth:`of` is a copy's. Every rule
    is the copy's own, from the same code (:class:`~rcp_core.engine.filters.Filter`,
    :func:`~rcp_core.engine.existing.decide`):

    - an entry the filters exclude is compared on neither side (nor below it); a
      directory they only traverse is ``missing`` only when an entry below it is
      included (the copy removes a traverse-only directory it left empty);
    - a destination-only entry is ``extra`` only for a mirror (``extras``, the copy's
      ``--delete``), and then not where the filters exclude it (protected), unless
      ``delete_excluded``, which also makes an excluded name the source has ``extra``
      in the destination (the copy removes it);
    - with ``skip_specials``, a FIFO, socket or device missing in the destination is
      no difference (the copy may have been unable to recreate it);
    - ``before`` is what the destination tree held before the copy (``lstat`` by
      relative path, the root as ``""``; ``None``: nothing, or not recorded): an entry
      there that ``existing``'s policy kept is :attr:`Left.ALONE`, an existing
      directory merged into under ignore-existing :attr:`Left.METADATA`.
    """

    filter: Filter = field(default_factory=Filter)
    skip_specials: bool = False
    extras: bool = True
    delete_excluded: bool = False
    existing: ExistingPolicy = ExistingPolicy.ERROR
    before: Mapping[str, os.stat_result] | None = None

    @classmethod
    def of(
        cls, settings: CopySettings, before: Mapping[str, os.stat_result] | None = None
    ) -> Scope:
        """The scope of a copy run with ``settings``.

        :raises UsageError: a filter that does not compile, an unreadable filter file.
        """
        return cls(
            filter=Filter.of(settings),
            skip_specials=settings.skip_specials,
            extras=settings.delete,
            delete_excluded=settings.delete_excluded,
            existing=settings.existing,
            before=before,
        )

    @staticmethod
    def keeps(settings: CopySettings) -> bool:
        """Whether the copy's policy may keep existing entries: then its scope needs
        ``before``, recorded before the copy starts."""
        return settings.existing in (
            ExistingPolicy.IGNORE_EXISTING,
            ExistingPolicy.UPDATE,
        )

    def verdict(
        self, rel: str, is_dir: bool, under: bool, ignores: GitIgnores | None
    ) -> Verdict:
        """The filters' verdict on a source entry (the root is never filtered);
        ``under``: an ancestor was included."""
        if not rel or not self.filter.active:
            return Verdict.INCLUDE
        decision = self.filter.decide(rel, is_dir, under_include=under, ignores=ignores)
        return decision.verdict

    def extra(
        self, rel: str, is_dir: bool, under: bool, ignores: GitIgnores | None
    ) -> bool:
        """Whether an entry only the destination has is a difference."""
        if not self.extras:
            return False
        return (
            self.delete_excluded
            or self.verdict(rel, is_dir, under, ignores) is not Verdict.EXCLUDE
        )

    def sift(
        self,
        rel: str,
        under: bool,
        ignores: GitIgnores | None,
        named: Iterable[tuple[str, bool]],
    ) -> tuple[set[str], set[str]]:
        """The filters' verdicts on the entries of the source directory ``rel``
        (``named``: each name, and whether it is a directory; ``under``, ``ignores``:
        the directory's): the names they exclude (compared on neither side), and those
        they only traverse (``missing`` only with an entry below them included)."""
        excluded: set[str] = set()
        traversed: set[str] = set()
        for name, is_dir in named:
            verdict = self.verdict(joined(rel, name), is_dir, under, ignores)
            if verdict is Verdict.EXCLUDE:
                excluded.add(name)
            elif verdict is Verdict.TRAVERSE:
                traversed.add(name)
        return excluded, traversed

    def included_below(
        self,
        parent: D,
        name: str,
        rel: str,
        ignores: GitIgnores | None,
        listed: Callable[
            [D, str, str, GitIgnores | None], AbstractContextManager[Listed[D] | None]
        ],
    ) -> bool:
        """Whether the filters include an entry below the source directory ``rel``
        (``name`` in ``parent``), which they only traverse (the copy then makes it).
        Only traversed: no ancestor was included, so ``under`` is false below.

        :param listed: lists a directory (``parent``, ``name``, ``rel``, ``ignores``)
            while in it; ``None`` where it could not be (an ``error`` difference).
        """
        with listed(parent, name, rel, ignores) as found:
            if found is None:
                return False
            handle, entries, ignores = found
            for child, is_dir in entries:
                child_rel = joined(rel, child)
                verdict = self.verdict(child_rel, is_dir, False, ignores)
                if verdict is Verdict.INCLUDE or (
                    verdict is Verdict.TRAVERSE
                    and self.included_below(handle, child, child_rel, ignores, listed)
                ):
                    return True
        return False

    def only_in_destination(
        self,
        rel: str,
        is_dir: bool,
        what: str,
        excluded: bool,
        under: bool,
        ignores: GitIgnores | None,
    ) -> str | None:
        """The detail of the ``extra`` difference of ``rel``, which only the
        destination has (``what``: its type; ``excluded``: a name the source has and
        the filters exclude; ``under``, ``ignores``: its directory's), or ``None``
        where it is no difference."""
        if excluded:
            if self.extras and self.delete_excluded:
                return "excluded entry left in destination"
            return None
        if self.extra(rel, is_dir, under, ignores):
            return f"{what} only in destination"
        return None

    def excused(self, st_mode: int) -> bool:
        """Whether a source entry of this type may be missing in the destination."""
        return self.skip_specials and stat.S_IFMT(st_mode) in SPECIALS

    def left(self, rel: str, src: os.stat_result) -> Left | None:
        """How the copy's policy left ``rel`` (``None``: the copy made it)."""
        old = self.before.get(rel) if self.before is not None else None
        if old is None:
            return None
        action, _ = decide(self.existing, frozenset(), src, old)
        if action is Action.KEEP:
            return Left.ALONE
        if action is Action.REUSE and self.existing is ExistingPolicy.IGNORE_EXISTING:
            return Left.METADATA
        return None


EVERYTHING = Scope()
"""The scope that compares everything (``rcmp``)."""


def snapshot(port: Port) -> dict[str, os.stat_result] | None:
    """What the tree of ``port`` holds now (:attr:`Scope.before`), by relative path
    (the root as ``""``, taken as a copy takes its operand), listed one directory at a
    time without following a symlink; ``None`` if nothing is there. Each read is
    tried again on a transient error (the run runtime's default tries).

    :raises OSError: the root or a directory of it cannot be read.
    """
    tried = retrying(RETRIES + 1, RETRY_DELAY)
    top = tried(lambda: port.stat(""))
    if top is None:
        return None
    found = {"": top.stat()}
    pending = [""] if top.is_dir else []
    while pending:
        rel = pending.pop()
        listing = tried(functools.partial(port.list, rel, follow=False))
        for name, entry in listing.entries.items():
            child = joined(rel, name)
            found[child] = entry.stat()
            if entry.is_dir:
                pending.append(child)
    return found
