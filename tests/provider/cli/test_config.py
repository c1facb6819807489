"""``rcp``'s config files (rcp_provider/cli/config.py) with the real command: defaults
that change a copy, per-mount sections, the command line winning, ``--show-config``
saying where each value came from, and every mistake in a file a usage error that
names it, before anything is touched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rcp_provider.cli import config

RCP = str(Path(sys.executable).with_name("rcp"))


def rcp(*args: str, files: list[Path]) -> subprocess.CompletedProcess[str]:
    """``rcp`` reading exactly ``files`` (none: no config at all)."""
    env = {**os.environ, config.ENV: ":".join(str(f) for f in files)}
    return subprocess.run(
        [RCP, *args], capture_output=True, text=True, timeout=120, check=False, env=env
    )


def shown(done: subprocess.CompletedProcess[str]) -> dict[str, tuple[str, str]]:
    """``--show-config``'s lines: option -> (value, where from)."""
    assert done.returncode == 0, done.stderr
    lines = {}
    for line in done.stdout.splitlines():
        name, _, rest = line.partition(" = ")
        value, _, source = rest.partition("  # ")
        lines[name] = (value, source)
    return lines


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path]:
    src = tmp_path / "fast" / "src"
    src.mkdir(parents=True)
    (src / "f").write_bytes(b"one")
    return src, tmp_path / "dst"


def test_defaults_change_the_copy_and_the_command_line_wins(
    tmp_path: Path, trees: tuple[Path, Path]
) -> None:
    src, dst = trees
    site = tmp_path / "site.toml"
    site.write_text('[defaults]\nexisting = "overwrite"\nretries = 5\n')
    assert rcp(str(src), str(dst), files=[site]).returncode == 0
    (src / "f").write_bytes(b"two, longer")
    # Without the file an existing DST is refused; with it the copy overwrites.
    assert rcp(str(src), str(dst), files=[]).returncode == 2
    assert rcp(str(src), str(dst), files=[site]).returncode == 0
    assert (dst / "f").read_bytes() == b"two, longer"
    lines = shown(
        rcp("--show-config", "--retries", "9", str(src), str(dst), files=[site])
    )
    assert lines["existing"] == ('"overwrite"', f"{site} [defaults]")
    assert lines["retries"] == ("9", "command line")
    assert lines["max_workers"] == ("null", "default")


def test_the_most_specific_mount_holding_an_operand_wins(
    tmp_path: Path, trees: tuple[Path, Path]
) -> None:
    src, dst = trees
    system, user = tmp_path / "system.toml", tmp_path / "user.toml"
    system.write_text(
        f'[defaults]\nmax_workers = 2\n[mount."{tmp_path}"]\nmax_workers = 3\n'
        f'[mount."{tmp_path / "fast"}"]\nmax_workers = 8\nops_throttle = 100\n'
    )
    user.write_text(f'[mount."{tmp_path / "fast"}"]\nmax_workers = 16\n')
    here = shown(rcp("--show-config", str(src), str(dst), files=[system, user]))
    assert here["max_workers"] == ("16", f'{user} [mount."{tmp_path / "fast"}"]')
    assert here["ops_throttle"] == ("100.0", f'{system} [mount."{tmp_path / "fast"}"]')
    elsewhere = tmp_path / "slow"
    elsewhere.mkdir()
    there = shown(rcp("--show-config", str(elsewhere), str(dst), files=[system, user]))
    assert there["max_workers"] == ("3", f'{system} [mount."{tmp_path}"]')
    outside = shown(
        rcp("--show-config", "/etc/hostname", "/tmp/x", files=[system, user])
    )
    assert outside["max_workers"] == ("2", f"{system} [defaults]")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[defaults]\nmax_wokers = 4\n", "unknown option 'max_wokers'"),
        ('[defaults]\nmax_workers = "many"\n', "max_workers"),
        ('[defaults]\nexisting = "sometimes"\n', "existing"),
        ("[copy]\nretries = 1\n", "unknown table [copy]"),
        ('[mount."lustre"]\nretries = 1\n', "not an absolute path"),
        ("[defaults\n", "Expected"),
    ],
)
def test_a_mistake_in_a_file_is_a_usage_error_naming_it(
    tmp_path: Path, trees: tuple[Path, Path], text: str, says: str
) -> None:
    src, dst = trees
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    done = rcp(str(src), str(dst), files=[bad])
    assert done.returncode == 2
    assert done.stderr.startswith(f"rcp: error: {bad}")
    assert says in done.stderr
    assert not dst.exists()


def test_the_files_read_are_the_systems_then_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(config.ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert config.paths() == [config.SYSTEM, tmp_path / "rcp" / "config.toml"]
    monkeypatch.setenv(config.ENV, f"{tmp_path}/a.toml:{tmp_path}/b.toml")
    assert config.paths() == [tmp_path / "a.toml", tmp_path / "b.toml"]
    assert config.load([tmp_path / "missing.toml"]) == []
