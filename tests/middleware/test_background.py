"""Compaction off the critical path: background preparation, the swap at the threshold, invalidation,
one job per session, clean cancellation and compare-and-swap persistence."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pytest

from compaction.adapters import to_canonical
from compaction.middleware import CompactionFinished, ContextManager, PrepareSettings
from compaction.pairs import validate
from compaction.sqlite_store import SQLiteSessionStore
from compaction.summarizers.base import SummaryRequest, SummaryResponse
from compaction.summarizers.scripted import ScriptedSummarizer
from tests.middleware.test_middleware import make_compactor, session, turn
from tests.middleware.test_scan_on_entry import RecordingScope, missed_on, texts_of

PREFIX = "compaction-prepare:"


class GatedSummarizer:
    """Counts calls; while ``gate`` is clear, every call waits on it (proves nobody waits for it)."""

    def __init__(self) -> None:
        self.inner = ScriptedSummarizer(default=lambda r: f"Summary ({r.kind}): the agent read several modules.")
        self.gate = asyncio.Event()
        self.gate.set()
        self.started = 0

    @property
    def requests(self) -> list[SummaryRequest]:
        return self.inner.requests

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        self.started += 1
        await self.gate.wait()
        return await self.inner.summarize(request)


def jobs() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith(PREFIX) and not t.done()]


async def settle(cm: ContextManager) -> None:
    """Let a running background job finish."""
    for _ in range(200):
        if not cm.preparing:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the background job did not finish")


def manager(summarizer: Any, **kwargs: Any) -> ContextManager:
    kwargs.setdefault("prepare", True)
    return ContextManager(make_compactor(summarizer=summarizer), messages=session(1), **kwargs)


async def grow(cm: ContextManager, start: int, turns: int) -> int:
    """``turns`` agent turns (before_turn, then a tool exchange); returns the next turn index."""
    for i in range(start, start + turns):
        result = await cm.before_turn()
        assert result is None, "grew into a compaction"
        cm.append(*turn(i))
        await asyncio.sleep(0)
    return start + turns


async def grow_until_preparing(cm: ContextManager, index: int) -> int:
    """Turns from ``index`` on until a background job has started; the next turn's index."""
    while not cm.preparing:
        index = await grow(cm, index, 1)
    return index


async def to_threshold(cm: ContextManager, start: int) -> tuple[int, Any]:
    """Turns until one compacts; returns (next index, the result)."""
    for i in range(start, start + 60):
        result = await cm.before_turn()
        if result is not None:
            return i, result
        cm.append(*turn(i))
    raise AssertionError("never reached the threshold")


def valid_pairs(cm: ContextManager) -> bool:
    return not validate(to_canonical(cm.messages))


async def test_prepare_mark_starts_a_job_that_before_turn_and_complete_never_wait_for() -> None:
    summarizer = GatedSummarizer()
    cm = manager(summarizer)
    summarizer.gate.clear()
    index = 1
    while not cm.preparing:  # below the mark nothing starts
        assert summarizer.started == 0
        index = await grow(cm, index, 1)
    await asyncio.sleep(0)
    assert summarizer.started == 1  # the job is in its first summarizer call, blocked on the gate
    assert cm.tokens * 1.2 >= 0.65 * 20_000  # past the mark (estimated counts carry the 1.2 margin)
    # Neither the next turn nor a model call waits for it.
    assert await asyncio.wait_for(cm.before_turn(), 1) is None

    async def model(messages: list[dict[str, Any]], system: Any) -> dict[str, Any]:
        return {"choices": [{"message": {"role": "assistant", "content": "ok"}}], "usage": {"prompt_tokens": 10}}

    assert (await asyncio.wait_for(cm.complete(model), 1))["choices"][0]["message"]["content"] == "ok"
    assert cm.preparing
    assert len(jobs()) == 1
    summarizer.gate.set()
    await settle(cm)
    assert cm.prepared is not None
    assert cm.prepared.jobs == 1
    assert cm.prepared.tokens > 0
    await cm.aclose()


