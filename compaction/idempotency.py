"""Idempotent appends: a batch sent again with the same key is stored once.

A client that loses the connection while a large append commits cannot tell whether it was
stored; retrying without a key would store the batch twice. With an ``idempotency_key`` the store
records, in the append's own transaction, the key, a digest of the batch and the ids it got: a
retry with the same key and batch returns those ids and stores nothing; the same key with another
batch is refused (:class:`IdempotencyKeyReused`). Keys are per session and kept for
:data:`KEEP_SECONDS`.

This module holds the rules (what a key may be, what identifies a batch); the SQL stores keep the
keys in their ``appends`` table, in the append's transaction
(:meth:`compaction.stores.sql.SQLSessionStore.append`). An empty batch is a batch too: its key is
kept, and the same key with messages is refused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

KEEP_SECONDS: Final = 24 * 3600
MAX_KEY_LENGTH: Final = 200


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
