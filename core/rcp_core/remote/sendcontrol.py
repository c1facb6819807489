"""The source role's control connection: the destination's answers, read by a thread of
their own while the walk goes on (:mod:`rcp_core.remote.send`).

The destination answers each directory announced (``dir``) with ``dir_ready`` or
``dir_failed`` (the walk scans it, or not its subtree), may first send manifests
(``dir_manifest``) of the regular files an existing directory holds, kept until the
directory's scan, asks the run to ``stop`` (protocol 1.10), and says ``finished`` once
everything is written. Anything else, or an answer about a directory never announced,
is a :class:`~rcp_core.errors.ProtocolError`.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from rcp_core.errors import ConnectionLostError, ProtocolError
from rcp_core.remote.connection import Connection
from rcp_core.remote.meta import stat_of
from rcp_core.remote.receivedtree import check_name
from rcp_core.remote.roleruntime import RoleRun
from rcp_core.remote.wire import FrameKind


class Answers:
    """The destination's answers to one source role.

    :param announced: whether a directory id was announced (and not yet scanned).
    """

    def __init__(
        self, control: Connection, runtime: RoleRun, announced: Callable[[int], bool]
    ) -> None:
        self.control = control
        self.runtime = runtime
        self._announced = announced
        self.ready: queue.Queue[tuple[int, bool]] = queue.Queue()
        """``(directory id, whether the destination made it)``, as answered."""
        self._lock = threading.Lock()
        self._manifests: dict[int, dict[str, os.stat_result]] = {}
        """Directory id -> the regular files its destination already holds."""

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
            ):
                if kind == "finished":
                    return
                if kind == "stop" and frame.kind is FrameKind.CONTROL:
                    reason = frame.header.get("reason")
                    self.runtime.stop(f"the destination stopped: {reason}")
                    continue
                raise ProtocolError(f"unexpected {kind or frame.kind.name}")
            if not isinstance(dir_id, int) or not self._announced(dir_id):
                raise ProtocolError(f"{kind} for unknown directory {dir_id!r}")
            if kind == "dir_manifest":
                self._note_manifest(dir_id, frame.header.get("entries"))
            else:
                self.ready.put((dir_id, kind == "dir_ready"))

    def manifest(self, dir_id: int) -> dict[str, os.stat_result]:
        """The regular files the destination holds in directory ``dir_id`` (empty
        where it sent no manifest), given once: for its scan."""
        with self._lock:
            return self._manifests.pop(dir_id, {})

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
