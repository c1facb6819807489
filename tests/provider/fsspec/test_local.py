"""The fsspec filesystem ``rcp`` on local trees: fsspec's own conformance suites, plus
what fsspec's local copy does not do (modes and times), registration and options."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import fsspec
import pytest
from fsspec.callbacks import Callback, TqdmCallback
from fsspec.tests.abstract import (
    AbstractCopyTests,
    AbstractFixtures,
    AbstractGetTests,
    AbstractOpenTests,
    AbstractPipeTests,
    AbstractPutTests,
)

from rcp_core.errors import UsageError
from rcp_core.settings import ExistingPolicy, Preserve
from rcp_provider.fsspec.local import RcpFileSystem


class RcpFixtures(AbstractFixtures):  # type: ignore[misc]
    """fsspec's local wiring (``LocalFixtures``), with ``rcp`` as the filesystem."""

    @pytest.fixture
    def fs(self) -> RcpFileSystem:
        return RcpFileSystem(auto_mkdir=True, skip_instance_cache=True)

    @pytest.fixture
    def fs_path(self, tmp_path: Path) -> str:
        return str(tmp_path)


class TestRcpCopy(AbstractCopyTests, RcpFixtures):  # type: ignore[misc]
    pass


class TestRcpGet(AbstractGetTests, RcpFixtures):  # type: ignore[misc]
    pass


class TestRcpPut(AbstractPutTests, RcpFixtures):  # type: ignore[misc]
    pass


class TestRcpOpen(AbstractOpenTests, RcpFixtures):  # type: ignore[misc]
    pass


class TestRcpPipe(AbstractPipeTests, RcpFixtures):  # type: ignore[misc]
    pass


def _tree(root: Path) -> Path:
    """``root/src``: two files and a subdirectory, unusual modes, old times."""
    src = root / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_bytes(b"alpha")
    (src / "sub" / "b.bin").write_bytes(os.urandom(70_000))
    os.chmod(src / "a.txt", 0o640)
    os.chmod(src / "sub" / "b.bin", 0o751)
    os.chmod(src / "sub", 0o750)
    for n, path in enumerate([src / "a.txt", src / "sub" / "b.bin", src / "sub"]):
        os.utime(path, ns=(1_000_000_000 * (n + 1), 1_500_000_000_123_456_789 + n))
    return src


