"""The default offline Compactor on real public agent transcripts (``tests/corpus/``).

Every transcript (SWE-agent and OpenHands trajectories, attribution in ``tests/corpus/README.md``)
is compacted with ``Compactor("gpt-4o")`` (``compact`` runs a manual compaction) and the offline
extractive summarizer at windows of 16,000 and 24,000 tokens (budgets of 8,000 and 12,000; 16,000
is the smallest window the library allows), where the longer ones do not fit, and:

* compaction happened (messages were archived) on every transcript but the three small ones in
  :data:`TOO_SMALL`, where the summary block outweighs the zone it would replace: those are not
  compacted (a compaction that would not shrink the context is not applied), the reason names
  both token counts, and the result is the input, repaired;
* the result fits its budget, by an exact recount of what it returns;
* no tool pair violation (the inputs have real ones: replayed SWE-agent runs reuse call ids, and an
  OpenHands run ends on a call without a result);
* nothing is lost: every input message is in the output unchanged or in ``result.archive``;
* the caller's messages and system prompt are not mutated;
* fidelity: every identifier-like token the summary block shows occurs verbatim in the compacted
  originals (:func:`compaction.fidelity.altered_identifiers` over
  :func:`compaction.fidelity.source_strings`);
* the user's own sentences and the identifier-like tokens of the compacted zone are still in the
  context or one recall search away.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import pytest

from benchmarks.corpus import (
    altered,
    archived_indices,
    content_strings,
    load_corpus,
    not_reduced,
    request_indices,
    request_sentences,
    shown_block,
)
from compaction import CompactionConfig, Compactor
from compaction.adapters import to_canonical
from compaction.fidelity import identifier_tokens
from compaction.pairs import validate
from compaction.recall import MemoryRecallIndex
from compaction.result import CompactionResult
from compaction.testing.transcripts import transcript_text

CORPUS = load_corpus()
WINDOWS = (16_000, 24_000)
CASES = [(name, window) for name, _, _ in CORPUS for window in WINDOWS]
IDS = [f"{name}-{window // 1000}k" for name, window in CASES]
# Transcripts so small that a summary block outweighs what it would replace (tokens of the input ->
# of the compacted context at both windows): compaction is not applied to them. They may compact
# one day (a terser block); every other transcript must compact.
TOO_SMALL = {
    "openhands_rename_file": "290 -> 482 tokens",
    "openhands_vue_todo_app": "3,506 -> 3,666 tokens",
    "swe_agent_humanevalfix_python_0": "2,978 -> 3,051 tokens",
}


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@functools.cache
def _case(name: str, window: int) -> tuple[list[dict[str, Any]], Any, Compactor, CompactionResult]:
    _, messages, system = next(entry for entry in CORPUS if entry[0] == name)
    messages, system = copy.deepcopy(messages), copy.deepcopy(system)
    compactor = Compactor("gpt-4o", None, CompactionConfig(window=window))
    return messages, system, compactor, compactor.compact(messages, system=system)


def test_the_corpus_is_varied() -> None:
    formats = {to_canonical(m, s).format for _, m, s in CORPUS}
    assert formats == {"openai", "anthropic"}
    assert len(CORPUS) >= 8
    assert sum(any(m.get("role") == "tool" for m in messages) for _, messages, _ in CORPUS) >= 3
    needing = [name for name, window in CASES if _case(name, window)[3].tokens_before > _case(name, window)[3].budget]
    assert len(needing) >= 3, needing  # some transcripts do not fit the smaller budget at all


def test_most_of_the_corpus_compacts_at_every_window() -> None:
    for window in WINDOWS:
        compacted = [name for name, _, _ in CORPUS if _case(name, window)[3].compacted]
        assert len(compacted) >= len(CORPUS) - len(TOO_SMALL), (window, compacted)
        assert len(compacted) >= 8, (window, compacted)
        # Every transcript over the budget is among them (it could not be returned as it is).
        over = [name for name, _, _ in CORPUS if _case(name, window)[3].tokens_before > _case(name, window)[3].budget]
        assert set(over) <= set(compacted), (window, over, compacted)


def _assert_the_repaired_input(messages: list[dict[str, Any]], system: Any, result: CompactionResult) -> None:
    """``result`` was not applied: the input as it was, or repaired when its pairs needed it."""
    assert _dumps(result.system) == _dumps(system)
    assert result.messages_removed == 0
    repair = result.record["repair"]
    if not repair["changed"]:
        assert _dumps(result.messages) == _dumps(messages)
        assert result.archive == {}
        return
    # Repaired: the input messages repair left alone, in order, plus what it added (here a result
    # for a call that had none); whatever it took out or rewrote is archived.
    archived = {_dumps(m) for m in result.archive.values()}
    kept = [_dumps(m) for m in messages if _dumps(m) not in archived]
    out = [_dumps(m) for m in result.messages]
    position = 0
    for message in kept:
        position = out.index(message, position) + 1
    added = [m for m in out if m not in set(kept)]
    assert len(added) == len(out) - len(kept)
    assert all(any(call_id in m for call_id in repair["synthesized"]) for m in added), added


@pytest.mark.parametrize(("name", "window"), CASES, ids=IDS)
def test_compacts_fits_and_keeps_pairs(name: str, window: int) -> None:
    messages, system, compactor, result = _case(name, window)
    assert result.tokens_before == compactor.count(messages, system=system)
    assert compactor.count(result.messages, system=result.system) == result.tokens_after
    assert result.exact_counts
    assert result.tokens_after <= result.budget
    assert validate(to_canonical(result.messages, result.system, format=result.format)) == []
    if not result.compacted:
        # Only a small transcript may be left as it is, and only because compacting it would not
        # have shrunk it; both counts are in the reason.
        assert name in TOO_SMALL, (name, result.reason)
        counts = not_reduced(result)
        assert counts is not None, result.reason
        before, after = counts
        assert before == result.tokens_before
        assert after >= before
        assert result.record["not_smaller"] == {"tokens_before": before, "tokens_after": after}
        _assert_the_repaired_input(messages, system, result)
        return
    assert result.messages_removed > 0
    assert result.archive
    assert result.tokens_after < result.tokens_before


@pytest.mark.parametrize(("name", "window"), CASES, ids=IDS)
def test_nothing_lost_and_input_untouched(name: str, window: int) -> None:
    _, original, original_system = next(entry for entry in CORPUS if entry[0] == name)
    messages, system, _, result = _case(name, window)
    assert _dumps(messages) == _dumps(original)
    assert _dumps(system) == _dumps(original_system)
    out = {_dumps(m) for m in result.messages}
    archived = {_dumps(m) for m in result.archive.values()}
    for i, message in enumerate(messages):
        assert _dumps(message) in out or _dumps(message) in archived, (name, i)
    assert result.removed == list(result.archive.values())


@pytest.mark.parametrize(("name", "window"), CASES, ids=IDS)
def test_shown_identifiers_occur_verbatim_in_the_compacted_originals(name: str, window: int) -> None:
    _, _, _, result = _case(name, window)
    if not result.compacted:
        assert shown_block(result) == ""  # nothing was summarized, so nothing is shown
        return
    assert shown_block(result)
    # Sources: compaction.fidelity.source_strings of the archived originals (keys such as
    # "file_name" and decoded tool arguments included); the archive ids are framing.
    assert altered(result) == [], name


@pytest.mark.parametrize(("name", "window"), CASES, ids=IDS)
def test_the_users_sentences_and_the_zones_identifiers_stay_in_context_or_recallable(name: str, window: int) -> None:
    messages, _, _, result = _case(name, window)
    zone = set(archived_indices(messages, result))
    wanted = request_sentences(messages, [i for i in request_indices(messages) if i in zone])
    wanted += identifier_tokens("\n".join(content_strings(list(result.archive.values()))))
    context = transcript_text(result.messages, result.system)
    index = MemoryRecallIndex(result.archive)
    lost = [s for s in wanted if s not in context and not any(s in hit.text for hit in index.search(s).hits)]
    assert lost == [], (name, lost[:3])
