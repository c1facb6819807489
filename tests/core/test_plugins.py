"""Site tuning hooks: ordering, firstresult, validation, entry points, per-file hooks.

Every test runs real copies (or builds a real :class:`~rcp_core.engine.copyrun.Engine`) with
plugin objects registered through ``plugins=``; storage is forced through a tiny
``rcp_detect_storage`` plugin where the test needs a kind of storage this machine does
not have (Lustre, a spinning disk). The example site plugin in
``examples/rcp_site_example`` is exercised with a fake ``lfs`` script, and installed
through a real entry point (a ``*.dist-info`` directory on ``sys.path``).

Installed site plugins would change the answers these tests check, so an autouse
fixture sets ``RCP_DISABLE_PLUGINS``; the entry-point tests clear it.
"""

from __future__ import annotations

import errno
import importlib
import logging
import os
import subprocess
import sys
import threading
import tomllib
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy
import pytest

import rcp_core
from rcp_core import CopyFailedError, CopySettings, ExistingPolicy, hookimpl
from rcp_core.engine.copyrun import Engine
from rcp_core.errors import PluginError
from rcp_core.paths import plan_jobs
from rcp_core.run.progress import Progress
from rcp_core.run.runtime import Kind
from rcp_core.run.summary import Summary
from rcp_core.run.tuning import Concurrency
from rcp_core.settings import DryRun
from rcp_core.site.builtin import SHARED_CHUNK, BuiltinPlugin
from rcp_core.site.plugins import (
    BUILTIN,
    DISABLE_ENV,
    may_declare,
    plugin_manager,
    site_implemented,
)
from rcp_core.site.storage import StorageInfo
from support.treecmp import TreeCompare
from support.treespec import Dir, make_tree

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_DIR = REPO / "examples" / "rcp_site_example"
CPUS = len(os.sched_getaffinity(0))
KIB = 1024
MIB = 1024 * KIB

SSD = StorageInfo("ext4", 0xEF53, rotational=False)
HDD = StorageInfo("ext4", 0xEF53, rotational=True)
LUSTRE = StorageInfo("lustre", 0x0BD00BD0)
NFS = StorageInfo("nfs", 0x6969)
BUILTIN_LOCAL = Concurrency(1, 1, 8 * CPUS, processes=CPUS, aside=CPUS)
BUILTIN_SHARED = Concurrency(32, 1, 128, chunk_size=SHARED_CHUNK)
SETTINGS = CopySettings(max_open_files=4096)  # a budget that bounds nothing here


@pytest.fixture(autouse=True)
def no_installed_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISABLE_ENV, "1")


# -- small plugins ---------------------------------------------------------------------


class ForceStorage:
    """Answers ``rcp_detect_storage``: ``by_path`` for those paths, else ``default``."""

    def __init__(
        self,
        default: StorageInfo | None,
        by_path: dict[str, StorageInfo] | None = None,
    ) -> None:
        self.default = default
        self.by_path = by_path or {}
        self.calls: list[tuple[str, str]] = []

    @hookimpl
    def rcp_detect_storage(self, path: str, fd: int) -> StorageInfo | None:
        # The descriptor is an open handle of the directory named by ``path``.
        assert os.path.samestat(os.fstat(fd), os.stat(path))
        self.calls.append((path, threading.current_thread().name))
        return self.by_path.get(path, self.default)


class FixedConcurrency:
    """Answers ``rcp_choose_concurrency`` with ``answer`` and records its arguments."""

    def __init__(self, answer: Concurrency | None) -> None:
        self.answer = answer
        self.calls: list[tuple[StorageInfo, StorageInfo, int, str]] = []

    @hookimpl
    def rcp_choose_concurrency(
        self, source: StorageInfo, destination: StorageInfo, cpus: int
    ) -> Concurrency | None:
        thread = threading.current_thread().name
        self.calls.append((source, destination, cpus, thread))
        return self.answer


class FirstConcurrency(FixedConcurrency):
    """Like :class:`FixedConcurrency`, but asks to be called before other plugins."""

    @hookimpl(tryfirst=True)
    def rcp_choose_concurrency(
        self, source: StorageInfo, destination: StorageInfo, cpus: int
    ) -> Concurrency | None:
        return super().rcp_choose_concurrency(source, destination, cpus)


class ChooseMethod:
    """Answers ``rcp_choose_method`` with ``method``; records (path, size, thread)."""

    def __init__(self, method: str | None) -> None:
        self.method = method
        self.calls: list[tuple[str, int, str]] = []
        self.lock = threading.Lock()

    @hookimpl
    def rcp_choose_method(
        self, path: str, size: int, source: StorageInfo, destination: StorageInfo
    ) -> str | None:
        with self.lock:
            self.calls.append((path, size, threading.current_thread().name))
        return self.method


PreCreateAction = Callable[[int, str], bool | None]


class PreCreate:
    """``rcp_pre_create`` running ``action(dir_fd, name)``; records (name, size)."""

    def __init__(self, action: PreCreateAction) -> None:
        self.action = action
        self.calls: list[tuple[str, int, str]] = []
        self.lock = threading.Lock()

    @hookimpl
    def rcp_pre_create(
        self, dir_fd: int, name: str, size: int, destination: StorageInfo
    ) -> bool | None:
        with self.lock:
            self.calls.append((name, size, threading.current_thread().name))
        return self.action(dir_fd, name)

    def names(self) -> list[str]:
        return [name for name, _, _ in self.calls]


