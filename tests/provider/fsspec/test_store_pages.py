"""An S3 level listed a page at a time (issue 26: a million-key prefix lists in the
memory of a page), against a real S3 API (``moto_server``) with pages of a few keys
(:data:`~rcp_provider.fsspec.storelisting.S3_PAGE` made small), so a level of a
dozen keys spans several pages as a level of a million spans a thousand.

- the pages of a level hold what its whole listing holds, in key order, each name
  once (a file and the prefix of the same name, pages apart, are the file, and the
  prefix an unsafe name: never dropped unsaid);
- the walk asks for a page only once the entries before it are taken: with one
  worker, each page's objects are read before the next page is listed;
- a copy onto a destination that lists in pages too meets each source name with
  what the destination holds under it (the destination read a window at a time):
  an unchanged rerun copies nothing, a changed file and a new one are copied, a
  file where the source has a directory is replaced;
- a comparison (``rcmp``, ``--verify``) of a paged level finds what the whole
  listings' comparison finds, each name only the destination holds once.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.objectstores import Store
from rcp_core.backends.port import EntryKind, Listing, page_key
from rcp_core.engine import portpages
from rcp_core.engine.portcopy import copy_tree
from rcp_core.engine.posixport import PosixPort
from rcp_core.errors import CopyFailedError
from rcp_core.settings import CompareAttr, CopySettings, ExistingPolicy
from rcp_core.tools.remove.portremove import remove_ports
from rcp_core.tools.verify.compare import compare
from rcp_core.tools.verify.differences import Comparison, DiffKind
from rcp_provider.fsspec import s3stream, storelisting
from rcp_provider.fsspec.storetree import Place

PAGE = 3


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storelisting, "S3_PAGE", PAGE)


def _pages(place: Place, rel: str = "", follow: bool = True) -> Iterator[Listing]:
    after: object | None = None
    while True:
        page = place.page(rel, follow=follow, after=after)
        yield page.listing
        if page.after is None:
            return
        after = page.after


def _fill(fs: Any, top: str, keys: list[str]) -> None:
    for key in keys:
        fs.pipe_file(f"{top}/{key}", key.encode())


def test_the_pages_of_a_level_are_its_listing_in_key_order(
    s3: Store, small_pages: None
) -> None:
    fs, top = s3.fs(), s3.bucket()
    keys = [f"f{i:02d}" for i in range(10)] + ["d/x", "e/", "e/y", "z"]
    keys += ["../up", "n\0ul"]  # unsafe: reported, never entries
    _fill(fs, f"{top}/t", keys)
    fs.pipe_file(f"{top}/t/", b"")  # the level's own marker: not an entry
    place = Place(fs, f"{top}/t")
    pages = list(_pages(place))
    assert len(pages) == 6  # 16 keys and prefixes (the marker's too), 3 a page
    whole = place.list("", follow=True)
    assert {n for p in pages for n in p.entries} == set(whole.entries)
    assert {n for p in pages for n in p.unsafe} == set(whole.unsafe) == {"../", "n\0ul"}
    assert sum(len(p.entries) for p in pages) == len(whole.entries) == 13
    ordered = [
        sorted(page_key(n, e.is_dir) for n, e in p.entries.items()) for p in pages
    ]
    assert all(a[-1] < b[0] for a, b in itertools.pairwise(k for k in ordered if k))
    for page in pages:
        for name, entry in page.entries.items():
            assert entry == whole.entries[name], name


def test_a_file_keeps_its_name_from_a_prefix_listed_pages_later(
    s3: Store, small_pages: None
) -> None:
    """``a`` (an object) and ``a/`` (a prefix) are both keys on S3; ``a-0`` ...
    ``a-5`` sort between them, so they come pages apart: the name is the file's,
    as the whole listing gives it."""
    fs, top = s3.fs(), s3.bucket()
    _fill(fs, f"{top}/t", ["a", *(f"a-{i}" for i in range(6)), "a/inner"])
    place = Place(fs, f"{top}/t")
    pages = list(_pages(place))
    assert len(pages) == 3
    names = [n for p in pages for n in p.entries]
    assert sorted(names) == ["a", *(f"a-{i}" for i in range(6))]
    assert not pages[0].entries["a"].is_dir
    whole = place.list("", follow=True)
    assert whole.entries["a"] == pages[0].entries["a"]
    assert [n for p in pages for n in p.unsafe] == list(whole.unsafe) == ["a/"]


def test_an_empty_or_missing_level_is_one_page_as_its_listing_says(
    s3: Store, small_pages: None
) -> None:
    fs, top = s3.fs(), s3.bucket()
    fs.pipe_file(f"{top}/only-marker/", b"")
    assert place_entries(Place(fs, f"{top}/only-marker")) == {}
    assert place_entries(Place(fs, top)) == {"only-marker": True}
    with pytest.raises(FileNotFoundError):
        Place(fs, f"{top}/nothing").page("", follow=True, after=None)


def place_entries(place: Place) -> dict[str, bool]:
    return {n: e.is_dir for p in _pages(place) for n, e in p.entries.items()}


def test_with_one_worker_each_page_is_read_before_the_next_is_listed(
    s3: Store, small_pages: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fs, top = s3.fs(), s3.bucket()
    _fill(fs, f"{top}/t", [f"f{i}" for i in range(9)])
    said: list[str] = []
    listed, got = storelisting.s3_page, s3stream.get_object

    def listing(fs: Any, path: str, token: str | None) -> Any:
        said.append("list")
        return listed(fs, path, token)

    def getting(fs: Any, path: str) -> Any:
        said.append("get")
        return got(fs, path)

    monkeypatch.setattr(storelisting, "s3_page", listing)
    monkeypatch.setattr(s3stream, "get_object", getting)
    settings = CopySettings(max_workers=1)
    down = PosixPort(str(tmp_path / "down"))
    summary = copy_tree(Place(fs, f"{top}/t"), down, settings)
    assert summary["copied.files"] == 9
    assert said == ["list", "get", "get", "get"] * 3


def test_a_copy_meets_each_name_with_what_a_paged_destination_holds(
    s3: Store, small_pages: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs, top = s3.fs(), s3.bucket()
    names = [f"{c}{i}" for c, i in itertools.product("bdfh", range(4))]
    _fill(fs, f"{top}/src", [*names, "k/inner"])
    source, target = Place(fs, f"{top}/src"), Place(fs, f"{top}/dst")
    settings = CopySettings(existing=ExistingPolicy.OVERWRITE)
    first = copy_tree(source, target, settings)
    assert first["copied.files"] == len(names) + 1
    # names only the destination has, interleaved: they page the window along
    _fill(fs, f"{top}/dst", ["a0", "c9", "e/x", "g0", "z9"])
    windows: list[int] = []
    read = portpages.PagedScan._read_target

    def reading(scan: portpages.PagedScan, need: str) -> None:
        read(scan, need)
        windows.append(len(scan._window))

    monkeypatch.setattr(portpages.PagedScan, "_read_target", reading)
    again = copy_tree(source, target, settings)
    assert again["copied.files"] == 0
    assert again["unchanged.files"] == len(names) + 1
    # 22 entries on the destination, read a window of a few pages at a time
    assert len(windows) >= 6, windows
    assert max(windows) <= 3 * PAGE, windows
    fs.pipe_file(f"{top}/src/f2", b"changed, longer")
    fs.pipe_file(f"{top}/src/e", b"a file where the destination has a directory")
    fs.pipe_file(f"{top}/src/c9/y", b"a directory where it has a file")
    third = copy_tree(source, target, settings)
    assert third["copied.files"] == 3, third
    assert fs.cat_file(f"{top}/dst/f2") == b"changed, longer"
    assert (
        fs.cat_file(f"{top}/dst/e") == b"a file where the destination has a directory"
    )
    assert fs.cat_file(f"{top}/dst/c9/y") == b"a directory where it has a file"


def test_a_symlink_listed_pages_after_its_name_meets_its_destination(
    s3: Store, small_pages: None
) -> None:
    """A link object ``l.rclonelink`` sorts after ``l-0`` ... ``l-5`` (pages after
    where the name ``l`` would): the window still meets it with the destination's
    link, so an S3 -> S3 rerun leaves it unchanged."""
    fs, top = s3.fs(), s3.bucket()
    _fill(fs, f"{top}/src", [*(f"l-{i}" for i in range(6)), "m"])
    fs.pipe_file(f"{top}/src/l.rclonelink", b"l-0")
    source, target = Place(fs, f"{top}/src"), Place(fs, f"{top}/dst")
    assert [n for p in _pages(source) for n in p.entries if n == "l"] == []  # follow
    linked = [p.entries["l"] for p in _pages(source, follow=False) if "l" in p.entries]
    assert [e.kind for e in linked] == [EntryKind.SYMLINK]
    settings = CopySettings(existing=ExistingPolicy.OVERWRITE)
    first = copy_tree(source, target, settings)
    assert (first["copied.files"], first["copied.symlinks"]) == (7, 1)
    assert fs.cat_file(f"{top}/dst/l.rclonelink") == b"l-0"
    again = copy_tree(source, target, settings)
    assert (again["unchanged.files"], again["unchanged.symlinks"]) == (7, 1), again
    assert again["copied.symlinks"] == again["copied.files"] == 0


def test_rrm_removes_a_level_a_page_at_a_time_and_misses_nothing(
    s3: Store, small_pages: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys removed while the level is still paged (by the continuation token of
    a listing whose earlier keys are gone) are each listed once: all go, and no
    listing of the level is ever asked whole."""
    fs, top = s3.fs(), s3.bucket()
    names = [f"k{i:02d}" for i in range(20)]
    _fill(fs, f"{top}/t", [*names, "d/x", "d/y"])
    fs.pipe_file(f"{top}/t/", b"")  # the level's marker
    pages: list[int] = []
    listing = storelisting.s3_page

    def paging(fs_: Any, path: str, token: str | None) -> Any:
        found = listing(fs_, path, token)
        pages.append(len(found[0]))
        return found

    monkeypatch.setattr(storelisting, "s3_page", paging)
    monkeypatch.setattr(Place, "list", lambda *a, **k: pytest.fail("listed whole"))
    summary = remove_ports([Place(fs, f"{top}/t")])
    assert summary["removed.files"] == len(names) + 2
    assert max(pages) <= PAGE
    fs.invalidate_cache()
    assert fs.find(f"{top}/t", withdirs=True) == []


