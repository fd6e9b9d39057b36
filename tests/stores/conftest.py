"""Fixtures of the SessionStore contract suite: every test taking ``backend`` or ``store`` runs once
per store (SQLite file, PostgreSQL database on the server the tests start)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_support import BACKENDS, Backend


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", str(tmp_path / "sessions.db"))
    server = request.getfixturevalue("postgres")
    return Backend("postgres", server.new_database())


@pytest.fixture
def store(backend: Backend) -> Iterator[Any]:
    with backend.open() as s:
        s.create_session("s1", system="be brief", model="gpt-4o")
        yield s
