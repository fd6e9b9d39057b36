"""Each message counted once: the ContextManager's counts travel with its canonical messages into the
pipeline, which sums them instead of counting the context again; a store appended to in store mode
gets them too. Fit never rests on a carried count: what a compaction returns is counted afresh."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from benchmarks.generate import generate
from compaction import CompactionConfig, Compactor
from compaction.adapters import message_format, to_canonical
from compaction.middleware import ContextManager
from compaction.middleware.context import entry_of, request_for, request_transcript
from compaction.middleware.store_mode import appended_counts
from compaction.server.context_size import counted_batch, first_format, message_tokens
from compaction.sqlite_store import SQLiteSessionStore
from compaction.store import StoredMessage
from compaction.stores.counting import stored_counts
from compaction.stores.rows import ContextHead, CountedBatch
from compaction.tokens import TiktokenCounter, counter_for_model
from compaction.transcript import Message

COUNTER = counter_for_model("gpt-4o")


class SpyCounter(TiktokenCounter):
    """o200k counts, remembering every message it was asked to count: one by one
    (``count_message``) and as lists (``count_messages``, wrapped on the instance so that the class
    stays one whose list counts add up)."""

    def __init__(self) -> None:
        super().__init__("o200k_base")
        self.asked: list[Message] = []
        self.asked_lists: list[list[Message]] = []
        count_messages = self.count_messages

        def spied(messages: Any) -> int:
            self.asked_lists.append(list(messages))
            return count_messages(messages)

        self.count_messages = spied  # type: ignore[method-assign]

    def count_message(self, message: Message) -> int:
        self.asked.append(message)
        return super().count_message(message)


def _key(message: Message) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
    return (
        message.role,
        message.text,
        tuple(c.arguments for c in message.tool_calls),
        tuple(r.call_id for r in message.tool_results),
    )


def _session(n: int, fmt: str = "openai", seed: int = 5) -> tuple[Any, list[dict[str, Any]]]:
    g = generate("coding", n, seed=seed, format=fmt)  # type: ignore[arg-type]
    system = next((m["content"] for m in g.messages if m.get("role") == "system"), None)
    return system, [dict(m) for m in g.messages if m.get("role") != "system"]


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@pytest.mark.parametrize("system", [None, "Be brief."])
def test_the_request_transcript_is_what_reading_the_request_gives(fmt: str, system: str | None) -> None:
    _, messages = _session(80, fmt)
    messages[4] = {**messages[4], "id": "same"}  # own ids, one repeated: the later one is renamed
    messages[9] = {**messages[9], "id": "same"}
    held = messages[2:]
    entries = [entry_of(m, None, COUNTER) for m in held]
    request, request_system, _ = request_for(held, system, fmt)
    built = request_transcript(request, request_system, entries, COUNTER)
    read = to_canonical(request, request_system)
    assert built == read
    assert [m.id for m in built.messages] == [m.id for m in read.messages]
    assert len({m.id for m in built.messages}) == len(built.messages)
    carried = [m for m in built.messages if m.carried_tokens(COUNTER) is not None]
    assert len(carried) >= len(entries) // 2
    assert all(m.carried_tokens(COUNTER) == COUNTER.count_message(m) for m in carried)


def test_a_manager_compaction_does_not_count_the_messages_it_counted_on_append() -> None:
    spy = SpyCounter()
    config = CompactionConfig(window=32_000, keep_recent_messages=6)
    cm = ContextManager(Compactor("gpt-4o", counter=spy, config=config), recall=False)
    _, messages = _session(60)
    cm.append(*messages)
    assert len(spy.asked) == len(messages)  # each counted once, on append
    spy.asked.clear()
    result = asyncio.run(cm.compact_now())
    assert result.compacted
    assert result.messages_removed > 10
    assert result.tokens_after == cm.compactor.count(result.messages, system=result.system, tools=cm.tools)
    # The messages the compaction summarized away: their counts came with them. (The messages it
    # returns are counted afresh, which is what fit rests on; the prune stage weighs tool results.)
    kept = {_key(m) for m in to_canonical(result.messages, result.system).messages}
    gone = {_key(m) for m in to_canonical(messages).messages} - kept
    plain = {k for k in gone if k[0] != "tool"}
    assert plain
    assert not plain & {_key(m) for m in spy.asked}
    assert not gone & {_key(m) for listed in spy.asked_lists for m in listed}


@pytest.mark.parametrize("factor", [0, 5])
def test_a_wrong_carried_count_cannot_break_fit(factor: int) -> None:
    config = CompactionConfig(window=16_000, reserve_tokens=2_000, keep_recent_messages=6)
    compactor = Compactor("gpt-4o", config=config)
    _, messages = _session(120, seed=4)
    assert compactor.count(messages) > compactor.guard.budget
    transcript = to_canonical(messages)
    for message in transcript.messages:
        message.carry_tokens(compactor.counter, factor * compactor.counter.count_message(message))
    result = asyncio.run(compactor.acompact(messages, transcript=transcript))
    assert result.compacted
    exact = compactor.count(result.messages, system=result.system)
    assert result.tokens_after == exact <= compactor.guard.budget


def test_a_carried_count_stays_with_a_copy_that_changes_no_counted_field() -> None:
    message = to_canonical([{"role": "user", "content": "fix the build in ci/deploy.yml"}]).messages[0]
    message.carry_tokens(COUNTER, 11)
    assert message.model_copy(update={"id": "other", "pinned": True}).carried_tokens(COUNTER) == 11
    assert message.with_parts(message.parts[:0]).carried_tokens(COUNTER) is None
    assert message.carried_tokens(counter_for_model("gpt-4")) is None
    with pytest.raises(ValueError, match="int >= 0"):
        message.carry_tokens(COUNTER, -1)


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_store_mode_appends_with_the_counts_the_service_would_make(tmp_path: Path, fmt: str) -> None:
    store = SQLiteSessionStore(tmp_path / "s.db")
    system, messages = _session(40, fmt)
    cm = ContextManager(Compactor("gpt-4o"), store=store, session_id="s1", system=system, recall=False)
    # Up to the first message that shows the context's format (an Anthropic one drops the total:
    # what came before may read otherwise), then the service's first read sets the running total.
    split = max(10, 1 + next(i for i, m in enumerate(messages) if message_format(m) is not None))
    cm.append(*messages[:split])
    head = store.context_head("s1")
    stored = store.context("s1").messages
    first = sum(r.tokens or 0 for r in stored) + 3
    shown = first_format([r.message for r in stored])  # what the service sets it with
    assert store.set_context_tokens(
        "s1", first, context_format=shown, model=head.model, summary_through_id=None, last_id=head.last_id
    )
    for message in messages[split:]:
        cm.append(message)
    rows = store.context("s1").messages
    assert [r.tokens for r in rows] == [(message_tokens(COUNTER, [r.message], fmt) or (None,))[0] for r in rows]
    # Appended with their counts, the total is still known: the service's next append counts only itself.
    assert store.context_head("s1").context_tokens == first + sum(r.tokens or 0 for r in rows[split:])


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@pytest.mark.parametrize("seen", [None, "openai", "anthropic"])
def test_the_managers_batch_counts_follow_the_service_rule(tmp_path: Path, fmt: str, seen: str | None) -> None:
    store = SQLiteSessionStore(tmp_path / "s.db")
    _, messages = _session(12, fmt, seed=6)
    for system in (None, "Be brief.", [{"type": "text", "text": "Be brief."}]):
        batch = [(m, e.canon, e.tokens) for m, e in ((m, entry_of(m, None, COUNTER)) for m in messages)]
        ours = appended_counts(store, batch, COUNTER, "gpt-4o", system, seen)
        assert ours == counted_batch(COUNTER, messages, "gpt-4o", system, seen)
    other = TiktokenCounter("o200k_base")  # not the counter the service counts gpt-4o with
    assert appended_counts(store, [], other, "gpt-4o", None, None) is None


def _spy_on_count_message(monkeypatch: pytest.MonkeyPatch, counter: Any) -> list[Message]:
    """Record every message ``counter`` (the shared instance, kept as it is) counts one by one."""
    asked: list[Message] = []
    count_message = counter.count_message

    def spied(message: Message) -> int:
        asked.append(message)
        return int(count_message(message))

    monkeypatch.setattr(counter, "count_message", spied)
    return asked


def test_a_reopened_store_session_takes_the_counts_its_rows_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteSessionStore(tmp_path / "s.db")
    system, messages = _session(60)
    first = ContextManager(Compactor("gpt-4o"), store=store, session_id="s1", system=system, recall=False)
    first.append(*messages)
    assert all(row.tokens is not None for row in store.context("s1").messages)
    asked = _spy_on_count_message(monkeypatch, COUNTER)
    again = ContextManager(Compactor("gpt-4o"), store=store, session_id="s1", recall=False)
    # Only the system prompt is counted: every stored message comes with the count it was stored with.
    assert [m.role for m in asked] == ["system"]
    assert again._state.context.counts() == first._state.context.counts()
    assert (
        again.tokens
        == first.tokens
        == again.compactor.count(again.messages, system=None)
        + COUNTER.count_message(to_canonical([{"role": "system", "content": system}]).messages[0])
    )


def _stored_with_wrong_counts(tmp_path: Path, factor: int) -> tuple[SQLiteSessionStore, list[dict[str, Any]]]:
    """A session whose rows hold ``factor`` times their true gpt-4o count (a writer's bug)."""
    store = SQLiteSessionStore(tmp_path / "s.db")
    store.create_session("s1", model="gpt-4o")
    _, messages = _session(120, seed=4)
    true = [COUNTER.count_message(to_canonical([m]).messages[0]) for m in messages]
    wrong = CountedBatch(
        tokens=tuple(factor * t for t in true), model="gpt-4o", context_format=None, new_format="openai"
    )
    store.append("s1", messages, counted=wrong)
    return store, messages


@pytest.mark.parametrize("factor", [0, 5])
def test_a_wrong_stored_count_cannot_break_fit(tmp_path: Path, factor: int) -> None:
    store, messages = _stored_with_wrong_counts(tmp_path, factor)
    config = CompactionConfig(window=16_000, reserve_tokens=2_000, keep_recent_messages=6)
    compactor = Compactor("gpt-4o", config=config)
    exact = compactor.count(messages)
    assert exact > compactor.guard.budget
    cm = ContextManager(compactor, store=store, session_id="s1", recall=False)
    assert (cm.tokens < exact) if factor == 0 else (cm.tokens > exact)  # the rows' counts were taken
    result = asyncio.run(cm.compact_now())
    assert result.compacted
    # What a compaction returns is counted afresh: a wrong stored count can misplan, never overflow.
    returned = compactor.count(result.messages, system=result.system, tools=cm.tools)
    assert result.tokens_after == returned <= compactor.guard.budget


def test_stored_counts_of_another_model_or_counter_are_counted_again(tmp_path: Path) -> None:
    store, messages = _stored_with_wrong_counts(tmp_path, 5)
    exact = Compactor("gpt-4o").count(messages)
    # Another counter than the session's (counter_for_model of its model): the rows are not its counts.
    other = Compactor("gpt-4o", counter=TiktokenCounter("o200k_base"))
    assert ContextManager(other, store=store, session_id="s1", recall=False).tokens == exact
    # The model changed after the rows were written (and back): their counts are for another model.
    store.set_model("s1", "gpt-4")
    store.set_model("s1", "gpt-4o")
    reopened = ContextManager(Compactor("gpt-4o"), store=store, session_id="s1", recall=False)
    assert reopened.tokens == exact
    reopened.append({"role": "user", "content": "Now run the whole test suite."})
    latest = store.context("s1").messages[-1]
    assert latest.tokens == reopened._state.context[-1].tokens  # appended with its count, as before


def test_a_stored_count_made_in_another_format_is_not_taken() -> None:
    anthropic = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}
    plain = {"role": "user", "content": "go on"}
    rows = [StoredMessage(id=1, message=plain, tokens=7), StoredMessage(id=2, message=anthropic, tokens=9)]
    head = ContextHead("s1", None, "gpt-4o", None, None, None, "openai", 0, 2)
    assert stored_counts(head, rows, COUNTER) == [7, None]  # counted as OpenAI: not its own reading's count
    assert stored_counts(replace(head, context_format="anthropic"), rows, COUNTER) == [None, 9]
    assert stored_counts(replace(head, tokens_from_id=1), rows, COUNTER) == [None, None]
    assert stored_counts(replace(head, model=None), rows, COUNTER) == [None, None]


