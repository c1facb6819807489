"""Copies too big for one worker: plan shards, copy them as mapped tasks, finalize.

::

    plan = RcpPlanOperator(task_id="plan", src=SRC, manifest=MANIFEST, shards=32)
    copy = RcpCopyOperator.partial(task_id="copy", dst=DST).expand_kwargs(plan.output)
    done = RcpFinalizeOperator(task_id="finalize", manifest=MANIFEST, dst=DST)
    plan >> copy >> done

Airflow's executor (Celery, Kubernetes, Local) runs the mapped copies wherever it has
slots; every worker must see the source, the destination and the manifest at the same
paths. The plan is the engine's (:mod:`rcp_core.tools.shards.planner`): shards are disjoint
and balanced by bytes and file count; finalize gives the directories the shards share the
source's metadata once every shard is done, then verifies if asked.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context

from rcp_core.errors import UsageError
from rcp_core.schema import Front, settings_from
from rcp_operators.failures import airflow_errors
from rcp_operators.lineage import Lineage, Sides, destination_outlet
from rcp_provider.hooks.rcp import RcpHook
from rcp_provider.options import verify_mode

MAX_SHARDS = 1024
"""Airflow's default ``[core] max_map_length``: a mapped task takes at most this many."""
DEFAULT_SHARDS = 32


class RcpPlanOperator(BaseOperator, Lineage):
    """Split ``src`` into at most ``shards`` balanced shards and write the plan.

    :param src: the tree to copy (on the workers' shared storage), or its URL (a
        store's tree, planned through its listings; the copies then run the generic
        engine and ``dst`` may be a URL too).
    :param manifest: where the plan is written; every worker must read it there.
    :param shards: at most this many shards (1 to 1024; templated, so text is taken).
    :returns: one ``{"manifest": ..., "shard": i}`` per shard, for
        ``RcpCopyOperator.partial(...).expand_kwargs(...)``; the plan's totals (its
        entries and bytes, as the manifest holds them) are logged and are the run
        facet's.
    """

    template_fields: Sequence[str] = ("src", "manifest", "shards")
    lineage_operation = "plan"

    def __init__(
        self,
        *,
        src: str,
        manifest: str,
        shards: int | str = DEFAULT_SHARDS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.src = src
        self.manifest = manifest
        self.shards = shards
        self._cancel = threading.Event()

    def execute(self, context: Context) -> list[dict[str, Any]]:
        from rcp_core.tools.shards.manifest import read_manifest

        with airflow_errors(f"plan {self.src}"):
            shards = _count(self.shards)
            descriptors = RcpHook(None).plan(
                self.src, self.manifest, shards, cancel=self._cancel
            )
            plan = read_manifest(self.manifest)
        files = sum(shard.files for shard in plan.shards)
        size = sum(shard.bytes for shard in plan.shards)
        self.log.info(
            "rcp: %s planned as %d shard(s) in %s: %s entries, %s bytes",
            self.src,
            len(plan.shards),
            self.manifest,
            f"{files:,}",
            f"{size:,}",
        )
        self.lineage_summary = {
            "planned": {"files": files, "bytes": size},
            "shards": len(plan.shards),
        }
        return descriptors

    def lineage_sides(self) -> tuple[Sides, Sides]:
        """The tree planned read; the plan written."""
        return [([self.src], None)], [([self.manifest], None)]

    def on_kill(self) -> None:
        """Stop reading the tree: no plan is written."""
        self._cancel.set()


class RcpFinalizeOperator(BaseOperator, Lineage):
    """After every shard of a plan is copied: directory metadata, then verification.

    ``preserve`` and ``verify`` are templated as the paths are, as
    ``RcpCopyOperator``'s are (their text is parsed as ``rcp`` parses it).

    :param manifest: the plan the shards came from.
    :param dst: the destination the shards were copied to.
    :param preserve: as the copies' (``default``: mode and times).
    :param verify: ``none``, ``metadata`` or ``checksum``; a difference fails the task.
    :param dst_asset: the destination as the task's outlet asset (the sharded copy
        is whole once this task succeeds), as ``RcpCopyOperator``'s ``dst_asset``.
    """

    template_fields: Sequence[str] = ("manifest", "dst", "preserve", "verify")
    lineage_operation = "finalize"

    def __init__(
        self,
        *,
        manifest: str,
        dst: str,
        preserve: str = "default",
        verify: str = "none",
        dst_asset: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        destination_outlet(self, dst, None, dst_asset, kwargs.get("outlets"))
        self.manifest = manifest
        self.dst = dst
        self.preserve = preserve
        self.verify = verify
        self._cancel = threading.Event()

    def execute(self, context: Context) -> dict[str, Any]:
        with airflow_errors(f"finalize {self.dst}"):
            verify = verify_mode(self.verify)
            hook = RcpHook(None)
            settings = settings_from({"preserve": self.preserve}, Front.OPERATOR)
            done = hook.finalize(self.manifest, self.dst, settings)
            self.log.info("rcp: metadata of %d directories set", done["directories"])
            self.lineage_summary = done
            if verify == "none":
                return done
            result = hook.verify(
                [done["src"]],
                self.dst,
                checksum=verify == "checksum",
                preserve=settings.preserve,
                cancel=self._cancel,
            )
            self.log.info("rcp: verified (%s): the copy is the same", verify)
            self.lineage_summary = {**done, "verify": result}
            return self.lineage_summary

    def lineage_sides(self) -> tuple[Sides, Sides]:
        """The plan read; the destination (its directories' metadata) written."""
        return [([self.manifest], None)], [([self.dst], None)]

    def on_kill(self) -> None:
        """Stop the verification (the directories' metadata is set quickly)."""
        self._cancel.set()


def _count(value: int | str) -> int:
    """A shard count from an argument or a rendered template."""
    try:
        count = int(value)
    except ValueError:
        raise UsageError(f"shards must be a number, not {value!r}") from None
    if not 1 <= count <= MAX_SHARDS:
        raise UsageError(f"shards must be 1 to {MAX_SHARDS}, not {count}")
    return count
