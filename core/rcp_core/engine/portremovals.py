"""Non-directories of one directory removed a batch in a request, where the port
:class:`~rcp_core.backends.port.RemovesInBatches` (S3's ``DeleteObjects``: a thousand
objects), for the walks that remove many at once: ``rrm``'s
(:mod:`rcp_core.tools.remove.portremove`) and ``--delete``'s pruning
(:mod:`rcp_core.engine.portwalk`).

Invariants: a batch is one directory's entries, at most what the port's
:meth:`~rcp_core.backends.port.RemovesInBatches.batch_most` says; its request is
tried again while it fails with a transient error (the run's ``attempt``); what went
is counted (:func:`~rcp_core.engine.removeentry.count_removed`), what the answer
names as left, or the whole batch where its request failed, goes to the caller's own
removal of one entry (which tries and reports it as it does any), so nothing is
counted twice and nothing is dropped unsaid. Where the port has no batches (or
``batch_most`` is 1), each entry goes to that removal at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rcp_core.backends.port import Entry, Port, RemovesInBatches
from rcp_core.engine.removeentry import count_removed
from rcp_core.run.summary import Tally

OneByOne = Callable[[str, Entry], None]
"""``remove(name, entry)``: the caller's removal of one entry of the directory."""


class RemovalBatches:
    """The non-directories of the directory ``rel`` of ``port`` that go, gathered
    (:meth:`add`) and removed a batch at a time; :meth:`flush` removes the last.

    :param attempt: how a request is tried (``Runtime.attempt``).
    :param one_by_one: the removal of one entry a batch did not remove.
    :param gone: told each entry a batch removed.
    """

    def __init__(
        self,
        port: Port,
        rel: str,
        tally: Tally,
        attempt: Callable[[Callable[[], Any]], Any],
        one_by_one: OneByOne,
        gone: OneByOne | None = None,
    ) -> None:
        self.port, self.rel, self.tally = port, rel, tally
        self.attempt, self.one_by_one, self.gone = attempt, one_by_one, gone
        self.most = port.batch_most(rel) if isinstance(port, RemovesInBatches) else 1
        self.gathered: dict[str, Entry] = {}

    def add(self, name: str, entry: Entry) -> None:
        """The non-directory ``name`` goes: at once where there are no batches,
        else with its batch once that is full."""
        if self.most <= 1:
            self.one_by_one(name, entry)
            return
        self.gathered[name] = entry
        if len(self.gathered) >= self.most:
            self.flush()

    def flush(self) -> None:
        """Remove what is gathered, in one request."""
        batch, self.gathered = self.gathered, {}
        if not batch:
            return
        port = self.port
        assert isinstance(port, RemovesInBatches), "gathered only where it batches"
        try:
            left = set(self.attempt(lambda: port.remove_batch(self.rel, batch)))
        except OSError:
            left = set(batch)
        for name, entry in batch.items():
            if name in left:
                self.one_by_one(name, entry)
            else:
                count_removed(self.tally, entry.stat())
                if self.gone is not None:
                    self.gone(name, entry)
