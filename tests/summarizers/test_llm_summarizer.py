"""LLMSummarizer through real HTTP: litellm -> fake provider on 127.0.0.1, both wire formats."""

from __future__ import annotations

import copy
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from compaction.summarizers.base import (
    EmptySummaryError,
    Summarizer,
    SummarizerError,
    SummarizerOverflowError,
    SummaryRequest,
)
from compaction.summarizers.llm import LLMSummarizer
from compaction.testing import FakeProvider, Fault, LatencyModel, Reply, estimate_tokens
from tests.support.retry_waits import record_waits

ROUTES = ["openai", "anthropic"]
SYSTEM = "You write faithful summaries of agent transcripts."
PROMPT = "Summarize: edited src/app/main.py, ran pytest, saw KeyError: 'user_id', ticket APP-314."


@pytest.fixture
async def server() -> AsyncIterator[FakeProvider]:
    async with FakeProvider() as s:
        yield s


# The client timeout of the tests that are not about timeouts: only a hang guard. A process's first
# call through litellm pays its first-use costs inside the attempt (1.8 s of CPU, 13 s of wall time
# at load 11 on 2 cores): a 5 s timeout cut that attempt under load, and the retry made an exact
# call count one too many. Tests about timeouts pass their own after a warm-up call.
HANG_GUARD_S = 600.0
# The timeout of the tests where an attempt times out and the retry must answer within it: a warm
# call to the local fake provider takes 0.1 s at load 11 and took 0.28 s at load 14, past the
# 0.2 s these tests once used. A hang waits all of it out, so it stays a few seconds.
RETRY_TIMEOUT_S = 3.0


def make(server: FakeProvider, route: str, *, model: str = "x", **kwargs: Any) -> LLMSummarizer:
    """A summarizer for ``route`` with tiny backoff so retry tests stay fast."""
    base = server.openai_api_base if route == "openai" else server.anthropic_api_base
    options: dict[str, Any] = {"api_key": "sk-fake", "timeout": HANG_GUARD_S, "backoff_min": 0.01, "backoff_max": 0.02}
    options.update(kwargs)
    return LLMSummarizer(f"{route}/{model}", api_base=base, **options)


def request(max_tokens: int = 1000, **kwargs: Any) -> SummaryRequest:
    return SummaryRequest(**{"system_prompt": SYSTEM, "prompt": PROMPT, "max_tokens": max_tokens, **kwargs})


async def warm_up(server: FakeProvider, route: str) -> None:
    """One successful call on ``route`` before a timed one: litellm's first import (seconds on a
    loaded machine) and its first use of the route are not what a timing bound is about. The
    server then forgets the call, so request counts start from zero."""
    await make(server, route).summarize(request())
    server.reset()


# -- success -----------------------------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
async def test_success_with_usage(server: FakeProvider, route: str) -> None:
    summarizer = make(server, route)
    assert isinstance(summarizer, Summarizer)
    response = await summarizer.summarize(request())
    assert "src/app/main.py" in response.text
    assert "APP-314" in response.text
    assert "KeyError: 'user_id'" in response.text
    assert response.model == f"{route}/x"
    assert response.calls == 1
    sent = server.completion_requests[0]
    assert response.usage.input_tokens == sent.input_tokens == estimate_tokens(f"{SYSTEM}\n{PROMPT}")
    assert response.usage.output_tokens == estimate_tokens(response.text)
    assert response.usage.cached_input_tokens == 0
    assert response.usage.cost_usd is None  # "x" is not in litellm's price table


@pytest.mark.parametrize("route", ROUTES)
async def test_request_shape_no_tools_temperature_zero_max_tokens(server: FakeProvider, route: str) -> None:
    await make(server, route, max_tokens=300).summarize(request(max_tokens=1000))
    await make(server, route, max_tokens=300).summarize(request(max_tokens=120))
    first, second = server.completion_requests
    for sent in (first, second):
        assert sent.route == route
        assert "tools" not in sent.body
        assert "tool_choice" not in sent.body
        assert sent.body["temperature"] == 0
        assert sent.system_text == SYSTEM
        assert sent.last_user_text == PROMPT
    assert first.body["max_tokens"] == 300  # the summarizer's cap
    assert second.body["max_tokens"] == 120  # the request's smaller cap


