"""One SSH login per host (:mod:`rcp_core.remote.sshcontrol`): the user's
configuration read through ``ssh -G``, the private socket directory, and real
``rcp`` runs against a real sshd, whose log counts the logins."""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import sshd
from rcp_core.remote import sshcontrol
from support.overssh import RCMP, RCP, at, run_tool

SSH = ["ssh", "-o", "BatchMode=yes"]
DESTINATION = ["-p", "2222", "--", "alice@example.invalid"]


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A runtime directory of this test's own (its sockets: ``rcp-ssh`` in it),
    short enough for a socket's path."""
    run = Path(tempfile.mkdtemp(dir=os.environ["XDG_RUNTIME_DIR"]))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    yield run
    sshd.close_masters(run / "rcp-ssh")


def test_the_first_value_of_a_keyword_wins_as_in_ssh() -> None:
    text = "User alice\nControlMaster auto\ncontrolmaster no\nloglevel  INFO\n\n"
    assert sshcontrol.parse_config(text) == {
        "user": "alice",
        "controlmaster": "auto",
        "loglevel": "INFO",
    }


@pytest.mark.parametrize(
    ("config", "shares"),
    [
        ({"controlmaster": "false"}, False),
        ({"controlmaster": "false", "controlpath": "none"}, False),
        ({"controlmaster": "auto"}, True),
        ({"controlmaster": "true"}, True),
        ({"controlmaster": "false", "controlpath": "/home/a/.ssh/cm-%C"}, True),
    ],
)
def test_the_users_own_sharing(config: dict[str, str], shares: bool) -> None:
    assert sshcontrol.user_shares(config) is shares


def test_without_a_word_from_the_user_ssh_shares_through_the_private_directory(
    runtime: Path,
) -> None:
    options = sshcontrol.options(SSH, DESTINATION)
    directory = runtime / "rcp-ssh"
    assert options == [
        "-o",
        "ControlMaster=auto",
        "-o",
        f"ControlPath={directory}/%C",
        "-o",
        f"ControlPersist={sshcontrol.PERSIST}",
    ]
    st = directory.lstat()
    assert (st.st_mode & 0o777, st.st_uid) == (0o700, os.getuid())


@pytest.mark.parametrize(
    "extra",
    [
        ["-o", "ControlMaster=auto", "-o", "ControlPath=/tmp/mine-%C"],
        ["-o", "ControlPath=/tmp/mine-%C"],
        ["-S", "/tmp/mine"],
        ["-M"],
        ["-F", "{config}"],
        ["-v"],
    ],
)
def test_the_users_choice_or_a_debug_log_leaves_ssh_as_it_is(
    runtime: Path, extra: list[str]
) -> None:
    config = runtime / "ssh_config"
    config.write_text("Host *\n  ControlMaster auto\n  ControlPath /tmp/mine-%C\n")
    ssh = [*SSH, *(word.format(config=config) for word in extra)]
    assert sshcontrol.options(ssh, DESTINATION) == []
    assert not (runtime / "rcp-ssh").exists()


def test_a_command_that_is_not_ssh_is_left_as_it_is(runtime: Path) -> None:
    assert sshcontrol.options(["/usr/local/bin/tsh", "ssh"], DESTINATION) == []
    assert sshcontrol.options(["false"], DESTINATION) == []


@pytest.mark.parametrize("flaw", ["open", "symlink", "not ours", "a file"])
def test_a_directory_not_private_to_the_user_shares_nothing(
    runtime: Path, tmp_path: Path, flaw: str
) -> None:
    """Root can make every flaw; each one means no sharing, and nothing changed."""
    directory = runtime / "rcp-ssh"
    if flaw == "open":
        directory.mkdir(mode=0o700)
        directory.chmod(0o755)
    elif flaw == "symlink":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        directory.symlink_to(tmp_path / "elsewhere")
    elif flaw == "not ours":
        directory.mkdir(mode=0o700)
        os.chown(directory, 65534, 65534)
    else:
        directory.write_bytes(b"")
    before = directory.lstat()
    assert sshcontrol.private_dir() is None
    assert sshcontrol.options(SSH, DESTINATION) == []
    assert directory.lstat() == before


def test_a_directory_too_long_for_a_socket_shares_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    deep = tmp_path / ("d" * (sshcontrol.SUN_PATH - len(str(tmp_path))))
    deep.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    assert sshcontrol.private_dir() is None