def create_empty(dir_fd: int, name: str) -> bool:
    """What a striping tool does: make the file, empty, and say so."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    os.close(os.open(name, flags, 0o600, dir_fd=dir_fd))
    return True


def create_with_junk(dir_fd: int, name: str) -> bool:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
    try:
        os.write(fd, b"not yours")
    finally:
        os.close(fd)
    return True


class Classify:
    """``rcp_classify_error``: ``kind`` for ``errnum``, the built-in table otherwise."""

    def __init__(self, errnum: int, kind: Kind) -> None:
        self.errnum = errnum
        self.kind = kind
        self.seen: list[tuple[int | None, str]] = []
        self.lock = threading.Lock()

    @hookimpl
    def rcp_classify_error(
        self,
        error: OSError,
        source: StorageInfo | None,
        destination: StorageInfo | None,
    ) -> Kind | None:
        with self.lock:
            self.seen.append((error.errno, threading.current_thread().name))
        return self.kind if error.errno == self.errnum else None


@dataclass
class Observe:
    """Records what ``rcp_progress`` and ``rcp_run_finished`` receive, and where."""

    progress: list[tuple[Progress, str]] = field(default_factory=list)
    finished: list[tuple[Summary | None, BaseException | None, str]] = field(
        default_factory=list
    )

    @hookimpl
    def rcp_progress(self, progress: Progress) -> None:
        self.progress.append((progress, threading.current_thread().name))

    @hookimpl
    def rcp_run_finished(
        self, summary: Summary | None, error: BaseException | None
    ) -> None:
        self.finished.append((summary, error, threading.current_thread().name))


@dataclass
class FileCopied:
    """Records what ``rcp_file_copied`` receives, and in which thread."""

    calls: list[tuple[str, str, int, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @hookimpl
    def rcp_file_copied(self, source: str, destination: str, size: int) -> None:
        with self.lock:
            thread = threading.current_thread().name
            self.calls.append((source, destination, size, thread))

    def paths(self) -> dict[tuple[str, str], int]:
        """``(source, destination)`` to size, checking each file was reported once."""
        seen = {(src, dst): size for src, dst, size, _ in self.calls}
        assert len(seen) == len(self.calls)
        return seen


def engine(src: Path, dst: Path, plugins: list[Any], settings: CopySettings) -> Engine:
    """An engine for ``src -> dst`` (built, not run) with only ``plugins`` as sites."""
    jobs = plan_jobs([str(src), str(dst)], settings)
    return Engine(jobs, settings, plugins=plugin_manager(plugins, entry_points=False))


def files_tree(root: Path, n: int = 6) -> dict[str, bytes]:
    """``n`` files of distinct sizes over two directories; returns the spec."""
    spec = {
        f"{'sub/' if i % 2 else ''}f{i}": bytes([65 + i]) * (1000 * i + 1)
        for i in range(n)
    }
    make_tree(root, spec)
    return spec


# -- ordering and firstresult --------------------------------------------------------


def test_site_concurrency_beats_the_builtin(tmp_path: Path) -> None:
    """A site's ``rcp_choose_concurrency`` answer is the engine's; the pool follows it."""
    (tmp_path / "src").mkdir()
    site = FixedConcurrency(Concurrency(3, 2, 5))
    eng = engine(
        tmp_path / "src", tmp_path / "dst", [ForceStorage(SSD), site], SETTINGS
    )
    assert eng.concurrency == Concurrency(3, 2, 5)
    assert (eng.pool.threads, eng.pool.limit) == (5, 3)
    builtin = engine(tmp_path / "src", tmp_path / "dst", [ForceStorage(SSD)], SETTINGS)
    assert builtin.concurrency == BUILTIN_LOCAL


def test_plugin_returning_none_falls_through_to_the_builtin(tmp_path: Path) -> None:
    """``None`` is no answer: the site was asked, and the built-in table decided."""
    (tmp_path / "src").mkdir()
    site = FixedConcurrency(None)
    eng = engine(
        tmp_path / "src", tmp_path / "dst", [ForceStorage(SSD), site], SETTINGS
    )
    assert len(site.calls) == 1
    assert eng.concurrency == BUILTIN_LOCAL
    shared = ForceStorage(NFS)
    eng = engine(tmp_path / "src", tmp_path / "dst", [shared, site], SETTINGS)
    assert eng.concurrency == BUILTIN_SHARED


def test_later_plugins_answer_first_unless_one_asks_tryfirst(tmp_path: Path) -> None:
    """pluggy order: the last registered site plugin wins; ``tryfirst`` overrides that."""
    (tmp_path / "src").mkdir()
    src, dst = tmp_path / "src", tmp_path / "dst"
    early, late = FixedConcurrency(Concurrency(2)), FixedConcurrency(Concurrency(7))
    eng = engine(src, dst, [ForceStorage(SSD), early, late], SETTINGS)
    assert eng.concurrency.initial == 7
    assert early.calls == []  # firstresult: nobody after the first answer is asked
    first = FirstConcurrency(Concurrency(2))
    eng = engine(src, dst, [ForceStorage(SSD), first, late], SETTINGS)
    assert eng.concurrency.initial == 2


def test_detected_storage_is_what_choose_concurrency_receives(tmp_path: Path) -> None:
    """``rcp_detect_storage`` answers (per root) reach ``rcp_choose_concurrency``.

    The hook is asked for the source tree itself and for the destination's parent (the
    destination does not exist yet), with a descriptor of each, in the thread that calls
    ``copy``; so is the concurrency hook, with this process's CPU count.
    """
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "src").mkdir()
    (tmp_path / "out").mkdir()
    detect = ForceStorage(SSD, {str(tmp_path / "in" / "src"): LUSTRE})
    seen = FixedConcurrency(None)
    eng = engine(
        tmp_path / "in" / "src", tmp_path / "out" / "dst", [detect, seen], SETTINGS
    )
    here = threading.current_thread().name
    assert sorted(detect.calls) == [
        (str(tmp_path / "in" / "src"), here),
        (str(tmp_path / "out"), here),
    ]
    assert seen.calls == [(LUSTRE, SSD, CPUS, here)]
    assert eng.concurrency == BUILTIN_SHARED


def test_the_most_demanding_pair_sets_the_concurrency(tmp_path: Path) -> None:
    """With several sources, the pair whose answer starts the most workers wins."""
    for parent in ("local", "remote"):
        (tmp_path / parent / parent).mkdir(parents=True)
    (tmp_path / "dst").mkdir()
    detect = ForceStorage(HDD, {str(tmp_path / "remote" / "remote"): NFS})
    settings = CopySettings(max_open_files=4096)
    jobs = plan_jobs(
        [
            str(tmp_path / "local" / "local"),
            str(tmp_path / "remote" / "remote"),
            f"{tmp_path / 'dst'}/",
        ],
        settings,
    )
    eng = Engine(jobs, settings, plugins=plugin_manager([detect], entry_points=False))
    assert eng.concurrency == BUILTIN_SHARED  # NFS's 16 beats the disk's 2


def test_max_workers_fixes_the_site_choice(tmp_path: Path) -> None:
    """``max_workers`` (``--max-workers``) pins the count and turns adaptation off.

    The site's chunk size stays.
    """
    (tmp_path / "src").mkdir()
    site = FixedConcurrency(Concurrency(3, 1, 64, chunk_size=8 * MIB))
    settings = CopySettings(max_workers=2, max_open_files=4096)
    eng = engine(
        tmp_path / "src", tmp_path / "dst", [ForceStorage(SSD), site], settings
    )
    assert eng.concurrency == Concurrency(2, 2, 2, adaptive=False, chunk_size=8 * MIB)
    assert eng.pool.threads == 2


def test_site_concurrency_decides_the_workers_of_a_copy(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """One fixed worker chosen by a site: every file is copied by that one thread."""
    files_tree(tmp_path / "src", 12)
    method = ChooseMethod(None)  # only to see which threads copy files
    site = FixedConcurrency(Concurrency.fixed(1))
    summary = rcp_core.copy(tmp_path / "src", tmp_path / "dst", plugins=[site, method])
    assert summary["copied.files"] == 12
    assert {thread for _, _, thread in method.calls} == {"rcp-worker-0"}
    assert tree_compare(tmp_path / "src", tmp_path / "dst") == []


# -- validation ------------------------------------------------------------------------


class Misspelled:
    @hookimpl
    def rcp_choose_concurency(
        self, source: StorageInfo, destination: StorageInfo, cpus: int
    ) -> Concurrency | None:
        return Concurrency.fixed(1)


class WrongArgument:
    @hookimpl
    def rcp_choose_concurrency(
        self, source: StorageInfo, destination: StorageInfo, cores: int
    ) -> Concurrency | None:
        return Concurrency.fixed(1)


def test_a_misspelled_hook_fails_at_once(tmp_path: Path) -> None:
    """``check_pending``: a hookimpl no spec knows is an error before anything is copied."""
    with pytest.raises(pluggy.PluginValidationError, match="rcp_choose_concurency"):
        plugin_manager([Misspelled()], entry_points=False)
    (tmp_path / "src").mkdir()
    with pytest.raises(pluggy.PluginValidationError):
        rcp_core.copy(tmp_path / "src", tmp_path / "dst", plugins=[Misspelled()])
    assert not (tmp_path / "dst").exists()


def test_a_hook_with_an_unknown_argument_is_refused() -> None:
    """An implementation asking for an argument the spec does not have is refused."""
    with pytest.raises(pluggy.PluginValidationError, match="cores"):
        plugin_manager([WrongArgument()], entry_points=False)


# -- entry points ----------------------------------------------------------------------


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The example site plugin's module, importable from its source directory."""
    monkeypatch.syspath_prepend(str(EXAMPLE_DIR))
    return importlib.import_module("rcp_site_example")


