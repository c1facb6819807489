"""Hypothesis strategies for random trees, as `treespec` specs ready for `make_tree`.

Invariants of a drawn spec:
- At most `max_entries` entries, paths at most `max_depth` components deep, every name
  unique in its directory, 1..255 bytes once encoded, never "." or "..".
- Fully determined: every entry that can carry a mode and an mtime has one (the root
  too, as key "."), so building one spec twice gives trees `compare_trees` calls equal.
- Directories always keep owner rwx, so the tree stays traversable and removable.
- Set-id modes and owners other than the caller appear only when asked (default: root).
- File contents come from a drawn seed, not from hypothesis' byte stream, so sizes up to
  200 KiB stay cheap; some sizes are exact multiples of 4096.
"""

from __future__ import annotations

import os
import posixpath
import random

from hypothesis import strategies as st

from support.treespec import Dir, Entry, Fifo, File, HardLink, Sparse, Symlink

KIB = 1024
MAX_FILE = 200 * KIB
MAX_SPARSE = 1024 * KIB
FILE_MODES: tuple[int, ...] = (0o400, 0o444, 0o500, 0o555, 0o600, 0o640, 0o644)
FILE_MODES += (0o660, 0o664, 0o666, 0o700, 0o750, 0o755, 0o775, 0o777)
SETID_FILE_MODES = (0o4755, 0o2755, 0o6755, 0o4700)
DIR_MODES = (0o700, 0o711, 0o750, 0o755, 0o775, 0o777, 0o1777)
SETID_DIR_MODES = (0o2755, 0o2775, 0o3777)
OWNERS = ((0, 0), (1000, 1000), (65534, 65534), (1234, 5678))

_KINDS: tuple[str, ...] = ("file",) * 10 + ("dir",) * 4 + ("symlink",) * 2
_KINDS += ("hardlink",) * 2 + ("fifo", "sparse")

_FIXED_NAMES = (
    "with space",
    " leading",
    "trailing ",
    "new\nline",
    "tab\there",
    "-dash",
    "*?[glob]",
    "back\\slash",
    "quote'\"",
    "é",
    "日本語",
    "emoji😀",
    ".hidden",
    "...",
)


def _fits(name: str) -> bool:
    return name not in (".", "..") and 1 <= len(os.fsencode(name)) <= 255


