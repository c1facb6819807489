"""A helper process's life at both ends, shared by a local copy's helpers
(:mod:`rcp_core.engine.helpers.process`) and a destination's writer processes
(:mod:`rcp_core.remote.writerprocess`).

- :func:`spawn` starts ``python -P -m MODULE FD`` (spawned, not forked, so a threaded
  caller such as an Airflow worker is safe; ``-P``: the caller's working directory is
  not on the helper's import path, so a directory holding an ``rcp_core`` cannot
  stand in for ours) with one end of a :class:`~rcp_core.engine.helpers.channel.Channel`,
  and sends it its setup first; nothing is left running if that fails;
- :func:`helper_main` is the helper's side: it ignores the stop signals
  (:data:`~rcp_core.run.runtime.STOP_SIGNALS`: a terminal's Ctrl-C, a ``kill`` of the
  process group reach every process in it; the caller decides, and stops its helpers
  itself), takes the setup, sends its log records to the caller, and serves;
- :func:`read_helper` is the caller's reading of a helper's messages, until the
  helper is finished or its channel ends; :func:`send_counts` the helper's counters,
  sent as they change.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from rcp_core.engine.helpers.channel import Channel, Counts, ForwardedRecords
from rcp_core.errors import ChannelError
from rcp_core.run.runtime import STOP_SIGNALS
from rcp_core.run.summary import merge

log = logging.getLogger("rcp_core")

COUNTS_EVERY = 0.5
"""Seconds between a helper's counters sent (when they changed)."""


class HelperSetup(Protocol):
    """What every helper's setup says."""

    @property
    def log_level(self) -> int:
        """The lowest level worth sending back as a record."""
        ...


S = TypeVar("S", bound=HelperSetup)


def spawn(module: str, setup: object) -> tuple[subprocess.Popen[bytes], Channel]:
    """Start the helper ``module`` and send it ``setup``: the process and the
    caller's end of its channel.

    :raises OSError: it could not be started or told (nothing is left running).
    """
    chan, theirs = Channel.pair()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", module, str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
        )
    except OSError:
        chan.close()
        raise
    finally:
        theirs.close()
    try:
        chan.send(setup)
    except OSError:
        proc.kill()
        proc.wait()
        chan.close()
        raise
    return proc, chan


def helper_main(
    argv: list[str], kind: type[S], serve: Callable[[Channel, S], int]
) -> int:
    """A helper's ``main``: ``argv[1]`` is its channel's descriptor; the exit status
    ``serve`` returns (0 too when the caller finished before it started)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    chan = Channel(socket.socket(fileno=int(argv[1])))
    got = chan.recv()
    if got is None:
        return 0  # the caller finished before we started
    setup, _ = got
    if not isinstance(setup, kind):
        raise TypeError(f"expected {kind.__name__}, got {type(setup).__name__}")
    logging.root.setLevel(setup.log_level)
    logging.root.addHandler(ForwardedRecords(chan))
    return serve(chan, setup)


def read_helper(
    chan: Channel, apply: Callable[[object], bool], lost: Callable[[], None], who: str
) -> None:
    """Apply each message of the helper ``who`` until ``apply`` says it is finished;
    ``lost()`` when its channel ends first (it exited, or broke the channel). No
    message from a helper carries descriptors: any that come are closed."""
    while True:
        try:
            got = chan.recv()
        except ChannelError as exc:
            log.error("%s: %s", who, exc)
            got = None
        except OSError:  # ECONNRESET: it ended with our messages unread
            got = None
        if got is None:
            lost()
            return
        message, fds = got
        for fd in fds:
            os.close(fd)
        if apply(message):
            return


def send_counts(
    chan: Channel,
    tallies: Callable[[], Sequence[Mapping[str, int]]],
    until: threading.Event,
) -> None:
    """Send the helper's counters (``tallies()`` summed) every ``COUNTS_EVERY``
    seconds when they changed, until ``until`` is set or the caller is gone (its
    reader then ends the helper)."""
    sent: dict[str, int] = {}
    while not until.wait(COUNTS_EVERY):
        counts = merge(tallies())
        if counts != sent:
            try:
                chan.send(Counts(counts))
            except OSError:
                return
            sent = counts
