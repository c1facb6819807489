from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from rcp_core.errors import UsageError
from rcp_core.tools.filegen import (
    PRESETS,
    GenStats,
    generate_preset,
    generate_tree,
    parse_dir_width,
    parse_size,
)
from rcp_provider.cli.filegen import main

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


def regular_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def contents(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in regular_files(root)}


def snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    """Everything filegen decides about each entry, keyed by its path below ``root``."""
    out: dict[str, tuple[object, ...]] = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        rel = str(path.relative_to(root))
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(path).replace(str(root), "<ROOT>")
            out[rel] = ("link", target, st.st_mtime_ns)
        elif stat.S_ISREG(st.st_mode):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out[rel] = ("file", st.st_size, st.st_mode, st.st_mtime_ns, digest)
        else:
            out[rel] = ("other", st.st_mode, st.st_mtime_ns)
    return out


def walk_stats(root: Path) -> GenStats:
    """Count what is really below ``root``, the way GenStats promises to."""
    dirs = symlinks = specials = names = size = 0
    inodes: set[int] = set()
    for path in root.rglob("*"):
        st = path.lstat()
        if stat.S_ISDIR(st.st_mode):
            dirs += 1
        elif stat.S_ISLNK(st.st_mode):
            symlinks += 1
        elif stat.S_ISREG(st.st_mode):
            names += 1
            if st.st_ino not in inodes:
                inodes.add(st.st_ino)
                size += st.st_size
        else:
            specials += 1
    hardlinks = names - len(inodes)
    return GenStats(dirs, len(inodes), symlinks, hardlinks, specials, size, 0.0)


def counts(stats: GenStats) -> GenStats:
    """``stats`` without its timing, to compare with :func:`walk_stats`."""
    return replace(stats, seconds=0.0)


# -- parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("4096", 4096),
        ("1K", KiB),
        ("1k", KiB),
        (" 2KiB ", 2 * KiB),
        ("3M", 3 * MiB),
        ("1G", GiB),
        ("2T", 2 * 1024 * GiB),
    ],
)
def test_parse_size_accepts_bytes_and_binary_suffixes(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "K", "1X", "-1", "1.5K", "1 K B", "0x10"])
def test_parse_size_rejects_anything_else(text: str) -> None:
    with pytest.raises(UsageError, match="bad size"):
        parse_size(text)


def test_parse_dir_width() -> None:
    assert parse_dir_width("3,2") == (3, 2)
    assert parse_dir_width(" 4 , 0 ") == (4, 0)
    assert parse_dir_width("7") == (7,)


@pytest.mark.parametrize("text", ["", "3,,2", "a", "3,-1", "3;2"])
def test_parse_dir_width_rejects_bad_lists(text: str) -> None:
    with pytest.raises(UsageError, match="bad DIRWIDTH"):
        parse_dir_width(text)


# -- generate_tree ---------------------------------------------------------------------


def test_tree_3_2_puts_10_files_of_1k_in_each_of_6_leaves(tmp_path: Path) -> None:
    root = tmp_path / "root"
    stats = generate_tree(root, (3, 2), 10, KiB, seed=1)

    dirs = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir())
    assert dirs == sorted(
        [f"dir{i}" for i in range(3)]
        + [f"dir{i}/dir{j}" for i in range(3) for j in range(2)]
    )
    files = regular_files(root)
    assert len(files) == 60
    for path in files:
        assert path.parent.parent.parent == root  # only in leaves
        assert path.name in {f"file{i}" for i in range(10)}
        assert path.stat().st_size == KiB
    assert counts(stats) == walk_stats(root)
    assert (stats.dirs, stats.files, stats.bytes) == (9, 60, 60 * KiB)
    assert stats.seconds > 0


def test_all_dirs_puts_files_in_every_dir_including_root(tmp_path: Path) -> None:
    stats = generate_tree(tmp_path / "r", (3, 2), 10, 100, leaf_only=False, seed=1)
    assert (stats.dirs, stats.files) == (9, 100)
    assert counts(stats) == walk_stats(tmp_path / "r")
    assert (tmp_path / "r" / "file9").stat().st_size == 100
    assert (tmp_path / "r" / "dir2" / "file0").exists()


