"""The PostgreSQL session store under its first import path; it lives in :mod:`compaction.stores.postgres`."""

from compaction.stores.postgres import SCHEMA_VERSION, PostgresSessionStore, redact_url
from compaction.stores.rows import SessionNotFound

__all__ = ["SCHEMA_VERSION", "PostgresSessionStore", "SessionNotFound", "redact_url"]

# doctest.testmod of this module runs the examples of what it re-exports.
__test__ = {"redact_url": redact_url}
