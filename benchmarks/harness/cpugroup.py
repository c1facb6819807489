"""A cpu cgroup for the benchmark process and its children, for the span of a ``with``.

Why: with the kernel's autogroup scheduling on (``kernel.sched_autogroup_enabled``, as
here) the CPUs are shared equally between *sessions*, and the harness starts every tool
in a session of its own; a busy loop beside a copy then keeps its core whatever the
copy's thread count. The tasks of one container or systemd service share a cgroup,
where autogroup does not apply and the scheduler shares the CPUs thread by thread. In a
cgroup of its own, inherited by every child (the busy loop, each tool), the harness
measures that case.

Invariants: on leaving the ``with`` this process is back in the cgroup it came from
and the cgroup made is removed; the caller ends the children it started inside first
(a cgroup with members cannot be removed: :class:`CgroupUnavailable` then says so).
A leftover of a killed run is removed on entry, or named if it still has members.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

V1_CPU: Final = Path("/sys/fs/cgroup/cpu")
V2: Final = Path("/sys/fs/cgroup")
NAME: Final = "rcp-bench-shared"


class CgroupUnavailable(RuntimeError):
    """No cpu cgroup can be made or left here; the message says why."""


@contextmanager
def shared_cpu_group() -> Iterator[Path]:
    """Move this process into a new cpu cgroup until the ``with`` ends; yields it."""
    root = cpu_hierarchy()
    home = root / _membership(root).lstrip("/")
    group = root / NAME
    try:
        if group.exists():
            group.rmdir()
        group.mkdir()
    except OSError as e:
        raise CgroupUnavailable(f"cannot make the cpu cgroup {group}: {e}") from e
    try:
        _join(group)
        try:
            yield group
        finally:
            _join(home)
    finally:
        try:
            group.rmdir()
        except OSError as e:
            raise CgroupUnavailable(f"cannot remove the cpu cgroup {group}: {e}") from e


def cpu_hierarchy() -> Path:
    """The root of a cgroup hierarchy with the cpu controller (v1, else v2)."""
    if (V1_CPU / "cgroup.procs").exists():
        return V1_CPU
    controllers = V2 / "cgroup.controllers"
    subtree = V2 / "cgroup.subtree_control"
    if controllers.exists() and "cpu" in subtree.read_text().split():
        return V2
    raise CgroupUnavailable(
        f"no cgroup hierarchy with the cpu controller: no {V1_CPU}, and {V2} does not "
        f"enable it for its children (echo +cpu > {subtree})"
    )


def _membership(root: Path) -> str:
    """This process's cgroup path in the hierarchy mounted at ``root``."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if root == V2 and controllers == "":
            return path
        if root == V1_CPU and "cpu" in controllers.split(","):
            return path
    raise CgroupUnavailable(f"this process is in no cgroup of {root}")


def _join(group: Path) -> None:
    """Move this process (all its threads) into ``group``."""
    try:
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError as e:
        raise CgroupUnavailable(f"cannot move this process into {group}: {e}") from e
