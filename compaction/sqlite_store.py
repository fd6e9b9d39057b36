"""The SQLite session store under its first import path; it lives in :mod:`compaction.stores.sqlite`."""

from compaction.stores.rows import SessionNotFound
from compaction.stores.sqlite import (  # noqa: F401 - _SCHEMA, _migrate_v2: tests build files of older versions
    _SCHEMA,
    SCHEMA_VERSION,
    SQLiteSessionStore,
    _migrate_v2,
)

__all__ = ["SCHEMA_VERSION", "SQLiteSessionStore", "SessionNotFound"]

# doctest.testmod of this module runs the examples of what it re-exports.
__test__ = {"SQLiteSessionStore": SQLiteSessionStore}
