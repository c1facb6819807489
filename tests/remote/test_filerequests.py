"""A service's file requests on a real ``rcpd serve`` (TLS on loopback): round trips,
confinement, bounds, and writes that never show half a file."""

from __future__ import annotations

import errno
import json
import os
import pickle
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from blake3 import blake3

from rcp_core.errors import (
    RemoteError,
    RemoteFileError,
    RemoteFileExistsError,
    RemoteFileNotFoundError,
    RemoteIsADirectoryError,
    RemoteNotADirectoryError,
    UsageError,
)
from rcp_core.remote.connection import Connection
from rcp_core.remote.filewire import (
    MAX_DIGEST,
    MAX_ENTRIES,
    MAX_LIST_BYTES,
    MAX_READ,
    MAX_WRITERS,
    failure,
)
from rcp_core.remote.handshake import dial
from rcp_core.remote.hello import Role
from rcp_core.remote.roles import SOFTWARE
from rcp_core.remote.wire import FrameKind
from rcp_core.run.runtime import Kind, classify
from support.services import TOKEN, Served, start

TIMEOUT = 10.0
T0 = 1_600_000_000 * 10**9


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    yield from start(tmp_path)


def raw(served: Served) -> Connection:
    """A connection that sends what a client would not."""
    return dial(
        served.service.address,
        role=Role.CLIENT,
        software=SOFTWARE,
        timeout=TIMEOUT,
        pin=served.identity.fingerprint,
        token=TOKEN,
    )


def ask(conn: Connection, type_: str, **fields: Any) -> dict[str, Any]:
    conn.send_control(type_, **fields)
    return conn.expect(FrameKind.CONTROL).header


def temporaries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".rcp-"))


