"""Overflow recovery: ``Compactor.complete`` and the ``recover_overflow`` decorator.

The agent's model call is a fake ``call(messages, system)`` that raises errors shaped like
litellm's (class names, ``status_code``, provider texts). On a context overflow the history is
compacted harder per attempt and the call retried, at most ``overflow_attempts`` times; then
oversized tool results are truncated once; then :class:`ContextOverflowError` reports the
numbers. Throttles and transient errors pass through untouched.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from compaction import ContextOverflowError
from compaction.adapters import to_canonical
from compaction.pairs import validate
from tests.engine.test_pipeline import an_session, dumps, filler, make, oa_call, oa_session, scripted

ANTHROPIC_OVERFLOW = "prompt is too long: 213462 tokens > 200000 maximum"
OPENAI_OVERFLOW = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. "
    "Please reduce the length of the messages."
)


class ContextWindowExceededError(Exception):
    """Named like litellm's overflow error."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = 400
        self.llm_provider = "anthropic"


class BadRequestError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = 400


class RateLimitError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = 429


class ServiceUnavailableError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = 503


class APIConnectionError(Exception):
    pass


class FakeModel:
    """The agent's model: raises the scripted errors in order, then answers."""

    def __init__(self, *errors: BaseException, answer: Any = "RESPONSE") -> None:
        self.errors = list(errors)
        self.answer = answer
        self.calls: list[tuple[list[dict[str, Any]], Any]] = []

    async def __call__(self, messages: list[dict[str, Any]], system: Any) -> Any:
        self.calls.append((copy.deepcopy(messages), copy.deepcopy(system)))
        if self.errors:
            raise self.errors.pop(0)
        return self.answer


def always(error: Callable[[], BaseException]) -> FakeModel:
    class Always(FakeModel):
        async def __call__(self, messages: list[dict[str, Any]], system: Any) -> Any:
            self.calls.append((copy.deepcopy(messages), copy.deepcopy(system)))
            raise error()

    return Always()


async def test_overflow_compacts_and_retries_until_it_fits() -> None:
    messages = oa_session(20, tool_chars=2_000)
    before = copy.deepcopy(messages)
    model = FakeModel(ContextWindowExceededError(ANTHROPIC_OVERFLOW), ContextWindowExceededError(ANTHROPIC_OVERFLOW))
    compactor = make(window=200_000)
    outcome = await compactor.complete(messages, call=model)
    assert messages == before
    assert outcome.response == "RESPONSE"
    assert len(model.calls) == 3
    assert model.calls[0][0] == messages
    assert outcome.messages == model.calls[-1][0]
    assert len(outcome.compactions) == 2
    first, second = outcome.compactions
    assert first.trigger == second.trigger == "overflow"
    assert first.reason.startswith("context overflow recovery")
    assert [c.record["aggression"] for c in outcome.compactions] == [1, 2]
    assert first.tokens_after < first.tokens_before
    assert second.tokens_after < second.tokens_before
    # The allowed size from the error tightens the budget.
    assert first.record["budget"] == 200_000 - 0 - 20_000 // 4
    assert not outcome.truncated_tool_results
    assert validate(to_canonical(outcome.messages)) == []


async def test_each_attempt_compacts_more_aggressively() -> None:
    messages = oa_session(20, tool_chars=200)
    model = FakeModel(ContextWindowExceededError(OPENAI_OVERFLOW))
    compactor = make(window=200_000, keep_recent_messages=8)
    outcome = await compactor.complete(messages, call=model)
    (result,) = outcome.compactions
    # aggression 1 halves the verbatim tail: 8 -> 4 messages.
    assert result.record["partition"]["tail_start"] == len(messages) - 4
    assert dumps(outcome.messages[-4:]) == dumps(messages[-4:])


async def test_openai_overflow_text_is_recognized() -> None:
    model = FakeModel(BadRequestError(OPENAI_OVERFLOW))
    outcome = await make().complete(oa_session(10), call=model)
    assert len(model.calls) == 2
    assert len(outcome.compactions) == 1


