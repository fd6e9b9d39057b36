"""What differs between the SQL of SQLite and PostgreSQL (:class:`Dialect`), and what every SQL
store class stands on (:class:`SQLDatabase`): transactions of three kinds, statements written once
with ``?`` placeholders, inserts that hand back their new id.

Transactions. A database's store class provides three kinds, and every method says which it needs:

* ``_write()``: a write. A write to a session first takes the session's row
  (:meth:`compaction.stores.sql.SQLSessionStore._lock_session`; PostgreSQL: ``SELECT ... FOR
  UPDATE``, SQLite's ``BEGIN IMMEDIATE`` already holds the whole database), so one session's
  appends and compactions run one after the other: its message ids increase in commit order, and a
  compaction's compare-and-swap on ``summary_through_id`` sees the one committed before it.
* ``_snapshot()``: several SELECTs that must see one state.
* ``_read()``: reads that need no common snapshot (one statement, or rows that never change).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, closing
from dataclasses import dataclass, field
from functools import cache
from types import TracebackType
from typing import Any, Self

__all__ = ["Dialect", "SQLDatabase", "side_tables", "token_columns"]


@dataclass(frozen=True)
class Dialect:
    """What differs between the SQL of two databases that hold the same tables."""

    name: str
    placeholder: str
    """The driver's parameter marker: ``?`` (sqlite3) or ``%s`` (psycopg)."""
    integer: str
    """The type of a counter column (event numbers, prepared-state versions)."""
    real: str
    """The type of a time column (Unix seconds)."""
    serial_key: str
    """An integer primary key the database numbers itself, in increasing order."""
    lock_row: str
    """What follows the SELECT of the session row a write goes on from, to hold it to the end of
    the transaction (empty where the transaction already holds the whole database)."""
    same_as: str
    """Equality that also holds between two NULLs."""
    byte_length: str
    """The UTF-8 size of a text column, with ``{}`` for the column."""
    byte_order: str
    """The collation clause under which text compares byte by byte (empty: the default already does)."""
    returning: bool
    """Whether an insert hands back its new id with ``RETURNING`` (else the cursor's ``lastrowid``)."""
    serialize_events: str = ""
    """A statement that makes event appends run one at a time, so their cursors become visible in
    order (empty where write transactions already do)."""
    archive_columns: tuple[str, ...] = ()
    """Columns of the archive beyond the shared ones, written for other readers of the table."""
    archive_values: Callable[[str], tuple[Any, ...]] | None = field(default=None, compare=False)
    """The values of :attr:`archive_columns` for an archived message's searchable text."""
    data_error: type[Exception] = ValueError
    """Raised for a stored row that cannot be read back (or a write the database did not apply)."""
    add_column: str = "ADD COLUMN"
    """How a migration adds a column (PostgreSQL can skip one that is there already)."""

    def sql(self, statement: str) -> str:
        """``statement`` (written with ``?`` placeholders, and no other ``?`` or ``%``) for the driver."""
        return _with_placeholder(statement, self.placeholder)


@cache
def _with_placeholder(statement: str, placeholder: str) -> str:
    return statement if placeholder == "?" else statement.replace("?", placeholder)


def side_tables(dialect: Dialect) -> tuple[str, ...]:
    """The tables outside the versioned schema, created if they do not exist: idempotency keys of
    appends (:mod:`compaction.idempotency`), the event log (:mod:`compaction.event_log`) and the
    background-prepared summary (a cache the context manager can always rebuild)."""
    return (
        "CREATE TABLE IF NOT EXISTS appends (session_id TEXT NOT NULL, key TEXT NOT NULL, digest TEXT NOT NULL, "
        f"ids TEXT NOT NULL, at {dialect.real} NOT NULL, PRIMARY KEY (session_id, key))",
        f"CREATE TABLE IF NOT EXISTS events (cursor {dialect.serial_key}, session_id TEXT NOT NULL, "
        f"seq {dialect.integer} NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, at {dialect.real} NOT NULL, "
        "UNIQUE (session_id, seq))",
        f"CREATE TABLE IF NOT EXISTS prepared (session_id TEXT PRIMARY KEY, version {dialect.integer} NOT NULL, "
        "state TEXT NOT NULL)",
    )


def token_columns(dialect: Dialect) -> tuple[str, ...]:
    """The migration that adds the token counts to a database made before them: each message's
    count as its writer counted it, and the context's running total (see
    :class:`compaction.stores.rows.ContextHead`). Rows of older databases have no count: they are
    counted when a reader recounts the context, and the total starts unknown."""
    # Written out whole, so that a reader (and the store contract test) sees that nothing but a
    # column is added to messages.
    statements = (
        "ALTER TABLE messages ADD COLUMN tokens INTEGER",
        f"ALTER TABLE sessions ADD COLUMN context_tokens {dialect.integer}",
        "ALTER TABLE sessions ADD COLUMN context_format TEXT",
        f"ALTER TABLE sessions ADD COLUMN tokens_from_id {dialect.integer} NOT NULL DEFAULT 0",
    )
    return tuple(statement.replace(" ADD COLUMN ", f" {dialect.add_column} ") for statement in statements)


class SQLDatabase(ABC):
    """A store on a SQL database: its :attr:`dialect`, its transactions (provided by the
    database's subclass) and the statements run through them."""

    dialect: Dialect

    # -- what a database's subclass provides ------------------------------------------------

    @abstractmethod
    def _write(self) -> AbstractContextManager[Any]:
        """A write transaction on a connection (see the module docstring)."""

    @abstractmethod
    def _snapshot(self) -> AbstractContextManager[Any]:
        """A read transaction: several SELECTs see one state."""

    @abstractmethod
    def _read(self) -> AbstractContextManager[Any]:
        """A connection for reads that need no common snapshot."""

    @abstractmethod
    def close(self) -> None:
        """Close the store's connections (idempotent)."""

    # -- statements -------------------------------------------------------------------------

    def _execute(self, conn: Any, statement: str, params: Sequence[Any] = ()) -> Any:
        """Run ``statement`` (``?`` placeholders); the driver's cursor."""
        return conn.execute(self.dialect.sql(statement), params)

    def _execute_many(self, conn: Any, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        with closing(conn.cursor()) as cursor:
            cursor.executemany(self.dialect.sql(statement), rows)

    def _insert_id(self, conn: Any, statement: str, params: Sequence[Any], column: str) -> int:
        """Run an ``INSERT`` of one row; the ``column`` the database numbered it with."""
        if self.dialect.returning:
            return int(self._execute(conn, f"{statement} RETURNING {column}", params).fetchone()[0])
        return int(self._execute(conn, statement, params).lastrowid)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
