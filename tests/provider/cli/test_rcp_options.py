"""Every option of ``rcp --help``, on every kind of operand, changes the copy or is
refused: never accepted and ignored.

:data:`TABLE` names, for each option (its argparse ``dest``) and each kind of
operand -- local paths (also what a ``file://`` URL names) and a ``host:/path``
source (a real sshd on loopback, rcpd started over SSH) -- either an
:class:`Effect`: the same copy run without and with the option, in fresh
directories, must differ in what ``observe`` sees (a file's bytes or mode, the
summary's counts, the exit status, the log, the time taken); or a :class:`Refused`:
the option is a usage error (exit 2) naming it, before anything is written. A new
option of ``rcp`` fails :func:`test_every_option_is_in_the_table` until it is in the
table, so it cannot be accepted on some kind of operand without anyone deciding.
URL stores, which only the ``rcp`` of this process reaches (``memory://``) or which
need a store's server, are checked in process by the conformance suite
(``tests/conformance``) and ``test_rcp_cli.py``'s refusals by the store engine.

Entry errors that even root meets come from an immutable destination directory
(``chattr +i``), transient ones from latencyfs's fault table (EAGAIN on an open),
devices root may not make from a user namespace (``unshare -r``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

import rcp_core
from benchmarks import sshd
from benchmarks.latencyfs import Faults, mounted
from rcp_provider.cli.rcp import build_parser
from support.treespec import Dir, File, Spec, make_tree

pytestmark = pytest.mark.privileged

Kind = Literal["local", "host"]
KINDS: tuple[Kind, ...] = ("local", "host")
RCP = str(Path(sys.executable).with_name("rcp"))
RCPD = str(Path(sys.executable).with_name("rcpd"))
T0 = 1_700_000_000_000_000_000
BASE: Spec = {
    ".": Dir(mode=0o755),
    "a.txt": File(b"alpha\n", mode=0o640, mtime_ns=T0),
    "keep.log": File(b"log\n", mode=0o644, mtime_ns=T0),
    "sub/b.txt": File(b"beta\n", mode=0o644, mtime_ns=T0),
    "x.ign": File(b"ignored\n", mode=0o644, mtime_ns=T0),
    ".gitignore": File(b"*.ign\n", mode=0o644, mtime_ns=T0),
}
MANY = 200
"""Files in the immutable directory of :func:`_stuck`: each one an entry error."""


@dataclass
class Run:
    """What one ``rcp`` run showed."""

    code: int
    out: str
    err: str
    seconds: float
    summary: dict[str, Any] | None


@dataclass
class World:
    """A fresh source and destination for one run, reached as ``kind`` says."""

    root: Path
    kind: Kind
    server: sshd.Sshd
    stack: ExitStack
    src: Path = field(init=False)
    dst: Path = field(init=False)
    runner: tuple[str, ...] = ()
    """Put before ``rcp`` (e.g. ``unshare -r``)."""

    def __post_init__(self) -> None:
        self.src = make_tree(self.root / "src", BASE)
        self.dst = self.root / "dst"

    def source(self) -> str:
        if self.kind == "host":
            return f"root@127.0.0.1:{self.server.port}:{self.src}"
        return str(self.src)

    def expand(self, args: Sequence[str]) -> list[str]:
        return [a.format(root=self.root) for a in args]

    def rcp(self, args: Sequence[str]) -> Run:
        summary = self.root / "summary.json"
        argv = [*self.runner, RCP, "--summary-json", str(summary)]
        if self.kind == "host":
            argv += ["--ssh", shlex.join(self.server.ssh()), "--rcpd-path", RCPD]
        argv += [*self.expand(args), self.source(), str(self.dst)]
        started = time.monotonic()
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=180, check=False
        )
        seconds = time.monotonic() - started
        data = json.loads(summary.read_text()) if summary.exists() else None
        return Run(done.returncode, done.stdout, done.stderr, seconds, data)


Setup = Callable[[World], None]
Observe = Callable[[World, Run], object]


def _nothing(world: World) -> None:
    del world


def _differ(without: object, with_: object) -> bool:
    return without != with_


@dataclass(frozen=True)
class Effect:
    """The copy with ``with_`` differs from the one with ``without`` in what
    ``observe`` sees (``differs`` decides; ``{root}`` in an argument is the run's
    directory)."""

    without: tuple[str, ...]
    with_: tuple[str, ...]
    observe: Observe
    setup: Setup = _nothing
    differs: Callable[[Any, Any], bool] = _differ


@dataclass(frozen=True)
class Refused:
    """``args`` are a usage error naming ``flag``; nothing is written."""

    args: tuple[str, ...]
    flag: str


Check = Effect | Refused


# -- setups -----------------------------------------------------------------------


def _copied(world: World) -> None:
    """The destination holds a finished copy already."""
    rcp_core.copy([str(world.src)], str(world.dst))


def _with(content: bytes, mtime_ns: int) -> Setup:
    """A finished copy whose ``a.txt`` holds ``content`` with this mtime."""

    def setup(world: World) -> None:
        _copied(world)
        path = world.dst / "a.txt"
        path.write_bytes(content)
        os.utime(path, ns=(mtime_ns, mtime_ns))

    return setup


def _mount_inside(world: World) -> None:
    """A tmpfs mounted at ``src/m`` holding a file (unmounted when the run ends)."""
    point = world.src / "m"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "none", str(point)], check=True)
    world.stack.callback(subprocess.run, ["umount", str(point)], check=True)
    (point / "f").write_bytes(b"on another filesystem\n")


def _listed(world: World) -> None:
    """``{root}/list`` names a.txt alone; ``{root}/list0`` names a.txt and sub/b.txt,
    NUL-separated (one unlisted path read by lines)."""
    (world.root / "list").write_text("a.txt\n")
    (world.root / "list0").write_bytes(b"a.txt\0sub/b.txt\0")


def _chmodded(world: World) -> None:
    """A finished copy made with ``--chmod F600``."""
    rcp_core.copy([str(world.src)], str(world.dst), rcp_core.CopySettings(chmod="F600"))


def _two_user_databases(world: World) -> None:
    """Two hosts' user databases: the rcpd rcp starts (the source's side) sees
    ``alice:staff`` as 1234:1234, rcp (the destination's) as 4321:4321; neither has
    a name for 5555. Each runs in a mount namespace of its own with its
    ``/etc/passwd`` and ``/etc/group`` bound over the host's. ``a.txt`` is owned
    by 1234, ``sub/b.txt`` by 5555."""
    for side, number in (("source", 1234), ("destination", 4321)):
        db = world.root / side
        db.mkdir()
        (db / "passwd").write_text(
            f"root:x:0:0:root:/root:/bin/sh\nalice:x:{number}:{number}::/:/bin/sh\n"
        )
        (db / "group").write_text(f"root:x:0:\nstaff:x:{number}:\n")
    binds = (
        "mount --bind {0}/passwd /etc/passwd && mount --bind {0}/group /etc/group"
        ' && exec "$0" "$@"'
    )
    here = binds.format(world.root / "destination")
    world.runner = ("unshare", "-m", "sh", "-c", here)
    rcpd = world.root / "rcpd-elsewhere"
    rcpd.write_text(
        "#!/bin/sh\nexec unshare -m sh -c "
        f'{shlex.quote(binds.format(world.root / "source"))} {RCPD} "$@"\n'
    )
    rcpd.chmod(0o755)
    os.chown(world.src / "a.txt", 1234, 1234)
    os.chown(world.src / "sub" / "b.txt", 5555, 5555)


def _extra(world: World) -> None:
    _copied(world)
    (world.dst / "extra.txt").write_bytes(b"not in the source\n")


def _dir_link(world: World) -> None:
    (world.src / "dirlink").symlink_to("sub")


def _rules(world: World) -> None:
    (world.root / "rules").write_text("--exclude keep.log\n")


def _many(world: World) -> None:
    for i in range(40):
        (world.src / f"f{i:02}").write_bytes(b"%d" % i)


def _stuck(world: World) -> None:
    """``many/`` holds ``MANY`` files that differ from the destination's, in an
    immutable destination directory: each one an entry error under ``-o``."""
    (world.src / "many").mkdir()
    for i in range(MANY):
        (world.src / "many" / f"f{i:03}").write_bytes(b"new %d\n" % i)
    _copied(world)
    for i in range(MANY):
        (world.dst / "many" / f"f{i:03}").write_bytes(b"old\n")
    subprocess.run(["chattr", "+i", str(world.dst / "many")], check=True)
    world.stack.callback(
        subprocess.run, ["chattr", "-i", str(world.dst / "many")], check=True
    )


def _transient(world: World) -> None:
    """The source on latencyfs, whose first three opens of ``a.txt`` fail EAGAIN
    (the default three retries copy it, each after its ``retry_delay`` backoff)."""
    backing = world.root / "backing"
    backing.mkdir()
    world.src.rename(backing / "src")
    mnt = world.root / "mnt"
    mnt.mkdir()
    faults = Faults.table(world.root, ["open /src/a.txt EAGAIN times=3"])
    world.stack.enter_context(mounted(backing, mnt, delay_ms=0.0, faults=faults))
    world.src = mnt / "src"


def _partial(world: World) -> None:
    """A 3 MiB file in the source, and its first 2 MiB in the destination's partial
    of it (as a cut-off ``--partial`` copy leaves it)."""
    data = os.urandom(3 << 20)
    (world.src / "big").write_bytes(data)
    world.dst.mkdir()
    partial = world.dst / ".rcp-partial.big"
    partial.write_bytes(data[: 2 << 20])
    partial.chmod(0o600)


def _device(world: World) -> None:
    """A device in the source, and rcp in a user namespace, where root may not make
    one (``mknod`` fails EPERM)."""
    os.mknod(world.src / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    world.runner = ("unshare", "-r")


def _wrapper(name: str, command: Callable[[World], str]) -> Setup:
    """An executable ``{root}/name`` that leaves ``{root}/name.used`` and runs
    ``command``."""

    def setup(world: World) -> None:
        path = world.root / name
        path.write_text(
            f'#!/bin/sh\ntouch {world.root}/{name}.used\nexec {command(world)} "$@"\n'
        )
        path.chmod(0o755)

    return setup


# -- observations -------------------------------------------------------------------


def _a(world: World, run: Run) -> object:
    """The exit status and the copy's ``a.txt``."""
    path = world.dst / "a.txt"
    return run.code, path.read_bytes() if path.exists() else None


def _exists(relative: str) -> Observe:
    def observe(world: World, run: Run) -> object:
        return run.code, os.path.lexists(world.dst / relative)

    return observe


def _mount_point(world: World, run: Run) -> object:
    return run.code, (world.dst / "m").is_dir(), (world.dst / "m" / "f").exists()


def _itemized(world: World, run: Run) -> object:
    """The exit status and the itemized lines of the output."""
    lines = re.findall(r"^(?:[>ch.][fdLDS][.+a-z]{9}|\*deleting  ) .*$", run.out, re.M)
    return run.code, sorted(lines)


ITEMIZED = [
    ">f+++++++++ dst/.gitignore",
    ">f+++++++++ dst/a.txt",
    ">f+++++++++ dst/keep.log",
    ">f+++++++++ dst/sub/b.txt",
    ">f+++++++++ dst/x.ign",
    "cd+++++++++ dst/",
    "cd+++++++++ dst/sub/",
]


def _log_file(world: World, run: Run) -> object:
    """The exit status and, from the log file, each record's path, action, kind
    and bytes, and how many files of ``many/`` it says failed."""
    log = world.root / "log.jsonl"
    if not log.exists():
        return run.code, None
    records = [json.loads(line) for line in log.read_text().splitlines()]
    changes = sorted(
        (r["path"], r["action"], r["kind"], r["bytes"])
        for r in records
        if r["action"] != "error"
    )
    failed = {r["path"] for r in records if r["action"] == "error"}
    return run.code, changes, len({p for p in failed if re.search(r"many/f\d+$", p)})


def _log_file_errors(without: Any, with_: Any) -> bool:
    """Without the log, none; with it, the files the immutable directory refused,
    each an error record, and none recorded as copied."""
    code, changes, errors = with_
    return (
        without == (1, None)
        and code == 1
        and errors == MANY
        and not [c for c in changes if c[0].startswith("dst/many/")]
    )


def _mode(world: World, run: Run) -> object:
    return stat.S_IMODE(os.stat(world.dst / "a.txt").st_mode)


def _modes(world: World, run: Run) -> object:
    """The exit status, a file's and a directory's permission bits."""
    return (
        run.code,
        stat.S_IMODE(os.stat(world.dst / "a.txt").st_mode),
        stat.S_IMODE(os.stat(world.dst / "sub").st_mode),
    )


def _owners(world: World, run: Run) -> object:
    """The exit status, the owner and group of a file and of a directory."""
    return run.code, [
        (os.stat(world.dst / p).st_uid, os.stat(world.dst / p).st_gid)
        for p in ("a.txt", "sub")
    ]


def _file_owners(world: World, run: Run) -> object:
    """The exit status, the owner and group of ``a.txt`` and ``sub/b.txt``."""
    return run.code, [
        (os.stat(world.dst / p).st_uid, os.stat(world.dst / p).st_gid)
        for p in ("a.txt", "sub/b.txt")
    ]


def _copied_files(world: World, run: Run) -> object:
    assert run.summary is not None, run.err
    return run.code, run.summary["copied"]["files"]


def _is_dir(world: World, run: Run) -> object:
    return os.path.isdir(world.dst / "dirlink") and not os.path.islink(
        world.dst / "dirlink"
    )


def _code(world: World, run: Run) -> object:
    return run.code


def _errors(world: World, run: Run) -> object:
    assert run.summary is not None, run.err
    return run.summary["errors"]


def _skipped_specials(world: World, run: Run) -> object:
    assert run.summary is not None, run.err
    return run.code, run.summary["skipped"]["specials"]


def _verified(world: World, run: Run) -> object:
    assert run.summary is not None, run.err
    return "verified" in run.summary


def _resumed(world: World, run: Run) -> object:
    assert run.summary is not None, run.err
    return run.code, run.summary["resumed"]["bytes"]


def _seconds(world: World, run: Run) -> object:
    assert run.code == 0, run.err
    return run.seconds


def _logged(pattern: str) -> Observe:
    """The first group of ``pattern`` in the log (stdout)."""

    def observe(world: World, run: Run) -> object:
        assert run.code == 0, run.err
        found = re.search(pattern, run.out)
        return found.group(1) if found else None

    return observe


def _in(stream: Literal["out", "err"], text: str) -> Observe:
    def observe(world: World, run: Run) -> object:
        assert run.code == 0, run.err
        return text in getattr(run, stream)

    return observe


def _count(text: str) -> Observe:
    def observe(world: World, run: Run) -> object:
        assert run.code == 0, run.err
        return run.err.count(text)

    return observe


def _used(name: str) -> Observe:
    def observe(world: World, run: Run) -> object:
        return run.code, (world.root / f"{name}.used").exists()

    return observe


def _error_lines(world: World, run: Run) -> object:
    return sum("many/f" in line for line in run.out.splitlines())


def _slower(by: float) -> Callable[[Any, Any], bool]:
    def differs(without: float, with_: float) -> bool:
        return bool(with_ - without >= by)

    return differs


def _fewer(without: int, with_: int) -> bool:
    return with_ < without / 2


def _more(without: int, with_: int) -> bool:
    return with_ > without


# -- the table --------------------------------------------------------------------


def _all(*checks: Check) -> dict[Kind, tuple[Check, ...]]:
    return dict.fromkeys(KINDS, checks)


def _local_host(check: Check) -> dict[Kind, tuple[Check, ...]]:
    return {"local": (check,), "host": (check,)}


def _remote_only(check: Check, refused: Refused) -> dict[Kind, tuple[Check, ...]]:
    return {"local": (refused,), "host": (check,)}


DIFFERENT = _with(b"other content\n", T0)
SAME_SIZE_LATER = _with(b"ALPHA\n", T0 + 100 * 10**9)
NEWER = _with(b"NEWER\n", T0 + 1000 * 10**9)
THROTTLED = ("--ops-throttle", "10")
EVERY_FIFTH = ("--progress-interval", "0.2")

TABLE: dict[str, dict[Kind, tuple[Check, ...]]] = {
    "overwrite": _all(Effect((), ("-o",), _a, DIFFERENT)),
    "overwrite_compare": {
        "local": (
            Effect(("-o",), ("-o", "--overwrite-compare", "size"), _a, SAME_SIZE_LATER),
        ),
        "host": (
            Effect(("-o",), ("-o", "--overwrite-compare", "size"), _a, SAME_SIZE_LATER),
            Refused(
                ("-o", "--overwrite-compare", "size,checksum"),
                "--overwrite-compare checksum",
            ),
        ),
    },
    "update": _all(Effect(("-o",), ("-u",), _a, NEWER)),
    "ignore_existing": _all(Effect(("-o",), ("--ignore-existing",), _a, DIFFERENT)),
    "delete": _local_host(
        Effect(("-o",), ("-o", "--delete"), _exists("extra.txt"), _extra),
    ),
    "delete_excluded": _local_host(
        Effect(
            ("-o", "--delete", "--exclude", "keep.log"),
            ("-o", "--delete", "--exclude", "keep.log", "--delete-excluded"),
            _exists("keep.log"),
            _copied,
        ),
    ),
    "preserve": {
        "local": (Effect((), ("--preserve", "none"), _mode),),
        "host": (Effect((), ("--preserve", "none"), _mode),),
    },
    "chmod": _all(
        Effect((), ("--chmod", "Dg+s,F600"), _modes),
        # A rerun comparing modes leaves what --chmod made: nothing copied again.
        Effect(
            ("-o", "--overwrite-compare", "size,mtime,mode"),
            ("-o", "--overwrite-compare", "size,mtime,mode", "--chmod", "F600"),
            _copied_files,
            _chmodded,
        ),
    ),
    "chown": _all(
        Effect((), ("--chown", "nobody:nogroup"), _owners),
        Effect((), ("--chown", ":nogroup"), _owners),
    ),
    "numeric_ids": {
        "local": (Refused(("--numeric-ids",), "--numeric-ids"),),
        "host": (
            Effect(
                ("-p", "owner", "--rcpd-path", "{root}/rcpd-elsewhere"),
                (
                    "-p",
                    "owner",
                    "--rcpd-path",
                    "{root}/rcpd-elsewhere",
                    "--numeric-ids",
                ),
                _file_owners,
                _two_user_databases,
                # By name alice:staff is 4321:4321 at the destination; by number it
                # stays 1234; 5555 has no name: its number either way.
                lambda without, with_: (
                    without == (0, [(4321, 4321), (5555, 5555)])
                    and with_ == (0, [(1234, 1234), (5555, 5555)])
                ),
            ),
        ),
    },
    "dereference": {
        "local": (Effect((), ("-L",), _is_dir, _dir_link),),
        "host": (Refused(("-L",), "--dereference"),),
    },
    "one_file_system": {
        "local": (
            Effect(
                (),
                ("-x",),
                _mount_point,
                _mount_inside,
                # Without -x the mount's file is copied; with it the mount point is
                # made (empty), not entered.
                lambda without, with_: (
                    (without, with_) == ((0, True, True), (0, True, False))
                ),
            ),
        ),
        "host": (Refused(("-x",), "--one-file-system"),),
    },
    "skip_specials": {
        "local": (Effect((), ("--skip-specials",), _skipped_specials, _device),),
        "host": (Effect((), ("--skip-specials",), _skipped_specials, _device),),
    },
    "include": _local_host(
        Effect((), ("--include", "sub/**"), _exists("keep.log")),
    ),
    "exclude": _local_host(
        Effect((), ("--exclude", "keep.log"), _exists("keep.log")),
    ),
    "files_from": {
        "local": (
            Effect((), ("--files-from", "{root}/list"), _exists("keep.log"), _listed),
        ),
        "host": (Refused(("--files-from", "{root}/list"), "--files-from"),),
    },
    "from0": {
        "local": (
            Effect(
                ("--files-from", "{root}/list0"),
                ("--files-from", "{root}/list0", "--from0"),
                _exists("a.txt"),
                _listed,
            ),
        ),
        "host": (Refused(("--files-from", "{root}/list0", "--from0"), "--files-from"),),
    },
    "filter_file": _local_host(
        Effect((), ("--filter-file", "{root}/rules"), _exists("keep.log"), _rules),
    ),
    "gitignore": _local_host(
        Effect((), ("--gitignore",), _exists("x.ign")),
    ),
    "itemize_changes": {
        "local": (
            Effect(
                (),
                ("-i",),
                _itemized,
                differs=lambda without, with_: (
                    without == (0, []) and with_ == (0, ITEMIZED)
                ),
            ),
            Effect(
                ("-o",),
                ("-o", "-i"),
                _itemized,
                _with(b"alpha, changed\n", T0 + 10**9),
                # A replaced file's size and time differ, the rest is as it was.
                lambda without, with_: (
                    without == (0, []) and with_ == (0, [">f.st...... dst/a.txt"])
                ),
            ),
            Effect(
                ("--delete",),
                ("--delete", "-i"),
                _itemized,
                _extra,
                lambda without, with_: (
                    without == (0, []) and with_ == (0, ["*deleting   dst/extra.txt"])
                ),
            ),
        ),
        "host": (Refused(("-i",), "--itemize-changes"),),
    },
    "log_file": {
        "local": (
            Effect(
                (),
                ("--log-file", "{root}/log.jsonl"),
                _log_file,
                differs=lambda without, with_: (
                    without == (0, None)
                    and with_[0] == 0
                    and ("dst/a.txt", "create", "file", 6) in with_[1]
                    and ("dst/sub", "create", "dir", 0) in with_[1]
                    and len(with_[1]) == len(ITEMIZED)
                    and with_[2] == 0
                ),
            ),
            Effect(
                ("-o",),
                ("-o", "--log-file", "{root}/log.jsonl"),
                _log_file,
                _stuck,
                _log_file_errors,
            ),
        ),
        "host": (Refused(("--log-file", "{root}/log.jsonl"), "--log-file"),),
    },
    "dry_run": _all(
        Effect((), ("--dry-run", "brief"), _exists("a.txt")),
        Effect((), ("-n",), _exists("a.txt")),
    ),
    "partial": _all(Effect(("-o",), ("-o", "--partial"), _resumed, _partial)),
    "fail_early": _all(Effect(("-o",), ("-o", "-e"), _errors, _stuck, _fewer)),
    "verify": _all(Effect((), ("--verify", "checksum"), _verified)),
    "max_workers": {
        "local": (
            Effect(("-vv",), ("-vv", "--max-workers", "3"), _logged(r"maximum=(\d+)")),
        ),
        "host": (Refused(("--max-workers", "3"), "--max-workers"),),
    },
    "max_processes": {
        "local": (
            Effect(
                ("-vv", "--max-processes", "1"),
                ("-vv", "--max-processes", "3"),
                _logged(r"processes=(\d+)"),
            ),
        ),
        "host": (
            Effect(
                ("-vv", "--max-processes", "1"),
                ("-vv", "--max-processes", "3"),
                _logged(r"starting (\d+) writer processes"),
            ),
        ),
    },
    "max_open_files": {
        "local": (
            Effect(
                ("-vv",),
                ("-vv", "--max-open-files", "20"),
                _logged(r"maximum=(\d+)"),
            ),
        ),
        "host": (Refused(("--max-open-files", "20"), "--max-open-files"),),
    },
    "ops_throttle": _all(Effect((), THROTTLED, _seconds, _many, _slower(2.0))),
    "retries": _all(Effect((), ("--retries", "0"), _code, _transient)),
    "retry_delay": _all(
        Effect((), ("--retry-delay", "1"), _seconds, _transient, _slower(0.8))
    ),
    "progress": _all(Effect((), ("--progress",), _in("err", "copied"))),
    "progress_type": _all(
        Effect(
            ("--progress",),
            ("--progress", "--progress-type", "bar"),
            _in("err", "===="),
        )
    ),
    "progress_interval": _all(
        Effect(
            ("--progress", "--progress-type", "text", *THROTTLED),
            ("--progress", "--progress-type", "text", *THROTTLED, *EVERY_FIFTH),
            _count("===="),
            _many,
            _more,
        )
    ),
    "summary": _all(Effect((), ("--summary",), _in("out", "walltime:"))),
    "summary_json": _all(
        Effect(
            (),
            ("--summary-json", "{root}/other.json"),
            lambda world, run: (world.root / "other.json").exists(),
        )
    ),
    "verbose": _all(Effect((), ("-v",), _in("out", "walltime:"))),
    "quiet": _all(Effect(("-o",), ("-o", "-q"), _error_lines, _stuck)),
    "max_connections": _remote_only(
        Effect(
            ("-vv",),
            ("-vv", "--max-connections", "2"),
            _logged(r"on (\d+) data connections"),
        ),
        Refused(("--max-connections", "2"), "--max-connections"),
    ),
    "no_encryption": _remote_only(
        Effect((), ("--no-encryption",), _in("out", "plain text")),
        Refused(("--no-encryption",), "--no-encryption"),
    ),
    "bwlimit": _remote_only(
        Effect((), ("--bwlimit", "200"), _seconds, _nothing, _slower(1.0)),
        Refused(("--bwlimit", "1M"), "--bwlimit"),
    ),
    "port_ranges": _remote_only(
        Effect(
            ("-v",),
            ("-v", "--port-ranges", "41100-41109"),
            _logged(r"rcpd \(source\) on \S+ listens on \S+:(\d+)\n"),
            _nothing,
            lambda without, with_: 41100 <= int(with_) <= 41109,
        ),
        Refused(("--port-ranges", "41100-41109"), "--port-ranges"),
    ),
    "bind_ip": _remote_only(
        Effect(
            ("-v",),
            ("-v", "--bind-ip", "127.0.0.2"),
            _logged(r"the destination here connects to \S+ from ([\d.]+):"),
            _nothing,
            lambda without, with_: (without, with_) == ("127.0.0.1", "127.0.0.2"),
        ),
        Refused(("--bind-ip", "127.0.0.2"), "--bind-ip"),
    ),
    "remote_timeout": _remote_only(
        Effect((), ("--remote-timeout", "0.001"), _code),
        Refused(("--remote-timeout", "30"), "--remote-timeout"),
    ),
    "ssh": _remote_only(
        Effect(
            (),
            ("--ssh", "{root}/ssh"),
            _used("ssh"),
            _wrapper("ssh", lambda world: shlex.join(world.server.ssh())),
        ),
        Refused(("--ssh", "ssh -v"), "--ssh"),
    ),
    "rcpd_path": _remote_only(
        Effect(
            (),
            ("--rcpd-path", "{root}/rcpd"),
            _used("rcpd"),
            _wrapper("rcpd", lambda world: RCPD),
        ),
        Refused(("--rcpd-path", "/opt/rcpd"), "--rcpd-path"),
    ),
    "no_ssh_reuse": _remote_only(
        Effect(
            ("-vv",), ("-vv", "--no-ssh-reuse"), _in("out", "shares one connection")
        ),
        Refused(("--no-ssh-reuse",), "--no-ssh-reuse"),
    ),
}
"""For each option and kind of operand, how it shows (see the module docstring)."""


def test_every_option_is_in_the_table() -> None:
    parser = build_parser()
    options = {
        action.dest
        for action in parser._actions
        if action.option_strings
        and action.dest not in ("help", "version", "show_config")
    }
    assert options == set(TABLE), (
        "options of rcp not in TABLE (decide how each shows, or refuse it): "
        f"{sorted(options - set(TABLE))}; in TABLE but gone: "
        f"{sorted(set(TABLE) - options)}"
    )
    for dest, kinds in TABLE.items():
        assert set(kinds) == set(KINDS), dest


README = Path(__file__).resolve().parents[3] / "README.md"
README_TABLE = "### Every flag on every kind of operand"


def test_the_readme_says_what_each_option_does_on_each_kind_of_operand() -> None:
    """Its table's cell starts with "yes" where :data:`TABLE` has an effect, and
    says "refused" where it has a refusal; each option is in one row. (Its last
    column, URL stores, is the conformance suite's: ``test_table.py``.)"""
    flags = build_parser()._option_string_actions
    text = README.read_text().partition(README_TABLE)[2].partition("\n### ")[0]
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    seen: list[str] = []
    for row in rows:
        first, *cells = (cell.strip() for cell in row.strip("|").split("|"))
        assert len(cells) == len(KINDS) + 1, row
        cells = cells[: len(KINDS)]
        in_row: set[str] = set()
        for flag in re.findall(r"`(-[^`]+)`", first):
            dest = flags[flag].dest
            if dest in in_row:
                continue  # the same option's other spelling (-n, --dry-run)
            in_row.add(dest)
            seen.append(dest)
            for kind, cell in zip(KINDS, cells, strict=True):
                checks = TABLE[dest][kind]
                effect = any(isinstance(c, Effect) for c in checks)
                refused = any(isinstance(c, Refused) for c in checks)
                assert cell.startswith("yes") == effect, (flag, kind, cell)
                assert ("refused" in cell) == refused, (flag, kind, cell)
    assert sorted(seen) == sorted(TABLE), sorted(set(TABLE) ^ set(seen))


@pytest.fixture
def world(tmp_path: Path, server: sshd.Sshd) -> Iterator[Callable[[str, Kind], World]]:
    with ExitStack() as stack:

        def make(name: str, kind: Kind) -> World:
            root = tmp_path / name
            root.mkdir()
            return World(root, kind, server, stack)

        yield make


@pytest.mark.parametrize(
    ("dest", "kind"), [(dest, kind) for dest in TABLE for kind in KINDS]
)
def test_an_option_changes_the_copy_or_is_refused(
    world: Callable[[str, Kind], World], dest: str, kind: Kind
) -> None:
    for number, check in enumerate(TABLE[dest][kind]):
        if isinstance(check, Refused):
            there = world(f"refused{number}", kind)
            run = there.rcp(check.args)
            assert run.code == 2, (run.out, run.err)
            assert check.flag in run.err, run.err
            assert not there.dst.exists()
            continue
        seen = []
        for side, args in (("without", check.without), ("with", check.with_)):
            there = world(f"{side}{number}", kind)
            check.setup(there)
            seen.append(check.observe(there, there.rcp(args)))
        assert check.differs(*seen), (
            f"{dest} on a {kind} operand: {check.with_} changed nothing "
            f"against {check.without} (observed {seen[0]!r} and {seen[1]!r})"
        )
