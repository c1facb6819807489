"""Airflow's ``filesystems`` entry for the ``rcp`` scheme: ObjectStoragePath("rcp://...").

Airflow imports this module for the scheme it lists (``schemes``) and calls
:func:`get_fs` with the path's connection id and storage options. The filesystem is
the ``rcp`` filesystem, so ``ObjectStoragePath.copy`` between ``rcp`` paths (and
``put``/``get`` between ``rcp`` and ``file``) runs the engine: in parallel, keeping
modes and times.

- A connection without a host is the worker's own storage
  (:class:`rcp_provider.fsspec.local.RcpFileSystem`); its ``max_workers`` extra is the
  default.
- A connection with a host names an ``rcpd serve`` service
  (:mod:`rcp_provider.hooks.endpoint`): the filesystem is its service form
  (:class:`rcp_provider.fsspec.service.RcpServiceFileSystem`), trusting the service as
  the connection says (pinned fingerprint, token, encryption, timeout).

Storage options passed to :func:`get_fs` win over the connection's. Airflow's
``ObjectStoragePath`` attaches its filesystem by scheme and connection alone (its own
storage options, a service's host among them, do not reach here): give a service's
paths their connection.
"""

from __future__ import annotations

from typing import Any

from rcp_provider.fsspec.local import RcpFileSystem

schemes = ["rcp"]


def get_fs(conn_id: str | None, storage_options: dict[str, Any] | None = None) -> Any:
    """The ``rcp`` filesystem for ``conn_id`` (``None``: this host, defaults)."""
    options = dict(storage_options or {})
    if conn_id is not None:
        from rcp_provider.hooks.rcp import RcpHook

        hook = RcpHook(conn_id)
        endpoint = hook.endpoint
        if endpoint is not None:
            from rcp_provider.fsspec.service import RcpServiceFileSystem

            service = {
                "host": endpoint.host,
                "port": endpoint.port,
                "fingerprint": endpoint.fingerprint,
                "token": endpoint.token,
                "encrypt": endpoint.encrypt,
                "timeout": endpoint.timeout,
            }
            return RcpServiceFileSystem(**{**service, **options})
        if hook.max_workers is not None:
            options.setdefault("max_workers", hook.max_workers)
    return RcpFileSystem(**options)
