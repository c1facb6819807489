"""One ``rcpd serve`` under load: many clients at once, one of them failing; many
clients, by name, taking their turns fairly within their bounds.

Twenty clients (threads, each with its own connection, token and tree) submit a copy
job at once to one service process that runs at most four at a time; one more
client's job cannot succeed (its source is missing). Then:

- every other job succeeds and its copy is exact; the failing one fails with its
  reason, and no other job notices;
- the service's peak memory stays bounded (:data:`PEAK_RSS`);
- the service answers a new request afterwards and stops cleanly.

``make stress`` adds a soak: ten minutes of such rounds, each beside a local
``rcp`` of a mixed tree, the service's resident memory sampled between them, which
must stay flat.

Figure: jobs submitted / jobs that ended as they must.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rcp_core import CopySettings, UsageError
from support.nobody import RCP
from support.reliability import Figure, Scale, mixed_tree, published
from support.services import TOKEN, RcpdServe
from support.treecmp import TreeCompare
from support.treespec import File, make_tree

pytestmark = pytest.mark.slow

CLIENTS = 20
WAIT = 120.0
PEAK_RSS = 400 << 20
SOAK = 600.0


def rss(pid: int, field: str) -> int:
    """A memory figure of a process (``VmRSS``, ``VmHWM``) in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


def start(tmp_path: Path, *options: str) -> tuple[RcpdServe, Path, Path]:
    """A service with at most four jobs at once (``options``: more of its own)."""
    data, backup = tmp_path / "data", tmp_path / "backup"
    data.mkdir()
    backup.mkdir()
    (tmp_path / "token").write_text(TOKEN)
    args = ["--root", str(data), "--root", str(backup), "--max-jobs", "4", *options]
    args += [
        "--token-file",
        str(tmp_path / "token"),
        "--identity",
        str(tmp_path / "id"),
    ]
    return RcpdServe(args), data, backup


def one_round(
    service: RcpdServe, data: Path, backup: Path, tag: str, tree_compare: TreeCompare
) -> list[str]:
    """Twenty good jobs and a bad one at once; what went wrong (nothing, ideally)."""
    for i in range(CLIENTS):
        spec = {
            f"d{d}/f{f}": File(os.urandom(2000 + i))
            for d in range(5)
            for f in range(20)
        }
        spec["big"] = File(os.urandom(4 << 20))
        make_tree(data / f"{tag}-{i}", spec)

    def job(i: int) -> str:
        name = f"{tag}-{i}" if i < CLIENTS else f"{tag}-missing"
        with service.client() as client:
            submitted = client.submit([str(data / name)], f"{backup}/")
            done = client.wait(submitted["job"], WAIT)
        if i == CLIENTS:
            if done["state"] != "failed" or not done.get("error"):
                return f"the bad job ended {done['state']}: {done}"
            return ""
        if done["state"] != "succeeded":
            return f"job {i}: {done['state']} {done.get('error')}"
        differences = tree_compare(data / name, backup / name)
        return f"job {i}: {differences[:3]}" if differences else ""

    with ThreadPoolExecutor(CLIENTS + 1) as pool:
        return [p for p in pool.map(job, range(CLIENTS + 1)) if p]


def test_twenty_clients_at_once_and_one_failing(
    tmp_path: Path, figures: list[Figure], tree_compare: TreeCompare
) -> None:
    figure = published(
        figures, "load", f"one rcpd serve, {CLIENTS} concurrent jobs and a failing one"
    )
    service, data, backup = start(tmp_path)
    try:
        figure.tried += CLIENTS + 1
        problems = one_round(service, data, backup, "r0", tree_compare)
        peak = rss(service.proc.pid, "VmHWM")
        if peak > PEAK_RSS:
            problems.append(f"peak RSS {peak >> 20} MiB")
        with service.client() as client:
            assert len(client.jobs()) == CLIENTS + 1
    finally:
        assert service.stop() == 0, service.stderr
    for problem in problems:
        figure.failed(problem, lost=True)
    figure.survived += CLIENTS + 1 - len(problems)
    assert figure.clean, figure.notes


