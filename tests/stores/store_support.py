"""What the SessionStore contract tests share: the two backends (SQLite file, PostgreSQL database),
how to open a store on one (also in spawned child processes), and small builders."""

from __future__ import annotations

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
