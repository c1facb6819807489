"""A directory's listing in the generic engine's walks: the names it refuses, and
a directory listed a page at a time (:mod:`rcp_core.engine.portwalk`), each page
with what the destination holds under its names.

:func:`refuse_unsafe` makes each name a listing gave that is not safe an entry
error of the run (never joined to a path, never entered): the copy's and the
removal's walks (:mod:`rcp_core.tools.remove.portremove`) both refuse by it.

Where the source port :class:`~rcp_core.backends.port.ListsInPages`, a directory of
a million keys is not listed whole: the walk takes one page of it, pushes that
page's entries, and takes the next page only after them. :class:`PagedScan` is one
directory's place in that: the source's cursor, and the destination's entries its
names may meet, read in one of three ways:

- **fresh**: the destination was made by this run, nothing to read;
- **windowed**: the destination lists in pages too, in the same key order
  (:func:`~rcp_core.backends.port.page_key`), so it is read beside the source: its
  pages are read until every key a name of the source's page can have is in the
  window, and an entry leaves the window once the source has passed every key its
  name can have (a name is a file's key, or a directory's, the name with ``/``);
- **whole**: the destination's directory was listed whole (a local directory: one
  ``scandir``, no requests), kept until the scan ends.

Invariants: each source name meets exactly the destination entry of that name, if
there is one, whichever way the destination is read; in windowed mode the window
holds about the pages of the destination that overlap the source's current page;
a page whose request fails is asked for again from the same cursor (``attempt``:
the run's retries of transient errors). One scan is used by one worker at a time
(the walk pushes the next page's scan only when it is done with this one).
"""

from __future__ import annotations

import collections
import errno
import functools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from rcp_core.backends.port import Entry, Listing, ListsInPages, Page, page_key
from rcp_core.engine.tree import Node, joined
from rcp_core.run.runtime import Runtime
from rcp_core.run.summary import Tally

T = TypeVar("T")


class Attempt(Protocol):
    """How a request is tried (:meth:`rcp_core.run.runtime.Runtime.attempt`)."""

    def __call__(self, fn: Callable[[], T]) -> T: ...


class PagedScan:
    """One directory's paged listing (see the module's docstring).

    :param source: the source tree; its directory ``rel`` is listed.
    :param rel: the directory, relative to both roots.
    :param attempt: how a listing request is tried (again on transient errors).
    :param follow: whether the source's symlinks are followed (as
        :meth:`~rcp_core.backends.port.Port.list` takes it).
    :param target: the destination read beside it (windowed), or ``None``.
    :param whole: the destination's whole listing (``{}``: fresh or missing),
        where it is not ``target``'s to read.
    """

    __slots__ = (
        "_attempt",
        "_done",
        "_follow",
        "_reached",
        "_source_after",
        "_target_after",
        "_window",
        "more",
        "rel",
        "source",
        "target",
    )

    def __init__(
        self,
        source: ListsInPages,
        rel: str,
        attempt: Attempt,
        follow: bool,
        *,
        target: ListsInPages | None = None,
        whole: dict[str, Entry] | None = None,
    ) -> None:
        self.source, self.rel, self.target = source, rel, target
        self._attempt, self._follow = attempt, follow
        self._source_after: object | None = None
        self._target_after: object | None = None
        self._done = target is None
        self._reached = ""
        self._window: dict[str, Entry] = (
            collections.OrderedDict() if target is not None else whole or {}
        )
        self.more = True
        """Whether a page of the source is still to come."""

    def next_page(self) -> tuple[Listing, dict[str, Entry]]:
        """The source's next page, and the destination's entries under its names.

        :raises OSError: a listing failed (``FileNotFoundError`` at the source's
            first page: nothing is there).
        """
        page = self._ask(self.source, self._source_after, follow=self._follow)
        entries = page.listing.entries
        if not self._done and entries:
            self._read_target(max(page_key(name, True) for name in entries))
        window = self._window
        there = {name: window[name] for name in entries if name in window}
        if self.target is not None and entries:
            last = max(map(_keyed, entries.items()))
            while window and page_key(next(iter(window)), True) <= last:
                del window[next(iter(window))]  # no later source name is this one
        self._source_after = page.after
        self.more = page.after is not None
        return page.listing, there

    def _ask(self, port: ListsInPages, after: object | None, *, follow: bool) -> Page:
        ask = functools.partial(port.page, self.rel, follow=follow, after=after)
        return self._attempt(ask)

    def _read_target(self, need: str) -> None:
        """Read the destination's pages into the window until every entry that
        sorts up to ``need`` is in it, or the destination ends (a missing one
        holds nothing)."""
        assert self.target is not None, "read only where windowed"
        while not self._done and self._reached < need:
            try:
                page = self._ask(self.target, self._target_after, follow=False)
            except FileNotFoundError:
                if self._target_after is not None:
                    raise
                self._done = True
                return
            ordered = sorted(page.listing.entries.items(), key=_keyed)
            self._window.update(ordered)
            if ordered:
                self._reached = max(self._reached, _keyed(ordered[-1]))
            self._target_after = page.after
            self._done = page.after is None


def _keyed(item: tuple[str, Entry]) -> str:
    """Where a listing's ``(name, entry)`` sorts in pages."""
    return page_key(item[0], item[1].is_dir)


def refuse_unsafe(
    run: Runtime, tally: Tally, node: Node[Any], listing: Listing
) -> None:
    """Each name ``node``'s listing gave that is not safe: an entry error (``list``)
    of ``run``, and ``node`` incomplete; never joined to a path, never entered."""
    for name, unsafe in sorted(listing.unsafe.items()):
        node.incomplete = True
        error = OSError(errno.EINVAL, f"unsafe name: {unsafe.reason}")
        run.record(tally, run.error("list", joined(node.rel, name), error))