@pytest.fixture
def installed_example(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, example: ModuleType
) -> Iterator[ModuleType]:
    """The example installed as a distribution with an ``rcp`` entry point.

    What ``pip install ./examples/rcp_site_example`` leaves in site-packages, minus the
    copy of the module: a ``*.dist-info`` with METADATA and entry_points.txt. The
    entry point is read from the example's own pyproject.toml.
    """
    with (EXAMPLE_DIR / "pyproject.toml").open("rb") as f:
        entries = tomllib.load(f)["project"]["entry-points"]["rcp"]
    site = tmp_path / "site-packages"
    info = site / "rcp_site_example-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: rcp-site-example\nVersion: 0.1.0\n"
    )
    lines = "".join(f"{name} = {value}\n" for name, value in entries.items())
    (info / "entry_points.txt").write_text(f"[rcp]\n{lines}")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    return example


def test_an_installed_site_plugin_is_registered(installed_example: ModuleType) -> None:
    """``plugin_manager()`` loads the ``rcp`` entry point: the example's instance, live."""
    pm = plugin_manager()
    names = dict(pm.list_name_plugin())
    assert names["example"] is installed_example.plugin
    assert isinstance(names["example"], installed_example.SitePlugin)
    assert BUILTIN in names
    assert site_implemented(pm.hook.rcp_pre_create)
    assert site_implemented(pm.hook.rcp_choose_concurrency)
    hdd = pm.hook.rcp_choose_concurrency(source=HDD, destination=SSD, cpus=CPUS)
    assert hdd == Concurrency(1, 1, 4)


