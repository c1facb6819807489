"""The conformance suite's fixtures: one backend of each kind per module, a pair per test.

``pair`` is parametrized indirectly with ``(source, destination)`` backend names
(:func:`support.pairs.cases`); the backends behind them are made once per module
(:class:`support.pairs.Registry`) on the project's shared fixtures -- the module's
``server`` (the test sshd), the session's stores (``s3``, ``gcs``, ``azure``:
emulators, :mod:`benchmarks.objectstores`) and this suite's session-wide ``rcpd
serve`` (:func:`conformance_service`) -- and only when a test asks for them.

Collection marks each case as the table and the worklist say
(:func:`pytest_collection_modifyitems`): ``privileged`` where the test sshd is
needed (root), ``xfail(strict=True)`` where :data:`support.defects.DEFECTS`
names a defect of today's code for that check and pair.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import fsspec
import pytest

from benchmarks import objectstores
from support import capabilities, defects, services
from support.backends import Backend, Launch, PosixBackend, StoreBackend, ssh_launch
from support.pairs import Pair, Registry, Shared
from support.rcprun import RCP

RCPD = str(Path(RCP).with_name("rcpd"))
HERE = Path(__file__).parent
PAIR_PARAMS = ("pair", "names", "refused")
"""The parameters that name a (source, destination) pair of backends."""


def _local(request: pytest.FixtureRequest, base: Path) -> Backend:
    return PosixBackend("local", base)


def _file(request: pytest.FixtureRequest, base: Path) -> Backend:
    return PosixBackend("file", base, "file://", url=True)


def _host(request: pytest.FixtureRequest, base: Path) -> Backend:
    """``host:/path`` on the module's sshd. Its ssh connections share one (OpenSSH's
    ControlMaster): a run then pays for starting ``rcpd``, not for a handshake."""
    server = request.getfixturevalue("server")
    prefix = f"root@127.0.0.1:{server.port}:"
    sockets = tempfile.mkdtemp(prefix="rcp-cm-")  # short: a socket path is < 108
    shared = ["-o", "ControlMaster=auto", "-o", f"ControlPath={sockets}/%C"]
    ssh = [*server.ssh(), *shared, "-o", "ControlPersist=300"]
    launch = ssh_launch(ssh, RCPD)
    # A run that waits for a daemon that will never come (a defect) gives up in 5 s.
    launch = Launch((*launch.args, "--remote-timeout", "5"))

    def close() -> None:
        subprocess.run(
            [*ssh, "-p", str(server.port), "-O", "exit", "root@127.0.0.1"],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(sockets, ignore_errors=True)

    request.addfinalizer(close)
    return PosixBackend("host", base, prefix, launch=launch)


def _serve(request: pytest.FixtureRequest, base: Path) -> Backend:
    served: services.Served = request.getfixturevalue("conformance_service")
    host, port = served.service.address
    trust = {"fingerprint": served.identity.fingerprint, "token": services.TOKEN}
    launch = Launch(
        fsspec={"rcp": {**trust, "skip_instance_cache": True}},
        environ={
            "FSSPEC_RCP_FINGERPRINT": trust["fingerprint"],
            "FSSPEC_RCP_TOKEN": trust["token"],
        },
    )
    where = served.data / base.name
    return PosixBackend("serve", where, f"rcp://{host}:{port}", url=True, launch=launch)


def _memory(request: pytest.FixtureRequest, base: Path) -> Backend:
    fs = fsspec.filesystem("memory")
    return StoreBackend(
        "memory", fs, "memory", f"/{base.name}", directories=True, in_process=True
    )


def _store(
    name: str, *, dot_segments: bool = True
) -> Callable[[pytest.FixtureRequest, Path], Backend]:
    """A bucket of the session's store ``name`` (the fixture of that name). Runs in
    this process share one filesystem instance with the backend (fsspec's instance
    cache; no listing cache)."""

    def make(request: pytest.FixtureRequest, base: Path) -> Backend:
        store: objectstores.Store = request.getfixturevalue(name)
        options = {**store.options, "skip_instance_cache": False}
        aliases = objectstores.ALIASES[store.protocol]
        launch = Launch(fsspec=dict.fromkeys(aliases, options), environ=store.environ())
        fs = fsspec.filesystem(store.protocol, **options)
        return StoreBackend(
            name,
            fs,
            store.protocol,
            store.bucket(),
            directories=False,
            clock=True,
            dot_segments=dot_segments,
            launch=launch,
        )

    return make


MAKERS: dict[str, Callable[[pytest.FixtureRequest, Path], Backend]] = {
    "local": _local,
    "file": _file,
    "host": _host,
    "serve": _serve,
    "memory": _memory,
    "s3": _store("s3"),
    "gcs": _store("gcs"),
    "azure": _store("azure", dot_segments=False),
    **{site.name: site.make for site in capabilities.SITES},
}


@pytest.fixture(scope="session")
def conformance_service(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[services.Served]:
    """A real ``rcpd serve`` in this process for the whole suite (roots ``data`` and
    ``backup``); each module's areas are a directory of ``data``."""
    yield from services.start(tmp_path_factory.mktemp("conformance-service"))


@pytest.fixture(scope="module")
def backends(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Registry]:
    registry = Registry(MAKERS, request, tmp_path_factory.mktemp("conformance"))
    yield registry
    registry.close()


@pytest.fixture(scope="module")
def shared(backends: Registry) -> Shared:
    """Copies made once for the module, each read by several tests."""
    return Shared(backends)


@pytest.fixture
def pair(request: pytest.FixtureRequest, backends: Registry) -> Pair:
    """The backends named by the parameter ``(source, destination)``, with fresh
    areas for this test."""
    source, destination = request.param
    return Pair(backends[source], backends[destination])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    """``privileged`` on cases that need the test sshd; ``xfail(strict=True)`` on
    those :data:`~support.defects.DEFECTS` names. First, so the root
    conftest's privilege policy sees the marks."""
    for item in items:
        if HERE not in Path(str(item.path)).parents:
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is None:
            continue
        names = next(
            (callspec.params[key] for key in PAIR_PARAMS if key in callspec.params),
            None,
        )
        if not isinstance(names, tuple):  # no pair (an empty parameter set)
            continue
        if "host" in names:
            item.add_marker(pytest.mark.privileged)
        params = {k: str(v) for k, v in callspec.params.items() if k not in PAIR_PARAMS}
        name = getattr(item, "originalname", item.name)
        source, destination = names
        found = defects.defect(name, source, destination, params)
        if found is not None:
            # Only a failed check is the defect: any other exception fails.
            xfail = pytest.mark.xfail(
                strict=True, raises=AssertionError, reason=found.reason
            )
            item.add_marker(xfail)
