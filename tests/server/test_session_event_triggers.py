"""A middleware event becomes an SSE event with the trigger it names: every trigger the context
manager can name is one the SSE events accept, and an unknown one is refused with the event's name
and the value, before any SSE model is built."""

from __future__ import annotations

from typing import get_args

import pytest

from tests.support.installed import require

require("fastapi")

from compaction.middleware.events import CompactionEvent, CompactionFailed, CompactionStarted
from compaction.middleware.guard import EventTrigger as ManagerTrigger
from compaction.server.events import COMPACTION_FAILED, COMPACTION_FINISHED, COMPACTION_STARTED
from compaction.server.schemas import EventTrigger as SSETrigger
from compaction.server.session_events import event_payload, event_payloads


def test_the_sse_events_accept_every_trigger_the_manager_names() -> None:
    assert set(get_args(ManagerTrigger)) == set(get_args(SSETrigger))


@pytest.mark.parametrize("trigger", get_args(ManagerTrigger))
def test_each_event_keeps_its_trigger(trigger: str) -> None:
    started = CompactionStarted(session_id="s1", trigger=trigger, tokens_before=900, threshold=800, messages=12)
    failed = CompactionFailed(session_id="s1", trigger=trigger, error="boom", exception=RuntimeError("boom"))
    nothing = CompactionFailed(session_id="s1", trigger=trigger, error="too few messages")
    payloads = event_payloads("s1", [started, failed], "keep the ids", None)
    assert [kind for kind, _ in payloads] == [COMPACTION_STARTED, COMPACTION_FAILED]
    assert [data["trigger"] for _, data in payloads] == [trigger, trigger]
    kind, data = event_payload("s1", nothing, None, None, started)
    assert (kind, data["trigger"], data["compacted"]) == (COMPACTION_FINISHED, trigger, False)
    assert (data["tokens_before"], data["tokens_after"], data["messages_before"], data["messages_after"]) == (
        900,
        900,
        12,
        12,
    )


@pytest.mark.parametrize(
    "event",
    [
        CompactionStarted(session_id="s1", trigger="cron", tokens_before=900, threshold=None, messages=12),
        CompactionFailed(session_id="s1", trigger="cron", error="boom", exception=RuntimeError("boom")),
        CompactionFailed(session_id="s1", trigger="cron", error="too few messages"),
    ],
    ids=["started", "failed", "nothing to do"],
)
def test_an_unknown_trigger_is_refused_with_the_event_and_the_value(event: CompactionEvent) -> None:
    with pytest.raises(
        ValueError,
        match=rf"^{type(event).__name__}\.trigger is 'cron', not one of iterations, manual, overflow, threshold$",
    ):
        event_payload("s1", event, None, None)
