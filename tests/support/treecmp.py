"""Compare two trees entry by entry and say, in words, how they differ.

`compare_trees(src, dst)` returns a list of differences; an empty list means equal under
the chosen checks. Each difference names the relative path (repr of its surrogateescape
decoding, so newlines and non-UTF-8 bytes stay visible) and what differs, src first.

Invariants:
- Walks with `os.scandir` on bytes paths and never follows symlinks; the roots
  themselves are compared too (as "."), so a copy must carry the top directory's
  metadata.
- Only reads: file contents are compared in chunks, without following symlinks; reading
  may update atimes, which is why atime is never compared.
- Symlink modes are not compared (Linux ignores them); user.* xattrs on symlinks cannot
  exist, so they are not looked for. Hard-link structure is the partition of
  non-directory paths (symlinks included: `ln` of a symlink links the link) into
  inodes, within each tree: links to files outside the tree do not count.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
from collections.abc import Iterator
from typing import BinaryIO, Protocol

StrOrBytesPath = str | bytes | os.PathLike[str] | os.PathLike[bytes]
CHUNK = 1024 * 1024
SPARSE_SLACK = 64 * 1024


class TreeCompare(Protocol):
    """The type of `compare_trees` (and of the `tree_compare` fixture)."""

    def __call__(
        self,
        src: StrOrBytesPath,
        dst: StrOrBytesPath,
        *,
        mode: bool = ...,
        times: bool = ...,
        owner: bool = ...,
        xattrs: bool = ...,
        hardlinks: bool = ...,
        sparse: bool = ...,
        sparse_slack: int = ...,
    ) -> list[str]: ...


_TYPES = {
    stat.S_IFREG: "file",
    stat.S_IFDIR: "dir",
    stat.S_IFLNK: "symlink",
    stat.S_IFIFO: "fifo",
    stat.S_IFSOCK: "socket",
    stat.S_IFCHR: "char device",
    stat.S_IFBLK: "block device",
}


def compare_trees(
    src: StrOrBytesPath,
    dst: StrOrBytesPath,
    *,
    mode: bool = True,
    times: bool = True,
    owner: bool = False,
    xattrs: bool = False,
    hardlinks: bool = True,
    sparse: bool = False,
    sparse_slack: int = SPARSE_SLACK,
) -> list[str]:
    """Differences between the trees at `src` and `dst`; [] when they are equal.

    `times` compares mtime_ns of every entry (symlinks included); `sparse` checks that
    no regular file in dst has more than `sparse_slack` bytes allocated beyond src's.
    """
    src_b, dst_b = os.fsencode(src), os.fsencode(dst)
    left, right = dict(_walk(src_b)), dict(_walk(dst_b))
    diffs: list[str] = []
    for rel in sorted(left.keys() | right.keys()):
        name = _show(rel)
        a, b = left.get(rel), right.get(rel)
        if b is None:
            diffs.append(f"{name}: missing in dst")
            continue
        if a is None:
            diffs.append(f"{name}: extra in dst")
            continue
        kind_a, kind_b = stat.S_IFMT(a.st_mode), stat.S_IFMT(b.st_mode)
        if kind_a != kind_b:
            diffs.append(f"{name}: type {_TYPES[kind_a]} != {_TYPES[kind_b]}")
            continue
        pa, pb = (
            (src_b, dst_b) if rel == b"." else (_join(src_b, rel), _join(dst_b, rel))
        )
        if kind_a == stat.S_IFREG:
            diffs.extend(f"{name}: {d}" for d in _content(pa, pb, a, b))
            if sparse and b.st_blocks * 512 > a.st_blocks * 512 + sparse_slack:
                diffs.append(
                    f"{name}: allocated {b.st_blocks * 512} bytes > src's "
                    f"{a.st_blocks * 512} + {sparse_slack} slack (holes not kept)"
                )
        elif kind_a == stat.S_IFLNK:
            ta, tb = os.readlink(pa), os.readlink(pb)
            if ta != tb:
                diffs.append(f"{name}: symlink target {_show(ta)} != {_show(tb)}")
        elif kind_a in (stat.S_IFCHR, stat.S_IFBLK) and a.st_rdev != b.st_rdev:
            diffs.append(f"{name}: device {_dev(a.st_rdev)} != {_dev(b.st_rdev)}")
        if mode and kind_a != stat.S_IFLNK:
            ma, mb = stat.S_IMODE(a.st_mode), stat.S_IMODE(b.st_mode)
            if ma != mb:
                diffs.append(f"{name}: mode {ma:#o} != {mb:#o}")
        if times and a.st_mtime_ns != b.st_mtime_ns:
            diffs.append(f"{name}: mtime_ns {a.st_mtime_ns} != {b.st_mtime_ns}")
        if owner and (a.st_uid, a.st_gid) != (b.st_uid, b.st_gid):
            diffs.append(
                f"{name}: owner {a.st_uid}:{a.st_gid} != {b.st_uid}:{b.st_gid}"
            )
        if xattrs:
            link = kind_a == stat.S_IFLNK
            diffs.extend(f"{name}: {d}" for d in _xattr_diff(pa, pb, link))
    if hardlinks:
        diffs.extend(_hardlink_diff(left, right))
    return diffs


def rsync_differences(src: os.PathLike[str], dst: os.PathLike[str]) -> str:
    """What ``rsync -a -c`` would change to make ``dst`` ``src`` (contents, kinds,
    symlink targets, modes, owners, times to the ns), one itemized line a
    difference; ``""`` when the trees are the same: a second opinion, by another
    tool, beside :func:`compare_trees`."""
    rsync = subprocess.run(
        ["rsync", "-a", "-n", "-c", "-i", "--delete", f"{src}/", f"{dst}/"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return rsync.stdout


def _walk(root: bytes) -> Iterator[tuple[bytes, os.stat_result]]:
    """(relative path, lstat) for the root (as b".") and everything below it."""
    st = os.lstat(root)
    yield b".", st
    if not stat.S_ISDIR(st.st_mode):
        return
    stack = [b""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as it:
            for entry in it:
                rel = os.path.join(rel_dir, entry.name) if rel_dir else entry.name
                est = entry.stat(follow_symlinks=False)
                yield rel, est
                if stat.S_ISDIR(est.st_mode):
                    stack.append(rel)


def _content(
    pa: bytes, pb: bytes, a: os.stat_result, b: os.stat_result
) -> Iterator[str]:
    if a.st_size != b.st_size:
        yield f"size {a.st_size} != {b.st_size}"
        return
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fa = os.open(pa, flags)
    except OSError as e:
        yield f"cannot read src: {e.strerror}"
        return
    try:
        fb = os.open(pb, flags)
    except OSError as e:
        os.close(fa)
        yield f"cannot read dst: {e.strerror}"
        return
    with open(fa, "rb", buffering=0) as xa, open(fb, "rb", buffering=0) as xb:
        offset = 0
        while True:
            ca, cb = _read_full(xa), _read_full(xb)
            if ca != cb:
                at = offset + next(
                    (i for i, (x, y) in enumerate(zip(ca, cb, strict=False)) if x != y),
                    min(len(ca), len(cb)),
                )
                yield f"content differs from byte {at}"
                return
            if not ca:
                return
            offset += len(ca)


def _read_full(f: BinaryIO) -> bytes:
    """The next ``CHUNK`` bytes, fewer only at the end: a raw read may return less
    (FUSE with direct_io), which is not the end of the file."""
    parts, left = [], CHUNK
    while left and (part := f.read(left)):
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _xattrs(path: bytes, link: bool) -> dict[str, bytes]:
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return {}
        raise
    return {
        n: os.getxattr(path, n, follow_symlinks=False)
        for n in names
        if not (link and n.startswith("user."))
    }


def _xattr_diff(pa: bytes, pb: bytes, link: bool) -> Iterator[str]:
    xa, xb = _xattrs(pa, link), _xattrs(pb, link)
    for key in sorted(xa.keys() | xb.keys()):
        if key not in xb:
            yield f"xattr {key} missing in dst"
        elif key not in xa:
            yield f"xattr {key} extra in dst"
        elif xa[key] != xb[key]:
            yield f"xattr {key} {xa[key]!r} != {xb[key]!r}"


def _groups(tree: dict[bytes, os.stat_result]) -> set[frozenset[bytes]]:
    """Sets of two or more non-directory paths that share one inode."""
    by_inode: dict[tuple[int, int], set[bytes]] = {}
    for rel, st in tree.items():
        if not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1:
            by_inode.setdefault((st.st_dev, st.st_ino), set()).add(rel)
    return {frozenset(g) for g in by_inode.values() if len(g) > 1}


def _hardlink_diff(
    left: dict[bytes, os.stat_result], right: dict[bytes, os.stat_result]
) -> Iterator[str]:
    ga, gb = _groups(left), _groups(right)
    for g in sorted(ga - gb, key=sorted):
        yield f"hard links: src group {_show_group(g)} not linked so in dst"
    for g in sorted(gb - ga, key=sorted):
        yield f"hard links: dst group {_show_group(g)} not linked so in src"


def _join(root: bytes, rel: bytes) -> bytes:
    return os.path.join(root, rel)


def _show(rel: bytes) -> str:
    return repr(os.fsdecode(rel))


def _show_group(group: frozenset[bytes]) -> str:
    return "{" + ", ".join(_show(p) for p in sorted(group)) + "}"


def _dev(rdev: int) -> str:
    return f"{os.major(rdev)}:{os.minor(rdev)}"
