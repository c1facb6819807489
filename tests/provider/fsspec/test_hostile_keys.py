"""Store keys that would lead out of the destination (issue 23, item 2).

An object store takes any key: ``set/../../../x``, ``set//z``, ``set/./w``, one with a
NUL. Copied from a real S3 API (``moto_server`` on loopback, s3fs its client) and from
``memory://`` -- through :func:`~rcp_core.engine.portcopy.copy_tree` and through
``rcp`` itself -- every such name is an entry error, counted and reported, never a write;
every other object is copied; nothing appears outside the destination. A tree that
holds such names is not compared through them either (``rcmp``'s port comparison).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest

from benchmarks.objectstores import Store
from rcp_core.engine.portcopy import copy_tree
from rcp_core.engine.posixport import PosixPort
from rcp_core.errors import CopyFailedError
from rcp_core.settings import CopySettings, ExistingPolicy
from rcp_core.tools.verify.compare import compare
from rcp_core.tools.verify.differences import DiffKind
from rcp_provider.fsspec.storetree import Place

RCP = Path(sys.executable).with_name("rcp")
VALID = {"ok": b"fine", "d/f": b"deeper", "sub/kept": b"beside a bad name"}
HOSTILE = {
    "../../../x": b"three levels above the destination",
    "../y": b"beside the destination",
    "/z": b"an empty segment: set//z",
    "./w": b"a dot segment",
    "sub/../v": b"in, once normalised: still refused",
    "n\0ul": b"a NUL",
}
"""Keys below ``set/``, by what follows ``set/``."""
REFUSED = {
    "list: unsafe name: a '..' component": 2,  # ../ (of ../../../x, ../y), sub/../
    "list: unsafe name: a '.' component": 1,  # ./ (of ./w)
    "list: unsafe name: an empty component": 1,  # / (of /z)
    "list: unsafe name: a NUL character": 1,
}
"""The errors, by kind: each name a directory's listing holds that is not safe (a
prefix such as ``..`` once, however many keys are below it: nothing below an unsafe
name is listed)."""


@pytest.fixture(params=["memory", "s3"])
def store(request: pytest.FixtureRequest) -> Iterator[tuple[Any, str]]:
    """A store and a fresh prefix in it: ``memory://`` or a bucket of a real S3 API."""
    if request.param == "memory":
        yield fsspec.filesystem("memory"), f"/m{uuid.uuid4().hex}"
        return
    s3: Store = request.getfixturevalue("s3")
    yield s3.fs(), s3.bucket()


def fill(fs: Any, top: str, objects: dict[str, bytes]) -> None:
    """Write ``objects`` below ``top/set/`` under exactly those keys, and check the
    store lists them as written (so the test does test such keys)."""
    for rel, data in objects.items():
        fs.pipe_file(f"{top}/set/{rel}", data)
    listed = set(fs.find(f"{top}/set"))
    assert {f"{top}/set/{rel}" for rel in objects} <= listed