async def test_threshold_turn_swaps_the_prepared_summary_in_with_no_summarizer_call() -> None:
    summarizer = GatedSummarizer()
    seen: list[Any] = []
    cm = manager(summarizer, on_event=seen.append)
    index = 1
    while cm.prepared is None or cm.prepared.jobs == 0:
        index = await grow(cm, index, 1)
        await settle(cm)
    calls = len(summarizer.requests)
    summarizer.gate.clear()  # any summarizer call on the threshold turn would hang it
    before = len(cm.messages)
    index, result = await asyncio.wait_for(to_threshold(cm, index), 2)
    assert result.compacted
    assert result.llm_calls == 0
    assert len(summarizer.requests) == calls
    assert result.record["prepared"]["swap"] == "prepared"
    assert result.record["prepared"]["threshold_calls"] == 0
    assert len(cm.messages) < before
    assert valid_pairs(cm)
    assert not cm.decision().should_compact  # fits, under the threshold
    assert "[CONTEXT SUMMARY]" in str(cm.messages[0]["content"])
    assert result.archive  # every message taken out is archived (and searchable by recall)
    finished = [e for e in seen if isinstance(e, CompactionFinished)]
    assert finished[-1].background_tokens == cm.prepared.tokens > 0
    summarizer.gate.set()
    await cm.aclose()


async def test_jobs_are_incremental_nothing_is_summarized_twice() -> None:
    summarizer = GatedSummarizer()
    cm = ContextManager(
        make_compactor(summarizer=summarizer), messages=session(1), prepare=PrepareSettings(mark=0.5, step=0.08)
    )
    by_job: list[set[int]] = []  # which turns' tool output each job sent to the summarizer
    index = 1
    while cm.prepared is None or cm.prepared.jobs < 2:
        jobs_before = cm.prepared.jobs if cm.prepared else 0
        count_before = len(summarizer.requests)
        index = await grow(cm, index, 1)
        await settle(cm)
        if cm.prepared and cm.prepared.jobs > jobs_before:
            prompts = [r.prompt for r in summarizer.requests[count_before:]]
            by_job.append({i for i in range(index) if any(f"mod_{i}: log line" in p for p in prompts)})
    assert len(by_job) == 2
    assert by_job[0]
    assert by_job[1]
    assert not by_job[0] & by_job[1]  # no turn sent twice
    assert max(by_job[0]) < min(by_job[1])  # the second job takes what aged out after the first
    assert any("<earlier-summary>" in r.prompt for r in summarizer.requests)  # it extends the first summary
    await cm.aclose()


async def prepared_manager(**kwargs: Any) -> tuple[ContextManager, GatedSummarizer, int]:
    summarizer = GatedSummarizer()
    cm = manager(summarizer, **kwargs)
    index = 1
    while cm.prepared is None or cm.prepared.jobs == 0:
        index = await grow(cm, index, 1)
        await settle(cm)
    return cm, summarizer, index


async def assert_compacts_on_demand(cm: ContextManager, summarizer: GatedSummarizer) -> None:
    """Right after the change (no new job could run): the prepared state is gone, a compaction
    summarizes from scratch."""
    assert not cm.preparing
    calls = len(summarizer.requests)
    result = await cm.compact_now()
    assert result.compacted
    assert "prepared" not in result.record
    assert len(summarizer.requests) > calls
    assert valid_pairs(cm)
    assert cm.prepared is not None
    assert cm.prepared.discarded >= 1
    await cm.aclose()


async def test_an_edited_message_discards_the_prepared_state() -> None:
    cm, summarizer, _ = await prepared_manager()
    edited = cm.messages
    edited[3] = {**edited[3], "content": "an edited tool result"}
    cm.replace_messages(edited)
    assert cm.prepared is not None
    await assert_compacts_on_demand(cm, summarizer)
    assert cm.prepared.discarded >= 1


async def test_a_removed_message_discards_the_prepared_state() -> None:
    cm, summarizer, _ = await prepared_manager()
    messages = cm.messages
    cm.replace_messages([messages[0], *messages[3:]])  # one tool exchange removed
    await assert_compacts_on_demand(cm, summarizer)


async def test_a_new_system_prompt_discards_the_prepared_state() -> None:
    cm, summarizer, _ = await prepared_manager(system="You are a careful engineer.")
    cm.system = "You are a different agent now."
    await assert_compacts_on_demand(cm, summarizer)


async def test_a_model_or_window_change_discards_the_prepared_state() -> None:
    cm, summarizer, _ = await prepared_manager()
    cm.set_model("test-model", window=41_000, counter=cm.compactor.counter)
    assert cm.prepared is not None
    assert cm.prepared.discarded == 1
    await assert_compacts_on_demand(cm, summarizer)


