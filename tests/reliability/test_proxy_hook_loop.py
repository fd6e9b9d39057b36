"""The litellm proxy's pre-call hook keeps the proxy's event loop free and its memory bounded.

A large compaction runs on a worker (process by default), so other requests keep being served: a
ticker task on the loop measures the longest stall while the hook compacts 1,201 messages with a
1 MB tool result (on the loop itself that stalls it for about a second). The compactor cache is
least-recently-used and bounded, and inside a running proxy a model name the router does not serve
creates nothing.
"""

from __future__ import annotations

import asyncio
import sys
import time
import types
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import pytest

from tests.support.installed import require

require("litellm")

from compaction import CompactionConfig
from compaction.adapters import to_canonical
from compaction.integrations._workers import Workers
from compaction.integrations.litellm_proxy import CompactionHook
from compaction.pairs import validate

T = TypeVar("T")

# Generous: a worker-side compaction stalls the loop for a few ms (tens on a loaded machine); the
# same compaction on the loop stalls it for its whole CPU time (about a second here).
MAX_STALL_S = 0.25


def _session(turns: int, *, big_result_chars: int = 0) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a release engineer."}]
    for n in range(turns):
        messages.append(
            {"role": "user", "content": f"step {n}: inspect /srv/app/release-{n}.log " + "db-primary timed out; " * 20}
        )
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"c{n}", "type": "function", "function": {"name": "read_log", "arguments": "{}"}}
                ],
            }
        )
        content = f"log {n}: " + f"line {n} ok /var/log/app\n" * 30
        if big_result_chars and n == turns // 2:
            rows = (f"row {k}: value {k * 7} /data/part-{k}.csv status=ok\n" for k in range(big_result_chars // 45))
            content = "".join(rows)
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": content})
    messages.append({"role": "user", "content": "Which release failed?"})
    return messages


async def _longest_stall(work: Awaitable[T], period_s: float = 0.005) -> tuple[float, float, T]:
    """(longest extra delay of a ``period_s`` sleep on this loop while ``work`` runs, seconds
    ``work`` took, its result)."""
    worst = 0.0
    done = asyncio.Event()

    async def tick() -> None:
        nonlocal worst
        while not done.is_set():
            start = time.perf_counter()
            await asyncio.sleep(period_s)
            worst = max(worst, time.perf_counter() - start - period_s)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.05)
    start = time.perf_counter()
    result = await work
    took = time.perf_counter() - start
    done.set()
    await ticker
    return worst, took, result


@pytest.fixture
def stop_workers() -> Iterator[None]:
    yield
    Workers.shutdown_all()


@pytest.mark.parametrize("executor", ["process", "thread"])
async def test_a_large_compaction_leaves_the_event_loop_free(executor: str, stop_workers: None) -> None:
    hook = CompactionHook(
        config=CompactionConfig(window=128_000, threshold=0.5),
        models={"team-model": "gpt-4o"},
        executor=executor,  # type: ignore[arg-type]
        max_concurrent_compactions=1,
    )
    # Warm up first (worker start, tokenizer load): only the compaction itself is measured.
    warm = await hook.async_pre_call_hook(None, None, {"model": "team-model", "messages": _session(300)}, "acompletion")
    assert warm["messages"] != _session(300)
    messages = _session(400, big_result_chars=1_000_000)
    assert len(messages) == 1_202
    stall, took, out = await _longest_stall(
        hook.async_pre_call_hook(None, None, {"model": "team-model", "messages": messages}, "acompletion")
    )
    result = hook.last_results["team-model"]
    assert result.compacted
    assert out["messages"] == result.messages
    assert validate(to_canonical(out["messages"])) == []
    if executor == "process":
        assert stall < MAX_STALL_S, f"the loop stalled {stall * 1000:.0f} ms during a {took:.1f} s compaction"
    else:  # threads share the interpreter lock: documented as the weaker option, only bounded by the work
        assert stall < took


async def test_many_model_names_do_not_grow_the_compactor_cache(stop_workers: None) -> None:
    hook = CompactionHook(config=CompactionConfig(window=32_000), executor="thread")
    small = [{"role": "user", "content": "hello"}]
    for n in range(2_000):
        out = await hook.async_pre_call_hook(None, None, {"model": f"made-up-{n}", "messages": small}, "acompletion")
        assert out["messages"] == small
    assert hook.cached_compactors <= hook.max_compactors == 64
    # The most recently used names are the ones kept.
    assert hook.compactor_for("made-up-1999") is hook.compactor_for("made-up-1999")


async def test_last_results_are_bounded_like_the_cache(stop_workers: None) -> None:
    hook = CompactionHook(
        config=CompactionConfig(window=32_000, threshold=8_000, reserve_tokens=2_000, keep_recent_messages=4),
        executor="thread",
        max_compactors=3,
    )
    for n in range(8):
        await hook.async_pre_call_hook(None, None, {"model": f"model-{n}", "messages": _session(40)}, "acompletion")
    assert list(hook.last_results) == ["model-5", "model-6", "model-7"]
    assert hook.cached_compactors <= 3


class _Router:
    """What the hook reads of a running proxy's router: one deployment, ``gpt-4o``."""

    def get_model_list(self, model_name: str | None = None) -> list[dict[str, Any]]:
        if model_name != "gpt-4o":
            return []
        return [
            {
                "model_name": "gpt-4o",
                "litellm_params": {"model": "compaction/openai/gpt-4o"},
                "model_info": {"max_input_tokens": 24_000},
            }
        ]


async def test_inside_a_proxy_unknown_model_names_create_nothing(
    monkeypatch: pytest.MonkeyPatch, stop_workers: None
) -> None:
    proxy_server = types.ModuleType("litellm.proxy.proxy_server")
    proxy_server.llm_router = _Router()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "litellm.proxy.proxy_server", proxy_server)
    hook = CompactionHook(config=CompactionConfig(threshold=0.5, keep_recent_messages=4), executor="thread")
    messages = _session(40)  # over half of the deployment's 24,000-token window
    for n in range(500):
        data = {"model": f"made-up-{n}", "messages": messages}
        assert await hook.async_pre_call_hook(None, None, data, "acompletion") == data
    assert hook.cached_compactors == 0
    assert dict(hook.last_results) == {}
    out = await hook.async_pre_call_hook(None, None, {"model": "gpt-4o", "messages": messages}, "acompletion")
    assert hook.last_results["gpt-4o"].compacted
    assert out["messages"] == hook.last_results["gpt-4o"].messages
    assert hook.compactor_for("gpt-4o").guard.window == 24_000
    assert hook.cached_compactors == 1


