"""``rcp`` with a site's own backend: ``sitefs://`` (:mod:`support.sitefs`, a port no
fsspec filesystem is behind), installed as a site installs one, through an
``rcp.backends`` entry point, and reached through the ``rcp_backend_for`` hook.

The copies run ``rcp``'s own ``main`` in this process, so the installed entry point
(a ``*.dist-info`` on ``sys.path``) is found as a fresh process would find it. What
they show: the operand rules, the refusals, ``--exclude``, ``--delete`` and
``--verify`` hold on a site's backend as on any other, because the engine and the
comparison reach it through its port alone.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rcp_provider.cli.rcmp import main as rcmp
from rcp_provider.cli.rcp import main
from support import sitefs
from support.treecmp import compare_trees


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "d" / "deep").mkdir(parents=True)
    (root / "top").write_bytes(b"top\n")
    (root / "d" / "a.txt").write_bytes(os.urandom(5000))
    (root / "d" / "skip.log").write_bytes(b"excluded\n")
    (root / "d" / "deep" / "b").write_bytes(os.urandom(3 << 20))
    return root


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir()}


def test_a_tree_goes_to_a_site_backend_and_back(
    storage: Path, src: Path, tmp_path: Path
) -> None:
    """Both directions stream through the site's port, its data whole."""
    assert main([str(src), "sitefs://store/dst"]) == 0
    assert sitefs.plugin.asked == ["sitefs://store/dst"]
    assert compare_trees(src, storage / "dst", mode=False, times=False) == []
    back = tmp_path / "back"
    back.mkdir()
    assert main(["sitefs://store/dst", f"{back}/"]) == 0
    assert compare_trees(src, back / "dst", mode=False, times=False) == []


def test_exclude_and_delete_hold_on_a_site_backend(
    storage: Path, src: Path, tmp_path: Path
) -> None:
    """An excluded name is neither copied nor deleted; what the source no longer
    has goes, in both directions."""
    (storage / "dst" / "d").mkdir(parents=True)
    (storage / "dst" / "stale").write_bytes(b"gone from the source\n")
    (storage / "dst" / "d" / "kept.log").write_bytes(b"excluded: protected\n")
    args = ["-o", "--delete", "--exclude", "*.log"]
    assert main([*args, str(src), "sitefs://store/dst"]) == 0
    assert files(storage / "dst") == {"top", "d/a.txt", "d/kept.log", "d/deep/b"}
    assert (storage / "dst" / "d" / "deep" / "b").read_bytes() == (
        src / "d" / "deep" / "b"
    ).read_bytes()

    back = tmp_path / "back"
    (back / "old").mkdir(parents=True)
    (back / "old" / "x").write_bytes(b"not in the store\n")
    (back / "mine.log").write_bytes(b"excluded: protected\n")
    assert main([*args, "sitefs://store/dst", str(back)]) == 0
    assert files(back) == {"top", "d/a.txt", "d/deep/b", "mine.log"}


def test_the_operand_rules_hold_on_a_site_backend(
    storage: Path, src: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checked through the port (``at``, ``parent``, ``holds``), named by its URLs,
    nothing written."""
    assert main([str(src), "sitefs://store/dst"]) == 0
    before = files(storage)
    capsys.readouterr()
    refused = {
        "destination 'sitefs://store/dst' exists "
        "(use --overwrite, --update or --ignore-existing)": [
            str(src),
            "sitefs://store/dst",
        ],
        "destination parent of 'sitefs://store/none/dst' does not exist": [
            str(src),
            "sitefs://store/none/dst",
        ],
        "destination is inside the source 'sitefs://store/dst'": [
            "-o",
            "sitefs://store/dst",
            "sitefs://store/dst/d/",
        ],
        "source 'sitefs://store/gone': No such file or directory": [
            "sitefs://store/gone",
            str(src.parent / "out"),
        ],
        "not supported from local to sitefs://: --preserve mode": [
            "--preserve",
            "mode",
            str(src),
            "sitefs://store/new",
        ],
    }
    for message, args in refused.items():
        assert main(args) == 2, args
        assert capsys.readouterr().err == f"rcp: error: {message}\n"
    assert files(storage) == before
    (storage / "into").mkdir()
    assert main([str(src / "d"), "sitefs://store/into/"]) == 0
    assert files(storage / "into") == {"d/a.txt", "d/skip.log", "d/deep/b"}


def flip_a_byte(path: Path) -> None:
    """Change the file's first byte, keeping its size: a copy by size leaves it."""
    data = bytearray(path.read_bytes())
    data[0] ^= 0x01
    path.write_bytes(bytes(data))


def differences(out: str) -> list[tuple[str, str]]:
    found = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return [(d["path"], d["kind"]) for d in found if "path" in d]


def test_verify_holds_on_a_site_backend(
    storage: Path,
    src: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--verify checksum`` compares through the site's port, both ways: a good copy
    is the same (sizes and contents: the site keeps no modes or times), and bytes
    the copy left different (``-o`` judges by size here) fail the run, named."""
    summary = tmp_path / "summary.json"
    args = ["--verify", "checksum", "--summary-json", str(summary)]
    assert main([*args, str(src), "sitefs://store/dst"]) == 0
    verified = json.loads(summary.read_text())["verified"]
    assert (verified["same"], verified["files_hashed"]) == (True, 4), verified
    flip_a_byte(storage / "dst" / "d" / "a.txt")
    capsys.readouterr()
    assert main(["-o", *args, str(src), "sitefs://store/dst"]) == 3  # differences
    assert differences(capsys.readouterr().out) == [("d/a.txt", "content")]

    back = tmp_path / "back"
    back.mkdir()
    assert main([*args, "sitefs://store/dst", f"{back}/"]) == 0
    assert json.loads(summary.read_text())["verified"]["same"] is True
    flip_a_byte(back / "dst" / "top")
    capsys.readouterr()
    assert main(["-o", *args, "sitefs://store/dst", f"{back}/"]) == 3  # differences
    assert differences(capsys.readouterr().out) == [("top", "content")]


def test_rcmp_compares_with_a_site_backend(
    storage: Path, src: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``rcmp`` reaches the site's storage through the same hook and port: sizes and
    contents compared (what both sides have: the site lists this host's modes and
    times of its files, which the copy did not keep, so ``--attrs size``)."""
    assert main([str(src), "sitefs://store/dst"]) == 0
    capsys.readouterr()
    args = ["--checksum", "--attrs", "size", str(src), "sitefs://store/dst"]
    assert rcmp(args) == 0, capsys.readouterr()
    flip_a_byte(storage / "dst" / "d" / "deep" / "b")
    capsys.readouterr()
    assert rcmp(args) == 3  # differences
    assert differences(capsys.readouterr().out) == [("d/deep/b", "content")]


def test_without_the_plugin_no_backend_serves_its_scheme(
    src: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(src), "sitefs://store/dst"]) == 2
    assert capsys.readouterr().err == (
        "rcp: error: no backend for sitefs://: "
        "install its fsspec package or a site plugin\n"
    )
