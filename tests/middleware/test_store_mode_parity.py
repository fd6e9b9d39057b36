"""Store mode sends what the compaction produced: the same agent loop in memory, on SQLite and on
PostgreSQL compacts as often, and after every compaction the next request is the compaction's
output (trimmed tool results stay trimmed) and holds the tokens the result reported."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from compaction.adapters import to_canonical
from compaction.compactor import Compactor
from compaction.config import CompactionConfig
from compaction.middleware import CompactionFinished, ContextManager
from compaction.pairs import validate
from compaction.result import CompactionResult
from compaction.sqlite_store import SQLiteSessionStore
from compaction.store import CompactedTail, StoredMessage
from compaction.tokens import EstimateCounter

SYSTEM = "You are a coding agent. Read files, run tests, fix what fails."
TASK = "The payment retry test in tests/test_retry.py is flaky: find out why and fix it; never push to main."
# Tool outputs of very different sizes: the big ones are trimmed when they stay in the kept tail.
SIZES = (1_500, 22_375, 3_000, 600, 9_000, 14_000, 2_200)


def log_blob(chars: int, tag: str) -> str:
    line = f"{tag}: INFO worker=3 retry=2 latency_ms=184 status=ok path=src/payments/retry.py\n"
    return (line * (chars // len(line) + 1))[:chars]


def assistant_turn(i: int) -> dict[str, Any]:
    call = {"id": f"call_{i:03d}", "type": "function", "function": {"name": "run", "arguments": json.dumps({"n": i})}}
    return {"role": "assistant", "content": f"Step {i}: running the next check.", "tool_calls": [call]}


def tool_result(i: int) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"call_{i:03d}", "content": log_blob(SIZES[i % len(SIZES)], f"step{i}")}


def compactor() -> Compactor:
    config = CompactionConfig(
        window=40_000, reserve_tokens=8_000, threshold=0.5, keep_recent_messages=6, max_summary_tokens=800
    )
    return Compactor("test-model", None, config, counter=EstimateCounter())


@dataclass
class LoopRun:
    requests: list[list[dict[str, Any]]] = field(default_factory=list)
    compactions: list[tuple[int, CompactionResult, int]] = field(default_factory=list)
    """(index of the next request, the result, the manager's tokens right after)."""
    finished: list[CompactionFinished] = field(default_factory=list)


async def agent_loop(store: Any, turns: int = 40, *, prepare: bool = False) -> LoopRun:
    run = LoopRun()

    async def call(messages: list[dict[str, Any]], system: Any) -> Any:
        run.requests.append(messages)
        return {"choices": [{"message": assistant_turn(len(run.requests))}]}  # no usage: the local count decides

    def on_event(event: Any) -> None:
        if isinstance(event, CompactionFinished):
            run.finished.append(event)

    cm = ContextManager(
        compactor(),
        session_id="loop",
        store=store,
        system=SYSTEM,
        messages=[{"role": "user", "content": TASK}],
        on_event=on_event,
        prepare=prepare,
    )
    for i in range(turns):
        result = await cm.before_turn()
        if result is not None and result.compacted:
            run.compactions.append((len(run.requests), result, cm.tokens))
        await cm.complete(call=call)
        cm.append(assistant_turn(i), tool_result(i))
    await cm.aclose()
    return run


def check_sends_what_was_reported(run: LoopRun) -> None:
    assert run.compactions, "the loop must compact"
    for index, result, tokens in run.compactions:
        # What the manager holds, and so sends, is what the compaction counted...
        assert abs(tokens - result.tokens_after) <= 2, (tokens, result.tokens_after)
        # ...and exactly what it returned: trimmed tool results stay trimmed.
        request = run.requests[index]
        assert request == result.messages
        largest = max(len(str(m.get("content"))) for m in request if m.get("role") == "tool")
        assert largest <= max(len(str(m.get("content"))) for m in result.messages if m.get("role") == "tool")
    for request in run.requests:
        assert validate(to_canonical(request)) == []


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLiteSessionStore]:
    with SQLiteSessionStore(tmp_path / "loop.db") as store:
        yield store


@pytest.fixture
def postgres_store(postgres: Any) -> Iterator[Any]:
    from compaction.postgres_store import PostgresSessionStore

    with PostgresSessionStore(postgres.new_database("parity")) as store:
        yield store


