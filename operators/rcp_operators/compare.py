"""``RcpCompareOperator``: compare two trees in a task (``rcmp`` on the worker).

Thin: the hook runs :func:`rcp_core.tools.verify.compare.compare`; the comparison's JSON
(same or not, counts by kind, the first differences) is the XCom value. With
``fail_on_difference`` (the default) a difference fails the task, its first
differences in the message.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException

from rcp_core.errors import UsageError
from rcp_core.settings import CompareAttr
from rcp_operators.failures import airflow_errors
from rcp_operators.lineage import Lineage, Sides
from rcp_provider.hooks.objectstorage import Operand, stores_of
from rcp_provider.hooks.rcp import RcpHook


class RcpCompareOperator(BaseOperator, Lineage):
    """Compare the tree ``src`` with ``dst`` (its copy).

    :param src: the reference tree: a path of the worker's storage, a URL (any store
        fsspec reaches) or an ``ObjectStoragePath``.
    :param dst: the tree compared with it, the same.
    :param conn_id: an ``rcp`` connection without a host (``None``: none needed).
    :param src_conn_id: the Airflow connection of the store ``src``'s URL names
        (``aws``, ``google_cloud_platform``, ``wasb``, ...: its credentials, as
        :class:`~rcp_operators.copy.RcpCopyOperator` takes them); ``None``: none.
    :param dst_conn_id: the same for ``dst``.
    :param checksum: also compare the contents of regular files (BLAKE3, parallel).
    :param attrs: attributes compared where they apply (``size,mtime,mode``; add
        ``uid,gid``).
    :param fail_on_difference: a difference fails the task (else it only returns).
    """

    template_fields: Sequence[str] = (
        "src",
        "dst",
        "conn_id",
        "src_conn_id",
        "dst_conn_id",
    )
    ui_color = "#e4f9d7"
    lineage_operation = "compare"

    def __init__(
        self,
        *,
        src: Operand,
        dst: Operand,
        conn_id: str | None = None,
        src_conn_id: str | None = None,
        dst_conn_id: str | None = None,
        checksum: bool = True,
        attrs: str = "size,mtime,mode",
        fail_on_difference: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.src = src
        self.dst = dst
        self.conn_id = conn_id
        self.src_conn_id = src_conn_id
        self.dst_conn_id = dst_conn_id
        self.checksum = checksum
        self.attrs = attrs
        self.fail_on_difference = fail_on_difference
        self._cancel = threading.Event()

    def execute(self, context: Context) -> dict[str, Any]:
        with airflow_errors(f"compare {self.src} with {self.dst}"):
            ([src], [dst]), stores = stores_of(
                [
                    ([self.src], _store_conn_id(self.src_conn_id)),
                    ([self.dst], _store_conn_id(self.dst_conn_id)),
                ]
            )
            result = RcpHook(self.conn_id).compare(
                src,
                dst,
                checksum=self.checksum,
                attrs=CompareAttr.parse(self.attrs),
                cancel=self._cancel,
                stores=stores,
            )
        self.lineage_summary = result
        self.log.info(
            "rcmp: %s entries, %s files hashed: %s",
            f"{result['entries']:,}",
            f"{result['files_hashed']:,}",
            "the same" if result["same"] else f"{result['differences_total']} differ",
        )
        if not result["same"] and self.fail_on_difference:
            first = result["differences"][:5]
            raise AirflowFailException(
                f"{self.dst} differs from {self.src}: {result['by_kind']}; "
                f"first differences: {first}"
            )
        return result

    def lineage_sides(self) -> tuple[Sides, Sides]:
        """Both trees read (on their side's store, else on ``conn_id``'s place);
        nothing written."""
        return [
            ([self.src], self.src_conn_id or self.conn_id),
            ([self.dst], self.dst_conn_id or self.conn_id),
        ], []

    def on_kill(self) -> None:
        self._cancel.set()


def _store_conn_id(conn_id: str | None) -> str | None:
    """``conn_id``, which must be a store's connection (a comparison runs on the
    worker: an ``rcp`` connection names no store).

    :raises UsageError: it is an ``rcp`` connection.
    """
    if conn_id is None:
        return None
    store = RcpHook(conn_id).store_conn_id
    if store is None:
        raise UsageError(
            f"connection {conn_id!r} is an rcp connection: a side's connection is "
            "its store's (aws, google_cloud_platform, wasb, ...)"
        )
    return store