def _long(ch: str, short: int) -> str:
    # As many `ch` as fit in 255 - short bytes: names at and just under NAME_MAX.
    return ch * ((255 - short) // len(ch.encode()))


def _non_utf8(raw: bytes) -> str:
    cleaned = raw.replace(b"/", b"_").replace(b"\0", b"_")
    return (cleaned + b"\xff").decode("utf-8", "surrogateescape")


def names() -> st.SearchStrategy[str]:
    """One path component: plain, odd, unicode, near 255 bytes, or not UTF-8."""
    plain = st.text("abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=12)
    anything = st.text(
        st.characters(exclude_characters="/\x00", exclude_categories=["Cs"]),
        min_size=1,
        max_size=16,
    )
    long = st.builds(_long, st.sampled_from(["x", "é", "日", "😀"]), st.integers(0, 4))
    bad = st.binary(min_size=0, max_size=12).map(_non_utf8)
    return st.one_of(
        plain, plain, plain, anything, st.sampled_from(_FIXED_NAMES), long, bad
    ).filter(_fits)


def mtimes() -> st.SearchStrategy[int]:
    """mtime in ns, 1970..2038 (safe on every filesystem), often with a ns part."""
    seconds = st.integers(0, 2**31 - 1)
    return st.builds(lambda s, ns: s * 10**9 + ns, seconds, st.integers(0, 10**9 - 1))


def file_sizes() -> st.SearchStrategy[int]:
    return st.one_of(
        st.integers(0, 4 * KIB),
        st.integers(0, MAX_FILE // 4096).map(lambda k: k * 4096),
        st.integers(0, MAX_FILE),
    )


def _content(size: int, seed: int, kind: str) -> bytes:
    if kind == "zeros":
        return bytes(size)
    if kind == "pattern":
        return (b"rcp-" + seed.to_bytes(4, "big")) * (size // 8) + b"x" * (size % 8)
    return random.Random(seed).randbytes(size)


@st.composite
def _sparse(draw: st.DrawFn, mode: int, mtime_ns: int) -> Sparse:
    size = draw(st.integers(1, MAX_SPARSE // 4096)) * 4096 - draw(st.integers(0, 100))
    data_at: dict[int, bytes] = {}
    for _ in range(draw(st.integers(0, 3))):
        length = draw(st.integers(1, 8 * KIB))
        if length > size:
            continue
        aligned = draw(st.booleans())
        offset = draw(st.integers(0, (size - length) // (4096 if aligned else 1)))
        offset *= 4096 if aligned else 1
        if any(o < offset + length and offset < o + len(d) for o, d in data_at.items()):
            continue
        data_at[offset] = random.Random(offset).randbytes(length)
    return Sparse(size, data_at, mode=mode, mtime_ns=mtime_ns)


@st.composite
def trees(
    draw: st.DrawFn,
    *,
    max_entries: int = 30,
    max_depth: int = 4,
    special_modes: bool | None = None,
    fifos: bool = True,
    owners: bool = False,
    xattrs: bool = False,
) -> dict[str, Entry]:
    """A random tree spec (see the module docstring for what it guarantees).

    `special_modes` adds set-id bits (default: only when running as root); `owners`
    draws uid/gid pairs (needs root to build); `xattrs` adds user.* attributes.
    """
    if special_modes is None:
        special_modes = os.geteuid() == 0
    file_modes = FILE_MODES + (SETID_FILE_MODES if special_modes else ())
    dir_modes = DIR_MODES + (SETID_DIR_MODES if special_modes else ())
    kinds = _KINDS if fifos else tuple(k for k in _KINDS if k != "fifo")

    def owner() -> tuple[int, int] | None:
        return draw(st.sampled_from(OWNERS)) if owners else None

    def attrs() -> dict[str, bytes]:
        if not xattrs:
            return {}
        keys = draw(st.lists(st.sampled_from(["user.a", "user.b", "user.rcp.long"])))
        return {k: draw(st.binary(max_size=64)) for k in keys}

    spec: dict[str, Entry] = {
        ".": Dir(draw(st.sampled_from(dir_modes)), draw(mtimes()), owner(), attrs())
    }
    dirs = [""]
    files: list[str] = []
    for _ in range(draw(st.integers(0, max_entries))):
        parent = draw(st.sampled_from(dirs))
        rel = posixpath.join(parent, draw(names()))
        if rel in spec:
            continue
        kind = draw(st.sampled_from(kinds))
        if kind == "hardlink" and not files:
            kind = "file"
        mtime_ns = draw(mtimes())
        if kind == "file":
            size, seed = draw(file_sizes()), draw(st.integers(0, 2**32 - 1))
            data = _content(
                size, seed, draw(st.sampled_from(["random", "zeros", "pattern"]))
            )
            mode = draw(st.sampled_from(file_modes))
            spec[rel] = File(data, mode, mtime_ns, owner(), attrs())
            files.append(rel)
        elif kind == "sparse":
            spec[rel] = draw(_sparse(draw(st.sampled_from(file_modes)), mtime_ns))
            files.append(rel)
        elif kind == "dir":
            mode = draw(st.sampled_from(dir_modes))
            spec[rel] = Dir(mode, mtime_ns, owner(), attrs())
            if rel.count("/") + 1 < max_depth:
                dirs.append(rel)
        elif kind == "symlink":
            spec[rel] = Symlink(draw(_targets(parent, list(spec))), mtime_ns, owner())
        elif kind == "hardlink":
            spec[rel] = HardLink(draw(st.sampled_from(files)))
        else:
            spec[rel] = Fifo(draw(st.sampled_from(file_modes)), mtime_ns, owner())
    return spec


def _targets(parent: str, existing: list[str]) -> st.SearchStrategy[str]:
    """Symlink targets: relative to an existing entry, dangling, escaping, absolute."""
    inside = [posixpath.relpath(e, parent or ".") for e in existing if e != "."]
    dangling = names().map(lambda n: "missing-" + n)
    fixed = st.sampled_from(
        ["../../outside", "/nonexistent/abs", ".", "..", "a/./b//c"]
    )
    if inside:
        return st.one_of(
            st.sampled_from(inside), st.sampled_from(inside), dangling, fixed
        )
    return st.one_of(dangling, fixed)
