"""The filesets copied by the benchmark: what each is, and how it is put on a filesystem.

Every synthetic fileset is made by ``rcp-filegen`` (a preset with ``--scale``, or an
explicit ``DIRWIDTH NUMFILES FILESIZE`` tree) with one fixed seed, so the same id means
the same bytes on every filesystem and in every run. The real tree is the Linux source
from Debian's ``linux-source`` package: its tarball is extracted once into the work
area on the ext4 disk and copied (``cp -a``) to the other filesystems.

Invariants:
- :func:`materialize` is idempotent: a fileset whose stamp file (``.<id>.json`` next to
  it, outside the tree so no tool copies it) matches its recipe is reused; anything
  else under that name is removed and regenerated. The stamp is written last, so an
  interrupted generation is never mistaken for a finished one. Trees are made in
  place, never moved afterwards, so absolute symlinks inside them stay valid.
- Post-generation edits are part of the recipe (``remove``): the ``mixed`` preset's
  FIFO is deleted because shutil, fsspec and Airflow cannot copy a FIFO (they fail or
  block on it), and the benchmark measures speed, not special-file support.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

SEED: Final = 20261129
LINUX_TARBALLS: Final = Path("/usr/src")
KiB, MiB, GiB = 1024, 1024**2, 1024**3

Kind = Literal["preset", "tree", "linux"]


class FilesetError(RuntimeError):
    """A fileset could not be made (a missing package, a failed generator)."""


@dataclass(frozen=True, slots=True)
class Fileset:
    """One benchmark fileset: its recipe, and what to check on its copies."""

    id: str
    description: str
    kind: Kind
    args: tuple[str, ...] = ()  # preset: (name, scale); tree: (dirwidth, files, size)
    approx_bytes: int = 0  # for sizing the XFS image and the tmpfs
    hashes: bool = False  # verify content hashes of every copy (small sets only)
    large: bool = False  # large files: check reflink sharing where possible
    remove: tuple[str, ...] = ()  # relative paths deleted after generation

    def recipe(self, filegen: str = "rcp-filegen") -> str:
        """The command that makes this fileset (as shown in the report)."""
        if self.kind == "preset":
            name, scale = self.args
            cmd = f"{filegen} --seed {SEED} --preset {name} --scale {scale} ROOT"
        elif self.kind == "tree":
            cmd = f"{filegen} --seed {SEED} ROOT {' '.join(self.args)}"
        else:
            cmd = "tar -xf /usr/src/linux-source-*.tar.xz (newest)"
        if self.remove:
            cmd += f"; rm ROOT/{' ROOT/'.join(self.remove)}"
        return cmd


def _preset(
    fid: str,
    desc: str,
    name: str,
    scale: str,
    size: int,
    *,
    hashes: bool = False,
    large: bool = False,
) -> Fileset:
    return Fileset(fid, desc, "preset", (name, scale), size, hashes=hashes, large=large)


def _tree(
    fid: str, desc: str, width: str, files: str, fsize: str, size: int
) -> Fileset:
    return Fileset(fid, desc, "tree", (width, files, fsize), size)


FILESETS: Final[dict[str, Fileset]] = {
    f.id: f
    for f in (
        Fileset(
            "tiny",
            "20 x 1 KiB in 4 dirs (tests; a tool's fixed cost)",
            "tree",
            ("2,2", "5", "1K"),
            20 * KiB,
            hashes=True,
        ),
        _preset(
            "1k_50k",
            "50,000 x 1 KiB in 100 dirs",
            "1k",
            "0.5",
            50_000 * KiB,
            hashes=True,
        ),
        _preset(
            "1k_10k",
            "10,000 x 1 KiB in 100 dirs",
            "1k",
            "0.1",
            10_000 * KiB,
            hashes=True,
        ),
        _preset(
            "1k_2k", "2,000 x 1 KiB in 100 dirs", "1k", "0.02", 2_000 * KiB, hashes=True
        ),
        _preset(
            "1k_1k", "1,000 x 1 KiB in 100 dirs", "1k", "0.01", 1_000 * KiB, hashes=True
        ),
        _preset(
            "1k_200", "200 x 1 KiB in 100 dirs", "1k", "0.002", 200 * KiB, hashes=True
        ),
        _preset(
            "1k_100", "100 x 1 KiB in 100 dirs", "1k", "0.001", 100 * KiB, hashes=True
        ),
        _preset("1m_1000", "1,000 x 1 MiB in 10 dirs", "1m", "1", 1000 * MiB),
        _preset("1m_500", "500 x 1 MiB in 10 dirs", "1m", "0.5", 500 * MiB),
        _preset("1m_200", "200 x 1 MiB in 10 dirs", "1m", "0.2", 200 * MiB),
        _preset("1m_100", "100 x 1 MiB in 10 dirs", "1m", "0.1", 100 * MiB),
        _preset("1m_50", "50 x 1 MiB in 10 dirs", "1m", "0.05", 50 * MiB),
        _preset("100m_10", "10 x 100 MiB", "100m", "1", 1000 * MiB, large=True),
        _preset("100m_3", "3 x 100 MiB", "100m", "0.3", 300 * MiB, large=True),
        _preset("1g_4", "4 x 1 GiB", "1g", "1", 4 * GiB, large=True),
        _preset("1g_2", "2 x 1 GiB", "1g", "0.5", 2 * GiB, large=True),
        _preset("1g_1", "1 x 1 GiB", "1g", "0.25", GiB, large=True),
        Fileset(
            "mixed",
            "rcp-filegen mixed: 3,006 files of 100 B-64 MiB in 87 dirs, 4 symlinks, "
            "a hard link, a sparse file (FIFO removed)",
            "preset",
            ("mixed", "1"),
            170 * MiB,
            hashes=True,
            remove=("special/fifo",),
        ),
        Fileset(
            "linux",
            "Linux source tree from Debian linux-source (~78,600 files, 56 symlinks)",
            "linux",
            approx_bytes=1600 * MiB,
        ),
        _tree("empty_10k", "10,000 empty files in 100 dirs", "10,10", "100", "0", 0),
        _tree(
            "empty_100k", "100,000 empty files in 1,000 dirs", "100,10", "100", "0", 0
        ),
        _tree(
            "empty_1m", "1,000,000 empty files in 10,000 dirs", "100,100", "100", "0", 0
        ),
    )
}


def linux_tarball() -> Path | None:
    """The newest ``/usr/src/linux-source-*.tar.xz``, or ``None`` when not installed."""
    found = sorted(LINUX_TARBALLS.glob("linux-source-*.tar.xz"))
    return found[-1] if found else None


def materialize(
    fileset: Fileset, base: Path, *, filegen: str, linux_cache: Path | None = None
) -> Path:
    """Make ``fileset`` at ``base/<id>`` (or reuse it) and return that path.

    ``linux_cache`` is a directory on another filesystem where the Linux tree is (or
    will be) extracted once; ``base/linux`` is then a ``cp -a`` of it. Without it the
    tarball is extracted straight into ``base``.
    """
    base.mkdir(parents=True, exist_ok=True)
    root = base / fileset.id
    stamp = base / f".{fileset.id}.json"
    recipe = fileset.recipe()
    source: Path | None = None
    tarball: Path | None = None
    if fileset.kind == "linux":
        if linux_cache is not None and linux_cache != base:
            source = materialize(fileset, linux_cache, filegen=filegen)
            recipe = f"cp -a {source} ROOT"
        else:
            tarball = linux_tarball()
            if tarball is None:
                raise FilesetError(
                    "no /usr/src/linux-source-*.tar.xz: apt-get install linux-source"
                    " (make bench installs it)"
                )
            recipe = f"tar -xf {tarball}"
    if root.exists() and _stamp_matches(stamp, recipe):
        return root
    # Made in place (never renamed afterwards: the mixed preset has an absolute
    # symlink into its own tree); the stamp, written last, marks it complete.
    stamp.unlink(missing_ok=True)
    _remove(root)
    if fileset.kind == "linux" and source is not None:
        _run(["cp", "-a", str(source), str(root)])
    elif fileset.kind == "linux":
        assert tarball is not None
        root.mkdir()
        # The tarball holds one directory (linux-source-6.1/): strip it.
        _run(["tar", "-xf", str(tarball), "-C", str(root), "--strip-components=1"])
    else:
        _run(_filegen_argv(fileset, filegen, root))
    for rel in fileset.remove:
        (root / rel).unlink()
    stamp.write_text(json.dumps({"recipe": recipe}) + "\n")
    return root


def _filegen_argv(fileset: Fileset, filegen: str, root: Path) -> list[str]:
    if fileset.kind == "preset":
        name, scale = fileset.args
        return [
            filegen,
            "--seed",
            str(SEED),
            "--preset",
            name,
            "--scale",
            scale,
            str(root),
        ]
    return [filegen, "--seed", str(SEED), str(root), *fileset.args]


def _stamp_matches(stamp: Path, recipe: str) -> bool:
    try:
        return bool(json.loads(stamp.read_text()).get("recipe") == recipe)
    except (OSError, ValueError):
        return False


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _run(argv: list[str]) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise FilesetError(
            f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-500:]}"
        )