async def test_a_job_in_flight_at_the_threshold_is_finished_when_nothing_else_is_prepared() -> None:
    summarizer = GatedSummarizer()
    summarizer.gate.clear()
    cm = manager(summarizer, prepare=PrepareSettings(mark=0.9))
    index = 1
    index = await grow_until_preparing(cm, index)
    await asyncio.sleep(0)
    assert summarizer.started >= 1  # the only job, blocked in its call(s)
    threshold = asyncio.ensure_future(to_threshold(cm, index))
    await asyncio.sleep(0.05)
    assert not threshold.done()  # the threshold turn waits for the job in flight (no state yet)...
    summarizer.gate.set()
    _, result = await asyncio.wait_for(threshold, 5)
    assert result.compacted
    assert result.record["prepared"]["swap"] in ("prepared", "prepared+rest")
    assert cm.prepared is not None
    # ...instead of starting over: every call was the job's, or the threshold's own for what aged out since
    assert len(summarizer.requests) == cm.prepared.calls + result.record["prepared"]["threshold_calls"]
    assert not jobs()
    await cm.aclose()


async def test_a_job_in_flight_extending_the_swapped_state_continues_and_becomes_the_next_state() -> None:
    cm, summarizer, index = await prepared_manager(prepare=PrepareSettings(step=0.05))
    summarizer.gate.clear()
    index = await grow_until_preparing(cm, index)  # a second job starts (it extends the first state) and hangs
    await asyncio.sleep(0)
    task = jobs()[0]
    index, result = await asyncio.wait_for(to_threshold(cm, index), 2)
    assert result.record["prepared"]["swap"] == "prepared"
    assert result.llm_calls == 0
    # Not cancelled: it summarized the swapped-in context's beginning (the first state's head and the
    # messages after it), so nothing is thrown away.
    assert not task.done()
    assert cm.prepared is not None
    discarded = cm.prepared.discarded
    swapped = list(cm.messages)
    summarizer.gate.set()
    await settle(cm)
    calls = len(summarizer.requests)
    assert cm.prepared.discarded == discarded
    state = cm._preparer.state if cm._preparer is not None else None
    assert state is not None
    assert 0 < state.covered < len(cm.messages)
    assert cm._preparer is not None
    assert cm._preparer.valid_state(cm._state) is state
    assert cm.messages[: len(swapped)] == swapped
    assert state.completes
    # It finishes the threshold's compaction: the next turn swaps it in with no call (the context
    # is then what a compaction on demand would leave) and every message it took out is archived.
    before = cm.tokens
    second = await cm.before_turn()
    assert second is not None
    assert second.record["prepared"]["swap"] == "completion"
    assert second.llm_calls == 0
    assert len(summarizer.requests) == calls
    assert cm.tokens < before
    assert second.archive == state.archive
    assert second.archive
    assert not set(second.archive) & set(result.archive)
    assert cm._preparer.state is None
    assert valid_pairs(cm)
    assert await cm.before_turn() is None  # once: nothing more to swap in
    await cm.aclose()
    assert not jobs()


async def test_a_landed_completion_is_dropped_when_the_context_changed_under_it() -> None:
    cm, summarizer, index = await prepared_manager(prepare=PrepareSettings(step=0.05))
    summarizer.gate.clear()
    index = await grow_until_preparing(cm, index)
    await asyncio.sleep(0)
    index, result = await asyncio.wait_for(to_threshold(cm, index), 2)
    assert result.record["prepared"]["swap"] == "prepared"
    summarizer.gate.set()
    await settle(cm)
    assert cm._preparer is not None
    assert cm._preparer.state is not None
    assert cm._preparer.state.completes
    edited = list(cm.messages)
    edited[0] = {**edited[0], "content": "an edited summary"}
    cm.replace_messages(edited)  # what the job summarized is no longer the context's beginning
    assert await cm.before_turn() is None
    assert cm._preparer.state is None
    assert cm.messages == edited
    await cm.aclose()


async def test_nothing_prepared_at_the_threshold_costs_one_call_not_a_chunk_round_and_a_merge() -> None:
    # mark=1.0: no job ever starts, as when one turn jumps past the mark and the threshold at once.
    # On demand this zone takes two chunk calls and a merge; with preparation on, one call.
    kinds: dict[bool, list[str]] = {}
    for prepare in (False, True):
        summarizer = ScriptedSummarizer(default=lambda r: f"Summary ({r.kind}): the agent read several modules.")
        cm = manager(summarizer, prepare=PrepareSettings(mark=1.0) if prepare else False)
        _, result = await to_threshold(cm, 1)
        assert result.compacted
        assert result.archive
        assert valid_pairs(cm)
        kinds[prepare] = [r.kind for r in summarizer.requests]
        await cm.aclose()
    assert kinds[False] == ["chunk", "chunk", "merge"]
    assert kinds[True] == ["single"]


