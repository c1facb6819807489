"""latencyfs: a FUSE passthrough sleeping in every operation, a stand-in for NFS/Lustre.

Shared filesystems are slow per operation, not per byte: each stat, open or 128 KiB
write waits a round trip. latencyfs mounts a backing directory and sleeps `delay` before
serving every request (getattr/lookup, readdir, open, create, mkdir, unlink, rmdir,
rename, symlink, readlink, link, chmod, chown, utimens, truncate, read, write, flush,
release, fsync, statfs, the xattr calls, fallocate, lseek, copy_file_range, ...).

    python -m benchmarks.latencyfs BACKING MOUNTPOINT [--delay-ms 0.5] [--cache-s 0]
        [--foreground]

    with mounted(backing, mountpoint, delay_ms=0.5) as mnt:
        ...  # the daemon is a subprocess: its GIL is not the measured tool's

Invariants:
- Latency overlaps: libfuse serves requests on up to 10 threads (its default
  max_threads, which Debian 12's libfuse 3.14.0 cannot change: `-o max_threads` is
  ignored before 3.14.1; like a server's fixed nfsd pool) and the sleep releases the
  GIL, so up to 10 concurrent callers wait about one delay each, not one after another.
- By default every request reaches the daemon: the kernel's entry, attribute and
  negative caches time out at once (NFS `actimeo=0`), so a path walk costs a LOOKUP
  per component plus a GETATTR per directory searched (the kernel's permission check):
  stat("f") is 3 round trips, stat("d/f") 5. `cache_s` > 0 keeps names and
  attributes that long, like NFS's attribute cache (then stat("f") just after a stat
  of it costs nothing, and changes made in the backing show up late). Data goes
  through the page cache, dropped at each open (close-to-open, as NFS).
- The daemon spends 40-80 us of CPU per request (Python, ctypes), so on this 2-vCPU
  machine it saturates near 10k requests/s however many callers wait.
- Faithful passthrough: ns times (UTIME_NOW/UTIME_OMIT kept), modes, owners,
  symlinks, hard links (`use_ino`: st_ino and st_nlink are the backing's), sparse files
  (lseek SEEK_DATA/SEEK_HOLE, fallocate), xattrs, FIFOs and devices via mknod, rename
  flags (RENAME_NOREPLACE/EXCHANGE via renameat2), copy_file_range done by the backing
  (server-side, as NFS 4.2). mfusepy 3.1.1 has the lseek and copy_file_range slots but
  no wrappers, drops rename flags and folds UTIME_NOW/OMIT into plain times;
  `_fuse_class` adds or fixes those four.
- Permissions as a real fs: mounted `allow_other,default_permissions`, so the kernel
  checks mode bits against the caller; the daemon (root) then acts. New entries get the
  caller's uid and gid (the parent's gid under a set-gid directory); the kernel applies
  the caller's umask and the daemon runs with umask 0. Set-id bits are cleared by the
  kernel on write and chown (HANDLE_KILLPRIV is turned off).
Not emulated: reflink (FICLONE/FICLONERANGE fail with EOPNOTSUPP: FUSE has no
remap_file_range, so copiers fall back to copy_file_range), ioctls, and locks (kept by
the kernel, local to this machine). POSIX ACLs are stored in the backing (as xattrs)
but not enforced on the mount (no FUSE_POSIX_ACL). A file unlinked while open lives on
in the backing as `.fuse_hiddenNNNN` until closed (libfuse's high-level API without
hard_remove). libfuse 3.14.0 logs "Ignoring invalid max threads value 4294967295" at
every start: its own default, harmless.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import math
import os
import re
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

DEFAULT_DELAY_MS = 0.5
MOUNT_TIMEOUT = 10.0
EXIT_TIMEOUT = 10.0
REPO_ROOT = Path(__file__).resolve().parent.parent
FUSE_CAP_HANDLE_KILLPRIV = 1 << 20
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
SETID = stat.S_ISUID | stat.S_ISGID

c_int, c_char_p, c_int64 = ctypes.c_int, ctypes.c_char_p, ctypes.c_int64
_libc = ctypes.CDLL(None, use_errno=True)
_libc.utimensat.argtypes = [c_int, c_char_p, ctypes.POINTER(ctypes.c_long * 4), c_int]
_libc.renameat2.argtypes = [c_int, c_char_p, c_int, c_char_p, ctypes.c_uint]
_libc.fallocate.argtypes = [c_int, c_int, c_int64, c_int64]

Times = tuple[tuple[int, int], tuple[int, int]]
Context = Callable[[], tuple[int, int, int]]  # the caller's (uid, gid, pid)


class LatencyFsError(RuntimeError):
    """The mount did not come up or did not go away; the message has the daemon's stderr."""


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


