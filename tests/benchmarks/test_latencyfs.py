"""latencyfs: a faithful passthrough, every operation waits, waits overlap, clean unmount.

Each test mounts its own latencyfs (about 0.1 s). Timings are lower bounds only, or
ratios with a wide margin: this machine is noisy, and a slow run must not fail.
"""

from __future__ import annotations

import ctypes
import errno
import json
import math
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks import latencyfs
from benchmarks.latencyfs import DAEMON, LatencyFsError, mounted
from benchmarks.mounts import is_mountpoint
from rcp_core import CopySettings, Preserve, copy
from support.nobody import NOBODY, world_dir
from support.treecmp import TreeCompare
from support.treespec import Dir, Fifo, File, HardLink, Sparse, Spec, Symlink, make_tree

pytestmark = pytest.mark.privileged

DELAY_MS = 0.5
DELAY = DELAY_MS / 1000
MIB = 1024 * 1024
T = 1_600_000_000_123_456_789  # an mtime with a nanosecond part
OWNER = (1234, 5678)
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
SPEC: Spec = {
    ".": Dir(mode=0o755, mtime_ns=T),
    "a.txt": File(
        b"hello\n", mode=0o640, mtime_ns=T + 1, owner=OWNER, xattrs={"user.k": b"v"}
    ),
    "suid": File(b"#!/bin/sh\n", mode=0o4755, mtime_ns=T + 2),
    "d": Dir(mode=0o2750, mtime_ns=T + 3, owner=OWNER, xattrs={"user.d": b"1"}),
    "d/link": Symlink("../a.txt", mtime_ns=T + 4, owner=OWNER),
    "d/dangling": Symlink("nowhere"),
    "d/hard": HardLink("a.txt"),
    "d/e/deep": File(b"x" * 300_000, mtime_ns=T + 5),
    "fifo": Fifo(mode=0o600, mtime_ns=T + 6),
    "sparse": Sparse(4 * MIB, {MIB: b"s" * 8192}, mtime_ns=T + 7),
    "empty": b"",
    "caf\xe9-\udcff": b"non-UTF-8 name",
}
FULL = {"owner": True, "xattrs": True, "hardlinks": True}

AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]

_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True, slots=True)
class Fs:
    backing: Path
    mnt: Path


def require_fuse() -> None:
    if shutil.which("fusermount3") is None or not Path("/dev/fuse").exists():
        pytest.fail(
            "latencyfs needs fuse3 (fusermount3) and /dev/fuse: run `make system`",
            pytrace=False,
        )


def dirs(base: Path) -> tuple[Path, Path]:
    backing, mnt = base / "backing", base / "mnt"
    backing.mkdir()
    mnt.mkdir()
    return backing, mnt


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[Fs]:
    """A latencyfs with the default delay over an empty backing directory."""
    require_fuse()
    backing, mnt = dirs(tmp_path)
    with mounted(backing, mnt, DELAY_MS) as live:
        yield Fs(backing, live)


def daemon_pid(mnt: Path) -> int:
    """The pid of the latencyfs process serving `mnt`, found by its command line."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with suppress(OSError):
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                if argv[0] == os.fsencode(DAEMON) and os.fsencode(mnt) in argv:
                    return int(proc.name)
    raise LookupError(f"no latencyfs process for {mnt}")


def elapsed(fn: Callable[[], object]) -> float:
    """Wall seconds that `fn()` took."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# -- passthrough -----------------------------------------------------------------------


def test_tree_written_through_mount_is_in_backing(
    fs: Fs, tree_compare: TreeCompare
) -> None:
    make_tree(fs.mnt / "t", SPEC)

    assert tree_compare(fs.mnt / "t", fs.backing / "t", **FULL) == []
    assert tree_compare(fs.backing / "t", fs.mnt / "t", **FULL) == []
    sparse = (fs.backing / "t" / "sparse").stat()
    assert sparse.st_size == 4 * MIB
    assert sparse.st_blocks * 512 < MIB  # the hole stayed a hole


def test_tree_in_backing_shows_through_mount(fs: Fs, tree_compare: TreeCompare) -> None:
    make_tree(fs.backing / "t", SPEC)

    assert tree_compare(fs.backing / "t", fs.mnt / "t", **FULL) == []
    assert sorted(os.listdir(fs.mnt / "t" / "d")) == ["dangling", "e", "hard", "link"]
    assert (fs.mnt / "t" / "d" / "link").read_bytes() == b"hello\n"
    ls = subprocess.run(
        ["ls", "-a1", fs.mnt / "t" / "d"], capture_output=True, text=True
    )
    assert ls.stdout.split() == [".", "..", "dangling", "e", "hard", "link"]


