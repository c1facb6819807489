"""Object storage reached through Airflow's connections: operands that are URLs or
``ObjectStoragePath`` objects, on the filesystems Airflow attaches for them.

A side of an operator is reached through an Airflow connection (``src_conn_id``,
``dst_conn_id``, ``conn_id``). An ``rcp`` connection says where the work runs (the
worker, an ``rcpd serve`` service: :class:`~rcp_provider.hooks.rcp.RcpHook`); a
connection of any other type (``aws``, ``google_cloud_platform``, ``wasb``, ...) holds
the credentials of the store its side's URLs name, as common-io's
``FileTransferOperator`` takes them: the filesystem is the one Airflow attaches
(``ObjectStoragePath(url, conn_id=...).fs``: the store's provider's ``get_fs``; for
S3 that ``get_fs`` with storage options), and the work runs on the worker. An
``ObjectStoragePath`` operand carries its own connection. An S3 filesystem made so
holds as many connections as a store copy runs workers at most (its connection's
``config_kwargs`` may say otherwise).

- :func:`stores_of`: each operand with its side's store connection, as the URL text
  the operand rules read (``rcp``'s: a trailing ``/`` copies into) and the
  :class:`ConnectedStores` plugin that reaches it;
- :class:`ConnectedStores`: a backend plugin answering ``rcp_backend_for`` for exactly
  those URLs, with a port on the attached filesystem
  (:func:`rcp_provider.fsspec.storetree.port_of`), registered for one run: the copy,
  its verification and a removal reach each through its connection, and any other URL
  as before (fsspec's configuration, a site's backend).

Invariants: a URL is the operand's own text (a connection's credentials are looked up
by its id, never written into a URL or a log line); an ``rcp://`` ``ObjectStoragePath``
is its URL, host included, or refused when its connection is a service's (a
service's path is never taken for a worker's); a store connection on a side
whose operand is a local path, a ``host:/path`` or a service's ``rcp://`` URL is
refused (:class:`~rcp_core.errors.UsageError`), and so is a scheme no installed
provider gives Airflow a filesystem for, naming what to install.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rcp_core.backends.routing import Storage, operand
from rcp_core.errors import UsageError
from rcp_core.site.hookspecs import hookimpl

if TYPE_CHECKING:
    from rcp_core.backends.port import Port

Operand = Any
"""A path or URL (``str``, ``os.PathLike``), or an ``ObjectStoragePath``."""
PROVIDERS = {
    "s3": "apache-airflow-providers-amazon[s3fs]",
    "gs": "apache-airflow-providers-google",
    "gcs": "apache-airflow-providers-google",
    "az": "apache-airflow-providers-microsoft-azure",
    "abfs": "apache-airflow-providers-microsoft-azure",
    "abfss": "apache-airflow-providers-microsoft-azure",
}
"""The provider that gives Airflow a filesystem for a scheme, for the error that
names it."""


@dataclass(frozen=True, slots=True)
class _Attached:
    """A URL reached through an Airflow connection (``None``: Airflow's default
    filesystem for its scheme, an ``ObjectStoragePath`` made without one)."""

    url: str
    conn_id: str | None


@dataclass(slots=True)
class ConnectedStores:
    """The backend plugin of one run's operands on connections (see the module)."""

    attached: dict[str, _Attached] = field(default_factory=dict)

    @hookimpl
    def rcp_backend_for(self, url: str) -> Port | None:
        """The port of ``url`` on its connection's filesystem, where ``url`` is one
        of this run's operands (as the routing asks: without its trailing ``/``)."""
        found = self.attached.get(url.rstrip("/"))
        return None if found is None else _port(found)

    def __bool__(self) -> bool:
        return bool(self.attached)


def stores_of(
    sides: Sequence[tuple[Sequence[Operand], str | None]],
) -> tuple[list[list[str]], ConnectedStores]:
    """Each side's operands as the text the operand rules read, and the plugin that
    reaches those on a connection: an ``ObjectStoragePath`` by its own (its URL
    keeps no trailing ``/``), a URL by its side's store connection (``None``: no
    store connection on that side).

    :raises UsageError: a store connection on a side whose operand is no URL store.
    """
    stores = ConnectedStores()
    texts: list[list[str]] = []
    for operands, conn_id in sides:
        side: list[str] = []
        for given in operands:
            text, attached = _text(given, conn_id)
            if attached is not None:
                stores.attached[attached.url] = attached
            side.append(text)
        texts.append(side)
    return texts, stores


