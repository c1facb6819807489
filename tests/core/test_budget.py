"""The process's transfer budget (rcp_core/run/budget.py): bytes held never pass
the limit, a take waits until they fit, one larger than the limit is granted alone."""

from __future__ import annotations

import threading

import pytest

from rcp_core.run.budget import Budget, transfer_budget


def _taken_in_thread(budget: Budget, size: int) -> threading.Event:
    """Set once a thread's ``take(size)`` returns."""
    taken = threading.Event()

    def take() -> None:
        budget.take(size)
        taken.set()

    threading.Thread(target=take, daemon=True).start()
    return taken


def test_a_take_waits_until_its_bytes_fit() -> None:
    budget = Budget(100)
    assert budget.take(60) == 60
    taken = _taken_in_thread(budget, 50)
    assert not taken.wait(0.2)  # 110 would pass the limit
    budget.give(20)
    assert taken.wait(5)
    assert budget.held == 90
    assert budget.peak == 90


def test_a_take_larger_than_the_limit_is_granted_alone() -> None:
    budget = Budget(100)
    budget.take(1)
    taken = _taken_in_thread(budget, 500)
    assert not taken.wait(0.2)
    budget.give(1)
    assert taken.wait(5)
    assert budget.held == 500
    budget.give(500)
    assert budget.held == 0


def test_nothing_is_given_back_that_was_not_held() -> None:
    budget = Budget(100)
    budget.take(10)
    with pytest.raises(ValueError, match="11 bytes given back, 10 held"):
        budget.give(11)
    assert budget.take(0) == 0
    budget.give(0)
    assert budget.held == 10


def test_a_budget_needs_a_limit_and_the_process_has_one() -> None:
    with pytest.raises(ValueError, match="positive limit"):
        Budget(0)
    assert transfer_budget() is transfer_budget()
    assert transfer_budget().limit == 256 << 20
