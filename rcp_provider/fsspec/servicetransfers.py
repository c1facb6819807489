"""Bulk transfers of the ``rcp`` filesystem's service form: ``copy``, ``put`` and ``get``.

fsspec's plan (:mod:`rcp_provider.fsspec.plan`) becomes copies by ``rcp``'s operand
rules (:func:`steps`), each the service's own copy, in parallel and keeping modes and
times:

- ``copy`` within the service is one of its jobs per group of pairs
  (:func:`run_jobs`): the bytes never leave the service's host;
- ``put`` and ``get`` run :func:`~rcp_core.remote.servicemaster.service_copy`, this
  process sending or receiving, the data flowing between it and the service directly;
- with a ``callback=``, ``put`` and ``get`` go file by file (fsspec's loop), so the
  callback gets a child per file with its bytes as they move.

**fsspec decides what is copied where** (the same plan as the local form's), and a
directory goes to one job whole only where fsspec copies it whole; parents of what is
written are made as needed (as an object store has them), directories of a plan that
is not whole are made as fsspec's ``cp_file`` makes them.
"""

from __future__ import annotations

import os
import posixpath
import resource
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from fsspec.implementations.local import LocalFileSystem
from fsspec.spec import AbstractFileSystem

from rcp_core.errors import JobFailedError
from rcp_core.remote.client import FINISHED
from rcp_core.run.summary import Resources
from rcp_provider.fsspec.base import Kind, Transfer
from rcp_provider.fsspec.plan import Plan, plan_transfer, whole_roots

if TYPE_CHECKING:
    from rcp_provider.fsspec.service import RcpServiceFileSystem

JOB_WAIT = 30.0
"""Seconds one wait for a job asks the service to hold its answer."""

Step = tuple[list[str], str]
"""One copy by ``rcp``'s operand rules: sources, destination."""


def bulk(fs: RcpServiceFileSystem, transfer: Transfer) -> None:
    """A copy as the service's jobs (the bytes stay on its host); a ``put`` or
    ``get`` as transfers between this process and the service, the data going
    directly (with a callback: file by file, fsspec's loop). Unless ``on_error``
    is ``"raise"``, a source that matches nothing copies nothing."""
    if transfer.counted:
        loop = (
            AbstractFileSystem.put
            if transfer.kind is Kind.PUT
            else AbstractFileSystem.get
        )
        loop(
            fs,
            transfer.source,
            transfer.destination,
            transfer.recursive,
            transfer.callback,
            transfer.maxdepth,
            **transfer.options,
        )
        return
    local = LocalFileSystem()
    source, destination = {
        Kind.COPY: (fs, fs),
        Kind.PUT: (local, fs),
        Kind.GET: (fs, local),
    }[transfer.kind]
    try:
        planned = plan_transfer(
            source,
            destination,
            transfer.source,
            transfer.destination,
            transfer.recursive,
            transfer.maxdepth,
            contained=transfer.contained,
        )
    except FileNotFoundError:
        if transfer.on_error == "raise":
            raise
        return
    if planned is None:
        return
    copies = steps(
        planned,
        os.path.isdir if source is local else fs.isdir,
        _local_makedirs if destination is local else fs._ensure_dir,
    )
    if transfer.kind is Kind.COPY:
        run_jobs(fs, copies)
        return
    for sources, to in copies:
        _transfer(fs, sources, to, to_service=transfer.kind is Kind.PUT)


def steps(
    planned: Plan,
    source_isdir: Callable[[str], bool],
    ensure_dir: Callable[[str], None],
) -> list[Step]:
    """The plan as copies by ``rcp``'s operand rules: a whole tree as one; the
    files that keep their names in one directory together (``destination/``);
    other files one each. Directories of a plan that is not whole
    (``source_isdir`` tells them) and the parents of every destination are made
    first, by ``ensure_dir`` of the destination's side."""
    pairs = whole_roots(planned.pairs) if planned.whole else None
    if pairs is None:
        pairs = []
        for src, dst in planned.pairs:
            if source_isdir(src):
                ensure_dir(dst)
            else:
                pairs.append((src, dst))
    copies: list[Step] = []
    together: dict[str, list[str]] = {}
    for src, dst in pairs:
        parent, name = posixpath.split(dst)
        if parent not in together:
            ensure_dir(parent or "/")
            together[parent] = []
        if posixpath.basename(src) == name:
            together[parent].append(src)
        else:
            copies.append(([src], dst))
    for parent, sources in together.items():
        names = {posixpath.basename(src) for src in sources}
        if len(sources) > 1 and len(names) == len(sources):
            copies.append((sources, parent.rstrip("/") + "/"))
        else:
            copies.extend(
                ([src], posixpath.join(parent, posixpath.basename(src)))
                for src in sources
            )
    return copies


def run_jobs(fs: RcpServiceFileSystem, copies: list[Step]) -> None:
    """Run each copy as a job of ``fs``'s service, one after another.

    :raises JobFailedError: a job failed or was cancelled.
    """
    for sources, destination in copies:
        job = fs.client.submit(sources, destination, fs.settings)
        while job["state"] not in FINISHED:
            job = fs.client.wait(job["job"], JOB_WAIT)
        if job["state"] != "succeeded":
            raise JobFailedError(job)


def _transfer(
    fs: RcpServiceFileSystem, sources: list[str], destination: str, *, to_service: bool
) -> None:
    """One copy between this host and ``fs``'s service, the data going directly.

    :raises CopyFailedError: something was not copied (its summary tells what).
    """
    from rcp_core.remote.outcome import between_summary
    from rcp_core.remote.servicemaster import service_copy

    started, usage = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    source, received = service_copy(
        sources,
        destination,
        fs.settings,
        source_service=None if to_service else fs.client,
        destination_service=fs.client if to_service else None,
        timeout=fs.timeout,
    )
    between_summary(source, received, Resources.since(started, usage))


def _local_makedirs(path: str) -> None:
    os.makedirs(path, exist_ok=True)
