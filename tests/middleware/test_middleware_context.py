"""The context manager's context: each message converted and counted once, when it arrives, and
carried through compactions and reloads (only what a compaction wrote is counted); its options
validated in one place."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

import compaction.middleware.context as context_module
from compaction import CompactionConfig, Compactor
from compaction.middleware import ContextManager, ManagerSettings, PrepareSettings
from compaction.middleware.context import Context, ContextEntry, canonical
from compaction.sqlite_store import SQLiteSessionStore
from compaction.tokens import counter_for_model

COUNTER = counter_for_model("gpt-4o")


def _session(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        if i % 2 == 0:
            out.append({"role": "user", "content": f"Step {i}: look at module_{i}.py and tell me what it does. " * 8})
        else:
            out.append({"role": "assistant", "content": f"module_{i - 1}.py parses the config and returns {i}. " * 8})
    return out


def _counted_entries(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Record every message the context converts and counts from now on."""
    seen: list[dict[str, Any]] = []
    original = context_module.entry_of

    def entry_of(
        message: dict[str, Any], store_id: int | None, counter: Any, tokens: int | None = None
    ) -> ContextEntry:
        seen.append(message)
        return original(message, store_id, counter, tokens)

    monkeypatch.setattr(context_module, "entry_of", entry_of)
    return seen


def _compactor(**config: Any) -> Compactor:
    return Compactor("gpt-4o", config=CompactionConfig(keep_recent_messages=4, **config))


def test_a_rebuilt_context_counts_only_the_messages_it_did_not_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = _session(8)
    ctx = Context.counted([dict(m) for m in messages], [None] * 8, COUNTER)
    seen = _counted_entries(monkeypatch)
    summary = {"role": "user", "content": "Summary of the first five messages."}
    kept = [dict(m) for m in messages[5:]]
    rebuilt = ctx.rebuilt([summary, *kept], [None] * 4, COUNTER)
    assert seen == [summary]
    assert [e.canon for e in rebuilt[1:]] == [e.canon for e in ctx[5:]]
    assert all(new.canon is old.canon for new, old in zip(rebuilt[1:], ctx[5:], strict=True))
    fresh = Context.counted([summary, *kept], [None] * 4, COUNTER)
    assert rebuilt.counts() == fresh.counts()
    assert rebuilt.total == fresh.total


def test_a_kept_message_the_compaction_changed_is_counted_again(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = _session(10)
    ctx = Context.counted([dict(m) for m in messages], [None] * 10, COUNTER)
    seen = _counted_entries(monkeypatch)
    trimmed = {"role": "user", "content": "Step 6: [trimmed]"}
    out = [{"role": "user", "content": "Summary."}, *(dict(m) for m in messages[4:6]), trimmed]
    out += [dict(m) for m in messages[7:]]
    rebuilt = ctx.rebuilt(out, [None] * len(out), COUNTER)
    assert sorted(m["content"] for m in seen) == ["Step 6: [trimmed]", "Summary."]
    assert rebuilt.counts() == Context.counted(out, [None] * len(out), COUNTER).counts()


def test_a_message_equal_to_a_held_one_under_another_store_id_is_counted_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    messages = [dict(m) for m in _session(2)]
    ctx = Context.counted(messages, [1, 2], COUNTER)
    seen = _counted_entries(monkeypatch)
    rebuilt = ctx.rebuilt([dict(m) for m in messages], [1, 3], COUNTER)
    assert seen == [messages[1]]
    assert rebuilt.ids() == [1, 3]


def test_slices_of_the_context_total_what_their_messages_count() -> None:
    ctx = Context.counted([dict(m) for m in _session(6)], [None] * 6, COUNTER)
    counts = ctx.counts()
    assert ctx.total == sum(counts) == sum(COUNTER.count_message(canonical(m)) for m in ctx.messages())
    for start in range(-8, 9):
        for stop in [None, *range(-8, 9)]:
            assert ctx.tokens(start, stop) == sum(counts[start:stop]), (start, stop)
    held = ctx.split_off(4)
    assert len(ctx) == 4
    assert ctx.total == sum(counts[:4])
    ctx.extend(held)
    assert ctx.counts() == counts
    assert ctx.total == sum(counts)


def test_after_a_compaction_the_manager_counts_only_what_the_compaction_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    cm = ContextManager(_compactor(), messages=_session(24), recall=False)
    before = cm.messages
    seen = _counted_entries(monkeypatch)
    result = asyncio.run(cm.compact_now())
    assert result.compacted
    written = [m for m in cm.messages if m not in before]
    assert written  # the summary at least
    assert seen == written
    fresh = ContextManager(_compactor(), messages=cm.messages, recall=False)
    assert cm.tokens == fresh.tokens == result.tokens_after
    assert cm._state.context.counts() == fresh._state.context.counts()


def test_a_reload_from_the_store_counts_nothing_it_already_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    store = SQLiteSessionStore()
    cm = ContextManager(_compactor(), session_id="s", store=store, messages=_session(24))
    assert asyncio.run(cm.compact_now()).compacted
    tokens, counts = cm.tokens, cm._state.context.counts()
    seen = _counted_entries(monkeypatch)
    cm.reload()
    assert seen == []
    assert cm.tokens == tokens
    assert cm._state.context.counts() == counts
    cm.append({"role": "user", "content": "and now the tests"})
    assert len(seen) == 0  # appended messages are counted where they arrive, not through a rebuild
    other = ContextManager(_compactor(), session_id="s", store=store)
    assert other.tokens == cm.tokens


def test_a_new_model_recounts_every_message_with_its_counter() -> None:
    messages = _session(6)
    cm = ContextManager(Compactor("gpt-4o"), messages=messages)
    cm.set_model("gpt-4", window=128_000)
    fresh = ContextManager(Compactor("gpt-4", config=CompactionConfig(window=128_000)), messages=messages)
    assert cm._state.context.counts() == fresh._state.context.counts()
    assert cm.tokens == fresh.tokens


@pytest.mark.parametrize(
    ("argument", "value", "message"),
    [
        ("max_recall_rounds", -1, "max_recall_rounds must be >= 0, got -1"),
        ("every_n_iterations", 0, "every_n_iterations must be >= 1, got 0"),
        ("keep_recent_iterations", -2, "keep_recent_iterations must be >= 0, got -2"),
        ("max_consecutive_compactions", 0, "max_consecutive_compactions must be >= 1, got 0"),
    ],
)
def test_a_bad_option_is_refused_by_name(argument: str, value: int, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        ContextManager(Compactor("gpt-4o"), **{argument: value})
    with pytest.raises(ValueError, match=f"^{message}$"):
        ManagerSettings(**{argument: value})


def test_the_options_are_one_frozen_settings_object() -> None:
    cm = ContextManager(Compactor("gpt-4o"), session_id="s1", every_n_iterations=5, recall=False, prepare=True)
    assert cm.settings == ManagerSettings(session_id="s1", every_n_iterations=5, recall=False, prepare=True)
    assert cm.settings.preparation == PrepareSettings(enabled=True)
    assert (cm.session_id, cm.every_n_iterations, cm.recall) == ("s1", 5, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cm.settings.every_n_iterations = 2  # type: ignore[misc]
    assert ManagerSettings(prepare=False).preparation.enabled is False
