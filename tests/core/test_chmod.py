"""``rchm``'s core on real trees: modes checked against ``/bin/chmod`` itself, the
per-type rules, and the walk (directories after their contents, symlinks never
followed, only what differs, dry runs, filters, mount points, failures, cancel)."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rcp_core.errors import CopyFailedError, UsageError
from rcp_core.tools.chmod.changetree import Changes, ChmodSettings, change
from rcp_core.tools.chmod.modes import parse_mode
from rcp_core.tools.chmod.rules import ByType, Rules
from support.immutable import immutable as chattr_i
from support.nobody import NOBODY, world_dir
from support.treespec import Dir, Fifo, File, Spec, Symlink, make_tree

MODES = [
    *("755", "0644", "00755", "4755", "2755", "1777", "7777", "0", "000", "0700"),
    *("u+rwX,g-w,o=", "a+r", "+x", "+X", "a-x,a+X", "u=rwx", "g=u", "o=g"),
    *("u+s", "g+s", "+s", "o+t", "+t", "a+t", "u+t", "g-s", "a-s", "o-t", "ug-s"),
    *("=755", "-6000", "+4000", "=", "u=", "go=", "+", "-", "+rX", "=rX"),
    *("u+r-w", "ug=rw,o=r", "a=rwxXst", "o=u-w", "g+u", "u=g+x", "+r=755"),
    *("u+x,g=u,o=g", "a+rw,g-w", "go-rwx", "u=rwxs,g=rxs,o=t", "a-rwx,u+X"),
]
"""chmod's forms: octal (short ones keep a directory's set-ID bits), symbolic with
X, s, t, copies, several operators, several clauses, and ``-``/``=`` octal."""
STARTS = [0o644, 0o755, 0o6755, 0o2750, 0o1777, 0o000, 0o4000, 0o2010, 0o7777, 0o100]
INVALID = [
    *("", "8", "u", "x", "u+rq", "u=gx", "ug+755", "u+r,", "a+r,,g", "+9"),
    *("u=755", "7778", "17777", "g=u+755x", "+755r", "rwx"),
]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A file and a directory for ``/bin/chmod`` to work on."""
    root = tmp_path_factory.mktemp("chmod")
    (root / "f").write_bytes(b"")
    (root / "d").mkdir()
    return root / "f", root / "d"


def _chmod(mode: str, path: Path, start: int) -> int | None:
    """What ``/bin/chmod mode`` makes of ``path`` with mode ``start``, the umask 0
    (rchm ignores it); ``None`` where chmod refuses the mode."""
    os.chmod(path, start)
    done = subprocess.run(
        ["/bin/chmod", "--", mode, str(path)],
        capture_output=True,
        preexec_fn=lambda: os.umask(0),
        check=False,
    )
    return None if done.returncode else os.stat(path).st_mode & 0o7777


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["file", "dir"])
def test_modes_are_chmods(scratch: tuple[Path, Path], mode: str, kind: str) -> None:
    """For each starting mode, a file and a directory get the mode chmod gives."""
    path = scratch[kind == "dir"]
    parsed = parse_mode(mode)
    for start in STARTS:
        expected = _chmod(mode, path, start)
        assert expected is not None, f"chmod refused {mode!r}"
        got = parsed.apply(start, kind == "dir")
        assert (oct(start), oct(got)) == (oct(start), oct(expected)), mode


@pytest.mark.parametrize("mode", INVALID)
def test_what_chmod_refuses_is_refused(scratch: tuple[Path, Path], mode: str) -> None:
    assert _chmod(mode, scratch[0], 0o644) is None
    with pytest.raises(UsageError, match="invalid mode"):
        parse_mode(mode)


def test_a_clause_without_who_ignores_the_umask() -> None:
    """As the Rust rchm: +w is a+w wherever it runs (chmod under umask 022 would add
    only u+w)."""
    old = os.umask(0o022)
    try:
        assert parse_mode("+w").apply(0o444, False) == 0o666
    finally:
        os.umask(old)


