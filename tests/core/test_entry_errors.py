"""Per-entry problems: counted and deduplicated errors, the rest still copied.

Also what is *not* an error: odd names (newlines, non-UTF-8 bytes, 255-byte
components) and trees deeper than PATH_MAX. Root ignores permission bits, so the
unreadable-entry tests run the real CLI as ``nobody`` (setpriv) on a world-writable
directory; destination-side failures use an immutable file or directory
(``chattr +i``) on the ext4 loop mount.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import rcp_core
import rcp_core.engine.metadata
from rcp_core import CopySettings, EntryError, ExistingPolicy, FatalError, RcpError
from rcp_core.run.runtime import Kind, classify, entry_error, retrying
from support import nobody
from support.nobody import RCP, give_to_nobody, rcp_as_nobody
from support.treecmp import TreeCompare
from support.treespec import Dir, Entry, File, make_tree

T0 = 1_600_000_000 * 10**9


# -- unreadable entries, as nobody ------------------------------------------------------


@pytest.fixture
def world_dir() -> Iterator[Path]:
    with nobody.world_dir() as path:
        yield path


@pytest.mark.privileged
def test_unreadable_entries_are_counted_deduplicated_and_skipped(
    world_dir: Path,
) -> None:
    """Unreadable entries fail alone: exit 1, errors deduplicated, the rest copied.

    Two unreadable files and an unreadable directory make 3 errors of 2 kinds.
    """
    src = world_dir / "src"
    make_tree(
        src,
        {
            "ok1": b"one",
            "sub/ok2": b"two",
            "secret1": b"s1",
            "secret2": b"s2",
            "locked/inside": b"never read",
            "zz/ok3": b"three",
        },
    )
    give_to_nobody(world_dir, ["src/secret1", "src/secret2", "src/locked"])
    result = rcp_as_nobody(
        world_dir, "--summary-json", "s.json", "--max-workers", "4", "src", "dst"
    )
    assert result.returncode == 1, result.stderr
    assert "finished with 3 error(s)" in result.stderr
    summary = json.loads((world_dir / "s.json").read_text())
    assert summary["errors"] == 3
    assert summary["copied"]["files"] == 3
    errors = {e["error"]: e["count"] for e in summary["error_list"]}
    assert errors == {
        "copy: Permission denied": 2,
        "copy directory: Permission denied": 1,
    }
    examples = {e["example"] for e in summary["error_list"]}
    assert examples <= {"src/secret1", "src/secret2", "src/locked"}
    dst = world_dir / "dst"
    assert (dst / "ok1").read_bytes() == b"one"
    assert (dst / "sub" / "ok2").read_bytes() == b"two"
    assert (dst / "zz" / "ok3").read_bytes() == b"three"
    assert sorted(os.listdir(dst)) == ["ok1", "sub", "zz"]
    # each distinct error is logged once, the repeats only counted
    logged = [ln for ln in result.stdout.splitlines() if "Permission denied" in ln]
    assert len(logged) == 2, result.stdout


@pytest.mark.privileged
@pytest.mark.parametrize("fail_early", [False, True])
def test_fail_early_stops_at_the_first_error_cli(
    world_dir: Path, fail_early: bool
) -> None:
    """``--fail-early`` stops after the first failing entry; without it all fail."""
    spec: dict[str, Entry] = {f"bad{i}": b"x" for i in range(6)}
    make_tree(world_dir / "src", spec)
    give_to_nobody(world_dir, [f"src/{name}" for name in spec])
    flags = ["--fail-early"] if fail_early else []
    result = rcp_as_nobody(
        world_dir, *flags, "--max-workers", "1", "--summary-json", "s.json", "src", "d"
    )
    assert result.returncode == 1
    summary = json.loads((world_dir / "s.json").read_text())
    if fail_early:
        assert "stopped after 1 error(s)" in result.stderr
        assert summary["errors"] == 1
    else:
        assert "finished with 6 error(s)" in result.stderr
        assert summary["errors"] == 6
        assert summary["error_list"][0]["count"] == 6


def chattr(flag: str, path: Path) -> None:
    subprocess.run(["chattr", flag, str(path)], check=True, capture_output=True)


@pytest.fixture
def immutable(ext4_tmp_path: Path) -> Iterator[Callable[[Path], None]]:
    """``immutable(path)`` sets ``chattr +i``; cleared again at teardown."""
    paths: list[Path] = []

    def make(path: Path) -> None:
        chattr("+i", path)
        paths.append(path)

    yield make
    for path in paths:
        chattr("-i", path)


@pytest.mark.parametrize("fail_early", [False, True])
def test_fail_early_stops_at_the_first_error_api(
    ext4_tmp_path: Path, immutable: Callable[[Path], None], fail_early: bool
) -> None:
    """``fail_early`` stops at the first error and ``CopyFailedError.stopped`` says so.

    An immutable destination directory fails each create (EPERM), then its own
    metadata; without ``fail_early`` all of those are counted and the rest copied.
    """
    base = ext4_tmp_path
    spec: dict[str, Entry] = {f"locked/f{i}": b"x" for i in range(6)}
    make_tree(base / "src", {**spec, "zzz/fine": b"ok"})
    make_tree(base / "dst", {"locked": Dir()})
    immutable(base / "dst" / "locked")
    settings = CopySettings(
        existing=ExistingPolicy.OVERWRITE, fail_early=fail_early, max_workers=1
    )
    with pytest.raises(rcp_core.CopyFailedError) as info:
        rcp_core.copy(str(base / "src"), str(base / "dst"), settings)
    err = info.value
    assert err.stopped is fail_early
    found = {key: count for key, count, _ in err.errors}
    if fail_early:
        assert err.summary["errors"] == 1
        assert found == {"copy: Operation not permitted": 1}
    else:
        assert err.summary["errors"] == 7
        assert found == {
            "copy: Operation not permitted": 6,
            "set directory metadata: Operation not permitted": 1,
        }
    assert os.listdir(base / "dst" / "locked") == []
    if not fail_early:
        assert (base / "dst" / "zzz" / "fine").read_bytes() == b"ok"


# -- odd names and deep trees are not errors ------------------------------------------

ODD_NAMES = [
    "new\nline",
    os.fsdecode(b"\xff\xfe"),
    os.fsdecode(b"caf\xe9 latin-1"),
    "é" * 127 + "x",  # 255 bytes
    "a" * 255,
    "tab\tand space ",
]


def odd_spec() -> dict[str, Entry]:
    spec: dict[str, Entry] = {".": Dir(0o755, T0)}
    for i, name in enumerate(ODD_NAMES):
        spec[name] = File(name.encode("utf-8", "surrogateescape"), 0o644, T0 + i)
        dir_name = name + "-d" if len(os.fsencode(name)) <= 253 else name[:-2] + "-d"
        spec[dir_name] = Dir(0o755, T0)
        spec[f"{dir_name}/{name}"] = File(b"inside", 0o600, T0)
    return spec


def test_odd_names_copy_exactly(tmp_path: Path, tree_compare: TreeCompare) -> None:
    """Newlines, non-UTF-8 bytes and 255-byte names are copied, not errors."""
    make_tree(tmp_path / "src", odd_spec())
    summary = rcp_core.copy(str(tmp_path / "src"), str(tmp_path / "dst"))
    assert summary["errors"] == 0
    assert summary["copied.files"] == 2 * len(ODD_NAMES)
    assert tree_compare(tmp_path / "src", tmp_path / "dst") == []
    raw = set(os.listdir(os.fsencode(tmp_path / "dst")))
    assert b"\xff\xfe" in raw
    assert b"a" * 255 in raw


def test_odd_names_overwrite_rerun_and_operands(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """Odd names survive the CLI and a replacing rerun.

    A non-UTF-8 source operand works through the CLI, and a rerun with --overwrite
    replaces changed odd-named files (their temporary names stay valid).
    """
    root = os.fsdecode(b"root-\xff")
    make_tree(tmp_path / root, odd_spec())
    dst = os.fsencode(tmp_path / "dst")
    first = subprocess.run(
        [*RCP, os.fsencode(tmp_path / root), dst],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert first.returncode == 0, first.stderr
    assert tree_compare(tmp_path / root, tmp_path / "dst") == []
    for name in ODD_NAMES:  # change every top-level file
        (tmp_path / root / name).write_bytes(b"changed " + os.fsencode(name))
    second = subprocess.run(
        [
            *RCP,
            "--overwrite",
            "--summary-json",
            os.fsencode(tmp_path / "s.json"),
            os.fsencode(tmp_path / root),
            dst,
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert second.returncode == 0, second.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["copied"]["files"] == len(ODD_NAMES)
    assert tree_compare(tmp_path / root, tmp_path / "dst") == []
    assert not [n for n in os.listdir(dst) if n.startswith(b".rcp-")]


DEEP_LEVELS = 40
DEEP_NAME = 200


def build_deep(root: Path, leaf: dict[str, bytes]) -> int:
    """A chain of DEEP_LEVELS directories of DEEP_NAME-byte names, built with dir fds.

    Files ``mid`` (halfway) and ``leaf`` (at the bottom) hold data; the bottom also
    gets the entries of ``leaf``. Returns the path length in bytes.
    """
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    length = len(os.fsencode(root))
    try:
        for i in range(DEEP_LEVELS):
            name = f"{i:03d}" + "d" * (DEEP_NAME - 3)
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
            length += 1 + len(name)
            if i == DEEP_LEVELS // 2:
                write_at(fd, "mid", b"halfway")
        write_at(fd, "leaf", os.urandom(20_000))
        for name, data in leaf.items():
            write_at(fd, name, data)
    finally:
        os.close(fd)
    return length


def write_at(dir_fd: int, name: str, data: bytes) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640, dir_fd=dir_fd)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def fd_tree(root: Path) -> dict[str, tuple[Any, ...]]:
    """Relative path -> (type, mode, data, nlink) of everything under ``root``.

    Read with directory descriptors only: the plain paths are too long.
    """
    out: dict[str, tuple[Any, ...]] = {}
    top = os.fspath(root)
    for dirpath, _dirnames, filenames, dir_fd in os.fwalk(top):
        rel = os.path.relpath(dirpath, top)
        st = os.stat(dir_fd)
        out[rel] = ("dir", stat.S_IMODE(st.st_mode), None, None)
        for name in filenames:
            fst = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            fd = os.open(name, os.O_RDONLY, dir_fd=dir_fd)
            try:
                data = os.read(fd, fst.st_size + 1)
            finally:
                os.close(fd)
            out[os.path.join(rel, name)] = (
                "file",
                stat.S_IMODE(fst.st_mode),
                data,
                fst.st_nlink,
            )
    return out


def test_tree_deeper_than_path_max_copies(tmp_path: Path) -> None:
    """A tree whose paths exceed PATH_MAX (4096 bytes) copies without error.

    Every syscall of the engine is relative to an open directory descriptor.
    """
    src, dst = tmp_path / "src", tmp_path / "dst"
    try:
        length = build_deep(src, {})
        assert length > 4096
        with pytest.raises(OSError, match="too long") as too_long:
            os.lstat(src / os.path.join(*sorted(fd_tree(src))[-1].split("/")))
        assert too_long.value.errno == errno.ENAMETOOLONG
        summary = rcp_core.copy(str(src), str(dst))
        assert summary["errors"] == 0
        assert summary["copied.dirs"] == DEEP_LEVELS + 1
        assert summary["copied.files"] == 2
        expected = fd_tree(src)
        assert len(expected) == DEEP_LEVELS + 3
        assert fd_tree(dst) == expected
    finally:
        shutil.rmtree(src, ignore_errors=True)
        shutil.rmtree(dst, ignore_errors=True)


def test_hard_links_deeper_than_path_max_stay_linked(tmp_path: Path) -> None:
    """Hard links deeper than PATH_MAX are recreated as links, without error.

    The leader's copy must be addressed relative to a descriptor, too.
    """
    src, dst = tmp_path / "src", tmp_path / "dst"
    try:
        build_deep(src, {"one": b"shared"})
        # the second name of "one", made through a descriptor chain
        fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
        for _ in range(DEEP_LEVELS):
            (name,) = [n for n in os.listdir(fd) if n[:3].isdigit()]
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.link("one", "two", src_dir_fd=fd, dst_dir_fd=fd)
        os.close(fd)
        summary = rcp_core.copy(str(src), str(dst))
        assert summary["errors"] == 0
        assert summary["copied.hardlinks"] == 1
        got = fd_tree(dst)
        assert got == fd_tree(src)
        assert [v[3] for k, v in got.items() if k.endswith(("/one", "/two"))] == [2, 2]
    finally:
        shutil.rmtree(src, ignore_errors=True)
        shutil.rmtree(dst, ignore_errors=True)


# -- the error tree --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (errno.EAGAIN, Kind.TRANSIENT),
        (errno.EINTR, Kind.TRANSIENT),
        (errno.ESTALE, Kind.TRANSIENT),
        (errno.EBUSY, Kind.TRANSIENT),
        (errno.ETIMEDOUT, Kind.TRANSIENT),
        (errno.ENOSPC, Kind.FATAL),
        (errno.EDQUOT, Kind.FATAL),
        (errno.EROFS, Kind.FATAL),
        (errno.EACCES, Kind.PERMANENT),
        (errno.ENOENT, Kind.PERMANENT),
        (errno.EPERM, Kind.PERMANENT),
    ],
)
def test_classify_by_errno(code: int, kind: Kind) -> None:
    """One table decides: transient, fatal or permanent, also through EntryError."""
    exc = OSError(code, os.strerror(code))
    assert classify(exc) is kind
    assert classify(EntryError("copy", "x", exc)) is kind
    wrapped = entry_error("copy", "x", exc)
    assert isinstance(wrapped, FatalError) is (kind is Kind.FATAL)


def test_classify_non_os_errors_as_permanent() -> None:
    """Anything that is not an OSError with an errno is permanent (never retried)."""
    assert classify(ValueError("x")) is Kind.PERMANENT
    assert classify(OSError("no errno")) is Kind.PERMANENT


def test_error_classes_refine_builtins() -> None:
    """EntryError is an OSError and an RcpError, carrying errno, op, path and cause."""
    cause = PermissionError(errno.EACCES, "Permission denied")
    err = EntryError("open source", "a/b", cause)
    assert isinstance(err, OSError)
    assert isinstance(err, RcpError)
    assert err.errno == errno.EACCES
    assert (err.op, err.path, err.cause) == ("open source", "a/b", cause)
    assert err.key == "open source: Permission denied"
    assert issubclass(FatalError, EntryError)
    assert issubclass(rcp_core.UsageError, ValueError)
    assert issubclass(rcp_core.UsageError, RcpError)
    assert issubclass(rcp_core.CopyFailedError, RcpError)


def flaky(failures: list[OSError]) -> tuple[Callable[[], str], list[int]]:
    """A callable raising the given errors in turn, then returning "ok"."""
    calls = [0]

    def fn() -> str:
        calls[0] += 1
        if failures:
            raise failures.pop(0)
        return "ok"

    return fn, calls


def test_retrying_retries_transient_errors() -> None:
    """Two EAGAIN failures, then success: three calls, the result comes back."""
    fn, calls = flaky([OSError(errno.EAGAIN, "again"), OSError(errno.EAGAIN, "again")])
    assert retrying(3, 0.001)(fn) == "ok"
    assert calls == [3]


def test_retrying_gives_up_after_the_attempts() -> None:
    """A transient error that persists is raised after ``attempts`` calls."""
    fn, calls = flaky([OSError(errno.EAGAIN, "again") for _ in range(5)])
    with pytest.raises(OSError, match="again"):
        retrying(3, 0.001)(fn)
    assert calls == [3]


def test_every_retry_waits_its_backoff() -> None:
    """The first retry waits ``base_delay`` (with jitter) too: it was tried at once."""
    fn, calls = flaky([OSError(errno.EAGAIN, "again")])
    times: list[float] = []

    def timed() -> str:
        times.append(time.monotonic())
        return fn()

    assert retrying(2, 0.3)(timed) == "ok"
    assert calls == [2]
    assert times[1] - times[0] >= 0.3


def test_a_callers_failed_first_try_is_retried_after_its_backoff() -> None:
    """The engine's walk makes the first try itself and hands over its failure."""
    fn, calls = flaky([])
    started = time.monotonic()
    first = OSError(errno.EAGAIN, "again")
    assert retrying(2, 0.2)(fn, classify, first) == "ok"
    assert calls == [1]
    assert time.monotonic() - started >= 0.2
    with pytest.raises(OSError, match="again"):
        retrying(1, 0.2)(fn, classify, first)
    assert calls == [1]