class LatencyOps:
    """mfusepy operations over `root` (paths arrive as "/a/b", surrogateescape str).

    Every method sleeps first; file handles are real descriptors of the backing.
    """

    use_ns = True  # mfusepy: times are int nanoseconds

    def __init__(self, root: Path, delay: float, context: Context) -> None:
        self.root = os.fspath(root.resolve())
        self.delay = delay
        self.context = context
        self.me = (os.geteuid(), os.getegid())

    def _pause(self) -> None:
        if self.delay > 0:
            time.sleep(self.delay)

    def _real(self, path: str) -> str:
        return self.root + path

    def _claim(self, real: str) -> None:
        """Give a new entry to the caller, as a kernel would (we created it as root)."""
        uid, gid, _pid = self.context()
        if (uid, gid) == self.me:
            return  # created with the caller's ids already (set-gid parents included)
        st = os.lstat(real)
        if os.lstat(os.path.dirname(real)).st_mode & stat.S_ISGID:
            gid = st.st_gid  # inherited from the parent, which the backing did
        if (st.st_uid, st.st_gid) != (uid, gid):
            os.chown(real, uid, gid, follow_symlinks=False)
            # chown clears set-id bits of non-directories; the creator asked for them.
            if stat.S_ISREG(st.st_mode) and st.st_mode & SETID:
                os.chmod(real, stat.S_IMODE(st.st_mode))

    def init_with_config(self, conn: Any, config: Any) -> None:
        # Set-id bits must drop when another user writes; the kernel does it (as a
        # chmod) unless told the daemon will, and our root writes would keep them.
        if conn is not None:
            conn.want &= ~FUSE_CAP_HANDLE_KILLPRIV

    # -- metadata ------------------------------------------------------------------

    def getattr(self, path: str, fh: int | None = None) -> dict[str, int]:
        self._pause()
        st = os.fstat(fh) if fh is not None else os.lstat(self._real(path))
        return {
            "st_mode": st.st_mode,
            "st_ino": st.st_ino,
            "st_nlink": st.st_nlink,
            "st_uid": st.st_uid,
            "st_gid": st.st_gid,
            "st_rdev": st.st_rdev,
            "st_size": st.st_size,
            "st_blksize": st.st_blksize,
            "st_blocks": st.st_blocks,
            "st_atime": st.st_atime_ns,
            "st_mtime": st.st_mtime_ns,
            "st_ctime": st.st_ctime_ns,
        }

    def readlink(self, path: str) -> str:
        self._pause()
        return os.readlink(self._real(path))

    def chmod(self, path: str, mode: int) -> None:
        self._pause()
        os.chmod(self._real(path), stat.S_IMODE(mode))

    def chown(self, path: str, uid: int, gid: int) -> None:
        self._pause()
        os.chown(self._real(path), uid, gid, follow_symlinks=False)

    def utimens(self, path: str, times: Times | None) -> None:
        self._pause()
        if times is None:
            (a_sec, a_nsec), (m_sec, m_nsec) = (0, (1 << 30) - 1), (0, (1 << 30) - 1)
        else:
            (a_sec, a_nsec), (m_sec, m_nsec) = times
        spec = (ctypes.c_long * 4)(a_sec, a_nsec, m_sec, m_nsec)
        real = os.fsencode(self._real(path))
        _check(_libc.utimensat(AT_FDCWD, real, spec, AT_SYMLINK_NOFOLLOW), "utimensat")

    def truncate(self, path: str, length: int, fh: int | None = None) -> None:
        self._pause()
        if fh is not None:
            os.ftruncate(fh, length)
        else:
            os.truncate(self._real(path), length)

    def statfs(self, path: str) -> dict[str, int]:
        self._pause()
        sv = os.statvfs(self._real(path))
        return {key: getattr(sv, key) for key in dir(sv) if key.startswith("f_")}

    def setxattr(
        self, path: str, name: str, value: bytes, options: int, position: int = 0
    ) -> None:
        self._pause()
        os.setxattr(self._real(path), name, value, options, follow_symlinks=False)

    def getxattr(self, path: str, name: str, position: int = 0) -> bytes:
        self._pause()
        return os.getxattr(self._real(path), name, follow_symlinks=False)

    def listxattr(self, path: str) -> list[str]:
        self._pause()
        return os.listxattr(self._real(path), follow_symlinks=False)

    def removexattr(self, path: str, name: str) -> None:
        self._pause()
        os.removexattr(self._real(path), name, follow_symlinks=False)

    # -- namespace -------------------------------------------------------------------

    def mknod(self, path: str, mode: int, dev: int) -> None:
        self._pause()
        os.mknod(self._real(path), mode, dev)
        self._claim(self._real(path))

    def mkdir(self, path: str, mode: int) -> None:
        self._pause()
        os.mkdir(self._real(path), mode)
        self._claim(self._real(path))

    def symlink(self, target: str, source: str) -> None:
        """Create `target` (the link's path) pointing at `source` (its text)."""
        self._pause()
        os.symlink(source, self._real(target))
        self._claim(self._real(target))

    def link(self, target: str, source: str) -> None:
        """Create `target` as another name of the existing `source`."""
        self._pause()
        os.link(self._real(source), self._real(target), follow_symlinks=False)

    def unlink(self, path: str) -> None:
        self._pause()
        os.unlink(self._real(path))

    def rmdir(self, path: str) -> None:
        self._pause()
        os.rmdir(self._real(path))

    def rename(self, old: str, new: str, flags: int = 0) -> None:
        self._pause()
        if not flags:
            os.rename(self._real(old), self._real(new))
            return
        src, dst = os.fsencode(self._real(old)), os.fsencode(self._real(new))
        _check(_libc.renameat2(AT_FDCWD, src, AT_FDCWD, dst, flags), "renameat2")

    def opendir(self, path: str) -> int:
        self._pause()
        return os.open(self._real(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def readdir(
        self, path: str, fh: int
    ) -> list[str | tuple[str, dict[str, int], int]]:
        """All entries at once (mfusepy buffers them); types from d_type, no stat."""
        self._pause()
        # With use_ino the kernel passes our st_ino on as d_ino, and readdir(3) hides
        # entries whose d_ino is 0: "." and ".." need theirs too.
        here, parent = os.fstat(fh).st_ino, os.stat("..", dir_fd=fh).st_ino
        entries: list[str | tuple[str, dict[str, int], int]] = [
            (".", {"st_mode": stat.S_IFDIR, "st_ino": here}, 0),
            ("..", {"st_mode": stat.S_IFDIR, "st_ino": parent}, 0),
        ]
        with os.scandir(fh) as it:
            for entry in it:
                attrs = {"st_mode": _entry_type(entry), "st_ino": entry.inode()}
                entries.append((entry.name, attrs, 0))
        return entries

    def releasedir(self, path: str, fh: int) -> None:
        self._pause()
        os.close(fh)

    def fsyncdir(self, path: str, datasync: int, fh: int) -> None:
        self._pause()
        os.fsync(fh)

    # -- data ----------------------------------------------------------------------------

    def open(self, path: str, flags: int) -> int:
        self._pause()
        return os.open(self._real(path), flags | os.O_CLOEXEC)

    def create(self, path: str, mode: int, flags: int) -> int:
        self._pause()
        fd = os.open(self._real(path), flags | os.O_CREAT | os.O_CLOEXEC, mode)
        try:
            self._claim(self._real(path))
        except OSError:
            os.close(fd)
            raise
        return fd

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        self._pause()
        return os.pread(fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        self._pause()
        return os.pwrite(fh, data, offset)

    def flush(self, path: str, fh: int) -> None:
        """close(2) of one descriptor of the file: close a duplicate, keep ours open."""
        self._pause()
        os.close(os.dup(fh))

    def release(self, path: str, fh: int) -> None:
        self._pause()
        os.close(fh)

    def fsync(self, path: str, datasync: int, fh: int) -> None:
        self._pause()
        if datasync:
            os.fdatasync(fh)
        else:
            os.fsync(fh)

    def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> None:
        self._pause()
        _check(_libc.fallocate(fh, mode, offset, size), "fallocate")

    def lseek(self, path: str, offset: int, whence: int, fh: int) -> int:
        self._pause()
        return os.lseek(fh, offset, whence)

    def copy_file_range(
        self, fh_in: int, off_in: int, fh_out: int, off_out: int, size: int, flags: int
    ) -> int:
        self._pause()
        return os.copy_file_range(fh_in, fh_out, size, off_in, off_out)


def _entry_type(entry: os.DirEntry[str]) -> int:
    if entry.is_symlink():
        return stat.S_IFLNK
    if entry.is_dir(follow_symlinks=False):
        return stat.S_IFDIR
    if entry.is_file(follow_symlinks=False):
        return stat.S_IFREG
    try:  # FIFO, socket, device: d_type does not say which without a stat
        return stat.S_IFMT(entry.stat(follow_symlinks=False).st_mode)
    except OSError:
        return 0  # gone meanwhile: DT_UNKNOWN, the caller's stat will tell


def _fuse_class(base: Any) -> Any:
    """`base` (mfusepy's FUSE) plus what libfuse 3 offers and mfusepy 3.1.1 leaves out.

    A method named after a `fuse_operations` slot becomes that slot's callback.
    """

    class Fuse(base):  # type: ignore[misc]  # mfusepy ships no types
        def _decode(self, path: bytes | None) -> str:
            return "" if path is None else path.decode(self.encoding, self.errors)

        def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
            self.operations.rename(self._decode(old), self._decode(new), flags)
            return 0

        def utimens_fuse_3(self, path: bytes | None, buf: Any, fip: Any) -> int:
            times: Times | None = None
            if buf:
                atime, mtime = buf.contents.actime, buf.contents.modtime
                times = ((atime.tv_sec, atime.tv_nsec), (mtime.tv_sec, mtime.tv_nsec))
            self.operations.utimens(self._decode(path), times)
            return 0

        def lseek(self, path: bytes | None, offset: int, whence: int, fip: Any) -> int:
            fh = fip.contents.fh
            return int(self.operations.lseek(self._decode(path), offset, whence, fh))

        def copy_file_range(
            self,
            path_in: bytes | None,
            fip_in: Any,
            off_in: int,
            path_out: bytes | None,
            fip_out: Any,
            off_out: int,
            size: int,
            flags: int,
        ) -> int:
            fh_in, fh_out = fip_in.contents.fh, fip_out.contents.fh
            return int(
                self.operations.copy_file_range(
                    fh_in, off_in, fh_out, off_out, size, flags
                )
            )

    return Fuse


def serve(
    backing: Path,
    mountpoint: Path,
    delay_ms: float,
    *,
    cache_s: float = 0.0,
    foreground: bool = False,
) -> None:
    """Mount and serve until unmounted (libfuse daemonizes unless `foreground`)."""
    # mfusepy takes libfuse 2 when both are installed; our callbacks are libfuse 3's.
    # Imported here, so only the daemon loads libfuse, and the env change stays in it.
    os.environ.setdefault("FUSE_LIBRARY_NAME", "fuse3")
    import mfusepy

    os.umask(0)  # the kernel has applied the caller's umask already
    _fuse_class(mfusepy.FUSE)(
        LatencyOps(backing, delay_ms / 1000, mfusepy.fuse_get_context),
        os.fspath(mountpoint),
        foreground=foreground,
        allow_other=True,
        default_permissions=True,
        use_ino=True,
        entry_timeout=cache_s,
        attr_timeout=cache_s,
        negative_timeout=cache_s,
        fsname="latencyfs",
        subtype="latencyfs",
    )


@contextmanager
def mounted(
    backing: Path,
    mountpoint: Path,
    delay_ms: float = DEFAULT_DELAY_MS,
    *,
    cache_s: float = 0.0,
) -> Iterator[Path]:
    """Mount `backing` at `mountpoint` with `delay_ms` per operation; yield the mount.

    The daemon is a subprocess (`python -m benchmarks.latencyfs --foreground`); the
    mount is live (it answered a stat) when this yields. On exit, even when the body
    raised: `fusermount3 -u`, or if busy `umount -l` and SIGTERM (the daemon would
    serve the open files until closed); the daemon is reaped (SIGKILL if it lingers).

    :raises LatencyFsError: the mount did not come up in time (the message has the
        daemon's stderr), or was still there after unmounting.
    """
    backing, mountpoint = backing.resolve(), mountpoint.resolve()
    for name, value in (("delay_ms", delay_ms), ("cache_s", cache_s)):
        if not 0 <= value < math.inf:
            raise ValueError(f"{name} must be finite and >= 0, got {value}")
    for path in (backing, mountpoint):
        if not path.is_dir():
            raise LatencyFsError(f"{path} is not a directory")
    if is_mounted(mountpoint):
        raise LatencyFsError(f"{mountpoint} is a mount point already")
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.latencyfs",
                os.fspath(backing),
                os.fspath(mountpoint),
                f"--delay-ms={delay_ms!r}",
                f"--cache-s={cache_s!r}",
                "--foreground",
            ],
            cwd=REPO_ROOT,
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
    if is_mounted(mnt) and _run("fusermount3", "-u", os.fspath(mnt)) != 0:
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
    if is_mounted(mnt):
        raise LatencyFsError(f"{mnt} is still mounted after unmount: " + _tail(stderr))


def is_mounted(path: Path) -> bool:
    """Whether `path` is a mount point in /proc/self/mountinfo (dead FUSE mounts too)."""
    target = os.fsencode(os.path.realpath(path))
    with open("/proc/self/mountinfo", "rb") as f:
        # Field 5 is the mount point, with space, tab, newline and \ as \ooo octal.
        return any(_unescape(line.split()[4]) == target for line in f)


def _unescape(field: bytes) -> bytes:
    return re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), field)


def _run(*args: str) -> int:
    done = subprocess.run(args, capture_output=True, timeout=60, check=False)
    return done.returncode


def _tail(stderr: IO[bytes], limit: int = 4000) -> str:
    stderr.seek(0)
    text = stderr.read().decode(errors="replace").strip()
    return text[-limit:] or "(no stderr)"


def main(argv: list[str] | None = None) -> int:
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
    logging.basicConfig(level=logging.WARNING, format="latencyfs: %(message)s")
    serve(
        args.backing,
        args.mountpoint,
        args.delay_ms,
        cache_s=args.cache_s,
        foreground=args.foreground,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
