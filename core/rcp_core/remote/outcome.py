"""How a copy that ran outside this process ended, judged by the engine's rule.

A local copy that had errors, or was stopped, raises
:class:`~rcp_core.errors.CopyFailedError` at its end, carrying its partial summary
and the deduplicated errors (:mod:`rcp_core.engine.copyrun`). A copy that ran as a job of an
``rcpd serve`` service ends as the job's JSON view; one between two places ends as
the two roles' results. The functions here apply the same rule to those, so every
way of starting a copy ends the same way: its summary when nothing failed, else a
``CopyFailedError``. Only a job that ended without a summary (a refused path, an
internal error: nothing was counted) is a :class:`~rcp_core.errors.JobFailedError`.
"""

from __future__ import annotations

from typing import Any

from rcp_core.errors import CopyFailedError, JobFailedError
from rcp_core.remote.sshmaster import RoleResult, role_summary
from rcp_core.run.summary import Resources, Summary


def checked(
    summary: Summary,
    *,
    failed: bool = False,
    stopped: bool = False,
    cause: BaseException | None = None,
) -> Summary:
    """``summary``, when its copy ended cleanly.

    :param failed: the copy's runner said it failed (whatever the counts say).
    :param stopped: the copy was stopped (cancelled, or ``fail_early``).
    :param cause: the ``__cause__`` of the error raised.
    :raises CopyFailedError: it counted errors, failed or was stopped.
    """
    if failed or stopped or summary["errors"]:
        raise CopyFailedError(summary, list(summary.errors), stopped) from cause
    return summary


def job_summary(job: dict[str, Any]) -> dict[str, Any]:
    """The JSON summary of a service's job that ended (as its client shows it).

    :raises CopyFailedError: it failed or was cancelled after it began copying; its
        ``__cause__`` is the :class:`JobFailedError` naming the job and the service's
        reason.
    :raises JobFailedError: it ended without a summary.
    """
    failure = JobFailedError(job)
    view: dict[str, Any] | None = job.get("summary")
    if view is None:
        raise failure
    summary = Summary(
        counts=job["counts"],
        resources=Resources(
            view["walltime_s"],
            view["cpu_user_s"],
            view["cpu_system_s"],
            view["peak_rss_bytes"],
        ),
        errors=tuple(
            (e["error"], e["count"], e["example"]) for e in view["error_list"]
        ),
        dry_run=view["dry_run"],
    )
    state = job["state"]
    checked(
        summary,
        failed=state != "succeeded",
        stopped=state == "cancelled",
        cause=failure,
    )
    return view


def between_summary(
    source: RoleResult, destination: RoleResult, resources: Resources
) -> Summary:
    """The summary of a copy between two places (:func:`role_summary`).

    :raises CopyFailedError: either role failed or counted errors.
    """
    return checked(
        role_summary(source, destination, resources),
        failed=not (source.ok and destination.ok),
    )
