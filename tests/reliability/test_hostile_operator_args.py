"""Malformed operator arguments: each fails its task for good, in one line, and
touches nothing.

An operator's equivalent of a CLI's exit 2 is :class:`AirflowFailException`: the
task fails and Airflow does not retry it (the same arguments would fail the same
way). Every case builds the real operator and runs it in a sandbox holding a source
tree, an existing destination and a file; the failure may come from the
constructor (the DAG does not load) or from ``execute``, its message must be one
line, and the sandbox must be exactly as it was.

Figure: malformed operator calls tried / refused cleanly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from rcp_operators.compare import RcpCompareOperator
from rcp_operators.copy import RcpCopyOperator
from rcp_operators.link import RcpLinkOperator
from rcp_operators.remove import RcpRemoveOperator
from rcp_operators.shards import RcpFinalizeOperator, RcpPlanOperator
from support.reliability import Figure, Sandbox, published, state

COPY = {"src": "SRC", "dst": "NEW"}
# SRC, DST, FILE and NEW stand for paths of the Sandbox.
CASES: list[tuple[type[BaseOperator], dict[str, Any]]] = [
    (RcpCopyOperator, {**COPY, "src": "NEW/missing"}),
    (RcpCopyOperator, {**COPY, "existing": "sometimes"}),
    (RcpCopyOperator, {**COPY, "overwrite_compare": "size,colour"}),
    (RcpCopyOperator, {**COPY, "preserve": "colour"}),
    (RcpCopyOperator, {**COPY, "verify": "eyeball"}),
    (RcpCopyOperator, {**COPY, "dry_run": "loud"}),
    (RcpCopyOperator, {**COPY, "max_workers": 0}),
    (RcpCopyOperator, {**COPY, "max_workers": "many"}),
    (RcpCopyOperator, {**COPY, "max_workers": True}),
    (RcpCopyOperator, {**COPY, "ops_throttle": -1}),
    (RcpCopyOperator, {**COPY, "ops_throttle": "fast"}),
    (RcpCopyOperator, {**COPY, "progress_interval": 0}),
    (RcpCopyOperator, {**COPY, "includes": ["["]}),
    (RcpCopyOperator, {"src": "SRC", "dst": "SRC/inside"}),
    (RcpCopyOperator, {"src": "SRC", "dst": "SRC"}),
    (RcpCopyOperator, {"src": ["SRC", "FILE"], "dst": "NEW"}),
    (RcpCopyOperator, {"src": "SRC", "dst": "DST"}),  # exists: refused by default
    (RcpCopyOperator, {**COPY, "src_conn_id": "no_such_connection"}),
    (RcpCopyOperator, {"dst": "NEW", "manifest": "FILE", "shard": 0}),
    (RcpCopyOperator, {"dst": "NEW", "manifest": "NEW/plan.json", "shard": 0}),
    (RcpCopyOperator, {**COPY, "shard": 3}),
    (RcpCompareOperator, {"src": "SRC", "dst": "DST", "attrs": "colour"}),
    (RcpCompareOperator, {"src": "NEW", "dst": "DST"}),
    (RcpCompareOperator, {"src": "SRC", "dst": "DST", "conn_id": "nowhere"}),
    (RcpLinkOperator, {"src": "SRC", "dst": "NEW", "update_compare": "colour"}),
    (RcpLinkOperator, {"src": "SRC", "dst": "NEW", "update": "NEW/missing"}),
    (RcpLinkOperator, {"src": "NEW/missing", "dst": "NEW"}),
    (RcpLinkOperator, {"src": "SRC", "dst": "NEW", "progress_interval": -1}),
    (RcpRemoveOperator, {"paths": "/"}),
    (RcpRemoveOperator, {"paths": []}),
    (RcpRemoveOperator, {"paths": "DST", "modified_before": "when-it-rains"}),
    (RcpRemoveOperator, {"paths": "DST", "created_before": "-3d"}),
    (RcpRemoveOperator, {"paths": "DST", "max_workers": 0}),
    (RcpRemoveOperator, {"paths": "DST", "includes": [7]}),
    (RcpCopyOperator, {**COPY, "excludes": [None]}),
    (RcpRemoveOperator, {"paths": "DST", "max_workers": "many"}),
    (RcpRemoveOperator, {"paths": "DST", "progress_interval": "often"}),
    (RcpRemoveOperator, {"paths": "DST", "conn_id": "nowhere"}),
    (RcpPlanOperator, {"src": "SRC", "manifest": "NEW/plan.json", "shards": 0}),
    (RcpPlanOperator, {"src": "SRC", "manifest": "NEW/plan.json", "shards": "many"}),
    (RcpPlanOperator, {"src": "SRC", "manifest": "NEW/plan.json", "shards": 5000}),
    (RcpPlanOperator, {"src": "NEW/missing", "manifest": "NEW/plan.json"}),
    (RcpPlanOperator, {"src": "SRC", "manifest": "NEW/deeper/plan.json"}),
    (RcpFinalizeOperator, {"manifest": "FILE", "dst": "DST"}),
    (RcpFinalizeOperator, {"manifest": "NEW/plan.json", "dst": "DST"}),
]


@pytest.fixture(scope="module")
def figure(figures: list[Figure]) -> Figure:
    return published(figures, "hostile input", "malformed operator arguments")


@pytest.mark.parametrize(
    ("operator", "kwargs"),
    CASES,
    ids=[f"{op.__name__}-{kwargs}" for op, kwargs in CASES],
)
def test_a_malformed_operator_call_fails_for_good_in_one_line_touching_nothing(
    tmp_path: Path,
    operator: type[BaseOperator],
    kwargs: dict[str, Any],
    figure: Figure,
) -> None:
    sandbox = Sandbox(tmp_path)
    args = {key: sandbox.fill(value) for key, value in kwargs.items()}
    before = state(tmp_path)
    figure.tried += 1
    problems, crash = [], False
    try:
        operator(task_id="hostile", **args).execute(context={})
    except AirflowFailException as exc:
        if len(str(exc).splitlines()) != 1:
            problems.append(f"message {str(exc)!r}")
    except Exception as exc:  # noqa: BLE001 - the figure counts what escaped
        problems.append(f"{type(exc).__name__}: {exc}"[:300])
        crash = True
    else:
        problems.append("it ran")
    if state(tmp_path) != before:
        problems.append("the sandbox changed")
    if problems:
        figure.failed(
            f"{operator.__name__} {kwargs}: {'; '.join(problems)}", crash=crash
        )
    else:
        figure.survived += 1
    assert not problems, problems