async def test_a_job_waited_for_at_the_threshold_is_swapped_in_without_a_second_call() -> None:
    # accept=0.05: nothing prepared is ever small enough for a swap without waiting; after waiting for
    # the job, its result is accepted up to halfway to the trigger (0.525) instead of a second call.
    cm, summarizer, index = await prepared_manager(prepare=PrepareSettings(step=0.05, accept=0.05))
    summarizer.gate.clear()
    index = await grow_until_preparing(cm, index)
    await asyncio.sleep(0)
    task = jobs()[0]
    threshold = asyncio.ensure_future(to_threshold(cm, index))
    await asyncio.sleep(0.05)
    assert not threshold.done()  # nothing prepared is small enough: the threshold waits for the job
    calls = len(summarizer.requests)
    summarizer.gate.set()
    _, result = await asyncio.wait_for(threshold, 5)
    assert task.done()
    assert not task.cancelled()
    assert result.record["prepared"]["swap"] == "prepared"
    assert result.record["prepared"]["threshold_calls"] == 0
    assert cm.prepared is not None
    assert cm.prepared.discarded == 0
    assert len(summarizer.requests) == calls + 1  # the job's call only (it was held at the gate)
    trigger = cm.work_compactor.guard.threshold_tokens or cm.work_compactor.guard.budget
    assert result.tokens_after * 1.2 <= 0.525 * trigger
    assert not cm.decision().should_compact
    assert valid_pairs(cm)
    assert not jobs()
    await cm.aclose()


async def test_never_two_jobs_and_close_leaves_no_task() -> None:
    summarizer = GatedSummarizer()
    summarizer.gate.clear()
    cm = manager(summarizer)
    index = 1
    index = await grow_until_preparing(cm, index)
    for i in range(index, index + 3):  # more turns past the mark while the job hangs
        assert await asyncio.wait_for(cm.before_turn(), 1) is None
        cm.append(*turn(i))
        assert len(jobs()) == 1
    task = jobs()[0]
    await cm.aclose()
    assert task.cancelled()
    assert not jobs()
    assert not cm.preparing
    assert cm.prepared is not None
    assert cm.prepared.discarded == 1
    assert cm.prepared.jobs == 0
    summarizer.gate.set()
    await asyncio.sleep(0.01)
    assert cm.prepared.jobs == 0  # nothing half-written after the cancellation


async def test_manual_compaction_uses_the_prepared_state() -> None:
    cm, summarizer, _ = await prepared_manager()
    calls = len(summarizer.requests)
    result = await cm.compact_now()
    assert result.compacted
    assert len(summarizer.requests) == calls
    assert result.record["prepared"]["swap"] == "prepared"
    assert valid_pairs(cm)
    await cm.aclose()


async def test_off_by_default_and_with_the_off_switch() -> None:
    for prepare in (False, PrepareSettings(enabled=False)):
        summarizer = GatedSummarizer()
        cm = ContextManager(make_compactor(summarizer=summarizer), messages=session(1), prepare=prepare)
        index = 1
        for i in range(index, index + 20):
            assert await cm.before_turn() is None
            cm.append(*turn(i))
            assert not cm.preparing
        assert cm.prepared is None
        assert not summarizer.requests
    with pytest.raises(ValueError, match="mark"):
        PrepareSettings(mark=0)


# --- store mode ------------------------------------------------------------------------------


async def stored_prepared(store: SQLiteSessionStore, session_id: str = "s") -> tuple[ContextManager, int]:
    cm = ContextManager(
        make_compactor(summarizer=GatedSummarizer()),
        session_id=session_id,
        store=store,
        messages=session(1) if not store.sessions() else (),
        prepare=True,
    )
    index = 1
    while cm.prepared is None or cm.prepared.jobs == 0:
        index = await grow(cm, index, 1)
        await settle(cm)
    return cm, index


