"""Parallel removal on real trees: what goes, what stays (filters, ages, mounts,
failures), symlinks never followed, dry runs, refusals, counts."""

from __future__ import annotations

import dataclasses
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rcp_core import hookimpl
from rcp_core.errors import CopyFailedError, UsageError
from rcp_core.run.tuning import Concurrency
from rcp_core.site.plugins import plugin_manager
from rcp_core.tools.remove.removal import RemoveSettings
from rcp_core.tools.remove.rmtree import _Removal, remove
from support.treespec import Dir, Fifo, File, Spec, Symlink, make_tree

T0 = 1_600_000_000 * 10**9
NEW = time.time_ns()
TREE: Spec = {
    ".": Dir(0o755, T0),
    "old.txt": File(b"old", 0o644, T0),
    "new.txt": File(b"new", 0o644, NEW),
    "logs": Dir(0o755, T0),
    "logs/a.log": File(b"a" * 1000, 0o644, T0),
    "logs/b.keep": File(b"b", 0o644, T0),
    "deep/er/est": Dir(0o700, T0),
    "deep/er/est/file": File(b"x", 0o600, T0),
    "fifo": Fifo(0o644, T0),
    **{
        f"wide/d{d}/f{f}": File(b"%d" % f, 0o600, T0)
        for d in range(20)
        for f in range(30)
    },
}
FILES = 605
DIRS = 26
"""The root, logs, deep, deep/er, deep/er/est, wide and its 20 directories."""
ENTRIES = FILES + 1 + DIRS - 1
"""Beneath the root: the files, the FIFO and the directories."""
BYTES = sum(len(e.data) for e in TREE.values() if isinstance(e, File))


