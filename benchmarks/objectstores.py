"""Real object-store APIs on loopback, for the tests and the harness: S3, GCS, Azure.

Each store is an emulator in a process of its own, listening on 127.0.0.1 at a free
port, reached through the fsspec client a user would use:

======== ================================================ ======== ===============
store    emulator                                         client   URLs
======== ================================================ ======== ===============
S3       ``moto_server`` (moto[server], the venv's)       s3fs     ``s3://b/k``
GCS      ``gcp-storage-emulator`` (:mod:`.gcs_emulator`)  gcsfs    ``gs://b/k``
Azure    azurite's blob service (npm, ``emulators/``)     adlfs    ``az://c/k``
======== ================================================ ======== ===============

:func:`serve` starts one (:data:`SERVERS`), waits until it answers HTTP (any status:
an answer is a server), and stops it on exit, bounded (terminate, then kill). Its
log goes to a temporary file, read back into the error when it exits before
answering: a pipe left unread would fill and stop it. The :class:`Store` it yields
holds what a client needs: the storage options, a filesystem, fresh buckets, and
the environment that points an ``rcp`` process at it (fsspec's ``FSSPEC_<PROTOCOL>``
configuration, dummy credentials, no cloud metadata lookups).

Nothing here talks to a cloud: every request goes to a loopback endpoint.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import fsspec

from benchmarks.sshd import free_port

START_TIMEOUT = 30.0
"""Seconds an emulator has to answer its first request."""
STOP_TIMEOUT = 10.0
"""Seconds it has to exit after each of SIGTERM and SIGKILL."""

HERE = Path(__file__).parent
MOTO_SERVER = Path(sys.executable).with_name("moto_server")
AZURITE = HERE / "emulators" / "node_modules" / "azurite" / "dist" / "src" / "blob"
AZURITE_MAIN = AZURITE / "main.js"
"""azurite's blob service (``make emulators`` installs it with npm)."""

S3_KEY, S3_SECRET, S3_REGION = "testing-key", "testing-secret", "us-east-1"
AZURE_ACCOUNT = "devstoreaccount1"
AZURE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
    "KBHBeksoGMGw=="
)
"""azurite's well-known development account (public, in Microsoft's docs)."""
GCS_PROJECT = "rcp-test"
GCSFS_PLAIN = {"GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
"""gcsfs (2026.10) otherwise asks a gRPC control plane for each bucket's layout,
which no emulator serves: a minute's time-out per bucket before it falls back."""
os.environ.update(GCSFS_PLAIN)  # before gcsfs is imported here, by fsspec or a test


@dataclass(frozen=True)
class Store:
    """A running store.

    :param name: ``s3``, ``gcs`` or ``azure``.
    :param protocol: the URL scheme its operands have (``s3``, ``gs``, ``az``).
    :param endpoint: its URL (``http://127.0.0.1:PORT``).
    :param options: its fsspec storage options (no listing cache: a test sees what it
        just wrote; no instance cache: each :meth:`fs` is new).
    :param config: what a process's ``FSSPEC_<PROTOCOL>`` gives its client.
    :param variables: the rest of a process's environment for this store.
    :param pid: its emulator's process (its CPU time is what a benchmark shows
        beside a tool's), once :func:`serve` started it.
    """

    name: str
    protocol: str
    endpoint: str
    options: dict[str, Any]
    config: dict[str, Any]
    variables: dict[str, str] = field(default_factory=dict)
    pid: int | None = None

    def fs(self) -> Any:
        """A new filesystem on this store."""
        return fsspec.filesystem(self.protocol, **self.options)

    def bucket(self) -> str:
        """A new, empty bucket's (a container's, on Azure) name."""
        name = f"b{uuid.uuid4().hex[:20]}"
        fs = self.fs()
        if self.protocol == "s3":  # s3fs's mkdir names a region moto refuses
            fs.call_s3("create_bucket", Bucket=name)
        else:
            fs.mkdir(name)
        return name

    def url(self, path: str) -> str:
        """The URL of ``path`` (``bucket/key``) on this store."""
        return f"{self.protocol}://{path.lstrip('/')}"

    def environ(self) -> dict[str, str]:
        """The environment of a process that should reach this store through fsspec:
        this process's, plus the endpoint and credentials."""
        config = json.dumps(dict(self.config))
        protocols = ALIASES[self.protocol]
        return {
            **os.environ,
            **{f"FSSPEC_{alias.upper()}": config for alias in protocols},
            **self.variables,
        }


ALIASES: dict[str, tuple[str, ...]] = {
    "s3": ("s3", "s3a"),
    "gs": ("gs", "gcs"),
    "az": ("az", "abfs", "abfss"),
}
"""The URL schemes each client answers to (each reads its own configuration)."""


def _s3(port: int) -> tuple[Sequence[str], Store]:
    endpoint = f"http://127.0.0.1:{port}"
    config = {"endpoint_url": endpoint, "key": S3_KEY, "secret": S3_SECRET}
    options = {
        **config,
        "client_kwargs": {"region_name": S3_REGION},
        "use_listings_cache": False,
        "skip_instance_cache": True,
    }
    variables = {
        "AWS_DEFAULT_REGION": S3_REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    argv = [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)]
    return argv, Store("s3", "s3", endpoint, options, config, variables)


def _gcs(port: int) -> tuple[Sequence[str], Store]:
    endpoint = f"http://127.0.0.1:{port}"
    config = {"endpoint_url": endpoint, "token": "anon", "project": GCS_PROJECT}
    options = {**config, "use_listings_cache": False, "skip_instance_cache": True}
    emulator = [sys.executable, "-m", "benchmarks.gcs_emulator"]
    argv = [*emulator, "--host", "127.0.0.1", "--port", str(port)]
    return argv, Store("gcs", "gs", endpoint, options, config, GCSFS_PLAIN)


def _azure(port: int) -> tuple[Sequence[str], Store]:
    endpoint = f"http://127.0.0.1:{port}/{AZURE_ACCOUNT}"
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName={AZURE_ACCOUNT};"
        f"AccountKey={AZURE_KEY};BlobEndpoint={endpoint};"
    )
    config = {"connection_string": connection}
    options = {**config, "skip_instance_cache": True}
    argv = [
        "node",
        str(AZURITE_MAIN),
        "--inMemoryPersistence",
        "--loose",
        "--skipApiVersionCheck",
        "--silent",
        "--blobHost",
        "127.0.0.1",
        "--blobPort",
        str(port),
    ]
    return argv, Store("azure", "az", endpoint, options, config)


