"""A real ``rcpd serve --state-dir`` killed (SIGKILL) in the middle of a copy job and
started again: a client waiting on the job the whole time gets its end, the copy is
whole, and what the service knew before is known after. (The Airflow trigger waiting
through the same: ``tests/operators/test_deferred_scheduled.py``.)"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.sshd import free_port
from rcp_core import CopySettings
from rcp_core.remote.client import FINISHED
from rcp_core.settings import ExistingPolicy
from support.services import TOKEN, RcpdServe
from support.treecmp import TreeCompare
from support.treespec import File, make_tree

FILES = 300
THROTTLED = CopySettings(existing=ExistingPolicy.OVERWRITE, ops_throttle=60)
"""About five seconds of operations: the kill lands in the middle."""


def serve(tmp_path: Path, port: int) -> RcpdServe:
    return RcpdServe(
        [
            "--listen",
            f"127.0.0.1:{port}",
            "--root",
            str(tmp_path / "data"),
            "--root",
            str(tmp_path / "backup"),
            "--token-file",
            str(tmp_path / "token"),
            "--identity",
            str(tmp_path / "identity"),
            "--state-dir",
            str(tmp_path / "state"),
        ]
    )


def test_a_killed_service_runs_its_job_again_and_its_waiter_gets_the_end(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    (tmp_path / "backup").mkdir()
    (tmp_path / "token").write_text(TOKEN)
    src = make_tree(
        tmp_path / "data" / "tree",
        {f"d{i % 10}/f{i:03}": File(b"%d\n" % i * 100) for i in range(FILES)},
    )
    small = make_tree(tmp_path / "data" / "small", {"a": File(b"a\n")})
    port = free_port()
    rcpd = serve(tmp_path, port)
    try:
        with rcpd.client() as client:
            earlier = client.submit([str(small)], str(tmp_path / "backup" / "small"))
            earlier = client.wait(earlier["job"], 30)
            assert earlier["state"] == "succeeded"
            job = client.submit(
                [str(src)], str(tmp_path / "backup" / "tree"), THROTTLED, key="k" * 16
            )
            deadline = time.monotonic() + 60
            while (client.status(job["job"]).get("progress") or {}).get(
                "bytes", 0
            ) < 9000:
                assert time.monotonic() < deadline, "no progress"
                time.sleep(0.2)
        ended: list[dict[str, Any]] = []
        waiter = threading.Thread(target=_wait, args=(rcpd, job["job"], ended))
        waiter.start()
        time.sleep(0.5)  # the waiter is waiting
        assert rcpd.stop(signal.SIGKILL) == -signal.SIGKILL
        copied = sum(1 for p in (tmp_path / "backup" / "tree").rglob("f*"))
        assert 0 < copied < FILES, "killed in the middle"
        time.sleep(3)  # the waiter meets a service that is away
        rcpd = serve(tmp_path, port)
        waiter.join(120)
        assert not waiter.is_alive()
        [view] = ended
        assert view["state"] == "succeeded", view
        assert view["restarts"] == 1
        assert tree_compare(src, tmp_path / "backup" / "tree") == []
        with rcpd.client() as client:
            assert client.status(earlier["job"]) == earlier
            again = client.submit(
                [str(src)], str(tmp_path / "backup" / "tree"), THROTTLED, key="k" * 16
            )
            assert again["job"] == job["job"]
    finally:
        rcpd.stop()
    assert "runs again: the service stopped while the job was running" in rcpd.stderr


def _wait(rcpd: RcpdServe, job: str, ended: list[dict[str, Any]]) -> None:
    with rcpd.client() as client:
        view = client.wait_through_restarts(job, 5)
        while view["state"] not in FINISHED:
            view = client.wait_through_restarts(job, 5)
    ended.append(view)
