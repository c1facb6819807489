"""Timing one child process: wall time, CPU time and peak RSS from ``wait4``.

``os.wait4`` returns the resource usage of exactly the child we started, including
the children *it* waited for (a shell's ``xargs`` and its ``cp`` processes), so CPU
time is user + system of the whole process tree and never mixes in the harness's own
threads.

Peak RSS needs care: Linux records the memory of the process image that ``exec``
replaces in ``ru_maxrss``, so a tool forked from this (large) Python process would
report the harness's own RSS. The tool is therefore started under GNU ``time``
(``/usr/bin/time -f %M``), a small C program that forks the tool itself and reports
the tool's peak: the largest resident set of any single process of its tree (Linux
takes the maximum, not the sum), in KiB. Without GNU time, the ``wait4`` figure is
used and the measurement says so (``rss_source``).

Invariants: the child runs in its own session, so a timeout kills its whole process
group; stdout and stderr go to files (no pipe can fill and stall the child); the wall
clock (``perf_counter``) spans fork to reap, nothing else.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_TAIL = 2000
GNU_TIME = "/usr/bin/time"


@dataclass(frozen=True, slots=True)
class Measurement:
    """What one child run cost, and how it ended."""

    wall_s: float
    user_s: float
    sys_s: float
    maxrss_kib: int
    exit_code: int  # negative: killed by that signal
    timed_out: bool
    stderr_tail: str
    rss_source: str  # "time" (GNU time's %M) or "wait4" (includes the harness's image)


def measure(
    command: Sequence[str],
    *,
    log_dir: Path,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    gnu_time: str | None = GNU_TIME,
) -> Measurement:
    """Run ``command`` to completion (or ``timeout_s``) and return its :class:`Measurement`.

    ``log_dir`` receives ``stdout``, ``stderr`` and ``rss`` of the child (overwritten).
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path, rss_path = (
        log_dir / "stdout",
        log_dir / "stderr",
        log_dir / "rss",
    )
    rss_path.unlink(missing_ok=True)
    argv = list(command)
    if gnu_time is not None and os.access(gnu_time, os.X_OK):
        argv = [gnu_time, "-q", "-f", "%M", "-o", str(rss_path), "--", *argv]
    else:
        gnu_time = None
    timed_out = threading.Event()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
        timer = threading.Timer(timeout_s, _kill_group, (proc.pid, timed_out))
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            # Interrupted (SIGTERM, ^C): take the tool down with us, never orphan it.
            _kill_group(proc.pid, timed_out)
            os.waitpid(proc.pid, 0)
            proc.returncode = -signal.SIGKILL
            raise
        finally:
            timer.cancel()
        wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code  # reaped by wait4: keep Popen from waiting again
    rss = _read_rss(rss_path) if gnu_time else None
    return Measurement(
        wall_s=wall,
        user_s=usage.ru_utime,
        sys_s=usage.ru_stime,
        maxrss_kib=usage.ru_maxrss if rss is None else rss,
        exit_code=code,
        timed_out=timed_out.is_set(),
        stderr_tail=_tail(err_path),
        rss_source="wait4" if rss is None else "time",
    )


def _read_rss(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def _kill_group(pid: int, flag: threading.Event) -> None:
    flag.set()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _tail(path: Path) -> str:
    data = path.read_bytes()[-_TAIL:]
    return data.decode("utf-8", "replace").strip()
