"""The source and destination roles over real TLS connections on loopback.

Each test runs both roles in this process (the source in a thread) with fresh
identities pinned both ways, and checks the copy entry by entry.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

import rcp_core
from rcp_core import CopySettings, DryRun, ExistingPolicy, Preserve
from rcp_core.engine.temporaries import temp_name
from rcp_core.errors import ProtocolError
from support.roles import remote_copy
from support.treecmp import TreeCompare
from support.treespec import (
    Dir,
    Fifo,
    File,
    HardLink,
    Sparse,
    Spec,
    Symlink,
    make_tree,
)

MIB = 1 << 20
T1 = 1_600_000_000_000_000_000


MIXED: Spec = {
    ".": Dir(mode=0o750, mtime_ns=1_600_000_000_123_456_789),
    "empty": b"",
    "small": File(b"hello\n", mode=0o640, mtime_ns=1_500_000_000_000_000_001),
    "sub": Dir(mode=0o700, mtime_ns=1_400_000_000_000_000_000),
    "sub/deeper/leaf": b"x" * 5000,
    "sub/deeper/empty-dir": Dir(),
    "big": File(os.urandom(MIB + 17), mode=0o600),
    "bigger": File(os.urandom(9 * MIB + 3)),
    "link": Symlink("small"),
    "dangling": Symlink("../nowhere"),
    "sparse": Sparse(64 * MIB, {0: b"head", 40 * MIB: b"middle" * 1000}),
    "names/caf\xe9 \u2603": b"unicode name",
}


def test_a_tree_arrives_exactly(tmp_path: Path, tree_compare: TreeCompare) -> None:
    src = make_tree(tmp_path / "src", MIXED)
    sent, written, errors = remote_copy(src, tmp_path / "dst")
    assert errors == []
    assert tree_compare(src, tmp_path / "dst", sparse=True) == []
    assert written["copied.files"] == sent["copied.files"] == 7
    assert written["copied.bytes"] == sent["copied.bytes"]
    assert written["copied.symlinks"] == 2
    assert written["copied.dirs"] == 5
    # Holes stayed holes: the sparse file occupies far less than its size.
    assert os.stat(tmp_path / "dst" / "sparse").st_blocks * 512 < MIB


def test_many_small_files_over_one_connection(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    spec: dict[str, Any] = {
        f"d{i}/f{j}": os.urandom(100) for i in range(8) for j in range(300)
    }
    src = make_tree(tmp_path / "src", spec)
    _, written, errors = remote_copy(src, tmp_path / "dst", connections=1)
    assert errors == []
    assert written["copied.files"] == 2400
    assert tree_compare(src, tmp_path / "dst") == []


@pytest.mark.parametrize("size", [0, 10, 3 * MIB])
def test_a_single_file_is_copied_under_the_destination_name(
    tmp_path: Path, size: int
) -> None:
    data = os.urandom(size)
    (tmp_path / "one").write_bytes(data)
    os.utime(tmp_path / "one", ns=(1, 1_234_567_890_123_456_789))
    _, written, errors = remote_copy(tmp_path / "one", tmp_path / "renamed")
    assert errors == []
    assert (tmp_path / "renamed").read_bytes() == data
    assert os.stat(tmp_path / "renamed").st_mtime_ns == 1_234_567_890_123_456_789
    assert written["copied.files"] == 1


def test_an_unreadable_entry_is_reported_and_the_rest_arrives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that fails (EIO: a disk error, which root cannot provoke here) costs
    that entry only."""
    from rcp_core.remote import sendbatch

    read_all = sendbatch._read_all

    def failing(fd: int, size: int) -> bytes:
        if size == len(b"broken sector"):
            raise OSError(errno.EIO, "Input/output error")
        return read_all(fd, size)

    monkeypatch.setattr(sendbatch, "_read_all", failing)
    src = make_tree(
        tmp_path / "src",
        {"a/ok": b"fine", "a/bad": b"broken sector", "b/ok": b"also fine"},
    )
    sent, written, _ = remote_copy(src, tmp_path / "dst")
    assert sent["errors"] == 1
    assert (tmp_path / "dst/a/ok").read_bytes() == b"fine"
    assert (tmp_path / "dst/b/ok").read_bytes() == b"also fine"
    assert not (tmp_path / "dst/a/bad").exists()
    assert written["copied.files"] == 2


