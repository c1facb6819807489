"""What machine a benchmark ran on: CPU, cores, memory, kernel, OS, the work disk.

Invariant: read only, and every field is best effort: an unreadable source gives
``"?"``, never an exception, so describing the machine cannot stop a run.
"""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.mounts import fstype_of


def describe(work: Path) -> dict[str, Any]:
    """A JSON-ready description of this machine and of the disk holding ``work``."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count() or 0,
        "memory_gib": round(_meminfo_kib("MemTotal") / 1024**2, 1),
        "kernel": platform.release(),
        "os": _os_release(),
        "python": platform.python_version(),
        "work_dir": str(work),
        "work_fs": _safe(lambda: fstype_of(work)),
        "work_device": _safe(lambda: _mount_source(work)),
        "work_mount_options": _safe(lambda: _mount_options(work)),
        "work_free_gib": _safe(lambda: round(_free(work) / 1024**3, 1)),
        "work_ext4_journal": _safe(lambda: _ext4_journal(work)),
        "load_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def _meminfo_kib(key: str) -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _os_release() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return "?"


def _findmnt(path: Path, column: str) -> str:
    proc = subprocess.run(
        ["findmnt", "-n", "-o", column, "--target", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return proc.stdout.strip() or "?"


def _mount_source(path: Path) -> str:
    return _findmnt(path, "SOURCE")


def _mount_options(path: Path) -> str:
    return _findmnt(path, "OPTIONS")


def _ext4_journal(path: Path) -> str:
    """The journal thread of the ext4 holding ``path`` ("<none>" without a journal)."""
    device = Path(_mount_source(path)).name
    return (Path("/sys/fs/ext4") / device / "journal_task").read_text().strip()


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _safe(fn: Callable[[], object]) -> object:
    try:
        return fn()
    except (OSError, subprocess.SubprocessError, LookupError):
        return "?"
