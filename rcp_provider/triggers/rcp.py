"""``RcpJobTrigger``: waits in the triggerer for a job of an ``rcpd serve`` service.

The copy runs in the service; the trigger only asks how it goes. Each question is one
bounded request (the service holds a ``wait`` answer at most ``poll_interval``
seconds), made in a thread so the triggerer's event loop never blocks. The trigger
holds no state but what :meth:`RcpJobTrigger.serialize` returns, so the triggerer may
recreate it anywhere and at any time.

It fires once: ``{"status": "ended", "job": ..., "view": ...}`` when the job ended
(``view``: the job as the service showed it last), ``{"status": "error", "job": ...,
"message": ..., "retry": bool}`` when the service could not be asked (``retry`` says
whether the task's own retries may help: :func:`rcp_core.run.runtime.retry_may_help`).
The trigger does not judge how the job ended: the task does, resumed, with
:func:`rcp_core.remote.outcome.job_summary`, as it does when it waits for a job
itself, so a deferred copy fails exactly as a waited-for one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from rcp_core.errors import RcpError
from rcp_core.run.runtime import retry_may_help
from rcp_provider.hooks.rcp import ACTIVE, RcpHook

POLL_INTERVAL = 10.0


class RcpJobTrigger(BaseTrigger):
    """Fires when the service's job ``job_id`` ends.

    :param rcp_conn_id: the connection of the service that runs the job.
    :param job_id: the job, as the service named it.
    :param poll_interval: seconds the service may hold each answer.
    """

    def __init__(
        self, rcp_conn_id: str, job_id: str, poll_interval: float = POLL_INTERVAL
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow's, unannotated
        self.rcp_conn_id = rcp_conn_id
        self.job_id = job_id
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "rcp_conn_id": self.rcp_conn_id,
                "job_id": self.job_id,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook = RcpHook(self.rcp_conn_id)
        while True:
            try:
                job = await asyncio.to_thread(self._wait, hook)
            except (RcpError, OSError) as exc:
                yield TriggerEvent(  # type: ignore[no-untyped-call]
                    {
                        "status": "error",
                        "job": self.job_id,
                        "message": f"{type(exc).__name__}: {exc}",
                        "retry": retry_may_help(exc),
                    }
                )
                return
            if job is not None:
                yield TriggerEvent(  # type: ignore[no-untyped-call]
                    {"status": "ended", "job": self.job_id, "view": job}
                )
                return

    def _wait(self, hook: RcpHook) -> dict[str, Any] | None:
        """The job once it ended, ``None`` while it runs."""
        with hook.client() as client:
            job = client.wait(self.job_id, self.poll_interval)
        return job if job["state"] not in ACTIVE else None