@pytest.mark.parametrize(
    ("value", "loaded"), [("1", False), ("yes", False), ("", True)]
)
def test_rcp_disable_plugins_skips_entry_points(
    installed_example: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    loaded: bool,
) -> None:
    """Any non-empty ``RCP_DISABLE_PLUGINS`` skips installed plugins, not explicit ones."""
    monkeypatch.setenv(DISABLE_ENV, value)
    explicit = FixedConcurrency(None)
    pm = plugin_manager([explicit])
    names = dict(pm.list_name_plugin())
    assert ("example" in names) is loaded
    assert explicit in names.values()
    assert site_implemented(pm.hook.rcp_pre_create) is loaded


def test_entry_points_false_skips_installed_plugins(
    installed_example: ModuleType,
) -> None:
    """``plugin_manager(entry_points=False)``: the built-in plugin only."""
    pm = plugin_manager(entry_points=False)
    assert [name for name, _ in pm.list_name_plugin()] == [BUILTIN]


def test_may_declare_reads_each_distributions_entry_point_sections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site-packages"
    other = site / "other-1.0.dist-info"
    other.mkdir(parents=True)
    (other / "entry_points.txt").write_text(
        "[console_scripts]\nrcp = other:main\n\n[rcp_extra]\nx = other.x\n"
    )
    monkeypatch.setattr(sys, "path", [str(site), str(tmp_path / "missing"), ""])
    monkeypatch.chdir(tmp_path)
    assert not may_declare("rcp")
    assert may_declare("rcp_extra")
    egg = tmp_path / "legacy-1.0.egg"
    (egg / "EGG-INFO").mkdir(parents=True)
    (egg / "EGG-INFO" / "entry_points.txt").write_text("[rcp]\nsite = legacy\n")
    monkeypatch.setattr(sys, "path", [str(site), str(egg)])
    assert may_declare("rcp")


