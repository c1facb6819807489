"""``RcpHook``: an Airflow connection of type ``rcp``, and the one place that starts work.

A hook stands for one *place* where trees live:

- no connection (``rcp_conn_id=None``), or an ``rcp`` connection without a host: the
  storage the worker itself sees (its paths, and URLs of any store fsspec or a site's
  backend reaches). Copies run in the worker's process through the engine.
- an ``rcp`` connection with a host: an ``rcpd serve`` service there
  (:mod:`rcp_provider.hooks.endpoint` reads its fields). Paths are the service
  host's, confined to its roots.
- a connection of another type (``aws``, ``google_cloud_platform``, ``wasb``, ...):
  a store reached with Airflow's own credentials (:attr:`RcpHook.store_conn_id`);
  its URLs are copied on the worker, each on the filesystem Airflow attaches for the
  connection (:mod:`rcp_provider.hooks.objectstorage`).

:meth:`RcpHook.copy` copies from this place to another (or within it): locally with
the engine, as one job of the service when both sides are on the same service (the
bytes never pass through the worker), or host to host through
:func:`rcp_core.remote.servicemaster.service_copy` otherwise. Jobs of a service are
submitted under a key the caller chooses (:meth:`RcpHook.find`), which is how a
retried task finds a copy its earlier try started instead of starting a second one.
A copy between two places stops with the task's process (the services see their peer
go); ``cancel`` stops local copies and service jobs.

Shard plans, shards, removal, comparison and verification run on the worker's own
storage: :class:`~rcp_provider.hooks.workerstorage.WorkerStorage`, a base of the hook.

Connection fields are read when the hook first needs them; a wrong one is a
:class:`rcp_core.errors.UsageError` naming the connection.

Over 400 lines because the hook is the one place work starts (a copy here, as a
service's job, between two places, a deferred one's jobs), and the rules they share
(outcome, lineage, keys) would be spread over modules that each need the others.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook, Connection
from airflow.sdk.exceptions import AirflowNotFoundException

from rcp_core import CopySettings, UsageError
from rcp_core import copy as engine_copy
from rcp_core.backends import routing
from rcp_core.backends.routing import Engine, refuse_route
from rcp_core.errors import RemoteFileNotFoundError, TokenRefusedError
from rcp_core.remote.client import FINISHED, ServiceClient
from rcp_core.remote.outcome import between_summary, job_summary
from rcp_core.run.progress import Progress
from rcp_core.run.summary import Resources, merge
from rcp_provider import ports
from rcp_provider.hooks.endpoint import Endpoint, endpoint_of, typed_extras
from rcp_provider.hooks.objectstorage import ConnectedStores
from rcp_provider.hooks.workerstorage import Report, WorkerStorage, relay
from rcp_provider.lineage import collect
from rcp_provider.ports import copy_store

ACTIVE = frozenset({"queued", "running"})
POLL = 2.0
"""Seconds a blocking wait for a service's job asks the service to hold each answer."""


