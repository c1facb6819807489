"""OpenLineage for rcp's operators: the trees a task read and wrote as datasets,
its summary as a run facet.

Airflow's OpenLineage provider asks an operator for
``get_openlineage_facets_on_start()`` before it runs and
``get_openlineage_facets_on_complete(task_instance)`` after; :class:`Lineage`
answers both for an operator that says which operands it reads and writes
(:meth:`Lineage.lineage_sides`) and keeps its summary (``lineage_summary``). The
datasets are named by :mod:`rcp_provider.lineage` (its table); the run facet ``rcp``
(:func:`run_facet`) holds files, bytes, errors and the verification's outcome.
Invariant: nothing here imports OpenLineage unless the provider asks (it is
optional).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rcp_core.errors import UsageError
from rcp_provider.lineage import asset_uri, datasets

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset

Sides = list[tuple[Sequence[Any], str | None]]
"""Operands and the connection of their side, for :meth:`Lineage.lineage_sides`."""
FACET = "rcp"
"""The run facet's key."""
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


def destination_outlet(
    operator: Any, dst: Any, conn_id: str | None, dst_asset: bool | None, given: Any
) -> None:
    """Declare ``dst`` (on the side of ``conn_id``) as ``operator``'s outlet asset
    where :func:`~rcp_provider.lineage.asset_uri` knows it when the DAG is parsed,
    as ``dst_asset`` asks (``None``: where known and no ``outlets`` are ``given``;
    ``True``: always; ``False``: never).

    :raises UsageError: ``True`` where it is not known, or beside ``outlets``.
    """
    if dst_asset is False:
        return
    if given:
        if dst_asset:
            raise UsageError("dst_asset=True and outlets: give one of them")
        return
    uri = asset_uri(dst, conn_id)
    if uri is not None:
        from airflow.sdk import Asset

        operator.outlets = [Asset(uri)]
    elif dst_asset:
        raise UsageError(
            f"dst_asset: {dst!r} is templated or on a connection's place: give "
            "outlets (rcp_provider.assets.rcp.create_asset for a service)"
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
