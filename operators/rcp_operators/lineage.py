"""OpenLineage for rcp's operators: the trees a task read and wrote as datasets,
its summary as a run facet.

Airflow's OpenLineage provider asks an operator for
``get_openlineage_facets_on_start()`` before it runs and
``get_openlineage_facets_on_complete(task_instance)`` after; :class:`Lineage`
answers both for an operator that says which operands it reads and writes
(:meth:`Lineage.lineage_sides`) and keeps its summary (``lineage_summary``). The
datasets are named by :mod:`rcp_provider.lineage` (its table); the run facet ``rcp``
(:func:`run_facet`) says what the operation did: its files, bytes and errors (and a
plan's shards) as the one table :data:`DONE` reads them from each operation's
summary, and the verification's outcome. Invariants: every operation has its row in
:data:`DONE`, and a facet is made only from its own row (no count of another block
of the summary); nothing here imports OpenLineage unless the provider asks (it is
optional).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

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


class Done(NamedTuple):
    """Where an operation's summary says what it did, for its run facet: each a key
    of the summary, or of one of its blocks (``copied.files``); ``None``: the
    operation has nothing of the kind (a count of 0; no verification, no shards).
    A verification's key that a summary lacks means none was asked."""

    files: str | None
    bytes: str | None
    errors: str | None
    verified: str | None
    shards: str | None = None


DONE = {
    "copy": Done("copied.files", "copied.bytes", "errors", "verify.same"),
    "link": Done("copied.files", "copied.bytes", "errors", None),
    "remove": Done("removed.files", "removed.bytes", "errors", None),
    "compare": Done("entries", "bytes_hashed", "differences_total", "same"),
    "plan": Done("planned.files", "planned.bytes", None, None, "shards"),
    "finalize": Done(None, None, None, "verify.same"),
}
"""Each operation's :class:`Done`: a copy's and a link's files and bytes copied, a
removal's removed, a comparison's entries compared and bytes hashed (both sides)
with its differences as errors, a plan's files (entries) and bytes planned and its
shards; a finalize copies nothing (it sets its directories' metadata). A failed
verification fails the task, so a finalize has no errors to count."""


@functools.cache
def _facet_class() -> type[Any]:
    """The run facet's class, made once the OpenLineage client is imported."""
    from attrs import define
    from openlineage.client.generated.base import RunFacet

    @define
    class RcpRunFacet(RunFacet):
        """What an rcp operation did (:data:`DONE`): its ``files`` and ``bytes``,
        its ``errors``, the verification's outcome (``same``, ``different``, or
        ``None``: none) and the ``shards`` planned (``None`` but for a plan)."""

        operation: str
        files: int
        bytes: int
        errors: int
        verified: str | None
        shards: int | None

        @staticmethod
        def _get_schema() -> str:
            return SCHEMA

    return RcpRunFacet


def run_facet(operation: str, summary: dict[str, Any]) -> Any:
    """The run facet of ``operation``'s summary, read as its row of :data:`DONE`.

    :raises KeyError: an operation without a row, or a summary without a count its
        row names.
    """
    done = DONE[operation]

    def count(key: str | None) -> int:
        return 0 if key is None else int(_lookup(summary, key))

    try:
        same = None if done.verified is None else _lookup(summary, done.verified)
    except KeyError:  # no verification was asked
        same = None
    return _facet_class()(
        operation=operation,
        files=count(done.files),
        bytes=count(done.bytes),
        errors=count(done.errors),
        verified=None if same is None else "same" if same else "different",
        shards=None if done.shards is None else count(done.shards),
    )


def _lookup(summary: dict[str, Any], key: str) -> Any:
    """``summary``'s value at ``key`` (``block.name``: in the block).

    :raises KeyError: it has none.
    """
    value: Any = summary
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(key)
        value = value[part]
    return value


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

    A subclass names its ``lineage_operation`` (a row of :data:`DONE`), gives
    :meth:`lineage_sides`, and sets ``lineage_summary`` when it has run (a summary
    holding what its row names).
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