class RcpHook(WorkerStorage, BaseHook):
    """One place trees live: the worker's storage, or an ``rcpd serve`` service.

    :param rcp_conn_id: an Airflow connection of type ``rcp``; ``None`` is the
        worker's own storage without one.
    """

    conn_name_attr = "rcp_conn_id"
    default_conn_name = "rcp_default"
    conn_type = "rcp"
    hook_name = "rcp"

    def __init__(self, rcp_conn_id: str | None = default_conn_name) -> None:
        super().__init__()
        self.rcp_conn_id = rcp_conn_id

    @cached_property
    def endpoint(self) -> Endpoint | None:
        """The service this connection points at; ``None`` for the worker itself (a
        store connection's work runs there too)."""
        if self.rcp_conn_id is None or self.store_conn_id is not None:
            return None
        conn = self._connection
        return endpoint_of(
            self._name, conn.host, conn.port, conn.password, self._extras
        )

    @cached_property
    def store_conn_id(self) -> str | None:
        """This connection's id where it is a store's (any type but ``rcp``): the
        credentials its side's URLs are reached with; ``None`` for an ``rcp``
        connection or none."""
        if self.rcp_conn_id is None or self._connection.conn_type == self.conn_type:
            return None
        return self.rcp_conn_id

    @cached_property
    def max_workers(self) -> int | None:
        """The connection's ``max_workers`` extra: the default for local copies."""
        if self.rcp_conn_id is None or self.store_conn_id is not None:
            return None
        workers: int | None = self._extras["max_workers"]
        return workers

    @property
    def _name(self) -> str:
        return f"connection {self.rcp_conn_id!r}"

    @cached_property
    def _extras(self) -> dict[str, Any]:
        """The connection's extras, each as its form field's type
        (:func:`rcp_provider.hooks.endpoint.typed_extras`)."""
        return typed_extras(self._name, self._connection.extra_dejson)

    @cached_property
    def _connection(self) -> Connection:
        """The Airflow connection named ``rcp_conn_id`` (which must not be ``None``).

        :raises UsageError: no connection has that name (a retry would not help
            until someone defines it).
        """
        assert self.rcp_conn_id is not None
        try:
            return self.get_connection(self.rcp_conn_id)
        except AirflowNotFoundException as exc:
            raise UsageError(
                f"no Airflow connection {self.rcp_conn_id!r} is defined"
            ) from exc

    def same_place(self, other: RcpHook) -> bool:
        return self.endpoint == other.endpoint

    # -- copies ----------------------------------------------------------------------

    def copy(
        self,
        sources: Sequence[str],
        destination: str,
        settings: CopySettings,
        *,
        to: RcpHook | None = None,
        key: str | None = None,
        on_progress: Report | None = None,
        cancel: threading.Event | None = None,
        stores: ConnectedStores | None = None,
    ) -> dict[str, Any]:
        """Copy ``sources`` (here) to ``destination`` (at ``to``, by default here)
        by ``rcp``'s operand rules; the run's JSON summary. On the worker, a URL
        operand is copied through the generic engine
        (:func:`rcp_provider.ports.copy_store`), reached through its store
        connection where ``stores`` has one for it
        (:func:`rcp_provider.hooks.objectstorage.stores_of`). Once it copied them,
        Airflow's hook lineage is told of the trees it read and wrote
        (:func:`rcp_provider.lineage.collect`; not for a dry run).

        Every way of copying ends by the engine's rule
        (:mod:`rcp_core.remote.outcome`): the summary when nothing failed, else
        :class:`~rcp_core.errors.CopyFailedError` with the partial summary and the
        errors, whether the copy ran here, as a service's job or between two places.

        :param key: names a service job (see :meth:`find`).
        :param cancel: set it to stop the copy (the service's job is cancelled).
        :raises UsageError: bad operands or settings, or a refused path.
        :raises CopyFailedError: some entries were not copied, or the copy was
            stopped.
        :raises RemoteError: a service failed, or its job did before it copied.
        """
        to = to or self
        here, there = self.endpoint, to.endpoint
        if stores and (here is not None or there is not None):
            raise UsageError(
                "a store connection's URLs are copied on the worker: the other side "
                "must be the worker's storage or a store connection, not a service"
            )
        summary: dict[str, Any]
        if here is None and there is None:
            if settings.max_workers is None and self.max_workers is not None:
                settings = replace(settings, max_workers=self.max_workers)
            route = routing.route([*sources, destination])
            if route.engine is Engine.STORE:
                refuse_route(route)
                summary = copy_store(
                    route,
                    settings,
                    on_progress=relay(on_progress),
                    cancel=cancel,
                    plugins=[stores] if stores else (),
                ).as_dict()
            else:
                summary = engine_copy(
                    list(sources),
                    destination,
                    settings,
                    on_progress=relay(on_progress),
                    cancel=cancel,
                ).as_dict()
        elif here == there:
            assert here is not None
            with here.client() as client:
                job = self.find(key, client=client) if key else None
                if job is None:
                    job = client.submit(sources, destination, settings, key=key)
                summary = job_summary(self.wait(job, client, on_progress, cancel))
        else:
            summary = self._between(sources, destination, settings, to, on_progress)
        if settings.dry_run is None:
            read = [(source, here) for source in sources]
            collect(self, read, [(destination, there)])
        return summary

    def _between(
        self,
        sources: Sequence[str],
        destination: str,
        settings: CopySettings,
        to: RcpHook,
        on_progress: Report | None,
    ) -> dict[str, Any]:
        """Host to host: the data flows between the two places directly."""
        from rcp_core.remote.servicemaster import service_copy

        started, usage = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
        here, there = self.endpoint, to.endpoint
        timeout = max(e.timeout for e in (here, there) if e is not None)
        source_client = here.client() if here else None
        destination_client = there.client() if there else None
        try:
            source, received = service_copy(
                list(sources),
                destination,
                settings,
                source_service=source_client,
                destination_service=destination_client,
                timeout=timeout,
                on_progress=_relay_counts(on_progress, started),
            )
        finally:
            for client in (source_client, destination_client):
                if client is not None:
                    client.close()
        resources = Resources.since(started, usage)
        return between_summary(source, received, resources).as_dict()

    def start_between(
        self,
        sources: Sequence[str],
        destination: str,
        settings: CopySettings,
        *,
        to: RcpHook,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start a copy from this connection's service to ``to``'s and return at
        once: the send job and the receive job
        (:func:`rcp_core.remote.servicemaster.start_between`), which go on without
        this process.

        :raises UsageError: either side is not a service, they are one service (a
            copy job of its own: :meth:`submit`), bad operands or a refused path.
        """
        from rcp_core.remote.servicemaster import start_between

        if self.endpoint is None or to.endpoint is None or self.same_place(to):
            raise UsageError("start_between needs two different services")
        with self.endpoint.client() as here, to.endpoint.client() as there:
            return start_between(
                sources,
                destination,
                settings,
                source_service=here,
                destination_service=there,
            )

    # -- jobs of a service -----------------------------------------------------------

    def client(self) -> ServiceClient:
        """A client of this connection's service (:raises UsageError: there is none)."""
        if self.endpoint is None:
            raise UsageError(
                f"connection {self.rcp_conn_id!r} has no host: it is not a service"
            )
        return self.endpoint.client()

    def submit(
        self,
        sources: Sequence[str],
        destination: str,
        settings: CopySettings,
        *,
        key: str,
    ) -> dict[str, Any]:
        """The job of ``key`` still queued or running, else a new one submitted under
        ``key``."""
        with self.client() as client:
            return self.find(key, client=client) or client.submit(
                sources, destination, settings, key=key
            )

    def find(
        self, key: str, *, client: ServiceClient | None = None
    ) -> dict[str, Any] | None:
        """A queued or running job whose key starts with ``key``'s stem (everything up
        to its last ``:``), so a task's later try finds an earlier try's copy.

        :param client: an open client to ask (left open: the caller goes on with it).
        """
        if client is None:
            with self.client() as own:
                return self.find(key, client=own)
        stem = key.rpartition(":")[0] + ":" if ":" in key else key
        for job in client.jobs():
            if str(job.get("key", "")).startswith(stem) and job["state"] in ACTIVE:
                return job
        return None

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists (a symlink counts, not followed) on this
        connection's place: a service's tree (its ``lstat``), a store's URL (read
        with this store connection's credentials, if it is one), or the worker's
        storage (a path or a URL fsspec reaches).

        :raises UsageError: a path outside a service's roots, or an operand no
            backend reaches.
        """
        if self.endpoint is not None:
            with self.client() as client:
                try:
                    client.stat(path)
                except RemoteFileNotFoundError:
                    return False
                return True
        given = routing.operand(path)
        if given.storage is routing.Storage.LOCAL:
            return os.path.lexists(given.path)
        if self.store_conn_id is not None:
            from airflow.sdk import ObjectStoragePath

            return bool(ObjectStoragePath(path, conn_id=self.store_conn_id).exists())
        return ports.port(given).stat("", follow=False) is not None

    def job(self, job_id: str) -> dict[str, Any]:
        with self.client() as client:
            return client.status(job_id)

    def cancel(self, job_id: str) -> dict[str, Any]:
        with self.client() as client:
            return client.cancel(job_id)

    def wait(
        self,
        job: dict[str, Any],
        client: ServiceClient,
        on_progress: Report | None = None,
        cancel: threading.Event | None = None,
    ) -> dict[str, Any]:
        """Wait for ``job`` to finish, relaying its progress, through a restart of
        its service (:meth:`ServiceClient.wait_through_restarts`); once ``cancel``
        is set, cancel it and wait for it to stop."""
        job_id = job["job"]
        cancelled = False
        while job["state"] not in FINISHED:
            if cancel is not None and cancel.is_set() and not cancelled:
                job, cancelled = client.cancel(job_id), True
                continue
            if on_progress is not None and job.get("progress"):
                on_progress(job["progress"])
            job = client.wait_through_restarts(job_id, POLL)
        return job

    def test_connection(self) -> tuple[bool, str]:
        """What the UI's Test button shows: the service answered, or why not (a
        refused token in words that say which field to correct)."""
        try:
            endpoint = self.endpoint
        except Exception as exc:  # noqa: BLE001 - the UI shows any failure's message
            return False, f"{type(exc).__name__}: {exc}"
        if endpoint is None:
            return True, "copies run on the worker's own storage"
        service = f"rcpd serve at {endpoint.host}:{endpoint.port}"
        try:
            with endpoint.client() as client:
                jobs = client.jobs()
        except Exception as exc:  # noqa: BLE001 - the UI shows any failure's message
            if isinstance(exc, TokenRefusedError):
                return False, (
                    f"{service} refused the token (authentication failed): the "
                    "connection's password must be the service's token "
                    "(rcpd serve --token-file)"
                )
            return False, f"{type(exc).__name__}: {exc}"
        running = sum(job["state"] in ACTIVE for job in jobs)
        return True, f"{service} answered ({running} job(s) queued or running)"


def _relay_counts(
    report: Report | None, started: float
) -> Callable[[dict[str, int]], None] | None:
    """A host-to-host copy reports the destination's counts; brief them like a
    local copy's progress."""
    if report is None:
        return None

    def relay(counts: dict[str, int]) -> None:
        progress = Progress(merge([counts]), time.monotonic() - started, pending=0)
        report(progress.brief())

    return relay