SERVERS: dict[str, Callable[[int], tuple[Sequence[str], Store]]] = {
    "s3": _s3,
    "gcs": _gcs,
    "azure": _azure,
}
"""How to start each store on a port: its emulator's command line and the store."""


def missing(name: str) -> str | None:
    """Why the store ``name``'s emulator cannot start here, or ``None``."""
    if name == "azure" and not AZURITE_MAIN.exists():
        return f"azurite is not installed at {AZURITE_MAIN} (make emulators)"
    if name == "s3" and not MOTO_SERVER.exists():
        return f"moto_server is not installed at {MOTO_SERVER}"
    return None


def answers(endpoint: str) -> bool:
    """Whether an HTTP server answers at ``endpoint``, whatever its status."""
    try:
        with urllib.request.urlopen(endpoint, timeout=1.0):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def _benchmark_s3(store: Store, fill: Sequence[str]) -> list[str]:
    """The command of the benchmark's moto (:mod:`benchmarks.moto_emulator`: listed
    from an index, ranges read alone, holding the objects of each
    ``BUCKET/PREFIX=COUNT`` of ``fill``) serving ``store``'s endpoint."""
    port = store.endpoint.rsplit(":", 1)[1]
    emulator = [sys.executable, "-m", "benchmarks.moto_emulator", "--port", port]
    return [*emulator, *(f"--fill={spec}" for spec in fill)]


@contextmanager
def serve(
    name: str,
    *,
    benchmark: bool = False,
    fill: Sequence[str] = (),
    start_timeout: float = START_TIMEOUT,
) -> Iterator[Store]:
    """The store ``name`` (a key of :data:`SERVERS`) for the duration of the block;
    with ``benchmark`` or ``fill`` (S3 only), the benchmark's moto, holding
    ``fill``'s objects (:func:`_benchmark_s3`).

    :raises RuntimeError: its emulator is missing, exited, or did not answer within
        ``start_timeout`` seconds.
    """
    why = missing(name)
    if why is not None:
        raise RuntimeError(why)
    argv, store = SERVERS[name](free_port())
    if benchmark or fill:
        if name != "s3":
            raise ValueError(f"only S3 has a benchmark's emulator, not {name}")
        argv = _benchmark_s3(store, fill)
    root = str(HERE.parent)
    environ = {**os.environ, "PYTHONPATH": root, **store.variables}
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environ,
        )
        try:
            deadline = time.monotonic() + start_timeout
            while not answers(store.endpoint):
                if server.poll() is not None:
                    log.seek(0)
                    reason = log.read().decode(errors="replace")
                    raise RuntimeError(f"the {name} emulator exited: {reason}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name}: nothing answers at {store.endpoint}")
                time.sleep(0.1)
            yield replace(store, pid=server.pid)
        finally:
            server.terminate()
            try:
                server.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(STOP_TIMEOUT)
