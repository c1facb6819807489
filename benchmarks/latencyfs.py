"""latencyfs: a FUSE passthrough sleeping in every operation, a stand-in for NFS/Lustre.

Shared filesystems are slow per operation, not per byte: each stat, open or 128 KiB
write waits a round trip. latencyfs mounts a backing directory and sleeps `delay` before
serving every request (getattr/lookup, readdir, open, create, mkdir, unlink, rmdir,
rename, symlink, readlink, link, chmod, chown, utimens, truncate, read, write, flush,
release, fsync, statfs, the xattr calls, fallocate, lseek, copy_file_range, ...).

    with mounted(backing, mountpoint, delay_ms=0.5) as mnt:
        ...  # the daemon is a subprocess: its CPU is not the measured tool's

    python -m benchmarks.latencyfs BACKING MOUNTPOINT [--delay-ms 0.5] [--cache-s 0]
        [--foreground]

The daemon is C (`latencyfs/latencyfs.c`, libfuse 3 high-level API), built by
`make latencyfs` (`make pytest` builds it first); without it `mounted` raises
`LatencyFsError` saying so.

Invariants:
- Latency overlaps: up to 256 requests are served at once (libfuse threads; the
  kernel also keeps up to 256 background requests, reads ahead and releases, in
  flight), each sleeping its delay with nanosleep, so 64 concurrent callers wait about
  one delay each, not one after another; like an NFS server's thread pool and a
  client's RPC slots. Lookups and readdirs in one directory run in parallel too (as
  on NFS; libfuse 3.14 forgets to tell the kernel so, the daemon does). Creates,
  unlinks and renames in one directory are serialized by the kernel, as on any
  filesystem. The daemon spends 10-25 us of CPU per request (mostly the kernel's:
  the device round trip, the wake-up after the sleep), plus what the backing
  filesystem spends, so the delay, not the daemon, is what a copy onto it measures.
- By default every request reaches the daemon: the kernel's entry, attribute and
  negative caches time out at once (NFS `actimeo=0`), so a path walk costs a LOOKUP
  per component plus a GETATTR per directory searched (the kernel's permission check):
  stat("f") is 3 round trips, stat("d/f") 5. `cache_s` > 0 keeps names and
  attributes that long, like NFS's attribute cache (then stat("f") just after a stat
  of it costs nothing, and changes made in the backing show up late). Data goes
  through the page cache, dropped at each open (close-to-open, as NFS).
- Faithful passthrough: ns times (UTIME_NOW/UTIME_OMIT kept), modes, owners,
  symlinks, hard links (`use_ino`: st_ino and st_nlink are the backing's), sparse files
  (lseek SEEK_DATA/SEEK_HOLE, fallocate), xattrs, FIFOs and devices via mknod, rename
  flags (RENAME_NOREPLACE/EXCHANGE via renameat2), copy_file_range done by the backing
  (server-side, as NFS 4.2).
- Permissions as a real fs: mounted `allow_other,default_permissions`, so the kernel
  checks mode bits against the caller; the daemon (root) then acts. New entries get the
  caller's uid and gid (the parent's gid under a set-gid directory); the kernel applies
  the caller's umask and the daemon runs with umask 0. Set-id bits are cleared by the
  kernel on write and chown (HANDLE_KILLPRIV is turned off).
Faults on request (`Faults`, `latencyfs/faults.c`): a table of rules makes chosen
requests fail with an errno, return short reads, or wait longer, each at most N times,
after K matches, or at random with a seeded generator; every injection is logged, so a
test knows exactly what the tool under test met.

Not emulated: reflink (FICLONE/FICLONERANGE fail with EOPNOTSUPP: FUSE has no
remap_file_range, so copiers fall back to copy_file_range), ioctls, and locks (kept by
the kernel, local to this machine). POSIX ACLs are stored in the backing (as xattrs)
but not enforced on the mount (no FUSE_POSIX_ACL). A file unlinked while open lives on
in the backing as `.fuse_hiddenNNNN` until closed (libfuse's high-level API without
hard_remove).
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from benchmarks.mounts import is_mountpoint

DEFAULT_DELAY_MS = 0.5
MOUNT_TIMEOUT = 10.0
EXIT_TIMEOUT = 10.0
DAEMON = Path(__file__).resolve().parent / "latencyfs" / "latencyfs"


class LatencyFsError(RuntimeError):
    """The mount did not come up or did not go away; the message has the daemon's stderr."""


def daemon_argv(
    backing: Path,
    mountpoint: Path,
    delay_ms: float,
    cache_s: float,
    faults: Faults | None = None,
) -> list[str]:
    """The command serving `backing` at `mountpoint` in the foreground."""
    if not os.access(DAEMON, os.X_OK):
        raise LatencyFsError(
            f"the latencyfs daemon {DAEMON} is not built: run `make latencyfs`"
        )
    options = f"delay_ms={delay_ms!r},cache_s={cache_s!r}"
    if faults is not None:
        options += f",faults={faults.rules},fault_log={faults.log}"
    return [
        os.fspath(DAEMON),
        os.fspath(backing),
        os.fspath(mountpoint),
        "-f",
        "-o",
        options,
    ]