def test_metadata_round_trips(fs: Fs) -> None:
    f, b = fs.mnt / "f", fs.backing / "f"
    f.write_bytes(b"data")
    os.chmod(f, 0o751)
    os.chown(f, *OWNER)
    os.utime(f, ns=(T, T + 1))
    os.setxattr(f, "user.a", b"1")
    os.setxattr(f, "user.b", b"\0binary\xff")
    os.removexattr(f, "user.a")
    os.symlink("f", fs.mnt / "s")
    os.chown(fs.mnt / "s", 42, 43, follow_symlinks=False)
    os.utime(fs.mnt / "s", ns=(T, T + 2), follow_symlinks=False)
    os.link(f, fs.mnt / "h")
    os.mknod(fs.mnt / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))

    st = b.lstat()
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o751, *OWNER)
    assert (st.st_atime_ns, st.st_mtime_ns) == (T, T + 1)
    assert os.listxattr(b) == ["user.b"]
    assert os.getxattr(f, "user.b") == b"\0binary\xff"
    link = (fs.backing / "s").lstat()
    assert os.readlink(fs.backing / "s") == "f"
    assert (link.st_uid, link.st_gid, link.st_mtime_ns) == (42, 43, T + 2)
    assert (fs.backing / "h").samefile(b)
    assert st.st_nlink == 2
    assert f.stat().st_ino == (fs.mnt / "h").stat().st_ino == st.st_ino
    dev = (fs.backing / "null").lstat()
    assert stat.S_ISCHR(dev.st_mode)
    assert dev.st_rdev == os.makedev(1, 3)
    assert f.stat().st_mtime_ns == T + 1  # and the mount reports what the backing has


def test_utime_omit_and_now_pass_through(fs: Fs) -> None:
    f = fs.mnt / "f"
    f.write_bytes(b"")
    os.utime(f, ns=(T, T))
    # touch -m: mtime only, atime is UTIME_OMIT; touch -a: atime = UTIME_NOW.
    subprocess.run(["touch", "-m", "-d", "@100.5", str(f)], check=True)
    assert (f.stat().st_atime_ns, f.stat().st_mtime_ns) == (T, 100_500_000_000)
    before = time.time_ns()
    subprocess.run(["touch", "-a", str(f)], check=True)
    st = (fs.backing / "f").stat()
    assert st.st_atime_ns >= before - 10_000_000
    assert st.st_mtime_ns == 100_500_000_000


def test_umask_and_rename_flags(fs: Fs) -> None:
    old = os.umask(0o027)
    try:
        os.close(os.open(fs.mnt / "a", os.O_CREAT | os.O_WRONLY, 0o666))
        os.mkdir(fs.mnt / "d", 0o777)
    finally:
        os.umask(old)
    assert stat.S_IMODE((fs.backing / "a").stat().st_mode) == 0o640
    assert stat.S_IMODE((fs.backing / "d").stat().st_mode) == 0o750
    (fs.mnt / "b").write_bytes(b"keep")

    src, dst = os.fsencode(fs.mnt / "a"), os.fsencode(fs.mnt / "b")
    assert _libc.renameat2(-100, src, -100, dst, RENAME_NOREPLACE) == -1
    assert ctypes.get_errno() == errno.EEXIST
    assert (fs.backing / "b").read_bytes() == b"keep"
    # The VFS checks NOREPLACE itself; EXCHANGE only works if the flag reaches us.
    assert _libc.renameat2(-100, src, -100, dst, RENAME_EXCHANGE) == 0
    assert (fs.backing / "a").read_bytes() == b"keep"
    assert (fs.backing / "b").read_bytes() == b""
    os.rename(fs.mnt / "a", fs.mnt / "b")
    assert sorted(os.listdir(fs.backing)) == ["b", "d"]


