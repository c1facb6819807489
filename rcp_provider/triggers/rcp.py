"""``RcpJobTrigger``: waits in the triggerer for the service jobs of a deferred copy.

The copy runs in the services; the trigger only asks how it goes. A copy on one
service is one job; a copy from one service to another is two (the source's send
job and the destination's receive job, :func:`rcp_core.remote.servicemaster.start_between`),
and the trigger waits for both. Each question is one bounded request (the service
holds a ``wait`` answer at most ``poll_interval`` seconds), made in a thread so the
triggerer's event loop never blocks. The trigger holds no state but what
:meth:`RcpJobTrigger.serialize` returns (and, in memory, when it last logged progress),
so the triggerer may recreate it anywhere and at any time.

While it waits, the job's progress goes to the task's log every
``progress_interval`` seconds (:class:`rcp_provider.progress.ProgressLog`; for a copy
between services, the receiving side's).

It fires once: ``{"status": "ended", "job": ..., "view": ...}`` when the job ended
(``view``: the job as the service showed it last; with ``sender``, also
``"sender_view"``: the send job's), ``{"status": "error", "job": ..., "message": ...,
"retry": bool}`` when a service could not be asked (it stayed away longer than
:data:`rcp_core.remote.client.RESTART_GRACE`: a restarted service with a
``--state-dir`` answers for its jobs again) or a copy between services made
no progress for :data:`rcp_core.remote.roles.STALL` seconds (its jobs cancelled);
``retry`` says whether the task's own retries may help
(:func:`rcp_core.run.runtime.retry_may_help`). The trigger does not judge how a job
ended: the task does, resumed, with :mod:`rcp_core.remote.outcome`, as it does when it
waits for a job itself, so a deferred copy fails exactly as a waited-for one.

A user who kills the deferred task (marks it failed or succeeded, or clears it) has
the triggerer call :meth:`RcpJobTrigger.on_kill`, which cancels the jobs; a triggerer
that restarts or hands the trigger to another cancels nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from rcp_core.errors import PeerTimeoutError, RcpError
from rcp_core.remote.roles import STALL
from rcp_core.remote.servicemaster import StallWatch
from rcp_core.run.runtime import retry_may_help
from rcp_provider.hooks.rcp import ACTIVE, RcpHook
from rcp_provider.progress import INTERVAL, ProgressLog

POLL_INTERVAL = 10.0


class RcpJobTrigger(BaseTrigger):
    """Fires when the service's job ``job_id`` (and the ``sender``'s job) ended.

    :param rcp_conn_id: the connection of the service that runs the job.
    :param job_id: the job, as the service named it: the copy's, or for a copy
        between services the destination's receive job.
    :param poll_interval: seconds the service may hold each answer.
    :param progress_interval: seconds between progress lines in the task log.
    :param sender: for a copy between services, the source's connection and its
        send job.
    """

    def __init__(
        self,
        rcp_conn_id: str,
        job_id: str,
        poll_interval: float = POLL_INTERVAL,
        progress_interval: float = INTERVAL,
        sender: tuple[str, str] | list[str] | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow's, unannotated
        self.rcp_conn_id = rcp_conn_id
        self.job_id = job_id
        self.poll_interval = poll_interval
        self.progress_interval = progress_interval
        self.sender = (sender[0], sender[1]) if sender is not None else None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "rcp_conn_id": self.rcp_conn_id,
                "job_id": self.job_id,
                "poll_interval": self.poll_interval,
                "progress_interval": self.progress_interval,
                "sender": list(self.sender) if self.sender is not None else None,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        show = ProgressLog(self.log, interval=self.progress_interval)
        watch = StallWatch() if self.sender is not None else None
        try:
            view = await self._until_ended(self.rcp_conn_id, self.job_id, show, watch)
            sender_view = None
            if self.sender is not None:
                sender_view = await self._until_ended(*self.sender, None, watch)
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
        event: dict[str, Any] = {"status": "ended", "job": self.job_id, "view": view}
        if sender_view is not None:
            event["sender_view"] = sender_view
        yield TriggerEvent(event)  # type: ignore[no-untyped-call]

    async def on_kill(self) -> None:
        """The task was killed by a user: cancel the jobs (each request bounded by
        its connection's timeout)."""
        await asyncio.to_thread(self._cancel_all)

    async def _until_ended(
        self,
        conn_id: str,
        job_id: str,
        show: ProgressLog | None,
        watch: StallWatch | None,
    ) -> dict[str, Any]:
        """The job's view once it ended, its progress shown meanwhile.

        :raises PeerTimeoutError: a copy between services made no progress for
            ``STALL`` seconds (both jobs cancelled).
        """
        hook = RcpHook(conn_id)
        while True:
            job = await asyncio.to_thread(self._ask, hook, job_id)
            if job["state"] not in ACTIVE:
                return job
            progress = job.get("progress")
            if show is not None and progress:
                show(progress)
            if watch is not None and watch.stalled(job_id, progress):
                await asyncio.to_thread(self._cancel_all)
                raise PeerTimeoutError(
                    f"the copy between services made no progress for {STALL:.0f} s "
                    "(its jobs are cancelled)"
                )

    def _ask(self, hook: RcpHook, job_id: str) -> dict[str, Any]:
        with hook.client() as client:
            return client.wait_through_restarts(job_id, self.poll_interval)

    def _cancel_all(self) -> None:
        jobs = [(self.rcp_conn_id, self.job_id)]
        if self.sender is not None:
            jobs.append(self.sender)
        for conn_id, job_id in jobs:
            try:
                RcpHook(conn_id).cancel(job_id)
            except (RcpError, OSError) as exc:
                self.log.warning("rcp: could not cancel job %s: %s", job_id, exc)
            else:
                self.log.info("rcp: cancelled job %s on %s", job_id, conn_id)
