"""The source role's control connection: the destination's answers, read by a thread of
their own while the walk goes on (:mod:`rcp_core.remote.send`).

The destination answers each directory announced (``dir``) with ``dir_ready`` or
``dir_failed`` (the walk scans it, or not its subtree), may first send manifests
(``dir_manifest``) of the regular files an existing directory holds and descriptions
of the partials it holds (``dir_partials``, protocol 1.14: for its anchor, directory
0, first of all, then ``dir_ready`` for it), kept until the directory's scan, asks
the run to ``stop`` (protocol 1.10), and says ``finished`` once everything is
written. Anything else, or an answer about a directory never announced,
is a :class:`~rcp_core.errors.ProtocolError`.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from rcp_core.engine.partials import Prefix
from rcp_core.errors import ConnectionLostError, PeerTimeoutError, ProtocolError
from rcp_core.remote.connection import Connection
from rcp_core.remote.meta import stat_of
from rcp_core.remote.receivedtree import ANCHOR, check_name
from rcp_core.remote.roleruntime import RoleRun
from rcp_core.remote.wire import FrameKind

POLL = 0.2
"""Seconds between looks at a failure while an answer is awaited."""
T = TypeVar("T")


def _within(
    stall: float,
    failure: Callable[[], BaseException | None],
    what: str,
    poll: Callable[[], T | None],
) -> T:
    """What ``poll`` (which waits up to :data:`POLL`) gives, within ``stall``."""
    deadline = time.monotonic() + stall
    while True:
        if (failed := failure()) is not None:
            raise failed
        got = poll()
        if got is not None:
            return got
        if time.monotonic() > deadline:
            raise PeerTimeoutError(f"the destination {what} for {stall:g} s")


class Answers:
    """The destination's answers to one source role.

    :param announced: whether a directory id was announced (and not yet scanned).
    :param resumes: the destination describes its anchor's partials first (protocol
        1.14, ``--partial``), then says ``dir_ready`` for it.
    """

    def __init__(
        self,
        control: Connection,
        runtime: RoleRun,
        announced: Callable[[int], bool],
        resumes: bool = False,
    ) -> None:
        self.control = control
        self.runtime = runtime
        self._announced = announced
        self._anchor = threading.Event()
        """The anchor's partials are in (set at once when none will come)."""
        if not resumes:
            self._anchor.set()
        self.ready: queue.Queue[tuple[int, bool]] = queue.Queue()
        """``(directory id, whether the destination made it)``, as answered."""
        self._lock = threading.Lock()
        self._manifests: dict[int, dict[str, os.stat_result]] = {}
        """Directory id -> the regular files its destination already holds."""
        self._partials: dict[int, dict[str, Prefix]] = {}
        """Directory id -> the partials its destination holds, by the file's name."""

    def read(self) -> None:
        """Read answers until ``finished``.

        :raises RemoteError: the connection broke or the destination misbehaved.
        :raises OSError: the connection's socket failed.
        """
        while True:
            frame = self.control.read()
            if frame is None:
                raise ConnectionLostError(
                    f"{self.control.peer} closed control before it finished"
                )
            kind = frame.header.get("type")
            dir_id = frame.header.get("id")
            if frame.kind is not FrameKind.CONTROL or kind not in (
                "dir_ready",
                "dir_failed",
                "dir_manifest",
                "dir_partials",
            ):
                if kind == "finished":
                    return
                if kind == "stop" and frame.kind is FrameKind.CONTROL:
                    reason = frame.header.get("reason")
                    self.runtime.stop(f"the destination stopped: {reason}")
                    continue
                raise ProtocolError(f"unexpected {kind or frame.kind.name}")
            if dir_id == ANCHOR and not self._anchor.is_set():
                if kind == "dir_partials":
                    self._note_partials(dir_id, frame.header.get("entries"))
                elif kind == "dir_ready":
                    self._anchor.set()
                else:
                    raise ProtocolError(f"{kind} for the anchor")
                continue
            if not isinstance(dir_id, int) or not self._announced(dir_id):
                raise ProtocolError(f"{kind} for unknown directory {dir_id!r}")
            if kind == "dir_manifest":
                self._note_manifest(dir_id, frame.header.get("entries"))
            elif kind == "dir_partials":
                self._note_partials(dir_id, frame.header.get("entries"))
            else:
                self.ready.put((dir_id, kind == "dir_ready"))

    def manifest(self, dir_id: int) -> dict[str, os.stat_result]:
        """The regular files the destination holds in directory ``dir_id`` (empty
        where it sent no manifest), given once: for its scan."""
        with self._lock:
            return self._manifests.pop(dir_id, {})

    def next_ready(
        self, stall: float, failure: Callable[[], BaseException | None]
    ) -> tuple[int, bool]:
        """The next directory answered: ``(its id, whether it is ready)``.

        :raises PeerTimeoutError: no answer came for ``stall`` seconds.
        :raises BaseException: what ``failure`` gives (the answers broke off).
        """

        def answered() -> tuple[int, bool] | None:
            try:
                return self.ready.get(timeout=POLL)
            except queue.Empty:
                return None

        return _within(stall, failure, "answered no directory", answered)

    def anchor_partials(
        self, stall: float, failure: Callable[[], BaseException | None]
    ) -> dict[str, Prefix]:
        """The partials of the destination's anchor, once it described them all
        (none when it describes none); raises as :meth:`next_ready`."""
        _within(
            stall,
            failure,
            "described no partials",
            lambda: True if self._anchor.wait(POLL) else None,
        )
        return self.partials(ANCHOR)

    def partials(self, dir_id: int) -> dict[str, Prefix]:
        """The partials the destination holds in directory ``dir_id`` (empty where
        it described none), given once: for its scan."""
        with self._lock:
            return self._partials.pop(dir_id, {})

    def _note_partials(self, dir_id: int, entries: Any) -> None:
        """Keep a part of a directory's partials until its scan."""
        if not isinstance(entries, list):
            raise ProtocolError("dir_partials without an entry list")
        found: dict[str, Prefix] = {}
        for item in entries:
            if not isinstance(item, list) or len(item) != 2:
                raise ProtocolError("dir_partials entry is not a [name, prefix] pair")
            try:
                found[check_name(item[0])] = Prefix.from_wire(item[1])
            except ValueError as exc:
                raise ProtocolError(f"dir_partials: {exc}") from exc
        with self._lock:
            self._partials.setdefault(dir_id, {}).update(found)

    def _note_manifest(self, dir_id: int, entries: Any) -> None:
        """Keep a part of a directory's manifest until its scan."""
        if not isinstance(entries, list):
            raise ProtocolError("dir_manifest without an entry list")
        files: dict[str, os.stat_result] = {}
        for item in entries:
            if not isinstance(item, list) or len(item) != 2:
                raise ProtocolError("dir_manifest entry is not a [name, meta] pair")
            files[check_name(item[0])] = stat_of(item[1])
        with self._lock:
            self._manifests.setdefault(dir_id, {}).update(files)