def test_sparse_seek_and_copy_file_range(fs: Fs) -> None:
    make_tree(fs.backing, {"s": Sparse(4 * MIB, {MIB: b"x" * 8192, 3 * MIB: b"y"})})
    fd = os.open(fs.mnt / "s", os.O_RDONLY)
    ref = os.open(fs.backing / "s", os.O_RDONLY)
    try:
        for offset, whence in [(0, os.SEEK_DATA), (MIB, os.SEEK_HOLE)]:
            assert os.lseek(fd, offset, whence) == os.lseek(ref, offset, whence)
        assert os.lseek(fd, 0, os.SEEK_DATA) == MIB  # not 0: the binding has SEEK_DATA
        with pytest.raises(OSError, match="No such device or address"):
            os.lseek(fd, 3 * MIB + 4096, os.SEEK_DATA)  # ENXIO: no data after
        out = os.open(fs.mnt / "copy", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            assert os.copy_file_range(fd, out, 8192, MIB, 0) == 8192
        finally:
            os.close(out)
    finally:
        os.close(fd)
        os.close(ref)
    assert (fs.backing / "copy").read_bytes() == b"x" * 8192


def test_permissions_are_checked_like_a_real_fs() -> None:
    """As nobody: mode bits deny, new entries belong to the caller."""
    require_fuse()
    with world_dir() as base:
        backing, mnt = dirs(base)
        (backing / "secret").write_bytes(b"s")
        (backing / "secret").chmod(0o600)
        (backing / "suid").write_bytes(b"#!/bin/sh\n")
        (backing / "suid").chmod(0o4777)
        (backing / "shared").mkdir(mode=0o777)
        (backing / "shared").chmod(0o2777)  # set-gid: new entries take its group
        os.chown(backing / "shared", 0, 4242)
        script = f"""if True:
            import json, os
            out = {{}}
            for name, call in [
                ("read", lambda: open({str(mnt / "secret")!r}, "rb").read()),
                ("create", lambda: open({str(mnt / "shared" / "mine")!r}, "wb").close()),
                ("mkdir", lambda: os.mkdir({str(mnt / "mydir")!r})),
                ("write", lambda: open({str(mnt / "suid")!r}, "ab").write(b"#")),
            ]:
                try:
                    call()
                    out[name] = "ok"
                except OSError as exc:
                    out[name] = exc.errno
            print(json.dumps(out))
        """
        with mounted(backing, mnt, DELAY_MS):
            done = subprocess.run(
                [*AS_NOBODY, sys.executable, "-c", script],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
        mine = (backing / "shared" / "mine").stat()
        suid = (backing / "suid").stat()
    assert json.loads(done.stdout) == {
        "read": errno.EACCES,
        "create": "ok",
        "mkdir": errno.EACCES,
        "write": "ok",
    }
    assert (mine.st_uid, mine.st_gid) == (NOBODY, 4242)
    assert stat.S_IMODE(suid.st_mode) == 0o777  # a write by another user drops set-id


# -- latency ---------------------------------------------------------------------------


def _stat(path: Path) -> None:
    path.stat()


def _listdir(path: Path) -> None:
    os.listdir(path.parent)


def _read(path: Path) -> None:
    path.read_bytes()


def _getxattr(path: Path) -> None:
    with suppress(OSError):
        os.getxattr(path, "user.missing")


def _statvfs(path: Path) -> None:
    os.statvfs(path)


@pytest.mark.parametrize("op", [_stat, _listdir, _read, _getxattr, _statvfs])
def test_every_operation_waits(fs: Fs, op: Callable[[Path], None]) -> None:
    n = 100
    for i in range(n):
        (fs.backing / f"f{i}").write_bytes(b"x")
    paths = [fs.mnt / f"f{i}" for i in range(n)]

    start = time.perf_counter()
    for p in paths:
        op(p)
    took = time.perf_counter() - start

    assert took >= n * DELAY, f"{n} calls took {took * 1000:.1f} ms"


def test_concurrent_requests_overlap(fs: Fs) -> None:
    threads, per_thread = 8, 25
    n = threads * per_thread
    for i in range(n):
        (fs.backing / f"f{i}").write_bytes(b"x")
    paths = [fs.mnt / f"f{i}" for i in range(n)]
    _ = [p.stat() for p in paths[:20]]  # warm up the daemon's threads

    sequential = elapsed(lambda: [p.stat() for p in paths])

    def batch(k: int) -> None:
        for p in paths[k::threads]:
            p.stat()

    with ThreadPoolExecutor(threads) as pool:
        parallel = elapsed(lambda: list(pool.map(batch, range(threads))))

    assert sequential >= n * DELAY
    assert parallel < 0.6 * sequential, (
        f"{n} stats: {sequential * 1000:.0f} ms in one thread, "
        f"{parallel * 1000:.0f} ms in {threads}"
    )


def test_many_concurrent_requests_overlap(tmp_path: Path) -> None:
    """64 callers wait side by side: far faster than a 10-thread server could serve.

    One thread's stats give a lower bound on the round trips per stat (each sleeps the
    delay, one after another), so on a 10-wide server the parallel run would need at
    least stats x round trips x delay / 10. The names are looked up for the first time
    in the parallel run, all in one directory: such lookups are parallel too. The delay
    (10 ms) dwarfs a stat's CPU, so two busy cores cannot close the margin (64-wide
    takes about a fifth of what 10-wide must).
    """
    require_fuse()
    threads, per_thread, delay_ms, sample = 64, 20, 10.0, 30
    n = threads * per_thread
    backing, mnt = dirs(tmp_path)
    for i in range(n + sample):
        (backing / f"f{i}").write_bytes(b"x")
    paths = [mnt / f"f{i}" for i in range(n)]

    def batch(k: int) -> None:
        for p in paths[k::threads]:
            p.stat()

    with mounted(backing, mnt, delay_ms), ThreadPoolExecutor(threads) as pool:
        one_by_one = elapsed(
            lambda: [(mnt / f"f{n + i}").stat() for i in range(sample)]
        )
        parallel = elapsed(lambda: list(pool.map(batch, range(threads))))

    round_trips = math.floor(one_by_one / sample / (delay_ms / 1000))
    ten_wide = n * round_trips * (delay_ms / 1000) / 10
    assert round_trips >= 1
    assert parallel < ten_wide / 2, (
        f"{n} stats of {round_trips} round trips in {threads} threads: "
        f"{parallel * 1000:.0f} ms; 10 at a time needs {ten_wide * 1000:.0f} ms"
    )


# -- rcp through the mount -------------------------------------------------------------


def test_rcp_copy_into_mount_is_identical(
    fs: Fs, tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "src", SPEC)
    everything = CopySettings(preserve=Preserve.parse("all"))

    copy([str(src)], str(fs.mnt / "dst"), everything)
    copy([str(fs.mnt / "dst")], str(fs.mnt / "again"), everything)

    assert tree_compare(src, fs.mnt / "dst", **FULL, sparse=True) == []
    assert tree_compare(src, fs.backing / "dst", **FULL, sparse=True) == []
    assert tree_compare(src, fs.backing / "again", **FULL, sparse=True) == []


# -- mount lifecycle -------------------------------------------------------------------


def test_unmount_cleans_up_when_body_raises(tmp_path: Path) -> None:
    require_fuse()
    backing, mnt = dirs(tmp_path)
    pids: list[int] = []

    def failing_test() -> None:
        with mounted(backing, mnt) as live:
            pids.append(daemon_pid(live))
            (live / "f").write_bytes(b"x")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        failing_test()
    assert not is_mountpoint(mnt)
    assert not Path(f"/proc/{pids[0]}").exists()
    assert (backing / "f").read_bytes() == b"x"


def test_busy_mount_is_detached_and_daemon_stopped(tmp_path: Path) -> None:
    require_fuse()
    backing, mnt = dirs(tmp_path)
    held: list[int] = []

    def failing_test() -> None:
        with mounted(backing, mnt) as live:
            held.append(daemon_pid(live))
            held.append(os.open(live / "open", os.O_CREAT | os.O_WRONLY, 0o644))
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        failing_test()
    pid, fd = held
    with suppress(OSError):  # the connection is gone: close may report it
        os.close(fd)
    assert not is_mountpoint(mnt)
    assert not Path(f"/proc/{pid}").exists()


def test_dead_daemon_mount_is_removed(tmp_path: Path) -> None:
    require_fuse()
    backing, mnt = dirs(tmp_path)
    with mounted(backing, mnt) as live:
        os.kill(daemon_pid(live), signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not _dead(live) and time.monotonic() < deadline:
            time.sleep(0.01)
    assert not is_mountpoint(mnt)


def _dead(mnt: Path) -> bool:
    try:
        os.stat(mnt)
    except OSError as exc:
        return exc.errno == errno.ENOTCONN
    return False


def test_mount_failure_reports_daemon_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon cannot start: its libfuse is an empty file (the loader exits 127)."""
    require_fuse()
    backing, mnt = dirs(tmp_path)
    (tmp_path / "libfuse3.so.3").write_bytes(b"")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    with (
        pytest.raises(LatencyFsError, match=r"(?s)exited 127 .*libfuse3\.so\.3"),
        mounted(backing, mnt),
    ):
        pass
    assert not is_mountpoint(mnt)


def test_daemon_options_are_checked(tmp_path: Path) -> None:
    require_fuse()
    backing, mnt = dirs(tmp_path)
    with (
        pytest.raises(LatencyFsError, match=r"exited 1 .*delay_ms must be a number"),
        mounted(backing, mnt, 1e300),
    ):
        pass
    assert not is_mountpoint(mnt)


def test_missing_daemon_says_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backing, mnt = dirs(tmp_path)
    monkeypatch.setattr(latencyfs, "DAEMON", tmp_path / "latencyfs")
    with (
        pytest.raises(LatencyFsError, match=r"not built: run `make latencyfs`"),
        mounted(backing, mnt),
    ):
        pass


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    backing, mnt = dirs(tmp_path)
    with (
        pytest.raises(LatencyFsError, match="not a directory"),
        mounted(backing / "missing", mnt),
    ):
        pass
    with pytest.raises(ValueError, match="delay_ms"), mounted(backing, mnt, -1):
        pass