# A system prompt over Anthropic's 1,024-token cacheable minimum (chars/4).
LONG_SYSTEM = SYSTEM + " Keep every path, command and identifier exactly as written." * 80


async def test_anthropic_system_block_carries_cache_control(server: FakeProvider) -> None:
    await make(server, "anthropic").summarize(request(system_prompt=LONG_SYSTEM))
    system = server.completion_requests[0].body["system"]
    assert system == [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}]


async def test_cache_control_default_by_model_and_overrides(server: FakeProvider) -> None:
    assert make(server, "openai", model="claude-via-proxy").uses_cache_control
    assert not make(server, "openai").uses_cache_control
    assert not make(server, "anthropic", cache_control=False).uses_cache_control
    await make(server, "openai").summarize(request())
    assert server.completion_requests[-1].body["messages"][0] == {"role": "system", "content": SYSTEM}
    await make(server, "openai", cache_control=True).summarize(request(system_prompt=LONG_SYSTEM))
    block = server.completion_requests[-1].body["messages"][0]["content"][0]
    assert block["cache_control"] == {"type": "ephemeral"}
    await make(server, "anthropic", cache_control=False).summarize(request())
    assert "cache_control" not in str(server.completion_requests[-1].body)


async def test_empty_system_prompt_is_left_out(server: FakeProvider) -> None:
    req = SummaryRequest(system_prompt="  ", prompt=PROMPT, max_tokens=100)
    await make(server, "anthropic").summarize(req)
    body = server.completion_requests[0].body
    assert "system" not in body
    assert len(body["messages"]) == 1


@pytest.mark.parametrize("route", ROUTES)
async def test_known_model_gets_an_offline_cost(server: FakeProvider, route: str) -> None:
    model = "gpt-4o" if route == "openai" else "claude-sonnet-4-5"
    server.script([Reply("a summary", input_tokens=1000, output_tokens=100, cached_tokens=400)])
    response = await make(server, route, model=model).summarize(request())
    assert response.usage.cached_input_tokens == 400
    assert response.usage.input_tokens == 1000
    assert response.usage.cost_usd is not None
    assert 0 < response.usage.cost_usd < 0.1


# -- single-pass, cache-friendly mode ---------------------------------------------------------------

CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a coding agent. " * 200},  # over the cacheable minimum
    {"role": "user", "content": "Fix the failing test in tests/test_api.py. " * 20},
    {"role": "assistant", "content": "I read tests/test_api.py and found the bug in api/routes.py. " * 20},
]
FINAL = {"role": "user", "content": "Summarize the conversation so far for a handoff."}


async def test_provider_messages_are_sent_unchanged_on_openai(server: FakeProvider) -> None:
    messages = [*CONVERSATION, FINAL]
    await make(server, "openai").summarize(request(provider_messages=messages))
    assert server.completion_requests[0].body["messages"] == messages


async def test_provider_messages_get_breakpoints_on_anthropic_without_mutation(server: FakeProvider) -> None:
    messages = copy.deepcopy([*CONVERSATION, FINAL])
    await make(server, "anthropic").summarize(request(provider_messages=messages))
    assert messages == [*CONVERSATION, FINAL]  # the caller's objects are untouched
    body = server.completion_requests[0].body
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][-2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in str(body["messages"][-1])
    assert server.completion_requests[0].last_user_text == FINAL["content"]


async def test_provider_messages_with_caller_breakpoints_are_left_alone(server: FakeProvider) -> None:
    marked = copy.deepcopy(CONVERSATION)
    marked[1]["content"] = [{"type": "text", "text": "task", "cache_control": {"type": "ephemeral"}}]
    await make(server, "anthropic").summarize(request(provider_messages=[*marked, FINAL]))
    body = server.completion_requests[0].body
    assert isinstance(body["system"], str) or "cache_control" not in str(body["system"])
    assert "cache_control" not in str(body["messages"][-2])
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}