def test_rules_per_type() -> None:
    rules = Rules.parse(mode="f:644 d:g+s", owner="nobody l:0", group="65534")
    assert rules.mode.symlink is None
    assert rules.owner == ByType(file=NOBODY, dir=NOBODY, symlink=0)
    assert rules.group == ByType(file=NOBODY, dir=NOBODY, symlink=NOBODY)
    bare = Rules.parse(mode="u+x")
    assert bare.mode.file == bare.mode.dir == parse_mode("u+x")
    assert bare.mode.symlink is None  # a bare mode is not a symlink's


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "nothing to change"),
        ({"mode": "l:755"}, "symlinks have no mode"),
        ({"mode": "644 755"}, "two values without a type"),
        ({"mode": "f:644 file:600"}, "two values for files"),
        ({"mode": "x:644"}, "unknown type"),
        ({"mode": "f:9"}, "--mode: invalid mode '9'"),
        ({"owner": "no-such-user-here"}, "--owner: unknown user"),
        ({"group": "d:no-such-group-here"}, "--group: unknown group"),
        ({"owner": "4294967295"}, "out of range"),
        ({"group": " "}, "--group: empty"),
    ],
)
def test_rules_refuse_what_is_not_one(given: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        Rules.parse(**given)


def _stat(mode: int, uid: int = 0, gid: int = 0) -> os.stat_result:
    return os.stat_result((mode, 1, 1, 1, uid, gid, 0, 0, 0, 0))


def test_a_plan_changes_only_what_differs() -> None:
    rules = Rules.parse(mode="f:644 d:755", owner="0", group="l:7")
    assert rules.plan(_stat(stat.S_IFREG | 0o644)) is None
    assert rules.plan(_stat(stat.S_IFLNK | 0o777, gid=7)) is None
    dir_plan = rules.plan(_stat(stat.S_IFDIR | 0o700, uid=5))
    assert dir_plan is not None
    assert (dir_plan.uid, dir_plan.gid, dir_plan.mode) == (0, -1, 0o755)
    link = rules.plan(_stat(stat.S_IFLNK | 0o777, gid=3))
    assert link is not None
    assert (link.uid, link.gid, link.mode) == (-1, 7, None)  # a symlink's mode: never


def test_set_id_bits_are_set_again_after_a_chown() -> None:
    """chown clears a file's set-ID bits: a plan that changes the owner sets them
    again (the mode is kept), a directory's are not cleared."""
    rules = Rules.parse(owner="0")
    setuid = rules.plan(_stat(stat.S_IFREG | 0o4755, uid=5))
    assert setuid is not None
    assert setuid.mode == 0o4755
    plain = rules.plan(_stat(stat.S_IFREG | 0o755, uid=5))
    assert plain is not None
    assert plain.mode is None
    setgid_dir = rules.plan(_stat(stat.S_IFDIR | 0o2775, uid=5))
    assert setgid_dir is not None
    assert setgid_dir.mode is None


TREE: Spec = {
    ".": Dir(0o755),
    "a.txt": File(b"a", 0o644),
    "run.sh": File(b"#!", 0o4755),
    "logs": Dir(0o750),
    "logs/x.log": File(b"x", 0o600),
    "logs/deep/er": Dir(0o700),
    "logs/deep/er/y.log": File(b"y", 0o640),
    "fifo": Fifo(0o644),
    **{f"wide/d{d}/f{f}": File(b"w", 0o600) for d in range(10) for f in range(20)},
}
ENTRIES = len(TREE) + 2 + 10  # logs/deep, wide and its 10 directories
"""Everything under and including the root (``.`` is in TREE)."""


def everything(root: Path) -> dict[str, os.stat_result]:
    """Each entry of the tree (the root as ``.``), by ``lstat``."""
    found = {".": root.lstat()}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = path.lstat()
    return found


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file and a directory that the trees' symlinks point to."""
    return make_tree(
        tmp_path / "outside", {".": Dir(0o755), "target": File(b"t", 0o644)}
    )


@pytest.fixture
def tree(tmp_path: Path, outside: Path) -> Path:
    spec = {
        **TREE,
        "to_file": Symlink(str(outside / "target")),
        "logs/to_dir": Symlink(str(outside)),
    }
    return make_tree(tmp_path / "tree", spec)


def test_mode_owner_and_group_on_a_tree_symlinks_never_followed(
    tree: Path, outside: Path
) -> None:
    before = everything(outside)
    rules = Rules.parse(
        mode="f:u=rw,go=r d:u=rwx,go=rx", owner="nobody", group="nogroup"
    )
    summary = change([tree], ChmodSettings(rules=rules, max_workers=4))
    found = everything(tree)
    for rel, st in found.items():
        assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY), rel  # lchown on symlinks
        if stat.S_ISDIR(st.st_mode):
            assert stat.S_IMODE(st.st_mode) == 0o755, rel
        elif stat.S_ISLNK(st.st_mode):
            assert stat.S_IMODE(st.st_mode) == 0o777, rel  # a symlink's: untouched
        else:
            assert stat.S_IMODE(st.st_mode) == 0o644, rel
    after = everything(outside)
    assert {
        rel: (st.st_mode, st.st_uid, st.st_ctime_ns) for rel, st in after.items()
    } == {
        rel: (st.st_mode, st.st_uid, st.st_ctime_ns) for rel, st in before.items()
    }  # reached only through symlinks: untouched
    assert isinstance(summary, Changes)
    assert summary.as_dict()["changed"] == {
        "files": 204,
        "dirs": 15,
        "symlinks": 2,
        "specials": 1,
    }
    assert summary.as_dict()["entries"] == len(found)


