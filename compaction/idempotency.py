"""Idempotent appends: a batch sent again with the same key is stored once.

A client that loses the connection while a large append commits cannot tell whether it was
stored; retrying without a key would store the batch twice. With an ``idempotency_key`` the store
records, in the append's own transaction, the key, a digest of the batch and the ids it got: a
retry with the same key and batch returns those ids and stores nothing; the same key with another
batch is refused (:class:`IdempotencyKeyReused`). Keys are per session and kept for
:data:`KEEP_SECONDS`.

The stores call these helpers inside their append transaction (SQLite's ``?`` placeholders,
PostgreSQL's ``%s``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any, Final

KEEP_SECONDS: Final = 24 * 3600
MAX_KEY_LENGTH: Final = 200

SQLITE_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS appends (session_id TEXT NOT NULL, key TEXT NOT NULL, digest TEXT NOT NULL, "
    "ids TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (session_id, key))"
)
POSTGRES_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS appends (session_id TEXT NOT NULL, key TEXT NOT NULL, digest TEXT NOT NULL, "
    "ids TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, PRIMARY KEY (session_id, key))"
)


class IdempotencyKeyReused(ValueError):
    """The key was already used for another batch in this session."""

    def __init__(self, key: str) -> None:
        super().__init__(f"idempotency key {key!r} was already used for a different batch of messages in this session")
        self.key = key


def check_key(key: str) -> None:
    """Raise ``ValueError`` for a key that cannot be one (empty, too long, control characters)."""
    if not key or len(key) > MAX_KEY_LENGTH or not key.isprintable():
        raise ValueError(f"an idempotency key is 1 to {MAX_KEY_LENGTH} printable characters, got {key!r}")


def digest(rows: Sequence[str]) -> str:
    """What identifies a batch: the SHA-256 of its stored rows, in order."""
    h = hashlib.sha256()
    for row in rows:
        h.update(row.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def replayed(conn: Any, placeholder: str, session_id: str, key: str, batch_digest: str) -> list[int] | None:
    """The ids a former append with ``key`` got (None when there was none); raises
    :class:`IdempotencyKeyReused` when that append stored another batch."""
    p = placeholder
    row = conn.execute(f"SELECT digest, ids FROM appends WHERE session_id = {p} AND key = {p}", (session_id, key))
    found = row.fetchone()
    if found is None:
        return None
    if found[0] != batch_digest:
        raise IdempotencyKeyReused(key)
    return [int(i) for i in json.loads(found[1])]


def record(conn: Any, placeholder: str, session_id: str, key: str, batch_digest: str, ids: Sequence[int]) -> None:
    """Remember ``key`` for this append (and forget the session's keys older than the keep time)."""
    p = placeholder
    now = time.time()
    conn.execute(f"DELETE FROM appends WHERE session_id = {p} AND at < {p}", (session_id, now - KEEP_SECONDS))
    conn.execute(
        f"INSERT INTO appends (session_id, key, digest, ids, at) VALUES ({p}, {p}, {p}, {p}, {p})",
        (session_id, key, batch_digest, json.dumps(list(ids)), now),
    )