def test_a_page_that_cannot_be_listed_is_the_directory_s_error(
    s3: Store, small_pages: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The store refuses the second page (injected: moto serves every page): the
    first page's files are copied, the directory is reported, nothing stops."""
    fs, top = s3.fs(), s3.bucket()
    _fill(fs, f"{top}/t", [f"f{i}" for i in range(9)])
    listed = storelisting.s3_page

    def refusing(fs: Any, path: str, token: str | None) -> Any:
        if token is not None:
            raise PermissionError(13, "AccessDenied")
        return listed(fs, path, token)

    monkeypatch.setattr(storelisting, "s3_page", refusing)
    down = tmp_path / "down"
    with pytest.raises(CopyFailedError) as caught:
        copy_tree(Place(fs, f"{top}/t"), PosixPort(str(down)))
    assert sorted(p.name for p in down.iterdir()) == ["f0", "f1", "f2"]
    summary = caught.value.summary
    assert (summary["copied.files"], summary["errors"]) == (3, 1)
    assert [op for op, _, _ in caught.value.errors] == [
        "read directory: AccessDenied"
    ], caught.value.errors


SAME_KEYS = [f"{c}{i}" for c, i in itertools.product("bdfh", range(4))]
"""Keys both sides hold, the same bytes."""
ONLY_THERE = ["a0", "c9", "e/x", "g0", "g1/deep/k", "z9", "zz/y"]
"""Keys only the destination holds: before, between and after the source's."""


def _differing_trees(fs: Any, top: str) -> None:
    _fill(fs, f"{top}/src", [*SAME_KEYS, "k/inner", "k/gone", "m1", "n/only"])
    _fill(fs, f"{top}/dst", [*SAME_KEYS, "k/inner", *ONLY_THERE])
    fs.pipe_file(f"{top}/dst/f2", b"other bytes, longer")
    fs.pipe_file(f"{top}/dst/h1", b"hX")  # same size, other bytes
    fs.pipe_file(f"{top}/dst/m1/x", b"a directory where the source has a file")


def _found(result: Comparison) -> set[tuple[str, DiffKind]]:
    return {(d.path, d.kind) for d in result.differences}


def test_rcmp_of_a_paged_level_finds_what_a_whole_listing_finds(
    s3: Store, small_pages: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """S3 -> S3 (the destination read a window at a time) and S3 -> local (listed
    whole) find every difference the local trees' comparison finds: names only the
    destination holds before, between and after the source's pages, each once;
    no level of a store is listed whole, and the window stays a few pages."""
    fs, top = s3.fs(), s3.bucket()
    _differing_trees(fs, top)
    src, dst = tmp_path / "src", tmp_path / "dst"
    fs.get(f"{top}/src", str(src), recursive=True)
    fs.get(f"{top}/dst", str(dst), recursive=True)
    size_only = frozenset({CompareAttr.SIZE})
    expected = compare(src, dst, checksum=True, attrs=size_only)
    assert {p for p, _ in _found(expected)} >= {"a0", "zz", "f2", "h1", "m1"}
    monkeypatch.setattr(Place, "list", lambda *a, **k: pytest.fail("listed whole"))
    windows: list[int] = []
    read = portpages.PagedScan._read_target

    def reading(scan: portpages.PagedScan, need: str | None) -> None:
        read(scan, need)
        windows.append(len(scan._window))

    monkeypatch.setattr(portpages.PagedScan, "_read_target", reading)
    source = Place(fs, f"{top}/src")
    both = compare(source, Place(fs, f"{top}/dst"), checksum=True, attrs=size_only)
    assert _found(both) == _found(expected)
    assert both.counts == expected.counts
    assert both.entries == expected.entries
    assert max(windows) <= 3 * PAGE, windows
    down = compare(source, PosixPort(str(dst)), checksum=True, attrs=size_only)
    assert _found(down) == _found(expected)
    assert down.counts == expected.counts
