"""A directory's listing in the generic engine's walks: the names it refuses, and
a directory listed a page at a time (:mod:`rcp_core.engine.portwalk`, the
comparison's :mod:`rcp_core.tools.verify.portcompare`), each page with what the
destination holds under its names.

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
  window, and an entry leaves the window once a source name meets it or the source
  has passed every key its name can have (a name is a file's key, or a
  directory's, the name with ``/``);
- **whole**: the destination's directory was listed whole (a local directory: one
  ``scandir``, no requests), an entry kept until a source name meets it.

With ``unmatched`` (a comparison: what only the destination holds is a difference)
each page also gives the destination's entries no source name meets, each once over
the scan, as soon as the source has passed them; after the source's last page the
scan goes on a destination page at a time until the destination ends.

Invariants: each source name meets exactly the destination entry of that name, if
there is one, whichever way the destination is read; every other destination entry
is given once as unmatched (where asked); in windowed mode the window
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
    :param whole: the destination's whole listing (``None``: fresh or missing),
        where it is not ``target``'s to read.
    :param unmatched: whether the destination's entries no source name meets are
        given too (and its unsafe names).
    """

    __slots__ = (
        "_attempt",
        "_done",
        "_follow",
        "_reached",
        "_source_after",
        "_source_done",
        "_target_after",
        "_unmatched",
        "_unsafe",
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
        whole: Listing | None = None,
        unmatched: bool = False,
    ) -> None:
        self.source, self.rel, self.target = source, rel, target
        self._attempt, self._follow = attempt, follow
        self._unmatched = unmatched
        self._source_after: object | None = None
        self._source_done = False
        self._target_after: object | None = None
        self._done = target is None
        self._reached = ""
        self._window: collections.OrderedDict[str, Entry] = collections.OrderedDict(
            whole.entries if whole is not None and target is None else {}
        )
        self._unsafe = {} if whole is None else dict(whole.unsafe)
        """The destination's unsafe names not yet given (``unmatched`` only)."""
        self.more = True
        """Whether a page is still to come (of the source; with ``unmatched``,
        then of the destination)."""

    def next_page(self) -> tuple[Listing, Listing]:
        """The source's next page (empty once it ended), and the destination's part
        of it: its entries under the page's names and, with ``unmatched``, the
        entries no source name meets that this page passed, with the unsafe names
        the destination listed.

        :raises OSError: a listing failed (``FileNotFoundError`` at the source's
            first page: nothing is there).
        """
        listing = Listing({}, {})
        if not self._source_done:
            page = self._ask(self.source, self._source_after, follow=self._follow)
            listing, self._source_after = page.listing, page.after
            self._source_done = page.after is None
        entries, window = listing.entries, self._window
        if not self._done and entries:
            self._read_target(max(page_key(name, True) for name in entries))
        there = {name: window.pop(name) for name in entries if name in window}
        passed: dict[str, Entry] = {}
        if self._source_done and self._unmatched:
            passed = self._rest()
        elif self.target is not None and entries:
            last = max(map(_keyed, entries.items()))
            while window and page_key(next(iter(window)), True) <= last:
                name, entry = window.popitem(last=False)
                passed[name] = entry  # no later source name is this one
        self.more = not self._source_done or (
            self._unmatched and (bool(window) or not self._done)
        )
        if not self._unmatched:
            return listing, Listing(there, {})
        unsafe, self._unsafe = self._unsafe, {}
        return listing, Listing({**there, **passed}, unsafe)

    def _rest(self) -> dict[str, Entry]:
        """Once the source ended: what the window holds, else the destination's
        next page (its entries no source name meets)."""
        window = self._window
        if window:
            rest = dict(window)
            window.clear()
            return rest
        if self._done:
            return {}
        self._read_target(None)
        rest = dict(window)
        window.clear()
        return rest

    def _ask(self, port: ListsInPages, after: object | None, *, follow: bool) -> Page:
        ask = functools.partial(port.page, self.rel, follow=follow, after=after)
        return self._attempt(ask)

    def _read_target(self, need: str | None) -> None:
        """Read the destination's pages into the window until every entry that
        sorts up to ``need`` is in it (``None``: one page), or the destination
        ends (a missing one holds nothing)."""
        assert self.target is not None, "read only where windowed"
        while not self._done and (need is None or self._reached < need):
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
            if self._unmatched:
                self._unsafe.update(page.listing.unsafe)
            self._target_after = page.after
            self._done = page.after is None
            if need is None:
                return


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
