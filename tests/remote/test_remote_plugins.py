"""A remote host's own site plugins run in its daemon (protocol 1.10).

The plugin is installed on the "remote" host the way pip leaves one (a module and a
``*.dist-info`` with an ``rcp`` entry point), on the path of the ``rcpd`` that SSH
starts there (``--rcpd-path`` names a wrapper that puts it on ``PYTHONPATH``), and
nowhere else: the ``rcp`` process does not see it. It logs each call to a file.

- at the destination, its ``rcp_pre_create`` makes each new file (as Lustre striping
  would), and the copy writes into what it made;
- at the source, its ``rcp_classify_error`` calls EIO transient, so an EIO on the
  first open of a file (latencyfs's fault table) is retried and the copy completes,
  where without the plugin EIO is permanent and the file an error.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from benchmarks import sshd
from benchmarks.latencyfs import Faults, mounted
from support.overssh import RCP, RCPD, at, run_tool
from support.treecmp import TreeCompare
from support.treespec import Spec, make_tree

pytestmark = pytest.mark.privileged

TREE: Spec = {"a": b"alpha", "sub/b": b"beta" * 1000, "sub/c": b""}
PLUGIN = """
import errno
import os

from rcp_core import hookimpl
from rcp_core.run.runtime import Kind

LOG = os.environ["RCP_TEST_PLUGIN_LOG"]


def _log(line):
    with open(LOG, "a") as out:
        out.write(line + "\\n")


@hookimpl
def rcp_pre_create(dir_fd, name, size, destination):
    os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd))
    _log(f"pre_create {name} {size}")
    return True


@hookimpl
def rcp_classify_error(error, source, destination):
    if error.errno != errno.EIO:
        return None
    _log("classify EIO transient")
    return Kind.TRANSIENT
"""


def _install(root: Path) -> tuple[Path, Path]:
    """The plugin installed under ``root``; an rcpd that sees it, and its log."""
    site = root / "site"
    site.mkdir(parents=True)
    (site / "rcp_remote_site.py").write_text(PLUGIN)
    info = site / "rcp_remote_site-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: rcp-remote-site\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text("[rcp]\nsite = rcp_remote_site\n")
    log = root / "plugin.log"
    log.write_text("")
    rcpd = root / "rcpd"
    rcpd.write_text(
        "#!/bin/sh\n"
        f"export PYTHONPATH={shlex.quote(str(site))}\n"
        f"export RCP_TEST_PLUGIN_LOG={shlex.quote(str(log))}\n"
        f'exec {shlex.quote(RCPD)} "$@"\n'
    )
    rcpd.chmod(0o755)
    return rcpd, log


def _rcp(server: sshd.Sshd, rcpd: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_tool(RCP, server, *args, rcpd=rcpd, timeout=120)


def test_the_destination_hosts_pre_create_makes_each_new_file(
    tmp_path: Path, server: sshd.Sshd, tree_compare: TreeCompare
) -> None:
    rcpd, log = _install(tmp_path / "remote")
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    done = _rcp(server, str(rcpd), str(src), at(server, dst))
    assert done.returncode == 0, done.stderr + done.stdout
    assert tree_compare(src, dst) == []
    assert sorted(log.read_text().splitlines()) == [
        "pre_create a 5",
        "pre_create b 4000",
        "pre_create c 0",
    ]


@pytest.mark.parametrize("plugin", [False, True])
def test_the_source_hosts_classification_decides_what_is_retried(
    tmp_path: Path, server: sshd.Sshd, plugin: bool
) -> None:
    rcpd, log = _install(tmp_path / "remote")
    backing, mnt = tmp_path / "backing", tmp_path / "mnt"
    make_tree(backing / "src", TREE)
    mnt.mkdir()
    faults = Faults.table(tmp_path, ["open /src/sub/b EIO times=1"])
    dst = tmp_path / "dst"
    with mounted(backing, mnt, delay_ms=0.0, faults=faults):
        done = _rcp(
            server, str(rcpd) if plugin else RCPD, at(server, mnt / "src"), str(dst)
        )
        assert faults.injected() == [("open", "EIO", "/src/sub/b")]
    if plugin:
        assert done.returncode == 0, done.stderr + done.stdout
        assert (dst / "sub" / "b").read_bytes() == b"beta" * 1000
        assert "classify EIO transient" in log.read_text().splitlines()
    else:
        assert done.returncode == 1, done.stderr + done.stdout
        assert not (dst / "sub" / "b").exists()
        assert "Input/output error" in done.stdout
    assert (dst / "a").read_bytes() == b"alpha"