async def test_gives_up_after_the_attempts_with_the_numbers() -> None:
    model = always(lambda: ContextWindowExceededError(OPENAI_OVERFLOW))
    compactor = make(window=200_000)
    with pytest.raises(ContextOverflowError) as info:
        await compactor.complete(oa_session(30, tool_chars=1_000), call=model)
    error = info.value
    assert error.attempts == 3
    assert error.requested_tokens == 130_512
    assert error.allowed_tokens == 128_000
    assert "130512" in str(error)
    assert "128000" in str(error)
    assert "3 compaction attempts" in str(error)
    assert isinstance(error.__cause__, ContextWindowExceededError)
    # One call per compaction that removed something, plus the first call: never more than 1 + 3.
    assert len(model.calls) <= 1 + 3


@pytest.mark.parametrize("attempts", [0, 1, 2, 5])
async def test_overflow_attempts_is_the_limit(attempts: int) -> None:
    model = always(lambda: ContextWindowExceededError(ANTHROPIC_OVERFLOW))
    compactor = make(window=200_000, overflow_attempts=attempts)
    with pytest.raises(ContextOverflowError) as info:
        await compactor.complete(oa_session(40, tool_chars=500), call=model)
    assert info.value.attempts <= attempts
    assert len(model.calls) <= 1 + attempts


async def test_compaction_that_removes_nothing_escalates_without_a_model_call() -> None:
    # At aggression 1 (tail of 3, widened to 4) the zone is one message: nothing to compact.
    # The next attempt (aggression 2, tail of 1) does compact; the model is called only then.
    messages = [
        {"role": "user", "content": "Summarize the logs."},
        {"role": "assistant", "content": "Reading them now."},
        {"role": "assistant", "content": None, "tool_calls": [oa_call("c1", "cat app.log")]},
        {"role": "tool", "tool_call_id": "c1", "content": filler(3_000)},
        {"role": "assistant", "content": "The log shows a timeout."},
        {"role": "user", "content": "Which service?"},
    ]
    model = FakeModel(ContextWindowExceededError(ANTHROPIC_OVERFLOW))
    outcome = await make(window=200_000).complete(messages, call=model)
    assert len(model.calls) == 2
    (result,) = outcome.compactions
    assert result.record["aggression"] == 2
    assert outcome.messages[-1] == messages[-1]


async def test_truncates_oversized_tool_results_once_after_the_attempts() -> None:
    big = "HEAD-MARK " + filler(40_000) + " TAIL-MARK"
    # Everything is protected (the task, and a pinned exchange): no compaction can remove anything.
    messages = [
        {"role": "user", "content": "Read the file."},
        {"role": "assistant", "content": None, "tool_calls": [oa_call("c1", "cat data.csv")], "pinned": True},
        {"role": "tool", "tool_call_id": "c1", "content": big},
    ]
    summarizer = scripted()
    model = FakeModel(ContextWindowExceededError(ANTHROPIC_OVERFLOW))
    outcome = await make(summarizer).complete(messages, call=model)
    assert summarizer.requests == []  # nothing could be compacted
    assert len(model.calls) == 2
    assert outcome.truncated_tool_results
    assert outcome.compactions == []
    sent = outcome.messages[2]["content"]
    assert len(sent) < len(big)
    assert sent.startswith("HEAD-MARK")
    assert sent.endswith("TAIL-MARK")
    assert "characters cut here" in sent
    assert messages[2]["content"] == big  # the caller's list is untouched


async def test_raises_when_nothing_can_be_truncated_either() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    model = always(lambda: ContextWindowExceededError(ANTHROPIC_OVERFLOW))
    with pytest.raises(ContextOverflowError) as info:
        await make().complete(messages, call=model)
    assert len(model.calls) == 1
    assert info.value.requested_tokens == 213_462
    assert info.value.allowed_tokens == 200_000


async def test_truncation_happens_only_once() -> None:
    messages = [
        {"role": "user", "content": "Read the file."},
        {"role": "assistant", "content": None, "tool_calls": [oa_call("c1", "cat data.csv")], "pinned": True},
        {"role": "tool", "tool_call_id": "c1", "content": filler(40_000)},
    ]
    model = always(lambda: ContextWindowExceededError(ANTHROPIC_OVERFLOW))
    with pytest.raises(ContextOverflowError) as info:
        await make().complete(messages, call=model)
    assert len(model.calls) == 2  # the original request and the truncated one
    assert len(model.calls[1][0][2]["content"]) < 40_000
    assert "truncation of oversized tool results" in str(info.value)