def test_zero_width_ends_the_tree_and_empty_width_fills_root(tmp_path: Path) -> None:
    stats = generate_tree(tmp_path / "a", (3, 0, 2), 2, 10, seed=1)
    assert (stats.dirs, stats.files) == (3, 6)
    assert sorted(p.name for p in (tmp_path / "a" / "dir0").iterdir()) == [
        "file0",
        "file1",
    ]
    stats = generate_tree(tmp_path / "b", (), 4, 10, seed=1)
    assert (stats.dirs, stats.files) == (0, 4)
    assert counts(stats) == walk_stats(tmp_path / "b")


def test_content_is_random_and_differs_between_files(tmp_path: Path) -> None:
    generate_tree(tmp_path / "r", (2,), 20, 4 * KiB)
    contents = [p.read_bytes() for p in regular_files(tmp_path / "r")]
    assert len(set(contents)) == 40
    for data in contents:
        assert data.count(0) < len(data) // 16  # random bytes: about 1/256 zeros


def test_large_file_content_does_not_repeat_4k_blocks(tmp_path: Path) -> None:
    generate_tree(tmp_path / "r", (), 1, 3 * MiB + 5, seed=9)
    data = (tmp_path / "r" / "file0").read_bytes()
    assert len(data) == 3 * MiB + 5
    blocks = {data[i : i + 4 * KiB] for i in range(0, 3 * MiB, 4 * KiB)}
    assert len(blocks) == 3 * MiB // (4 * KiB)


def test_seed_makes_content_reproducible_for_any_worker_count(tmp_path: Path) -> None:
    generate_tree(tmp_path / "a", (2, 2), 5, 3000, seed=42, workers=1)
    generate_tree(tmp_path / "b", (2, 2), 5, 3000, seed=42, workers=4)
    generate_tree(tmp_path / "c", (2, 2), 5, 3000, seed=43, workers=4)
    a, b, c = (contents(tmp_path / name) for name in "abc")
    assert a == b
    assert a.keys() == c.keys()
    assert a != c


def test_existing_empty_root_is_used(tmp_path: Path) -> None:
    generate_tree(tmp_path, (1,), 1, 1, seed=1)
    assert (tmp_path / "dir0" / "file0").stat().st_size == 1


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("non-empty", "ROOT exists and is not empty"),
        ("file", "ROOT exists and is not a directory"),
        ("no-parent", "the parent of ROOT is not a directory"),
    ],
)
def test_root_is_refused_without_writing(
    tmp_path: Path, setup: str, message: str
) -> None:
    root = tmp_path / "root"
    if setup == "non-empty":
        root.mkdir()
        (root / "keep").write_bytes(b"mine")
    elif setup == "file":
        root.write_bytes(b"mine")
    else:
        root = tmp_path / "missing" / "root"
    before = snapshot(tmp_path)
    with pytest.raises(UsageError, match=message):
        generate_tree(root, (2,), 2, 10)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("widths", "files", "size", "workers"),
    [((2, -1), 1, 1, 1), ((2,), -1, 1, 1), ((2,), 1, -1, 1), ((2,), 1, 1, 0)],
)
def test_bad_numbers_are_usage_errors(
    tmp_path: Path, widths: tuple[int, ...], files: int, size: int, workers: int
) -> None:
    with pytest.raises(UsageError):
        generate_tree(tmp_path / "r", widths, files, size, workers=workers)
    assert not (tmp_path / "r").exists()


# -- presets ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "scale", "dirs", "files_per_dir", "size"),
    [
        ("1k", 0.001, 100, 1, KiB),
        ("1k", 0.01, 100, 10, KiB),
        ("1m", 0.01, 10, 1, MiB),
        ("100m", 0.1, 1, 1, 100 * MiB),
        pytest.param("1g", 0.01, 1, 1, GiB, marks=pytest.mark.slow),
    ],
)
def test_uniform_presets(
    tmp_path: Path, name: str, scale: float, dirs: int, files_per_dir: int, size: int
) -> None:
    root = tmp_path / name
    try:
        stats = generate_preset(root, name, scale=scale, seed=1)
        files = regular_files(root)
        assert len(files) == dirs * files_per_dir
        assert {p.stat().st_size for p in files} == {size}
        assert counts(stats) == walk_stats(root)
        assert stats.dirs == dirs
    finally:
        shutil.rmtree(root, ignore_errors=True)  # do not keep GiBs in pytest's tmp


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_scale_is_a_usage_error(tmp_path: Path, scale: float) -> None:
    with pytest.raises(UsageError, match="bad scale"):
        generate_preset(tmp_path / "r", "1k", scale=scale)
    assert not (tmp_path / "r").exists()


