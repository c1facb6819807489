"""Assets on an ``rcpd serve`` service: ``rcp://host:port/path``.

The provider info's ``asset-uris`` entry for the scheme ``rcp`` names these three
functions, as Airflow's own providers do for theirs: :func:`sanitize_uri` normalises
an asset's URI when Airflow makes it (lower-case host, the service's default port
written out, the path normalised without a trailing ``/``), so two spellings of one
tree are one asset; :func:`create_asset` makes one; :func:`convert_asset_to_openlineage`
names it as :mod:`rcp_operators.lineage` names a service's tree (namespace
``rcp://host:port``, the path as name), so an asset and a task's lineage meet.

Invariants: a URI without a host or an absolute path is refused (``ValueError``, as
Airflow's handlers refuse); no credentials are ever part of an asset's URI (a user
or password in it is refused).
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, urlsplit

from rcp_core.remote import SERVICE_PORT

if TYPE_CHECKING:
    from airflow.sdk import Asset
    from openlineage.client.event_v2 import Dataset


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """``uri`` normalised (module docstring).

    :raises ValueError: no host, no absolute path, credentials, or a bad port.
    """
    if uri.username is not None or uri.password is not None:
        raise ValueError("an rcp asset's URI must not carry credentials")
    if not uri.hostname:
        raise ValueError("an rcp asset's URI names its service: rcp://host[:port]/path")
    if not uri.path.startswith("/"):
        raise ValueError("an rcp asset's URI has an absolute path: rcp://host/path")
    port = uri.port or SERVICE_PORT  # a bad port raises ValueError here
    host = uri.hostname if ":" not in uri.hostname else f"[{uri.hostname}]"
    path = posixpath.normpath(uri.path)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    return uri._replace(netloc=f"{host}:{port}", path=path, fragment="")


def create_asset(
    *,
    host: str,
    path: str,
    port: int = SERVICE_PORT,
    extra: dict[str, Any] | None = None,
) -> Asset:
    """The asset of the tree ``path`` on the service at ``host``:``port``."""
    from airflow.sdk import Asset

    return Asset(uri=f"rcp://{host}:{port}{path}", extra=extra)


def convert_asset_to_openlineage(asset: Asset, lineage_context: Any) -> Dataset:
    """The OpenLineage dataset of an ``rcp`` asset: namespace ``rcp://host:port``,
    name its path."""
    from openlineage.client.event_v2 import Dataset

    parts = sanitize_uri(urlsplit(asset.uri))
    return Dataset(namespace=f"rcp://{parts.netloc}", name=parts.path)
