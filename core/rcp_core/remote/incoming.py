"""A large file arriving in ``CHUNK`` frames at a destination (:class:`Incoming`).

Written at the frames' offsets (gaps stay holes), sized and given its metadata once
its last frame arrived, then renamed into place by its receiver's rules; a file cut
off (the source gave up, the connection broke) is removed, so nothing half-written
stays under its final name. A file split over several connections (protocol 1.16)
arrives as :class:`Part` runs, one per connection, written into the one
:class:`Incoming` concurrently: it is finished (or removed) when its last part
ended. Under ``--partial`` it is written under its partial name
instead, which a cut-off file leaves for the next run; a resumed one continues the
partial its receiver described, cut to the prefix the source verified
(:mod:`rcp_core.engine.partials`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rcp_core.engine.partials import Prefix, discard, resume
from rcp_core.engine.temporaries import partial_name
from rcp_core.errors import ProtocolError

if TYPE_CHECKING:
    from rcp_core.engine.destination import Plan
    from rcp_core.remote.receive import Receiver
    from rcp_core.remote.receivedtree import ReceivedDir

log = logging.getLogger("rcp_core")


class Incoming:
    """A large file arriving in ``CHUNK`` frames: written at their offsets (gaps stay
    holes), sized and given its metadata once its last part ended.

    An error while writing is recorded once; the rest of the file's frames are read
    and dropped (``gone``), so the connection stays usable. A file that starts after
    the run stopped is dropped the same way, unrecorded. Its creation is retried on
    transient errors; its chunks are written once.

    Invariant: its descriptor is closed only once every part ended (:meth:`end_part`,
    :meth:`cut`), so no part's thread writes through a descriptor closed under it.

    :param resumed: the partial its receiver described and the length of it the
        source verified (0: the file is written from the start).
    :param parts: how many connections carry it (1: not split).
    """

    def __init__(
        self,
        receiver: Receiver,
        node: ReceivedDir,
        name: str,
        st: os.stat_result,
        link: int | None,
        resumed: tuple[Prefix | None, int] = (None, 0),
        parts: int = 1,
    ) -> None:
        self.receiver, self.node, self.name, self.st = receiver, node, name, st
        self.link = link
        self.attrs: dict[str, bytes] | None = None
        self.fd: int | None = None
        self.target: str | None = None
        self.plan: Plan | None = None
        self.partial = receiver.resumes
        """Written under its partial name, which stays if the file is cut off."""
        self.kept = 0
        """Bytes of a resumed partial kept."""
        self.asked = resumed[1]
        """Bytes of a partial the source asked to keep (its parts agree on it)."""
        self.parts = parts
        self.started: set[int] = set()
        """The parts whose first frame arrived."""
        self._ended = 0
        self._gave_up: str | None = None
        """Why the source could not send it all (a part's ``failed``)."""
        self._broken = False
        """A part's connection broke: the copy fails, the file is only removed."""
        self._state = threading.Lock()
        self.gone = receiver._stopped(node)
        """Nothing of the file is written: it failed, or the run stopped before it."""
        if self.gone:
            return
        try:
            self.plan = receiver._target(node, name, st)
            if self.plan is not None:
                self._open(resumed)
        except OSError as exc:
            self._failed("create", exc)

    def _open(self, resumed: tuple[Prefix | None, int]) -> None:
        """Create the file (under its partial name with ``--partial``: a partial
        not resumed goes first), or continue the partial ``resumed`` names."""
        receiver, node, size = self.receiver, self.node, self.st.st_size
        assert self.plan is not None
        if not self.partial:
            target = self.target = self.plan.new_name(self.name)
        else:
            target = self.target = partial_name(self.name)
            prefix, kept = resumed
            if prefix is not None and kept:
                self.fd = resume(node.fd, target, prefix, kept)
                self.kept = kept
                return
            discard(node.fd, target)
        self.fd = receiver.runtime.attempt(lambda: receiver.create(node, target, size))

    def _failed(self, op: str, exc: OSError) -> None:
        """Record the file's error once; what arrives later is dropped, and what was
        written is removed once every part ended."""
        with self._state:
            if self.gone:
                return
            self.gone = True
        self.receiver._fail(self.node.child_rel(self.name), op, exc)
        with self.receiver._lock:
            self.node.incomplete = True

    def discard(self) -> None:
        """Remove what was written so far (the transfer broke off); a partial
        stays, for the next run to resume."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            assert self.target is not None
            if not self.partial:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.target, dir_fd=self.node.fd)

    def start(self, index: int) -> Part:
        """A part's first frame arrived (each part starts once)."""
        with self._state:
            if index in self.started:
                raise ProtocolError(f"{self.name}: part {index} sent twice")
            self.started.add(index)
        return Part(self, index)

    def write(self, offset: int, data: memoryview) -> None:
        if self.fd is None or self.gone:
            return
        if offset + len(data) > self.st.st_size:
            raise ProtocolError(f"{self.name}: chunk beyond the announced size")
        try:
            view = data
            while view:
                n = os.pwrite(self.fd, view, offset)
                view, offset = view[n:], offset + n
            self.receiver.tally.moved(len(data))
        except OSError as exc:
            self._failed("write", exc)

    def end_part(self, gave_up: str | None) -> bool:
        """A part's last frame arrived (``gave_up``: the source's reason it could not
        send it all). Once every part ended the file is finished, or removed (a
        partial stays); then ``True``."""
        with self._state:
            self._ended += 1
            if gave_up is not None and self._gave_up is None:
                self._gave_up = gave_up
            if self._ended < self.parts:
                return False
        if self._broken:
            self.discard()
        elif self._gave_up is not None:
            self.abort(self._gave_up)
        else:
            self.finish()
        return True

    def cut(self) -> bool:
        """A part's connection broke (the copy fails): once every part ended, what
        was written is removed (a partial stays), uncounted; then ``True``."""
        with self._state:
            self._ended += 1
            self._broken = True
            if self._ended < self.parts:
                return False
        self.discard()
        return True

    def finish(self) -> None:
        """Every part arrived: size, metadata, rename into place, count."""
        if self.gone:
            self.discard()
        if self.fd is not None:
            assert self.target is not None
            assert self.plan is not None
            try:
                os.ftruncate(self.fd, self.st.st_size)
                self.receiver.metadata.apply(
                    self.attrs, self.fd, self.st, is_dir=False, times=True
                )
            except OSError as exc:
                self._failed("write", exc)
                self.discard()
            else:
                os.close(self.fd)
                self.fd = None
                try:
                    self.receiver.commit(self.node, self.target, self.name, self.plan)
                except OSError as exc:
                    self._failed("rename into place", exc)
                else:
                    tally = self.receiver.tally
                    tally["copied.files"] += 1
                    tally["copied.bytes"] += self.st.st_size
                    if self.kept:
                        tally["resumed.files"] += 1
                        tally["resumed.bytes"] += self.kept
        self._end(written=not self.gone)

    def abort(self, reason: str) -> None:
        """The source could not read the file to the end: nothing of it stays but a
        partial."""
        self.discard()
        with self.receiver._lock:
            self.node.incomplete = True
        log.debug("%s: source gave up: %s", self.name, reason)
        self._end(written=False)

    def _end(self, written: bool) -> None:
        if self.link is not None:
            self.receiver._first_name(self.link, self.node, self.name, written)
        self.receiver._count(self.node)


@dataclass(frozen=True, slots=True)
class Part:
    """One connection's run of a large file's ``CHUNK`` frames: the whole file, or
    part ``index`` of a split one."""

    file: Incoming
    index: int