async def test_the_same_loop_in_memory_on_sqlite_and_on_postgres(
    sqlite_store: SQLiteSessionStore, postgres_store: Any
) -> None:
    memory = await agent_loop(None)
    sqlite = await agent_loop(sqlite_store)
    postgres = await agent_loop(postgres_store)
    for run in (memory, sqlite, postgres):
        check_sends_what_was_reported(run)
    # A store changes where the context lives, not how often it is compacted.
    assert len(sqlite.compactions) == len(memory.compactions) == len(postgres.compactions)
    assert [e.tokens_after for e in sqlite.finished] == [r.tokens_after for _, r, _ in sqlite.compactions]
    # Both stores give the very same requests.
    assert sqlite.requests == postgres.requests
    # Nothing was lost: every original is stored as it was appended.
    stored = [m.message for m in sqlite_store.messages("loop")]
    assert [m for m in stored if m.get("role") == "tool"] == [tool_result(i) for i in range(40)]


@pytest.mark.parametrize("where", ["memory", "sqlite"])
async def test_summaries_prepared_in_the_background_send_what_they_report(where: str, tmp_path: Path) -> None:
    with SQLiteSessionStore(tmp_path / "prepared.db") as store:
        run = await agent_loop(store if where == "sqlite" else None, prepare=True)
    check_sends_what_was_reported(run)
    assert any("prepared in the background" in result.reason for _, result, _ in run.compactions)


async def test_compact_now_keeps_the_trimmed_tail_and_archives_the_original(tmp_path: Path) -> None:
    big = {"role": "tool", "tool_call_id": "call_019", "content": log_blob(22_375, "huge")}
    messages = [{"role": "user", "content": TASK}]
    for i in range(20):
        messages += [assistant_turn(i), tool_result(i) if i != 19 else big]
    results: dict[str, tuple[CompactionResult, ContextManager]] = {}
    with SQLiteSessionStore(tmp_path / "s.db") as store:
        for name, where in (("memory", None), ("store", store)):
            cm = ContextManager(compactor(), session_id="s", store=where, system=SYSTEM, messages=messages)
            result = await cm.compact_now()
            assert result.compacted
            results[name] = (result, cm)
            assert cm.tokens == result.tokens_after
            assert [{"role": "system", "content": SYSTEM}, *cm.messages] == result.messages
            sent = [m for m in cm.messages if m.get("tool_call_id") == "call_019"]
            assert len(sent) == 1
            assert len(sent[0]["content"]) < 22_375 // 2  # trimmed, as returned
        result, cm = results["store"]
        # The original stays stored and is archived: recallable by the archive id the trim names.
        assert big in [m.message for m in store.messages("s")]
        assert big in result.archive.values()
        archive_id = next(k for k, v in result.archive.items() if v == big)
        assert store.archived(archive_id, session_id="s") == big
        # A new manager on the session (a restart, another worker) gets the same context.
        again = ContextManager(compactor(), session_id="s", store=store)
        assert again.messages == cm.messages
        assert again.tokens == cm.tokens
        # The next compaction extends it from the compacted tail, not from the originals.
        for i in range(20, 34):
            again.append(assistant_turn(i), tool_result(i))
        second = await again.compact_now()
        assert second.compacted
        assert again.tokens == second.tokens_after
        assert [{"role": "system", "content": SYSTEM}, *again.messages] == second.messages
        assert validate(to_canonical(again.messages)) == []


def test_the_stored_tail_is_checked_before_it_is_written(tmp_path: Path) -> None:
    from compaction.store import CompactionEntry

    with SQLiteSessionStore(tmp_path / "t.db") as store:
        store.create_session("s")
        ids = store.append("s", [{"role": "user", "content": f"m{i}"} for i in range(5)])

        def save(tail: CompactedTail) -> bool:
            entry = CompactionEntry(0.0, 10, 5, 2, "full", "sum", ids[1])
            return store.save_compaction(
                "s", expected_through_id=None, new_through_id=ids[1], summary="sum", entry=entry, tail=tail
            )

        with pytest.raises(ValueError, match=r"tail\.through_id"):
            save(CompactedTail(messages=(), through_id=ids[0]))
        bad = (StoredMessage(ids[3], {"role": "user", "content": "x"}), StoredMessage(ids[2], {"role": "user"}))
        with pytest.raises(ValueError, match="tail message 1"):
            save(CompactedTail(messages=bad, through_id=ids[3]))
        assert store.context("s").summary is None  # nothing written
        kept = (StoredMessage(ids[2], {"role": "user", "content": "m2, trimmed"}),)
        assert save(CompactedTail(messages=kept, through_id=ids[3]))
        context = store.context("s")
        assert [m.message["content"] for m in context.messages] == ["m2, trimmed", "m4"]
        assert [m.id for m in context.messages] == [ids[2], ids[4]]
        assert context.tail_through_id == ids[3]
        assert [m.message["content"] for m in store.messages("s")] == [f"m{i}" for i in range(5)]