def test_only_what_differs_changes(tree: Path) -> None:
    """A second run finds everything as asked: no chmod or chown (ctimes stay)."""
    settings = ChmodSettings(rules=Rules.parse(mode="go-rwx", owner="0", group="0"))
    change([tree], settings)
    before = {rel: st.st_ctime_ns for rel, st in everything(tree).items()}
    again = change([tree], settings)
    assert {rel: st.st_ctime_ns for rel, st in everything(tree).items()} == before
    assert sum(again.as_dict()["changed"].values()) == 0
    assert sum(again.as_dict()["unchanged"].values()) == len(before)


def test_set_id_bits_survive_a_change_of_owner(tree: Path) -> None:
    change([tree], ChmodSettings(rules=Rules.parse(owner="nobody")))
    assert stat.S_IMODE((tree / "run.sh").stat().st_mode) == 0o4755


AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
CHANGE_AS_NOBODY = """
import sys
from rcp_core.errors import CopyFailedError
from rcp_core.tools.chmod.changetree import ChmodSettings, change
from rcp_core.tools.chmod.rules import Rules
try:
    change([sys.argv[1]], ChmodSettings(rules=Rules.parse(mode=sys.argv[2])))
except CopyFailedError as failed:
    print(failed.summary.as_dict()["error_list"])
else:
    print("ok")
"""


def change_as_nobody(root: Path, mode: str) -> str:
    """What :data:`CHANGE_AS_NOBODY` printed: ``ok``, or its errors."""
    done = subprocess.run(
        [*AS_NOBODY, sys.executable, "-c", CHANGE_AS_NOBODY, str(root), mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def give_to_nobody(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)


@pytest.mark.privileged
@pytest.mark.parametrize("mode", ["000", "u-rx", "a-x"])
def test_taking_away_a_directorys_search_bit_does_not_cut_off_its_contents(
    mode: str,
) -> None:
    """As its owner (not root, whom no mode stops), a tree whose directories lose
    their r or x is still changed whole: each directory after its contents."""
    with world_dir() as world:
        root = make_tree(world / "tree", TREE)
        give_to_nobody(root)
        before = everything(root)
        assert change_as_nobody(root, mode) == "ok"
        parsed = parse_mode(mode)
        for rel, st in everything(root).items():
            want = parsed.apply(before[rel].st_mode, stat.S_ISDIR(st.st_mode))
            assert stat.S_IMODE(st.st_mode) == want, rel


@pytest.mark.privileged
def test_an_unreadable_directory_is_changed_itself_and_walked_the_next_time() -> None:
    """Its owner cannot read it: the scan fails (an error), the directory is still
    changed (``u+rwx``), and the next run walks it."""
    with world_dir() as world:
        root = make_tree(world / "tree", {"sub/f": File(b"f", 0o644)})
        give_to_nobody(root)
        (root / "sub").chmod(0)
        first = change_as_nobody(root, "u+rwx")
        assert "read directory: Permission denied" in first
        assert stat.S_IMODE((root / "sub").stat().st_mode) == 0o700
        assert stat.S_IMODE((root / "sub" / "f").stat().st_mode) == 0o644
        assert change_as_nobody(root, "u+rwx") == "ok"
        assert stat.S_IMODE((root / "sub" / "f").stat().st_mode) == 0o744


def test_a_dry_run_changes_nothing_and_lists_what_would(
    tree: Path, caplog: pytest.LogCaptureFixture
) -> None:
    before = {rel: (st.st_mode, st.st_ctime_ns) for rel, st in everything(tree).items()}
    with caplog.at_level(logging.INFO, logger="rcp_core"):
        summary = change(
            [tree], ChmodSettings(rules=Rules.parse(mode="f:600"), dry_run=True)
        )
    after = {rel: (st.st_mode, st.st_ctime_ns) for rel, st in everything(tree).items()}
    assert after == before
    listed = sorted(r.getMessage() for r in caplog.records)
    assert listed == sorted(
        [
            f"would change {str(tree / 'a.txt')!r}: mode 0644 -> 0600",
            f"would change {str(tree / 'run.sh')!r}: mode 4755 -> 0600",
            f"would change {str(tree / 'logs/deep/er/y.log')!r}: mode 0640 -> 0600",
            f"would change {str(tree / 'fifo')!r}: mode 0644 -> 0600",
        ]
    )  # only what would change: the 0600 files, dirs and symlinks are not listed
    assert summary.dry_run
    assert summary.as_dict()["changed"] == {
        "files": 3,
        "dirs": 0,
        "symlinks": 0,
        "specials": 1,
    }


def test_filters_choose_what_changes(tree: Path) -> None:
    """An include changes only what it matches (directories entered to find it are
    not changed); an exclude leaves its match alone and is not entered."""
    before = everything(tree)
    summary = change(
        [tree],
        ChmodSettings(
            rules=Rules.parse(mode="a+t"),
            includes=("*.log", "/wide/"),
            excludes=("/wide/d3/",),
        ),
    )
    changed = {
        rel for rel, st in everything(tree).items() if st.st_mode != before[rel].st_mode
    }
    wide = {f"wide/d{d}" for d in range(10) if d != 3}
    wide |= {f"wide/d{d}/f{f}" for d in range(10) if d != 3 for f in range(20)}
    assert changed == {"logs/x.log", "logs/deep/er/y.log", "wide", *wide}
    skipped = summary.as_dict()["skipped"]
    # the root, logs, logs/deep, logs/deep/er (entered only), wide/d3 (excluded)
    assert skipped["dirs"] == 5
    assert (tree / "wide/d3/f0").stat().st_mode == before["wide/d3/f0"].st_mode


def test_an_operand_symlink_is_the_link(tree: Path, outside: Path) -> None:
    link = tree / "to_file"
    summary = change([link], ChmodSettings(rules=Rules.parse(mode="600", owner="7")))
    assert link.lstat().st_uid == 7
    assert (outside / "target").stat().st_uid == 0
    assert stat.S_IMODE((outside / "target").stat().st_mode) == 0o644
    assert summary.as_dict()["changed"]["symlinks"] == 1


def test_operands_that_are_missing_or_root_are_refused(tmp_path: Path) -> None:
    (tmp_path / "here").write_bytes(b"")
    settings = ChmodSettings(rules=Rules.parse(mode="600"))
    with pytest.raises(UsageError, match="no such file"):
        change([tmp_path / "here", tmp_path / "gone"], settings)
    with pytest.raises(UsageError, match="refusing to change /"):
        change(["/"], settings)
    assert stat.S_IMODE((tmp_path / "here").stat().st_mode) != 0o600  # untouched


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    """A tree with a tmpfs mounted at ``deep/mnt``."""
    root = make_tree(tmp_path / "tree", {"deep/f": File(b"f", 0o644)})
    mnt = root / "deep" / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(mnt)], check=True)
    (mnt / "precious").write_bytes(b"on another filesystem")
    (mnt / "precious").chmod(0o644)
    try:
        yield root
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.mark.privileged
def test_other_filesystems_inside_are_left_alone_unless_crossed(mounted: Path) -> None:
    precious = mounted / "deep" / "mnt" / "precious"
    summary = change([mounted], ChmodSettings(rules=Rules.parse(mode="a+x")))
    assert stat.S_IMODE(precious.stat().st_mode) == 0o644
    assert stat.S_IMODE((mounted / "deep" / "f").stat().st_mode) == 0o755
    assert summary.as_dict()["skipped"]["dirs"] == 1
    change([mounted], ChmodSettings(rules=Rules.parse(mode="a+x"), cross_devices=True))
    assert stat.S_IMODE(precious.stat().st_mode) == 0o755


