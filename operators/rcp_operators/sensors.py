"""Sensors: wait for a tree to appear, or for a service's job to end.

``RcpPathSensor`` pokes :meth:`RcpHook.exists <rcp_provider.hooks.rcp.RcpHook.exists>`
(a path on the worker, a store's URL, or a path on an ``rcpd serve`` service);
``RcpJobSensor`` asks a service for a job's state, and fails the task when the job
failed or was cancelled (no retry: the job's outcome will not change). Both are
``BaseSensorOperator``\\ s: ``poke_interval``, ``timeout``, ``mode="reschedule"`` and
``soft_fail`` are Airflow's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator, Context
from airflow.sdk.exceptions import AirflowFailException

from rcp_operators.failures import airflow_errors
from rcp_provider.hooks.rcp import RcpHook


class RcpPathSensor(BaseSensorOperator):
    """Wait until ``path`` exists.

    :param path: a path on the worker's storage, a store's URL (``s3://bucket/key``),
        or, with an ``rcp`` connection to a service, a path on the service's host.
    :param conn_id: the place's connection (``None``: the worker's storage): an
        ``rcp`` connection to a service, or a store's (``aws``, ...) for a URL.
    """

    template_fields: Sequence[str] = ("path", "conn_id")
    ui_color = "#d7f0f9"

    def __init__(self, *, path: str, conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.path = path
        self.conn_id = conn_id

    def poke(self, context: Context) -> bool:
        with airflow_errors(f"look for {self.path}"):
            found = RcpHook(self.conn_id).exists(self.path)
        self.log.info(
            "rcp: %s %s", self.path, "exists" if found else "is not there yet"
        )
        return found


class RcpJobSensor(BaseSensorOperator):
    """Wait until a service's job ends; the job as the service shows it when it
    succeeded (its state, operands, times, ``summary``, ``counts``, ...) is the
    task's XCom value, so a downstream task reads the outcome and the summary alike.

    :param job_id: the job's id (templated: an upstream task's XCom, say).
    :param conn_id: the ``rcp`` connection of the service running it.
    """

    template_fields: Sequence[str] = ("job_id", "conn_id")
    ui_color = "#d7f0f9"

    def __init__(self, *, job_id: str, conn_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job_id = job_id
        self.conn_id = conn_id

    def poke(self, context: Context) -> Any:
        from airflow.sdk import PokeReturnValue

        with airflow_errors(f"job {self.job_id} on {self.conn_id}"):
            job = RcpHook(self.conn_id).job(self.job_id)
        state = job["state"]
        self.log.info("rcp: job %s is %s", self.job_id, state)
        if state in ("failed", "cancelled"):
            raise AirflowFailException(
                f"job {self.job_id} on {self.conn_id} {state}: {job.get('error', '')}"
            )
        return PokeReturnValue(is_done=state == "succeeded", xcom_value=job)