async def test_single_pass_request_reads_the_agents_prompt_cache() -> None:
    async with FakeProvider(prompt_cache=True, prompt_cache_min_tokens=256) as server:
        summarizer = make(server, "anthropic")
        # The agent's own last turn cached the conversation prefix ...
        agent_turn = copy.deepcopy(CONVERSATION)
        agent_turn[-1]["content"] = [
            {"type": "text", "text": agent_turn[-1]["content"], "cache_control": {"type": "ephemeral"}}
        ]
        agent_turn.append({"role": "user", "content": "continue"})
        await summarizer.summarize(request(provider_messages=agent_turn))
        # ... and the compaction request with the same prefix reads it.
        response = await summarizer.summarize(request(provider_messages=[*CONVERSATION, FINAL]))
        assert response.usage.cached_input_tokens > 0.8 * response.usage.input_tokens


# -- retries ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("fault", [Fault.server_error(), Fault.unavailable(), Fault.overloaded()])
async def test_transient_errors_are_retried_then_succeed(server: FakeProvider, route: str, fault: Fault) -> None:
    server.fail_next(fault, times=2)
    response = await make(server, route, attempts=3).summarize(request())
    assert response.calls == 3
    assert len(server.completion_requests) == 3
    assert "APP-314" in response.text


@pytest.mark.parametrize("route", ROUTES)
async def test_all_attempts_failing_raise_within_bound(server: FakeProvider, route: str) -> None:
    await warm_up(server, route)
    server.fail_when(lambda r: True, Fault.server_error())
    summarizer = make(server, route, attempts=4)
    waits = record_waits(summarizer)
    with pytest.raises(SummarizerError, match="gave up after 4 attempt") as info:
        await summarizer.summarize(request())
    assert len(waits) == 4  # three slept, the last one computed before giving up
    assert all(0.01 <= w <= 0.02 for w in waits), waits  # the backoff: the bound is its sum
    assert not isinstance(info.value, SummarizerOverflowError | EmptySummaryError)
    assert f"{route}/x" in str(info.value)
    assert "InternalServerError" in str(info.value)
    assert info.value.__cause__ is not None
    # litellm's and the OpenAI SDK's own retries are off: exactly `attempts` HTTP requests
    assert len(server.completion_requests) == 4


@pytest.mark.parametrize("route", ROUTES)
async def test_retry_after_is_honoured(server: FakeProvider, route: str) -> None:
    await warm_up(server, route)
    server.script([Fault.rate_limit(0.15)])
    # backoff alone would wait >= 3 s; the server's 0.15 s must be used instead
    summarizer = make(server, route, backoff_min=3.0, backoff_max=3.0)
    waits = record_waits(summarizer)
    response = await summarizer.summarize(request())
    assert waits == [0.15]
    assert response.calls == 2
    first, second = server.completion_requests
    assert second.received_at - first.received_at >= 0.15


async def test_retry_after_ms_is_honoured(server: FakeProvider) -> None:
    server.script([Fault.rate_limit(None, retry_after_ms=120)])
    response = await make(server, "openai", backoff_min=3.0, backoff_max=3.0).summarize(request())
    assert response.calls == 2
    first, second = server.completion_requests
    assert 0.12 <= second.received_at - first.received_at < 2.0


async def test_retry_after_beyond_the_cap_gives_up_at_once(server: FakeProvider) -> None:
    await warm_up(server, "anthropic")
    server.fail_next(Fault.rate_limit(30), times=3)
    summarizer = make(server, "anthropic", max_retry_after=5)
    waits = record_waits(summarizer)
    with pytest.raises(SummarizerError, match="retry after 30 s"):
        await summarizer.summarize(request())
    assert waits == [30.0]  # the server's wait, over the 5 s cap: not slept, no second attempt
    assert len(server.completion_requests) == 1


@pytest.mark.parametrize("route", ROUTES)
async def test_rate_limits_exhausted(server: FakeProvider, route: str) -> None:
    server.fail_when(lambda r: True, Fault.rate_limit(0.01))
    with pytest.raises(SummarizerError, match=r"gave up after 2 attempt.*RateLimitError"):
        await make(server, route, attempts=2).summarize(request())
    assert len(server.completion_requests) == 2


@pytest.mark.parametrize("route", ROUTES)
async def test_hang_times_out_and_is_retried(server: FakeProvider, route: str) -> None:
    await warm_up(server, route)
    server.fail_next(Fault.hang())
    summarizer = make(server, route, timeout=RETRY_TIMEOUT_S)
    waits = record_waits(summarizer)
    started = time.monotonic()
    response = await summarizer.summarize(request())
    assert time.monotonic() - started >= RETRY_TIMEOUT_S  # the first attempt waited out its timeout
    assert response.calls == 2
    assert len(waits) == 1
    assert waits[0] <= 0.02  # then the short backoff, not a long wait