def test_unknown_preset_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="1k, 1m, 100m, 1g, mixed"):
        generate_preset(tmp_path / "r", "huge")
    assert tuple(PRESETS) == ("1k", "1m", "100m", "1g", "mixed")
    assert not (tmp_path / "r").exists()


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, GenStats]:
    root = tmp_path_factory.mktemp("mixed") / "root"
    return root, generate_preset(root, "mixed", scale=0.01, seed=7)


def test_mixed_stats_match_the_tree(mixed: tuple[Path, GenStats]) -> None:
    root, stats = mixed
    assert counts(stats) == walk_stats(root)
    # 30 small files + big0, big1, sparse, hard_a, empty_file and the two odd names
    assert (stats.dirs, stats.files, stats.symlinks) == (87, 37, 4)
    assert (stats.hardlinks, stats.specials) == (1, 1)


def test_mixed_has_relative_absolute_and_dangling_symlinks(
    mixed: tuple[Path, GenStats],
) -> None:
    root, _ = mixed
    special = root / "special"
    assert os.readlink(special / "rel_link") == "../large/big1"
    assert (special / "rel_link").resolve() == (root / "large" / "big1").resolve()
    assert (special / "rel_dir_link").is_dir()
    assert (special / "rel_dir_link").is_symlink()
    absolute = os.readlink(special / "abs_link")
    assert Path(absolute).is_absolute()
    assert Path(absolute).samefile(root / "large" / "big0")
    assert (special / "dangling_link").is_symlink()
    assert not (special / "dangling_link").exists()


def test_mixed_hard_link_pair_shares_an_inode(mixed: tuple[Path, GenStats]) -> None:
    root, _ = mixed
    a, b = (root / "special" / "hard_a").stat(), (root / "dir0" / "hard_b").stat()
    assert (a.st_ino, a.st_dev) == (b.st_ino, b.st_dev)
    assert a.st_nlink == 2
    assert a.st_size > 0


def test_mixed_sparse_file_has_holes_and_two_data_extents(
    mixed: tuple[Path, GenStats],
) -> None:
    root, _ = mixed
    path = root / "special" / "sparse"
    st = path.stat()
    assert st.st_size == 64 * MiB
    assert st.st_blocks * 512 < st.st_size
    with path.open("rb") as f:
        for offset, is_data in [
            (0, False),
            (8 * MiB, True),
            (9 * MiB, False),
            (40 * MiB, True),
            (41 * MiB, False),
            (64 * MiB - 4 * KiB, False),
        ]:
            f.seek(offset)
            chunk = f.read(4 * KiB)
            assert any(chunk) is is_data, offset


def test_mixed_has_fifo_empty_entries_and_odd_names(
    mixed: tuple[Path, GenStats],
) -> None:
    root, _ = mixed
    special = root / "special"
    assert stat.S_ISFIFO((special / "fifo").lstat().st_mode)
    assert list((special / "empty_dir").iterdir()) == []
    assert (special / "empty_file").stat().st_size == 0
    assert (special / "with space.txt").stat().st_size >= 100
    assert (special / "ünïcødé-名前.txt").stat().st_size >= 100
    large = sorted((root / "large").iterdir())
    assert [p.stat().st_size for p in large] == [2 * MiB, 2 * MiB + 4321]


def test_mixed_small_files_are_100b_to_64k(mixed: tuple[Path, GenStats]) -> None:
    root, _ = mixed
    small = [p for p in regular_files(root) if p.name.startswith("file")]
    assert len(small) == 30
    assert all(100 <= p.stat().st_size < 64 * KiB for p in small)
    assert len({p.stat().st_size for p in small}) > 20


def test_mixed_modes_vary(mixed: tuple[Path, GenStats]) -> None:
    root, _ = mixed
    file_modes = {stat.S_IMODE(p.stat().st_mode) for p in regular_files(root)}
    dir_modes = {stat.S_IMODE(p.lstat().st_mode) for p in root.rglob("*") if p.is_dir()}
    assert {0o644, 0o600, 0o755} <= file_modes
    assert {0o755, 0o700} <= dir_modes


def test_mixed_times_have_nanoseconds_and_dirs_keep_theirs(
    mixed: tuple[Path, GenStats],
) -> None:
    root, _ = mixed
    entries = list(root.rglob("*"))
    mtimes = [p.lstat().st_mtime_ns for p in entries]
    # Set on every entry (symlinks and dirs too) after all writes: none is "now",
    # none lost its nanoseconds to a later child creation.
    assert all(ns % 10**9 != 0 for ns in mtimes)
    assert all(ns < root.lstat().st_mtime_ns for ns in mtimes)
    assert len(set(mtimes)) > len(entries) // 2


