"""Fixtures of the remote tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks import sshd


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sshd.Sshd]:
    """A real sshd on loopback for this module's tests (the remote host)."""
    why = sshd.missing()
    if why is not None:
        pytest.fail(f"remote tests need a real sshd: {why}", pytrace=False)
    with sshd.running_sshd(tmp_path_factory.mktemp("sshd")) as running:
        yield running