def test_retrying_does_not_retry_permanent_errors() -> None:
    """PermissionError is permanent: one call, raised as is."""
    fn, calls = flaky([PermissionError(errno.EACCES, "denied")])
    with pytest.raises(PermissionError):
        retrying(3, 0.001)(fn)
    assert calls == [1]


def eagain_copy_file_range(monkeypatch: pytest.MonkeyPatch, failures: int) -> list[int]:
    """Make the first ``failures`` calls of os.copy_file_range fail with EAGAIN.

    The one mock of this file: a transient EAGAIN cannot be produced on demand.
    """
    real = os.copy_file_range
    calls = [0]

    def fake(src: int, dst: int, count: int, *args: Any, **kwargs: Any) -> int:
        calls[0] += 1
        if calls[0] <= failures:
            raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))
        return real(src, dst, count, *args, **kwargs)

    monkeypatch.setattr(os, "copy_file_range", fake)
    return calls


def test_transient_error_during_copy_is_retried(
    ext4_tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tree_compare: TreeCompare
) -> None:
    """One EAGAIN from copy_file_range (ext4: no reflink) is retried: no error."""
    base = ext4_tmp_path
    make_tree(base / "src", {"f": File(os.urandom(200_000), 0o644, T0)})
    calls = eagain_copy_file_range(monkeypatch, failures=1)
    summary = rcp_core.copy(
        str(base / "src"), str(base / "dst"), CopySettings(retry_delay=0.001)
    )
    assert summary["errors"] == 0
    assert calls == [2]
    assert summary["method.copy_file_range"] == 1
    assert summary["copied.files"] == 1
    assert tree_compare(base / "src", base / "dst") == []


