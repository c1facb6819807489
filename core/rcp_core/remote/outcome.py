"""How a copy that ran outside this process ended, judged by the engine's rule.

A local copy that had errors, or was stopped, raises
:class:`~rcp_core.errors.CopyFailedError` at its end, carrying its partial summary
and the deduplicated errors (:mod:`rcp_core.engine.copyrun`). A copy that ran as a job of an
``rcpd serve`` service ends as the job's JSON view; one between two places ends as
the two roles' results. The functions here apply the same rule to those, so every
way of starting a copy ends the same way: its summary when nothing failed, else a
``CopyFailedError``. Only a job that ended without a summary (a refused path, an
internal error: nothing was counted) is a :class:`~rcp_core.errors.JobFailedError`.

A role's result (:class:`RoleResult`) is what each master (over SSH, through services)
gets from each role; the destination's counts are what was copied, both roles' errors
count (:func:`role_summary`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rcp_core.errors import CopyFailedError, JobFailedError, ProtocolError, RemoteError
from rcp_core.remote.hello import Role
from rcp_core.run.summary import KEYS, Resources, Summary, merge


@dataclass(slots=True)
class RoleResult:
    """What one role reported at the end."""

    role: Role
    ok: bool
    counts: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    resources: dict[str, float] = field(default_factory=dict)


def counts_from_wire(value: Any) -> dict[str, int]:
    """A daemon's counters: the known keys with non-negative integer values (a
    malformed report is a :class:`ProtocolError`, never a crash in the summary)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProtocolError("counts are not an object")
    counts: dict[str, int] = {}
    for key, number in value.items():
        if key not in KEYS:
            continue  # a newer daemon's counter: not ours to show
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            raise ProtocolError(f"count {key!r} is {number!r}")
        counts[key] = number
    return counts


def role_result(job: dict[str, Any], role: Role) -> RoleResult:
    """The result of a service's role job that ended (its JSON view).

    :raises RemoteError: it failed before it counted anything (a refused path, a
        peer that never connected).
    """
    if job.get("state") == "failed" and job.get("counts") is None:
        raise RemoteError(f"{role.value} job {job['job']}: {job.get('error')}")
    counts = dict(job.get("counts") or {})
    # The job's own errors, one by one; its reason when it counted none.
    listed = (job.get("summary") or {}).get("error_list") or []
    errors = [str(e["error"]) for e in listed]
    if not errors and job.get("error"):
        errors = [str(job["error"])]
    return RoleResult(role, job.get("state") == "succeeded", counts, errors)


def roles_summary(sent: dict[str, Any], received: dict[str, Any]) -> Summary:
    """The summary of a copy between two services from their role jobs' views once
    both ended (the send job's and the receive job's): :func:`between_summary`, its
    wall time the longer job's, its CPU time both jobs', its peak RSS the larger.

    :raises RemoteError: a role job failed before it counted anything.
    :raises CopyFailedError: either role failed or counted errors.
    """
    views = [job.get("summary") or {} for job in (sent, received)]
    resources = Resources(
        max(float(view.get("walltime_s", 0.0)) for view in views),
        sum(float(view.get("cpu_user_s", 0.0)) for view in views),
        sum(float(view.get("cpu_system_s", 0.0)) for view in views),
        max(int(view.get("peak_rss_bytes", 0)) for view in views),
    )
    return between_summary(
        role_result(sent, Role.SOURCE),
        role_result(received, Role.DESTINATION),
        resources,
    )


def merged_counts(source: RoleResult, destination: RoleResult) -> dict[str, int]:
    """The destination decides what was copied; errors of both count."""
    counts = merge([destination.counts])
    counts["errors"] = source.counts.get("errors", 0) + destination.counts.get(
        "errors", 0
    )
    return counts


def role_summary(
    source: RoleResult, destination: RoleResult, resources: Resources
) -> Summary:
    """The summary of a copy between hosts: :func:`merged_counts`, and each role's
    errors (named by the role)."""
    errors = [
        (e, 1, role.role.value) for role in (source, destination) for e in role.errors
    ]
    return Summary(merged_counts(source, destination), resources, errors=tuple(errors))


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