@pytest.mark.parametrize(
    "error",
    [
        RateLimitError("Too many tokens, please wait before trying again."),
        RateLimitError("Rate limit reached: tokens per minute (TPM) limit of 30000 exceeded"),
        ServiceUnavailableError("The server is overloaded, try again"),
        APIConnectionError("Connection reset by peer"),
        TimeoutError("request timed out"),
        ValueError("invalid api key"),
    ],
)
async def test_throttles_transient_and_other_errors_pass_through(error: BaseException) -> None:
    summarizer = scripted()
    model = FakeModel(error)
    with pytest.raises(type(error)) as info:
        await make(summarizer).complete(oa_session(20), call=model)
    assert info.value is error
    assert len(model.calls) == 1
    assert summarizer.requests == []


async def test_anthropic_system_is_passed_and_kept() -> None:
    system = [{"type": "text", "text": "You are Forge.", "cache_control": {"type": "ephemeral"}}]
    messages = an_session(20, tool_chars=1_500)
    model = FakeModel(ContextWindowExceededError(ANTHROPIC_OVERFLOW))
    outcome = await make(model="claude-sonnet-4-5", window=200_000).complete(messages, system=system, call=model)
    assert model.calls[0][1] == system
    assert model.calls[1][1] == system
    assert dumps(outcome.system) == dumps(system)
    transcript = to_canonical(outcome.messages, outcome.system)
    assert validate(transcript) == []


async def test_recover_overflow_decorator() -> None:
    compactor = make(window=200_000)
    seen: list[tuple[int, dict[str, Any]]] = []

    @compactor.recover_overflow
    async def agent_call(messages: list[dict[str, Any]], system: Any, **kwargs: Any) -> str:
        seen.append((len(messages), kwargs))
        if len(seen) == 1:
            raise ContextWindowExceededError(ANTHROPIC_OVERFLOW)
        return "done"

    messages = oa_session(20)
    outcome = await agent_call(messages, None, temperature=0)
    assert outcome.response == "done"
    assert seen[0] == (len(messages), {"temperature": 0})
    assert seen[1][0] < len(messages)
    assert seen[1][1] == {"temperature": 0}
    assert len(outcome.compactions) == 1


async def test_no_overflow_no_compaction() -> None:
    model = FakeModel()
    messages = oa_session(10)
    outcome = await make().complete(messages, call=model)
    assert outcome.response == "RESPONSE"
    assert outcome.compactions == []
    assert outcome.messages == messages
    assert len(model.calls) == 1


async def test_protected_content_too_large_ends_in_context_overflow_error() -> None:
    # The system prompt alone is bigger than the budget: compaction cannot help (a system message is
    # never cut), truncation has no tool result to cut, so the caller gets ContextOverflowError
    # (caused by the CompactionError).
    messages = [
        {"role": "system", "content": " ".join(f"w{i}" for i in range(30_000))},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "ok"},
    ]
    model = always(lambda: ContextWindowExceededError(ANTHROPIC_OVERFLOW))
    with pytest.raises(ContextOverflowError) as info:
        await make(window=16_000).complete(messages, call=model)
    assert len(model.calls) == 1
    assert "protected content alone" in str(info.value.__cause__)


async def test_a_task_too_large_is_cut_and_retried() -> None:
    # The task alone is bigger than the budget: its middle is cut (the whole message archived) and
    # the call is retried with it, instead of giving up at once.
    task = " ".join(f"w{i}" for i in range(30_000))
    messages = [{"role": "user", "content": task}, {"role": "assistant", "content": "ok"}]
    model = always(lambda: ContextWindowExceededError(ANTHROPIC_OVERFLOW))
    with pytest.raises(ContextOverflowError):
        await make(window=16_000).complete(messages, call=model)
    assert len(model.calls) > 1
    retried = json.dumps(model.calls[1][0])
    assert "characters of this message cut here to fit the context window" in retried
    assert "w0 w1 w2" in retried
    assert "w29999" in retried
