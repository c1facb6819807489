"""The object-store emulators (benchmarks/objectstores.py): each serves its real API
on loopback to the client a user would use, and to an ``rcp`` process through the
environment it gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import objectstores
from support.rcprun import program


@pytest.mark.parametrize("name", sorted(objectstores.SERVERS))
def test_each_store_keeps_what_its_client_writes_and_rcp_reaches_it(
    name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store: objectstores.Store = request.getfixturevalue(name)
    fs, bucket = store.fs(), store.bucket()
    fs.pipe({f"{bucket}/up/a": b"alpha", f"{bucket}/up/d/b": b"beta"})
    assert sorted(fs.find(f"{bucket}/up")) == [f"{bucket}/up/a", f"{bucket}/up/d/b"]
    assert fs.cat_file(f"{bucket}/up/d/b") == b"beta"

    down = tmp_path / "down"
    run = program([store.url(f"{bucket}/up"), str(down)], store.environ())
    assert run.code == 0, run
    assert (down / "a").read_bytes() == b"alpha"
    assert (down / "d" / "b").read_bytes() == b"beta"


def test_the_gcs_emulator_keeps_each_name_as_given(
    gcs: objectstores.Store,
) -> None:
    """Names that differ only as paths are different objects, and a ``..`` segment
    can be written (a real bucket keeps both; the emulator's own store did not)."""
    fs, bucket = gcs.fs(), gcs.bucket()
    keys = {"k/a": b"1", "k//a": b"2", "k/./a": b"3", "k/../a": b"4", "k/b/": b""}
    fs.pipe({f"{bucket}/{key}": data for key, data in keys.items()})
    for key, data in keys.items():
        assert fs.cat_file(f"{bucket}/{key}") == data, key


@pytest.mark.parametrize("name", sorted(objectstores.SERVERS))
def test_each_store_keeps_an_objects_last_line_break_byte(
    name: str, request: pytest.FixtureRequest
) -> None:
    """Bytes ending in CR, LF or CRLF come back as written: the GCS emulator's own
    parser once dropped a final CR of a one-request upload (1 random file in 256)."""
    store: objectstores.Store = request.getfixturevalue(name)
    fs, bucket = store.fs(), store.bucket()
    objects = {
        f"{bucket}/{i}": b"x" * i + end
        for i, end in enumerate((b"\r", b"\n", b"\r\n", b"\n\r", b"\r\r", b"--x\r"))
    }
    fs.pipe(objects)
    for path, data in objects.items():
        assert fs.cat_file(path) == data, path