@dataclass(frozen=True)
class Faults:
    """Failures the daemon injects: `rules` in the format of `latencyfs/faults.c`
    (`OP GLOB ACTION [times=N] [after=K] [p=P] [ms=M]`, paths inside the mount),
    each injection logged to `log` as `OP ACTION PATH`.

    :raises ValueError: a path with a comma (it would split the mount options).
    """

    rules: Path
    log: Path

    def __post_init__(self) -> None:
        for path in (self.rules, self.log):
            if "," in os.fspath(path):
                raise ValueError(f"{path}: a comma would split the mount options")

    @classmethod
    def table(cls, workdir: Path, lines: Iterable[str]) -> Faults:
        """Write `lines` as the rules in `workdir`, with an empty log beside them."""
        rules, log = workdir / "faults.rules", workdir / "faults.log"
        rules.write_text("".join(f"{line}\n" for line in lines))
        log.write_text("")
        return cls(rules.resolve(), log.resolve())

    def injected(self) -> list[tuple[str, str, str]]:
        """What was injected so far: (op, action, path) per injection, in order."""
        found = []
        for line in self.log.read_text().splitlines():
            op, action, path = line.split(" ", 2)
            found.append((op, action, path))
        return found


@contextmanager
def mounted(
    backing: Path,
    mountpoint: Path,
    delay_ms: float = DEFAULT_DELAY_MS,
    *,
    cache_s: float = 0.0,
    faults: Faults | None = None,
) -> Iterator[Path]:
    """Mount `backing` at `mountpoint` with `delay_ms` per operation (and `faults`
    injected, if given); yield the mount.

    The daemon is a subprocess (`latencyfs BACKING MOUNTPOINT -f`); the mount is live
    (it answered a stat) when this yields. On exit, even when the body raised:
    `fusermount3 -u`, or if busy `umount -l` and SIGTERM (the daemon would serve the
    open files until closed); the daemon is reaped (SIGKILL if it lingers).

    :raises LatencyFsError: the daemon is not built, the mount did not come up in time
        (the message has the daemon's stderr), or was still there after unmounting.
    """
    backing, mountpoint = backing.resolve(), mountpoint.resolve()
    for name, value in (("delay_ms", delay_ms), ("cache_s", cache_s)):
        if not 0 <= value < math.inf:
            raise ValueError(f"{name} must be finite and >= 0, got {value}")
    for path in (backing, mountpoint):
        if not path.is_dir():
            raise LatencyFsError(f"{path} is not a directory")
    if is_mountpoint(mountpoint):
        raise LatencyFsError(f"{mountpoint} is a mount point already")
    command = daemon_argv(backing, mountpoint, delay_ms, cache_s, faults)
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,  # a ^C reaches the test, which unmounts in order
        )
        try:
            _wait_mounted(proc, mountpoint, stderr)
            yield mountpoint
        finally:
            _unmount(proc, mountpoint, stderr)


def _wait_mounted(proc: subprocess.Popen[bytes], mnt: Path, stderr: IO[bytes]) -> None:
    deadline = time.monotonic() + MOUNT_TIMEOUT
    while not os.path.ismount(mnt):
        if proc.poll() is not None:
            raise LatencyFsError(
                f"latencyfs exited {proc.returncode} before {mnt} was mounted: "
                + _tail(stderr)
            )
        if time.monotonic() > deadline:
            raise LatencyFsError(
                f"{mnt} not mounted after {MOUNT_TIMEOUT:.0f} s: " + _tail(stderr)
            )
        time.sleep(0.01)


def _unmount(proc: subprocess.Popen[bytes], mnt: Path, stderr: IO[bytes]) -> None:
    # mountinfo, not os.path.ismount: a dead daemon's mount fails lstat (ENOTCONN).
    if is_mountpoint(mnt) and _run("fusermount3", "-u", os.fspath(mnt)) != 0:
        # Busy (an open file, a cwd inside): detach it now, and stop the daemon, which
        # would otherwise serve the open files until they are closed.
        _run("umount", "-l", os.fspath(mnt))
        proc.terminate()  # libfuse's SIGTERM handler ends the loop
    try:
        proc.wait(EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if is_mountpoint(mnt):
        raise LatencyFsError(f"{mnt} is still mounted after unmount: " + _tail(stderr))


def _run(*args: str) -> int:
    done = subprocess.run(args, capture_output=True, timeout=60, check=False)
    return done.returncode


def _tail(stderr: IO[bytes], limit: int = 4000) -> str:
    stderr.seek(0)
    text = stderr.read().decode(errors="replace").strip()
    return text[-limit:] or "(no stderr)"


def main(argv: list[str] | None = None) -> int:
    """Run the daemon in place of this process (it daemonizes unless --foreground)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.latencyfs",
        description="Mount BACKING at MOUNTPOINT, sleeping DELAY in every operation.",
    )
    parser.add_argument("backing", type=Path)
    parser.add_argument("mountpoint", type=Path)
    parser.add_argument(
        "--delay-ms",
        type=float,
        default=DEFAULT_DELAY_MS,
        help="sleep in every operation (default %(default)s)",
    )
    parser.add_argument(
        "--cache-s",
        type=float,
        default=0.0,
        help="kernel entry/attribute cache timeout (default 0: every call is served)",
    )
    parser.add_argument("--foreground", action="store_true", help="do not daemonize")
    args = parser.parse_args(argv)
    for name in ("delay_ms", "cache_s"):
        if not 0 <= getattr(args, name) < math.inf:
            parser.error(f"--{name.replace('_', '-')} must be finite and >= 0")
    try:
        command = daemon_argv(
            args.backing, args.mountpoint, args.delay_ms, args.cache_s
        )
    except LatencyFsError as e:
        parser.error(str(e))
    if not args.foreground:
        command.remove("-f")
    os.execv(command[0], command)


if __name__ == "__main__":
    raise SystemExit(main())