async def test_hang_on_every_attempt_is_bounded(server: FakeProvider) -> None:
    await warm_up(server, "openai")
    server.fail_when(lambda r: True, Fault.hang())
    summarizer = make(server, "openai", timeout=0.2, attempts=2, max_retry_after=0.02)
    waits = record_waits(summarizer)
    started = time.monotonic()
    with pytest.raises(SummarizerError, match=r"gave up after 2 attempt.*Timeout"):
        await summarizer.summarize(request())
    # Bounded by the client's own timeout on each attempt (both waited out: >= 0.4 s) and the short
    # backoff between them; how long that takes in wall-clock time depends on the machine's load.
    assert time.monotonic() - started >= 0.4
    assert len(server.completion_requests) == 2
    assert len(waits) == 2
    assert all(w <= 0.02 for w in waits), waits


async def test_slow_answer_past_timeout_counts_as_a_timeout(server: FakeProvider) -> None:
    await warm_up(server, "anthropic")  # the retry must answer within the timeout: no first-use costs
    server.script([Fault.slow(2 * RETRY_TIMEOUT_S), "on time"])
    response = await make(server, "anthropic", timeout=RETRY_TIMEOUT_S).summarize(request())
    assert response.text == "on time"
    assert response.calls == 2


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("fault", [Fault.drop(), Fault.malformed_json()])
async def test_dropped_connection_and_malformed_json_are_retried(
    server: FakeProvider, route: str, fault: Fault
) -> None:
    server.fail_next(fault)
    response = await make(server, route).summarize(request())
    assert response.calls == 2
    assert len(server.completion_requests) == 2


@pytest.mark.parametrize("route", ROUTES)
async def test_malformed_json_every_time_is_a_summarizer_error(server: FakeProvider, route: str) -> None:
    server.fail_when(lambda r: True, Fault.malformed_json())
    with pytest.raises(SummarizerError, match="gave up after 2") as info:
        await make(server, route, attempts=2).summarize(request())
    assert type(info.value) is SummarizerError


# -- failures that are not retried --------------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(
    "fault",
    [Fault.empty_choices(), Fault.empty_content(), Fault.whitespace_content(), Fault.tool_call_only()],
    ids=["empty_choices", "empty_content", "whitespace", "tool_call_only"],
)
async def test_no_text_answers_raise_empty_summary_error(server: FakeProvider, route: str, fault: Fault) -> None:
    server.fail_next(fault)
    with pytest.raises(EmptySummaryError, match=f"{route}/x"):
        await make(server, route).summarize(request())
    assert len(server.completion_requests) == 1


async def test_tool_call_only_is_named_in_the_error(server: FakeProvider) -> None:
    server.fail_next(Fault.tool_call_only())
    with pytest.raises(EmptySummaryError, match="only a tool call"):
        await make(server, "openai").summarize(request())


@pytest.mark.parametrize(
    ("route", "fault", "requested", "allowed"),
    [
        ("openai", Fault.context_overflow(250_000, 128_000), 250_000, 128_000),
        ("anthropic", Fault.context_overflow(213_462, 200_000), 213_462, 200_000),
        (
            "anthropic",
            Fault.context_overflow(
                message="input length and `max_tokens` exceed context limit: 179413 + 32768 > 200000, "
                "decrease input length or `max_tokens` and try again"
            ),
            179_413 + 32_768,
            200_000,
        ),
        ("openai", Fault.request_too_large(), None, None),
        ("anthropic", Fault.request_too_large(), None, None),
    ],
    ids=["openai-wording", "anthropic-wording", "anthropic-max-tokens-wording", "openai-413", "anthropic-413"],
)
async def test_overflow_is_never_retried(
    server: FakeProvider, route: str, fault: Fault, requested: int | None, allowed: int | None
) -> None:
    server.fail_when(lambda r: True, fault)
    with pytest.raises(SummarizerOverflowError) as info:
        await make(server, route, attempts=3).summarize(request())
    assert info.value.requested_tokens == requested
    assert info.value.allowed_tokens == allowed
    assert f"{route}/x" in str(info.value)
    assert info.value.__cause__ is not None
    assert len(server.completion_requests) == 1