@pytest.mark.privileged  # mknod of a device
def test_fifos_and_devices_are_recreated(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "src", {"pipe": Fifo(0o640, T1), "f": b"file"})
    os.mknod(src / "null", 0o620 | stat.S_IFCHR, os.makedev(1, 3))
    os.utime(src / "null", ns=(T1, T1))
    _, written, errors = remote_copy(src, tmp_path / "dst")
    assert errors == []
    assert written["copied.specials"] == 2
    assert stat.S_ISFIFO(os.lstat(tmp_path / "dst/pipe").st_mode)
    assert os.lstat(tmp_path / "dst/null").st_rdev == os.makedev(1, 3)
    assert tree_compare(src, tmp_path / "dst") == []
    _, again, errors = remote_copy(
        src, tmp_path / "dst", CopySettings(existing=ExistingPolicy.OVERWRITE)
    )
    assert errors == []
    assert again["unchanged.specials"] == 2


def test_an_existing_destination_is_not_touched_by_default(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", {"f": b"new"})
    make_tree(tmp_path / "dst", {"f": b"old", "keep": b"mine"})
    _, written, errors = remote_copy(src, tmp_path / "dst")
    assert errors
    assert "exists" in errors[0]
    assert (tmp_path / "dst/f").read_bytes() == b"old"
    assert written["copied.files"] == 0


def test_overwrite_replaces_changed_files_and_keeps_identical_ones(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(
        tmp_path / "src",
        {
            "same": File(b"same", mtime_ns=10**18),
            "changed": b"new",
            "big": os.urandom(2 * MIB),
        },
    )
    dst = tmp_path / "dst"
    make_tree(
        dst,
        {
            "same": File(b"same", mtime_ns=10**18),
            "changed": b"old contents",
            "big": b"x",
        },
    )
    same_ino = os.stat(dst / "same").st_ino
    settings = CopySettings(existing=ExistingPolicy.OVERWRITE)
    _, written, errors = remote_copy(src, dst, settings)
    assert errors == []
    assert tree_compare(src, dst) == []
    assert os.stat(dst / "same").st_ino == same_ino  # left alone
    assert written["unchanged.files"] == 1
    assert written["copied.files"] == 2
    assert not [p for p in os.listdir(dst) if p.startswith(".rcp-")]


def test_a_symlink_with_the_same_target_but_other_times_gets_the_sources(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """A link a killed run made but never dated (the crash suite's master kill found
    it): the rerun gives it the source's times in place, as a local copy does (the
    link is not made again); an identical link stays as it is."""
    src = make_tree(
        tmp_path / "src",
        {"undated": Symlink("nowhere", T1), "dated": Symlink("f", T1)},
    )
    dst = make_tree(
        tmp_path / "dst",
        {"undated": Symlink("nowhere", T1 - 10**12), "dated": Symlink("f", T1)},
    )
    dated_ino = os.lstat(dst / "dated").st_ino
    undated_ino = os.lstat(dst / "undated").st_ino
    settings = CopySettings(existing=ExistingPolicy.OVERWRITE)
    _, written, errors = remote_copy(src, dst, settings)
    assert errors == []
    assert tree_compare(src, dst) == []
    assert os.lstat(dst / "undated").st_mtime_ns == T1
    assert os.lstat(dst / "undated").st_ino == undated_ino
    assert os.lstat(dst / "dated").st_ino == dated_ino
    assert (written["copied.symlinks"], written["unchanged.symlinks"]) == (1, 1)


def test_a_rerun_removes_the_temporaries_a_killed_destination_left(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """A destination daemon killed while it replaced ``sub/f`` (and a large file)
    left their temporaries; the next run removes them, and only them: a source file
    of that shape, standing for a name the source lacks, stays."""
    src = make_tree(
        tmp_path / "src",
        {
            "sub/f": b"new",
            "big": os.urandom(2 * MIB),
            "sub/.rcp-00000000.mine": b"the user's",
        },
    )
    dst = tmp_path / "dst"
    remote_copy(src, dst)
    leftovers = [dst / "sub" / ".rcp-0123abcd.f", dst / ".rcp-89abcdef.big"]
    for path in leftovers:
        path.write_bytes(b"part of a copy")
    settings = CopySettings(existing=ExistingPolicy.OVERWRITE)
    _, written, errors = remote_copy(src, dst, settings)
    assert errors == []
    assert written["removed.files"] == 2
    assert not any(path.exists() for path in leftovers)
    assert tree_compare(src, dst) == []


def test_names_that_escape_the_directory_are_protocol_errors() -> None:
    from rcp_core.remote.receivedtree import check_name

    for bad in ("..", ".", "", "a/b", "x\0y", 5):
        with pytest.raises(ProtocolError):
            check_name(bad)
    assert check_name("..hidden") == "..hidden"


LINKED: Spec = {
    "a/one": File(b"1" * 300, mode=0o640),
    "a/one-again": HardLink("a/one"),
    "b/one-elsewhere": HardLink("a/one"),
    "big": File(os.urandom(2 * MIB + 5)),  # CHUNK frames, its link in FILES
    "c/big-link": HardLink("big"),
    **{f"many/f{i}": os.urandom(50) for i in range(40)},
    **{f"many/g{i}": HardLink(f"many/f{i}") for i in range(40)},
    "lonely": b"single",
}


def test_hard_links_stay_hard_links_and_data_crosses_once(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "src", LINKED)
    sent, written, errors = remote_copy(src, tmp_path / "dst")
    assert errors == []
    assert tree_compare(src, tmp_path / "dst") == []  # link groups compared too
    assert written["copied.files"] == sent["copied.files"] == 43
    assert written["copied.hardlinks"] == sent["copied.hardlinks"] == 43
    assert sent["copied.bytes"] == 300 + 2 * MIB + 5 + 40 * 50 + 6


def test_a_file_linked_from_outside_the_tree_is_a_plain_file(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", {"inside": b"shared"})
    os.link(src / "inside", tmp_path / "outside")
    _, written, errors = remote_copy(src, tmp_path / "dst")
    assert errors == []
    assert written["copied.files"] == 1
    assert written["copied.hardlinks"] == 0
    assert os.stat(tmp_path / "dst" / "inside").st_nlink == 1


def test_a_destination_of_protocol_1_0_gets_every_name_as_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hard links came with 1.1; an older peer is sent what it understands."""
    from rcp_core.remote import handshake

    monkeypatch.setattr(handshake, "PROTOCOL", (1, 0))
    src = make_tree(tmp_path / "src", LINKED)
    _, written, errors = remote_copy(src, tmp_path / "dst")
    assert errors == []
    assert written["copied.files"] == 86
    assert written["copied.hardlinks"] == 0
    assert (tmp_path / "dst/b/one-elsewhere").read_bytes() == b"1" * 300
    assert os.stat(tmp_path / "dst/b/one-elsewhere").st_nlink == 1


def linked_symlinks(root: Path, target_kind: str) -> Path:
    """Symlinks with two names each (``ln`` of a symlink): ``a/l`` and ``a/l2`` in one
    directory, ``a/m`` and ``b/m2`` in two, pointing at a file, a directory or
    nothing, as ``target_kind`` says."""
    target = {"file": "../f", "dir": "../d", "dangling": "../nowhere"}[target_kind]
    return make_tree(
        root,
        {
            "f": File(b"the target", mtime_ns=T1),
            "d/inside": b"inside",
            "a/l": Symlink(target, T1 + 1),
            "a/l2": HardLink("a/l"),
            "a/m": Symlink(target, T1 + 2),
            "b/m2": HardLink("a/m"),
        },
    )


def lstat_ids(root: Path) -> dict[str, tuple[int, int, int]]:
    """(device, inode, links) of each name of :func:`linked_symlinks`' copy."""
    out = {}
    for rel in ("a/l", "a/l2", "a/m", "b/m2"):
        st = os.lstat(root / rel)
        assert stat.S_ISLNK(st.st_mode), rel
        out[rel] = (st.st_dev, st.st_ino, st.st_nlink)
    return out


@pytest.mark.parametrize("target_kind", ["file", "dir", "dangling"])
def test_hard_linked_symlinks_stay_one_inode(
    tmp_path: Path, tree_compare: TreeCompare, target_kind: str
) -> None:
    """A symlink's later names travel as ``hardlink`` entries of its link id and are
    linked to the symlink the destination made; a second run changes nothing."""
    src = linked_symlinks(tmp_path / "src", target_kind)
    dst = tmp_path / "dst"
    sent, written, errors = remote_copy(src, dst)
    assert errors == []
    assert tree_compare(src, dst) == []  # link groups compared too
    ids = lstat_ids(dst)
    assert ids["a/l"] == ids["a/l2"] != ids["a/m"] == ids["b/m2"]
    assert {nlink for _, _, nlink in ids.values()} == {2}
    assert os.readlink(dst / "b/m2") == os.readlink(src / "a/m")
    assert written["copied.symlinks"] == sent["copied.symlinks"] == 2
    assert written["copied.hardlinks"] == sent["copied.hardlinks"] == 2
    overwrite = CopySettings(existing=ExistingPolicy.OVERWRITE)
    _, again, errors = remote_copy(src, dst, overwrite)
    assert errors == []
    assert again["unchanged.symlinks"] == again["unchanged.hardlinks"] == 2
    assert again["copied.symlinks"] == again["copied.hardlinks"] == 0
    assert lstat_ids(dst) == ids
    dry = CopySettings(dry_run=DryRun.ALL)
    _, would, errors = remote_copy(src, tmp_path / "dry", dry)
    assert errors == []
    assert not (tmp_path / "dry").exists()
    for key in ("copied.symlinks", "copied.hardlinks", "copied.files"):
        assert would[key] == written[key], key


def test_a_destination_of_protocol_1_8_gets_every_symlink_name_as_a_symlink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Links of symlinks came with 1.9: an older destination, which would ignore the
    link id of a symlink, gets each name as a symlink of its own (and no hang)."""
    from rcp_core.remote import handshake

    monkeypatch.setattr(handshake, "PROTOCOL", (1, 8))
    src = linked_symlinks(tmp_path / "src", "file")
    _, written, errors = remote_copy(src, tmp_path / "dst")
    assert errors == []
    assert written["copied.symlinks"] == 4
    assert written["copied.hardlinks"] == 0
    assert {nlink for _, _, nlink in lstat_ids(tmp_path / "dst").values()} == {1}


@pytest.mark.parametrize(
    ("entries", "why"),
    [
        ([{"name": "x", "kind": "hardlink", "meta": "META"}], "without its link id"),
        ([{"name": "x", "kind": "file", "meta": "META", "link": 0}], "bad link id"),
        ([{"name": "x", "kind": "file", "meta": "META", "link": True}], "bad link id"),
        (
            [
                {"name": "x", "kind": "file", "meta": "META", "link": 3},
                {"name": "y", "kind": "file", "meta": "META", "link": 3},
            ],
            "two first names",
        ),
    ],
)
def test_malformed_hard_links_are_protocol_errors(
    tmp_path: Path, entries: list[dict[str, Any]], why: str
) -> None:
    from rcp_core.remote.meta import meta_of
    from rcp_core.remote.receive import Receiver
    from rcp_core.remote.roleruntime import RoleRun

    (tmp_path / "f").write_bytes(b"")
    meta = meta_of(os.lstat(tmp_path / "f"))
    for entry in entries:
        if entry.get("meta") == "META":
            entry["meta"] = meta
    (tmp_path / "dst").mkdir()
    settings = CopySettings()
    receiver = Receiver(
        settings,
        os.open(tmp_path / "dst", os.O_RDONLY | os.O_DIRECTORY),
        0o022,
        RoleRun(settings, str(tmp_path / "dst"), source=False),
    )
    try:
        with pytest.raises(ProtocolError, match=why):
            receiver.files({"dir": 0, "entries": entries}, memoryview(b""))
    finally:
        receiver.close()


@pytest.mark.parametrize("order", ["count first", "entries first"])
def test_more_entries_than_dir_end_counts_are_a_protocol_error(
    tmp_path: Path, order: str
) -> None:
    """A directory's count (``dir_end``) and the entries sent for it must agree,
    whichever comes first: a peer sending more is broken or hostile, never
    finishing the directory early."""
    from rcp_core.remote.meta import meta_of
    from rcp_core.remote.receive import Receiver
    from rcp_core.remote.roleruntime import RoleRun

    (tmp_path / "dst").mkdir()
    settings = CopySettings()
    meta = meta_of(os.lstat(tmp_path / "dst"))
    receiver = Receiver(
        settings,
        os.open(tmp_path / "dst", os.O_RDONLY | os.O_DIRECTORY),
        0o022,
        RoleRun(settings, str(tmp_path / "dst"), source=False),
    )
    failed = {"dir": 0, "entries": [{"name": "a", "kind": "failed"}]}
    try:
        assert receiver.open_dir(1, 0, "sub", meta)  # keeps directory 0 open
        if order == "count first":
            receiver.end_dir(0, 0)
            with pytest.raises(ProtocolError, match="more entries than the 0"):
                receiver.files(failed, memoryview(b""))
        else:
            receiver.files(failed, memoryview(b""))
            with pytest.raises(ProtocolError, match="counts 0 entries, 1 were sent"):
                receiver.end_dir(0, 0)
        assert not receiver.done.is_set()
    finally:
        receiver.close()


def test_a_second_overwrite_run_sends_no_file_data(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """The destination's manifests spare what already matches; a changed file and a
    new one still travel, and hard links stay linked."""
    src = make_tree(tmp_path / "src", {**MIXED, **LINKED})
    dst = tmp_path / "dst"
    overwrite = CopySettings(existing=ExistingPolicy.OVERWRITE)
    first, _, errors = remote_copy(src, dst, overwrite)
    assert errors == []
    assert first["copied.bytes"] > 75 * MIB
    again, written, errors = remote_copy(src, dst, overwrite)
    assert errors == []
    assert again["copied.bytes"] == again["copied.files"] == 0
    assert written["copied.files"] == written["copied.hardlinks"] == 0
    assert written["unchanged.files"] == 6 + 43  # "big" is LINKED's
    assert written["unchanged.hardlinks"] == 43
    assert tree_compare(src, dst, sparse=True) == []
    (src / "small").write_bytes(b"changed, and longer\n")
    (src / "new").write_bytes(b"new")
    third, written, errors = remote_copy(src, dst, overwrite)
    assert errors == []
    assert third["copied.files"] == written["copied.files"] == 2
    assert third["copied.bytes"] == len(b"changed, and longer\n") + 3
    assert tree_compare(src, dst, sparse=True) == []


@pytest.mark.parametrize(
    ("policy", "counted"),
    [(ExistingPolicy.IGNORE_EXISTING, "skipped"), (ExistingPolicy.UPDATE, "skipped")],
)
def test_files_to_keep_are_not_sent(
    tmp_path: Path, policy: ExistingPolicy, counted: str
) -> None:
    src = make_tree(tmp_path / "src", {"a": File(b"old source", mtime_ns=1)})
    dst = make_tree(tmp_path / "dst", {"a": File(b"newer here", mtime_ns=2)})
    sent, written, errors = remote_copy(src, dst, CopySettings(existing=policy))
    assert errors == []
    assert sent["copied.bytes"] == 0
    assert written[f"{counted}.files"] == 1
    assert (dst / "a").read_bytes() == b"newer here"


FILTERED: Spec = {
    ".gitignore": b"*.log\nbuild/\n",
    "keep.py": b"print()",
    "notes.log": b"ignored by git",
    "skip.tmp": b"excluded",
    "build/out.o": b"ignored dir",
    "src/a.py": b"a",
    "src/b.txt": b"b",
    "src/deep/c.py": b"c",
    "src/deep/d.tmp": b"d",
    "docs/readme.txt": b"r",
    "docs/only-txt/x.txt": b"x",
    "empty/e.tmp": b"e",
}
EXTRA: Spec = {  # with fixed times, so two destinations made from it are the same
    "gone.py": File(b"not in the source", mtime_ns=T1),
    "old/stale.py": File(b"a whole stale directory", mtime_ns=T1),
    "old/stale.tmp": File(b"excluded: kept unless --delete-excluded", mtime_ns=T1),
    "src/deep/also-gone.py": File(b"x", mtime_ns=T1),
    "src/local.tmp": File(b"excluded name: kept", mtime_ns=T1),
}


@pytest.mark.parametrize(
    "settings",
    [
        CopySettings(excludes=("*.tmp",)),
        CopySettings(includes=("*.py",)),
        CopySettings(includes=("docs/**",), excludes=("x.txt",)),
        CopySettings(gitignore=True, excludes=("*.tmp",)),
        CopySettings(delete=True, excludes=("*.tmp",)),
        CopySettings(delete=True, delete_excluded=True, excludes=("*.tmp",)),
        CopySettings(delete=True, includes=("*.py",), gitignore=True),
        CopySettings(delete=True),
    ],
    ids=[
        "exclude",
        "include-only",
        "include-dir-exclude",
        "gitignore",
        "delete",
        "delete-excluded",
        "delete-include-gitignore",
        "delete-plain",
    ],
)
def test_filters_and_delete_do_what_a_local_copy_does(
    tmp_path: Path, tree_compare: TreeCompare, settings: CopySettings
) -> None:
    """The same settings, the same source and destination: a copy between hosts
    leaves exactly what a local copy leaves."""
    import rcp_core

    src = make_tree(tmp_path / "src", FILTERED)
    local, remote = tmp_path / "local", tmp_path / "remote"
    if settings.delete:
        make_tree(local, EXTRA)
        make_tree(remote, EXTRA)
    rcp_core.copy(src, local, settings)
    sent, written, errors = remote_copy(src, remote, settings)
    assert errors == []
    assert sent["errors"] == written["errors"] == 0
    # A directory that is not in the source but stays (it holds protected entries)
    # has the time of the removals in it, different in each copy.
    differences = tree_compare(local, remote)
    assert [d for d in differences if not d.startswith("'old': mtime_ns")] == []


def test_extended_attributes_and_acls_cross_when_kept(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """``--preserve all``: user.* attributes and POSIX ACLs of files (small and
    large) and directories arrive; by default none do."""
    src = make_tree(
        tmp_path / "src",
        {
            ".": Dir(xattrs={"user.root": b"r"}),
            "f": File(b"data", xattrs={"user.a": b"1", "user.empty": b""}),
            "big": File(os.urandom(2 * MIB), xattrs={"user.b": bytes(range(256))}),
            "d": Dir(xattrs={"user.dir": b"\x00\xff binary"}),
            "d/h": File(b"h", mode=0o640),
            "plain": b"none",
        },
    )
    subprocess.run(["setfacl", "-m", "u:1234:rw", str(src / "d/h")], check=True)
    acl = os.getxattr(src / "d/h", "system.posix_acl_access")
    _, _, errors = remote_copy(
        src, tmp_path / "all", CopySettings(preserve=Preserve.parse("all"))
    )
    assert errors == []
    assert tree_compare(src, tmp_path / "all", xattrs=True) == []
    assert os.getxattr(tmp_path / "all/d/h", "system.posix_acl_access") == acl
    _, _, errors = remote_copy(src, tmp_path / "default")
    assert errors == []
    assert os.listxattr(tmp_path / "default/f") == []
    assert os.listxattr(tmp_path / "default/d") == []


def test_malformed_extended_attributes_are_protocol_errors() -> None:
    from rcp_core.remote.meta import xattrs_of

    assert xattrs_of({"mode": 1}) is None
    assert xattrs_of({"xattrs": {"user.a": "AAE="}}) == {"user.a": b"\x00\x01"}
    for bad in (["x"], {"": "AA=="}, {"user.a": "not base64!"}, {"user.a": 5}):
        with pytest.raises(ProtocolError, match="xattr"):
            xattrs_of({"xattrs": bad})


def test_a_filter_file_filters_as_on_a_local_copy(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    import rcp_core
    from rcp_core.remote.settingswire import settings_from_wire, settings_to_wire

    rules = tmp_path / "rules"
    rules.write_text("--exclude *.tmp\n--include *.py\n")
    settings = CopySettings(delete=True, filter_file=str(rules))
    src = make_tree(tmp_path / "src", FILTERED)
    local, remote = (
        make_tree(tmp_path / "local", EXTRA),
        make_tree(tmp_path / "remote", EXTRA),
    )
    rcp_core.copy(src, local, settings)
    # As a daemon gets it: the rules inline, no file.
    _, _, errors = remote_copy(
        src, remote, settings_from_wire(settings_to_wire(settings))
    )
    assert errors == []
    differences = tree_compare(local, remote)
    assert [d for d in differences if not d.startswith("'old': mtime_ns")] == []


def test_a_dry_run_says_what_a_copy_would_do_and_changes_nothing(
    tmp_path: Path, tree_compare: TreeCompare, caplog: pytest.LogCaptureFixture
) -> None:
    src = make_tree(tmp_path / "src", {**FILTERED, "big": File(os.urandom(2 * MIB))})
    dry = CopySettings(dry_run=DryRun.ALL)
    with caplog.at_level(logging.INFO, logger="rcp_core"):
        sent, would, errors = remote_copy(src, tmp_path / "new", dry)
    assert errors == []
    assert not (tmp_path / "new").exists()
    assert sent["copied.bytes"] == 0  # no file data crossed
    lines = [r.getMessage() for r in caplog.records]
    assert "would create dir 'new'" in lines
    assert "would copy file 'new/big'" in lines
    assert "would copy file 'new/src/deep/c.py'" in lines
    _, real, _ = remote_copy(src, tmp_path / "new")
    for key in ("copied.files", "copied.dirs", "copied.bytes", "copied.symlinks"):
        assert would[key] == real[key], key


def test_a_dry_mirror_lists_replacements_and_removals_and_touches_nothing(
    tmp_path: Path, tree_compare: TreeCompare, caplog: pytest.LogCaptureFixture
) -> None:
    src = make_tree(
        tmp_path / "src",
        {"same": File(b"s", mtime_ns=T1), "new": b"n", "changed": b"c2"},
    )
    dst = make_tree(
        tmp_path / "dst",
        {
            "same": File(b"s", mtime_ns=T1),
            "changed": File(b"c1", mtime_ns=T1),
            "gone": b"g",
        },
    )
    before = make_tree(tmp_path / "before", {})
    import shutil

    shutil.rmtree(before)
    shutil.copytree(dst, before, symlinks=True)
    settings = CopySettings(delete=True, dry_run=DryRun.ALL)
    with caplog.at_level(logging.INFO, logger="rcp_core"):
        _, _, errors = remote_copy(src, dst, settings)
    assert errors == []
    lines = {r.getMessage() for r in caplog.records}
    assert {
        "would copy file 'dst/new'",
        "would replace file 'dst/changed'",
        "unchanged file 'dst/same'",
        "would remove entry 'dst/gone'",
    } <= lines
    assert tree_compare(before, dst) == []


def test_ignore_existing_keeps_an_existing_directorys_metadata_as_a_local_copy(
    tmp_path: Path,
) -> None:
    """Under ``--ignore-existing`` a directory that was there keeps its own metadata
    (the source's mode and times are not applied to it), between hosts as in a
    local copy (the two finishes disagreed); a directory the copy made gets the
    source's."""
    src = make_tree(
        tmp_path / "src",
        {
            ".": Dir(mode=0o755, mtime_ns=1_600_000_000 * 10**9),
            "old": Dir(mode=0o750, mtime_ns=1_600_000_000 * 10**9),
            "old/f": b"f",
            "new": Dir(mode=0o705, mtime_ns=1_600_000_100 * 10**9),
            "new/g": b"g",
        },
    )
    keep = CopySettings(existing=ExistingPolicy.IGNORE_EXISTING)
    for how, dst in (("local", tmp_path / "local"), ("remote", tmp_path / "remote")):
        make_tree(dst, {".": Dir(mode=0o700), "old": Dir(mode=0o711)})
        if how == "local":
            rcp_core.copy([str(src)], str(dst), keep)
        else:
            _, _, errors = remote_copy(src, dst, keep)
            assert errors == []
        old = os.stat(dst / "old")
        assert stat.S_IMODE(old.st_mode) == 0o711, how
        assert old.st_mtime_ns != 1_600_000_000 * 10**9, how
        assert stat.S_IMODE(os.stat(dst).st_mode) == 0o700, how
        new = os.stat(dst / "new")
        assert stat.S_IMODE(new.st_mode) == 0o705, how
        assert new.st_mtime_ns == 1_600_000_100 * 10**9, how


@pytest.mark.parametrize(
    "existing",
    [ExistingPolicy.OVERWRITE, ExistingPolicy.UPDATE, ExistingPolicy.IGNORE_EXISTING],
)
def test_a_dry_run_explains_each_decision_as_a_local_one_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, existing: ExistingPolicy
) -> None:
    """``--dry-run explain`` between hosts says the local copy's lines, word for
    word, reasons included (the copy's name is the same here, so are the paths)."""
    src = make_tree(
        tmp_path / "from" / "set",
        {
            "same": File(b"same", mtime_ns=T1),
            "resized": File(b"longer now", mtime_ns=T1),
            "older": File(b"older", mtime_ns=T1 - 10),
            "new": b"new",
            "sub/deeper/new": b"deep",
            "link": Symlink("same"),
            "newlink": Symlink("new"),
            "fifo": Fifo(),
            "was_a_file/in": b"in",
        },
    )
    leftover = temp_name("older")
    partial: Spec = {
        "same": File(b"same", mtime_ns=T1),
        "resized": File(b"short", mtime_ns=T1),
        "older": File(b"OLDER", mtime_ns=T1),
        "link": Symlink("elsewhere"),
        "sub": Dir(),
        "was_a_file": File(b"a file where the source has a directory", mtime_ns=T1),
        leftover: b"left by a killed run",
    }
    settings = CopySettings(existing=existing, dry_run=DryRun.EXPLAIN)

    def lines(dst: Path, copy: Any) -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="rcp_core"):
            copy(dst)
        # Its decisions, not where its connections went (rcp_core.network).
        return sorted(r.getMessage() for r in caplog.records if r.name == "rcp_core")

    local = lines(
        make_tree(tmp_path / "local" / "set", partial),
        lambda dst: rcp_core.copy(str(src), str(dst), settings),
    )
    remote = lines(
        make_tree(tmp_path / "remote" / "set", partial),
        lambda dst: remote_copy(src, dst, settings),
    )
    assert remote == local
    assert "would copy file 'set/new' (new)" in local
    said = f"would remove temporary 'set/{leftover}' (left by an interrupted run)"
    assert said in local
    if existing is ExistingPolicy.OVERWRITE:
        assert "would replace file 'set/resized' (size differs)" in local
