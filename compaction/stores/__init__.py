"""The session stores: one SQL store (:class:`~compaction.stores.sql.SQLSessionStore`) on SQLite or
PostgreSQL, and :func:`open_store` to open either from a path or a URL.

* :mod:`compaction.stores.sql`: every statement and rule the two databases share
  (:mod:`compaction.stores.events`: the event log's);
* :mod:`compaction.stores.dialect`: the :class:`~compaction.stores.dialect.Dialect` that says what
  differs in their SQL, and the transactions every store provides;
* :mod:`compaction.stores.sqlite`: :class:`SQLiteSessionStore`, one file (connections per thread,
  WAL, the schema and its migrations);
* :mod:`compaction.stores.postgres`: :class:`PostgresSessionStore`, many processes on one
  database (a connection pool, row locks, the schema);
* :mod:`compaction.stores.rows`: rows in and out of the tables (checks, JSON and text columns).

The protocols they implement are :class:`compaction.store.SessionStore` (and
``PreparedStateStore``), :class:`compaction.event_log.EventLog` and
:class:`compaction.store_usage.UsageMeter`. Importing this package needs no database driver:
psycopg is imported when a PostgreSQL store is opened.
"""

from __future__ import annotations

import os

from compaction.stores.dialect import Dialect
from compaction.stores.postgres import PostgresSessionStore, redact_url
from compaction.stores.rows import SessionNotFound
from compaction.stores.sql import SQLSessionStore
from compaction.stores.sqlite import SQLiteSessionStore

__all__ = [
    "Dialect",
    "PostgresSessionStore",
    "SQLSessionStore",
    "SQLiteSessionStore",
    "SessionNotFound",
    "is_postgres_url",
    "open_store",
]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")

POSTGRES_CONNECT_TIMEOUT = 10.0
"""Seconds :func:`open_store` gives a PostgreSQL database to answer before it gives up."""


def is_postgres_url(target: str | os.PathLike[str]) -> bool:
    """True for a PostgreSQL connection URL (``postgresql://`` or ``postgres://``).

    >>> is_postgres_url("postgresql://app@db/compaction"), is_postgres_url("compaction.db")
    (True, False)
    """
    return isinstance(target, str) and target.strip().lower().startswith(_POSTGRES_SCHEMES)


def open_store(target: str | os.PathLike[str], *, pool_size: int = 10) -> SQLSessionStore:
    """The session store at ``target``: a PostgreSQL URL opens a :class:`PostgresSessionStore` of
    at most ``pool_size`` connections, anything else a :class:`SQLiteSessionStore` on that file
    (``":memory:"``: a private in-memory store). The schema is created on first open.

    Raises ``ValueError`` when the ``postgres`` extra is missing, ``ConnectionError`` (an
    ``OSError``) when the database cannot be reached in :data:`POSTGRES_CONNECT_TIMEOUT` seconds
    (neither message holds the password), and ``sqlite3.DatabaseError`` for a file that is not a
    session store.

    >>> with open_store(":memory:") as store:
    ...     store.create_session("s1")
    ...     store.sessions()
    ['s1']
    """
    if not is_postgres_url(target):
        return SQLiteSessionStore(target)
    url = str(target)
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise ValueError(
            f"{url.split('://')[0]}:// needs the postgres extra (missing {exc.name}): "
            "pip install 'compaction-engine[postgres]'"
        ) from None
    try:
        return PostgresSessionStore(url, pool_size=pool_size, timeout=POSTGRES_CONNECT_TIMEOUT)
    except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConnectionError(f"cannot open the PostgreSQL store {redact_url(url)}: {detail}") from None
