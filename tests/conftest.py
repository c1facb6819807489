"""Fixtures shared by every test: loop-mounted filesystems, tree building, tree diffs.

The helpers live in tests/support and are imported as `support.<module>` (see below);
these fixtures are thin wrappers so a test can ask for them by name.

Privilege policy: a test marked `privileged`, or using a loop-mount fixture (which marks
it so), is skipped with a reason when not root. As root it must run: a missing mkfs,
losetup or mount is a failure that says to run `make system`, never a silent skip.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from benchmarks import objectstores, sshd
from rcp_core.remote.sshcontrol import control_dir
from support import airflow as airflow_support
from support import commands, loopfs, services
from support.treecmp import TreeCompare, compare_trees
from support.treespec import Spec, make_tree

# Before any test imports Airflow: it reads its configuration once.
airflow_support.configure()
# Every program a test starts must be listed, so `make test` installs its package.
commands.install_guard()
# rcp's shared SSH connections (rcp_core.remote.sshcontrol) of this run alone, in a
# runtime directory of its own (short: a socket's path is at most 107 bytes); every
# fixture that stops an sshd closes them (benchmarks.sshd.close_masters).
os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="rcp-rt-")
# No site or user config file changes what a test's rcp does (test_config.py names
# its own files).
os.environ["RCP_CONFIG"] = ""

GIB = 1024 * loopfs.MIB
LOOP_FIXTURES = frozenset(
    {"xfs_reflink", "ext4_fs", "small_fs", "xfs_tmp_path", "ext4_tmp_path"}
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup(
        "reliability", "the fault-injection suite (tests/reliability)"
    )
    group.addoption(
        "--stress",
        action="store_true",
        help="run the reliability suite at full scale, and its stress-only tests "
        "(make stress); without it they are deselected and the rest runs small",
    )
    group.addoption(
        "--reliability-out",
        metavar="PATH",
        help="write the reliability figures (tried, survived, lost) as JSON here",
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Close the run's shared SSH connections and remove their directory."""
    sshd.close_masters(Path(control_dir()))
    shutil.rmtree(os.environ["XDG_RUNTIME_DIR"], ignore_errors=True)


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    if not config.getoption("--stress"):
        stress = {item for item in items if item.get_closest_marker("stress")}
        if stress:
            config.hook.pytest_deselected(items=list(stress))
            items[:] = [item for item in items if item not in stress]
    root = os.geteuid() == 0
    for item in items:
        loop = bool(LOOP_FIXTURES.intersection(getattr(item, "fixturenames", ())))
        if loop:
            item.add_marker(pytest.mark.privileged)
        if not root and item.get_closest_marker("privileged") is not None:
            reason = "needs root: loop mount" if loop else "needs root"
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def xfs_reflink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Mount point of a 1 GiB XFS with reflink=1, shared by the whole session."""
    loopfs.require("xfs")
    workdir = tmp_path_factory.mktemp("xfs-reflink")
    with loopfs.loop_mount(workdir, "xfs", GIB) as mnt:
        yield mnt


@pytest.fixture(scope="session")
def ext4_fs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Mount point of a 1 GiB ext4, shared by the whole session."""
    loopfs.require("ext4")
    workdir = tmp_path_factory.mktemp("ext4")
    with loopfs.loop_mount(workdir, "ext4", GIB) as mnt:
        yield mnt


@pytest.fixture
def xfs_tmp_path(xfs_reflink: Path) -> Iterator[Path]:
    """A fresh directory on the session's XFS, removed after the test."""
    path = Path(tempfile.mkdtemp(prefix="t-", dir=xfs_reflink))
    yield path
    shutil.rmtree(path)


@pytest.fixture
def ext4_tmp_path(ext4_fs: Path) -> Iterator[Path]:
    """A fresh directory on the session's ext4, removed after the test."""
    path = Path(tempfile.mkdtemp(prefix="t-", dir=ext4_fs))
    yield path
    shutil.rmtree(path)