@pytest.mark.parametrize("retries", [0, 1, 3])
def test_persistent_transient_error_fails_after_retries_attempts(
    ext4_tmp_path: Path, monkeypatch: pytest.MonkeyPatch, retries: int
) -> None:
    """An EAGAIN that never clears fails the entry after 1 + ``retries`` tries.

    ``retries=0`` turns retrying off: one try, one error.

    The failed file leaves nothing behind; the other file is copied.
    """
    base = ext4_tmp_path
    make_tree(base / "src", {"f": os.urandom(10_000), "g": b""})
    calls = eagain_copy_file_range(monkeypatch, failures=100)
    settings = CopySettings(retries=retries, retry_delay=0.001)
    with pytest.raises(rcp_core.CopyFailedError) as info:
        rcp_core.copy(str(base / "src"), str(base / "dst"), settings)
    assert info.value.summary["errors"] == 1
    assert [(k, n) for k, n, _ in info.value.errors] == [
        ("copy: Resource temporarily unavailable", 1)
    ]
    assert calls == [1 + retries]
    assert os.listdir(base / "dst") == ["g"]


def test_an_internal_error_is_never_a_silent_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in a worker (not an OSError) stops the run and surfaces to the caller.

    The injected fault stands for any programming error: the run must not report
    success with part of the tree missing.
    """
    make_tree(
        tmp_path / "src", {f"d{i}/f{j}": b"x" for i in range(4) for j in range(50)}
    )
    original = rcp_core.engine.metadata.Metadata.apply
    calls = 0

    def broken(
        self: rcp_core.engine.metadata.Metadata, *args: Any, **kwargs: Any
    ) -> None:
        nonlocal calls
        calls += 1
        if calls == 7:
            raise RuntimeError("injected bug")
        original(self, *args, **kwargs)

    monkeypatch.setattr(rcp_core.engine.metadata.Metadata, "apply", broken)
    with pytest.raises(RuntimeError, match="injected bug"):
        rcp_core.copy(str(tmp_path / "src"), str(tmp_path / "dst"))
