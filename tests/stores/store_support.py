"""What the SessionStore contract tests share: the two backends (SQLite file, PostgreSQL database),
how to open a store on one (also in spawned child processes), and small builders."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from compaction.sqlite_store import SQLiteSessionStore
from compaction.store import CompactionEntry

SPAWN_TIMEOUT = 120.0
BACKENDS = ["sqlite", "postgres"]


def open_store(kind: str, target: str) -> Any:
    """A store of ``kind`` on ``target`` (a file path or a PostgreSQL URL); also used in child processes."""
    if kind == "sqlite":
        return SQLiteSessionStore(target)
    from compaction.postgres_store import PostgresSessionStore

    return PostgresSessionStore(target, pool_size=8)


@dataclass
class Backend:
    kind: str
    target: str

    def open(self) -> Any:
        return open_store(self.kind, self.target)


def entry(through: int, summary: str | None = "s", **overrides: Any) -> CompactionEntry:
    fields: dict[str, Any] = {
        "at": 1_700_000_000.5,
        "tokens_before": 1000,
        "tokens_after": 200,
        "messages_compacted": 3,
        "fallback_level": "full",
        "summary": summary,
        "summary_through_id": through,
        "record": {"chunks": [1, 2], "note": "ok"},
        "trigger": "threshold",
    }
    fields.update(overrides)
    return CompactionEntry(**fields)


def msgs(n: int, prefix: str = "m") -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{prefix}{i}"} for i in range(n)]


def snapshot(store: Any, session_id: str) -> tuple[Any, ...]:
    return (store.context(session_id), store.history(session_id), store.messages(session_id))


def save_archive(store: Any, session_id: str, archive: dict[str, dict[str, Any]]) -> None:
    """One compaction of ``session_id`` that archived ``archive``."""
    store.create_session(session_id)
    through = store.context(session_id).summary_through_id
    new = store.append(session_id, [{"role": "user", "content": "next"}])[0]
    assert store.save_compaction(
        session_id, expected_through_id=through, new_through_id=new, summary="s", entry=entry(new), archive=archive
    )


def threads_append_and_race(store: Any) -> None:
    """Four threads append to one new session ``s`` (no id lost, repeated or out of order), then
    four race to compact it: exactly one wins, and only its archive is stored."""
    store.create_session("s")
    n_threads, per_thread = 4, 50
    returned: dict[int, list[int]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(n_threads)

    def appender(t: int) -> None:
        try:
            start.wait(timeout=30)
            mine: list[int] = []
            for j in range(per_thread):
                if j % 10 == 0:
                    mine += store.append("s", [{"role": "user", "content": f"t{t}-{j}-{k}"} for k in range(3)])
                else:
                    mine += store.append("s", [{"role": "user", "content": f"t{t}-{j}"}])
                store.context("s")
            returned[t] = mine
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=appender, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert errors == []
    all_ids = [i for ids in returned.values() for i in ids]
    assert len(all_ids) == len(set(all_ids)) == n_threads * (per_thread + 10)
    for ids in returned.values():
        assert ids == sorted(ids)
    assert [m.id for m in store.messages("s")] == sorted(all_ids)

    state = store.context("s")
    race = threading.Barrier(n_threads)
    wins: list[bool] = []

    def compactor(t: int) -> None:
        through = state.messages[10 + t].id
        race.wait(timeout=30)
        won = store.save_compaction(
            "s",
            expected_through_id=state.summary_through_id,
            new_through_id=through,
            summary=f"by {t}",
            entry=entry(through, f"by {t}"),
            archive={f"by-{t}": {"role": "user", "content": f"archived by {t}"}},
        )
        wins.append(won)

    threads = [threading.Thread(target=compactor, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert sorted(wins) == [False] * (n_threads - 1) + [True]
    (saved,) = store.history("s")
    assert store.context("s").summary == saved.summary
    winner = int(str(saved.summary).removeprefix("by "))
    assert [t for t in range(n_threads) if store.archived(f"by-{t}") is not None] == [winner]
    assert len(store.messages("s")) == len(all_ids)
