"""What a source's sender threads take (:class:`Work`), for
:mod:`rcp_core.remote.send`.

- the walk's batches, at most ``depth`` waiting: the walk never runs far ahead of
  the network; the rest of a batch a sender handed back (the files behind a large
  one) goes first;
- one end marker (``None``) per sender, after the last batch (no batch comes
  after an end marker);
- the parts of split files (protocol 1.16), each for the senders of one *group*
  (the connections of one destination process, which writes every part of a
  file), taken before any batch: a split file's parts travel at once.

Invariant: a part is never stranded. The sender that split a file takes parts of
its own group before its next batch or end marker, so if no other sender of the
group is left it sends them itself.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rcp_core.remote.sendbatch import Batch
    from rcp_core.remote.sendlarge import OutgoingPart


class Work:
    """Batches (bounded), end markers and split files' parts, for the senders."""

    def __init__(self, depth: int) -> None:
        self._depth = depth
        self._changed = threading.Condition()
        self._batches: deque[Batch | None] = deque()
        self._parts: dict[int, deque[OutgoingPart]] = {}

    def put(self, batch: Batch, timeout: float) -> bool:
        """Queue a batch, waiting up to ``timeout`` seconds for room; ``False`` when
        there was none."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self._batches) >= self._depth:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            self._batches.append(batch)
            self._changed.notify_all()
        return True

    def end(self, senders: int) -> None:
        """Queue an end marker for each of ``senders`` senders, after every batch."""
        with self._changed:
            self._batches.extend([None] * senders)
            self._changed.notify_all()

    def hand_back(self, batch: Batch) -> None:
        """Queue the rest of a batch a sender stopped at, before every other."""
        with self._changed:
            self._batches.appendleft(batch)
            self._changed.notify_all()

    def share(self, group: int, parts: list[OutgoingPart]) -> None:
        """Queue parts of a split file for the senders of ``group``."""
        with self._changed:
            self._parts.setdefault(group, deque()).extend(parts)
            self._changed.notify_all()

    def take(self, group: int) -> Batch | OutgoingPart | None:
        """The next thing for a sender of ``group`` to send: a part of its group,
        else the next batch; ``None``: it ends."""
        with self._changed:
            while True:
                parts = self._parts.get(group)
                if parts:
                    return parts.popleft()
                if self._batches:
                    item = self._batches.popleft()
                    self._changed.notify_all()
                    return item
                self._changed.wait()

    def leftover_parts(self) -> list[OutgoingPart]:
        """The parts no sender took (the transfer failed), taken out."""
        with self._changed:
            left = [part for parts in self._parts.values() for part in parts]
            self._parts.clear()
        return left
