"""Fixtures of the fsspec tests: a real ``rcpd serve`` process for a module's tests,
and a fresh directory beneath its root for each test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.services import TOKEN, RcpdServe


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RcpdServe, Path]]:
    """An ``rcpd serve`` process whose one root is a fresh directory."""
    base = tmp_path_factory.mktemp("service")
    root = base / "root"
    root.mkdir()
    (base / "token").write_text(TOKEN + "\n")
    rcpd = RcpdServe(
        [
            "--root",
            str(root),
            "--token-file",
            str(base / "token"),
            "--identity",
            str(base / "identity"),
        ]
    )
    try:
        yield rcpd, root
    finally:
        assert rcpd.stop() == 0, rcpd.stderr


@pytest.fixture
def area(served: tuple[RcpdServe, Path]) -> Path:
    """A fresh directory beneath the service's root, for one test."""
    path = served[1] / uuid.uuid4().hex
    path.mkdir()
    return path
