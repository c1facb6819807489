"""``RcpLinkOperator``: hard-linked snapshots in a task (``rlink`` on the worker).

Thin: the copy engine with a link-dest tree (:attr:`rcp_core.CopySettings.link_dest`)
run by the hook; the copy's JSON summary is the XCom value (``methods.link`` counts
the files that are links to ``src``'s).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context

from rcp_core.schema import BY_NAME, Front, settings_from
from rcp_core.settings import CompareAttr
from rcp_operators.failures import airflow_errors
from rcp_operators.lineage import Lineage, Sides
from rcp_provider.hooks.rcp import RcpHook
from rcp_provider.progress import INTERVAL, ProgressLog


class RcpLinkOperator(BaseOperator, Lineage):
    """Make ``dst`` a snapshot sharing ``src``'s unchanged files.

    ``delete``, ``includes`` and ``excludes`` are templated as the paths are, as
    ``RcpCopyOperator``'s are (their text is parsed as ``rcp`` parses it: a rendered
    ``"False"`` is false).

    :param src: the earlier tree (a snapshot), on the worker's storage.
    :param dst: the new snapshot; refused if it exists, unless ``delete``.
    :param update: the tree ``dst`` is to look like; its files identical in ``src``
        are links to ``src``'s, the rest copies. ``None``: ``dst`` links all of ``src``.
    :param update_compare: what makes a file identical (``size,mtime,mode``).
    :param delete: ``dst`` may exist: make it exactly the new tree.
    :param includes: globs of entries to take (the rest is skipped).
    :param excludes: globs of entries to skip; excludes win.
    :param conn_id: an ``rcp`` connection without a host (``None``: none needed).
    :param progress_interval: seconds between progress lines in the task log.
    """

    template_fields: Sequence[str] = (
        "src",
        "dst",
        "update",
        "delete",
        "includes",
        "excludes",
        "conn_id",
    )
    ui_color = "#f0e4f9"
    lineage_operation = "link"

    def __init__(
        self,
        *,
        src: str,
        dst: str,
        update: str | None = None,
        update_compare: str = "size,mtime,mode",
        delete: bool = False,
        includes: Sequence[str] = (),
        excludes: Sequence[str] = (),
        conn_id: str | None = None,
        progress_interval: float = INTERVAL,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.src = src
        self.dst = dst
        self.update = update
        self.update_compare = update_compare
        self.delete = delete
        self.includes = includes
        self.excludes = excludes
        self.conn_id = conn_id
        self.progress_interval = progress_interval
        self._cancel = threading.Event()

    def execute(self, context: Context) -> dict[str, Any]:
        with airflow_errors(f"snapshot {self.update or self.src} to {self.dst}"):
            delete = BY_NAME["delete"].read(self.delete, Front.OPERATOR)
            settings = settings_from(
                {
                    "existing": "overwrite" if delete else "error",
                    "delete": delete,
                    "includes": self.includes,
                    "excludes": self.excludes,
                },
                Front.OPERATOR,
                link_dest=os.path.abspath(self.src),
                link_compare=CompareAttr.parse(self.update_compare),
            )
            summary = RcpHook(self.conn_id).copy(
                [self.update or self.src],
                self.dst,
                settings,
                on_progress=ProgressLog(self.log, interval=self.progress_interval),
                cancel=self._cancel,
            )
        self.log.info(
            "rlink: %s files linked, %s copied (%s bytes)",
            f"{summary['methods']['link']:,}",
            f"{summary['copied']['files'] - summary['methods']['link']:,}",
            f"{summary['copied']['bytes']:,}",
        )
        self.lineage_summary = summary
        return summary

    def lineage_sides(self) -> tuple[Sides, Sides]:
        """The earlier snapshot (and the tree it is updated from) read; the new
        snapshot written."""
        read = [self.src] if self.update is None else [self.src, self.update]
        return [(read, self.conn_id)], [([self.dst], self.conn_id)]

    def on_kill(self) -> None:
        self._cancel.set()
