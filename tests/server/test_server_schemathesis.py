"""Property-based run of schemathesis against the live server's own OpenAPI schema.

The server runs for real (uvicorn on 127.0.0.1, a fresh SQLite file); schemathesis reads
``/openapi.json`` from it and, for every operation, sends schema-valid and schema-violating
requests (bounded: 25 examples per operation and generation mode by default;
``COMPACTION_SCHEMATHESIS_EXAMPLES=500`` for a longer, randomized soak), checking that no answer is a 5xx, that every
status code is documented, and that every response body and content type matches the schema, and
that schema-violating requests are rejected.

The SSE operation is left out: an event stream for an existing session never ends by design
(``tests/server/test_server.py`` drives it with a real client instead).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.installed import require

require("fastapi")
require("uvicorn")
schemathesis = require("schemathesis")

from hypothesis import HealthCheck, given, settings
from schemathesis.config import SchemathesisConfig

from compaction.config import CompactionConfig
from compaction.server import create_app
from compaction.server.runner import server_for

EXAMPLES_PER_OPERATION = int(os.environ.get("COMPACTION_SCHEMATHESIS_EXAMPLES", "25"))
CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_schema_conformance,
    schemathesis.checks.response_headers_conformance,
    schemathesis.checks.negative_data_rejection,
]

# Invalid input may be refused as too large (413) before it is parsed, or for an option the caller
# may not set (403: `options.redact_secrets: false` without the server permission, checked before the
# adapters read the messages): those are rejections too.
CONFIG = SchemathesisConfig.from_dict(
    {"checks": {"negative_data_rejection": {"expected-statuses": [400, 403, 404, 405, 413, 422]}}}
)


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db: Path = tmp_path_factory.mktemp("schemathesis") / "server.db"
    app = create_app(
        store_path=str(db),
        config=CompactionConfig(window=32_000, keep_recent_messages=2),
        max_body_bytes=1024 * 1024,
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = server_for(app, host="127.0.0.1", port=port, log_level="critical", graceful_timeout=10)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(30)


def _offline_schema() -> dict[str, Any]:
    """The schema as the app generates it (no server needed, so tests can be parametrized by it)."""
    doc: dict[str, Any] = create_app(store_path=":memory:").openapi()
    return doc


SCHEMA = _offline_schema()
SSE_PATH = "/v1/sessions/{session_id}/events"
CASES = [
    (method.upper(), path, mode)
    for path, methods in SCHEMA["paths"].items()
    for method, spec in methods.items()
    if path != SSE_PATH
    for mode in schemathesis.GenerationMode
    # an operation without parameters or body has no invalid input to send
    if mode is schemathesis.GenerationMode.POSITIVE or spec.get("parameters") or spec.get("requestBody")
]


def test_served_schema_is_the_generated_one(live_server: str) -> None:
    import httpx

    served = httpx.get(f"{live_server}/openapi.json", timeout=10).json()
    assert served == SCHEMA
    schemathesis.openapi.from_dict(served).validate()  # a valid OpenAPI document


@pytest.mark.parametrize(("method", "path", "mode"), CASES, ids=[f"{m} {p} {g.value}" for m, p, g in CASES])
def test_operation_conforms_to_the_schema(live_server: str, method: str, path: str, mode: Any) -> None:
    """schemathesis' own strategies for this operation, driven by hypothesis (the pytest plugin's
    ``from_fixture`` does not support pytest 9, so the loop is written out here)."""
    api = schemathesis.openapi.from_dict(SCHEMA, config=CONFIG)
    operation = api[path][method]
    strategy = operation.as_strategy(generation_mode=mode)

    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        derandomize=EXAMPLES_PER_OPERATION <= 25,  # the bounded CI run is reproducible; longer runs explore
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(case=strategy)
    def run(case: Any) -> None:
        case.call_and_validate(base_url=live_server, checks=CHECKS)

    run()