@pytest.fixture
def immutable(ext4_tmp_path: Path) -> Iterator[Path]:
    """A tree whose ``logs/x.log`` cannot be changed (``chattr +i``)."""
    root = make_tree(ext4_tmp_path / "tree", TREE)
    with chattr_i(root / "logs" / "x.log"):
        yield root


@pytest.mark.parametrize("fail_early", [False, True])
def test_a_failure_leaves_its_entry_and_changes_the_rest(
    immutable: Path, fail_early: bool
) -> None:
    settings = ChmodSettings(
        rules=Rules.parse(mode="a+t"), fail_early=fail_early, max_workers=1
    )
    with pytest.raises(CopyFailedError, match=r"change .* 1 error") as failed:
        change([immutable], settings)
    summary = failed.value.summary
    assert isinstance(summary, Changes)
    assert summary["errors"] == 1
    assert summary.as_dict()["error_list"][0]["example"].endswith("logs/x.log")
    assert not (immutable / "logs" / "x.log").stat().st_mode & stat.S_ISVTX
    if not fail_early:
        unchanged = [
            rel
            for rel, st in everything(immutable).items()
            if not st.st_mode & stat.S_ISVTX
        ]
        assert unchanged == ["logs/x.log"]
        assert sum(summary.as_dict()["changed"].values()) == ENTRIES - 1


def test_a_cancelled_change_fails_and_changes_nothing_more(tree: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(CopyFailedError, match="change stopped") as info:
        change([tree], ChmodSettings(rules=Rules.parse(mode="a+t")), cancel=cancel)
    assert info.value.stopped
    assert not tree.stat().st_mode & stat.S_ISVTX  # the root: after its contents
