"""Remote copies through a real sshd on loopback: rcpd launched over SSH.

The "remote host" is this machine reached through sshd, so both directions and
remote-to-remote run for real: ssh, the daemon's stdin/stdout setup, TLS pinned both
ways, and data flowing between the roles.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import sshd
from rcp_core import CopySettings, ExistingPolicy
from rcp_core.errors import RemoteError, UsageError
from rcp_core.remote import tls
from rcp_core.remote.ssh import Launch
from rcp_core.remote.sshmaster import remote_copy
from support.treecmp import TreeCompare
from support.treespec import Dir, File, HardLink, Spec, Symlink, make_tree

pytestmark = pytest.mark.privileged

RCPD = str(Path(sys.executable).with_name("rcpd"))
TREE: Spec = {
    ".": Dir(mode=0o755, mtime_ns=1_700_000_000_000_000_000),
    "a/one": b"1" * 10,
    "a/two": File(os.urandom(3 << 20), mode=0o600),
    "b/link": Symlink("../a/one"),
    **{f"many/f{i}": os.urandom(64) for i in range(500)},
}


def _launch(server: sshd.Sshd) -> Launch:
    return Launch(ssh=server.ssh(), rcpd=RCPD)


def _at(server: sshd.Sshd, path: Path) -> str:
    return f"root@127.0.0.1:{server.port}:{path}"


@pytest.mark.parametrize("direction", ["push", "pull", "remote-to-remote"])
def test_a_tree_crosses_over_ssh(
    tmp_path: Path, server: sshd.Sshd, tree_compare: TreeCompare, direction: str
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    source = str(src) if direction == "push" else _at(server, src)
    destination = str(dst) if direction == "pull" else _at(server, dst)
    sent, written = remote_copy(
        source, destination, launch=_launch(server), connections=3, timeout=20
    )
    assert sent.ok, sent.errors
    assert written.ok, written.errors
    assert tree_compare(src, dst) == []
    assert written.counts["copied.files"] == 502
    assert written.counts["copied.symlinks"] == 1
    if direction != "push":
        assert sent.resources["peak_rss"] > 0  # the daemon reported its resources


def test_plain_tcp_when_encryption_is_off(
    tmp_path: Path, server: sshd.Sshd, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "src", {"f": b"x" * 1000})
    _, written = remote_copy(
        _at(server, src), str(tmp_path / "dst"), launch=_launch(server), encrypt=False
    )
    assert written.ok
    assert tree_compare(src, tmp_path / "dst") == []


def test_a_daemon_that_cannot_start_is_a_clear_error(
    tmp_path: Path, server: sshd.Sshd
) -> None:
    src = make_tree(tmp_path / "src", {"f": b"x"})
    launch = Launch(ssh=server.ssh(), rcpd="/nonexistent/rcpd")
    with pytest.raises(
        RemoteError, match=r"closed the setup channel \(exit status 127"
    ):
        remote_copy(_at(server, src), str(tmp_path / "dst"), launch=launch, timeout=5)
    assert not (tmp_path / "dst").exists()


def test_no_daemon_outlives_its_copy(tmp_path: Path, server: sshd.Sshd) -> None:
    src = make_tree(tmp_path / "src", {"f": b"x"})
    remote_copy(_at(server, src), str(tmp_path / "dst"), launch=_launch(server))
    leftover = subprocess.run(
        ["pgrep", "-f", f"{RCPD} --role"], capture_output=True, text=True, check=False
    ).stdout.split()
    assert leftover == []


def test_an_unreachable_host_fails_within_the_timeout(tmp_path: Path) -> None:
    if shutil.which("ssh") is None:
        pytest.fail("ssh is not installed", pytrace=False)
    launch = Launch(ssh=["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=2"])
    started = time.monotonic()
    with pytest.raises(RemoteError, match="exit status 255"):
        # A port nothing listens on: ssh gives up, and says so on stderr.
        remote_copy("127.0.0.1:1:/x", str(tmp_path / "dst"), launch=launch, timeout=3)
    assert time.monotonic() - started < 10


def test_the_rcp_command_copies_from_a_host_and_prints_role_lines(
    tmp_path: Path,
    server: sshd.Sshd,
    tree_compare: TreeCompare,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from rcp_provider.cli.rcp import main

    src = make_tree(tmp_path / "src", {"d/f": b"data", "g": b"more"})
    code = main(
        [
            "--ssh",
            shlex.join(server.ssh()),
            "--rcpd-path",
            RCPD,
            "--summary",
            "--summary-json",
            str(tmp_path / "summary.json"),
            _at(server, src),
            str(tmp_path / "dst"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert tree_compare(src, tmp_path / "dst") == []
    assert "copied:    files 2" in out
    assert "source:      cpu user" in out  # the remote daemon's own figures
    assert "destination: in this process" in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["copied"]["files"] == 2
    assert summary["roles"]["destination"] is None
    source = summary["roles"]["source"]
    assert source["cpu_user_s"] > 0
    assert source["peak_rss_bytes"] > 1 << 20


@pytest.mark.parametrize(
    ("flags", "refused"),
    [
        (["--dereference"], "--dereference"),
    ],
)
def test_what_remote_copies_cannot_do_yet_is_refused_up_front(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], refused: str
) -> None:
    from rcp_provider.cli.rcp import main

    code = main([*flags, "host.invalid:/x", str(tmp_path / "dst")])
    assert code == 2
    assert f"not supported from host: to local: {refused}" in capsys.readouterr().err
    assert not (tmp_path / "dst").exists()


def test_the_rcp_command_shows_progress_of_a_remote_copy(
    tmp_path: Path, server: sshd.Sshd
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from rcp_provider.cli.rcp import main; raise SystemExit(main())",
            "--ssh",
            shlex.join(server.ssh()),
            "--rcpd-path",
            RCPD,
            "--progress",
            "--progress-type",
            "text",
            _at(server, src),
            str(tmp_path / "dst"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    last = result.stderr.split("==== ")[-1]
    assert "copied:   files 502" in last


def test_counts_from_a_daemon_are_checked() -> None:
    from rcp_core.errors import ProtocolError
    from rcp_core.remote.outcome import counts_from_wire

    assert counts_from_wire({"copied.files": 3, "from.the.future": 9}) == {
        "copied.files": 3
    }
    assert counts_from_wire(None) == {}
    for bad in ([1], {"copied.files": -1}, {"errors": True}, {"errors": "2"}):
        with pytest.raises(ProtocolError):
            counts_from_wire(bad)


def test_a_mirror_with_filters_over_ssh(
    tmp_path: Path, server: sshd.Sshd, tree_compare: TreeCompare
) -> None:
    """--delete and --exclude between hosts: extras go, excluded names stay."""
    from rcp_provider.cli.rcp import main

    src = make_tree(tmp_path / "src", {"a.py": b"a", "b.tmp": b"b", "d/c.py": b"c"})
    dst = make_tree(
        tmp_path / "dst", {"extra.py": b"x", "d/old.py": b"o", "keep.tmp": b"k"}
    )
    code = main(
        [
            "--ssh",
            shlex.join(server.ssh()),
            "--rcpd-path",
            RCPD,
            "--delete",
            "--exclude",
            "*.tmp",
            str(src),
            _at(server, dst),
        ]
    )
    assert code == 0
    assert sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*")) == [
        "a.py",
        "d",
        "d/c.py",
        "keep.tmp",
    ]


@pytest.mark.parametrize("direction", ["push", "pull"])
def test_several_sources_go_into_a_destination_directory(
    tmp_path: Path, server: sshd.Sshd, tree_compare: TreeCompare, direction: str
) -> None:
    """``rcp a b f host:/dir/`` puts a, b and f into dir, as a local copy does."""
    a = make_tree(tmp_path / "in" / "a", {"x": b"x", "sub/y": b"y"})
    b = make_tree(tmp_path / "in" / "b", {"z": b"z"})
    (tmp_path / "in" / "f").write_bytes(b"single file")
    dst = tmp_path / "out"
    dst.mkdir()
    operands = [str(a), str(b), str(tmp_path / "in" / "f")]
    if direction == "pull":
        operands = [_at(server, Path(o)) for o in operands]
        target = f"{dst}/"
    else:
        target = _at(server, dst) + "/"
    sent, written = remote_copy(operands, target, launch=_launch(server))
    assert sent.ok, sent.errors
    assert written.ok, written.errors
    assert sorted(os.listdir(dst)) == ["a", "b", "f"]
    assert tree_compare(a, dst / "a") == []
    assert tree_compare(b, dst / "b") == []
    assert (dst / "f").read_bytes() == b"single file"


@pytest.mark.parametrize("direction", ["push", "pull"])
@pytest.mark.parametrize("target", ["../f", "../d", "../nowhere"])
def test_hard_linked_symlinks_stay_one_inode_over_ssh(
    tmp_path: Path,
    server: sshd.Sshd,
    tree_compare: TreeCompare,
    direction: str,
    target: str,
) -> None:
    """Two names of one symlink (``ln`` of a symlink; to a file, a directory, or
    nothing), in one directory and across two, are one inode at the destination."""
    src = make_tree(
        tmp_path / "src",
        {
            "f": b"the target",
            "d/inside": b"inside",
            "a/l": Symlink(target),
            "a/l2": HardLink("a/l"),
            "a/m": Symlink(target),
            "b/m2": HardLink("a/m"),
        },
    )
    dst = tmp_path / "dst"
    source = str(src) if direction == "push" else _at(server, src)
    destination = str(dst) if direction == "pull" else _at(server, dst)
    sent, written = remote_copy(source, destination, launch=_launch(server))
    assert sent.ok, sent.errors
    assert written.ok, written.errors
    assert tree_compare(src, dst) == []  # link groups compared too
    for first, second in [("a/l", "a/l2"), ("a/m", "b/m2")]:
        one, two = os.lstat(dst / first), os.lstat(dst / second)
        assert (one.st_ino, one.st_nlink) == (two.st_ino, 2), (first, second)
        assert os.readlink(dst / second) == target
    assert written.counts["copied.symlinks"] == 2
    assert written.counts["copied.hardlinks"] == 2


@pytest.mark.parametrize(
    ("sources", "destination", "why"),
    [
        (["SRV:/a", "SRV:/b"], "/out", "trailing slash"),
        (["SRV:/a", "/b"], "/out/", "on one host, or all local"),
        (["SRV:/x/a", "SRV:/y/a"], "/out/", "same name"),
        (["/a"], "/b", "needs a host:/path"),
    ],
)
def test_operands_that_do_not_fit_are_refused_before_anything_starts(
    server: sshd.Sshd, sources: list[str], destination: str, why: str
) -> None:
    srv = f"root@127.0.0.1:{server.port}"
    with pytest.raises(UsageError, match=why):
        remote_copy(
            [s.replace("SRV", srv) for s in sources],
            destination,
            launch=Launch(ssh=["false"], rcpd="rcpd"),
        )


def test_a_dry_run_to_a_remote_host_prints_its_lines_here(
    tmp_path: Path, server: sshd.Sshd, capsys: pytest.CaptureFixture[str]
) -> None:
    """The destination daemon decides; its lines reach the master's output."""
    from rcp_provider.cli.rcp import main

    src = make_tree(tmp_path / "src", {"a": b"a", "d/b": b"b"})
    code = main(
        [
            "--ssh",
            shlex.join(server.ssh()),
            "--rcpd-path",
            RCPD,
            "--dry-run",
            "all",
            str(src),
            _at(server, tmp_path / "dst"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "would copy file 'dst/d/b'" in out
    assert not (tmp_path / "dst").exists()


@pytest.mark.parametrize("direction", ["push", "pull", "remote-to-remote"])
@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("missing/", "destination directory '[^']*missing/' does not exist"),
        ("missing/dst", "destination parent of '[^']*missing/dst' does not exist"),
        ("there", "destination '[^']*there' exists"),
        ("into/", "destination '[^']*into/src' exists"),
    ],
)
def test_a_destination_the_operand_rules_refuse_is_refused_promptly(
    tmp_path: Path, server: sshd.Sshd, direction: str, case: str, why: str
) -> None:
    """As a local copy: a missing ``DST/`` or parent, an existing copy without a
    policy -- a usage error before anything is written, checked where the
    destination is (a destination daemon before it announces itself, naming its
    host), long before ``timeout``."""
    src = make_tree(tmp_path / "src", {"f": b"x"})
    make_tree(tmp_path / "out", {"there/old": b"old", "into/src/old": b"old"})
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "out").rglob("*"))
    dst = f"{tmp_path / 'out'}/{case}"
    source = str(src) if direction == "push" else _at(server, src)
    destination = (
        dst
        if direction == "pull"
        else _at(server, Path(dst)) + ("/" if case.endswith("/") else "")
    )
    host = "" if direction == "pull" else "127.0.0.1: "
    started = time.monotonic()
    with pytest.raises(UsageError, match=f"^{host}{why}"):
        remote_copy(source, destination, launch=_launch(server), timeout=30)
    assert time.monotonic() - started < 10
    after = sorted(p.relative_to(tmp_path) for p in (tmp_path / "out").rglob("*"))
    assert after == before


