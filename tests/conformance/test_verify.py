"""``--verify checksum`` on every pair: a good copy is proven the same, and a copy
that differs from its source fails the run, naming the difference.

The difference is one the copy itself leaves: under ``-o`` a destination file of the
source's size (and mtime, where both sides keep one) is judged identical and left as
it is, so only the verification, which reads the bytes, sees that they differ.
"""

from __future__ import annotations

import json
import time

import pytest

from support.backends import StoreBackend
from support.capabilities import Feature, Support
from support.pairs import T0, TREE, Pair, cases
from support.treespec import File


@pytest.mark.parametrize("pair", cases(Feature.VERIFY, Support.YES), indirect=True)
def test_a_good_copy_is_verified_the_same(pair: Pair) -> None:
    """Exit 0, and the summary's ``verified`` block says the trees are the same,
    every file hashed."""
    src, dst = pair.source(TREE), pair.target()
    run = pair.copy("--verify", "checksum", source=src, destination=dst)
    assert run.summary is not None
    verified = run.summary["verified"]
    assert (verified["mode"], verified["same"]) == ("checksum", True), verified
    assert verified["files_hashed"] >= 3, verified


@pytest.mark.parametrize("pair", cases(Feature.VERIFY, Support.YES), indirect=True)
def test_bytes_the_copy_left_different_fail_the_verification(pair: Pair) -> None:
    """``-o --verify checksum`` over a file the copy judged identical (size and
    mtime) but whose bytes differ: exit 1, a JSON line naming it as a ``content``
    difference on stdout, one line on stderr."""
    src = pair.source(TREE)
    if all(isinstance(b, StoreBackend) and b.clock for b in (pair.src, pair.dst)):
        time.sleep(1 - time.time() % 1)  # written after its source, as in real use
    same_size = bytes(reversed(b"alpha\n"))
    dst = pair.existing({"a.txt": File(same_size, mode=0o644, mtime_ns=T0)})
    run = pair.rcp("-o", "--verify", "checksum", sources=[src], destination=dst)
    assert pair.dst.read(pair.dst.join(dst, "a.txt")) == same_size, "not left as is"
    assert run.code == 3, run
    found = [json.loads(line) for line in run.out.splitlines() if line.startswith("{")]
    assert [(d["path"], d["kind"]) for d in found] == [("a.txt", "content")], run
    assert len(run.err.splitlines()) == 1, run
