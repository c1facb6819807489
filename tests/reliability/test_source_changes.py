"""A source that changes under the copy: files grow, shrink and vanish, become
directories or symlinks, directories are renamed -- while ``rcp`` reads them.

The source is on a latencyfs mount (0.3 ms per request, so the copy takes long
enough to be overtaken); a mutator changes the backing directly, at random moments
while ``rcp --delete`` (a mirror: what keeps a copy of a changing tree) runs, and
records every path it touched. Then:

- no crash, no hang: ``rcp`` ends within :data:`RUN_BOUND`, with status 0 or 1 and
  no traceback;
- everything the mutator did not touch (nor holds a touched path) is copied exactly;
- nothing half-written looks complete (checked against the source as it ended);
- the same command, once the source is still, yields an exact copy.

Figure: mutations made / mutations survived (in runs that kept all four).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from benchmarks.latencyfs import mounted
from support.nobody import RCP
from support.reliability import (
    Figure,
    Scale,
    looks_complete_but_is_not,
    mixed_tree,
    published,
)
from support.treecmp import TreeCompare
from support.treespec import make_tree

pytestmark = [pytest.mark.privileged, pytest.mark.slow]

RUN_BOUND = 180.0
MUTATIONS = ("grow", "shrink", "vanish", "to_dir", "to_symlink", "rename_dir")


class Mutator(threading.Thread):
    """Changes ``root`` (the backing of the copy's source) until stopped; ``touched``
    holds the relative paths it changed, created or removed."""

    def __init__(self, root: Path, rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.root, self.rng = root, rng
        self.touched: set[str] = set()
        self.made = 0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(self.rng.uniform(0.005, 0.05)):
            # A hard-linked file changes under each of its names: leave those be.
            files = [
                p
                for p in self.root.rglob("*")
                if p.is_file() and not p.is_symlink() and p.stat().st_nlink == 1
            ]
            dirs = [p for p in (self.root / "small").iterdir() if p.is_dir()]
            if not files:
                return
            target = self.rng.choice(files)
            kind = self.rng.choice(MUTATIONS)
            try:
                self.mutate(kind, target, dirs)
            except OSError:
                continue  # raced with an earlier mutation: nothing changed
            self.made += 1

    def mutate(self, kind: str, target: Path, dirs: list[Path]) -> None:
        rel = str(target.relative_to(self.root))
        if kind == "rename_dir" and dirs:
            moved = self.rng.choice(dirs)
            to = moved.with_name(moved.name + "-renamed")
            self.touched |= {
                str(moved.relative_to(self.root)),
                str(to.relative_to(self.root)),
            }
            moved.rename(to)
            return
        self.touched.add(rel)
        if kind == "grow":
            with open(target, "ab") as f:
                f.write(os.urandom(self.rng.randint(1, 200_000)))
        elif kind == "shrink":
            os.truncate(target, target.stat().st_size // 2)
        elif kind == "vanish":
            target.unlink()
        elif kind == "to_dir":
            target.unlink()
            target.mkdir()
            (target / "inside").write_bytes(b"now a directory")
        else:
            target.unlink()
            target.symlink_to("../elsewhere")


def path_of(difference: str) -> str:
    """The relative path a ``compare_trees`` line is about (its leading repr)."""
    quoted = difference.split(": ", 1)[0]
    return quoted[1:-1]


def untouched_differences(differences: list[str], touched: set[str]) -> list[str]:
    """The differences about paths the mutator neither touched nor holds inside."""

    def related(path: str) -> bool:
        return any(
            path == t
            or path.startswith(f"{t}/")
            or t.startswith(f"{path}/")
            or path == "."
            for t in touched
        )

    return [d for d in differences if not related(path_of(d))]


@pytest.mark.timeout(1800)  # make stress: 40 copies overtaken
def test_a_changing_source_is_copied_honestly(
    tmp_path: Path, scale: Scale, figures: list[Figure], tree_compare: TreeCompare
) -> None:
    figure = published(
        figures, "source changes", "files grow, shrink, vanish, change type; dirs move"
    )
    rng = random.Random(31)
    backing, mnt = tmp_path / "backing", tmp_path / "mnt"
    mnt.mkdir()
    for trial in range(scale.trials(fast=2, full=40)):
        shutil.rmtree(backing, ignore_errors=True)
        backing.mkdir()
        make_tree(backing / "src", mixed_tree(seed=trial))
        dst = tmp_path / "dst"
        shutil.rmtree(dst, ignore_errors=True)
        with mounted(backing, mnt, delay_ms=0.3):
            src = mnt / "src"
            mutator = Mutator(backing / "src", random.Random(rng.random()))
            argv = [*RCP, "--delete", str(src), str(dst)]
            proc = subprocess.Popen(
                argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            )
            time.sleep(rng.uniform(0.0, 0.3))
            mutator.start()
            try:
                _, stderr = proc.communicate(timeout=RUN_BOUND)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                figure.failed(f"trial {trial}: rcp hung", hang=True)
                continue
            finally:
                mutator.halt.set()
                mutator.join()
            figure.tried += mutator.made
            problems = []
            if proc.returncode not in (0, 1) or "Traceback" in stderr:
                figure.failed(
                    f"trial {trial}: exit {proc.returncode} {stderr[-300:]}", crash=True
                )
                continue
            differences = untouched_differences(tree_compare(src, dst), mutator.touched)
            if differences:
                problems.append(f"untouched entries differ: {differences[:3]}")
            if looks_complete_but_is_not(src, dst):
                problems.append("a half-written file looks complete")
            rerun = subprocess.run(
                argv, capture_output=True, text=True, timeout=RUN_BOUND, check=False
            )
            if rerun.returncode != 0 or tree_compare(src, dst):
                problems.append(
                    f"the rerun: exit {rerun.returncode} {tree_compare(src, dst)[:3]}"
                )
        if problems:
            figure.failed(f"trial {trial}: {'; '.join(problems)}", lost=True)
        else:
            figure.survived += mutator.made
    assert figure.tried > 0, "the mutator changed nothing during the copies"
    assert figure.clean, figure.notes
