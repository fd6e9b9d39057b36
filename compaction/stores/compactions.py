"""What a SQL session store does with compactions: :class:`SQLCompactions` saves one (the
compare-and-swap on ``summary_through_id``, with its history entry and archived originals in the
same transaction), and reads the history and the archive (an archived message by its id; recall
searches, answered by :mod:`compaction.recall.store_index`). Statements as in
:mod:`compaction.stores.sql`: written once with ``?`` placeholders, the rest from the
:class:`~compaction.stores.dialect.Dialect`.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from compaction.recall.store_index import SessionIndexes
from compaction.store import ArchiveSearch, CompactedTail, CompactionEntry
from compaction.stores.dialect import SQLDatabase
from compaction.stores.rows import (
    NO_ARCHIVE,
    archive_rows,
    check_compaction,
    check_owner,
    check_search,
    check_session_id,
    dumps_tail,
    entry_row,
    history_entries,
    loads_message,
    summary_column,
)

__all__ = ["SQLCompactions"]


class SQLCompactions(SQLDatabase):
    """Compactions, their history and the archive, on the tables of
    :class:`~compaction.stores.sql.SQLSessionStore` (which provides the session row's lock)."""

    _recall_indexes: SessionIndexes

    @abstractmethod
    def _lock_session(self, conn: Any, session_id: str) -> tuple[Any, ...]:
        """Hold the session's row to the end of this write; its ``summary_through_id``."""

    @abstractmethod
    def _require_session(self, conn: Any, session_id: str) -> None:
        """:class:`~compaction.stores.rows.SessionNotFound` unless the session exists."""

    # -- compaction -------------------------------------------------------------------------

    def save_compaction(
        self,
        session_id: str,
        *,
        expected_through_id: int | None,
        new_through_id: int,
        summary: str | None,
        entry: CompactionEntry,
        archive: Mapping[str, Mapping[str, Any]] = NO_ARCHIVE,
        tail: CompactedTail | None = None,
    ) -> bool:
        """Store a compaction if the session's ``summary_through_id`` is still ``expected_through_id``.

        In one write transaction, with the session's row held: compare ``summary_through_id`` with
        ``expected_through_id`` (``None`` matches a session never compacted); if they differ,
        another worker compacted first and the result is ``False`` with nothing changed. Otherwise
        set the summary, ``summary_through_id = new_through_id`` and the context's ``tail`` (None:
        the stored messages after ``new_through_id``), add ``entry`` to the history
        and ``archive`` (archive id -> original message) to the archive, and return ``True``.
        An archive id that the session already stored keeps its first message: the original, not a
        later rewrite. Each archived message is stored with its searchable text for
        :meth:`search_archive` in the same transaction.

        Caller errors raise instead of returning ``False`` (retrying could never succeed):
        ``ValueError`` when ``new_through_id`` is not above ``expected_through_id``, is not a
        message of this session, or differs from ``entry.summary_through_id``, when the record
        or an archived message is not JSON-serializable, or the tail is not one of this compaction
        (:func:`compaction.stores.rows.dumps_tail`); :class:`SessionNotFound`.
        """
        check_session_id(session_id)
        record_json = check_compaction(expected_through_id, new_through_id, entry)
        tail_json = dumps_tail(tail, new_through_id)
        archived = self._archive_rows(session_id, archive)
        now = time.time()
        with self._write() as conn:
            head = self._lock_session(conn, session_id)
            if head[0] != expected_through_id:
                return False  # lost the race: another worker compacted first
            self._check_compacted_ids(conn, session_id, new_through_id, tail)
            self._swap_context(conn, session_id, expected_through_id, new_through_id, summary, tail_json, now)
            self._execute(
                conn,
                "INSERT INTO compactions (session_id, at, tokens_before, tokens_after,"  # pragma: no mutate
                " messages_compacted, fallback_level, summary, summary_through_id,"  # pragma: no mutate
                ' "trigger", record)'  # mutated: a quoted name's case matters in PostgreSQL
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",  # pragma: no mutate
                entry_row(session_id, entry, record_json),
            )
            if archived:
                self._insert_archive(conn, archived, now)
        return True

    def _check_compacted_ids(self, conn: Any, session_id: str, new_through_id: int, tail: CompactedTail | None) -> None:
        """``ValueError`` unless ``new_through_id`` (and the tail's ``through_id``) are messages of
        this session."""
        # "pragma: no mutate" on SQL text: the case of keywords and unquoted identifiers is not
        # behaviour in SQLite or PostgreSQL, so its mutants could never be killed.
        owner_sql = "SELECT session_id FROM messages WHERE id = ?"  # pragma: no mutate
        owner = self._execute(conn, owner_sql, (new_through_id,)).fetchone()
        check_owner(owner, new_through_id, session_id)
        if tail is not None and tail.through_id != new_through_id:
            owner = self._execute(conn, owner_sql, (tail.through_id,))
            check_owner(owner.fetchone(), tail.through_id, session_id, "tail.through_id")

    def _swap_context(
        self,
        conn: Any,
        session_id: str,
        expected_through_id: int | None,
        new_through_id: int,
        summary: str | None,
        tail_json: str | None,
        now: float,
    ) -> None:
        """The compare-and-swap itself, with the session's row held: the new summary, through id and
        tail; the running token total becomes unknown (the next reader recounts the compacted
        context, which is small)."""
        cursor = self._execute(
            conn,
            "UPDATE sessions SET summary = ?, summary_through_id = ?, tail = ?, updated_at = ?,"  # pragma: no mutate
            " context_tokens = NULL, context_format = NULL"
            f" WHERE id = ? AND summary_through_id {self.dialect.same_as} ?",
            (summary_column(summary), new_through_id, tail_json, now, session_id, expected_through_id),
        )
        if cursor.rowcount != 1:  # cannot happen with the row held; never write on a lost swap
            raise self.dialect.data_error(f"compare-and-swap on session {session_id!r} matched no row")

    def _insert_archive(self, conn: Any, archived: Sequence[tuple[Any, ...]], now: float) -> None:
        """The archived originals with their searchable text; an archive id the session already
        stored keeps its first message."""
        # pragma: no mutate start
        columns = ("session_id", "archive_id", "message", "role", "text", *self.dialect.archive_columns)
        # pragma: no mutate end
        values = ", ".join("?" * len(columns))
        self._execute_many(
            conn,
            f"INSERT INTO archive ({', '.join(columns)}, created_at) VALUES ({values}, ?)"
            " ON CONFLICT (session_id, archive_id) DO NOTHING",  # pragma: no mutate
            [(*row, now) for row in archived],
        )

    def _archive_rows(self, session_id: str, archive: Mapping[str, Mapping[str, Any]]) -> list[tuple[Any, ...]]:
        """The archive's rows (:func:`compaction.stores.rows.archive_rows`) with the dialect's extra
        columns."""
        rows = archive_rows(session_id, archive)
        values = self.dialect.archive_values
        return [(*row, *values(row[4])) for row in rows] if values is not None else list(rows)

    def history(self, session_id: str) -> list[CompactionEntry]:
        """The session's compactions, oldest first."""
        check_session_id(session_id)
        with self._read() as conn:
            rows = self._execute(
                conn,
                "SELECT at, tokens_before, tokens_after, messages_compacted, fallback_level, summary,"
                ' summary_through_id, "trigger", record FROM compactions WHERE session_id = ? ORDER BY id',
                (session_id,),
            ).fetchall()
            if not rows:
                self._require_session(conn, session_id)
        return history_entries(rows)

    def archived(self, archive_id: str, *, session_id: str | None = None) -> dict[str, Any] | None:
        """The archived original message stored under ``archive_id``, or ``None``.

        Archive ids are per session: pass ``session_id`` to only find an id archived by that
        session (recommended when sessions belong to different users). Without it, the first
        message archived under that id by any session.
        """
        with self._read() as conn:
            if session_id is None:
                found = self._execute(
                    conn, "SELECT message FROM archive WHERE archive_id = ? ORDER BY id LIMIT 1", (archive_id,)
                )
            else:
                found = self._execute(
                    conn,
                    "SELECT message FROM archive WHERE session_id = ? AND archive_id = ?",
                    (session_id, archive_id),
                )
            row = found.fetchone()
        return None if row is None else loads_message(row[0], self.dialect.data_error)

    def search_archive(
        self,
        session_id: str,
        query: str,
        *,
        limit: int = 8,
        offset: int = 0,
        within: tuple[str | None, str | None] | None = None,
    ) -> ArchiveSearch:
        """Recall: the messages this session archived that match ``query`` (``within``: from the
        first to the last archive id given), best first, ``limit`` of them from rank ``offset``,
        exactly as :class:`compaction.recall.MemoryRecallIndex` answers (it is one: built from
        this session's archive rows alone, kept per session in memory and brought up to date from
        the rows archived since; see :mod:`compaction.recall.store_index`). Raises ``ValueError``
        for a blank query, a negative ``limit`` / ``offset`` or an archive id of ``within`` the
        session did not archive, :class:`SessionNotFound` for an unknown session.
        """
        check_session_id(session_id)
        query = check_search(query, limit, offset)
        with self._read() as conn:  # archive rows are never changed: rows above an id need no snapshot
            if not self._recall_indexes.known(session_id):
                self._require_session(conn, session_id)

            def rows_after(after_id: int) -> list[Any]:
                return list(
                    self._execute(
                        conn,
                        "SELECT id, archive_id, role, text FROM archive WHERE session_id = ? AND id > ? ORDER BY id",
                        (session_id, after_id),
                    ).fetchall()
                )

            return self._recall_indexes.search(session_id, rows_after, query, limit=limit, offset=offset, within=within)