def test_worker_processes_exit_when_the_proxy_dies(tmp_path: Any) -> None:
    """A proxy killed without shutting its pool down leaves no orphaned worker behind."""
    import os
    import subprocess

    script = tmp_path / "proxy.py"
    script.write_text(
        "import asyncio, os\n"
        "from compaction import CompactionConfig\n"
        "from compaction.integrations import _workers\n"
        "from compaction.integrations.litellm_proxy import CompactionHook\n"
        "async def main():\n"
        "    hook = CompactionHook(config=CompactionConfig(window=32_000, threshold=8_000, reserve_tokens=2_000,\n"
        "                          keep_recent_messages=2), max_concurrent_compactions=1)\n"
        "    messages = [{'role': 'user', 'content': f'step {n}: ' + 'deploy log line; ' * 400} for n in range(8)]\n"
        "    await hook.async_pre_call_hook(None, None, {'model': 'gpt-4o', 'messages': messages}, 'acompletion')\n"
        "    assert hook.last_results['gpt-4o'].compacted\n"
        "    (pool,) = _workers._POOLS.values()\n"
        "    print(*pool._processes, flush=True)\n"
        "    os._exit(0)  # dies without shutting the pool down\n"
        "if __name__ == '__main__':\n"
        "    asyncio.run(main())\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=240, env={**os.environ}, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    workers = [int(pid) for pid in done.stdout.split()]
    assert workers
    deadline = time.monotonic() + 30
    alive = workers
    while alive and time.monotonic() < deadline:
        time.sleep(0.5)
        alive = [pid for pid in workers if _running(pid)]
    assert not alive, f"orphaned workers still running: {alive}"


def _running(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by init) counts as gone
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return True