def eventually(check: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


# -- stat ---------------------------------------------------------------------------


def test_stat_tells_type_size_mode_time_and_a_links_target(served: Served) -> None:
    file = served.data / "file"
    file.write_bytes(b"x" * 1234)
    file.chmod(0o640)
    os.utime(file, ns=(T0, T0 + 7))
    (served.data / "dir").mkdir()
    (served.data / "link").symlink_to("file")
    with served.client() as client:
        got = client.stat(str(file))
        directory = client.stat(f"{served.data}/dir/")
        link = client.stat(str(served.data / "link"))
        followed = client.stat(str(served.data / "link"), follow=True)
        root = client.stat(str(served.data))
    assert (got.name, got.kind, got.stat.st_size, got.target) == (
        "file",
        "file",
        1234,
        None,
    )
    assert stat.S_IMODE(got.stat.st_mode) == 0o640
    assert got.stat.st_mtime_ns == T0 + 7
    assert (directory.name, directory.kind) == ("dir", "directory")
    assert (link.name, link.kind, link.target) == ("link", "symlink", "file")
    assert (followed.name, followed.kind, followed.stat.st_size) == (
        "link",
        "file",
        1234,
    )
    assert followed.target is None
    assert (root.name, root.kind) == ("data", "directory")


@pytest.mark.parametrize("path", ["data/missing", "data/missing/below"])
def test_a_missing_path_is_file_not_found(
    served: Served, tmp_path: Path, path: str
) -> None:
    with served.client() as client, pytest.raises(RemoteFileNotFoundError) as caught:
        client.stat(f"{tmp_path}/{path}")
    assert isinstance(caught.value, FileNotFoundError)
    assert caught.value.errno == errno.ENOENT
    assert caught.value.filename == f"{tmp_path}/{path}"


def test_a_dangling_link_followed_is_file_not_found(served: Served) -> None:
    (served.data / "dangling").symlink_to("nowhere")
    with served.client() as client:
        assert client.stat(str(served.data / "dangling")).target == "nowhere"
        with pytest.raises(FileNotFoundError):
            client.stat(str(served.data / "dangling"), follow=True)


def test_links_are_followed_within_the_roots_only(served: Served) -> None:
    (served.data / "sub").mkdir()
    (served.backup / "kept").write_bytes(b"kept")
    (served.data / "sub" / "across").symlink_to(served.backup / "kept")
    (served.data / "sub" / "up").symlink_to("../sub/across")
    (served.data / "sub" / "out").symlink_to("../../outside/secret")
    (served.data / "sub" / "inside").symlink_to("x/../../outside/secret")
    with served.client() as client:
        up = client.stat(str(served.data / "sub" / "up"), follow=True)
        assert (up.kind, up.stat.st_size) == ("file", 4)
        # Not followed, a link out is only a link: its target is no secret.
        assert client.stat(str(served.data / "sub" / "out")).kind == "symlink"
        with pytest.raises(UsageError, match="outside this service's roots"):
            client.stat(str(served.data / "sub" / "out"), follow=True)
        with pytest.raises(UsageError, match=r"'\.\.' inside"):
            client.stat(str(served.data / "sub" / "inside"), follow=True)


# -- listdir --------------------------------------------------------------------------


def test_listdir_shows_each_entry_once_with_its_metadata(served: Served) -> None:
    (served.data / "d").mkdir()
    (served.data / "d" / "f").write_bytes(b"abc")
    (served.data / "d" / "sub").mkdir()
    (served.data / "d" / "l").symlink_to("f")
    with served.client() as client:
        entries = {e.name: e for e in client.listdir(str(served.data / "d"))}
    assert sorted(entries) == ["f", "l", "sub"]
    assert (entries["f"].kind, entries["f"].stat.st_size) == ("file", 3)
    assert (entries["l"].kind, entries["l"].target) == ("symlink", "f")
    assert entries["sub"].kind == "directory"


def pages(served: Served, path: Path) -> list[list[dict[str, Any]]]:
    """The pages of a listing, as the service sends them."""
    conn = raw(served)
    try:
        answer = ask(conn, "listdir", path=str(path))
        found = [answer["entries"]]
        while answer["cursor"] is not None:
            answer = ask(conn, "listdir", cursor=answer["cursor"])
            found.append(answer["entries"])
    finally:
        conn.close()
    return found


def test_a_large_directory_is_listed_in_pages_of_bounded_count(
    served: Served,
) -> None:
    big = served.data / "big"
    big.mkdir()
    names = {f"file-{i:05d}" for i in range(2 * MAX_ENTRIES + 5)}
    for name in names:
        (big / name).touch()
    with served.client() as client:
        assert sorted(e.name for e in client.listdir(str(big))) == sorted(names)
    assert [len(page) for page in pages(served, big)] == [MAX_ENTRIES, MAX_ENTRIES, 5]


def test_long_link_targets_are_listed_in_pages_of_bounded_bytes(
    served: Served,
) -> None:
    links = served.data / "links"
    links.mkdir()
    target = "t" * 4000  # 400 of them: 1.6 MB of JSON, past a page's bytes
    for i in range(400):
        (links / f"link-{i}").symlink_to(target)
    with served.client() as client:
        listed = client.listdir(str(links))
    assert sorted(e.name for e in listed) == sorted(f"link-{i}" for i in range(400))
    assert {e.target for e in listed} == {target}
    found = pages(served, links)
    assert len(found) == 2
    compact = (",", ":")  # as frames encode headers
    assert all(len(json.dumps(p, separators=compact)) <= MAX_LIST_BYTES for p in found)


def test_listdir_of_a_file_or_a_link_is_not_a_directory(served: Served) -> None:
    (served.data / "f").touch()
    (served.data / "d").mkdir()
    (served.data / "l").symlink_to("d")
    with served.client() as client:
        for name in ("f", "l"):
            with pytest.raises(RemoteNotADirectoryError):
                client.listdir(str(served.data / name))


def test_an_unknown_cursor_is_refused_and_the_connection_serves_on(
    served: Served,
) -> None:
    conn = raw(served)
    try:
        answer = ask(conn, "listdir", cursor=99)
        assert answer["type"] == "refused"
        assert "no listing 99" in answer["reason"]
        assert ask(conn, "listdir", path=str(served.data))["cursor"] is None
    finally:
        conn.close()


# -- read -----------------------------------------------------------------------------


def test_read_range_gives_the_bytes_asked_and_fewer_at_the_end(
    served: Served,
) -> None:
    content = os.urandom(2 * MAX_READ + 1000)  # more than one request's worth
    (served.data / "blob").write_bytes(content)
    path = str(served.data / "blob")
    with served.client() as client:
        assert client.read_range(path, 0, len(content)) == content
        assert client.read_range(path, 10, 20) == content[10:30]
        assert client.read_range(path, len(content) - 5, 100) == content[-5:]
        assert client.read_range(path, len(content) + 5, 100) == b""
        assert client.read_range(path, 0, 0) == b""


def test_read_refuses_what_is_not_a_regular_file(served: Served) -> None:
    (served.data / "d").mkdir()
    (served.data / "f").write_bytes(b"data")
    (served.data / "l").symlink_to("f")
    os.mkfifo(served.data / "fifo")
    with served.client() as client:
        with pytest.raises(RemoteIsADirectoryError):
            client.read_range(str(served.data / "d"), 0, 10)
        for name in ("l", "fifo"):
            with pytest.raises(UsageError, match="not a regular file"):
                client.read_range(str(served.data / name), 0, 10)


def test_digest_hashes_a_range_where_the_file_is(served: Served) -> None:
    content = os.urandom(3 << 20)
    (served.data / "blob").write_bytes(content)
    (served.data / "d").mkdir()
    (served.data / "l").symlink_to("blob")
    path = str(served.data / "blob")
    with served.client() as client:
        assert client.digest(path, 0, len(content)) == (
            blake3(content).hexdigest(),
            len(content),
        )
        assert client.digest(path, 1000, 10) == (
            blake3(content[1000:1010]).hexdigest(),
            10,
        )
        tail = client.digest(path, len(content) - 3, 100)
        assert tail == (blake3(content[-3:]).hexdigest(), 3)  # fewer at the end
        with pytest.raises(UsageError, match="at most"):
            client.digest(path, 0, MAX_DIGEST + 1)
        with pytest.raises(RemoteIsADirectoryError):
            client.digest(str(served.data / "d"), 0, 10)
        with pytest.raises(UsageError, match="not a regular file"):
            client.digest(str(served.data / "l"), 0, 10)
        with pytest.raises(UsageError):
            client.digest(str(served.outside / "secret"), 0, 10)


def test_an_oversize_read_is_refused(served: Served) -> None:
    (served.data / "f").write_bytes(b"data")
    conn = raw(served)
    try:
        conn.send_control(
            "read", path=str(served.data / "f"), offset=0, length=MAX_READ + 1
        )
        answer = conn.read()
        assert answer is not None
        assert answer.kind is FrameKind.CONTROL
        assert answer.header["type"] == "refused"
        assert f"at most {MAX_READ} bytes" in answer.header["reason"]
        conn.send_control("read", path=str(served.data / "f"), offset=1, length=2)
        answer = conn.read()
        assert answer is not None
        assert answer.kind is FrameKind.CHUNK
        assert (answer.header["size"], bytes(answer.data)) == (4, b"at")
    finally:
        conn.close()


# -- write ----------------------------------------------------------------------------


def test_a_write_appears_whole_at_its_commit(served: Served) -> None:
    final = served.data / "new"
    content = os.urandom(MAX_READ + 12345)  # two write requests
    with served.client() as client:
        writer = client.open_write(str(final))
        assert writer.write(content[:100]) == 100
        writer.write(content[100:])
        assert not final.exists()
        assert len(temporaries(served.data)) == 1
        writer.commit(sync=True)
        assert client.read_range(str(final), 0, len(content)) == content
    assert final.read_bytes() == content
    assert stat.S_IMODE(final.stat().st_mode) == 0o644
    assert temporaries(served.data) == []


def test_a_replaced_file_shows_the_old_content_until_the_commit(
    served: Served,
) -> None:
    final = served.data / "kept"
    final.write_bytes(b"old")
    final.chmod(0o600)
    with served.client() as client, client.open_write(str(final)) as writer:
        writer.write(b"new content")
        assert final.read_bytes() == b"old"
    assert final.read_bytes() == b"new content"
    assert stat.S_IMODE(final.stat().st_mode) == 0o600  # the replaced file's


def test_a_write_asks_its_mode(served: Served) -> None:
    with (
        served.client() as client,
        client.open_write(str(served.data / "x"), mode=0o751) as writer,
    ):
        writer.write(b"#!")
    assert stat.S_IMODE((served.data / "x").stat().st_mode) == 0o751


def test_an_aborted_write_leaves_nothing(served: Served) -> None:
    with served.client() as client:
        writer = client.open_write(str(served.data / "gone"))
        writer.write(b"partial")
        writer.abort()
        assert sorted(os.listdir(served.data)) == ["escape"]

        def fail_midway() -> None:
            with client.open_write(str(served.data / "gone")) as failing:
                failing.write(b"partial")
                raise ValueError("boom")

        with pytest.raises(ValueError, match="boom"):
            fail_midway()
        assert sorted(os.listdir(served.data)) == ["escape"]


def test_a_connection_dropped_mid_write_leaves_nothing(served: Served) -> None:
    final = served.backup / "dropped"
    final.write_bytes(b"before")
    client = served.client()
    writer = client.open_write(str(final))
    writer.write(b"half of it")
    assert len(temporaries(served.backup)) == 1
    client.close()
    eventually(lambda: temporaries(served.backup) == [], "the temporary stays")
    assert final.read_bytes() == b"before"
    with pytest.raises(RemoteError, match="was lost"):
        writer.write(b"more")


def test_an_exclusive_write_does_not_replace(served: Served) -> None:
    (served.data / "there").write_bytes(b"first")
    with served.client() as client:
        with pytest.raises(RemoteFileExistsError):
            client.open_write(str(served.data / "there"), exclusive=True)
        writer = client.open_write(str(served.data / "late"), exclusive=True)
        writer.write(b"mine")
        (served.data / "late").write_bytes(b"theirs")  # appears before the commit
        with pytest.raises(FileExistsError):
            writer.commit()
    assert (served.data / "there").read_bytes() == b"first"
    assert (served.data / "late").read_bytes() == b"theirs"
    assert temporaries(served.data) == []


def test_writes_to_a_directory_or_a_missing_one_fail(served: Served) -> None:
    (served.data / "d").mkdir()
    with served.client() as client:
        with pytest.raises(RemoteIsADirectoryError):
            client.open_write(str(served.data / "d"))
        with pytest.raises(RemoteFileNotFoundError):
            client.open_write(str(served.data / "missing" / "f"))


def test_files_open_for_writing_are_bounded_per_connection(served: Served) -> None:
    with served.client() as client:
        writers = [client.open_write(str(served.data / f"f{i}")) for i in range(16)]
        assert len(writers) == MAX_WRITERS
        with pytest.raises(UsageError, match=f"at most {MAX_WRITERS} files"):
            client.open_write(str(served.data / "one-more"))
        writers[0].abort()
        client.open_write(str(served.data / "one-more")).abort()


def test_a_piece_out_of_order_is_refused_and_writes_nothing(served: Served) -> None:
    conn = raw(served)
    try:
        handle = ask(conn, "create", path=str(served.data / "f"))["handle"]
        conn.send(
            FrameKind.CHUNK, {"type": "write", "handle": handle, "offset": 0}, b"ab"
        )
        assert conn.expect(FrameKind.CONTROL).header == {"type": "written", "size": 2}
        conn.send(
            FrameKind.CHUNK, {"type": "write", "handle": handle, "offset": 0}, b"ab"
        )
        answer = conn.expect(FrameKind.CONTROL).header
        assert answer["type"] == "refused"
        assert "the file has 2 bytes" in answer["reason"]
        assert ask(conn, "commit", handle=handle)["size"] == 2
    finally:
        conn.close()
    assert (served.data / "f").read_bytes() == b"ab"


def test_a_write_in_a_control_frame_ends_the_connection(served: Served) -> None:
    conn = raw(served)
    try:
        conn.send_control("write", handle=1, offset=0)
        with pytest.raises(RemoteError, match="write in a CONTROL frame"):
            conn.read()
    finally:
        conn.close()


# -- mkdir, remove, rename ------------------------------------------------------------


def test_mkdir_remove_and_rename(served: Served) -> None:
    data = served.data
    with served.client() as client:
        client.mkdir(str(data / "a"))
        with pytest.raises(RemoteFileExistsError):
            client.mkdir(str(data / "a"))
        client.mkdir(str(data / "a"), exist_ok=True)
        with pytest.raises(RemoteFileNotFoundError):
            client.mkdir(str(data / "b" / "c"))
        client.mkdir(str(data / "b" / "c" / "d"), parents=True)
        (data / "b" / "c" / "d" / "f").write_bytes(b"f")
        with pytest.raises(RemoteFileError, match="not empty") as caught:
            client.remove(str(data / "b" / "c" / "d"))
        assert caught.value.errno == errno.ENOTEMPTY
        client.rename(str(data / "b" / "c" / "d" / "f"), str(served.backup / "f"))
        client.remove(str(data / "b" / "c" / "d"))
        client.remove(str(served.backup / "f"))
        with pytest.raises(RemoteFileNotFoundError):
            client.remove(str(served.backup / "f"))
    assert sorted(os.listdir(data)) == ["a", "b", "escape"]
    assert os.listdir(data / "b" / "c") == []
    assert os.listdir(served.backup) == []


def test_a_change_sent_again_with_its_key_is_not_done_twice(served: Served) -> None:
    key = "k" * 32
    path = str(served.data / "once")
    first, second = raw(served), raw(served)
    try:
        assert ask(first, "mkdir", path=path, key=key) == {"type": "done"}
        assert ask(second, "mkdir", path=path, key=key) == {"type": "done"}
        assert ask(second, "mkdir", path=path, key="other" * 4)["errno"] == "EEXIST"
    finally:
        first.close()
        second.close()


def test_setmeta_sets_an_entrys_own_mode_and_time(served: Served) -> None:
    data = served.data
    (data / "f").write_bytes(b"f")
    (data / "d").mkdir()
    os.symlink("f", data / "link")
    with served.client() as client:
        client.set_meta(str(data / "f"), mode=0o640, mtime_ns=T0 + 123, uid=1234)
        client.set_meta(str(data / "d"), mode=0o750)
        client.set_meta(str(data / "d"), mtime_ns=T0 - 7)
        client.set_meta(str(served.backup), mtime_ns=T0)  # a root's own, too
        with pytest.raises(UsageError, match="is a symlink"):
            client.set_meta(str(data / "link"), mode=0o600)
        with pytest.raises(RemoteFileNotFoundError):
            client.set_meta(str(data / "missing"), mode=0o600)
    f, d = os.stat(data / "f"), os.stat(data / "d")
    assert (stat.S_IMODE(f.st_mode), f.st_mtime_ns, f.st_atime_ns) == (
        0o640,
        T0 + 123,
        T0 + 123,
    )
    assert (stat.S_IMODE(d.st_mode), d.st_mtime_ns) == (0o750, T0 - 7)
    assert os.stat(served.backup).st_mtime_ns == T0
    assert (f.st_uid, f.st_gid) == (1234, 0)  # the group left as it was (root's)
    assert stat.S_IMODE(os.stat(data / "f", follow_symlinks=True).st_mode) == 0o640


def test_setmeta_takes_permission_bits_nanoseconds_and_ids_only(served: Served) -> None:
    """A setuid bit, a time that is no integer or an id out of range is a malformed
    request: the service gives the connection up, and nothing changed."""
    (served.data / "f").write_bytes(b"f")
    os.chmod(served.data / "f", 0o644)
    for fields, why in (
        ({"mode": 0o4755}, "mode must be permission bits"),
        ({"mtime_ns": 1.5}, "mtime_ns must be nanoseconds"),
        ({"mtime_ns": 2**63}, "mtime_ns must be nanoseconds"),
        ({"uid": -1}, "uid must be an id"),
        ({"gid": 2**32 - 1}, "gid must be an id"),
    ):
        conn = raw(served)
        try:
            conn.send_control("setmeta", path=str(served.data / "f"), **fields)
            with pytest.raises(RemoteError, match=f"gave up: setmeta: {why}"):
                conn.read()
        finally:
            conn.close()
    assert stat.S_IMODE(os.stat(served.data / "f").st_mode) == 0o644


def test_symlink_makes_a_symlink_whole_with_its_own_time_and_owner(
    served: Served,
) -> None:
    """Made under a temporary name and renamed over: a file or a symlink there is
    replaced, a directory stays (``failed``); the target is never followed, and no
    temporary is left."""
    data = served.data
    (data / "f").write_bytes(b"a file\n")
    (data / "d").mkdir()
    os.symlink("old", data / "l")
    with served.client() as client:
        client.symlink(str(data / "new"), "../../nowhere", mtime_ns=T0 + 9, uid=4321)
        client.symlink(str(data / "f"), "d")
        client.symlink(str(data / "l"), "f", mtime_ns=T0 - 3)
        with pytest.raises(RemoteFileError):
            client.symlink(str(data / "d"), "f")
    assert os.readlink(data / "new") == "../../nowhere"
    new = os.lstat(data / "new")
    assert (new.st_mtime_ns, new.st_uid) == (T0 + 9, 4321)
    assert os.readlink(data / "f") == "d"
    assert (os.readlink(data / "l"), os.lstat(data / "l").st_mtime_ns) == ("f", T0 - 3)
    assert not (data / "d").is_symlink()
    assert (data / "d").is_dir()
    assert sorted(os.listdir(data)) == ["d", "escape", "f", "l", "new"]


def test_symlink_takes_a_target_symlink_2_takes_only(served: Served) -> None:
    """An empty target, a NUL or more than 4,095 bytes: a malformed request, the
    connection given up, nothing made."""
    for target, why in (
        ("", "an empty symlink target"),
        ("a\0b", "a NUL character"),
        ("x" * 4096, "longer than 4095 bytes"),
        (7, "not a str"),
    ):
        conn = raw(served)
        try:
            conn.send_control("symlink", path=str(served.data / "s"), target=target)
            with pytest.raises(RemoteError, match=f"gave up: symlink: .*{why}"):
                conn.read()
        finally:
            conn.close()
    assert not os.path.lexists(served.data / "s")


# -- confinement ----------------------------------------------------------------------

ESCAPES = [
    "data/../outside/secret",
    "outside/secret",
    "data/escape/secret",  # a symlink in a root, to outside
]


@pytest.mark.parametrize("path", ESCAPES)
def test_paths_beyond_the_roots_are_refused_by_every_request(
    served: Served, tmp_path: Path, path: str
) -> None:
    target = f"{tmp_path}/{path}"
    before = sorted(os.listdir(served.outside))
    with served.client() as client:
        with pytest.raises((UsageError, RemoteNotADirectoryError)):
            client.listdir(target.rsplit("/", 1)[0])  # a symlink is not a directory
        for request in (
            lambda: client.stat(target),
            lambda: client.read_range(target, 0, 10),
            lambda: client.open_write(target),
            lambda: client.open_write(f"{target}-new"),
            lambda: client.mkdir(f"{target}-dir"),
            lambda: client.mkdir(f"{target}-dir/below", parents=True),
            lambda: client.remove(target),
            lambda: client.rename(target, str(served.data / "stolen")),
            lambda: client.rename(str(served.data / "escape"), target + "-moved"),
            lambda: client.set_meta(target, mode=0o777),
            lambda: client.symlink(f"{target}-link", "/etc/passwd"),
        ):
            with pytest.raises(UsageError):
                request()
    assert sorted(os.listdir(served.outside)) == before
    assert (served.outside / "secret").read_text() == "secret"
    assert sorted(os.listdir(served.data)) == ["escape"]


def test_a_root_is_neither_removed_nor_renamed(served: Served) -> None:
    with served.client() as client:
        with pytest.raises(UsageError, match="is a root"):
            client.remove(str(served.backup))
        with pytest.raises(UsageError, match="is a root"):
            client.rename(str(served.backup), str(served.data / "b"))
    assert served.backup.is_dir()


def test_a_client_checks_the_service_speaks_file_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rcp_core.remote import handshake

    monkeypatch.setattr(handshake, "PROTOCOL", (1, 6))
    for served in start(tmp_path):
        with served.client() as client:
            with pytest.raises(RemoteError, match=r"stat needs 1\.7"):
                client.stat(str(served.data))
            assert client.jobs() == []  # what 1.6 serves still works
    monkeypatch.setattr(handshake, "PROTOCOL", (1, 7))
    (tmp_path / "again").mkdir()
    for served in start(tmp_path / "again"):
        (served.data / "f").write_bytes(b"x")
        with served.client() as client:
            with pytest.raises(RemoteError, match=r"digest needs 1\.8"):
                client.digest(str(served.data / "f"), 0, 1)
            with pytest.raises(RemoteError, match=r"setmeta needs 1\.17"):
                client.set_meta(str(served.data / "f"), mode=0o600)
            with pytest.raises(RemoteError, match=r"symlink needs 1\.18"):
                client.symlink(str(served.data / "s"), "f")
            assert client.stat(str(served.data / "f")).stat.st_size == 1


@pytest.mark.parametrize(
    ("name", "builtin", "kind"),
    [
        ("ENOENT", FileNotFoundError, Kind.PERMANENT),
        ("EACCES", PermissionError, Kind.PERMANENT),
        ("ENOTEMPTY", OSError, Kind.PERMANENT),
        ("ESTALE", OSError, Kind.TRANSIENT),
        ("ENOSPC", OSError, Kind.FATAL),
        ("ENOSUCHERRNO", OSError, Kind.PERMANENT),  # another host's: EIO here
    ],
)
def test_a_failed_answer_is_the_error_of_its_errno(
    name: str, builtin: type[OSError], kind: Kind
) -> None:
    exc = failure({"type": "failed", "errno": name, "reason": "why"}, "host:7450", "/p")
    assert isinstance(exc, builtin)
    assert isinstance(exc, RemoteError)
    assert exc.errno == getattr(errno, name, errno.EIO)
    assert (exc.filename, classify(exc)) == ("/p", kind)
    assert "why (on host:7450)" in str(exc)
    again = pickle.loads(pickle.dumps(exc))  # crosses process boundaries whole
    assert (type(again), again.errno, again.filename) == (type(exc), exc.errno, "/p")


def test_an_entry_tells_the_device_it_is_on_from_1_12(tmp_path: Path) -> None:
    """``dev`` beside ``meta``: read back; absent (an older service) is ``None``; a
    bad one is a protocol error."""
    from rcp_core.errors import ProtocolError
    from rcp_core.remote.filewire import entry_from_wire, entry_to_wire

    st = os.lstat(tmp_path)
    wire = entry_to_wire("d", st, None)
    assert entry_from_wire(wire).dev == st.st_dev
    del wire["dev"]
    assert entry_from_wire(wire).dev is None
    for bad in (-1, True, "1", 2**64):
        with pytest.raises(ProtocolError, match="dev"):
            entry_from_wire({**wire, "dev": bad})
