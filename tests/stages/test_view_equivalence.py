"""The summarizer view's faster path sends what the straightforward one sends.

The view (``fit_results`` and its helpers) finds each result's salient lines, words and ranking once
and shares fitted messages between its rounds. Here a reference written the plain way (every
quantity recomputed where it is used, as the view was first written) is swapped in, and the
requests the model receives, and the fitted results for many rooms, must be the same.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

import compaction.stages.fit as fit
import compaction.stages.prune as prune
import compaction.stages.view as view
from compaction import CompactionConfig, Compactor
from compaction.patterns import find_error_lines, head_cut, reports_quantity, tail_cut
from compaction.patterns.references import ID_RE, PATH_RE, URL_RE, id_value, path_value
from compaction.redact import redact_if_needed
from compaction.render import CLEARED_PREFIX
from compaction.stages.fit import MIN_RESULT_CHARS, fit_results
from compaction.stages.prune import PruneSettings
from compaction.testing import FakeProvider
from compaction.testing.transcripts import generate
from compaction.transcript import Message, Part, ToolResultPart
from tests.support.installed import require

require("litellm")  # the test extra installs it: a failure in CI, a skip elsewhere

# -- the reference: the view written the plain way ------------------------------------------------


def ref_kind(line: str) -> str | None:
    """Every check made on the line; its kind is the first that holds: a URL, a path, an id (as the
    important-line scan marks them), a measurement."""
    checks = {
        "url": URL_RE.search(line) is not None,
        "path": any(path_value(m) is not None for m in PATH_RE.finditer(line)),
        "id": any(id_value(m) is not None for m in ID_RE.finditer(line)),
        "measure": reports_quantity(line) and redact_if_needed(line) == line,
    }
    return next((kind for kind, holds in checks.items() if holds), None)


def ref_candidates(text: str, common: frozenset[str]) -> tuple[list[str], list[str]]:
    """Every line read: the error lines, and the salient lines with a word no other result has,
    with their kinds; at most 200 distinct (errors first when a line is both), each kind taking
    a fair share when there are more: the smallest kinds whole, in the order kinds first appear,
    a larger one its densest lines."""
    scanned = text[: prune._MEASURE_SCAN_CHARS]
    errors = find_error_lines(scanned)
    picked: list[tuple[bool, int, str, str]] = []
    for index, raw in enumerate(scanned.split("\n")):
        line = raw.strip()
        if not line:
            continue
        if line in errors:
            picked.append((False, index, line, "error"))
        elif ref_news(raw, common) and (kind := ref_kind(raw)) is not None:
            picked.append((True, index, line, kind))
    first: dict[str, tuple[int, str]] = {}
    for _, index, line, kind in sorted(picked):
        first.setdefault(line, (index, kind))
    own = set(fit._WORD.findall(scanned)) - common
    text_news = {w for w in own if ":" not in w or fit._is_news_word(w, common)}
    kinds_seen = list(dict.fromkeys(kind for _, kind in first.values()))
    groups = {k: [(i, line) for line, (i, kind) in first.items() if kind == k] for k in kinds_seen}
    left, taken = fit._SALIENT_CANDIDATES, []
    by_size = sorted(kinds_seen, key=lambda k: len(groups[k]))
    for done, k in enumerate(by_size):
        share = min(len(groups[k]), left // (len(by_size) - done))
        # a kind over its share keeps its lines showing the most of the text's news words per
        # character, earlier first
        density = {
            i: len(text_news & set(fit._WORD.findall(line))) / (len(line if len(line) <= 300 else line[:299] + "…") + 1)
            for i, line in groups[k]
        }
        taken += sorted(groups[k], key=lambda item: (-density[item[0]], item[0]))[:share]
        left -= share
    chosen = sorted(taken)
    return [line for _, line in chosen], [first[line][1] for _, line in chosen]


_REF_LOCATION = re.compile(r"(?<=[^\d:])(?::\d+)+(?::|$)")


def ref_news(line: str, common: frozenset[str]) -> set[str]:
    """The line's words no other result has; a file's place ("a/b.py:12:") counts as the file."""
    news: set[str] = set()
    for word in fit._WORD.findall(line):
        if word in common:
            continue
        if "://" in word or not _REF_LOCATION.search(word):
            news.add(word)
        else:
            news |= {piece for piece in _REF_LOCATION.split(word) if len(piece) >= 4 and piece not in common}
    return news


def ref_trim(text: str, limit: int, *, common: frozenset[str]) -> str | None:
    if len(text) <= limit:
        return None
    candidates, kinds = ref_candidates(text, common)
    errors = [kind == "error" for kind in kinds]

    # First the best line of each kind with news (error, measure, url, path, id), then each next
    # line: the most words not yet shown per character (errors first, then in order).
    news = [ref_news(line, common) for line in candidates]
    costs = [len(line if len(line) <= 300 else line[:299] + "…") + 1 for line in candidates]
    shown_words: set[str] = set()
    adding: list[tuple[int, str]] = []
    left = list(range(len(candidates)))
    for kind in ("error", "measure", "url", "path", "id"):
        keys = [(-len(news[i] - shown_words) / costs[i], i) for i in left if kinds[i] == kind]
        best = min((k for k in keys if k[0] < 0), default=None)
        if best is not None:
            adding.append((best[1], candidates[best[1]]))
            shown_words |= news[best[1]]
            left.remove(best[1])
    while True:
        keys = [(-len(news[i] - shown_words) / costs[i], not errors[i], i) for i in left]
        best = min((k for k in keys if k[0] < 0), default=None)
        if best is None:
            break
        adding.append((best[2], candidates[best[2]]))
        shown_words |= news[best[2]]
        left.remove(best[2])
    repeating = [(i, candidates[i]) for i in sorted(left, key=lambda i: (not errors[i], i))]
    room = max(0, int(limit * fit._SALIENT_SHARE))
    kept: list[tuple[int, str]] = []
    for order, line in adding + repeating:
        shown = line if len(line) <= 300 else line[:299] + "…"
        if len(shown) + 1 > room:
            continue
        kept.append((order, shown))
        room -= len(shown) + 1
    kept.sort()
    rest = max(0, limit - sum(len(line) + 1 for _, line in kept))
    head_end, head_mark = head_cut(text, rest * 2 // 3)
    tail_start, tail_mark = tail_cut(text, len(text) - (rest - rest * 2 // 3))
    tail_start = max(tail_start, head_end)
    head = text[:head_end] + head_mark
    tail = tail_mark + text[tail_start:] if tail_start < len(text) else ""
    lines = [line for _, line in kept if line not in head and line not in tail]
    pieces = [head] if head else []
    pieces.append("[…]")
    if lines:
        pieces += [*lines, "[…]"] if tail else lines
    if tail:
        pieces.append(tail)
    return "\n".join(pieces)


def ref_weights(texts: Sequence[str]) -> tuple[frozenset[str], list[float]]:
    long = [t for t in texts if len(t) > MIN_RESULT_CHARS]
    seen: dict[str, int] = {}
    common: set[str] = set()
    for index, text in enumerate(long):
        for word in set(fit._WORD.findall(text[: prune._MEASURE_SCAN_CHARS])):
            if seen.setdefault(word, index) != index:
                common.add(word)

    def news(text: str) -> bool:
        lines, _ = ref_candidates(text, frozenset(common))
        return any(ref_news(line, frozenset(common)) for line in lines)

    weights = [fit._NEWS_WEIGHT if len(t) > MIN_RESULT_CHARS and news(t) else 1.0 for t in texts]
    return frozenset(common), weights


def ref_limit(size: int, level: float, weight: float) -> int:
    share = max(MIN_RESULT_CHARS, int(level * weight))
    return size if size <= share * 1.25 else share


def ref_level(sizes: Sequence[int], weights: Sequence[float], room: int) -> float:
    def used(level: float) -> int:
        return sum(ref_limit(s, level, w) for s, w in zip(sizes, weights, strict=True))

    low, high = 0.0, float(max(sizes, default=0))
    for _ in range(40):
        middle = (low + high) / 2
        if used(middle) <= room:
            low = middle
        else:
            high = middle
    return low


def ref_fit(
    messages: Sequence[Message], *, room_chars: int | None, settings: PruneSettings, cache: Any = None
) -> tuple[tuple[Message, ...], int]:
    candidates = [p.text for m in messages for p in m.tool_results if not p.text.startswith(CLEARED_PREFIX)]
    sizes = [fit._soft_size(text, settings) for text in candidates]
    if room_chars is None or sum(sizes) <= room_chars:
        return tuple(prune._trim_message(m, settings) for m in messages), -1
    common, weights = ref_weights(candidates)
    level = ref_level(sizes, weights, room_chars)
    limits = iter([ref_limit(size, level, w) for size, w in zip(sizes, weights, strict=True)])
    out: list[Message] = []
    for message in messages:
        parts: list[Part] = []
        for part in message.parts:
            if not isinstance(part, ToolResultPart) or part.text.startswith(CLEARED_PREFIX):
                parts.append(part)
                continue
            limit = next(limits)
            soft = (
                prune._soft_trimmed(part, message.id, settings)
                if fit._soft_size(part.text, settings) <= limit
                else None
            )
            if soft is not None and len(soft.text) <= limit:
                parts.append(soft)
                continue
            cut = ref_trim(part.text, limit, common=common)
            parts.append(part if cut is None else prune._with_text(part, cut))
        out.append(prune._if_changed(message, tuple(parts)))
    return tuple(out), int(level)


# -- the checks ------------------------------------------------------------------------------------


def _requests(messages: list[dict[str, Any]]) -> list[str]:
    with FakeProvider() as server:
        from compaction.summarizers.llm import LLMSummarizer

        summarizer = LLMSummarizer("openai/bench", api_base=server.openai_api_base, api_key="k", attempts=1)
        # A window small enough that the zone's results must share a room and be cut.
        Compactor("gpt-4o", summarizer, CompactionConfig(window=24_000)).compact(messages)
        bodies = [r.body.get("messages") for r in server.completion_requests]
    # Chunks are sent concurrently: their order of arrival is no part of what is sent.
    return sorted(json.dumps(b, sort_keys=True) for b in bodies)


@pytest.mark.parametrize("size", [400])
def test_model_prompts_equal_the_reference_view(size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    messages = generate("coding", size, seed=1, format="openai").messages
    snapshot = json.dumps(messages, sort_keys=True)
    fast = _requests(messages)
    with monkeypatch.context() as patch:
        patch.setattr(view, "fit_results", ref_fit)
        slow = _requests(messages)
    assert len(fast) >= 2
    assert any("[\\u2026]" in body for body in fast), "the view must have cut results to be a check"
    assert fast == slow
    assert json.dumps(messages, sort_keys=True) == snapshot


def _zone(size: int) -> list[Message]:
    from compaction.adapters import to_canonical

    return list(to_canonical(generate("coding", size, seed=2, format="openai").messages).messages)


def test_fitted_results_equal_the_reference_for_many_rooms() -> None:
    zone = _zone(300)
    settings = PruneSettings()
    total = sum(len(p.text) for m in zone for p in m.tool_results)
    cache: fit.FitCache = {}
    for share in (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.8, 1.5):
        room = int(total * share)
        expected, expected_level = ref_fit(zone, room_chars=room, settings=settings)
        got, level = fit_results(zone, room_chars=room, settings=settings, cache=cache)
        assert level == expected_level
        assert [m.model_dump() for m in got] == [m.model_dump() for m in expected]


def test_rounds_with_the_same_limits_share_fitted_messages() -> None:
    zone = _zone(200)
    settings = PruneSettings()
    room = sum(len(p.text) for m in zone for p in m.tool_results) // 10
    cache: fit.FitCache = {}
    first, _ = fit_results(zone, room_chars=room, settings=settings, cache=cache)
    again, _ = fit_results(zone, room_chars=room, settings=settings, cache=cache)
    changed = [i for i, (a, m) in enumerate(zip(first, zone, strict=True)) if a is not m]
    assert changed, "some result must have been cut"
    assert all(first[i] is again[i] for i in changed)
    # Without the cache each call builds its own (equal) messages.
    fresh, _ = fit_results(zone, room_chars=room, settings=settings)
    assert all(fresh[i] is not first[i] and fresh[i] == first[i] for i in changed)


# Lines of tool output that exercise the ranking: paths, ids, errors, measurements, words repeated
# within a line and across results (common words), places in a file (path:line) and URLs with ports.
_LINES = [
    "src/app/main.py src/app/main.py",
    "see src/lib/util.py and src/lib/util.py again",
    "ValueError: bad token in src/parse.py",
    "Traceback (most recent call last):",
    "commit: 3f9a2c1b7e4d",
    "PAY-7721 PAY-7721 closed",
    "https://example.org/a/b https://example.org/a/b",
    "p95 latency: 230 ms",
    "Ran 120 tests in 3.4s",
    "FAILED tests/test_x.py::test_y - AssertionError",
    "plain words only here",
    "x" * 350 + " src/very/long/line.py",
    "deploy id dep-4451 to https://deploy.example.com/r/4451",
    "src/app/main.py:88: KeyError",
    "src/app/main.py:120: in handler",
    "lib/y.py:7:def handler_name(request):",
    "health at http://localhost:8080/health",
]


@hypothesis_settings(max_examples=150, deadline=None)
@given(
    picks=st.lists(st.sampled_from(range(len(_LINES) + 1)), min_size=1, max_size=40),
    common_picks=st.lists(st.sampled_from(range(len(_LINES))), max_size=6),
    limit=st.integers(min_value=0, max_value=3_000),
)
def test_trim_to_chars_equals_the_reference(picks: list[int], common_picks: list[int], limit: int) -> None:
    text = "\n".join(_LINES[i] if i < len(_LINES) else "filler line " * 5 for i in picks)
    common = frozenset(w for i in common_picks for w in fit._WORD.findall(_LINES[i]))
    assert fit.trim_to_chars(text, limit, common=common) == ref_trim(text, limit, common=common)


@hypothesis_settings(max_examples=100, deadline=None)
@given(
    texts=st.lists(
        st.lists(st.sampled_from(range(len(_LINES))), min_size=1, max_size=12).map(
            lambda picks: "\n".join(_LINES[i] for i in picks)
        ),
        min_size=1,
        max_size=12,
    ),
    room=st.integers(min_value=0, max_value=20_000),
)
def test_news_weights_and_level_equal_the_reference(texts: list[str], room: int) -> None:
    common, weights = fit._news_weights(tuple(texts))
    expected_common, expected_weights = ref_weights(texts)
    assert common == expected_common
    assert list(weights) == expected_weights
    sizes = [len(t) for t in texts]
    assert fit._level(sizes, weights, room) == ref_level(sizes, weights, room)


def test_rendered_counts_shared_between_calls_follow_the_message_before() -> None:
    """A result right under its call renders without a marker of its own: its count depends on the
    message before it. Calls sharing a cache (the view's rounds) get what fresh calls get, for the
    same result after its call and after another message."""
    from compaction.tokens import TiktokenCounter
    from compaction.transcript import TextPart, ToolCallPart

    counter = TiktokenCounter("o200k_base")
    call = Message(role="assistant", id="a1", parts=(ToolCallPart(id="c1", name="bash", arguments='{"cmd": "ls"}'),))
    result = Message(role="tool", id="t1", parts=(ToolResultPart(call_id="c1", content="a.py\nb.py"),))
    other = Message(role="user", id="u1", parts=(TextPart(text="go on"),))
    cache: view.RenderedCache = {}
    under_call = view.rendered_counts(counter, [call, result], cache)
    elsewhere = view.rendered_counts(counter, [other, result], cache)
    assert under_call[1] != elsewhere[1]  # the marker makes the difference
    assert list(under_call) == list(view.rendered_counts(counter, [call, result]))
    assert list(elsewhere) == list(view.rendered_counts(counter, [other, result]))
    assert list(view.rendered_counts(counter, [call, result], cache)) == list(under_call)