def test_may_declare_says_yes_where_it_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A zip on ``sys.path`` or a finder of its own distributions: the full lookup
    decides, so no installed plugin is ever missed."""
    archive = tmp_path / "plugins.zip"
    zipfile.ZipFile(archive, "w").close()
    monkeypatch.setattr(sys, "path", [str(archive)])
    assert may_declare("rcp")

    class Finder:
        def find_distributions(self, context: object = None) -> Iterator[object]:
            return iter(())

    monkeypatch.setattr(sys, "path", [])
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder()])
    assert may_declare("rcp")


def test_without_site_plugins_importlib_metadata_is_not_imported() -> None:
    """Its import is most of a small copy's start-up; no declared plugin, no import."""
    probe = (
        "import sys; from rcp_core.site.plugins import plugin_manager; plugin_manager(); "
        "print('importlib.metadata' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != DISABLE_ENV}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == "False\n"


# -- per-file hooks --------------------------------------------------------------------


def test_per_file_hooks_are_off_unless_a_site_implements_them(tmp_path: Path) -> None:
    """Only the built-in plugin: no per-file hook is called; each site hook turns one on."""
    pm = plugin_manager(entry_points=False)
    for hook in (
        pm.hook.rcp_choose_method,
        pm.hook.rcp_pre_create,
        pm.hook.rcp_file_copied,
        pm.hook.rcp_progress,
        pm.hook.rcp_classify_error,
        pm.hook.rcp_choose_concurrency,
    ):
        assert not site_implemented(hook)
    pm = plugin_manager([ChooseMethod(None)], entry_points=False)
    assert site_implemented(pm.hook.rcp_choose_method)
    assert not site_implemented(pm.hook.rcp_pre_create)
    (tmp_path / "src").mkdir()
    plain = engine(tmp_path / "src", tmp_path / "dst", [], SETTINGS)
    ctx = plain.ctx
    assert (ctx.choose_method, ctx.pre_create, ctx.file_copied) == (False,) * 3
    both = engine(
        tmp_path / "src",
        tmp_path / "dst",
        [ChooseMethod(None), PreCreate(lambda fd, name: None)],
        SETTINGS,
    )
    ctx = both.ctx
    assert (ctx.choose_method, ctx.pre_create, ctx.file_copied) == (True, True, False)
    observed = engine(tmp_path / "src", tmp_path / "dst", [FileCopied()], SETTINGS)
    ctx = observed.ctx
    assert (ctx.choose_method, ctx.pre_create, ctx.file_copied) == (False, False, True)


def test_choose_method_readwrite_is_used_for_every_file(
    ext4_tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """A site's ``readwrite`` replaces ext4's ``copy_file_range`` for every file.

    The hook sees each file once, by its path under the source root's name, with its
    size, in a worker thread.
    """
    spec = files_tree(ext4_tmp_path / "src")
    n = len(spec)
    plain = rcp_core.copy(ext4_tmp_path / "src", ext4_tmp_path / "plain")
    assert plain["method.copy_file_range"] == n
    site = ChooseMethod("readwrite")
    summary = rcp_core.copy(
        ext4_tmp_path / "src", ext4_tmp_path / "dst", plugins=[site]
    )
    assert summary["method.readwrite"] == n
    assert summary["method.copy_file_range"] == summary["method.reflink"] == 0
    assert sorted((p, s) for p, s, _ in site.calls) == sorted(
        (f"src/{rel}", len(data)) for rel, data in spec.items()
    )
    assert all(t.startswith("rcp-worker-") for _, _, t in site.calls)
    assert tree_compare(ext4_tmp_path / "src", ext4_tmp_path / "dst") == []


@pytest.mark.parametrize("method", ["reflink", "copy_file_range", "readwrite"])
def test_choose_method_start_points_on_xfs(
    xfs_tmp_path: Path, tree_compare: TreeCompare, method: str
) -> None:
    """On XFS with reflink the chain starts where the site says (``reflink``: all of it)."""
    spec = files_tree(xfs_tmp_path / "src")
    summary = rcp_core.copy(
        xfs_tmp_path / "src", xfs_tmp_path / "dst", plugins=[ChooseMethod(method)]
    )
    assert summary[f"method.{method}"] == len(spec)
    assert tree_compare(xfs_tmp_path / "src", xfs_tmp_path / "dst") == []


def test_pre_create_that_creates_the_file(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """A hook that creates each file (empty) and says so: the copy is still exact.

    It sees every new file with its size; a replacement is pre-created under its
    temporary name, and no temporary name is left behind.
    """
    spec = files_tree(tmp_path / "src")
    site = PreCreate(create_empty)
    summary = rcp_core.copy(tmp_path / "src", tmp_path / "dst", plugins=[site])
    assert summary["copied.files"] == len(spec)
    assert sorted((n, s) for n, s, _ in site.calls) == sorted(
        (rel.rsplit("/", 1)[-1], len(data)) for rel, data in spec.items()
    )
    assert tree_compare(tmp_path / "src", tmp_path / "dst") == []

    (tmp_path / "src" / "f0").write_bytes(b"changed, and longer than before")
    site = PreCreate(create_empty)
    settings = CopySettings(existing=ExistingPolicy.OVERWRITE)
    summary = rcp_core.copy(
        tmp_path / "src", tmp_path / "dst", settings, plugins=[site]
    )
    assert summary["copied.files"] == 1
    [(name, size, _)] = site.calls
    assert name.startswith(".rcp-")
    assert name.endswith(".f0")
    assert size == len(b"changed, and longer than before")
    assert tree_compare(tmp_path / "src", tmp_path / "dst") == []
    assert not list((tmp_path / "dst").rglob(".rcp-*"))


def pre_create_failure(
    tmp_path: Path, action: PreCreateAction
) -> tuple[CopyFailedError, Path]:
    """Copy ``ok`` and ``victim`` with ``action`` run for ``victim`` only."""
    make_tree(tmp_path / "src", {"ok": b"fine", "victim": b"source data"})

    def only_victim(dir_fd: int, name: str) -> bool | None:
        return action(dir_fd, name) if name == "victim" else None

    with pytest.raises(CopyFailedError) as info:
        rcp_core.copy(
            tmp_path / "src", tmp_path / "dst", plugins=[PreCreate(only_victim)]
        )
    assert (tmp_path / "dst" / "ok").read_bytes() == b"fine"
    return info.value, tmp_path / "dst" / "victim"


def test_pre_create_leaving_data_fails_that_entry(tmp_path: Path) -> None:
    """A pre-created file that is not empty is never written into: the entry fails.

    What the hook made is removed with the failed entry; the rest is copied.
    """
    err, victim = pre_create_failure(tmp_path, create_with_junk)
    assert err.summary["errors"] == 1
    assert err.summary["copied.files"] == 1
    assert [key for key, _, _ in err.errors] == [
        "copy: pre-created entry is not an empty file"
    ]
    assert not victim.exists()


def test_pre_create_claiming_a_file_it_did_not_make_fails(tmp_path: Path) -> None:
    """``True`` without a file: the engine opens, never creates, so the entry fails."""
    err, victim = pre_create_failure(tmp_path, lambda dir_fd, name: True)
    assert err.summary["errors"] == 1
    assert [key for key, _, _ in err.errors] == ["copy: No such file or directory"]
    assert not victim.exists()


def test_pre_create_symlink_is_not_followed(tmp_path: Path) -> None:
    """A pre-created symlink is refused: the file it points at keeps its data."""
    outside = tmp_path / "outside"
    outside.write_bytes(b"precious")

    def link(dir_fd: int, name: str) -> bool:
        os.symlink(outside, name, dir_fd=dir_fd)
        return True

    err, victim = pre_create_failure(tmp_path, link)
    assert err.summary["errors"] == 1
    assert outside.read_bytes() == b"precious"
    assert not victim.is_symlink()


# -- error classification --------------------------------------------------------------


def chattr(flag: str, path: Path) -> None:
    subprocess.run(["chattr", flag, str(path)], check=True, capture_output=True)


@pytest.fixture
def locked(ext4_tmp_path: Path) -> Iterator[Path]:
    """An immutable ``dst/locked`` on ext4: every create in it fails with EPERM."""
    make_tree(ext4_tmp_path / "dst", {"locked": Dir()})
    chattr("+i", ext4_tmp_path / "dst" / "locked")
    yield ext4_tmp_path
    chattr("-i", ext4_tmp_path / "dst" / "locked")


def test_classify_error_fatal_stops_the_run(locked: Path) -> None:
    """EPERM is permanent by default (all four counted); a site making it FATAL stops."""
    make_tree(locked / "src", {f"locked/f{i}": b"x" for i in range(4)})
    settings = CopySettings(existing=ExistingPolicy.OVERWRITE, max_workers=1)
    with pytest.raises(CopyFailedError) as info:
        rcp_core.copy(locked / "src", locked / "dst", settings)
    assert not info.value.stopped
    assert info.value.summary["errors"] == 5  # four files and the directory's metadata
    site = Classify(errno.EPERM, Kind.FATAL)
    with pytest.raises(CopyFailedError) as info:
        rcp_core.copy(locked / "src", locked / "dst", settings, plugins=[site])
    assert info.value.stopped
    assert info.value.summary["errors"] == 1
    assert {n for n, _ in site.seen} == {errno.EPERM}
    assert all(t.startswith("rcp-worker-") for _, t in site.seen)


@pytest.mark.parametrize("retries", [0, 2])
def test_classify_error_transient_is_retried(locked: Path, retries: int) -> None:
    """EPERM classified TRANSIENT is tried ``retries + 1`` times, then fails the entry."""
    make_tree(locked / "src", {"locked/f0": b"x"})
    attempts = PreCreate(lambda dir_fd, name: None)  # called once per attempt
    site = Classify(errno.EPERM, Kind.TRANSIENT)
    settings = CopySettings(
        existing=ExistingPolicy.OVERWRITE,
        max_workers=1,
        retries=retries,
        retry_delay=0.001,
    )
    with pytest.raises(CopyFailedError) as info:
        rcp_core.copy(
            locked / "src", locked / "dst", settings, plugins=[attempts, site]
        )
    assert attempts.names() == ["f0"] * (retries + 1)
    assert len(site.seen) >= retries + 1
    assert not info.value.stopped
    assert {k: c for k, c, _ in info.value.errors}["copy: Operation not permitted"] == 1


# -- observers -------------------------------------------------------------------------


def test_progress_and_run_finished_on_success(tmp_path: Path) -> None:
    """Progress ends with a final snapshot matching the summary; the run hook gets it.

    Snapshots during the run come from the monitor thread; the final one and
    ``rcp_run_finished`` from the thread that ran the copy.
    """
    spec = files_tree(tmp_path / "src", 10)
    seen = Observe()
    summary = rcp_core.copy(
        tmp_path / "src", tmp_path / "dst", plugins=[seen], progress_interval=0.01
    )
    here = threading.current_thread().name
    *during, (final, final_thread) = seen.progress
    assert final.final
    assert final_thread == here
    assert not any(p.final for p, _ in during)
    assert {t for _, t in during} <= {"rcp-monitor"}
    assert final.counts["copied.files"] == len(spec) == summary["copied.files"]
    assert final.counts["copied.bytes"] == summary["copied.bytes"]
    assert seen.finished == [(summary, None, here)]


def test_run_finished_sees_the_failure(tmp_path: Path) -> None:
    """On errors, ``rcp_run_finished`` gets the partial summary and the raised error."""
    seen = Observe()
    make_tree(tmp_path / "src", {"ok": b"fine", "victim": b"source data"})
    junk = PreCreate(
        lambda fd, name: create_with_junk(fd, name) if name == "victim" else None
    )
    with pytest.raises(CopyFailedError) as info:
        rcp_core.copy(tmp_path / "src", tmp_path / "dst", plugins=[seen, junk])
    [(summary, error, _)] = seen.finished
    assert error is info.value
    assert summary is info.value.summary
    assert summary is not None
    assert summary["errors"] == 1
    assert seen.progress[-1][0].final


def test_file_copied_once_per_written_file(tmp_path: Path) -> None:
    """Full paths and sizes of every file whose data was written, from the workers;
    one call for two names of one inode (the other is linked), none for a symlink."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    spec = files_tree(src)
    (src / "link").symlink_to("f0")
    os.link(src / "f0", src / "sub" / "f0-again")
    seen = FileCopied()
    summary = rcp_core.copy(src, dst, SETTINGS, plugins=[seen])
    plain = {(str(src / r), str(dst / r)): len(d) for r, d in spec.items() if r != "f0"}
    reported = seen.paths()
    [linked] = reported.keys() - plain.keys()
    assert linked in {(str(src / r), str(dst / r)) for r in ("f0", "sub/f0-again")}
    assert reported == {**plain, linked: len(spec["f0"])}
    assert summary["copied.files"] == len(reported)
    assert summary["copied.hardlinks"] == 1
    assert all(thread.startswith("rcp-worker-") for *_, thread in seen.calls)


def test_file_copied_names_a_renamed_root_and_skips_unwritten_files(
    tmp_path: Path,
) -> None:
    """A single-file job reports its own operand and destination name; files found up
    to date and dry runs report nothing; a changed file alone is reported again."""
    src = tmp_path / "src"
    spec = files_tree(src)
    seen = FileCopied()
    rcp_core.copy(src / "f2", tmp_path / "renamed", SETTINGS, plugins=[seen])
    assert seen.paths() == {
        (str(src / "f2"), str(tmp_path / "renamed")): len(spec["f2"])
    }
    dst = tmp_path / "dst"
    rcp_core.copy(src, dst, SETTINGS)
    overwrite = replace(SETTINGS, existing=ExistingPolicy.OVERWRITE)
    (src / "sub" / "f3").write_bytes(b"changed")
    dry = FileCopied()
    rcp_core.copy(src, dst, replace(overwrite, dry_run=DryRun.BRIEF), plugins=[dry])
    assert dry.calls == []
    again = FileCopied()
    summary = rcp_core.copy(src, dst, overwrite, plugins=[again])
    assert again.paths() == {(str(src / "sub/f3"), str(dst / "sub/f3")): 7}
    assert summary["unchanged.files"] == len(spec) - 1


def test_a_crashing_hook_stops_the_run_and_is_reported(tmp_path: Path) -> None:
    """An exception from a site hook is a crash: re-raised, and seen by run_finished."""

    class Broken:
        @hookimpl
        def rcp_choose_method(
            self, path: str, size: int, source: StorageInfo, destination: StorageInfo
        ) -> str | None:
            raise RuntimeError("site bug")

    files_tree(tmp_path / "src", 4)
    seen = Observe()
    with pytest.raises(RuntimeError, match="site bug") as info:
        rcp_core.copy(tmp_path / "src", tmp_path / "dst", plugins=[seen, Broken()])
    assert [(s, e) for s, e, _ in seen.finished] == [(None, info.value)]


# -- the example site plugin -----------------------------------------------------------


def fake_lfs(tmp_path: Path, *, fail: bool = False) -> tuple[Path, Path]:
    """An ``lfs`` that logs its arguments and creates the file named last (or fails)."""
    log = tmp_path / "lfs.log"
    tool = tmp_path / "bin" / "lfs"
    tool.parent.mkdir()
    body = (
        "echo 'lfs: setstripe: Invalid argument' >&2\nexit 22\n"
        if fail
        else 'for last; do :; done\nset -C\n: > "$last"\n'
    )
    tool.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{log}'\n{body}")
    tool.chmod(0o755)
    return tool, log


STRIPE_SPEC = {
    "big": b"b" * (256 * KIB),
    "edge": b"e" * (64 * KIB),  # exactly the threshold: striped
    "sub/bigger": b"B" * MIB,
    "small": b"s" * (64 * KIB - 1),
    "empty": b"",
}
STRIPED = ("big", "edge", "sub/bigger")


def test_example_stripes_large_files_on_lustre(
    tmp_path: Path, example: ModuleType, tree_compare: TreeCompare
) -> None:
    """Files at or above the threshold go through ``lfs setstripe``; the copy is exact."""
    tool, log = fake_lfs(tmp_path)
    make_tree(tmp_path / "src", STRIPE_SPEC)
    site = example.SitePlugin(lfs=str(tool), stripe_threshold=64 * KIB, stripe_count=4)
    summary = rcp_core.copy(
        tmp_path / "src", tmp_path / "dst", plugins=[ForceStorage(LUSTRE), site]
    )
    assert summary["copied.files"] == len(STRIPE_SPEC)
    assert sorted(log.read_text().splitlines()) == sorted(
        f"setstripe -c 4 {tmp_path / 'dst' / rel}" for rel in STRIPED
    )
    assert tree_compare(tmp_path / "src", tmp_path / "dst") == []


def test_example_leaves_other_storage_alone(
    tmp_path: Path, example: ModuleType, tree_compare: TreeCompare
) -> None:
    """Not Lustre, or no ``lfs`` tool: no striping, files created by the engine."""
    tool, log = fake_lfs(tmp_path)
    make_tree(tmp_path / "src", STRIPE_SPEC)
    site = example.SitePlugin(lfs=str(tool), stripe_threshold=64 * KIB)
    rcp_core.copy(
        tmp_path / "src", tmp_path / "local", plugins=[ForceStorage(SSD), site]
    )
    missing = example.SitePlugin(lfs=str(tmp_path / "no-lfs"), stripe_threshold=1)
    assert missing.lfs is None
    rcp_core.copy(
        tmp_path / "src", tmp_path / "nolfs", plugins=[ForceStorage(LUSTRE), missing]
    )
    assert not log.exists()
    assert tree_compare(tmp_path / "src", tmp_path / "local") == []
    assert tree_compare(tmp_path / "src", tmp_path / "nolfs") == []


def test_example_falls_back_when_lfs_fails(
    tmp_path: Path,
    example: ModuleType,
    tree_compare: TreeCompare,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``lfs`` failing is a warning, not an error: the default layout is used."""
    tool, log = fake_lfs(tmp_path, fail=True)
    make_tree(tmp_path / "src", STRIPE_SPEC)
    site = example.SitePlugin(lfs=str(tool), stripe_threshold=64 * KIB)
    with caplog.at_level(logging.WARNING, logger="rcp_site_example"):
        summary = rcp_core.copy(
            tmp_path / "src", tmp_path / "dst", plugins=[ForceStorage(LUSTRE), site]
        )
    assert summary["errors"] == 0
    assert len(log.read_text().splitlines()) == len(STRIPED)
    warnings = [r for r in caplog.records if r.name == "rcp_site_example"]
    assert len(warnings) == len(STRIPED)
    assert all("Invalid argument" in r.getMessage() for r in warnings)
    assert tree_compare(tmp_path / "src", tmp_path / "dst") == []


@pytest.mark.parametrize(
    ("source", "destination", "expected"),
    [
        (HDD, SSD, Concurrency(1, 1, 4)),
        (SSD, HDD, Concurrency(1, 1, 4)),
        (NFS, HDD, Concurrency(1, 1, 4)),
        (SSD, SSD, BUILTIN_LOCAL),
        (LUSTRE, SSD, BUILTIN_SHARED),
    ],
)
def test_example_caps_rotational_disks(
    tmp_path: Path,
    example: ModuleType,
    source: StorageInfo,
    destination: StorageInfo,
    expected: Concurrency,
) -> None:
    """A spinning disk on either side: 1 worker, at most 4; otherwise the built-in."""
    (tmp_path / "in" / "src").mkdir(parents=True)
    (tmp_path / "out").mkdir()
    detect = ForceStorage(
        None,
        {str(tmp_path / "in" / "src"): source, str(tmp_path / "out"): destination},
    )
    eng = engine(
        tmp_path / "in" / "src",
        tmp_path / "out" / "dst",
        [detect, example.SitePlugin()],
        SETTINGS,
    )
    assert eng.concurrency == expected


def test_example_retries_eio_on_lustre_only(example: ModuleType) -> None:
    """With the example, EIO is transient on Lustre; other errnos and other storage
    keep the built-in answer."""
    plain = plugin_manager(entry_points=False).hook
    site = plugin_manager([example.SitePlugin()], entry_points=False).hook
    eio, eacces = OSError(errno.EIO, "I/O error"), OSError(errno.EACCES, "denied")
    on_lustre = {"source": SSD, "destination": LUSTRE}
    on_disk = {"source": SSD, "destination": SSD}
    assert plain.rcp_classify_error(error=eio, **on_lustre) is Kind.PERMANENT
    assert site.rcp_classify_error(error=eio, **on_lustre) is Kind.TRANSIENT
    assert site.rcp_classify_error(error=eio, **on_disk) is Kind.PERMANENT
    assert site.rcp_classify_error(error=eio, source=None, destination=None) is (
        Kind.PERMANENT
    )
    assert site.rcp_classify_error(error=eacces, **on_lustre) is Kind.PERMANENT
    full = OSError(errno.ENOSPC, "full")
    assert site.rcp_classify_error(error=full, **on_lustre) is Kind.FATAL


def test_builtin_plugin_is_registered_trylast() -> None:
    """The built-in implementations are marked ``trylast``, so any site answers first."""
    pm = plugin_manager(entry_points=False)
    builtin = pm.get_plugin(BUILTIN)
    assert isinstance(builtin, BuiltinPlugin)
    for impl in pm.hook.rcp_choose_concurrency.get_hookimpls():
        assert impl.trylast


def test_a_failing_progress_observer_does_not_break_the_copy(tmp_path: Path) -> None:
    """Observers are best effort: a raising ``rcp_progress`` costs reports, not the copy.

    The copy completes and returns its summary, which ``rcp_run_finished`` receives.
    """

    class Raising(Observe):
        @hookimpl
        def rcp_progress(self, progress: Progress) -> None:
            super().rcp_progress(progress)
            raise RuntimeError("observer bug")

    spec = files_tree(tmp_path / "src", 8)
    seen = Raising()
    summary = rcp_core.copy(
        tmp_path / "src", tmp_path / "dst", plugins=[seen], progress_interval=0.01
    )
    assert summary["copied.files"] == len(spec)
    assert seen.progress[-1][0].final
    assert [(s, e) for s, e, _ in seen.finished] == [(summary, None)]


class UnknownMethod:
    @hookimpl
    def rcp_choose_method(
        self, path: str, size: int, source: StorageInfo, destination: StorageInfo
    ) -> str:
        return "teleport"


class UpsideDownBounds:
    @hookimpl
    def rcp_choose_concurrency(
        self, source: StorageInfo, destination: StorageInfo, cpus: int
    ) -> Concurrency:
        return Concurrency(initial=8, minimum=1, maximum=4)


@pytest.mark.parametrize("plugin", [UnknownMethod(), UpsideDownBounds()])
def test_a_plugin_answering_what_the_engine_cannot_use_is_a_plugin_error(
    tmp_path: Path, plugin: object
) -> None:
    """The error tree names the culprit: the plugin, not the copy's input."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"x")
    with pytest.raises(PluginError):
        rcp_core.copy([str(src)], str(tmp_path / "dst"), plugins=[plugin])