def _meta(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mode, st.st_mtime_ns


@pytest.mark.parametrize("form", ["bare", "url"])
def test_recursive_copy_keeps_modes_and_times(tmp_path: Path, form: str) -> None:
    src = _tree(tmp_path)
    dst = tmp_path / "dst"
    fs = RcpFileSystem(skip_instance_cache=True)
    prefix = "rcp://" if form == "url" else ""
    fs.copy(f"{prefix}{src}", f"{prefix}{dst}", recursive=True)
    for rel in ["a.txt", "sub/b.bin"]:
        assert (dst / rel).read_bytes() == (src / rel).read_bytes()
    for rel in ["", "a.txt", "sub", "sub/b.bin"]:
        assert _meta(dst / rel) == _meta(src / rel), rel


def test_merge_never_replaces_an_entry_of_another_type(tmp_path: Path) -> None:
    """fsspec's local copy fails where a file meets a directory; the engine alone
    would replace it. Nothing is copied then."""
    src = _tree(tmp_path)
    fs = RcpFileSystem(skip_instance_cache=True)
    dst = tmp_path / "dst"
    (dst / "a.txt").mkdir(parents=True)
    with pytest.raises(IsADirectoryError):
        fs.copy(f"{src}/", str(dst), recursive=True)
    other = tmp_path / "other"
    other.mkdir()
    (other / "sub").write_bytes(b"keep me")
    with pytest.raises(FileExistsError):
        fs.copy(f"{src}/", str(other), recursive=True)
    assert (other / "sub").read_bytes() == b"keep me"
    assert sorted(p.name for p in other.iterdir()) == ["sub"]


def test_fsspec_local_copy_drops_them(tmp_path: Path) -> None:
    """Why the filesystem exists: fsspec's own local copy loses the modes."""
    src = _tree(tmp_path)
    dst = tmp_path / "dst"
    fsspec.filesystem("file").copy(str(src), str(dst), recursive=True)
    assert _meta(dst / "a.txt") != _meta(src / "a.txt")


def _listing(root: Path) -> list[tuple[str, bytes | None]]:
    return sorted(
        (str(p.relative_to(root)), None if p.is_dir() else p.read_bytes())
        for p in root.rglob("*")
    )


@pytest.mark.parametrize("maxdepth", [None, 1, 2])
@pytest.mark.parametrize(
    ("source_slash", "target_slash"), [("", ""), ("/", "/"), ("", "/"), ("/", "")]
)
def test_same_names_as_fsspec_local(
    tmp_path: Path, maxdepth: int | None, source_slash: str, target_slash: str
) -> None:
    """Differential: what fsspec's local copy creates, rcp creates (and keeps modes)."""
    src = _tree(tmp_path)
    rcp = RcpFileSystem(auto_mkdir=True, skip_instance_cache=True)
    local = fsspec.filesystem("file", auto_mkdir=True, skip_instance_cache=True)
    outcomes: dict[str, list[str]] = {"rcp": [], "local": []}
    for fs, out in [(rcp, "rcp"), (local, "local")]:
        (tmp_path / out / "existing").mkdir(parents=True)
        for target in ["new", "existing"]:
            dst = f"{tmp_path / out / target}{target_slash}"
            try:
                fs.copy(f"{src}{source_slash}", dst, recursive=True, maxdepth=maxdepth)
                outcomes[out].append("ok")
            except OSError as exc:
                outcomes[out].append(type(exc).__name__)
    assert outcomes["rcp"] == outcomes["local"]
    assert _listing(tmp_path / "rcp") == _listing(tmp_path / "local")
    # Files are told apart by content: a single file may be copied as "new".
    originals = {p.read_bytes(): _meta(p) for p in src.rglob("*") if p.is_file()}
    copies = [p for p in (tmp_path / "rcp").rglob("*") if p.is_file()]
    assert copies
    for path in copies:
        assert _meta(path) == originals[path.read_bytes()], path


class ListingCounter(RcpFileSystem):  # type: ignore[misc]
    """Counts the directory listings fsspec's planning makes."""

    listings = 0

    def ls(self, path: str, detail: bool = False, **kwargs: Any) -> Any:
        self.listings += 1
        return super().ls(path, detail=detail, **kwargs)


def test_a_directory_copied_to_a_new_place_is_not_listed_first(tmp_path: Path) -> None:
    """The engine walks the tree anyway: fsspec's listing (a stat per entry) of a
    directory going whole to a new destination is skipped; a merge still lists."""
    src = _tree(tmp_path)
    fs = ListingCounter(skip_instance_cache=True)
    fs.copy(str(src), str(tmp_path / "new"), recursive=True)
    assert fs.listings == 0
    assert _listing(tmp_path / "new") == _listing(src)
    fs.copy(str(src), str(tmp_path / "new"), recursive=True)  # into new/src
    assert fs.listings == 0
    assert _listing(tmp_path / "new" / "src") == _listing(src)
    fs.copy(f"{src}/", str(tmp_path / "new"), recursive=True)  # a merge
    assert fs.listings > 0


def test_missing_source(tmp_path: Path) -> None:
    fs = RcpFileSystem(skip_instance_cache=True)
    missing, dst = str(tmp_path / "nope"), str(tmp_path / "dst")
    with pytest.raises(FileNotFoundError):
        fs.copy(missing, dst)
    fs.copy([missing], [dst], on_error="ignore")
    with pytest.raises(FileNotFoundError):
        fs.copy([missing], [dst], on_error="raise")
    assert not os.path.lexists(dst)


class Child(Callback):  # type: ignore[misc]
    """A per-file callback: what it was given, and whether it was closed."""

    def __init__(self, source: str, destination: str) -> None:
        super().__init__()
        self.paths = (source, destination)
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Recorder(Callback):  # type: ignore[misc]
    """An outer callback: its values as they were set, and the children it gave."""

    def __init__(self) -> None:
        super().__init__()
        self.values: list[int] = []
        self.children: list[Child] = []

    def branched(self, path_1: str, path_2: str, **kwargs: Any) -> Child:
        child = Child(path_1, path_2)
        self.children.append(child)
        return child

    def call(self, *args: Any, **kwargs: Any) -> None:
        self.values.append(self.value)

    def files(self) -> dict[tuple[str, str], tuple[int | None, int, bool]]:
        """Each child's (source, destination): its size, value and closing."""
        return {c.paths: (c.size, c.value, c.closed) for c in self.children}


@pytest.mark.parametrize("method", ["put", "get"])
def test_a_recursive_transfer_gives_a_child_per_file(
    tmp_path: Path, method: str
) -> None:
    """fsspec's contract: the outer callback counts fsspec's pairs (directories too,
    though the tree is one engine job), each copied file gets a child with its bytes.
    Directories count when the run ends."""
    src = _tree(tmp_path)
    dst = tmp_path / method
    fs = RcpFileSystem(skip_instance_cache=True)
    callback = Recorder()
    getattr(fs, method)(str(src), str(dst), recursive=True, callback=callback)
    assert callback.size == 4  # src, src/a.txt, src/sub, src/sub/b.bin
    assert callback.files() == {
        (str(src / "a.txt"), str(dst / "a.txt")): (5, 5, True),
        (str(src / "sub/b.bin"), str(dst / "sub/b.bin")): (70_000, 70_000, True),
    }
    assert callback.values == [0, 1, 2, 4]  # set_size, each file, the total
    assert _meta(dst / "sub" / "b.bin") == _meta(src / "sub" / "b.bin")
    again = Recorder()
    getattr(fs, method)(f"{src}/", f"{dst}/", recursive=True, callback=again)
    assert again.children == []  # up to date: nothing written
    assert again.values == [0, again.size]
    assert sorted(os.listdir(dst)) == ["a.txt", "sub"]


def test_single_files_and_lists_give_a_child_each(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    fs = RcpFileSystem(skip_instance_cache=True)
    one = Recorder()
    fs.put(str(src / "a.txt"), str(tmp_path / "one.txt"), callback=one)
    assert one.files() == {
        (str(src / "a.txt"), str(tmp_path / "one.txt")): (5, 5, True)
    }
    assert one.values == [0, 1, 1]
    listed = Recorder()
    sources = [str(src / "a.txt"), str(src / "sub" / "b.bin")]
    targets = [str(tmp_path / "x"), str(tmp_path / "y")]
    fs.get(sources, targets, callback=listed)
    assert listed.files() == {
        (sources[0], targets[0]): (5, 5, True),
        (sources[1], targets[1]): (70_000, 70_000, True),
    }
    assert listed.values == [0, 1, 2, 2]


def test_a_tqdm_bar_ends_full(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    out = io.StringIO()
    callback = TqdmCallback(tqdm_kwargs={"file": out, "mininterval": 0})
    fs = RcpFileSystem(skip_instance_cache=True)
    fs.put(str(src), str(tmp_path / "dst"), recursive=True, callback=callback)
    assert (callback.tqdm.n, callback.tqdm.total) == (4, 4)
    callback.close()
    assert "4/4" in out.getvalue()
    assert (tmp_path / "dst" / "sub" / "b.bin").read_bytes() == (
        src / "sub" / "b.bin"
    ).read_bytes()


def test_entry_point_and_urls(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    assert isinstance(fsspec.filesystem("rcp"), RcpFileSystem)
    with fsspec.open(f"rcp://{src / 'a.txt'}", "rb") as f:
        assert f.read() == b"alpha"
    fs, path = fsspec.url_to_fs(f"rcp://{src}")
    assert isinstance(fs, RcpFileSystem)
    assert path == str(src)
    assert sorted(fs.ls(path, detail=False)) == [str(src / "a.txt"), str(src / "sub")]


def test_storage_options_are_coerced_from_strings() -> None:
    fs = RcpFileSystem(
        max_workers="3",
        max_processes="1",
        preserve="none",
        existing="update",
        fail_early="true",
        auto_mkdir="1",
        skip_instance_cache=True,
    )
    assert fs.settings.max_workers == 3
    assert fs.settings.max_processes == 1
    assert fs.settings.preserve == Preserve(frozenset())
    assert fs.settings.existing is ExistingPolicy.UPDATE
    assert fs.settings.fail_early is True
    assert fs.auto_mkdir is True
    passed_on = RcpFileSystem(
        max_workers=2, use_listings_cache=False, skip_instance_cache=True
    )
    assert passed_on.settings.max_workers == 2
    assert passed_on.dircache.use_listings_cache is False
    with pytest.raises(UsageError, match="max_workers"):
        RcpFileSystem(max_workers="many", skip_instance_cache=True)
    with pytest.raises(UsageError, match="existing"):
        RcpFileSystem(existing="clobber", skip_instance_cache=True)


def test_options_from_the_environment(tmp_path: Path) -> None:
    """fsspec's ``FSSPEC_RCP_<OPTION>`` variables arrive as strings."""
    code = (
        "import fsspec; fs = fsspec.filesystem('rcp'); "
        "print(fs.settings.max_workers, fs.settings.preserve.mode)"
    )
    env = {**os.environ, "FSSPEC_RCP_MAX_WORKERS": "5", "FSSPEC_RCP_PRESERVE": "times"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["5", "False"]


def test_importing_the_filesystem_imports_no_airflow() -> None:
    code = "import sys, rcp_provider.fsspec.local; print('airflow' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_symlinks_inside_a_copied_directory_stay_links(tmp_path: Path) -> None:
    """A deliberate difference: fsspec's local copy writes the target's data; the
    engine keeps the link. A symlink named as the source itself is followed, as
    fsspec does."""
    src = _tree(tmp_path)
    (src / "link").symlink_to("a.txt")
    (tmp_path / "alias").symlink_to(src)
    fs = RcpFileSystem(skip_instance_cache=True)
    fs.copy(str(tmp_path / "alias"), str(tmp_path / "dst"), recursive=True)
    assert not (tmp_path / "dst").is_symlink()
    assert os.readlink(tmp_path / "dst" / "link") == "a.txt"
    assert (tmp_path / "dst" / "sub" / "b.bin").read_bytes() == (
        src / "sub" / "b.bin"
    ).read_bytes()


def test_rm_removes_trees_in_parallel_and_never_follows_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept").write_bytes(b"not in the tree")
    src = _tree(tmp_path)
    (src / "sub" / "out").symlink_to(outside)
    (tmp_path / "lone").write_bytes(b"a file")
    fs = RcpFileSystem(skip_instance_cache=True)
    with pytest.raises(ValueError, match="recursive"):
        fs.rm(str(src))
    fs.rm([str(src), str(tmp_path / "lone")], recursive=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside"]
    assert (outside / "kept").read_bytes() == b"not in the tree"


def test_find_on_shared_storage_lists_in_parallel_with_fsspecs_answers(
    tmp_path: Path,
) -> None:
    """Through the latency FUSE (shared storage to the plugins) ``find`` lists
    directories in parallel, and answers exactly as fsspec's local walk does."""
    from benchmarks.latencyfs import mounted

    backing, mnt = tmp_path / "backing", tmp_path / "mnt"
    mnt.mkdir()
    tree = _tree(backing)
    for d in range(6):
        (tree / f"d{d}" / "x").mkdir(parents=True)
        (tree / f"d{d}" / "x" / "f").write_bytes(b"%d" % d)
    (tree / "to_sub").symlink_to("sub")  # a symlink is not entered
    with mounted(backing, mnt) as live:
        root = str(live / "src")
        fs = RcpFileSystem(skip_instance_cache=True)
        plain = fsspec.filesystem("file", skip_instance_cache=True)
        assert fs._listing_workers(root) > 1
        for kwargs in (
            {},
            {"withdirs": True},
            {"maxdepth": 2, "withdirs": True},
            {"detail": True},
        ):
            mine, theirs = fs.find(root, **kwargs), plain.find(root, **kwargs)
            assert mine == theirs, kwargs
        assert fs.find(root + "/a.txt") == plain.find(root + "/a.txt")
