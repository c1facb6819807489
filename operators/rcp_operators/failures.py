"""Engine errors -> Airflow task outcomes.

Whether a failure is worth Airflow's task retries is decided by the engine
(:func:`rcp_core.run.runtime.retry_may_help`: only transient errors); this module only
speaks Airflow's language: :class:`AirflowException` lets the task retry,
:class:`AirflowFailException` fails it at once. The engine's exception stays the
``__cause__``, so the task log shows both.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from rcp_core.errors import CopyFailedError, RcpError
from rcp_core.run.runtime import retry_may_help


@contextlib.contextmanager
def airflow_errors(what: str) -> Iterator[None]:
    """Translate the engine's errors raised inside; ``what`` names the work."""
    try:
        yield
    except (RcpError, OSError) as exc:
        message = f"{what}: {exc}{_examples(exc)}"
        if retry_may_help(exc):
            raise AirflowException(
                f"{message} (transient: a retry may succeed)"
            ) from exc
        raise AirflowFailException(message) from exc


def failed_event(event: dict[str, Any]) -> AirflowException:
    """The exception for a trigger's ``error`` event."""
    message = f"rcp job {event.get('job')}: {event.get('message')}"
    if event.get("retry"):
        return AirflowException(f"{message} (transient: a retry may succeed)")
    return AirflowFailException(message)


def _examples(exc: BaseException) -> str:
    """The first errors of a copy that finished with errors, one per line."""
    if not isinstance(exc, CopyFailedError):
        return ""
    lines = [
        f"\n  {count} x {key} (e.g. {example})" for key, count, example in exc.errors
    ]
    return "".join(lines[:10])
