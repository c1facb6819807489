"""Helper processes (rcp_core.engine.helpers.caller / rcp_core.engine.helpers.process): real
spawned helpers, real trees.

Most copies here run with ``max_processes`` set, so the run waits until its helpers
can take work and they do take some (asserted through ``Engine.crew.batches``);
``lazy_engine`` makes the automatic kind, started when work first queues up.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from rcp_core import CopyFailedError, CopySettings, DryRun, ExistingPolicy, hookimpl
from rcp_core.engine.copyrun import Engine
from rcp_core.engine.helpers.caller import FINAL_TIMEOUT
from rcp_core.engine.helpers.channel import (
    MAX_MESSAGE,
    Channel,
    ChannelError,
    Counts,
    Final,
    Finish,
    Limit,
    Ready,
    Record,
    Setup,
)
from rcp_core.engine.helpers.feeding import TASK_ENTRIES, Backlog, backlog_bound
from rcp_core.engine.helpers.team import Team
from rcp_core.paths import plan_jobs
from rcp_core.run.pool import WorkPool
from rcp_core.run.progress import Progress
from rcp_core.run.summary import Summary
from rcp_core.run.tuning import Concurrency
from rcp_core.site.plugins import plugin_manager
from support.treecmp import TreeCompare
from support.treespec import Dir, Entry, Fifo, File, HardLink, Symlink, make_tree

T0 = 1_600_000_000 * 10**9


def wide_tree(root: Path, dirs: int = 12, files: int = 100) -> Path:
    """``dirs`` directories (one nested level, old mtimes) of ``files`` small files."""
    spec: dict[str, Entry] = {".": Dir(0o755, T0)}
    for d in range(dirs):
        spec[f"d{d}"] = Dir(0o750, T0 + d)
        spec[f"d{d}/sub"] = Dir(0o700, T0 + 100 + d)
        spec[f"d{d}/sub/deep"] = File(b"deep %d" % d, 0o600, T0)
        for f in range(files):
            spec[f"d{d}/f{f}"] = File(b"%d/%d\n" % (d, f) * (f % 7), 0o644, T0 + f)
        spec[f"d{d}/link"] = Symlink(f"f{d}")
        spec[f"d{d}/fifo"] = Fifo(0o640, T0)
    return make_tree(root, spec)


def team_of(engine: Engine) -> Team:
    """The engine's team of helpers, once it was built."""
    assert engine.crew is not None
    assert engine.crew.team is not None
    return engine.crew.team


def run(src: Path, dst: Path, settings: CopySettings) -> tuple[Engine, Summary]:
    jobs = plan_jobs([str(src), str(dst)], settings)
    engine = Engine(jobs, settings)
    return engine, engine.run()


