"""One session store for SQLite and PostgreSQL: :class:`SQLSessionStore` holds every statement and
rule the two databases share; a :class:`~compaction.stores.dialect.Dialect` says what differs in
their SQL. Each database's subclass (:mod:`compaction.stores.sqlite`,
:mod:`compaction.stores.postgres`) adds only its connections, transactions (of the three kinds
:mod:`compaction.stores.dialect` describes), schema and migrations.

Sessions, messages, the context's running token total, the background-prepared summary and
usage are here; compactions, their history and the archive are in
:mod:`compaction.stores.compactions` (:class:`~compaction.stores.compactions.SQLCompactions`, a
base of :class:`SQLSessionStore`).

Statements are written once, with ``?`` placeholders. The upserts are the same SQL on both
(``INSERT ... ON CONFLICT``). Text and JSON columns are escaped alike on both
(:mod:`compaction._store_text`, through :mod:`compaction.stores.rows`), so a row means the same in
either database. The tables outside the versioned schema
(:func:`~compaction.stores.dialect.side_tables`: idempotency keys, the event log, the
background-prepared summary) are created on every open, so databases of every schema version get
them without a migration.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from compaction import idempotency
from compaction.store import SessionContext, StoredMessage
from compaction.store_usage import Usage, prefix_bounds
from compaction.stores.compactions import SQLCompactions
from compaction.stores.events import SQLEventLog
from compaction.stores.rows import (
    ContextHead,
    CountedBatch,
    SessionNotFound,
    check_counted,
    check_model,
    check_session_id,
    context_after,
    dumps,
    head_of,
    message_rows,
    prepared_state,
    session_context,
    stored_messages,
)

__all__ = ["SQLSessionStore"]


def _last_message_id(session: str) -> str:
    """SQL for the id of the session's newest message (0: none); ``session`` is the SQL naming the
    session id (a placeholder or a column)."""
    return f"(SELECT coalesce(max(id), 0) FROM messages WHERE session_id = {session})"


# A session's messages above an id, oldest first, as rows.stored_messages reads them.
_MESSAGES_AFTER = "SELECT id, message, created_at, tokens FROM messages WHERE session_id = ? AND id > ? ORDER BY id"


class SQLSessionStore(SQLCompactions, SQLEventLog):
    """A :class:`~compaction.store.SessionStore` (with :class:`~compaction.store.PreparedStateStore`,
    :class:`~compaction.event_log.EventLog` and :class:`~compaction.store_usage.UsageMeter`) on a
    SQL database; a subclass names its ``dialect`` and provides connections and transactions.

    Messages are append-only: no method deletes or rewrites one (and each database's schema
    refuses it). Errors: an unknown session id raises :class:`SessionNotFound` (a ``KeyError``); a
    message that cannot be stored as JSON raises ``ValueError`` naming its index in the batch.
    """

    def _insert_messages(
        self, conn: Any, session_id: str, rows: Sequence[str], now: float, tokens: Sequence[int | None]
    ) -> list[int]:
        """Insert a batch of message rows in order, each with its token count (None: not counted);
        their ids, in order (a subclass may do it in one statement)."""
        statement = "INSERT INTO messages (session_id, message, created_at, tokens) VALUES (?, ?, ?, ?)"
        return [
            self._insert_id(conn, statement, (session_id, text, now, count), "id")
            for text, count in zip(rows, tokens, strict=True)
        ]

    def _lock_session(self, conn: Any, session_id: str) -> tuple[Any, ...]:
        """Hold the session's row to the end of this write; its ``summary_through_id``."""
        row = self._execute(
            conn, f"SELECT summary_through_id FROM sessions WHERE id = ?{self.dialect.lock_row}", (session_id,)
        ).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return tuple(row)

    def _require_session(self, conn: Any, session_id: str) -> None:
        if self._execute(conn, "SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
            raise SessionNotFound(session_id)

    # -- sessions -------------------------------------------------------------------------------

    def create_session(self, session_id: str, *, system: Any = None, model: str | None = None) -> None:
        """Create the session if it does not exist (idempotent); update system/model when given
        (``None`` leaves the stored value as it is)."""
        check_session_id(session_id)
        system_json = None if system is None else dumps(system, "system")
        now = time.time()
        with self._write() as conn:
            self._execute(
                conn,
                "INSERT INTO sessions (id, system, model, summary, summary_through_id, created_at, updated_at)"
                " VALUES (?, ?, ?, NULL, NULL, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET"
                "  system = COALESCE(excluded.system, sessions.system),"
                "  model = COALESCE(excluded.model, sessions.model),"
                "  updated_at = CASE WHEN excluded.system IS NULL AND excluded.model IS NULL"
                "               THEN sessions.updated_at ELSE excluded.updated_at END,"
                # A new system prompt or model changes what the context counts: recount it.
                "  context_tokens = CASE WHEN excluded.system IS NULL AND excluded.model IS NULL"
                "                   THEN sessions.context_tokens END,"
                "  tokens_from_id = CASE WHEN excluded.model IS NULL"
                f"   OR excluded.model {self.dialect.same_as} sessions.model"
                "                   THEN sessions.tokens_from_id ELSE"
                f"                  {_last_message_id('excluded.id')} END",
                (session_id, system_json, model, now, now),
            )

    def sessions(self) -> list[str]:
        """Every session id, oldest session first."""
        with self._read() as conn:
            return [row[0] for row in self._execute(conn, "SELECT id FROM sessions ORDER BY created_at, id")]

    def set_model(self, session_id: str, model: str) -> None:
        """Record a model change: :meth:`context` returns the new model from now on, so the caller
        re-derives the budget from the new model's window. Messages and summary are unchanged."""
        check_session_id(session_id)
        check_model(model)
        with self._write() as conn:
            cursor = self._execute(
                conn,
                "UPDATE sessions SET model = ?, updated_at = ?, context_tokens = NULL,"
                f" tokens_from_id = {_last_message_id('?')} WHERE id = ?",
                (model, time.time(), session_id, session_id),
            )
            if cursor.rowcount == 0:
                raise SessionNotFound(session_id)

    # -- messages ---------------------------------------------------------------------------

    def append(
        self,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
        counted: CountedBatch | None = None,
    ) -> list[int]:
        """Append ``messages`` in one transaction and return their ids, in order.

        Ids are assigned by the store, unique across the whole database and increasing in commit
        order within a session. Stored messages are never rewritten or deleted. Raises
        :class:`SessionNotFound`, ``TypeError`` for an item that is not a mapping, and ``ValueError``
        naming the index of a message that is not JSON-serializable (nothing of the batch is stored
        then). With ``idempotency_key``, a batch already appended with that key (an empty one too)
        is not stored again: its ids are returned (see :mod:`compaction.idempotency`).

        ``counted``: the batch's token counts (:class:`~compaction.stores.rows.CountedBatch`), kept
        in the rows and added to the session's running total (``context_head().context_tokens``);
        without it the rows hold no count and the running total becomes unknown.
        """
        check_session_id(session_id)
        if idempotency_key is not None:
            idempotency.check_key(idempotency_key)
        rows = message_rows(messages)
        check_counted(counted, len(rows))
        now = time.time()
        with self._write() as conn:
            self._lock_session(conn, session_id)
            if idempotency_key is not None:
                batch_digest = idempotency.digest(rows)
                stored = self._replayed(conn, session_id, idempotency_key, batch_digest)
                if stored is not None:
                    return stored
            tokens = counted.tokens if counted is not None else (None,) * len(rows)
            ids = self._insert_messages(conn, session_id, rows, now, tokens) if rows else []
            if ids:
                self._count_appended(conn, session_id, ids[0], counted, now)
            if idempotency_key is not None:
                self._remember_key(conn, session_id, idempotency_key, batch_digest, ids)
        return ids

    def _count_appended(
        self, conn: Any, session_id: str, first_id: int, counted: CountedBatch | None, now: float
    ) -> None:
        """Add an append's counts to the session's running total, if the session still has the
        model and context format they were counted against; else the total becomes unknown (and
        rows before the batch are marked as counted for something else when the batch changed it)."""
        same = self.dialect.same_as
        if counted is None or not counted.keep_total:
            self._execute(
                conn,
                "UPDATE sessions SET updated_at = ?, context_tokens = NULL,"
                " tokens_from_id = CASE WHEN ? THEN tokens_from_id ELSE ? END WHERE id = ?",
                (now, counted is None, first_id - 1, session_id),
            )
            return
        matches = f"model {same} CAST(? AS TEXT) AND context_format {same} CAST(? AS TEXT)"
        self._execute(
            conn,
            f"UPDATE sessions SET updated_at = ?,"
            f" context_tokens = CASE WHEN {matches} THEN context_tokens + ? END,"
            f" context_format = CASE WHEN {matches} THEN CAST(? AS TEXT) ELSE context_format END"
            " WHERE id = ?",
            (
                now,
                *(counted.model, counted.context_format, sum(counted.tokens)),
                *(counted.model, counted.context_format, counted.new_format),
                session_id,
            ),
        )

    def _replayed(self, conn: Any, session_id: str, key: str, batch_digest: str) -> list[int] | None:
        """The ids a former append with ``key`` got (None when there was none); raises
        :class:`~compaction.idempotency.IdempotencyKeyReused` when that append stored another batch."""
        found = self._execute(
            conn, "SELECT digest, ids FROM appends WHERE session_id = ? AND key = ?", (session_id, key)
        ).fetchone()
        if found is None:
            return None
        if found[0] != batch_digest:
            raise idempotency.IdempotencyKeyReused(key)
        return [int(i) for i in json.loads(found[1])]

    def _remember_key(self, conn: Any, session_id: str, key: str, batch_digest: str, ids: Sequence[int]) -> None:
        """Remember ``key`` for this append (and forget the session's keys older than the keep time)."""
        now = time.time()
        forget = now - idempotency.KEEP_SECONDS
        self._execute(conn, "DELETE FROM appends WHERE session_id = ? AND at < ?", (session_id, forget))
        self._execute(
            conn,
            "INSERT INTO appends (session_id, key, digest, ids, at) VALUES (?, ?, ?, ?, ?)",
            (session_id, key, batch_digest, json.dumps(list(ids)), now),
        )

    def messages(self, session_id: str, *, after_id: int | None = None) -> list[StoredMessage]:
        """All messages of the session, or only those with an id above ``after_id``, oldest first.
        Compaction never removes anything from this list."""
        check_session_id(session_id)
        with self._read() as conn:
            rows = self._execute(conn, _MESSAGES_AFTER, (session_id, 0 if after_id is None else after_id)).fetchall()
            if not rows:
                self._require_session(conn, session_id)
        return stored_messages(rows, self.dialect.data_error)

    def context(self, session_id: str) -> SessionContext:
        """The session's summary, system, model, the last compaction's tail and the messages after
        it (or, without a tail, after ``summary_through_id``), in one consistent snapshot; messages
        at or before that id are not read at all."""
        check_session_id(session_id)
        with self._snapshot() as conn:
            head = self._execute(
                conn,
                "SELECT system, model, summary, summary_through_id, tail FROM sessions WHERE id = ?",
                (session_id,),
            ).fetchone()
            if head is None:
                raise SessionNotFound(session_id)
            rows = self._execute(conn, _MESSAGES_AFTER, (session_id, context_after(head))).fetchall()
        return session_context(session_id, head, rows, self.dialect.data_error)

    # -- the context's running token total ----------------------------------------------------

    def context_head(self, session_id: str) -> ContextHead:
        """The session's row without its messages (:class:`~compaction.stores.rows.ContextHead`):
        one indexed read, whatever the session's length."""
        check_session_id(session_id)
        with self._snapshot() as conn:
            row = self._execute(
                conn,
                "SELECT system, model, summary, summary_through_id, context_tokens, context_format, tokens_from_id,"
                f" {_last_message_id('?')} FROM sessions WHERE id = ?",
                (session_id, session_id),
            ).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return head_of(session_id, row)

    def set_context_tokens(
        self,
        session_id: str,
        tokens: int,
        *,
        context_format: str | None,
        model: str | None,
        summary_through_id: int | None,
        last_id: int,
    ) -> bool:
        """Set the running total after a recount of the whole context, if the session is still as
        the recount read it: the same ``model``, ``summary_through_id`` and newest message
        ``last_id`` (0: none), its total still unknown. True when it was set."""
        check_session_id(session_id)
        same = self.dialect.same_as
        with self._write() as conn:
            self._lock_session(conn, session_id)
            cursor = self._execute(
                conn,
                "UPDATE sessions SET context_tokens = ?, context_format = CAST(? AS TEXT)"
                f" WHERE id = ? AND context_tokens IS NULL AND model {same} CAST(? AS TEXT)"
                f" AND summary_through_id {same} CAST(? AS BIGINT)"
                f" AND {_last_message_id('?')} = ?",
                (int(tokens), context_format, session_id, model, summary_through_id, session_id, int(last_id)),
            )
            return bool(cursor.rowcount == 1)

    # -- background-prepared summary (compaction.store.PreparedStateStore) --------------------

    def load_prepared(self, session_id: str) -> tuple[int, dict[str, Any] | None]:
        """``(version, state)`` of the session's background-prepared summary; ``(0, None)`` when
        none was ever saved, ``state`` None when it was cleared."""
        check_session_id(session_id)
        with self._read() as conn:
            row = self._execute(conn, "SELECT version, state FROM prepared WHERE session_id = ?", (session_id,))
            return prepared_state(row.fetchone())

    def save_prepared(self, session_id: str, *, expected_version: int, state: dict[str, Any] | None) -> int | None:
        """Compare-and-swap the prepared state on its version (``state=None`` clears it; the version
        still moves on, so a writer that read the old state cannot bring it back). Returns the new
        version, or None (nothing changed) when another writer changed it first. One statement: the
        first save inserts (a concurrent first save finds the row there and does nothing), later ones
        update only the row still at ``expected_version``."""
        check_session_id(session_id)
        text = dumps(state, "prepared state")
        with self._write() as conn:
            if expected_version == 0:
                cursor = self._execute(
                    conn,
                    "INSERT INTO prepared (session_id, version, state) VALUES (?, 1, ?)"
                    " ON CONFLICT (session_id) DO NOTHING",
                    (session_id, text),
                )
            else:
                cursor = self._execute(
                    conn,
                    "UPDATE prepared SET version = version + 1, state = ? WHERE session_id = ? AND version = ?",
                    (text, session_id, expected_version),
                )
            return expected_version + 1 if cursor.rowcount == 1 else None

    # -- usage (compaction.store_usage.UsageMeter) ---------------------------------------------

    def usage(self, prefix: str) -> Usage:
        """Sessions whose id starts with ``prefix`` and the UTF-8 bytes of their stored messages:
        one range scan on each session-id index (ids from ``prefix`` up to the next prefix)."""
        bounds = prefix_bounds(prefix)
        order = self.dialect.byte_order
        size = self.dialect.byte_length.format("message")
        with self._snapshot() as conn:
            sessions = self._execute(
                conn, f"SELECT count(*) FROM sessions WHERE id{order} >= ? AND id{order} < ?", bounds
            ).fetchone()
            stored = self._execute(
                conn,
                f"SELECT coalesce(sum({size}), 0) FROM messages WHERE session_id{order} >= ? AND session_id{order} < ?",
                bounds,
            ).fetchone()
        return Usage(int(sessions[0] if sessions else 0), int(stored[0] if stored else 0))
