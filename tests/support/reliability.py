"""What the reliability suite measures (its scale, its figures), on what (a mixed
tree), and the check every category makes (:func:`looks_complete_but_is_not`).

A :class:`Figure` counts one category's trials: ``tried``, ``survived`` (the
guarantee held), ``lost`` (data lost or damaged: must be 0), ``hangs`` (a wait past
its bound) and ``crashes`` (a traceback or a signal where an error was due). A test
records its figure before it asserts, so a failing run still publishes what it saw.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from support.treespec import Dir, Entry, File, HardLink, Sparse, Symlink, make_tree

MIB = 1 << 20
MTIME = 1_700_000_000_123_456_789
RCPD = str(Path(sys.executable).with_name("rcpd"))


@dataclass(frozen=True, slots=True)
class Scale:
    """How many trials a category runs: ``fast`` in ``make test``, ``full`` in
    ``make stress``."""

    stress: bool

    def trials(self, fast: int, full: int) -> int:
        return full if self.stress else fast


@dataclass(slots=True)
class Figure:
    """One category's counts (see the module docstring); ``notes`` say what failed,
    ``detail`` what the trials were like (how many kills landed mid-copy, say)."""

    category: str
    what: str
    tried: int = 0
    survived: int = 0
    lost: int = 0
    hangs: int = 0
    crashes: int = 0
    notes: list[str] = field(default_factory=list)
    detail: str = ""

    def failed(
        self, note: str, *, lost: bool = False, hang: bool = False, crash: bool = False
    ) -> None:
        """One trial went wrong: ``note`` says how (the first 20 are kept)."""
        self.lost += lost
        self.hangs += hang
        self.crashes += crash
        if len(self.notes) < 20:
            self.notes.append(note)

    def trial(
        self, what: str, problems: list[str], *, lost: bool = False, hang: bool = False
    ) -> None:
        """One trial: survived when ``problems`` is empty, else failed (as ``lost``
        or ``hang``) with them as its note."""
        self.tried += 1
        if problems:
            self.failed(f"{what}: {'; '.join(problems)}", lost=lost, hang=hang)
        else:
            self.survived += 1

    @property
    def clean(self) -> bool:
        return self.survived == self.tried and not (
            self.lost or self.hangs or self.crashes
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def published(figures: list[Figure], category: str, what: str) -> Figure:
    """A new figure, added to the session's ``figures`` (the report's rows)."""
    figure = Figure(category, what)
    figures.append(figure)
    return figure


def mixed_tree(seed: int, large: tuple[int, ...] = (4 * MIB,)) -> dict[str, Entry]:
    """A tree of every kind a copy meets: 288 small files in 16 directories, the
    ``large`` files, a 64 MiB sparse file, hard links (within a directory and
    across), symlinks (one dangling), empty directories, assorted modes and times."""
    rng = random.Random(seed)
    spec: dict[str, Entry] = {".": Dir(mode=0o755, mtime_ns=MTIME)}
    for d in range(16):
        spec[f"small/d{d}"] = Dir(mode=0o750, mtime_ns=MTIME + d)
        for f in range(18):
            size = rng.choice([0, 1, 100, 1000, 4096, 20_000, 150_000])
            spec[f"small/d{d}/f{f}"] = File(
                rng.randbytes(size),
                mode=rng.choice([0o644, 0o600, 0o755]),
                mtime_ns=MTIME - rng.randrange(10**15),
            )
    for i, size in enumerate(large):
        spec[f"large/f{i}"] = File(rng.randbytes(size), mtime_ns=MTIME - i)
    spec["large/sparse"] = Sparse(
        64 * MIB,
        {0: b"head", 20 * MIB: rng.randbytes(MIB), 64 * MIB - 4: b"tail"},
        mtime_ns=MTIME,
    )
    spec["hard/a"] = File(rng.randbytes(300_000), mtime_ns=MTIME)
    spec["hard/b"] = HardLink("hard/a")
    spec["hard/in-small"] = HardLink("small/d3/f4")
    spec["links/rel"] = Symlink("../hard/a")
    spec["links/dangling"] = Symlink("nowhere")
    spec["empty/x/y"] = Dir(mtime_ns=MTIME)
    return spec


def looks_complete_but_is_not(src: Path, dst: Path) -> list[str]:
    """Regular files of ``dst`` with their source's size and mtime (what a rerun
    with ``-o`` trusts) but other bytes: a half-written file mistaken for complete."""
    wrong = []
    for path in dst.rglob("*"):
        if path.is_symlink() or not path.is_file():
            continue
        origin = src / path.relative_to(dst)
        try:
            theirs = origin.lstat()
        except FileNotFoundError:
            continue
        mine = path.lstat()
        same_look = (mine.st_size, mine.st_mtime_ns) == (
            theirs.st_size,
            theirs.st_mtime_ns,
        )
        if same_look and path.read_bytes() != origin.read_bytes():
            wrong.append(str(path.relative_to(dst)))
    return wrong


def state(root: Path) -> dict[str, tuple[int, int, int, bytes]]:
    """Everything a command could have changed under ``root``: each entry's mode,
    size, mtime and (for a regular file) content."""
    seen = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        content = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        seen[str(path.relative_to(root))] = (
            st.st_mode,
            st.st_size,
            st.st_mtime_ns,
            content,
        )
    return seen


class Sandbox:
    """A directory with a source tree, an existing destination and a file, for
    malformed calls to (not) touch. In arguments, ``SRC``, ``DST``, ``FILE`` and
    ``NEW`` (a path that does not exist), alone or followed by ``/...``, stand for
    its paths; :meth:`fill` puts them in."""

    def __init__(self, root: Path) -> None:
        make_tree(
            root, {"src/a": File(b"a"), "src/d/b": b"b", "dst/x": b"x", "file": b"f"}
        )
        self.root = root
        self.names = {
            "SRC": root / "src",
            "DST": root / "dst",
            "FILE": root / "file",
            "NEW": root / "new",
        }

    def fill(self, value: Any) -> Any:
        """``value`` (a list is filled item by item) with its stand-ins replaced."""
        if isinstance(value, list):
            return [self.fill(v) for v in value]
        if not isinstance(value, str):
            return value
        for key, path in self.names.items():
            if value == key or value.startswith(f"{key}/"):
                return str(path) + value[len(key) :]
        return value


def daemons(role: str = "") -> list[int]:
    """The running ``rcpd --role`` processes of this interpreter (of ``role`` if
    given): the daemons themselves, not the ssh commands that started them."""
    pattern = f"^{re.escape(sys.executable)} {re.escape(RCPD)} --role {role}"
    found = subprocess.run(
        ["pgrep", "-f", pattern], capture_output=True, text=True, check=False
    )
    return [int(pid) for pid in found.stdout.split()]


def no_daemons_within(bound: float) -> bool:
    """Whether every ``rcpd --role`` daemon (:func:`daemons`) ended within ``bound``
    seconds (the stragglers are killed)."""
    deadline = time.monotonic() + bound
    while daemons():
        if time.monotonic() > deadline:
            for pid in daemons():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            return False
        time.sleep(0.05)
    return True


def between_hosts(
    rcp: list[str], port: int, ssh: list[str], src: Path, dst: Path, *flags: str
) -> list[str]:
    """``rcp FLAGS SRC DST`` with both trees on the sshd at ``port`` of this
    machine (``ssh``: its client command), the daemons this interpreter's ``rcpd``."""
    at = f"root@127.0.0.1:{port}:"
    return [
        *rcp,
        *flags,
        "--ssh",
        " ".join(ssh),
        "--rcpd-path",
        RCPD,
        f"{at}{src}",
        f"{at}{dst}",
    ]