def test_with_a_policy_an_existing_destination_is_copied_into(
    tmp_path: Path, server: sshd.Sshd, tree_compare: TreeCompare
) -> None:
    """The check a destination daemon makes before it starts lets a policy pass."""
    src = make_tree(tmp_path / "src", {"f": b"new"})
    make_tree(tmp_path / "dst", {"f": b"old"})
    _, written = remote_copy(
        str(src),
        _at(server, tmp_path / "dst"),
        CopySettings(existing=ExistingPolicy.OVERWRITE),
        launch=_launch(server),
    )
    assert written.ok, written.errors
    assert tree_compare(src, tmp_path / "dst") == []


def _destination_daemon(setup: dict[str, object]) -> tuple[dict[str, object], int]:
    """``rcpd --role destination`` run here: its announcement for ``setup``, and its
    exit status once its stdin closes."""
    proc = subprocess.Popen(
        [RCPD, "--role", "destination", "--timeout", "5"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    identity = tls.Identity.ephemeral("test-master")
    out, err = proc.communicate(
        json.dumps({"master_cert": identity.cert_pem, **setup}) + "\n", timeout=20
    )
    lines = out.splitlines()
    assert lines, err
    return json.loads(lines[0]), proc.returncode


def test_a_destination_daemon_refuses_in_its_announcement(tmp_path: Path) -> None:
    destination = {
        "dst": str(tmp_path / "missing") + "/",
        "into": True,
        "names": ["src"],
        "existing": "error",
    }
    announce, status = _destination_daemon({"destination": destination})
    assert announce["refused"] == (
        f"destination directory '{tmp_path / 'missing'}/' does not exist"
    )
    assert "port" not in announce
    assert status == 2


def test_a_master_that_names_no_destination_is_served_as_before(
    tmp_path: Path,
) -> None:
    """A master older than 1.11 sends no ``destination``: the daemon announces its
    port (then, stdin closed, it leaves)."""
    announce, _ = _destination_daemon({})
    assert isinstance(announce["port"], int)
    assert "refused" not in announce


@pytest.mark.parametrize(
    ("destination", "why"),
    [
        (
            {"dst": "/tmp", "into": True, "names": [".."], "existing": "error"},
            "bad entry name '..'",
        ),
        (
            {"dst": "/tmp", "into": True, "names": ["a"], "existing": "sometimes"},
            "unknown existing policy 'sometimes'",
        ),
        (
            {"dst": "/tmp", "into": "yes", "names": [], "existing": "error"},
            "destination needs dst, into and names",
        ),
        (["/tmp"], "destination is not an object"),
    ],
)
def test_a_malformed_destination_in_the_setup_is_a_protocol_error(
    destination: object, why: str
) -> None:
    """Nothing is announced, nothing looked up beyond the names: exit 1."""
    proc = subprocess.run(
        [RCPD, "--role", "destination", "--timeout", "5"],
        input=json.dumps({"master_cert": "x", "destination": destination}) + "\n",
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    assert why in proc.stderr, proc.stderr
