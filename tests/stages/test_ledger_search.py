"""The search for the most items that fit (the ledger's, and a summary's cut: ``budget.last_true``):
the same answer as halving the whole range, from any starting guess, and few counts from a good one."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from compaction.budget import last_true


def halving(lo: int, hi: int, holds: Callable[[int], bool]) -> int:
    """The largest ``k`` in ``(lo, hi]`` for which ``holds(k)``, else ``lo``, by a plain halving."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if holds(mid) else (lo, mid - 1)
    return lo


@given(st.integers(0, 300), st.integers(-5, 305), st.integers(-5, 310))
def test_any_guess_finds_what_halving_finds(hi: int, boundary: int, guess: int) -> None:
    asked: list[int] = []

    def holds(k: int) -> bool:
        asked.append(k)
        return k <= boundary

    expected = halving(0, hi, lambda k: k <= boundary)
    assert last_true(0, hi, holds, guess) == expected
    assert last_true(0, hi, holds) == expected
    assert 0 not in asked  # the low end is never asked


def test_a_good_guess_costs_two_questions() -> None:
    asked: list[int] = []

    def holds(k: int) -> bool:
        asked.append(k)
        return k <= 417

    assert last_true(0, 999, holds, 417) == 417
    assert asked == [417, 418]
    asked.clear()
    assert last_true(0, 999, holds, 418) == 417
    assert asked == [418, 417]
