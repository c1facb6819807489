"""``RcpRemoveOperator``: remove trees in parallel in a task (``rrm`` on the worker).

Thin: arguments become :class:`rcp_core.tools.remove.removal.RemoveSettings`, the hook runs
the removal, errors become task outcomes (:mod:`rcp_operators.failures`). It returns (to
XCom) the run's JSON summary.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context

from rcp_core.tools.remove.removal import RemoveSettings
from rcp_operators.failures import airflow_errors
from rcp_operators.lineage import Lineage, Sides
from rcp_provider.hooks.objectstorage import Operand, stores_of
from rcp_provider.hooks.rcp import RcpHook
from rcp_provider.options import globs, parse_time, whole_number
from rcp_provider.progress import INTERVAL, ProgressLog


class RcpRemoveOperator(BaseOperator, Lineage):
    """Remove ``paths`` (files or whole trees) as ``rrm`` does.

    :param paths: a path or several, on the worker's storage, or URLs as ``rrm``
        takes them (``s3://bucket/prefix``, ``rcp://host:port/path``: removed
        through their ports, :func:`rcp_provider.ports.remove`), or
        ``ObjectStoragePath`` objects (each through its own connection).
    :param conn_id: an ``rcp`` connection without a host (``None``: none needed), or
        the Airflow connection of the store the URLs name (``aws``,
        ``google_cloud_platform``, ``wasb``, ...: their credentials).
    :param includes: globs of entries to remove (the rest stays, with its directories).
    :param excludes: globs of entries to keep; excludes win.
    :param modified_before: only entries modified before this time (ISO 8601) or
        older than this age (``30d``, ``12h``); templated, so ``{{ ds }}`` works.
    :param created_before: the same for birth times; an unknown one keeps the entry.
    :param missing_ok: a path that is not there is no error (a retention job
        removing the snapshot of N days ago, which may never have been made).
    :param dry_run: log what would go; remove nothing.
    :param fail_early: stop at the first error.
    :param max_workers: directories emptied at once (default: adaptive).
    :param progress_interval: seconds between progress lines in the task log.
    """

    template_fields: Sequence[str] = (
        "paths",
        "conn_id",
        "includes",
        "excludes",
        "modified_before",
        "created_before",
    )
    ui_color = "#f9d7d7"
    lineage_operation = "remove"

    def __init__(
        self,
        *,
        paths: Operand | Sequence[Operand],
        conn_id: str | None = None,
        includes: Sequence[str] = (),
        excludes: Sequence[str] = (),
        modified_before: str | None = None,
        created_before: str | None = None,
        missing_ok: bool = False,
        dry_run: bool = False,
        fail_early: bool = False,
        max_workers: int | None = None,
        progress_interval: float = INTERVAL,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.paths = paths
        self.conn_id = conn_id
        self.includes = includes
        self.excludes = excludes
        self.modified_before = modified_before
        self.created_before = created_before
        self.missing_ok = missing_ok
        self.dry_run_only = dry_run  # BaseOperator.dry_run is a method
        self.fail_early = fail_early
        self.max_workers = max_workers
        self.progress_interval = progress_interval
        self._cancel = threading.Event()

    def execute(self, context: Context) -> dict[str, Any]:
        given = self.paths
        if isinstance(given, str) or not isinstance(given, Sequence):
            given = [given]  # one path, URL or ObjectStoragePath
        with airflow_errors(f"remove {', '.join(str(path) for path in given)}"):
            hook = RcpHook(self.conn_id)
            ([*paths],), stores = stores_of([(given, hook.store_conn_id)])
            settings = RemoveSettings(
                includes=globs("includes", self.includes),
                excludes=globs("excludes", self.excludes),
                modified_before=_time(self.modified_before),
                created_before=_time(self.created_before),
                missing_ok=self.missing_ok,
                dry_run=self.dry_run_only,
                fail_early=self.fail_early,
                max_workers=None
                if self.max_workers is None
                else whole_number("max_workers", self.max_workers, minimum=1),
            )
            summary = hook.remove(
                paths,
                settings,
                on_progress=ProgressLog(self.log, interval=self.progress_interval),
                cancel=self._cancel,
                stores=stores,
            )
        removed = summary["removed"]
        self.log.info(
            "rrm: removed %s files, %s dirs (%s bytes); %s kept; %s error(s)",
            f"{removed['files']:,}",
            f"{removed['dirs']:,}",
            f"{removed['bytes']:,}",
            f"{summary['skipped']['files']:,}",
            summary["errors"],
        )
        self.lineage_summary = summary
        return summary

    def lineage_sides(self) -> tuple[Sides, Sides]:
        """Nothing read; the trees removed from are written."""
        given = self.paths
        if isinstance(given, str) or not isinstance(given, Sequence):
            given = [given]
        return [], [(given, self.conn_id)]

    def on_kill(self) -> None:
        """Stop: every directory in flight is finished or left as it is."""
        self._cancel.set()


def _time(value: str | None) -> float | None:
    return None if value in (None, "") else parse_time(str(value))
