"""The suite drives ``rcp`` through its own ``main`` in this process
(:mod:`support.rcprun`); this checks that it does what the ``rcp`` program does: the
same exit status and stderr, and the same copy, for a refusal and for a copy."""

from __future__ import annotations

import pytest

from support import rcprun
from support.pairs import TREE, Pair

LOCAL_FILE = pytest.param(("local", "file"), id="local-file")


@pytest.mark.parametrize("flags", [("--delete",), ()], ids=["refused", "copied"])
@pytest.mark.parametrize("pair", [LOCAL_FILE], indirect=True)
def test_the_in_process_front_end_is_the_program(
    pair: Pair, flags: tuple[str, ...]
) -> None:
    src = pair.source(TREE)
    inside, program = pair.target("inside"), pair.target("program")
    ran = rcprun.rcp([*flags, pair.src.operand(src), pair.dst.operand(inside)])
    started = rcprun.start([*flags, pair.src.operand(src), pair.dst.operand(program)])
    out, err = started.communicate(timeout=60)
    assert (started.returncode, err) == (ran.code, ran.err), out
    assert pair.dst.exists(inside) == pair.dst.exists(program) == (ran.code == 0)
    if ran.code == 0:
        assert pair.differences(src, inside) == pair.differences(src, program) == []