def files_under(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def destination(tmp_path: Path) -> Path:
    """``a/b/c/dst``, three levels down: where ``../../../x`` would land is in
    ``tmp_path``, and any write outside ``dst`` shows in :func:`files_under`."""
    parent = tmp_path / "a" / "b" / "c"
    parent.mkdir(parents=True)
    return parent / "dst"


def refused(failure: CopyFailedError) -> dict[str, int]:
    return {key: count for key, count, _ in failure.errors}


def test_unsafe_keys_are_entry_errors_and_nothing_lands_outside(
    store: tuple[Any, str], tmp_path: Path
) -> None:
    fs, top = store
    fill(fs, top, {**VALID, **HOSTILE})
    dst = destination(tmp_path)
    with pytest.raises(CopyFailedError) as caught:
        copy_tree(Place(fs, f"{top}/set"), PosixPort(str(dst)))
    assert files_under(tmp_path) == {
        f"a/b/c/dst/{rel}": data for rel, data in VALID.items()
    }
    assert sorted(p.name for p in dst.iterdir()) == ["d", "ok", "sub"]
    summary = caught.value.summary
    assert summary["copied.files"] == len(VALID)
    assert summary["errors"] == sum(REFUSED.values())
    assert refused(caught.value) == REFUSED
    examples = {example for _, _, example in caught.value.errors}
    assert examples == {"n\0ul", "/", "../", "./"}  # one example of each kind


def test_a_second_run_over_an_existing_copy_is_refused_the_same_way(
    store: tuple[Any, str], tmp_path: Path
) -> None:
    """``--overwrite`` lists the destination too; the source's unsafe names are
    refused again, nothing is replaced outside it."""
    fs, top = store
    fill(fs, top, {**VALID, **HOSTILE})
    dst = destination(tmp_path)
    settings = CopySettings(existing=ExistingPolicy.OVERWRITE)
    for _ in range(2):
        with pytest.raises(CopyFailedError) as caught:
            copy_tree(Place(fs, f"{top}/set"), PosixPort(str(dst)), settings)
        assert refused(caught.value) == REFUSED
    assert files_under(tmp_path) == {
        f"a/b/c/dst/{rel}": data for rel, data in VALID.items()
    }


def test_a_directory_marker_key_is_its_directory(s3: Store, tmp_path: Path) -> None:
    """``set/trail/`` (what a console's "create folder" writes) is the directory
    ``trail``, not a bad name."""
    fs, top = s3.fs(), s3.bucket()
    fill(fs, top, {**VALID, "trail/": b"", "trail/in": b"inside"})
    dst = destination(tmp_path)
    summary = copy_tree(Place(fs, f"{top}/set"), PosixPort(str(dst)))
    assert summary["errors"] == 0
    assert files_under(dst) == {**VALID, "trail/in": b"inside"}


def test_rcp_from_s3_reports_the_unsafe_keys_and_writes_nothing_outside(
    s3: Store, tmp_path: Path
) -> None:
    """``rcp s3://bucket/set DST`` end to end: the store reached through fsspec's
    environment configuration, exit status 1, the errors on the output."""
    fs, bucket = s3.fs(), s3.bucket()
    fill(fs, bucket, {**VALID, **HOSTILE})
    dst = destination(tmp_path)
    done = subprocess.run(
        [str(RCP), "--summary", f"s3://{bucket}/set", str(dst)],
        env=s3.environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert files_under(tmp_path) == {
        f"a/b/c/dst/{rel}": data for rel, data in VALID.items()
    }
    output = done.stdout + done.stderr
    assert "unsafe name: a '..' component" in output
    assert f"finished with {sum(REFUSED.values())} error(s)" in output


def test_a_comparison_does_not_read_through_unsafe_names(
    store: tuple[Any, str], tmp_path: Path
) -> None:
    """``rcmp`` of a store with such keys against a local copy: each unsafe name is an
    ``error`` difference (not a ``missing`` entry), and nothing is read or hashed
    through it (the local ``../secret`` beside the copy is never compared)."""
    fs, top = store
    fill(fs, top, {**VALID, "../secret": b"the store's"})
    dst = destination(tmp_path)
    (tmp_path / "a" / "b" / "c" / "secret").write_bytes(b"the store's")
    for rel, data in VALID.items():
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        (dst / rel).write_bytes(data)
    result = compare(Place(fs, f"{top}/set"), PosixPort(str(dst)), checksum=True)
    errors = [d for d in result.differences if d.kind is DiffKind.ERROR]
    # One error, for the prefix ``..`` (named with its ``/`` as the copy's errors
    # name it): a comparison lists one directory at a time, as the copy does, and
    # nothing below an unsafe name is listed, so ``../secret`` is not an error of
    # its own any more (a whole-tree ``find`` listed both).
    assert [d.path for d in errors] == ["../"]
    assert all("unsafe name" in d.detail for d in errors)
    assert result.counts[DiffKind.CONTENT] == 0
    assert result.files_hashed == len(VALID)
