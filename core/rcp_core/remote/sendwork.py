"""What a source's sender threads take (:class:`Work`), for
:mod:`rcp_core.remote.send`.

- the walk's batches, at most ``depth`` waiting: the walk never runs far ahead of
  the network; the rest of a batch a sender handed back (the files behind a large
  one) goes first;
- the end, once the walk has ended: a sender takes ``None`` when no batch is
  queued and none is being sent (a batch being sent may still hand back its rest,
  which the other senders then share: a sender that ended at the walk's end would
  leave the files behind a large one to the connection of that large one);
- the parts of split files (protocol 1.16), each for the senders of one *group*
  (the connections of one destination process, which writes every part of a
  file), taken before any batch: a split file's parts travel at once.

Invariants: a part is never stranded: the sender that split a file takes parts of
its own group before its next batch or the end, so if no other sender of the
group is left it sends them itself. No sender ends while a batch is being sent
(:meth:`Work.sent` ends each one taken), so a handed-back rest always finds them.
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
        self._batches: deque[Batch] = deque()
        self._parts: dict[int, deque[OutgoingPart]] = {}
        self._sending = 0
        self._ended = False

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

    def end(self) -> None:
        """The walk has ended: no batch is put after this; senders end once every
        batch is sent."""
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def sent(self) -> None:
        """A batch :meth:`take` gave is sent (or given up): nothing more of it can
        be handed back."""
        with self._changed:
            self._sending -= 1
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
        else the next batch (the caller calls :meth:`sent` once it is sent);
        ``None``: it ends (the walk has ended and no batch is queued or being
        sent)."""
        with self._changed:
            while True:
                parts = self._parts.get(group)
                if parts:
                    return parts.popleft()
                if self._batches:
                    batch = self._batches.popleft()
                    self._sending += 1
                    self._changed.notify_all()
                    return batch
                if self._ended and not self._sending:
                    return None
                self._changed.wait()

    def leftover_parts(self) -> list[OutgoingPart]:
        """The parts no sender took (the transfer failed), taken out."""
        with self._changed:
            left = [part for parts in self._parts.values() for part in parts]
            self._parts.clear()
        return left
