"""The summarizer view's rounds and its salient scan: fewer steps, the same choices.

The view fits tool results to a room in rendered tokens by trying a room in characters, counting,
and trying again. Each round re-cuts and re-counts every cut result, so a round saved is CPU saved
before the first model call. The salient scan only needs its first 200 important lines, so it does
not cut out the rest.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from compaction.patterns import important_and_error_lines
from compaction.stages.view import _next_room_chars


def _rendered_tokens(room_chars: float) -> float:
    """The results' rendered tokens for a room in characters, as the rounds of a 5,000-message
    coding zone saw them: 0.17 tokens a character more, where the tokens already shown average 0.33
    a character (results shown whole, and each cut result's marks, do not grow with the room)."""
    return 65_000 + 0.17 * room_chars


def _rounds_to_reach(target: float, first_room: int, step: str) -> int:
    tried: list[tuple[int, int]] = []
    room = first_room
    for rounds in range(1, 20):
        tokens = _rendered_tokens(room)
        if abs(tokens - target) <= 0.01 * target:
            return rounds
        tried.append((room, int(tokens)))
        room = _next_room_chars(tried, target) if step == "line" else int(room * target / tokens)
    return 20


def test_rounds_along_the_last_two_reach_the_room_sooner_than_scaling_the_last() -> None:
    target = 152_000.0
    first_room = 403_000  # a first guess that undershoots: the usual case
    along_the_line = _rounds_to_reach(target, first_room, "line")
    scaled = _rounds_to_reach(target, first_room, "scaled")
    assert along_the_line <= 3
    assert along_the_line < scaled  # the curve is one where the old step took longer


def test_one_round_or_a_flat_line_scales_the_last_round() -> None:
    assert _next_room_chars([(100_000, 20_000)], 30_000) == 150_000
    # Two rounds whose tokens did not rise: no line to follow, so the last round is scaled.
    assert _next_room_chars([(100_000, 20_000), (120_000, 20_000)], 30_000) == 180_000
    assert _next_room_chars([(100_000, 20_000), (100_000, 21_000)], 30_000) == int(100_000 * 30_000 / 21_000)


def test_an_overshoot_steps_back_between_the_rounds() -> None:
    room = _next_room_chars([(100_000, 20_000), (200_000, 40_000)], 30_000)
    assert room == 150_000


_LINES = st.sampled_from(
    [
        "plain words only",
        "see src/app/main.py for details",
        "ValueError: bad value",
        "Traceback (most recent call last):",
        "commit 3f9a2c1b7e4d0a1b2c3d",
        "fetched https://example.com/a/b",
        '  File "lib/util.py", line 12, in run',
        "PAY-1234 is open",
        "",
        "ok",
    ]
)


@given(
    st.lists(st.tuples(_LINES, st.integers(0, 999)), max_size=400),
    st.integers(0, 60),
)
def test_a_scan_that_stops_at_its_limit_chooses_the_same_lines(lines: list[tuple[str, int]], limit: int) -> None:
    # Numbered lines: many distinct important lines, so the limit is often reached before the end.
    text = "\n".join(f"{line} {n}" if line else line for line, n in lines)
    chosen, found, errors = important_and_error_lines(text, limit)
    early, counted, early_errors = important_and_error_lines(text, limit, count_all=False)
    assert (early, early_errors) == (chosen, errors)
    assert counted == min(found, max(limit, 0)) or (limit <= 0 and counted <= 1)