async def test_context_window_of_the_fake_triggers_overflow() -> None:
    async with FakeProvider(context_window=300) as server:
        with pytest.raises(SummarizerOverflowError) as info:
            await make(server, "anthropic").summarize(request(max_tokens=1000))
        assert info.value.allowed_tokens == 300
        assert len(server.completion_requests) == 1


async def test_other_errors_are_not_retried(server: FakeProvider) -> None:
    server.fail_when(lambda r: True, Fault.http_error(401, {"error": {"message": "invalid x-api-key"}}))
    with pytest.raises(SummarizerError, match="anthropic/x: summarization failed: AuthenticationError") as info:
        await make(server, "anthropic").summarize(request())
    assert type(info.value) is SummarizerError
    assert len(server.completion_requests) == 1


# -- latency, scripted and computed responders -------------------------------------------------------


async def test_latency_model_applies_to_summaries() -> None:
    async with FakeProvider(latency=LatencyModel(fixed_s=0.1, per_output_token_s=0.001)) as server:
        started = time.monotonic()
        response = await make(server, "openai").summarize(request())
        elapsed = time.monotonic() - started
        assert elapsed >= 0.1 + 0.001 * response.usage.output_tokens


async def test_scripted_and_responder_answers(server: FakeProvider) -> None:
    server.script(["first scripted", Reply("  padded  ")])
    summarizer = make(server, "anthropic")
    assert (await summarizer.summarize(request())).text == "first scripted"
    assert (await summarizer.summarize(request())).text == "padded"
    server.responder = lambda req: f"{req.route}: {len(req.last_user_text)} chars"
    assert (await summarizer.summarize(request())).text == f"anthropic: {len(PROMPT)} chars"
    server.responder = None
    assert (await summarizer.summarize(request())).text.startswith("## Summary")


# -- construction and import hygiene -------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"attempts": 0},
        {"timeout": 0},
        {"max_tokens": 0},
        {"backoff_min": 2.0, "backoff_max": 1.0},
        {"extra_kwargs": {"tools": []}},
        {"extra_kwargs": {"num_retries": 3}},
    ],
)
def test_invalid_configuration(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"must|need|may not"):
        LLMSummarizer("openai/x", **kwargs)


async def test_extra_kwargs_reach_the_provider(server: FakeProvider) -> None:
    summarizer = make(server, "openai", extra_kwargs={"extra_headers": {"x-trace": "t1"}, "top_p": 0.5})
    await summarizer.summarize(request())
    sent = server.completion_requests[0]
    assert sent.headers["x-trace"] == "t1"
    assert sent.body["top_p"] == 0.5


async def test_non_positive_request_max_tokens(server: FakeProvider) -> None:
    with pytest.raises(SummarizerError, match="max_tokens"):
        await make(server, "openai").summarize(request(max_tokens=0))
    assert server.requests == []


def test_importing_the_package_does_not_import_litellm() -> None:
    code = (
        "import sys, compaction, compaction.testing, compaction.summarizers.llm; "
        "print('litellm' in sys.modules, 'openai' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", "False"]


# -- a reply far larger than its output cap ------------------------------------------------------


def _scripted_litellm(content: str, finish_reason: str = "stop") -> Any:
    """Stands in for litellm: every call answers ``content`` (no HTTP: only our processing is timed)."""
    from types import SimpleNamespace

    caps: list[int] = []

    async def acompletion(**kwargs: Any) -> Any:
        caps.append(kwargs.get("max_tokens") or kwargs["max_completion_tokens"])
        choice = SimpleNamespace(message=SimpleNamespace(content=content, tool_calls=None), finish_reason=finish_reason)
        return SimpleNamespace(choices=[choice], usage=None, _hidden_params={"response_cost": 0.0})

    return SimpleNamespace(acompletion=acompletion, caps=caps)