async def test_store_mode_steady_state_and_a_restart_keeps_the_prepared_state(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.db")
    cm, index = await stored_prepared(store)
    version, state = store.load_prepared("s")
    assert version == 1
    assert state is not None
    assert state["through_id"] > 0
    await cm.aclose()
    # A restart: a new manager on the same store adopts the saved state; the threshold costs no call.
    summarizer = GatedSummarizer()
    summarizer.gate.clear()
    again = ContextManager(make_compactor(summarizer=summarizer), session_id="s", store=store, prepare=True)
    assert again._preparer is not None
    assert again._preparer.state is not None
    _, result = await asyncio.wait_for(to_threshold(again, index), 2)
    assert result.compacted
    assert summarizer.started == 0
    assert again.summary_through_id == state["through_id"]
    assert store.load_prepared("s")[1] is None  # used: cleared with the CAS
    assert valid_pairs(again)
    await again.aclose()


async def test_two_managers_on_one_store_one_prepared_state_wins(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.db")
    first = ContextManager(
        make_compactor(summarizer=GatedSummarizer()), session_id="s", store=store, messages=session(1), prepare=True
    )
    second = ContextManager(make_compactor(summarizer=GatedSummarizer()), session_id="s", store=store, prepare=True)
    for i in range(1, 30):  # both see the same growing session (the first appends, the second reloads)
        first.append(*turn(i))
        second.reload()
        if first.decision().effective_tokens >= 0.65 * 20_000:
            break
    assert first._preparer is not None
    assert second._preparer is not None
    assert first._preparer.maybe_start(first._state, first.decision().effective_tokens)
    assert second._preparer.maybe_start(second._state, second.decision().effective_tokens)
    await settle(first)
    await settle(second)
    version, state = store.load_prepared("s")
    assert version == 1
    assert state is not None
    assert first.prepared is not None
    assert second.prepared is not None
    assert first.prepared.discarded + second.prepared.discarded == 1
    # The loser adopted the winner's state: both hold the same one.
    assert first._preparer.state is not None
    assert second._preparer.state is not None
    assert first._preparer.state.key == second._preparer.state.key == state["key"]
    await first.aclose()
    await second.aclose()


async def test_reloaded_from_a_store_that_moved_on_discards_the_prepared_state(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.db")
    cm, index = await stored_prepared(store)
    other = ContextManager(make_compactor(summarizer=GatedSummarizer()), session_id="s", store=store)
    assert (await other.compact_now()).compacted  # another worker compacts the session
    cm.reload()
    for i in range(index, index + 6):  # appended without a turn: no new job
        cm.append(*turn(i))
    summarizer = cm.compactor.summarizer
    assert isinstance(summarizer, GatedSummarizer)
    await assert_compacts_on_demand(cm, summarizer)


class BrokenPreparedStore(SQLiteSessionStore):
    def save_prepared(self, session_id: str, *, expected_version: int, state: dict[str, Any] | None) -> int | None:
        raise OSError("disk full")


async def test_a_failing_job_is_logged_and_the_threshold_compacts_on_demand(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = BrokenPreparedStore(tmp_path / "s.db")
    summarizer = GatedSummarizer()
    cm = ContextManager(
        make_compactor(summarizer=summarizer), session_id="s", store=store, messages=session(1), prepare=True
    )
    index = 1
    while cm.prepared is None or cm.prepared.jobs == 0:
        index = await grow(cm, index, 1)
        await settle(cm)
    assert "Background compaction failed: OSError: disk full" in caplog.text
    failed = caplog.text.count("Background compaction failed")
    index = await grow(cm, index, 2)
    await settle(cm)
    assert caplog.text.count("Background compaction failed") == failed  # no retry on every turn
    _, result = await to_threshold(cm, index)
    assert result.compacted
    assert "prepared" not in result.record
    assert valid_pairs(cm)
    await cm.aclose()


async def test_a_call_that_would_overflow_swaps_the_prepared_state_in_first() -> None:
    cm, summarizer, index = await prepared_manager()
    calls = len(summarizer.requests)
    seen: list[list[dict[str, Any]]] = []

    async def model(messages: list[dict[str, Any]], system: Any) -> dict[str, Any]:
        seen.append(messages)
        return {"choices": [{"message": {"role": "assistant", "content": "ok"}}], "usage": {"prompt_tokens": 10}}

    while cm.decision().action != "block":  # the agent skipped before_turn: the context is over budget
        cm.append(*turn(index))
        index += 1
    await cm.complete(model)
    assert "[CONTEXT SUMMARY]" in str(seen[0])  # the model got the compacted context...
    entry = cm.history()[-1]
    assert entry.trigger == "overflow"
    assert "prepared" in entry.record  # ...built on the prepared summary:
    later = [r.prompt for r in summarizer.requests[calls:]]
    assert not any("mod_0: log line" in p for p in later)  # what it covers was not summarized again
    assert cm.decision().action != "block"
    await cm.aclose()


def test_sqlite_prepared_state_is_a_compare_and_swap_on_its_version(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.db")
    store.create_session("s")
    assert store.load_prepared("s") == (0, None)
    assert store.save_prepared("s", expected_version=0, state={"summary": "a"}) == 1
    assert store.save_prepared("s", expected_version=0, state={"summary": "b"}) is None  # stale writer
    assert store.load_prepared("s") == (1, {"summary": "a"})
    assert store.save_prepared("s", expected_version=1, state=None) == 2  # cleared, version moves on
    assert store.save_prepared("s", expected_version=1, state={"summary": "a"}) is None  # cannot bring it back
    assert store.load_prepared("s") == (2, None)
    with pytest.raises(ValueError, match="not JSON-serializable"):
        store.save_prepared("s", expected_version=2, state={"x": object()})
    assert store.load_prepared("s") == (2, None)


async def test_a_manual_compaction_with_instructions_cancels_the_job_and_compacts_on_demand() -> None:
    summarizer = GatedSummarizer()
    summarizer.gate.clear()
    cm = manager(summarizer)
    index = 1
    index = await grow_until_preparing(cm, index)
    await asyncio.sleep(0)
    task = jobs()[0]
    summarizer.gate = asyncio.Event()
    summarizer.gate.set()
    result = await asyncio.wait_for(cm.compact_now("focus on the retry test"), 5)
    assert result.compacted
    assert "prepared" not in result.record
    assert task.cancelled()
    assert not jobs()
    assert any("focus on the retry test" in r.prompt for r in summarizer.requests)
    await cm.aclose()


async def test_a_job_that_cannot_make_the_context_fit_is_cancelled_and_the_rest_takes_one_call() -> None:
    cm, summarizer, index = await prepared_manager(prepare=PrepareSettings(step=0.05))
    summarizer.gate.clear()
    index = await grow_until_preparing(cm, index)  # a job extending the state starts and is held at the gate
    await asyncio.sleep(0)
    task = jobs()[0]
    cm.append(*turn(index, size=70_000))  # arrives after the job started: no job result can absorb it
    threshold = asyncio.ensure_future(cm.before_turn())
    for _ in range(50):
        await asyncio.sleep(0.005)
        if task.done():
            break
    assert task.cancelled()  # not waited for: waiting could only come before the call on the rest
    assert not threshold.done()  # the threshold's own call is held at the gate
    summarizer.gate.set()
    result = await asyncio.wait_for(threshold, 5)
    assert result is not None
    assert result.record["prepared"]["swap"] == "prepared+rest"
    assert result.record["prepared"]["threshold_calls"] == 1
    assert cm.prepared is not None
    assert cm.prepared.discarded == 1
    assert valid_pairs(cm)
    await cm.aclose()
    assert not jobs()


class JobRecordingScope(RecordingScope):
    """A session scope that also records the lookups a background job's task makes."""

    def __init__(self) -> None:
        super().__init__()
        self.job_lookups = 0
        self.job_missed: list[Hashable] = []

    def lookup(self, key: Hashable) -> tuple[bool, object]:
        found, value = super().lookup(key)
        try:
            task = asyncio.current_task()
        except RuntimeError:  # a worker thread of the job: no event loop of its own
            task = None
        if task is not None and task.get_name().startswith(PREFIX):
            self.job_lookups += 1
            if not found:
                self.job_missed.append(key)
        return found, value


async def test_a_background_job_reads_what_the_appends_scanned() -> None:
    cm = manager(ScriptedSummarizer(default=lambda r: "Summary: the agent read several modules."))
    scope = cm._state.memos = JobRecordingScope()
    appended: set[str] = set()
    index = 1
    while not cm.preparing:
        assert await cm.before_turn() is None, "grew into a compaction"
        for message in turn(index):
            appended |= texts_of(message)
        cm.append(*turn(index))
        index += 1
    await settle(cm)
    usage = cm.prepared
    assert usage is not None
    assert usage.jobs == 1
    assert scope.job_lookups > 0  # the job's compaction looked in the session's memos
    assert missed_on(scope.job_missed, appended) == []  # and found what the appends scanned