@pytest.fixture
def small_fs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[loopfs.SmallFs]:
    """Factory `small_fs(size_mib=16, fstype="ext4") -> Path` of tiny filesystems
    (e.g. for ENOSPC); each is unmounted and detached when the test ends."""
    with ExitStack() as stack:

        def make(size_mib: int = 16, fstype: loopfs.Fstype = "ext4") -> Path:
            loopfs.require(fstype)
            workdir = tmp_path_factory.mktemp(f"small-{fstype}")
            size = size_mib * loopfs.MIB
            return stack.enter_context(loopfs.loop_mount(workdir, fstype, size))

        yield make


@pytest.fixture(name="make_tree")
def make_tree_fixture() -> Callable[[Path, Spec], Path]:
    """`make_tree(root, spec) -> root`: build a `support.treespec` spec."""
    return make_tree


@pytest.fixture
def tree_compare() -> TreeCompare:
    """`compare_trees(src, dst, *, mode, times, owner, xattrs, hardlinks, sparse)`."""
    return compare_trees


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sshd.Sshd]:
    """A real sshd on loopback for this module's tests (the remote host)."""
    why = sshd.missing()
    if why is not None:
        pytest.fail(f"remote tests need a real sshd: {why}", pytrace=False)
    with sshd.running_sshd(tmp_path_factory.mktemp("sshd")) as running:
        yield running
        sshd.close_masters(Path(control_dir()))


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """The session's Airflow database, created by ``airflow db migrate``."""
    airflow_support.migrate()


@pytest.fixture(scope="session")
def s3() -> Iterator[objectstores.Store]:
    """A real S3 API on loopback (``moto_server``), shared by the session: each test
    makes its own bucket (``s3.bucket()``)."""
    with objectstores.serve("s3") as store:
        yield store


@pytest.fixture(scope="session")
def gcs() -> Iterator[objectstores.Store]:
    """A real GCS JSON API on loopback (``gcp-storage-emulator``), shared by the
    session: each test makes its own bucket (``gcs.bucket()``)."""
    with objectstores.serve("gcs") as store:
        yield store


@pytest.fixture(scope="session")
def azure() -> Iterator[objectstores.Store]:
    """A real Azure Blob API on loopback (azurite), shared by the session: each test
    makes its own container (``azure.bucket()``)."""
    with objectstores.serve("azure") as store:
        yield store


@pytest.fixture
def rcp_service(tmp_path: Path) -> Iterator[services.Served]:
    """A real ``rcpd serve`` in this process (roots ``data`` and ``backup``)."""
    yield from services.start(tmp_path / "service")


@pytest.fixture
def rcp_connection(
    rcp_service: services.Served, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The id of an ``rcp`` connection to :func:`rcp_service` (an environment
    variable, as a deployment may define it)."""
    host, port = rcp_service.service.address
    name, value = airflow_support.connection_env(
        "rcp_storage",
        host=host,
        port=port,
        password=services.TOKEN,
        extra={"fingerprint": rcp_service.identity.fingerprint},
    )
    monkeypatch.setenv(name, value)
    return "rcp_storage"


@pytest.fixture
def rcp_places(
    tmp_path: Path,
    rcp_service: services.Served,
    rcp_connection: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[dict[str, services.Place]]:
    """Three places for copies between them: ``worker`` (this host's storage),
    ``service`` (:func:`rcp_service`) and ``other`` (a second real service, with a
    connection ``rcp_other``)."""
    for other in services.start(tmp_path / "other"):
        host, port = other.service.address
        monkeypatch.setenv(
            *airflow_support.connection_env(
                "rcp_other",
                host=host,
                port=port,
                password=services.TOKEN,
                extra={"fingerprint": other.identity.fingerprint},
            )
        )
        yield {
            "worker": (None, tmp_path / "worker", tmp_path / "worker"),
            "service": (rcp_connection, rcp_service.data, rcp_service.backup),
            "other": ("rcp_other", other.data, other.backup),
        }
