"""How much a run may use: open files, workers, and the plugins' view of its storage.

Decided once, before the run starts: the soft RLIMIT_NOFILE is raised to the hard limit,
the descriptor budget caps the workers (each may hold a source and a destination file
plus directories on its path), and the plugins describe each job's storage and choose
the concurrency for the most demanding pair.
"""

from __future__ import annotations

import dataclasses
import os
import resource
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pluggy

from rcp_core.run.tuning import Concurrency
from rcp_core.settings import CopySettings
from rcp_core.site.storage import STORE, StorageInfo

if TYPE_CHECKING:
    from rcp_core.backends.port import Port

OPEN_FILES_CAP = 4096
FDS_PER_WORKER = 4
"""A worker holds a source and a destination file, plus directories on its path."""
FD_RESERVE = 64


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; return the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # keep the soft limit we have
    return soft


def open_files_budget(settings: CopySettings) -> int:
    """Descriptors the run may use: ``--max-open-files``, else 80% of the (raised)
    soft limit, at most ``OPEN_FILES_CAP``."""
    soft = raise_open_files_limit()
    return settings.max_open_files or min(int(soft * 0.8), OPEN_FILES_CAP)


def storage_of(hook: pluggy.HookRelay, path: str, follow: bool = True) -> StorageInfo:
    """Ask the plugins what storage ``path`` is on (opened ``O_PATH``: no I/O)."""
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
    try:
        info: StorageInfo = hook.rcp_detect_storage(path=path, fd=fd)
    finally:
        os.close(fd)
    return info


def port_storage(hook: pluggy.HookRelay, port: Port) -> StorageInfo:
    """The storage behind a backend port's root: a tree of this host's as the
    plugins detect it (a destination not made yet: its nearest existing
    directory's), any other ``store:`` and its scheme (an object store, a service:
    every operation is a request)."""
    local = port.local_path
    if local is None:
        return StorageInfo(STORE + port.backend.name.removesuffix("://"))
    path = os.path.abspath(local)
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    return storage_of(hook, path, follow=False)


def choose_concurrency(
    hook: pluggy.HookRelay,
    storage: Iterable[tuple[StorageInfo, StorageInfo]],
    settings: CopySettings,
    max_open_files: int,
) -> Concurrency:
    """The plugins' choice for the most demanding pair, within the descriptor budget.

    ``--max-workers`` fixes the number of workers (no adaptation, none aside: it is
    then the most files in flight), and ``--max-processes`` the number of processes.
    """
    cpus = len(os.sched_getaffinity(0))
    choices: list[Concurrency] = [
        hook.rcp_choose_concurrency(source=src, destination=dst, cpus=cpus)
        for src, dst in storage
    ]
    chosen = max(choices, key=lambda c: c.initial)
    if settings.max_workers:
        chosen = Concurrency.fixed(
            settings.max_workers, chosen.chunk_size, chosen.processes
        )
    if settings.max_processes:
        chosen = dataclasses.replace(chosen, processes=settings.max_processes)
    budget = max(1, (max_open_files - FD_RESERVE) // FDS_PER_WORKER)
    maximum = min(chosen.maximum, budget)
    return dataclasses.replace(
        chosen,
        initial=min(chosen.initial, budget),
        minimum=min(chosen.minimum, budget),
        maximum=maximum,
        aside=min(chosen.aside, budget - maximum),
    )