def _logins(server: sshd.Sshd) -> int:
    return server.log.read_text().count("Accepted publickey")


def _copy(server: sshd.Sshd, src: Path, dst: Path, *flags: str) -> None:
    done = run_tool(RCP, server, *flags, "-o", at(server, src), str(dst))
    assert done.returncode == 0, done.stderr
    assert dst.read_bytes() == src.read_bytes()


def test_a_second_copy_to_the_host_logs_in_no_more(
    runtime: Path, server: sshd.Sshd, tmp_path: Path
) -> None:
    """The first copy logs in and leaves the connection in the private directory;
    the next one (a new rcp) opens its session on it: sshd saw one login."""
    src = tmp_path / "f"
    src.write_bytes(os.urandom(1024))
    before = _logins(server)
    _copy(server, src, tmp_path / "one")
    (socket,) = (runtime / "rcp-ssh").iterdir()
    assert socket.is_socket()
    assert _logins(server) == before + 1
    _copy(server, src, tmp_path / "two")
    _copy(server, src, tmp_path / "three")
    assert _logins(server) == before + 1


def test_no_ssh_reuse_logs_in_for_every_copy(
    runtime: Path, server: sshd.Sshd, tmp_path: Path
) -> None:
    src = tmp_path / "f"
    src.write_bytes(b"x")
    before = _logins(server)
    _copy(server, src, tmp_path / "one", "--no-ssh-reuse")
    _copy(server, src, tmp_path / "two", "--no-ssh-reuse")
    assert _logins(server) == before + 2
    assert not (runtime / "rcp-ssh").exists()


def test_a_users_own_controlpath_is_left_alone(
    runtime: Path, server: sshd.Sshd, tmp_path: Path
) -> None:
    """``ControlMaster no`` with a ``ControlPath``: use a master if one is there,
    never start one. rcp keeps to it: no master, a login per copy."""
    config = tmp_path / "ssh_config"
    config.write_text(f"Host *\n  ControlMaster no\n  ControlPath {tmp_path}/%C\n")
    src = tmp_path / "f"
    src.write_bytes(b"x")
    ssh = shlex.join([*server.ssh(), "-F", str(config)])
    before = _logins(server)
    for name in ("one", "two"):
        done = run_tool(
            RCP, server, "--ssh", ssh, "-o", at(server, src), str(tmp_path / name)
        )
        assert done.returncode == 0, done.stderr
    assert _logins(server) == before + 2
    assert not (runtime / "rcp-ssh").exists()
    assert not [p for p in tmp_path.iterdir() if p.is_socket()]


def test_a_failed_copy_closes_the_shared_connection(
    runtime: Path, server: sshd.Sshd, tmp_path: Path
) -> None:
    """The connection may be what failed (a link that went down leaves its TCP
    connection stalling the next session): the next copy logs in anew."""
    src = tmp_path / "f"
    src.write_bytes(b"x")
    before = _logins(server)
    _copy(server, src, tmp_path / "one")
    failed = run_tool(
        RCP, server, "-o", at(server, src), str(tmp_path / "two"), rcpd="/no/rcpd"
    )
    assert failed.returncode == 5, failed.stderr
    assert "No such file" in failed.stderr
    assert not [p for p in (runtime / "rcp-ssh").iterdir() if p.is_socket()]
    _copy(server, src, tmp_path / "three")
    assert _logins(server) == before + 2


def test_a_failed_comparison_closes_the_shared_connection(
    runtime: Path, server: sshd.Sshd, tmp_path: Path
) -> None:
    """``rcmp`` against a host reaches it through a service session: one that fails
    (no ``rcpd`` there) closes the shared connection too, so the next command logs
    in anew."""
    src = tmp_path / "f"
    src.write_bytes(b"x")
    before = _logins(server)
    _copy(server, src, tmp_path / "one")
    failed = run_tool(RCMP, server, str(src), at(server, src), rcpd="/no/rcpd")
    assert failed.returncode == 5, failed.stderr
    assert "No such file" in failed.stderr
    assert not [p for p in (runtime / "rcp-ssh").iterdir() if p.is_socket()]
    _copy(server, src, tmp_path / "three")
    assert _logins(server) == before + 2
