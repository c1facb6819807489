"""Airflow's ``filesystems`` entry for the ``rcp`` scheme: ObjectStoragePath("rcp://...").

Airflow imports this module for the scheme it lists (``schemes``) and calls
:func:`get_fs` with the path's connection id and storage options. The filesystem is
:class:`rcp_provider.filesystem.RcpFileSystem`, so ``ObjectStoragePath.copy`` between
``rcp`` paths (and ``put``/``get`` between ``rcp`` and ``file``) runs the engine: in
parallel, keeping modes and times. A connection without a host is the worker's own
storage and gives its ``max_workers`` extra as the default; a connection to an
``rcpd serve`` service is refused for now (the remote form of the filesystem is not
built yet), never silently read as a local path.
"""

from __future__ import annotations

from typing import Any

from rcp_core.errors import UsageError
from rcp_provider.filesystem import RcpFileSystem

schemes = ["rcp"]


def get_fs(
    conn_id: str | None, storage_options: dict[str, Any] | None = None
) -> RcpFileSystem:
    """The ``rcp`` filesystem for ``conn_id`` (``None``: defaults)."""
    options = dict(storage_options or {})
    if conn_id is not None:
        from rcp_provider.hook import RcpHook

        hook = RcpHook(conn_id)
        if hook.endpoint is not None:
            raise UsageError(
                f"connection {conn_id!r} is an rcpd serve service; rcp:// paths on a "
                "service are not served by this filesystem yet (local paths only)"
            )
        if hook.max_workers is not None:
            options.setdefault("max_workers", hook.max_workers)
    return RcpFileSystem(**options)
