"""A destination's connections served: the control connection answered, each data
connection's frames written, until the destination root is finished
(:func:`receive`, called by :func:`rcp_core.remote.roles.run_destination`).

- **control**: ``dir`` messages create or reuse directories (with the manifests and
  partials the source asks for, and each directory handed to the writer processes
  before its ``dir_ready``), ``dir_end`` counts their entries, ``dir_excluded`` names
  what ``--delete`` keeps;
- **data**: one thread per connection reads ``FILES`` and ``CHUNK`` frames
  (:func:`serve_data`, also a writer process's loop); a large file cut off by a
  broken connection is removed, never left under its final name;
- **bounded**: a transfer in which no frame arrives anywhere (the destination's own
  connections or its writers') for ``stall`` seconds fails; the first failure of any
  thread, of the write pool or of a writer ends the transfer;
- **the end**: once the root is finished the writers' last counts are collected, and
  the destination says ``finished`` with the total.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rcp_core.errors import PeerTimeoutError, ProtocolError, RemoteError
from rcp_core.remote.connection import Connection
from rcp_core.remote.hello import MANIFESTS, RESUME
from rcp_core.remote.receivedtree import ANCHOR
from rcp_core.remote.wire import FrameKind

if TYPE_CHECKING:
    from rcp_core.remote.incoming import Part
    from rcp_core.remote.receive import Receiver
    from rcp_core.remote.writers import Writers

PROGRESS = 1.0
"""Seconds between the destination's progress reports."""

Progress = Callable[[dict[str, int]], None]
"""Takes a destination's counts so far."""


def receive(
    receiver: Receiver,
    conns: list[Connection],
    threads: list[threading.Thread],
    stall: float,
    on_progress: Progress | None,
    seen: Heartbeat,
    writers: Writers | None,
) -> tuple[dict[str, int], list[str]]:
    """Serve the control connection (first) and the data connections until the
    destination root is finished, with ``writers`` when they pay; the threads
    started are added to ``threads``."""
    control, data = conns[0], conns[1:]
    failures: list[BaseException] = []
    threads.append(
        threading.Thread(
            target=_guard(failures, lambda: _serve_control(control, receiver, seen)),
            daemon=True,
        )
    )
    threads.extend(
        threading.Thread(
            target=_guard(
                failures, functools.partial(serve_data, conn, receiver, seen)
            ),
            daemon=True,
        )
        for conn in data
    )
    for thread in threads:
        thread.start()
    reported = time.monotonic()
    if writers is not None:
        writers.consider()  # asked for: started at once
    while not receiver.done.wait(0.2):
        if failures:
            raise failures[0]
        receiver.check()
        if writers is not None:
            writers.check()
            writers.consider()
        if seen.silent_for() > stall:
            raise PeerTimeoutError(f"no data from the source for {stall:g} s")
        if on_progress is not None and time.monotonic() - reported >= PROGRESS:
            reported = time.monotonic()
            on_progress(receiver.counts())
    if writers is not None:
        writers.finish()  # their last counts, before the total is told
    control.send_control("finished", counts=receiver.counts())
    return receiver.counts(), receiver.errors.messages()


class Heartbeat:
    """When the last frame arrived on any connection of a transfer."""

    def __init__(self) -> None:
        self.last = time.monotonic()

    def beat(self) -> None:
        self.last = time.monotonic()

    def silent_for(self) -> float:
        return time.monotonic() - self.last


def _guard(failures: list[BaseException], fn: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        try:
            fn()
        except (RemoteError, OSError) as exc:
            failures.append(exc)

    return run


def _serve_control(conn: Connection, receiver: Receiver, seen: Heartbeat) -> None:
    resumes = receiver.resumes and conn.version >= RESUME
    if resumes:  # the anchor's partials, before any of its files is sent
        _tell_partials(conn, receiver, ANCHOR)
        conn.send_control("dir_ready", id=ANCHOR)
    while not receiver.done.is_set():
        frame = conn.read()
        seen.beat()
        if frame is None:
            if receiver.done.is_set():
                return
            raise ProtocolError(f"{conn.peer} closed control before the copy ended")
        kind = frame.header.get("type")
        if frame.kind is not FrameKind.CONTROL:
            raise ProtocolError(f"{frame.kind.name} frame on the control connection")
        if kind == "dir":
            h = frame.header
            ok = receiver.open_dir(
                h.get("id"),
                h.get("parent"),
                h.get("name"),
                h.get("meta"),
                h.get("traverse", False),
            )
            if ok and receiver.wants_manifests and conn.version >= MANIFESTS:
                for part in receiver.manifest(h["id"]):
                    conn.send_control("dir_manifest", id=h["id"], entries=part)
            if ok and resumes:
                _tell_partials(conn, receiver, h["id"])
            if ok:
                receiver.ready(h["id"])
            conn.send_control("dir_ready" if ok else "dir_failed", id=h.get("id"))
        elif kind == "dir_end":
            h = frame.header
            receiver.end_dir(h.get("dir"), h.get("count"), h.get("xattrs"))
        elif kind == "dir_excluded":
            receiver.exclude(frame.header.get("dir"), frame.header.get("names"))
        else:
            raise ProtocolError(f"unexpected control message {kind!r}")


def _tell_partials(conn: Connection, receiver: Receiver, dir_id: int) -> None:
    """Describe the partials of directory ``dir_id`` to the source (``dir_partials``)."""
    for part in receiver.partials(dir_id):
        conn.send_control("dir_partials", id=dir_id, entries=part)


def serve_data(conn: Connection, receiver: Receiver, seen: Heartbeat | None) -> None:
    """Write what arrives on one data connection (each frame beats ``seen``). A
    large file cut off by a broken connection is removed (once no other connection
    writes a part of it): nothing half-written stays under its final name."""
    current: Part | None = None
    try:
        while True:
            try:
                frame = conn.read()
                if seen is not None:
                    seen.beat()
            except (RemoteError, OSError):
                if receiver.done.is_set():
                    return  # closed under us at the end: nothing was pending here
                raise
            if frame is None:
                if current is not None:
                    raise ProtocolError(f"{conn.peer} closed inside a large file")
                return
            if frame.kind is FrameKind.FILES:
                receiver.files(frame.header, frame.data)
            elif frame.kind is FrameKind.CHUNK:
                current = receiver.chunk(frame.header, frame.data, current)
            else:
                raise ProtocolError(f"{frame.kind.name} frame on a data connection")
    except BaseException:
        if current is not None:
            receiver.cut(current)
        raise