def names(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_tree_goes_entirely_symlinks_never_followed(tmp_path: Path) -> None:
    outside = make_tree(tmp_path / "outside", {".": Dir(0o755, T0), "x": File(b"x")})
    spec = {
        **TREE,
        "to_outside": Symlink(str(outside)),
        "to_x": Symlink("../outside/x"),
    }
    root = make_tree(tmp_path / "tree", spec)
    summary = remove([root], RemoveSettings(max_workers=4))
    assert not root.exists()
    assert names(outside) == ["x"]  # reached only through symlinks: untouched
    assert summary["removed.files"] == FILES
    assert summary["removed.symlinks"] == 2
    assert summary["removed.specials"] == 1
    assert summary["removed.dirs"] == DIRS
    assert summary["removed.bytes"] == 0  # files go by the listing's type, unlooked


def test_a_symlink_operand_is_the_link(tmp_path: Path) -> None:
    target = make_tree(tmp_path / "target", TREE)
    (tmp_path / "link").symlink_to(target)
    summary = remove([tmp_path / "link"])
    assert not os.path.lexists(tmp_path / "link")
    assert summary["removed.symlinks"] == 1
    assert len(names(target)) == ENTRIES  # everything still there


def test_age_rules_keep_young_entries_and_their_directories(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "tree", TREE)
    cutoff = (T0 + NEW) / 2 / 1e9
    summary = remove([root], RemoveSettings(modified_before=cutoff))
    assert names(root) == ["new.txt"]  # the old went; the root stays for the new one
    assert summary["skipped.files"] == 1


def test_birth_times_decide_created_before(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "tree", TREE)
    remove([root], RemoveSettings(created_before=time.time() - 3600))
    assert len(names(root)) == ENTRIES  # all born just now: kept
    remove([root], RemoveSettings(created_before=time.time() + 3600))
    assert not root.exists()


def test_filters_choose_what_goes(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "tree", TREE)
    remove(
        [root], RemoveSettings(excludes=("*.keep",), includes=("/logs/**", "/wide/"))
    )
    assert names(root) == sorted(
        [
            *("deep", "deep/er", "deep/er/est", "deep/er/est/file", "fifo"),
            *("logs", "logs/b.keep", "new.txt", "old.txt"),
        ]
    )


def test_a_dry_run_changes_nothing_and_counts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = make_tree(tmp_path / "tree", TREE)
    before = names(root)
    with caplog.at_level("INFO", logger="rcp_core"):
        summary = remove([root], RemoveSettings(dry_run=True))
    assert names(root) == before
    assert summary["removed.files"] == FILES
    lines = [r.getMessage() for r in caplog.records if "would remove" in r.getMessage()]
    assert len(lines) == ENTRIES + 1  # and the root


def test_missing_operands_root_and_mount_points_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        remove([tmp_path / "missing"])
    with pytest.raises(UsageError, match="refusing to remove /"):
        remove(["/"])
    with pytest.raises(UsageError, match="nothing to remove"):
        remove([])


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs mounted inside a tree, holding one file."""
    root = make_tree(tmp_path / "tree", TREE)
    mnt = root / "deep" / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(mnt)], check=True)
    (mnt / "precious").write_bytes(b"on another filesystem")
    try:
        yield root
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.mark.privileged
def test_other_filesystems_inside_are_kept_and_mount_points_refused(
    mounted: Path,
) -> None:
    mnt = mounted / "deep" / "mnt"
    with pytest.raises(UsageError, match="mount point"):
        remove([mnt])
    summary = remove([mounted])
    assert (mnt / "precious").read_bytes() == b"on another filesystem"
    assert names(mounted) == ["deep", "deep/mnt", "deep/mnt/precious"]
    assert summary["skipped.dirs"] == 1
    with pytest.raises(CopyFailedError):  # forced: emptied, but a mount point stays
        remove([mnt], RemoveSettings(force=True))
    assert names(mnt) == []


@pytest.fixture
def immutable(ext4_tmp_path: Path) -> Iterator[Path]:
    """A tree whose ``logs/a.log`` cannot be removed (``chattr +i``)."""
    root = make_tree(ext4_tmp_path / "tree", TREE)
    subprocess.run(["chattr", "+i", str(root / "logs" / "a.log")], check=True)
    try:
        yield root
    finally:
        subprocess.run(["chattr", "-i", str(root / "logs" / "a.log")], check=True)


@pytest.mark.parametrize("fail_early", [False, True])
def test_a_failure_keeps_its_entry_and_directories(
    immutable: Path, fail_early: bool
) -> None:
    with pytest.raises(CopyFailedError, match=r"remove .* 1 error") as failed:
        remove([immutable], RemoveSettings(fail_early=fail_early, max_workers=1))
    summary = failed.value.summary
    assert summary["errors"] == 1
    assert (immutable / "logs" / "a.log").exists()
    if not fail_early:
        assert names(immutable) == ["logs", "logs/a.log"]
        assert summary["removed.files"] == FILES - 1


def test_missing_ok_makes_a_missing_operand_nothing_to_do(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "tree", TREE)
    none = remove([tmp_path / "gone"], RemoveSettings(missing_ok=True))
    assert none["removed.files"] == 0
    some = remove([tmp_path / "gone", root], RemoveSettings(missing_ok=True))
    assert some["removed.files"] == FILES


def test_a_wide_tree_needs_few_descriptors(tmp_path: Path) -> None:
    """Queued directories hold no descriptor: 600 subdirectories of one directory go
    under a limit of 64 open files."""
    root = tmp_path / "wide"
    for d in range(600):
        (root / f"d{d:03}").mkdir(parents=True)
        (root / f"d{d:03}" / "f").write_bytes(b"x")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    code = (
        "import sys; from rcp_core.tools.remove.rmtree import remove; "
        "remove([sys.argv[1]])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(root)],
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert not root.exists()


def test_files_are_looked_at_only_for_the_age_rules(tmp_path: Path) -> None:
    """Through the latency FUSE (shared storage, where each look is a round trip):
    without age rules files are not stat'ed (their bytes are not counted), with one
    they are."""
    from benchmarks.latencyfs import mounted

    backing, mnt = tmp_path / "backing", tmp_path / "mnt"
    mnt.mkdir()
    make_tree(backing / "a", TREE)
    make_tree(backing / "b", TREE)
    with mounted(backing, mnt) as live:
        plain = remove([live / "a"])
        aged = remove([live / "b"], RemoveSettings(modified_before=time.time() + 60))
    assert not (backing / "a").exists()
    assert not (backing / "b").exists()
    assert plain["removed.files"] == aged["removed.files"] == FILES
    assert plain["removed.specials"] == 1
    assert plain["removed.bytes"] == 0
    assert aged["removed.bytes"] == BYTES


@pytest.mark.parametrize(
    ("chosen", "initial", "minimum"),
    [
        (Concurrency(initial=1, maximum=8, processes=2, aside=2), 2, 2),
        (Concurrency(initial=32, minimum=4, maximum=128), 32, 4),
        (Concurrency(initial=1, maximum=1, processes=2), 1, 1),
        (Concurrency(initial=1, maximum=1, adaptive=False, processes=2), 1, 1),
    ],
)
def test_a_removal_runs_threads_where_a_copy_would_run_processes(
    tmp_path: Path, chosen: Concurrency, initial: int, minimum: int
) -> None:
    """unlink works in the kernel without the GIL: on a CPU-bound local disk the
    removal overlaps it in threads, as many as the copy's processes, and never
    spawns a process; a fixed setting or a maximum stays as chosen."""

    class Site:
        @hookimpl
        def rcp_choose_concurrency(self) -> Concurrency:
            return chosen

    (tmp_path / "t").mkdir()
    run = _Removal(RemoveSettings(), plugin_manager([Site()]), [str(tmp_path / "t")])
    assert run.concurrency == dataclasses.replace(
        chosen, initial=initial, minimum=minimum, processes=1, aside=0
    )


def test_a_cancelled_removal_fails_as_a_cancelled_copy_does(tmp_path: Path) -> None:
    """Cancelled before its end, a removal raises CopyFailedError ("remove",
    stopped) with what it removed so far, never returns as if it had removed
    everything; the rest stays."""
    root = make_tree(
        tmp_path / "tree", {f"d{d}/f{f}": b"x" for d in range(20) for f in range(50)}
    )
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(CopyFailedError, match="remove stopped") as info:
        remove([root], cancel=cancel)
    assert info.value.stopped
    assert root.exists()