def local_copy(src: Path, dst: Path, tree_compare: TreeCompare) -> str:
    """A local ``rcp`` of ``src`` to a new ``dst``, checked and removed; what went
    wrong, if anything."""
    done = subprocess.run(
        [*RCP, str(src), str(dst)],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    if done.returncode != 0:
        return f"local rcp: exit {done.returncode}: {done.stderr[-200:]}"
    differences = tree_compare(src, dst)
    shutil.rmtree(dst)
    return f"local rcp: {differences[:3]}" if differences else ""


@pytest.mark.timeout(SOAK + 600)
@pytest.mark.stress
def test_a_ten_minute_soak_keeps_memory_flat(
    tmp_path: Path, figures: list[Figure], tree_compare: TreeCompare
) -> None:
    """Rounds of twenty-one service jobs, each beside a local ``rcp`` of a mixed
    tree, for ten minutes; the service's resident memory, sampled between rounds,
    must stay flat."""
    figure = published(
        figures, "load", "ten-minute soak: service jobs and local copies, memory flat"
    )
    service, data, backup = start(tmp_path)
    mixed = make_tree(tmp_path / "mixed", mixed_tree(seed=11))
    samples: list[int] = []
    try:
        started = time.monotonic()
        round_no = 0
        while time.monotonic() - started < SOAK:
            figure.tried += CLIENTS + 2
            with ThreadPoolExecutor(1) as beside:
                local = beside.submit(
                    local_copy, mixed, tmp_path / "local", tree_compare
                )
                problems = one_round(
                    service, data, backup, f"r{round_no}", tree_compare
                )
                problems += [p for p in [local.result()] if p]
            for problem in problems:
                figure.failed(f"round {round_no}: {problem}", lost=True)
            figure.survived += CLIENTS + 2 - len(problems)
            samples.append(rss(service.proc.pid, "VmRSS"))
            for path in (*data.iterdir(), *backup.iterdir()):
                shutil.rmtree(path)  # the round's trees: the service holds none now
            round_no += 1
    finally:
        assert service.stop() == 0, service.stderr
    early = max(samples[: max(1, len(samples) // 5)])
    late = max(samples[-max(1, len(samples) // 5) :])
    figure.detail = (
        f"{round_no} rounds; service RSS {early >> 20} MiB early, {late >> 20} MiB late"
    )
    if late > early * 1.25 + (32 << 20):
        figure.failed(
            f"memory grew: {early >> 20} MiB early, {late >> 20} MiB late", lost=True
        )
    assert figure.clean, figure.notes


def fair_round(
    service: RcpdServe, data: Path, backup: Path, tag: str, clients: int, jobs: int
) -> list[str]:
    """``clients`` clients (by name) each submit ``jobs`` slow copies at once and
    one more, which the service refuses (its bound per client); while they wait,
    the queue's positions are 1..n in fair turns; then every job must succeed.
    What went wrong."""
    problems: list[str] = []
    tree = make_tree(
        data / f"{tag}-tree", {f"f{i}": File(b"%d" % i * 200) for i in range(40)}
    )
    slow = CopySettings(ops_throttle=20)  # about a second a job, past the burst

    def submit(client: int) -> list[str]:
        ids = []
        with service.client() as session:
            for j in range(jobs):
                dst = f"{backup}/{tag}-c{client}-j{j}"
                ids.append(
                    session.submit([str(tree)], dst, slow, client=f"c{client}")["job"]
                )
            try:
                session.submit(
                    [str(tree)], f"{backup}/{tag}-extra", slow, client=f"c{client}"
                )
                problems.append(f"client {client}: a job beyond its bound was taken")
            except UsageError as exc:
                if "holds" not in str(exc):
                    problems.append(f"client {client}: refused as {exc}")
        return ids

    with ThreadPoolExecutor(clients) as pool:
        submitted = [i for ids in pool.map(submit, range(clients)) for i in ids]
    with service.client() as session:
        jobs = session.jobs()
    queued = sorted(
        (j for j in jobs if j["state"] == "queued"), key=lambda j: j["position"]
    )
    if len(queued) < clients:
        problems.append(f"only {len(queued)} jobs queued: the round proves nothing")
    positions = [j["position"] for j in queued]
    if positions != list(range(1, len(queued) + 1)):
        problems.append(f"queue positions {positions[:10]}...")
    # Fewest running first: a job's turn is its client's jobs running plus those of
    # its jobs queued before it; along the queue the turns never go down.
    running = Counter(j["client"] for j in jobs if j["state"] == "running")
    before: Counter[str] = Counter()
    turns = []
    for job in queued:
        turns.append(running[job["client"]] + before[job["client"]])
        before[job["client"]] += 1
    if turns != sorted(turns):
        problems.append(f"the queue is not in fair turns: {turns}")

    def ended(job: str) -> str:
        with service.client() as session:
            view = session.wait(job, WAIT)
            while view["state"] not in ("succeeded", "failed", "cancelled"):
                view = session.wait(job, WAIT)
        return "" if view["state"] == "succeeded" else f"{job}: {view['state']}"

    with ThreadPoolExecutor(8) as pool:
        problems += [p for p in pool.map(ended, submitted) if p]
    for path in backup.iterdir():
        shutil.rmtree(path)
    return problems


@pytest.mark.timeout(SOAK + 600)
def test_clients_at_once_get_their_turns_fairly_and_lose_nothing(
    tmp_path: Path, figures: list[Figure], scale: Scale
) -> None:
    """``make test``: ten clients, three jobs each, one round; ``make stress``:
    fifty clients, rounds for five minutes, the service's memory flat."""
    clients = scale.trials(10, 50)
    duration = SOAK / 2 if scale.stress else 0.0
    figure = published(
        figures,
        "load",
        f"{clients} clients at once: fair turns, a bound per client, nothing lost",
    )
    service, data, backup = start(tmp_path, "--max-jobs", "2", "--max-client-jobs", "3")
    samples: list[int] = []
    try:
        started, round_no = time.monotonic(), 0
        while round_no == 0 or time.monotonic() - started < duration:
            figure.tried += clients * 3
            problems = fair_round(service, data, backup, f"r{round_no}", clients, 3)
            for problem in problems:
                figure.failed(f"round {round_no}: {problem}", lost=True)
            figure.survived += clients * 3 - len(problems)
            samples.append(rss(service.proc.pid, "VmRSS"))
            round_no += 1
    finally:
        assert service.stop() == 0, service.stderr
    figure.detail = (
        f"{round_no} rounds; service RSS {samples[0] >> 20} to {samples[-1] >> 20} MiB"
    )
    if len(samples) > 4 and max(samples[-2:]) > max(samples[:2]) * 1.25 + (32 << 20):
        figure.failed(f"memory grew: {figure.detail}", lost=True)
    assert figure.clean, figure.notes
