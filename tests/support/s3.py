"""A real S3 API for tests: ``moto_server`` (moto[server]) on loopback, s3fs its client.

:func:`serve` starts the venv's ``moto_server`` as a process listening on 127.0.0.1 at
a free port, waits until it answers HTTP, and stops it (bounded) on exit. The
:class:`S3` it gives holds what a client needs: the endpoint, an s3fs filesystem on
it, fresh buckets, and the environment that points a ``rcp`` process at it (fsspec's
``FSSPEC_S3`` configuration, dummy credentials, no instance-metadata lookups).

Nothing here talks to AWS: every request goes to the loopback endpoint.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MOTO_SERVER = Path(sys.executable).with_name("moto_server")
KEY, SECRET, REGION = "testing-key", "testing-secret", "us-east-1"
START_TIMEOUT = 30.0


@dataclass(frozen=True)
class S3:
    """A running S3 endpoint.

    :param endpoint: its URL (``http://127.0.0.1:PORT``).
    """

    endpoint: str

    @property
    def options(self) -> dict[str, Any]:
        """s3fs's storage options for this endpoint (no listing cache: a test sees
        what it just wrote)."""
        return {
            "endpoint_url": self.endpoint,
            "key": KEY,
            "secret": SECRET,
            "client_kwargs": {"region_name": REGION},
            "use_listings_cache": False,
            "skip_instance_cache": True,
        }

    def fs(self) -> Any:
        """A new s3fs filesystem on this endpoint."""
        import s3fs

        return s3fs.S3FileSystem(**self.options)

    def bucket(self) -> str:
        """A new, empty bucket's name."""
        name = f"b{uuid.uuid4().hex[:20]}"
        self.fs().call_s3("create_bucket", Bucket=name)
        return name

    def environ(self) -> dict[str, str]:
        """The environment of a process that should reach this endpoint through
        fsspec (``s3://`` URLs): this process's, plus the endpoint and credentials."""
        config = {"endpoint_url": self.endpoint, "key": KEY, "secret": SECRET}
        return {
            **os.environ,
            "FSSPEC_S3": json.dumps(config),
            "AWS_DEFAULT_REGION": REGION,
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(endpoint, timeout=1.0):
            return True
    except urllib.error.HTTPError:
        return True  # an HTTP answer, whatever its status: the server is up
    except OSError:
        return False


@contextmanager
def serve() -> Iterator[S3]:
    """A ``moto_server`` on loopback for the duration of the block.

    :raises RuntimeError: it exited or did not answer within :data:`START_TIMEOUT`.
    """
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    # Its request log goes to a file: a pipe left unread would fill and stop it.
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(
            [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not _answers(endpoint):
                if server.poll() is not None:
                    log.seek(0)
                    reason = log.read().decode(errors="replace")
                    raise RuntimeError(f"moto_server exited: {reason}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not answer at {endpoint}")
                time.sleep(0.1)
            yield S3(endpoint)
        finally:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(10)