def record_processed_lengths(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    """The lengths of the reply texts the summarizer's steps after the model call were given:
    marking a cut reply and checking a reply (name -> lengths, in call order)."""
    from compaction.summarizers import llm as llm_module
    from compaction.summarizers import llm_reply

    seen: dict[str, list[int]] = {"mark_cut_reply": [], "check_reply": []}
    # Each step where the summarizer calls it: the reply is read in llm_reply, checked in llm.
    for module, name in ((llm_reply, "mark_cut_reply"), (llm_module, "check_reply")):
        real = getattr(module, name)

        def recording(text: str, *args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            seen[_name].append(len(text))
            return _real(text, *args, **kwargs)

        monkeypatch.setattr(module, name, recording)
    return seen


HUGE_REPLY = "- ran `make build` in src/app/ and it printed one more line of output\n" * 450_000  # ~32 MB


async def test_a_huge_reply_is_cut_to_its_output_cap_before_processing(monkeypatch: pytest.MonkeyPatch) -> None:
    from compaction.summarizers import llm as llm_module

    monkeypatch.setattr(llm_module, "load_litellm", lambda: _scripted_litellm(HUGE_REPLY))
    seen = record_processed_lengths(monkeypatch)
    # The reply check would call this reply (one line repeated) word salad; the cut is tested here.
    summarizer = LLMSummarizer("openai/x", api_key="sk-fake", max_tokens=2_000, check_replies=False)
    response = await summarizer.summarize(request(max_tokens=1_000))
    # At most 16 characters per token of the cap (1,000 here), and the cut is marked as a cut.
    assert len(response.text) <= 16 * 1_000 + 100
    assert response.text.endswith(llm_module.CUT_NOTE)
    assert response.text.startswith("- ran `make build` in src/app/")
    assert "`make build`" in response.text.splitlines()[-2]  # whole lines kept, the partial one dropped
    # Cut before processing: the step after the cut saw the capped text, never the 32 MB (what a
    # wall-clock bound stood for, without the machine's load in it).
    assert seen["mark_cut_reply"] == [16 * 1_000]


async def test_a_huge_reply_does_not_stall_a_compaction(monkeypatch: pytest.MonkeyPatch) -> None:
    from compaction import CompactionConfig, Compactor
    from compaction.summarizers import llm as llm_module

    huge = _scripted_litellm(HUGE_REPLY)
    monkeypatch.setattr(llm_module, "load_litellm", lambda: huge)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    for k in range(40):
        messages.append({"role": "assistant", "content": f"Step {k}: running make in src/app/ again."})
        messages.append({"role": "user", "content": f"Still failing at step {k}, go on."})
    config = CompactionConfig(window=32_000, reserve_tokens=2_000, keep_recent_messages=4, max_summary_tokens=400)
    compactor = Compactor("gpt-4o", LLMSummarizer("openai/x", api_key="sk-fake"), config)
    with monkeypatch.context() as warm:  # one-time loads (tokenizer, redaction patterns) are not timed
        warm.setattr(llm_module, "load_litellm", lambda: _scripted_litellm("## 1. Goals and constraints\n- fix"))
        await compactor.acompact(messages)
    seen = record_processed_lengths(monkeypatch)
    result = await compactor.acompact(messages)
    assert result.compacted
    assert result.summary is not None
    assert len(result.summary) < 20_000
    # Every reply was cut at its cap before the reply check read it: no step after the model call
    # worked through the 32 MB (the check of a second, corrective reply included).
    assert seen["mark_cut_reply"]
    assert seen["check_reply"]
    assert huge.caps
    bound = 16 * max(huge.caps) + len("\n" + llm_module.CUT_NOTE)  # the cut text and its note
    assert max(seen["mark_cut_reply"] + seen["check_reply"]) <= bound, (seen, huge.caps)


async def test_a_missing_api_key_fails_at_once_without_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    # No server and no network: the OpenAI client refuses to start without a key, and litellm
    # reports that as a 500. Retrying cannot help, so one attempt, and the error says what is missing.
    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    summarizer = LLMSummarizer("openai/gpt-4o", timeout=HANG_GUARD_S, backoff_min=2.0, backoff_max=2.0, attempts=3)
    with pytest.raises(SummarizerError) as info:
        await summarizer.summarize(request())
    assert info.value.calls == 1
    assert "summarization failed" in str(info.value)  # not "gave up after N attempt(s)"
    assert "OPENAI_API_KEY" in str(info.value)
