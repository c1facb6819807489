"""What Airflow's lineage calls a tree rcp reads or writes: OpenLineage datasets and
Airflow assets, named alike for operators (:mod:`rcp_operators.lineage`) and for the
hook, which tells Airflow's hook lineage collector what it read and wrote (so a task
that calls :class:`~rcp_provider.hooks.rcp.RcpHook` directly has lineage too).

Datasets are named as OpenLineage's naming spec names storage (namespace, name):

=================================== =========================================== ========
operand                             namespace                                   name
=================================== =========================================== ========
a path on the worker, ``file:///p`` ``file://{the worker's host name}``         the path
``host:/path`` (over SSH)           ``file://{host}``                           ``/path``
a path on an ``rcpd serve``         ``rcp://{host}:{port}``                     the path
``s3://bucket/key``                 ``s3://bucket``                             ``key``
``gs://bucket/key``                 ``gs://bucket``                             ``key``
``abfs[s]://c@{account}.dfs.{sfx}`` ``abfss://c@{account}.dfs.{sfx}``           ``key``
``az://c/key`` (no account)         ``az://c``                                  ``key``
``rcp://host[:port]/path``          ``rcp://host:port`` (port 7450 unsaid)      ``/path``
any other ``scheme://authority``    ``scheme://authority``                      the path
=================================== =========================================== ========

A path on the worker is the same dataset however it is spelt: a path (made absolute)
or a ``file:`` URL without a host (or with ``localhost``). An Azure URL is adlfs's
(``az``, ``abfs``, ``abfss``: one storage, whatever the spelling): where it names
its account (``container@account.dfs.core.windows.net``, or the account's
``blob`` endpoint), it is named as the spec names ADLS Gen2, ``abfss`` at the
account's ``dfs`` endpoint; adlfs's short form ``scheme://container/key`` names no
account (the filesystem's configuration or connection gives it), and no account is
guessed: it is ``az://container``, a namespace the spec never gives, so it never
passes for another account's.

Assets are ``file:///path`` (Airflow's ``file`` scheme) on the worker,
``file://host/path`` over SSH, ``rcp://host:port/path`` on a service
(:mod:`rcp_provider.assets.rcp`), a store's URL as it is (an Azure URL's container
kept). An ``ObjectStoragePath`` is named by its URL without its connection id.
Invariant: a name never carries credentials or a connection id (the user part of an
Azure URL is its container, never a credential); nothing here imports Airflow or
OpenLineage until asked.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, urlsplit

from rcp_core.backends.operands import parse_operand, split_url
from rcp_core.remote import SERVICE_PORT

if TYPE_CHECKING:
    from openlineage.client.event_v2 import Dataset

    from rcp_provider.hooks.endpoint import Endpoint


SCHEMES = {"s3a": "s3", "gcs": "gs"}
"""URL schemes named by another in OpenLineage's spec."""
AZURE = frozenset({"az", "abfs", "abfss"})
"""adlfs's schemes (one storage, whatever the spelling); the user part of their
authority is the container."""
KEYED = frozenset({"s3", "gs"}) | AZURE
"""Stores whose dataset names are keys (no leading ``/``)."""
_ACCOUNT = re.compile(r"(?P<account>[^.]+)\.(?:dfs|blob)\.(?P<suffix>.+)")
"""An Azure storage account's host: its ``dfs`` or ``blob`` endpoint."""


def dataset_name(operand: Any, conn_id: str | None) -> tuple[str, str]:
    """The (namespace, name) OpenLineage calls ``operand``, a path, URL or
    ``ObjectStoragePath`` on the side of connection ``conn_id`` (module table)."""
    text = _url_of(operand)
    if split_url(text) is not None:
        parts = urlsplit(text)
        scheme = SCHEMES.get(parts.scheme, parts.scheme)
        if _here(scheme, parts.hostname):  # file:///path, rcp:///path: this host's
            return dataset_name(parts.path or "/", None)
        path = parts.path.rstrip("/") or "/"
        if scheme in KEYED:
            path = path.lstrip("/") or "/"
        if scheme in AZURE:
            return _azure_namespace(parts), path
        netloc = _authority(parts, SERVICE_PORT if scheme == "rcp" else None)
        return f"{scheme}://{netloc}", path
    remote = parse_operand(text)
    if remote is not None:
        return f"file://{remote.host}", _clean(remote.path)
    from rcp_provider.hooks.rcp import RcpHook

    endpoint = RcpHook(conn_id).endpoint if conn_id is not None else None
    if endpoint is not None:
        return f"rcp://{endpoint.host}:{endpoint.port}", _clean(text)
    return f"file://{socket.gethostname()}", _clean(os.path.abspath(text))


