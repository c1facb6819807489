"""The messages between a run and its helper processes, and the socket that carries them.

A :class:`Channel` is one end of a ``socketpair(AF_UNIX, SOCK_SEQPACKET)`` made by the
caller and inherited by the helper it spawned: nobody else can connect to it, so the
messages are pickled dataclasses, and open directory descriptors travel beside them as
``SCM_RIGHTS`` (the receiver gets its own duplicates). Message boundaries are kept by the
socket; a message larger than ``MAX_MESSAGE`` is refused before it is sent.

Flow (the caller is on the left)::

    Setup  ->                 once, first
           <- Ready           the helper can take work
    Task   ->                 a batch of one directory's entries, with its two fds
           <- Deferred        a hard-linked entry of that batch: the caller copies it
           <- Record          a log record (dry-run lines, warnings)
           <- Change          an entry it changed (a run that records changes)
           <- Failure         one entry's error (the caller logs and counts it)
           <- Counts          the helper's counters so far (about twice a second)
           <- Done            the batch is finished
    Limit  ->                 the caller's controller moved its limit: follow it
    Stop   ->                 stop as soon as possible (fail-early, cancel, fatal error)
    Finish ->                 no more tasks: finish, then answer Final and exit
           <- Final           the helper's last counters
           <- Crash           a bug in the helper; it exits
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import socket
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rcp_core.errors import ChannelError, EntryError
from rcp_core.paths import Job
from rcp_core.run.records import Change, ErrorLog
from rcp_core.run.tuning import Concurrency
from rcp_core.settings import CopySettings
from rcp_core.site.storage import StorageInfo

MAX_MESSAGE = 4 << 20
MAX_FDS = 4


@dataclass(frozen=True, slots=True)
class Setup:
    """Everything a helper needs to copy like the caller.

    :param entry_points: load the installed site plugins (the caller did); besides
        them a helper has only the built-in plugin.
    :param log_level: the lowest level worth sending back as a :class:`Record`.
    """

    settings: CopySettings
    umask: int
    jobs: Sequence[Job]
    storage: Sequence[tuple[StorageInfo, StorageInfo]]
    concurrency: Concurrency
    entry_points: bool
    log_level: int


@dataclass(frozen=True, slots=True)
class Ready:
    pass


@dataclass(frozen=True, slots=True)
class Task:
    """Copy ``entries`` of the directory ``rel`` of job ``job`` (names, op names).

    Sent with the directory's source descriptor and, unless ``has_dst`` is false (a
    dry run into a directory that does not exist yet), its destination descriptor.
    """

    task: int
    job: int
    rel: str
    fresh: bool
    dst_dev: int
    has_dst: bool
    entries: Sequence[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class Deferred:
    """The file or symlink ``name`` (at ``rel``) of task ``task`` has other hard
    links."""

    task: int
    name: str
    rel: str


@dataclass(frozen=True, slots=True)
class Record:
    logger: str
    level: int
    message: str


@dataclass(frozen=True, slots=True)
class Failure:
    error: EntryError


@dataclass(frozen=True, slots=True)
class Counts:
    counts: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Done:
    """Task ``task`` is finished; what the caller's directory node must learn."""

    task: int
    incomplete: bool
    has_content: bool


@dataclass(frozen=True, slots=True)
class Limit:
    """Run ``workers`` of the helper's batches at once, as the caller now does."""

    workers: int


@dataclass(frozen=True, slots=True)
class Stop:
    reason: str


@dataclass(frozen=True, slots=True)
class Finish:
    pass


@dataclass(frozen=True, slots=True)
class Final:
    counts: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Crash:
    description: str


class ForwardedErrors(ErrorLog):
    """A helper's error log: the caller keeps the run's, so each error goes there."""

    def __init__(self, chan: Channel) -> None:
        super().__init__()
        self.chan = chan

    def add(self, error: EntryError) -> None:
        self.chan.send(Failure(error))


class ForwardedChanges:
    """A helper's changes go to the caller, which owns the run's record
    (:class:`~rcp_core.run.records.ChangeLog`)."""

    def __init__(self, chan: Channel) -> None:
        self.chan = chan

    def add(self, change: Change) -> None:
        self.chan.send(change)


class ForwardedRecords(logging.Handler):
    """A helper's log records go to the caller, which owns the output."""

    def __init__(self, chan: Channel) -> None:
        super().__init__()
        self.chan = chan

    def emit(self, record: logging.LogRecord) -> None:
        # If the caller is gone, the helper's reader stops it.
        with contextlib.suppress(OSError):
            self.chan.send(Record(record.name, record.levelno, record.getMessage()))


class Channel:
    """One end of a helper's socket; :meth:`send` may be called from any thread.

    Only :meth:`recv` blocks, and only one thread per end calls it.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._send_lock = threading.Lock()

    @classmethod
    def pair(cls) -> tuple[Channel, socket.socket]:
        """A channel for the caller, and the socket to hand to the helper."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        for sock in (mine, theirs):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_MESSAGE)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, MAX_MESSAGE)
        return cls(mine), theirs

    def send(self, message: object, fds: Sequence[int] = ()) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        if len(data) > MAX_MESSAGE:
            raise ChannelError(f"{type(message).__name__} of {len(data)} bytes")
        with self._send_lock:
            socket.send_fds(self.sock, [data], list(fds))

    def recv(self) -> tuple[object, list[int]] | None:
        """The next message and the descriptors that came with it; ``None`` at EOF."""
        data, fds, flags, _ = socket.recv_fds(self.sock, MAX_MESSAGE, MAX_FDS)
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            for fd in fds:
                os.close(fd)
            raise ChannelError("message truncated")
        if not data:
            return None
        return pickle.loads(data), fds

    def close(self) -> None:
        self.sock.close()