def _text(given: Operand, conn_id: str | None) -> tuple[str, _Attached | None]:
    if _is_object_storage_path(given):
        if given.protocol == "rcp":
            return _rcp_path(given), None
        url = f"{given.protocol}://{given.path}"
        return url, _Attached(url, given.conn_id)
    text = os.fspath(given)
    if conn_id is None:
        return text, None
    if operand(text).storage is not Storage.STORE:
        raise UsageError(
            f"{text}: connection {conn_id!r} is a store's: its side must be a URL of "
            "that store (s3://bucket/key, gs://..., az://...)"
        )
    return text, _Attached(text.rstrip("/"), conn_id)


def _rcp_path(given: Operand) -> str:
    """An ``rcp://`` ``ObjectStoragePath`` as its URL, when its connection names no
    service: :class:`rcp_provider.fs.path.RcpPath`'s text, ``rcp:///path`` on the
    worker's storage or ``rcp://host:port/path`` (a service's URL operand).

    :raises UsageError: its connection names an ``rcpd serve`` service: the path is
        that service's, which an operator reaches through its side's connection
        (``src_conn_id``/``dst_conn_id``/``conn_id``), never as a worker's path.
    """
    if given.conn_id is not None:
        from rcp_provider.hooks.rcp import RcpHook

        if RcpHook(given.conn_id).endpoint is not None:
            raise UsageError(
                f"rcp://{given.path}: an ObjectStoragePath on the service of connection "
                f"{given.conn_id!r}; give the path {given.path!r} and that connection "
                "as its side's connection (src_conn_id, dst_conn_id or conn_id)"
            )
    return str(given)


def _is_object_storage_path(given: Operand) -> bool:
    """Whether ``given`` is Airflow's ``ObjectStoragePath`` (imported only when
    Airflow is)."""
    try:
        from airflow.sdk import ObjectStoragePath
    except ImportError:  # the engine and tools run without Airflow
        return False
    return isinstance(given, ObjectStoragePath)


def _pool_options(attached: _Attached) -> dict[str, Any]:
    """The storage options of an S3 URL's filesystem: room for
    :data:`~rcp_provider.fsspec.storetree.STORE_CONNECTIONS` in its client's
    connection pool (the amazon provider makes its storage options the client's
    configuration, whose pool holds 10 unless told), unless the connection's own
    ``config_kwargs`` name a number; nothing for another store."""
    from rcp_provider.fsspec import objectmeta
    from rcp_provider.fsspec.storetree import STORE_CONNECTIONS

    if attached.url.partition("://")[0] not in objectmeta.S3:
        return {}
    if attached.conn_id is not None:
        from airflow.sdk import BaseHook

        extra = BaseHook.get_connection(attached.conn_id).extra_dejson
        if "max_pool_connections" in (extra.get("config_kwargs") or {}):
            return {}
    return {"max_pool_connections": STORE_CONNECTIONS}


def _port(attached: _Attached) -> Port:
    """The port of ``attached`` on the filesystem Airflow attaches for it.

    :raises UsageError: no installed provider gives Airflow a filesystem for its
        scheme.
    """
    from airflow.sdk import ObjectStoragePath
    from airflow.sdk.io import get_fs

    from rcp_provider.fsspec.storetree import port_of

    path = ObjectStoragePath(attached.url, conn_id=attached.conn_id)
    options = _pool_options(attached)
    try:
        fs = get_fs(path.protocol, attached.conn_id, options) if options else path.fs
    except ValueError as exc:  # "No filesystem registered for scheme ..."
        scheme = attached.url.partition("://")[0]
        package = PROVIDERS.get(scheme, f"the Airflow provider of {scheme}://")
        raise UsageError(
            f"{attached.url}: Airflow has no filesystem for {scheme}:// "
            f"(install {package})"
        ) from exc
    return port_of(fs, str(path.path))
