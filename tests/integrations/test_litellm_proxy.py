"""The litellm proxy integration: the pre-call hook in process, the compaction/ provider's retry
through litellm itself, and the real proxy server on 127.0.0.1 in front of the fake provider."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.installed import require

require("litellm")

import litellm

from compaction import CompactionConfig
from compaction.adapters import to_canonical
from compaction.integrations.litellm_proxy import CompactingProvider, CompactionHook
from compaction.pairs import validate
from compaction.testing import FakeProvider
from compaction.testing.fake_provider import Fault
from tests.support.serve_ports import logged_port

ROOT = Path(__file__).resolve().parents[2]
MASTER_KEY = f"sk-{secrets.token_hex(32)}"
FILLER = "the deploy log shows retries against db-primary with timeouts; " * 60  # ~900 tokens


def _conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a release engineer."}]
    for n in range(turns):
        messages.append({"role": "user", "content": f"step {n}: inspect release R-{1000 + n}. {FILLER}"})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"c{n}", "type": "function", "function": {"name": "read_log", "arguments": "{}"}}
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": f"log {n}: {FILLER}"})
        messages.append({"role": "assistant", "content": f"release R-{1000 + n} checked"})
    messages.append({"role": "user", "content": "Which release failed?"})
    return messages


def _config() -> CompactionConfig:
    return CompactionConfig(window=32_000, threshold=8_000, reserve_tokens=2_000, keep_recent_messages=4)


async def test_pre_call_hook_compacts_oversized_messages() -> None:
    hook = CompactionHook(config=_config(), models={"team-model": "gpt-4o"})
    messages = _conversation(10)
    snapshot = json.dumps(messages)
    data = {"model": "team-model", "messages": messages, "metadata": {"user": "u1"}}
    out = await hook.async_pre_call_hook(None, None, data, "acompletion")
    assert json.dumps(messages) == snapshot  # the caller's messages are untouched
    assert isinstance(out, dict)
    result = hook.last_results["team-model"]
    assert result.compacted
    assert out["messages"] == result.messages
    assert result.tokens_after < 8_000 < result.tokens_before
    assert out["metadata"]["user"] == "u1"
    assert out["metadata"]["compaction"]["tokens_before"] == result.tokens_before
    assert out["messages"][-1] == messages[-1]
    assert validate(to_canonical(out["messages"])) == []
    assert len(result.archive) >= result.messages_removed > 0  # every removed message is archived


async def test_pre_call_hook_compacts_anthropic_messages_bodies() -> None:
    hook = CompactionHook(config=_config())
    messages = [m for m in _conversation(10) if m["role"] in ("user", "assistant") and m.get("content")]
    data = {"model": "claude-sonnet-4-5", "system": "You are a release engineer.", "messages": messages}
    out = await hook.async_pre_call_hook(None, None, data, "anthropic_messages")
    result = hook.last_results["claude-sonnet-4-5"]
    assert result.compacted
    assert result.format == "anthropic"
    assert out["messages"] == result.messages
    assert out["messages"][0]["role"] == "user"
    assert out["messages"][-1] == messages[-1]
    assert "metadata" not in out  # Anthropic's own metadata field is left alone
    assert out["litellm_metadata"]["compaction"]["messages_removed"] == result.messages_removed
    assert validate(to_canonical(out["messages"], out.get("system"))) == []


async def test_pre_call_hook_leaves_small_and_non_chat_requests_alone() -> None:
    hook = CompactionHook(config=_config())
    small = {"model": "gpt-4o", "messages": _conversation(1)}
    assert await hook.async_pre_call_hook(None, None, small, "acompletion") == small
    embed = {"model": "gpt-4o", "input": ["x" * 100_000]}
    assert await hook.async_pre_call_hook(None, None, embed, "aembedding") is embed
    assert hook.last_results == {}


async def test_overflow_is_compacted_and_retried_by_the_provider() -> None:
    hook = CompactionHook(config=CompactionConfig(window=128_000, threshold=0, keep_recent_messages=4))
    provider = CompactingProvider(hook)
    saved = litellm.custom_provider_map
    litellm.custom_provider_map = [{"provider": "compaction", "custom_handler": provider}]
    litellm.utils.custom_llm_setup()
    try:
        with FakeProvider(context_window=6_000) as server:  # the upstream is smaller than it claims
            response = await litellm.acompletion(
                model="compaction/openai/gpt-4o",
                messages=_conversation(6),
                api_base=server.openai_api_base,
                api_key="fake",
                max_tokens=200,
            )
            sent = server.completion_requests
    finally:
        litellm.custom_provider_map = saved
    assert response.choices[0].message.content
    assert len(sent) >= 2  # the overflowing request, then the compacted retry
    assert sent[-1].input_tokens + 200 <= 6_000 < sent[0].input_tokens
    assert provider.last_compactions
    assert provider.last_compactions[0].trigger == "overflow"


async def test_failure_hook_counts_overflows_only() -> None:
    hook = CompactionHook()
    overflow = litellm.ContextWindowExceededError(
        message="This model's maximum context length is 8192 tokens", model="gpt-4o", llm_provider="openai"
    )
    throttle = litellm.RateLimitError(message="slow down", model="gpt-4o", llm_provider="openai")
    assert await hook.async_post_call_failure_hook({"model": "gpt-4o"}, overflow, None) is None
    assert await hook.async_post_call_failure_hook({"model": "gpt-4o"}, throttle, None) is None
    assert hook.overflows == 1


@contextlib.contextmanager
def _registered(provider: CompactingProvider) -> Iterator[None]:
    saved = litellm.custom_provider_map
    litellm.custom_provider_map = [{"provider": "compaction", "custom_handler": provider}]
    litellm.utils.custom_llm_setup()
    try:
        yield
    finally:
        litellm.custom_provider_map = saved


async def test_provider_streams_after_compacting_an_overflow() -> None:
    hook = CompactionHook(
        config=CompactionConfig(window=128_000, threshold=0, keep_recent_messages=4), executor="thread"
    )
    provider = CompactingProvider(hook)
    with _registered(provider), FakeProvider(context_window=6_000) as server:
        stream = await litellm.acompletion(
            model="compaction/openai/gpt-4o",
            messages=_conversation(6),
            api_base=server.openai_api_base,
            api_key="fake",
            max_tokens=200,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        sent = server.completion_requests
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip()
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert len(sent) >= 2
    assert all(r.stream for r in sent)
    assert sent[-1].input_tokens + 200 <= 6_000 < sent[0].input_tokens
    assert provider.last_compactions
    assert provider.last_compactions[0].trigger == "overflow"


async def test_provider_streams_tool_calls_through() -> None:
    provider = CompactingProvider(CompactionHook(executor="thread"))
    tool = {"type": "function", "function": {"name": "read_log", "parameters": {"type": "object", "properties": {}}}}
    with _registered(provider), FakeProvider() as server:
        server.script([Fault.tool_call_only("read_log", {"path": "/var/log/app.log"})])
        stream = await litellm.acompletion(
            model="compaction/openai/gpt-4o",
            messages=[{"role": "user", "content": "read the log"}],
            tools=[tool],
            api_base=server.openai_api_base,
            api_key="fake",
            stream=True,
        )
        chunks = [chunk async for chunk in stream]
    calls = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or ()]
    assert calls
    assert calls[0].function.name == "read_log"
    assert json.loads("".join(call.function.arguments or "" for call in calls)) == {"path": "/var/log/app.log"}


async def test_provider_stream_that_cannot_fit_is_a_400_with_the_reason() -> None:
    provider = CompactingProvider(CompactionHook(config=CompactionConfig(window=128_000), executor="thread"))
    huge = [{"role": "user", "content": "Which release failed? " + FILLER * 12}]  # one message over the window

    async def stream_all(api_base: str) -> list[Any]:
        stream = await litellm.acompletion(
            model="compaction/openai/gpt-4o", messages=huge, api_base=api_base, api_key="fake", stream=True
        )
        return [chunk async for chunk in stream]

    with (
        _registered(provider),
        FakeProvider(context_window=2_000) as server,
        pytest.raises(litellm.BadRequestError, match="context_length_exceeded"),
    ):
        await stream_all(server.openai_api_base)


# --- the real proxy ------------------------------------------------------------------------


@contextlib.contextmanager
def _proxy(config: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The LiteLLM proxy on a port it picks itself (``--port 0``; :func:`logged_port` reads it)."""
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        "LITELLM_MASTER_KEY": MASTER_KEY,
        "PYTHONPATH": str(ROOT),
        "NO_PROXY": "127.0.0.1,localhost",
    }
    env.pop("DATABASE_URL", None)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "litellm.proxy.proxy_cli",
                "--config",
                str(config),
                "--host",
                "127.0.0.1",
                "--port",
                "0",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(config.parent),
        )
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def _post(url: str, body: dict[str, Any], timeout: float = 60) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {MASTER_KEY}"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _post_stream(url: str, body: dict[str, Any], timeout: float = 60) -> tuple[int, list[str]]:
    """(status, the ``data:`` payloads of the server-sent events) of a streaming request; an error
    status gives its body as the one payload."""
    request = urllib.request.Request(
        url,
        data=json.dumps({**body, "stream": True}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {MASTER_KEY}"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, _sse_data(response.read().decode())
    except urllib.error.HTTPError as exc:
        return exc.code, [exc.read().decode()]


def _sse_data(text: str) -> list[str]:
    return [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]


def _streamed_text(events: list[str]) -> str:
    assert events[-1] == "[DONE]", events[-3:]
    chunks = [json.loads(e) for e in events[:-1]]
    return "".join((c["choices"][0]["delta"].get("content") or "") for c in chunks if c.get("choices"))


def _wait_ready(base: str, proc: subprocess.Popen[bytes], log: Path, deadline_s: float = 90) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"the proxy exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        with contextlib.suppress(OSError), opener.open(f"{base}/health/liveliness", timeout=2) as response:
            if response.status == 200:
                return
        time.sleep(0.3)
    raise AssertionError(f"the proxy did not start in {deadline_s} s:\n{log.read_text()[-3000:]}")


@pytest.mark.slow
def test_real_proxy_compacts_and_retries(tmp_path: Path) -> None:
    require("litellm.proxy.proxy_server")
    with FakeProvider(context_window=6_000) as server:
        example = (ROOT / "examples" / "litellm_proxy" / "config.yaml").read_text()
        config = tmp_path / "config.yaml"
        config.write_text(example.replace("http://127.0.0.1:8001/v1", server.openai_api_base))
        callbacks = ROOT / "examples" / "litellm_proxy" / "compaction_callbacks.py"
        (tmp_path / callbacks.name).write_text(callbacks.read_text())
        log = tmp_path / "proxy.log"
        with _proxy(config, log) as proc:
            base = f"http://127.0.0.1:{logged_port(proc, log)}"
            _wait_ready(base, proc, log)
            # Over the hook's threshold: compacted before it is sent (one upstream call).
            status, body = _post(
                f"{base}/v1/chat/completions", {"model": "gpt-4o", "messages": _conversation(10), "max_tokens": 200}
            )
            assert status == 200, (body, [r.input_tokens for r in server.completion_requests], log.read_text()[-6000:])
            assert body["choices"][0]["message"]["content"]
            first = server.completion_requests[-1]
            assert first.input_tokens + 200 <= 6_000
            assert len(server.completion_requests) == 1
            # The upstream overflows below the hook's threshold: the provider compacts and retries.
            status, body = _post(
                f"{base}/v1/chat/completions", {"model": "gpt-4o", "messages": _conversation(6), "max_tokens": 200}
            )
            assert status == 200, (body, log.read_text()[-2000:])
            retried = server.completion_requests[1:]
            assert len(retried) >= 2
            assert retried[-1].input_tokens + 200 <= 6_000 < retried[0].input_tokens
            # Streaming: the same compact-and-retry, then the upstream's chunks.
            before = len(server.completion_requests)
            status, events = _post_stream(
                f"{base}/v1/chat/completions", {"model": "gpt-4o", "messages": _conversation(6), "max_tokens": 200}
            )
            assert status == 200, (events, log.read_text()[-3000:])
            assert _streamed_text(events).strip()
            streamed = server.completion_requests[before:]
            assert len(streamed) >= 2
            assert all(r.stream for r in streamed)
            assert streamed[-1].input_tokens + 200 <= 6_000 < streamed[0].input_tokens
            # A request that no compaction can fit: the documented 400, streaming or not, no traceback.
            huge = [{"role": "user", "content": "Which release failed? " + FILLER * 12}]
            for send in (_post, _post_stream):
                status, answer = send(f"{base}/v1/chat/completions", {"model": "gpt-4o", "messages": huge})
                assert status == 400, (answer, log.read_text()[-3000:])
                assert "context_length_exceeded" in json.dumps(answer)
                assert "Traceback" not in json.dumps(answer)


def _bash_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", markdown, flags=re.S | re.M)


def _unused_port() -> int:
    """A port that was free a moment ago. The README's commands name fixed ports (the servers
    cannot report a port 0 back to a shell script), so this test substitutes free ones; a port
    taken in between fails loudly ("address already in use"), it does not pass wrongly."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_example_readme_commands_run_as_written(tmp_path: Path) -> None:
    """The three command blocks of examples/litellm_proxy/README.md, run as one bash script from a
    copy of the checkout's layout (only the two port numbers changed, in the commands and the
    example's files alike, so parallel runs do not collide): the servers start, a normal and a
    streaming request are answered, and the stop command ends them."""
    require("litellm.proxy.proxy_server")
    example = ROOT / "examples" / "litellm_proxy"
    start, requests, stop = _bash_blocks((example / "README.md").read_text())
    proxy_port, upstream_port = _unused_port(), _unused_port()

    def ported(text: str) -> str:
        return text.replace("4000", str(proxy_port)).replace("8001", str(upstream_port))

    copy = tmp_path / "examples" / "litellm_proxy"
    copy.mkdir(parents=True)
    for path in example.iterdir():
        if path.is_file():
            (copy / path.name).write_text(ported(path.read_text()))
    marker = "<<requests done>>"
    script = tmp_path / "commands.sh"
    script.write_text(f"{ported(start)}{ported(requests)}\necho '{marker}'\n{stop}")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "LITELLM_TELEMETRY": "False",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    for name in ("LITELLM_MASTER_KEY", "DATABASE_URL"):
        env.pop(name, None)
    proc = subprocess.Popen(
        ["bash", str(script)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: everything it starts is stopped below
    )
    try:
        output, _ = proc.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    text = output.decode(errors="replace")
    assert proc.returncode == 0, text[-4000:]
    answers, _, _ = text.partition(marker)
    normal = json.loads(next(line for line in answers.splitlines() if line.startswith("{")))
    assert normal["choices"][0]["message"]["content"], text[-4000:]
    assert _streamed_text(_sse_data(answers)).strip(), text[-4000:]