def test_helpers_copy_a_tree_exactly_and_count_like_one_process(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = wide_tree(tmp_path / "src")
    engine, summary = run(src, tmp_path / "many", CopySettings(max_processes=3))
    assert engine.crew is not None
    assert engine.crew.batches > 0
    assert tree_compare(src, tmp_path / "many") == []
    _, alone = run(src, tmp_path / "one", CopySettings(max_processes=1))
    counts = {k: v for k, v in summary.counts.items() if not k.startswith("method.")}
    assert counts == {
        k: v for k, v in alone.counts.items() if not k.startswith("method.")
    }
    assert summary["copied.files"] == 12 * 101
    assert summary["copied.dirs"] == 1 + 12 * 2
    assert summary["copied.specials"] == 12


def test_directory_metadata_comes_after_files_copied_by_helpers(
    tmp_path: Path,
) -> None:
    """Each directory's mtime is the source's although helpers created its files."""
    src = wide_tree(tmp_path / "src", dirs=6, files=300)
    engine, _ = run(src, tmp_path / "dst", CopySettings(max_processes=2))
    assert engine.crew is not None
    assert engine.crew.batches > 0
    for d in range(6):
        for rel in (f"d{d}", f"d{d}/sub"):
            got, want = (tmp_path / "dst" / rel).stat(), (src / rel).stat()
            assert (got.st_mtime_ns, got.st_mode) == (want.st_mtime_ns, want.st_mode)


def test_hard_links_across_directories_stay_linked(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """Hard-linked files go back to the caller, which owns the link map."""
    spec: dict[str, Entry] = {}
    for d in range(8):
        for f in range(64):
            spec[f"d{d}/f{f}"] = File(b"plain %d %d" % (d, f))
        spec[f"d{d}/shared"] = (
            File(b"one inode for all") if d == 0 else HardLink("d0/shared")
        )
        spec[f"d{d}/pair-a"] = File(b"pair %d" % d)
        spec[f"d{d}/pair-b"] = HardLink(f"d{d}/pair-a")
    src = make_tree(tmp_path / "src", spec)
    engine, summary = run(src, tmp_path / "dst", CopySettings(max_processes=3))
    assert engine.crew is not None
    assert engine.crew.batches > 0
    assert tree_compare(src, tmp_path / "dst", hardlinks=True) == []
    inodes = {(tmp_path / "dst" / f"d{d}" / "shared").stat().st_ino for d in range(8)}
    assert len(inodes) == 1
    assert summary["copied.hardlinks"] == 7 + 8


def test_hard_linked_symlinks_across_directories_stay_linked(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """A symlink with several names goes back to the caller like a hard-linked file:
    one inode in the copy, wherever the helpers met its names."""
    spec: dict[str, Entry] = {}
    for d in range(8):
        for f in range(64):
            spec[f"d{d}/f{f}"] = File(b"plain %d %d" % (d, f))
        spec[f"d{d}/shared"] = Symlink("../d0/f0") if d == 0 else HardLink("d0/shared")
        spec[f"d{d}/pair-a"] = Symlink(f"nowhere {d}")
        spec[f"d{d}/pair-b"] = HardLink(f"d{d}/pair-a")
    src = make_tree(tmp_path / "src", spec)
    engine, summary = run(src, tmp_path / "dst", CopySettings(max_processes=3))
    assert engine.crew is not None
    assert engine.crew.batches > 0
    assert tree_compare(src, tmp_path / "dst", hardlinks=True) == []
    shared = [os.lstat(tmp_path / "dst" / f"d{d}" / "shared") for d in range(8)]
    assert len({st.st_ino for st in shared}) == 1
    assert shared[0].st_nlink == 8
    assert os.readlink(tmp_path / "dst" / "d5" / "shared") == "../d0/f0"
    assert summary["copied.symlinks"] == 1 + 8
    assert summary["copied.hardlinks"] == 7 + 8


def test_mirroring_with_helpers_replaces_stale_files_and_deletes_extras(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """--overwrite --delete: helpers replace what differs, the caller prunes."""
    src = wide_tree(tmp_path / "src", dirs=6, files=120)
    stale: dict[str, Entry] = {}
    for d in range(6):
        stale[f"d{d}/f{d}"] = File(b"stale and longer than the source's", 0o600, T0)
        stale[f"d{d}/extra{d}"] = b"not in the source"
        stale[f"d{d}/sub/extra-dir/x"] = b"nor this"
    make_tree(tmp_path / "dst", stale)
    settings = CopySettings(
        existing=ExistingPolicy.OVERWRITE, delete=True, max_processes=2
    )
    engine, summary = run(src, tmp_path / "dst", settings)
    assert engine.crew is not None
    assert engine.crew.batches > 0
    assert tree_compare(src, tmp_path / "dst") == []
    assert summary["removed.files"] >= 6 * 2
    assert summary["removed.dirs"] >= 6


def test_dry_run_lines_from_helpers_reach_the_callers_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    src = wide_tree(tmp_path / "src", dirs=4, files=80)
    caplog.set_level(logging.INFO, logger="rcp_core")
    settings = CopySettings(max_processes=2, dry_run=DryRun.ALL)
    engine, summary = run(src, tmp_path / "dst", settings)
    assert engine.crew is not None
    assert engine.crew.batches > 0
    assert not (tmp_path / "dst").exists()
    lines = [
        r.getMessage() for r in caplog.records if "would copy file" in r.getMessage()
    ]
    assert len(lines) == summary["copied.files"] == 4 * 81
    assert f"would copy file '{os.path.join('src', 'd3', 'f79')}'" in lines


@pytest.fixture
def immutable_dir(ext4_tmp_path: Path) -> Path:
    """A destination directory with ``chattr +i``: every create in it fails (EPERM)."""
    locked = ext4_tmp_path / "dst" / "locked"
    locked.mkdir(parents=True)
    subprocess.run(["chattr", "+i", str(locked)], check=True)
    yield locked
    subprocess.run(["chattr", "-i", str(locked)], check=True)


@pytest.mark.parametrize("fail_early", [False, True])
def test_errors_in_helper_batches_are_reported_once_and_counted(
    ext4_tmp_path: Path, immutable_dir: Path, fail_early: bool
) -> None:
    base = ext4_tmp_path
    spec: dict[str, Entry] = {f"locked/f{i}": b"x" for i in range(200)}
    spec.update({f"fine{d}/g{i}": b"ok" for d in range(4) for i in range(100)})
    make_tree(base / "src", spec)
    settings = CopySettings(
        existing=ExistingPolicy.OVERWRITE, fail_early=fail_early, max_processes=2
    )
    with pytest.raises(CopyFailedError) as info:
        run(base / "src", base / "dst", settings)
    err = info.value
    assert err.stopped is fail_early
    found = {key: count for key, count, _ in err.errors}
    assert os.listdir(immutable_dir) == []
    if fail_early:
        # Workers already past their check may each add one more before they stop.
        assert 1 <= err.summary["errors"] <= 4
        assert set(found) == {"copy: Operation not permitted"}
    else:
        assert found == {
            "copy: Operation not permitted": 200,
            "set directory metadata: Operation not permitted": 1,
        }
        assert err.summary["errors"] == 201
        assert err.summary["copied.files"] == 400


def signalling_a_helper(
    src: Path, dst: Path, sig: signal.Signals
) -> tuple[Engine, threading.Event]:
    """An engine (two processes) that sends ``sig`` to its helper once the helper has
    taken work; the event is set when the signal was sent."""
    settings = CopySettings(max_processes=2)
    engine = Engine(plan_jobs([str(src), str(dst)], settings), settings)
    assert engine.crew is not None
    sent = threading.Event()

    def signal_helper(progress: Progress) -> None:
        assert engine.crew is not None
        helper = team_of(engine).helpers[0]
        if not sent.is_set() and helper.sent and helper.proc is not None:
            helper.proc.send_signal(sig)
            sent.set()

    engine.observers.append(signal_helper)
    engine.progress_interval = 0.0
    return engine, sent


def test_a_killed_helper_fails_the_run_in_bounded_time(tmp_path: Path) -> None:
    """Its batches in flight are errors, the run stops, and nothing hangs."""
    src = wide_tree(tmp_path / "src", dirs=40, files=500)
    engine, killed = signalling_a_helper(src, tmp_path / "dst", signal.SIGKILL)
    started = time.monotonic()
    with pytest.raises(CopyFailedError) as info:
        engine.run()
    assert time.monotonic() - started < FINAL_TIMEOUT / 2  # no wait for its Final
    assert killed.is_set()
    assert info.value.stopped
    assert any("helper process exited" in key for key, _, _ in info.value.errors)
    assert team_of(engine).helpers[0].proc is not None
    assert team_of(engine).helpers[0].proc.returncode == -signal.SIGKILL


def test_helpers_do_not_import_from_the_callers_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory holding an ``rcp_core`` package cannot stand in for ours."""
    trap = tmp_path / "cwd" / "rcp_core"
    trap.mkdir(parents=True)
    marker = tmp_path / "imported"
    (trap / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    src = wide_tree(tmp_path / "src", dirs=3, files=40)
    monkeypatch.chdir(tmp_path / "cwd")
    engine, summary = run(src, tmp_path / "dst", CopySettings(max_processes=2))
    assert engine.crew is not None
    assert engine.crew.batches > 0
    assert summary["copied.files"] == 3 * 41
    assert not marker.exists()


def lazy_engine(src: Path, dst: Path) -> Engine:
    """An engine with two processes whose helper starts the automatic way (when work
    first queues up), whatever this machine's CPU count."""
    settings = CopySettings(max_processes=2)
    engine = Engine(plan_jobs([str(src), str(dst)], settings), settings)
    assert engine.crew is not None
    engine.crew.eager = False
    return engine


def test_a_tree_done_before_work_queues_up_spawns_no_helper(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A small tree is copied before the first sample finds work waiting: no helper
    process is paid for, and nothing is logged about it."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "one").write_bytes(b"1")
    engine = lazy_engine(tmp_path / "src", tmp_path / "dst")
    with caplog.at_level(logging.DEBUG, logger="rcp_core"):
        assert engine.run()["copied.files"] == 1
    assert engine.crew is not None
    assert engine.crew.team is None  # not even built: its modules are not imported
    assert [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
    ] == []


def test_a_run_whose_helpers_never_start_does_not_import_their_machinery(
    tmp_path: Path,
) -> None:
    """Sockets, pickle, subprocess and the channel's messages cost a command-line run
    about 17 ms: a run that may use helpers but never starts one does not pay it."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "one").write_bytes(b"1")
    code = (
        "import sys; from rcp_core import CopySettings, copy; "
        "copy(sys.argv[1], sys.argv[2], CopySettings(max_processes=2)).counts; "
        "print(*(m in sys.modules for m in ('rcp_core.engine.helpers.channel', "
        "'rcp_core.engine.helpers.team', 'rcp_core.engine.helpers.caller', "
        "'rcp_core.engine.helpers.feeding')))"
    )
    asked = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "src"), str(tmp_path / "dst")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert asked.stdout.split() == ["True"] * 4  # asked for: started before the walk
    code = code.replace("CopySettings(max_processes=2)", "CopySettings()")
    auto = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "src"), str(tmp_path / "dst2")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert auto.stdout.split() == ["False"] * 4
    assert (tmp_path / "dst2" / "one").read_bytes() == b"1"


def test_automatic_helpers_start_once_work_queues_up(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = wide_tree(tmp_path / "src", dirs=30, files=300)
    engine = lazy_engine(src, tmp_path / "dst")
    summary = engine.run()
    assert summary["errors"] == 0
    assert summary["copied.files"] == 30 * 301
    assert engine.crew is not None
    proc = team_of(engine).helpers[0].proc
    assert proc is not None
    assert proc.returncode is not None  # reaped
    assert tree_compare(src, tmp_path / "dst") == []


def test_helpers_follow_the_callers_limit_from_their_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, tree_compare: TreeCompare
) -> None:
    """A limit set before the helpers started reaches them with their setup: each
    runs that many batches at once (it says so in the caller's log). The run's own
    limit is fixed at 1, so nothing else sets 3."""
    src = wide_tree(tmp_path / "src", dirs=30, files=300)
    settings = CopySettings(max_workers=1, max_processes=2)
    engine = Engine(plan_jobs([str(src), str(tmp_path / "dst")], settings), settings)
    assert engine.crew is not None
    engine.crew.set_limit(3)
    with caplog.at_level(logging.DEBUG, logger="rcp_core"):
        assert engine.run()["errors"] == 0
    assert team_of(engine).helpers[0].limit == 3
    assert "helper: 3 batches at once" in [r.getMessage() for r in caplog.records]
    assert tree_compare(src, tmp_path / "dst") == []


def test_a_team_closed_before_it_started_never_starts(tmp_path: Path) -> None:
    engine = lazy_engine(wide_tree(tmp_path / "src", 1, 1), tmp_path / "dst")
    assert engine.crew is not None
    engine.crew.close()
    engine.crew.start()
    assert engine.crew.team is None


def test_helpers_leave_ctrl_c_to_their_caller(tmp_path: Path) -> None:
    """SIGINT (a terminal's Ctrl-C reaches the whole group) does not end a helper."""
    src = wide_tree(tmp_path / "src", dirs=30, files=300)
    engine, interrupted = signalling_a_helper(src, tmp_path / "dst", signal.SIGINT)
    summary = engine.run()
    assert interrupted.is_set()
    assert summary["errors"] == 0
    assert summary["copied.files"] == 30 * 301
    assert team_of(engine).helpers[0].proc is not None
    assert team_of(engine).helpers[0].proc.returncode == 0


class _Unsent:
    """A plugin object registered per call: helpers cannot load it themselves."""

    @hookimpl
    def rcp_progress(self, progress: Progress) -> None:
        pass


@pytest.mark.parametrize(
    ("settings", "plugins"),
    [
        (CopySettings(max_processes=1), []),
        (CopySettings(max_processes=3, ops_throttle=1000), []),
        (CopySettings(max_processes=3), [_Unsent()]),
    ],
    ids=["one process asked", "ops throttle", "registered plugin"],
)
def test_no_helpers_where_they_cannot_help_or_serve(
    tmp_path: Path, settings: CopySettings, plugins: list[object]
) -> None:
    src = wide_tree(tmp_path / "src", dirs=2, files=5)
    jobs = plan_jobs([str(src), str(tmp_path / "dst")], settings)
    engine = Engine(jobs, settings, plugins=plugin_manager(plugins))
    assert engine.crew is None
    assert engine.run()["copied.files"] == 2 * 6


def test_no_helpers_for_a_single_file(tmp_path: Path) -> None:
    (tmp_path / "one").write_bytes(b"1")
    settings = CopySettings(max_processes=4)
    engine = Engine(
        plan_jobs([str(tmp_path / "one"), str(tmp_path / "two")], settings), settings
    )
    assert engine.crew is None


def test_builtin_concurrency_asks_for_a_process_per_cpu_on_local_disks(
    tmp_path: Path,
) -> None:
    """``max_processes`` overrides the plugins' choice, else the choice stands."""
    (tmp_path / "src").mkdir()
    jobs = plan_jobs([str(tmp_path / "src"), str(tmp_path / "dst")], CopySettings())
    engine = Engine(jobs, CopySettings())
    cpus = len(os.sched_getaffinity(0))
    assert engine.concurrency.processes == cpus
    assert (engine.crew is not None) == (cpus > 1)
    forced = Engine(jobs, CopySettings(max_processes=5))
    assert forced.concurrency.processes == 5


# -- the helper process on its own --------------------------------------------------


def spawn_helper() -> tuple[Channel, subprocess.Popen[bytes]]:
    chan, theirs = Channel.pair()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-P",
            "-m",
            "rcp_core.engine.helpers.process",
            str(theirs.fileno()),
        ],
        pass_fds=[theirs.fileno()],
    )
    theirs.close()
    return chan, proc


def setup_message() -> Setup:
    return Setup(
        settings=CopySettings(),
        umask=0o022,
        jobs=[],
        storage=[],
        concurrency=Concurrency(1),
        entry_points=False,
        log_level=logging.WARNING,
    )


def test_a_helper_serves_until_finish_then_reports_final_counts() -> None:
    chan, proc = spawn_helper()
    try:
        chan.send(setup_message())
        got = chan.recv()
        assert got is not None
        assert isinstance(got[0], Ready)
        chan.send(Finish())
        got = chan.recv()
        assert got is not None
        assert isinstance(got[0], Final)
        assert got[0].counts["copied.files"] == 0
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        chan.close()


def test_a_helper_runs_as_many_batches_at_once_as_it_is_told() -> None:
    chan, proc = spawn_helper()
    try:
        setup = setup_message()
        chan.send(
            Setup(
                settings=setup.settings,
                umask=setup.umask,
                jobs=[],
                storage=[],
                concurrency=Concurrency(1, 1, 8),
                entry_points=False,
                log_level=logging.DEBUG,
            )
        )
        got = chan.recv()
        assert got is not None
        assert isinstance(got[0], Ready)
        chan.send(Limit(4))
        got = chan.recv()
        while got is not None and isinstance(got[0], Counts):
            got = chan.recv()
        assert got is not None
        assert got[0] == Record("rcp_core", logging.DEBUG, "helper: 4 batches at once")
        chan.send(Finish())
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        chan.close()


def test_a_helper_exits_when_its_caller_goes_away() -> None:
    chan, proc = spawn_helper()
    try:
        chan.send(setup_message())
        got = chan.recv()
        assert got is not None
        assert isinstance(got[0], Ready)
        chan.close()
        assert proc.wait(timeout=30) in (0, 1)
    finally:
        proc.kill()


def test_a_helper_exits_when_its_caller_dies_with_its_messages_unread() -> None:
    """A caller killed with the helper's messages unread resets the socket (the
    helper's read fails with ECONNRESET instead of seeing the end): the helper must
    leave all the same. Once it hung, waiting for work that would never come."""
    chan, proc = spawn_helper()
    try:
        setup = setup_message()
        chan.send(replace(setup, log_level=logging.DEBUG))
        got = chan.recv()
        assert got is not None
        assert isinstance(got[0], Ready)
        chan.send(Limit(4))  # answered by a log record, left unread
        readable, _, _ = select.select([chan.sock], [], [], 30)
        assert readable
        chan.close()
        assert proc.wait(timeout=30) in (0, 1)
    finally:
        proc.kill()


def test_channel_refuses_oversized_messages_and_carries_descriptors(
    tmp_path: Path,
) -> None:
    a, b_sock = Channel.pair()
    b = Channel(b_sock)
    try:
        with pytest.raises(ChannelError):
            a.send(b"x" * (MAX_MESSAGE + 1))
        (tmp_path / "f").write_bytes(b"through the socket")
        fd = os.open(tmp_path / "f", os.O_RDONLY)
        try:
            a.send(("file", 1), [fd])
        finally:
            os.close(fd)
        got = b.recv()
        assert got is not None
        message, fds = got
        assert message == ("file", 1)
        assert len(fds) == 1
        with os.fdopen(fds[0], "rb") as f:
            assert f.read() == b"through the socket"
        a.close()
        assert b.recv() is None
    finally:
        b.close()


def test_channel_is_a_seqpacket_pair() -> None:
    a, b = Channel.pair()
    try:
        assert a.sock.type == socket.SOCK_SEQPACKET
        assert b.type == socket.SOCK_SEQPACKET
    finally:
        a.close()
        b.close()


# -- the pool's side of it ----------------------------------------------------------


def test_steal_takes_the_oldest_item_of_the_best_rank() -> None:
    pool = WorkPool(1, 1, on_crash=lambda exc: None)

    def a(tally: object) -> None: ...

    def b(tally: object) -> None: ...

    for i in range(3):
        pool.push(a, i)
        pool.push(b, i)
    rank = {a: 1, b: 0}
    item = pool.steal(lambda it: rank.get(it[0]), give_up=lambda: False)
    assert item == (b, (0,))
    item = pool.steal(lambda it: 1 if it[0] is a else None, give_up=lambda: False)
    assert item == (a, (0,))
    assert pool.steal(lambda it: None, give_up=lambda: True) is None
    assert pool.outstanding == 6  # stolen items stay reserved
    pool.finish_external()
    pool.finish_external()
    assert pool.outstanding == 4


def test_a_reserved_pool_does_not_end_until_the_work_elsewhere_is_done() -> None:
    pool = WorkPool(2, 2, on_crash=lambda exc: None)
    pool.reserve()
    ran: list[int] = []
    ended = threading.Event()

    def runner() -> None:
        pool.run()
        ended.set()

    thread = threading.Thread(target=runner)
    thread.start()
    assert not ended.wait(0.3)
    pool.push(lambda tally, n: ran.append(n), 7)
    pool.finish_external()
    assert ended.wait(10)
    thread.join()
    assert ran == [7]


def test_sending_to_a_gone_helper_raises_an_os_error() -> None:
    """A channel whose peer is gone raises a pipe error (the feeder's cue)."""
    a, b = Channel.pair()
    b.close()
    try:
        with pytest.raises((BrokenPipeError, ConnectionResetError)):
            a.send(Ready())
    finally:
        a.close()


def test_the_backlog_sends_ahead_by_entries_up_to_its_bound() -> None:
    """Small tasks pass while fewer entries than the bound are out (so one task may
    pass it); a task coming back makes room; a smaller bound waits for returns;
    wake lets a waiting feeder through at the end."""
    backlog = Backlog(backlog_bound(1))
    assert backlog_bound(1) == 2 * TASK_ENTRIES
    sent = 0
    while backlog.wait_for_room(timeout=0):
        backlog.add(16)  # a directory of 16 files
        sent += 1
    assert sent == 2 * TASK_ENTRIES // 16
    backlog.done(16)
    assert backlog.wait_for_room(timeout=0)
    backlog.add(TASK_ENTRIES)  # a full task passes the bound by at most itself
    assert not backlog.wait_for_room(timeout=0)
    backlog.resize(backlog_bound(3))
    assert backlog.wait_for_room(timeout=0)
    backlog.resize(backlog_bound(0))
    assert not backlog.wait_for_room(timeout=0.01)
    backlog.wake()
    assert backlog.wait_for_room(timeout=0)