def test_mixed_is_reproducible_with_a_seed(
    tmp_path: Path, mixed: tuple[Path, GenStats]
) -> None:
    root, _ = mixed
    generate_preset(tmp_path / "again", "mixed", scale=0.01, seed=7, workers=1)
    assert snapshot(tmp_path / "again") == snapshot(root)


# -- command line ----------------------------------------------------------------------


def test_cli_generates_and_summarizes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "r"
    assert main([str(root), "3,2", "10", "1K", "--summary", "--workers", "2"]) == 0
    out = capsys.readouterr().out
    summary = dict(line.split(":", 1) for line in out.splitlines())
    assert summary["dirs"].strip() == "9"
    assert summary["files"].strip() == "60"
    assert summary["bytes"].strip() == "61440 (60.0 KiB)"
    assert {"root", "symlinks", "hardlinks", "specials", "seconds"} <= summary.keys()
    assert len(regular_files(root)) == 60


def test_cli_is_quiet_without_summary_and_honours_all_dirs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path / "r"), "2", "3", "10", "--all-dirs", "--seed", "1"]) == 0
    assert capsys.readouterr() == ("", "")
    assert len(regular_files(tmp_path / "r")) == 9


def test_cli_preset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "m"
    argv = ["--preset", "mixed", "--scale", "0.01", "--seed", "7", str(root)]
    assert main([*argv, "--summary"]) == 0
    assert "symlinks:  4" in capsys.readouterr().out
    assert (root / "special" / "fifo").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["3,x", "10", "1K"], "bad DIRWIDTH '3,x'"),
        (["3", "10", "1X"], "bad size '1X'"),
        (["3", "ten", "1K"], "bad NUMFILES 'ten'"),
        (["3", "²", "1K"], "bad NUMFILES '²'"),
        (["3", "-1", "1K"], "cannot be negative"),
        (["3", "10"], "expected ROOT DIRWIDTH NUMFILES FILESIZE"),
        ([], "expected ROOT DIRWIDTH NUMFILES FILESIZE"),
        (["--preset", "nope"], "unknown preset 'nope'"),
        (["--preset", "1k", "3"], "--preset takes only ROOT"),
        (["--preset", "1k", "--all-dirs"], "do not apply to --preset"),
        (["--scale", "2", "3", "1", "1"], "--scale applies to --preset only"),
        (["--preset", "1k", "--scale", "0"], "bad scale"),
        (["3", "1", "1", "--workers", "0"], "bad workers"),
        (["3", "1", "1", "--workers", "x"], "invalid int value: 'x'"),
        (["3", "1", "1", "--leaf-files", "--all-dirs"], "not allowed with"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    root = tmp_path / "r"
    assert main([str(root), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rcp-filegen: error: ")
    assert err.count("\n") == 1
    assert message in err
    assert not root.exists()


def test_cli_without_root_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert capsys.readouterr().err == (
        "rcp-filegen: error: the following arguments are required: ROOT,"
        " DIRWIDTH NUMFILES FILESIZE\n"
    )


def test_cli_refuses_non_empty_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "keep").write_bytes(b"")
    assert main([str(tmp_path), "1", "1", "1"]) == 2
    assert capsys.readouterr().err == (
        f"rcp-filegen: error: ROOT exists and is not empty: {tmp_path}\n"
    )


def test_cli_os_error_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / ("x" * 300)  # longer than NAME_MAX
    assert main([str(root), "1", "1", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rcp-filegen: error: [Errno 36] File name too long")
    assert err.count("\n") == 1


def test_full_disk_stops_the_run_with_exit_1(
    small_fs: Callable[[int], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    mnt = small_fs(16)
    assert main([str(mnt / "r"), "4", "10", "1M", "--workers", "3"]) == 1
    err = capsys.readouterr().err
    # A file write or a directory's mkdir may be the call that finds the disk full;
    # mkdir's error names its path. Either way: one line, the errno first.
    assert err.startswith("rcp-filegen: error: [Errno 28] No space left on device")
    assert err.count("\n") == 1
    with pytest.raises(OSError, match="No space left"):
        generate_tree(mnt / "again", (4,), 10, MiB, workers=3)
