"""OpenLineage for rcp's operators: the trees a task read and wrote as datasets,
its summary as a run facet.

Airflow's OpenLineage provider asks an operator for
``get_openlineage_facets_on_start()`` before it runs and
``get_openlineage_facets_on_complete(task_instance)`` after; :class:`Lineage`
answers both for an operator that says which operands it reads and writes
(:meth:`Lineage.lineage_sides`) and keeps its summary (``lineage_summary``).

Datasets are named as OpenLineage's naming spec names storage (namespace, name):

================================ ====================================== ==============
operand                          namespace                              name
================================ ====================================== ==============
a path on the worker             ``file://{the worker's host name}``    the absolute path
``host:/path`` (over SSH)        ``file://{host}``                      ``/path``
a path on an ``rcpd serve``      ``rcp://{host}:{port}``                the path
``s3://bucket/key``              ``s3://bucket``                        ``key``
``gs://bucket/key``              ``gs://bucket``                        ``key``
``rcp://host[:port]/path``       ``rcp://host:port`` (port 7450 unsaid)  ``/path``
any other ``scheme://authority`` ``scheme://authority``                 the path
================================ ====================================== ==============

An ``ObjectStoragePath`` is named by its URL without its connection id. The run facet
``rcp`` (:func:`run_facet`) holds files, bytes, errors and the verification's
outcome. Invariants: nothing here is imported unless the OpenLineage provider asks
(the provider is optional); a name never carries credentials or a connection id.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from rcp_core.backends.operands import parse_operand, split_url
from rcp_core.remote import SERVICE_PORT
from rcp_provider.hooks.rcp import RcpHook

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset

Sides = list[tuple[Sequence[Any], str | None]]
"""Operands and the connection of their side, for :meth:`Lineage.lineage_sides`."""
SCHEMES = {"s3a": "s3", "gcs": "gs"}
"""URL schemes named by another in OpenLineage's spec."""
FACET = "rcp"
"""The run facet's key."""


def dataset_name(operand: Any, conn_id: str | None) -> tuple[str, str]:
    """The (namespace, name) OpenLineage calls ``operand``, a path, URL or
    ``ObjectStoragePath`` on the side of connection ``conn_id`` (module table)."""
    text = _url_of(operand)
    if split_url(text) is not None:
        parts = urlsplit(text)
        scheme = SCHEMES.get(parts.scheme, parts.scheme)
        netloc = parts.hostname or ""
        if scheme == "rcp" and not netloc:  # rcp:///path: this host's tree
            return dataset_name(parts.path, None)
        if parts.port is not None or scheme == "rcp":
            netloc = f"{netloc}:{parts.port or SERVICE_PORT}"
        path = parts.path.rstrip("/") or "/"
        if scheme in ("s3", "gs"):
            path = path.lstrip("/") or "/"
        return f"{scheme}://{netloc}", path
    remote = parse_operand(text)
    if remote is not None:
        return f"file://{remote.host}", _clean(remote.path)
    endpoint = RcpHook(conn_id).endpoint if conn_id is not None else None
    if endpoint is not None:
        return f"rcp://{endpoint.host}:{endpoint.port}", _clean(text)
    return f"file://{socket.gethostname()}", _clean(os.path.abspath(text))


def asset_uri(operand: Any, conn_id: str | None) -> str | None:
    """The URI of the asset ``operand`` (on the side of connection ``conn_id``) is,
    where it is known before the task runs: a path on the worker ``file:///path``
    (Airflow's ``file`` assets), ``host:/path`` ``file://host/path``, a URL (an
    ``ObjectStoragePath``'s without its connection) as it is; ``None`` for a
    templated operand (known only when rendered) and for a path on a connection's
    place (a service: which one is known only from the connection)."""
    text = _url_of(operand)
    if "{{" in text or "{%" in text:
        return None
    if split_url(text) is not None:
        return text.rstrip("/") if urlsplit(text).path.strip("/") else text
    if conn_id is not None:
        return None
    remote = parse_operand(text)
    if remote is not None:
        return f"file://{remote.host}{_clean(remote.path)}"
    return f"file://{_clean(os.path.abspath(text))}"


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


SCHEMA = "urn:rcp:openlineage:RcpRunFacet:1"
"""The run facet's schema identifier (its fields are :func:`run_facet`'s)."""


@functools.cache
def _facet_class() -> type[Any]:
    """The run facet's class, made once the OpenLineage client is imported."""
    from attrs import define
    from openlineage.client.generated.base import RunFacet

    @define
    class RcpRunFacet(RunFacet):
        """What an rcp operation did: the files and bytes it copied (removed,
        linked, or compared: ``files``), its errors (a comparison's differences),
        and the verification's outcome (``same``, ``different``, or ``None``)."""

        operation: str
        files: int
        bytes: int
        errors: int
        verified: str | None

        @staticmethod
        def _get_schema() -> str:
            return SCHEMA

    return RcpRunFacet


def run_facet(operation: str, summary: dict[str, Any]) -> Any:
    """The run facet of ``operation``'s summary (a copy's or a link's ``copied``,
    a removal's ``removed``, a comparison's ``entries`` and ``same``)."""
    moved = summary.get("copied") or summary.get("removed") or {}
    verified = summary.get("verify")
    if "same" in summary:
        verified = "same" if summary["same"] else "different"
    elif isinstance(verified, dict):
        verified = "same" if verified.get("same", True) else "different"
    return _facet_class()(
        operation=operation,
        files=int(moved.get("files", summary.get("entries", 0))),
        bytes=int(moved.get("bytes", 0)),
        errors=int(summary.get("errors", summary.get("differences_total", 0))),
        verified=verified,
    )


class Lineage:
    """An operator's OpenLineage answers, from what it reads and writes.

    A subclass names its ``lineage_operation``, gives :meth:`lineage_sides`, and
    sets ``lineage_summary`` when it has run.
    """

    lineage_operation = ""
    lineage_summary: dict[str, Any] | None = None

    def lineage_sides(self) -> tuple[Sides, Sides]:
        """(inputs, outputs): each a list of (operands, their side's connection)."""
        raise NotImplementedError

    def get_openlineage_facets_on_start(self) -> OperatorLineage[Dataset, Any]:
        from airflow.providers.openlineage.extractors import OperatorLineage

        inputs, outputs = self.lineage_sides()
        return OperatorLineage(
            inputs=[d for operands, conn in inputs for d in datasets(operands, conn)],
            outputs=[d for operands, conn in outputs for d in datasets(operands, conn)],
        )

    def get_openlineage_facets_on_complete(
        self, task_instance: Any
    ) -> OperatorLineage[Dataset, Any]:
        lineage = self.get_openlineage_facets_on_start()
        if self.lineage_summary is not None:
            facet = run_facet(self.lineage_operation, self.lineage_summary)
            lineage.run_facets = {FACET: facet}
        return lineage
