"""An interrupt stops a copy: the ``rcp`` program, sent SIGINT while it copies, exits
130 promptly saying so, leaves no file under its name that is not whole, and nothing
goes on writing after it has exited (daemons included).

This is the one test that runs ``rcp`` as a program: a signal is a process's. So it
runs on the pairs whose backends another process can reach -- not ``memory://``,
which only this process sees (the in-process front-end offers no interrupt to
test) -- and, to keep the suite fast, on each backend as the source of a copy to a
local directory and as the destination of one from it, and between two hosts.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time

import pytest

from support import rcprun
from support.capabilities import Feature, Support
from support.pairs import Pair, cases
from support.treespec import Spec

FILES = 20
THROTTLE = "5"
"""Entries per second: the copy of :data:`TREE` would take four seconds."""
TREE: Spec = {f"f{i:02}": b"%02d\n" % i * 100 for i in range(FILES)}
SIGNAL = 1.0
"""Seconds after the start at which to interrupt a copy by the remote roles (with a
``host:`` or an ``rcpd serve`` side), which writes nothing until its source's walk is
done; others are interrupted once a file has arrived."""
UNDER_WAY = 0.3
"""Seconds from the first file to the interrupt: every file is handed to a worker by
then, as in any copy interrupted past its first moments."""
PROMPT = 1.5
"""Seconds from the signal to the exit, at most."""


def reachable(source: str, destination: str) -> bool:
    """Reachable by another process, and local on one side (or two hosts)."""
    if "memory" in (source, destination):
        return False
    return "local" in (source, destination) or source == destination == "host"


def present(pair: Pair, dst: str) -> dict[str, bytes]:
    if not pair.dst.exists(dst):
        return {}
    with pair.dst.view(dst) as local:
        return {p.name: p.read_bytes() for p in local.iterdir() if p.is_file()}


@pytest.mark.parametrize(
    "pair", cases(Feature.CANCEL, Support.YES, where=reachable), indirect=True
)
def test_an_interrupted_copy_stops_promptly_and_leaves_only_whole_files(
    pair: Pair,
) -> None:
    """SIGINT once a file has arrived (between hosts: after :data:`SIGNAL` seconds,
    while the source walks): exit 130 within :data:`PROMPT` seconds, "interrupted"
    on stderr, not every file copied, each one copied whole (an entry in flight is
    finished or left as it was), and nothing written afterwards."""
    src, dst = pair.source(TREE), pair.target()
    args = ["--ops-throttle", THROTTLE, pair.src.operand(src), pair.dst.operand(dst)]
    proc = rcprun.start(args, pair.launch)
    try:
        started = time.monotonic()
        remote = bool({"host", "serve"} & {pair.src.name, pair.dst.name}) and not (
            {"memory", "s3"} & {pair.src.name, pair.dst.name}
        )
        while not (remote and time.monotonic() - started > SIGNAL):
            if set(present(pair, dst)) & set(TREE):
                time.sleep(UNDER_WAY)
                break
            assert proc.poll() is None, "rcp exited before it was interrupted"
            assert time.monotonic() - started < 30, "no file arrived in 30 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        ended: tuple[str, str] | None = None
        with contextlib.suppress(subprocess.TimeoutExpired):  # asserted below
            ended = proc.communicate(timeout=PROMPT)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()  # reaped, its pipes closed
    assert ended is not None, f"rcp still running {PROMPT} s after the interrupt"
    out, err = ended
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert "interrupted" in err, err
    copied = present(pair, dst)
    assert len(copied) < FILES, "every file copied: not stopped midway"
    assert set(copied) <= set(TREE), (
        f"not the source's names: {set(copied) - set(TREE)}"
    )
    assert all(TREE[name] == data for name, data in copied.items()), "a partial file"
    time.sleep(1.0)  # a daemon left behind would go on writing
    assert present(pair, dst) == copied, "written after rcp exited"