def test_placing_a_counted_message_in_a_request_hashes_its_kept_payload(monkeypatch: pytest.MonkeyPatch) -> None:
    _, messages = _session(40)
    entries = [entry_of(m, None, COUNTER) for m in messages]
    request, system, _ = request_for(messages, "Be brief.", "openai")
    encoded: list[Any] = []
    dumps = json.dumps

    def counting(value: Any, *args: Any, **kwargs: Any) -> str:
        encoded.append(value)
        return dumps(value, *args, **kwargs)

    monkeypatch.setattr(json, "dumps", counting)
    built = request_transcript(request, system, entries, COUNTER)
    assert not [m for m in encoded if any(m is e.message for e in entries)]  # not encoded again
    monkeypatch.undo()
    assert built == to_canonical(request, system)


def test_a_store_mode_compaction_reads_no_list_of_messages_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import compaction.middleware.store_mode as store_mode_module

    store = SQLiteSessionStore(tmp_path / "s.db")
    system, messages = _session(60)
    config = CompactionConfig(window=32_000, keep_recent_messages=6)
    cm = ContextManager(Compactor("gpt-4o", config=config), store=store, session_id="s1", system=system)
    cm.append(*messages)
    whole = cm.compactor.count(
        [{"role": "system", "content": system}, *cm.messages], tools=cm._state.tools_after_compaction()
    )
    read = store_mode_module.to_canonical
    lists: list[int] = []

    def spied(batch: Any, *args: Any, **kwargs: Any) -> Any:
        if len(batch) > 1:
            lists.append(len(batch))
        return read(batch, *args, **kwargs)

    monkeypatch.setattr(store_mode_module, "to_canonical", spied)
    result = asyncio.run(cm.compact_now())
    assert result.compacted
    assert lists == []  # the request handed to the compactor was read once, from the context's entries
    assert cm.summary_through_id is not None
    assert store.context("s1").summary_through_id == cm.summary_through_id
    assert result.tokens_before == whole
