"""The fake provider server: wire formats, scripting, faults, latency, through real HTTP."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from compaction.litellm_loader import load_litellm
from compaction.testing import (
    FakeProvider,
    Fault,
    FaultKind,
    LatencyModel,
    RecordedRequest,
    Reply,
    estimate_tokens,
    stand_in_summary,
)

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    with FakeProvider() as s:
        yield s


def openai_body(text: str = "hello", max_tokens: int = 100, **extra: Any) -> dict[str, Any]:
    return {
        "model": "x",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}],
        "max_tokens": max_tokens,
        **extra,
    }


def anthropic_body(text: str = "hello", max_tokens: int = 100, **extra: Any) -> dict[str, Any]:
    return {
        "model": "x",
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
        "max_tokens": max_tokens,
        **extra,
    }


def post(
    server: FakeProvider,
    path: str,
    body: dict[str, Any],
    *,
    conn: http.client.HTTPConnection | None = None,
    timeout: float = 5.0,
) -> tuple[int, dict[str, str], bytes]:
    """POST JSON with the stdlib client; returns status, lower-cased headers and raw body."""
    own = conn is None
    c = conn or http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        c.request("POST", path, body=json.dumps(body), headers={"content-type": "application/json"})
        resp = c.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        if own:
            c.close()


# -- lifecycle -------------------------------------------------------------------------------


def test_sync_context_manager_binds_port_zero_and_stops() -> None:
    with FakeProvider() as s:
        assert s.port > 0
        assert s.base_url == f"http://127.0.0.1:{s.port}"
        assert s.openai_api_base == s.base_url + "/v1"
        assert s.anthropic_api_base == s.base_url
        status, _, _ = post(s, OPENAI_PATH, openai_body())
        assert status == 200
        port = s.port
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


async def test_async_context_manager_serves_while_the_test_loop_runs() -> None:
    async with FakeProvider() as s:
        reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
        payload = json.dumps(openai_body()).encode()
        writer.write(
            f"POST {OPENAI_PATH} HTTP/1.1\r\nhost: x\r\ncontent-length: {len(payload)}\r\n\r\n".encode() + payload
        )
        await writer.drain()
        status_line = await reader.readline()
        assert status_line.startswith(b"HTTP/1.1 200")
        writer.close()


def test_stop_is_idempotent_and_unstarted_server_has_no_url() -> None:
    s = FakeProvider()
    with pytest.raises(RuntimeError, match="not running"):
        _ = s.base_url
    s.stop()
    s.start()
    s.start()
    s.stop()
    s.stop()


def test_keep_alive_connection_serves_many_requests_with_nodelay(server: FakeProvider) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        for _ in range(20):
            status, headers, _ = post(server, OPENAI_PATH, openai_body(), conn=conn)
            assert status == 200
            assert headers["connection"] == "keep-alive"
        # One connection served everything, its socket with Nagle off: the ~40 ms Nagle/delayed-ACK
        # stall per call cannot happen (the option, not a stopwatch that the machine's load moves).
        writers = list(server._writers)
        assert len(writers) == 1
        sock = writers[0].get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        conn.close()


def test_unknown_route_and_invalid_json(server: FakeProvider) -> None:
    assert post(server, "/v2/nothing", {})[0] == 404
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("POST", OPENAI_PATH, body=b"{not json", headers={"content-type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 400
    assert "invalid JSON" in json.loads(resp.read())["error"]["message"]
    conn.close()


# -- answers ---------------------------------------------------------------------------------


def test_openai_answer_shape_and_usage(server: FakeProvider) -> None:
    status, headers, raw = post(server, OPENAI_PATH, openai_body("see src/app.py"))
    assert status == 200
    assert headers["content-type"] == "application/json"
    body = json.loads(raw)
    assert body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop"
    text = choice["message"]["content"]
    assert "src/app.py" in text
    req = server.requests[0]
    assert body["usage"]["prompt_tokens"] == estimate_tokens("Be brief.\nsee src/app.py") == req.input_tokens
    assert body["usage"]["completion_tokens"] == estimate_tokens(text)


def test_anthropic_answer_shape_and_usage(server: FakeProvider) -> None:
    status, _, raw = post(server, ANTHROPIC_PATH, anthropic_body("ticket OPS-42"))
    assert status == 200
    body = json.loads(raw)
    assert body["type"] == "message"
    assert body["stop_reason"] == "end_turn"
    assert body["content"][0]["type"] == "text"
    assert "OPS-42" in body["content"][0]["text"]
    assert body["usage"]["input_tokens"] == estimate_tokens("Be brief.\nticket OPS-42")
    assert body["usage"]["cache_read_input_tokens"] == 0


def test_count_tokens_route(server: FakeProvider) -> None:
    body = anthropic_body("x" * 400)
    status, _, raw = post(server, "/v1/messages/count_tokens", body)
    assert status == 200
    assert json.loads(raw) == {"input_tokens": estimate_tokens("Be brief.\n" + "x" * 400)}
    # count_tokens never consumes scripted answers
    server.script(["scripted"])
    post(server, "/v1/messages/count_tokens", body)
    assert server.pending == 1
    assert [r.route for r in server.requests] == ["count_tokens", "count_tokens"]
    assert server.completion_requests == []


def test_requests_are_recorded_with_body_and_headers(server: FakeProvider) -> None:
    post(server, OPENAI_PATH, openai_body("a", temperature=0))
    post(server, ANTHROPIC_PATH, anthropic_body("b"))
    first, second = server.requests
    assert (first.route, first.index, first.path) == ("openai", 0, OPENAI_PATH)
    assert first.body["temperature"] == 0
    assert first.headers["content-type"] == "application/json"
    assert first.messages == [("system", "Be brief."), ("user", "a")]
    assert second.route == "anthropic"
    assert second.system_text == "Be brief."
    assert second.last_user_text == "b"
    assert second.max_tokens == 100
    server.reset()
    assert server.requests == []


def test_answers_are_capped_by_max_tokens(server: FakeProvider) -> None:
    server.script(["y" * 1000])
    body = json.loads(post(server, OPENAI_PATH, openai_body(max_tokens=10))[2])
    assert body["choices"][0]["message"]["content"] == "y" * 40
    assert body["choices"][0]["finish_reason"] == "length"
    long_input = " ".join(f"src/module_{i}.py" for i in range(500))
    body = json.loads(post(server, ANTHROPIC_PATH, anthropic_body(long_input, max_tokens=50))[2])
    assert len(body["content"][0]["text"]) <= 200


# -- the computed stand-in summary --------------------------------------------------------------


def test_stand_in_summary_keeps_identifiers_and_error_lines() -> None:
    text = (
        "We changed src/compaction/engine.py:42 and ./scripts/run.sh after reading "
        "https://example.com/docs/page?id=3. Commit 9f3c2ab1 fixed PROJ-1234; run id "
        "123e4567-e89b-12d3-a456-426614174000.\n"
        "Traceback (most recent call last):\n"
        "ValueError: bad token count\n"
        "all good here and/or there\n"
    )
    out = stand_in_summary(text)
    for token in (
        "src/compaction/engine.py:42",
        "./scripts/run.sh",
        "https://example.com/docs/page?id=3",
        "9f3c2ab1",
        "PROJ-1234",
        "123e4567-e89b-12d3-a456-426614174000",
        "- ValueError: bad token count",
        "- Traceback (most recent call last):",
    ):
        assert token in out
    assert "and/or" not in out.split("## Identifiers")[1].split("## Errors")[0]
    assert out == stand_in_summary(text)  # deterministic


def test_stand_in_summary_is_never_empty_and_respects_cap() -> None:
    assert stand_in_summary("") == "## Summary\n(nothing to summarize)"
    many = "\n".join(f"file{i}.py" for i in range(1000))
    # The answer fits the cap at 3 characters per token (identifiers and paths tokenize at about 3).
    out = stand_in_summary(many, max_tokens=25)
    assert 0 < len(out) <= 25 * 3
    assert all(not line.startswith("- ") or line.endswith(".py") for line in out.splitlines())
    assert stand_in_summary("abc", max_tokens=1) == "## "


def test_default_answer_summarizes_only_the_last_user_message(server: FakeProvider) -> None:
    body = openai_body("now look at docs/b.md")
    body["messages"].insert(1, {"role": "user", "content": "old: docs/a.md"})
    text = json.loads(post(server, OPENAI_PATH, body)[2])["choices"][0]["message"]["content"]
    assert "docs/b.md" in text
    assert "docs/a.md" not in text


# -- scripting ---------------------------------------------------------------------------------


def content_of(raw: bytes) -> str | None:
    body = json.loads(raw)
    if "choices" in body:
        return body["choices"][0]["message"]["content"] if body["choices"] else None
    texts = [b["text"] for b in body["content"] if b["type"] == "text"]
    return texts[0] if texts else None


def test_script_queue_is_consumed_in_order(server: FakeProvider) -> None:
    server.script(["one", Reply("two", input_tokens=7, output_tokens=3, cached_tokens=5), Fault.server_error()])
    assert server.pending == 3
    assert content_of(post(server, OPENAI_PATH, openai_body())[2]) == "one"
    raw = post(server, OPENAI_PATH, openai_body())[2]
    assert content_of(raw) == "two"
    usage = json.loads(raw)["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (7, 3)
    assert usage["prompt_tokens_details"]["cached_tokens"] == 5
    assert post(server, OPENAI_PATH, openai_body())[0] == 500
    assert server.pending == 0
    assert content_of(post(server, OPENAI_PATH, openai_body("k ABC-1"))[2]).startswith("## Summary")  # type: ignore[union-attr]


def test_responder_sync_and_async() -> None:
    seen: list[RecordedRequest] = []

    def echo(req: RecordedRequest) -> str:
        seen.append(req)
        return f"echo:{req.last_user_text}"

    with FakeProvider(responder=echo) as s:
        assert content_of(post(s, ANTHROPIC_PATH, anthropic_body("hi"))[2]) == "echo:hi"
        assert seen[0].route == "anthropic"

        async def later(req: RecordedRequest) -> Reply:
            await asyncio.sleep(0)
            return Reply("async answer")

        s.responder = later
        assert content_of(post(s, OPENAI_PATH, openai_body())[2]) == "async answer"
        s.responder = lambda req: Fault.unavailable()
        assert post(s, OPENAI_PATH, openai_body())[0] == 503


def test_fail_next_and_fail_when(server: FakeProvider) -> None:
    server.fail_next(Fault.server_error(), times=2)
    assert [post(server, OPENAI_PATH, openai_body())[0] for _ in range(3)] == [500, 500, 200]
    server.fail_when(lambda r: "boom" in r.last_user_text, Fault.overloaded(), times=1)
    server.script(["queued"])
    assert post(server, OPENAI_PATH, openai_body("boom"))[0] == 529  # rules come before the queue
    assert content_of(post(server, OPENAI_PATH, openai_body("boom"))[2]) == "queued"  # rule used up
    server.fail_when(lambda r: r.route == "anthropic", Fault.server_error())
    assert [post(server, ANTHROPIC_PATH, anthropic_body())[0] for _ in range(3)] == [500, 500, 500]
    assert post(server, OPENAI_PATH, openai_body())[0] == 200


def test_responder_bugs_become_500_and_are_kept(server: FakeProvider) -> None:
    server.script([42])  # type: ignore[list-item]
    status, _, raw = post(server, OPENAI_PATH, openai_body())
    assert status == 500
    assert json.loads(raw)["error"]["type"] == "fake_provider_error"
    assert isinstance(server.errors[0], TypeError)

    def broken(req: RecordedRequest) -> str:
        raise RuntimeError("responder bug")

    server.responder = broken
    assert post(server, OPENAI_PATH, openai_body())[0] == 500
    assert "responder bug" in str(server.errors[1])


# -- faults --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "status", "openai_code", "anthropic_type"),
    [
        (Fault.rate_limit(0.05), 429, "rate_limit_exceeded", "rate_limit_error"),
        (Fault.server_error(), 500, None, "api_error"),
        (Fault.unavailable(), 503, None, "api_error"),
        (Fault.overloaded(), 529, None, "overloaded_error"),
        (Fault.request_too_large(), 413, "request_too_large", "request_too_large"),
        (Fault.http_error(401, {"error": {"message": "bad key"}}), 401, None, None),
    ],
)
def test_error_faults_on_both_routes(
    server: FakeProvider, fault: Fault, status: int, openai_code: str | None, anthropic_type: str | None
) -> None:
    server.fail_next(fault)
    got, _, raw = post(server, OPENAI_PATH, openai_body())
    assert got == status
    if openai_code is not None:
        assert json.loads(raw)["error"]["code"] == openai_code
    server.fail_next(fault)
    got, _, raw = post(server, ANTHROPIC_PATH, anthropic_body())
    assert got == status
    if anthropic_type is not None:
        assert json.loads(raw)["error"]["type"] == anthropic_type


def test_retry_after_headers(server: FakeProvider) -> None:
    server.script(
        [Fault.rate_limit(0.05), Fault.rate_limit(2), Fault.rate_limit(None, retry_after_ms=70), Fault.unavailable(3)]
    )
    assert post(server, OPENAI_PATH, openai_body())[1]["retry-after"] == "0.05"
    assert post(server, OPENAI_PATH, openai_body())[1]["retry-after"] == "2"
    headers = post(server, OPENAI_PATH, openai_body())[1]
    assert headers["retry-after-ms"] == "70"
    assert "retry-after" not in headers
    status, headers, _ = post(server, OPENAI_PATH, openai_body())
    assert (status, headers["retry-after"]) == (503, "3")


def test_context_overflow_wordings(server: FakeProvider) -> None:
    server.fail_next(Fault.context_overflow(250_000, 128_000))
    status, _, raw = post(server, OPENAI_PATH, openai_body())
    error = json.loads(raw)["error"]
    assert status == 400
    assert error["code"] == "context_length_exceeded"
    assert error["message"].startswith("This model's maximum context length is 128000 tokens. However, your messages")
    assert "resulted in 250000 tokens" in error["message"]

    server.fail_next(Fault.context_overflow(213_462, 200_000))
    status, _, raw = post(server, ANTHROPIC_PATH, anthropic_body())
    body = json.loads(raw)
    assert status == 400
    assert body["error"] == {
        "type": "invalid_request_error",
        "message": "prompt is too long: 213462 tokens > 200000 maximum",
    }

    wording = "input length and `max_tokens` exceed context limit: 179413 + 32768 > 200000"
    server.fail_next(Fault.context_overflow(message=wording))
    assert json.loads(post(server, ANTHROPIC_PATH, anthropic_body())[2])["error"]["message"] == wording


def test_context_window_overflows_oversize_requests() -> None:
    with FakeProvider(context_window=1000) as s:
        assert post(s, OPENAI_PATH, openai_body("x" * 100, max_tokens=500))[0] == 200
        status, _, raw = post(s, ANTHROPIC_PATH, anthropic_body("x" * 3000, max_tokens=500))
        assert status == 400
        assert "prompt is too long" in json.loads(raw)["error"]["message"]
        s.script(["scripted answers win"])
        assert post(s, ANTHROPIC_PATH, anthropic_body("x" * 3000, max_tokens=500))[0] == 200


@pytest.mark.parametrize(
    ("fault", "openai_expect", "anthropic_expect"),
    [
        (Fault.empty_choices(), "no choices", "no content"),
        (Fault.empty_content(), "", ""),
        (Fault.whitespace_content(), "  \n\t \n ", "  \n\t \n "),
    ],
)
def test_content_faults(server: FakeProvider, fault: Fault, openai_expect: str, anthropic_expect: str) -> None:
    server.fail_next(fault)
    body = json.loads(post(server, OPENAI_PATH, openai_body())[2])
    if openai_expect == "no choices":
        assert body["choices"] == []
    else:
        assert body["choices"][0]["message"]["content"] == openai_expect
    server.fail_next(fault)
    body = json.loads(post(server, ANTHROPIC_PATH, anthropic_body())[2])
    if anthropic_expect == "no content":
        assert body["content"] == []
    else:
        assert body["content"][0]["text"] == anthropic_expect


def test_tool_call_only(server: FakeProvider) -> None:
    server.fail_next(Fault.tool_call_only(), times=2)
    body = json.loads(post(server, OPENAI_PATH, openai_body())[2])
    message = body["choices"][0]["message"]
    assert message["content"] is None
    assert message["tool_calls"][0]["function"]["name"] == "read_file"
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    body = json.loads(post(server, ANTHROPIC_PATH, anthropic_body())[2])
    assert [b["type"] for b in body["content"]] == ["tool_use"]
    assert body["stop_reason"] == "tool_use"


def test_malformed_json(server: FakeProvider) -> None:
    server.fail_next(Fault.malformed_json())
    status, _, raw = post(server, OPENAI_PATH, openai_body())
    assert status == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)


def test_drop_closes_the_connection_without_a_response(server: FakeProvider) -> None:
    server.fail_next(Fault.drop())
    with pytest.raises(http.client.RemoteDisconnected):
        post(server, OPENAI_PATH, openai_body())
    assert len(server.requests) == 1  # the request was read and recorded
    assert post(server, OPENAI_PATH, openai_body())[0] == 200


def test_hang_never_answers_until_the_client_gives_up(server: FakeProvider) -> None:
    server.fail_next(Fault.hang())
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        post(server, OPENAI_PATH, openai_body(), timeout=0.2)
    assert time.monotonic() - started >= 0.2
    assert post(server, OPENAI_PATH, openai_body())[0] == 200


def test_stop_releases_hung_connections() -> None:
    s = FakeProvider().start()
    s.fail_next(Fault.hang())
    # The client's timeout is a hang guard: a connection stop() left hanging would end in a
    # TimeoutError, which is not what pytest.raises accepts; a released one is closed by the server.
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
    conn.request("POST", OPENAI_PATH, body=json.dumps(openai_body()))
    while not s.requests:  # the server is now hanging on this request
        time.sleep(0.005)
    s.stop()
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        conn.getresponse()
    conn.close()


def test_slow_answers_after_the_delay(server: FakeProvider) -> None:
    server.script([Fault.slow(0.1), Fault.slow(0.05, "late")])
    started = time.monotonic()
    assert post(server, OPENAI_PATH, openai_body("PR-7"))[0] == 200
    assert time.monotonic() - started >= 0.1
    assert content_of(post(server, OPENAI_PATH, openai_body())[2]) == "late"


def test_fault_kinds_all_have_constructors() -> None:
    built = {
        Fault.rate_limit().kind,
        Fault.server_error().kind,
        Fault.unavailable().kind,
        Fault.overloaded().kind,
        Fault.slow(0).kind,
        Fault.hang().kind,
        Fault.drop().kind,
        Fault.malformed_json().kind,
        Fault.empty_choices().kind,
        Fault.empty_content().kind,
        Fault.whitespace_content().kind,
        Fault.tool_call_only().kind,
        Fault.context_overflow().kind,
        Fault.request_too_large().kind,
        Fault.http_error(418).kind,
    }
    assert built == set(FaultKind)


# -- latency model ---------------------------------------------------------------------------------


def test_latency_model_formula() -> None:
    model = LatencyModel(fixed_s=0.5, per_input_token_s=0.001, per_output_token_s=0.01)
    assert model.delay(1000, 100) == pytest.approx(0.5 + 1.0 + 1.0)
    assert model.first_token_s(1000) == pytest.approx(1.5)
    assert LatencyModel().delay(10**6, 10**6) == 0


def test_latency_model_delays_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    # The server's waits are recorded (its sleeps, in its own thread): the delay it chose is checked
    # exactly, the wall clock only as a lower bound (a wait that did happen).
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def recorded_sleep(delay: float, result: Any = None) -> Any:
        if threading.current_thread() is not threading.main_thread():
            waits.append(delay)
        return await real_sleep(delay, result)

    latency = LatencyModel(fixed_s=0.05, per_input_token_s=0.0005, per_output_token_s=0.0)
    with FakeProvider(latency=latency) as s:
        monkeypatch.setattr(asyncio, "sleep", recorded_sleep)
        body = openai_body("z" * 400)  # ~103 input tokens -> ~0.05 s more
        started = time.monotonic()
        assert post(s, OPENAI_PATH, body)[0] == 200
        elapsed = time.monotonic() - started
        expected = latency.delay(s.requests[0].input_tokens, 0)
        assert expected == pytest.approx(0.05 + 0.0005 * s.requests[0].input_tokens)
        assert waits == [expected]  # one wait, the model's delay, and nothing else
        assert elapsed >= expected
        s.latency = LatencyModel()
        post(s, OPENAI_PATH, body)
        assert waits == [expected]  # no latency model: no wait at all
        monkeypatch.undo()


# -- prompt-cache simulation -------------------------------------------------------------------------


def test_prompt_cache_simulation_anthropic_breakpoints() -> None:
    with FakeProvider(prompt_cache=True, prompt_cache_min_tokens=100) as s:
        system = [{"type": "text", "text": "rules " * 200, "cache_control": {"type": "ephemeral"}}]
        body = anthropic_body("first", system=system)
        usage = json.loads(post(s, ANTHROPIC_PATH, body)[2])["usage"]
        assert usage["cache_read_input_tokens"] == 0
        assert usage["cache_creation_input_tokens"] > 0
        usage = json.loads(post(s, ANTHROPIC_PATH, anthropic_body("second", system=system))[2])["usage"]
        assert usage["cache_read_input_tokens"] > 0
        assert usage["cache_creation_input_tokens"] == 0
        # without a breakpoint nothing is cached
        plain = anthropic_body("third", system=[{"type": "text", "text": "rules " * 200}])
        assert json.loads(post(s, ANTHROPIC_PATH, plain)[2])["usage"]["cache_read_input_tokens"] == 0


def test_prompt_cache_simulation_openai_automatic_prefix() -> None:
    with FakeProvider(prompt_cache=True, prompt_cache_min_tokens=128) as s:
        history = [{"role": "system", "content": "s " * 600}, {"role": "user", "content": "u " * 600}]
        first = {"model": "x", "messages": [*history, {"role": "user", "content": "one"}]}
        second = {"model": "x", "messages": [*history, {"role": "user", "content": "two"}]}
        assert json.loads(post(s, OPENAI_PATH, first)[2])["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        cached = json.loads(post(s, OPENAI_PATH, second)[2])["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert cached > 0
        assert cached % 128 == 0


# -- through litellm -------------------------------------------------------------------------------------


@pytest.mark.parametrize("route", ["openai", "anthropic"])
def test_litellm_sync_and_stream(server: FakeProvider, route: str) -> None:
    litellm = load_litellm()
    model = f"{route}/x"
    base = server.openai_api_base if route == "openai" else server.anthropic_api_base
    messages = [{"role": "user", "content": "check https://ci.example.com/build/77 and BUG-9"}]
    response = litellm.completion(model=model, api_base=base, api_key="k", messages=messages, max_tokens=200)
    text = response.choices[0].message.content
    assert "https://ci.example.com/build/77" in text
    assert "BUG-9" in text
    assert response.usage.prompt_tokens == server.requests[-1].input_tokens
    assert response.usage.completion_tokens == estimate_tokens(text)
    chunks = litellm.completion(model=model, api_base=base, api_key="k", messages=messages, max_tokens=200, stream=True)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert streamed == text
    assert server.requests[-1].stream


# -- the real APIs' model rules, reasoning and the Gemini route ------------------------------------------


def _post(server: FakeProvider, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_openai_reasoning_models_reject_temperature_and_max_tokens() -> None:
    messages = [{"role": "user", "content": "hi"}]
    with FakeProvider() as server:
        status, body = _post(server, "/v1/chat/completions", {"model": "gpt-5", "messages": messages, "temperature": 0})
        assert status == 400
        assert "Unsupported value: 'temperature'" in body["error"]["message"]
        status, body = _post(
            server, "/v1/chat/completions", {"model": "o3-mini", "messages": messages, "max_tokens": 50}
        )
        assert status == 400
        assert "max_completion_tokens" in body["error"]["message"]
        ok = {"model": "gpt-5", "messages": messages, "max_completion_tokens": 400}
        status, body = _post(server, "/v1/chat/completions", ok)
        assert status == 200
        assert body["usage"]["completion_tokens_details"]["reasoning_tokens"] == 200  # half the cap
        status, _ = _post(server, "/v1/chat/completions", {"model": "gpt-4o", "messages": messages, "temperature": 0})
        assert status == 200  # other models take it


def test_anthropic_thinking_gets_a_thinking_block_and_its_rules() -> None:
    base = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}
    thinking = {"type": "enabled", "budget_tokens": 1024}
    with FakeProvider() as server:
        status, body = _post(
            server, "/v1/messages", {**base, "max_tokens": 2048, "thinking": thinking, "temperature": 0}
        )
        assert status == 400
        assert "temperature" in body["error"]["message"]
        status, body = _post(server, "/v1/messages", {**base, "max_tokens": 1024, "thinking": thinking})
        assert status == 400
        assert "budget_tokens" in body["error"]["message"]
        status, body = _post(server, "/v1/messages", {**base, "max_tokens": 2048, "thinking": thinking})
        assert status == 200
        assert [b["type"] for b in body["content"]] == ["thinking", "text"]
        assert body["usage"]["output_tokens"] >= 1024


def test_gemini_generate_content_route() -> None:
    request = {
        "systemInstruction": {"parts": [{"text": "Summarize."}]},
        "contents": [{"role": "user", "parts": [{"text": "Fixed src/app/main.py for APP-314."}]}],
        "generationConfig": {"maxOutputTokens": 400},
    }
    with FakeProvider() as server:
        status, body = _post(server, "/v1beta/models/gemini-2.5-flash:generateContent", request)
        (sent,) = server.completion_requests
    assert status == 200
    assert sent.route == "gemini"
    assert sent.model == "gemini-2.5-flash"
    assert sent.max_tokens == 400
    assert sent.system_text == "Summarize."
    text = body["candidates"][0]["content"]["parts"][0]["text"]
    assert "APP-314" in text
    assert body["usageMetadata"]["thoughtsTokenCount"] == 200
    assert body["candidates"][0]["finishReason"] == "STOP"