def asset_uri(operand: Any, conn_id: str | None) -> str | None:
    """The URI of the asset ``operand`` (on the side of connection ``conn_id``) is,
    where it is known before the task runs: a path on the worker ``file:///path``
    (Airflow's ``file`` assets; so is a URL naming one: ``file:///path``,
    ``rcp:///path``), ``host:/path`` ``file://host/path``, a URL (an
    ``ObjectStoragePath``'s without its connection) as it is; ``None`` for a
    templated operand (known only when rendered) and for a path on a connection's
    place (a service: which one is known only from the connection)."""
    text = _url_of(operand)
    if "{{" in text or "{%" in text:
        return None
    if split_url(text) is not None:
        parts = urlsplit(text)
        if _here(parts.scheme, parts.hostname):  # the worker's path, as a URL
            if parts.scheme == "rcp" and conn_id is not None:
                return None  # the connection's place
            return f"file://{_clean(parts.path)}"
        path = parts.path.rstrip("/") if parts.path.strip("/") else parts.path
        netloc = _authority(parts, None, container=parts.scheme in AZURE)
        return parts._replace(netloc=netloc, path=path).geturl()
    if conn_id is not None:
        return None
    remote = parse_operand(text)
    if remote is not None:
        return f"file://{remote.host}{_clean(remote.path)}"
    return f"file://{_clean(os.path.abspath(text))}"


def _here(scheme: str, host: str | None) -> bool:
    """Whether a URL of ``scheme`` on ``host`` names this host's tree: ``file:``
    without a host or with ``localhost`` (RFC 8089), ``rcp:`` without a host."""
    if scheme == "file":
        return host in (None, "localhost")
    return scheme == "rcp" and not host


def _azure_namespace(parts: SplitResult) -> str:
    """The namespace of an Azure URL (module docstring): ``abfss://container@
    {account}.dfs.{suffix}`` where its authority names the container and account,
    ``az://container`` for adlfs's short form, which names no account."""
    netloc = _authority(parts, None)
    if parts.username is None:
        return f"az://{netloc}"
    account = _ACCOUNT.fullmatch(netloc)
    if account is not None:
        netloc = f"{account['account']}.dfs.{account['suffix']}"
    return f"abfss://{parts.username}@{netloc}"


def _authority(
    parts: SplitResult, default_port: int | None, *, container: bool = False
) -> str:
    """A URL's host and port (``default_port`` where it has none), never its
    password, nor its user unless that is an Azure ``container``'s name."""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = parts.port or default_port
    netloc = host if port is None else f"{host}:{port}"
    if container and parts.username is not None:
        return f"{parts.username}@{netloc}"
    return netloc


def _url_of(operand: Any) -> str:
    """``operand`` as text; an ``ObjectStoragePath`` as its URL without its
    connection id (``s3://conn@bucket/key`` names ``s3://bucket/key``)."""
    protocol = getattr(operand, "protocol", None)
    if protocol and hasattr(operand, "bucket") and hasattr(operand, "key"):
        return f"{protocol}://{operand.bucket}/{operand.key}"
    return os.fspath(operand) if isinstance(operand, os.PathLike) else str(operand)


def _clean(path: str) -> str:
    return os.path.normpath(path) if path else "/"


def datasets(operands: Sequence[Any], conn_id: str | None) -> list[Dataset]:
    """Each of ``operands`` (on the side of ``conn_id``) as an OpenLineage dataset."""
    from openlineage.client.event_v2 import Dataset

    return [Dataset(*dataset_name(operand, conn_id)) for operand in operands]


def service_asset_uri(path: str, endpoint: Endpoint) -> str:
    """The asset URI of ``path`` on the service at ``endpoint``."""
    return f"rcp://{endpoint.host}:{endpoint.port}{_clean(path)}"


def collect(
    hook: Any,
    read: Sequence[tuple[str, Endpoint | None]],
    written: Sequence[tuple[str, Endpoint | None]],
) -> None:
    """Tell Airflow's hook lineage collector the trees ``hook`` read and wrote, each
    an operand and the service it is on (``None``: the worker's side or a URL)."""
    from airflow.sdk.lineage import get_hook_lineage_collector

    collector = get_hook_lineage_collector()
    for operands, add in (
        (read, collector.add_input_asset),
        (written, collector.add_output_asset),
    ):
        for operand, endpoint in operands:
            uri = (
                asset_uri(operand, None)
                if endpoint is None or split_url(operand) is not None
                else service_asset_uri(operand, endpoint)
            )
            if uri is not None:
                add(context=hook, uri=uri)
