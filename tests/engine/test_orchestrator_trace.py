"""The orchestrator only sequences the stages: a trace of one compaction's calls enters
``compaction/pipeline.py`` from outside once (the compactor's call), calls each stage from there,
and no stage calls back into it.

The trace is ``sys.setprofile`` (and ``threading.setprofile``, for the threads a compaction uses):
every Python function call, with the file of the function called and of its caller. A coroutine
resumed after an ``await`` is the same call, not a new one (calls are told apart by their frame).
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from compaction import CompactionConfig, Compactor
from compaction.summarizers.llm import LLMSummarizer
from compaction.testing import FakeProvider

ROOT = Path(__file__).resolve().parents[2]
ORCHESTRATOR = ROOT / "compaction" / "pipeline.py"
PROJECT = str(ROOT / "compaction") + "/"


@dataclass
class Entries:
    """The calls of functions of one file, made while tracing."""

    inside: Path
    from_outside: list[str] = field(default_factory=list)
    """Calls into the file from a function of another file: ``caller file:function -> function``."""
    own: list[str] = field(default_factory=list)
    """Every call of a function of the file (from outside or from the file itself)."""
    out_of_it: list[str] = field(default_factory=list)
    """Calls the file's functions make to functions of other files, as ``file:function``."""
    _seen: set[int] = field(default_factory=set)
    _frames: list[FrameType] = field(default_factory=list)  # keeps ids unique while tracing

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or id(frame) in self._seen:
            return  # a C call, or a coroutine resumed: not a new call
        self._seen.add(id(frame))
        self._frames.append(frame)
        inside = str(self.inside)
        callee = frame.f_code.co_filename
        caller = frame.f_back
        caller_file = caller.f_code.co_filename if caller is not None else "?"
        if callee == inside:
            self.own.append(frame.f_code.co_name)
            if caller_file != inside:
                where = f"{_shown(caller_file)}:{caller.f_code.co_name if caller else '?'}"
                self.from_outside.append(f"{where} -> {frame.f_code.co_name}")
        elif caller_file == inside and callee.startswith(PROJECT):
            self.out_of_it.append(f"{Path(callee).relative_to(ROOT)}:{frame.f_code.co_name}")


def _shown(path: str) -> str:
    """A file of the project by its path from the root, any other by its name."""
    return str(Path(path).relative_to(ROOT)) if path.startswith(PROJECT) else Path(path).name


@contextmanager
def traced(inside: Path) -> Iterator[Entries]:
    entries = Entries(inside)
    threading.setprofile(entries.profile)
    sys.setprofile(entries.profile)
    try:
        yield entries
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def _transcript(n: int = 20) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(n):
        messages.append({"role": "user", "content": f"Step {i}: look at src/module_{i}.py and fix bug PAY-{i}. " * 6})
        messages.append({"role": "assistant", "content": f"Done with step {i}; tests in tests/test_{i}.py pass. " * 6})
    return messages


def _compact(compact: Callable[[], Any]) -> Entries:
    compact()  # once untraced: imports and first-call caches are not the compaction's calls
    with traced(ORCHESTRATOR) as entries:
        result = compact()
    assert result.compacted, result.reason
    return entries


def _check(entries: Entries) -> None:
    # One way in: the compactor's call; the stages return to the orchestrator, never call it.
    assert len(entries.from_outside) == 1, entries.from_outside
    assert entries.from_outside[0].startswith("compaction/compactor/"), entries.from_outside
    stages = {call.rsplit(":", 1)[0] for call in entries.out_of_it}
    assert any(name.startswith("compaction/stages/") for name in stages), stages
    # Each of the orchestrator's own functions runs once (comprehensions are part of theirs).
    own = [name for name in entries.own if not name.startswith("<")]
    assert len(own) == len(set(own)), own
    assert len(own) <= len(set(entries.out_of_it)), (own, entries.out_of_it)


def test_the_offline_path_enters_the_orchestrator_once() -> None:
    compactor = Compactor("gpt-4o", config=CompactionConfig(window=16_000))
    _check(_compact(lambda: compactor.compact(_transcript())))


def test_the_model_path_enters_the_orchestrator_once() -> None:
    with FakeProvider() as server:
        summarizer = LLMSummarizer(
            "openai/fake", api_base=server.openai_api_base, api_key="sk-fake", backoff_min=0.01, backoff_max=0.02
        )
        compactor = Compactor("gpt-4o", summarizer, CompactionConfig(window=16_000, redact_secrets=False))
        entries = _compact(lambda: asyncio.run(compactor.acompact(_transcript())))
        assert server.completion_requests, "the model summarizer was not called"
    _check(entries)


def test_the_trace_sees_a_stage_that_calls_back_into_its_orchestrator(tmp_path: Path) -> None:
    package = tmp_path / "tracepkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "orchestrator.py").write_text(
        "from tracepkg import stage\n\n"
        "def helper(x):\n    return x + 1\n\n"
        "async def run(x):\n    await stage.step(x)\n    return stage.other(x)\n"
    )
    (package / "stage.py").write_text(
        "import asyncio\n\n"
        "async def step(x):\n    await asyncio.sleep(0)\n    return x\n\n"
        "def other(x):\n    from tracepkg.orchestrator import helper\n    return helper(x)\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        orchestrator = importlib.import_module("tracepkg.orchestrator")
        with traced(package / "orchestrator.py") as entries:
            asyncio.run(orchestrator.run(1))
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("tracepkg")]:
            del sys.modules[name]
    # The awaited coroutine resumed after its sleep is one call; the callback is a second way in.
    assert [e.split(" -> ")[1] for e in entries.from_outside] == ["run", "helper"]
    assert entries.own == ["run", "helper"]
