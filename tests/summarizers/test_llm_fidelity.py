"""An LLM's summary alters no identifier: our own framing is taken out of its answer, a reply cut
at its output limit is marked as cut, and every cut the library makes falls at a token boundary
or carries an ellipsis. The end-to-end test runs LLMSummarizer through litellm against the fake
provider on 127.0.0.1 (issue 14, item 1)."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from compaction import CompactionConfig, Compactor
from compaction.budget import truncate_to_tokens
from compaction.fidelity import altered_identifiers, source_strings
from compaction.render import cut_middle, fence, fence_nonce, render_for_summarizer
from compaction.stages.summarize import FENCE_NONCE_KEY, prompt_nonces, strip_framing
from compaction.summarizers.base import SummaryRequest
from compaction.summarizers.llm import CUT_NOTE, LLMSummarizer, mark_cut_reply
from compaction.testing import FakeProvider, Reply, stand_in_summary
from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart

NONCE = "481516"


def words(text: str) -> int:
    return len(text.split())


# -- strip_framing -----------------------------------------------------------------------------


def test_strip_framing_removes_our_markers_and_nonces_only() -> None:
    text = "\n".join(
        [
            "## Identifiers",
            "- src/pkg/__init__.py",
            f"- {NONCE}",
            f"- [{NONCE} #3 error]",
            f"- [{NONCE} user]",
            f"- the output under [{NONCE} #4 bash] showed KeyError: 'user_id'",
            f"ran `make` (output `{NONCE}`): ok, commit 9f3c2ab1de kept",
            "- [999999 #2 out]",  # not ours: content quoting a marker
        ]
    )
    out = strip_framing(text, {NONCE})
    assert NONCE not in out
    assert out.splitlines() == [
        "## Identifiers",
        "- src/pkg/__init__.py",
        "- the output under showed KeyError: 'user_id'",
        "ran `make` (output): ok, commit 9f3c2ab1de kept",
        "- [999999 #2 out]",
    ]
    assert strip_framing(text, set()) == text
    assert strip_framing("no nonce here", {NONCE}) == "no nonce here"
    # a longer number or token that contains the nonce is content, not the nonce
    assert strip_framing(f"sha {NONCE}99aa, id 7{NONCE}", {NONCE}) == f"sha {NONCE}99aa, id 7{NONCE}"


def _tool_messages(result_text: str) -> list[Message]:
    return [
        Message(role="user", id="u1", parts=(TextPart(text="fix src/app/main.py"),)),
        Message(role="assistant", id="a1", parts=(ToolCallPart(id="c1", name="bash", arguments='{"cmd": "ls"}'),)),
        Message(role="tool", id="t1", parts=(ToolResultPart(call_id="c1", content=result_text),)),
    ]


def test_prompt_nonces_are_the_markers_we_rendered_minus_content() -> None:
    messages = _tool_messages("src/app/main.py\nsrc/app/__init__.py")
    history = render_for_summarizer(messages)
    nonce = history.nonce
    assert f"[{nonce} #1 bash] cmd: ls" in history.text
    request = SummaryRequest(
        system_prompt="",
        prompt=history.text,
        max_tokens=100,
        messages=tuple(messages),
        metadata={FENCE_NONCE_KEY: nonce},
    )
    assert prompt_nonces(request) == {nonce}
    # the same digits elsewhere in the prompt (an earlier summary quoting them) are content: kept
    quoted = replace(request, prompt=history.text + f"\nuser said {nonce}")
    assert prompt_nonces(quoted) == frozenset()
    # the single pass sends the agent's own messages: no markers of ours
    single = replace(request, provider_messages=({"role": "user"},))
    assert prompt_nonces(single) == frozenset()
    assert fence("x", label="l").startswith(f"<<<TOOL_OUTPUT {fence_nonce('x')} l>>>")


# -- replies cut at max_tokens ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("- src/app/main.py\n- webhooks.cursor_cod", "- src/app/main.py"),
        ("please profile webhooks.cursor_cod", "please profile..."),
        ("- src/a.py\n", "- src/a.py"),
        ("ends a sentence and ", "ends a sentence and..."),
        ("call `super().__ini", "call..."),
        ("x" * 50, "x" * 50 + "..."),
    ],
)
def test_mark_cut_reply(reply: str, expected: str) -> None:
    out = mark_cut_reply(reply)
    assert out == f"{expected}\n{CUT_NOTE}"
    source = "- src/app/main.py\n- src/a.py\nplease profile webhooks.cursor_code, call super().__init__"
    assert altered_identifiers(out, [source, "x" * 50 + "yz"]) == []


@pytest.mark.parametrize("route", ["openai", "anthropic"])
async def test_llm_summarizer_marks_a_reply_cut_at_max_tokens(route: str) -> None:
    text = "## Files\n- /repo/pydicom__pydicom/pydicom/dataset.py\n- /repo/src/storage/errors.py"
    async with FakeProvider() as server:
        server.script([Reply(text), Reply(text)])
        base = server.openai_api_base if route == "openai" else server.anthropic_api_base
        summarizer = LLMSummarizer(f"{route}/x", api_base=base, api_key="k", timeout=10.0)
        cut = await summarizer.summarize(SummaryRequest(system_prompt="", prompt="p", max_tokens=18))
        whole = await summarizer.summarize(SummaryRequest(system_prompt="", prompt="p", max_tokens=1000))
    assert len(text) > 18 * 4  # the server stopped it at the cap, mid-token, with "length"
    assert cut.text == f"## Files\n- /repo/pydicom__pydicom/pydicom/dataset.py\n{CUT_NOTE}"
    assert whole.text == text
    assert altered_identifiers(cut.text, [text]) == []


def test_stand_in_is_stopped_by_the_server_with_length() -> None:
    long_input = "\n".join(f"edited src/pkg/module_{i}/__init__.py" for i in range(200))
    body = {"model": "x", "max_tokens": 40, "messages": [{"role": "user", "content": long_input}]}
    with FakeProvider() as server:
        req = urllib.request.Request(
            server.openai_api_base + "/chat/completions",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json", "authorization": "Bearer k"},
        )
        with urllib.request.urlopen(req, timeout=10) as response:
            answer = json.loads(response.read())
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "length"
    assert len(choice["message"]["content"]) == 160
    assert stand_in_summary(long_input, None).startswith(choice["message"]["content"])
    # error lines are shortened at a word with a marked cut, never mid-token unmarked
    error = "ValueError: " + " ".join(f"bad value in src/pkg/mod_{i}.py" for i in range(20))
    quoted = [line for line in stand_in_summary(error, None).splitlines() if line.startswith("- ValueError")]
    assert quoted
    assert quoted[0].endswith("...")
    assert altered_identifiers(quoted[0], [error]) == []


# -- the library's own cuts --------------------------------------------------------------------


def test_cut_middle_cuts_at_whitespace_or_marks_the_cut() -> None:
    text = " ".join(f"/home/dev/acme/src/storage/errors_{i}.py" for i in range(400))
    out = cut_middle(text, 2_000)
    assert len(out) <= 2_000
    assert altered_identifiers(out, [text]) == []
    solid = "https://example.com/" + "a" * 5_000
    out = cut_middle(solid, 2_000)
    assert len(out) <= 2_000
    assert "\u2026\n\n[..." in out
    assert "...]\n\n\u2026" in out
    assert altered_identifiers(out, [solid]) == []


def test_truncate_to_tokens_never_cuts_a_token_unmarked() -> None:
    one_line = " ".join(f"src/storage/e{i}rrors.py" for i in range(300))
    out = truncate_to_tokens(one_line, 100, words)
    assert words(out) <= 100
    assert altered_identifiers(out, [one_line]) == []
    solid = "/repo/" + "x" * 3_000 + "/errors.py"
    out = truncate_to_tokens(solid, 100, lambda s: len(s) // 4)
    assert len(out) // 4 <= 100
    assert altered_identifiers(out, [solid]) == []


# -- end to end: LLMSummarizer through litellm and the fake provider -------------------------------

MODEL = "gpt-4o"


def _session() -> list[dict[str, Any]]:
    """OpenAI messages full of paths, dunders, **kwargs and hashes, with long tool outputs."""
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Fix super().__init__(**kwargs) in /repo/pydicom__pydicom/pydicom/dataset.py."},
    ]
    for t in range(24):
        call_id = f"call_{t:03d}"
        path = f"/repo/marshmallow-code__marshmallow/src/pkg_{t}/__init__.py"
        listing = "\n".join(
            f"{path}:{n}: def __{kind}__(self, **kwargs): a__b_{t}_{n} = MAX_SIZE_{n} # {t:02d}{n:02d}ab3f9c"
            for n, kind in enumerate(["init", "repr", "eq", "hash"] * 12)
        )
        if t % 5 == 2:
            listing += f"\nTraceback (most recent call last):\nKeyError: 'user_id' in {path} at webhooks.cursor_code"
        out.append(
            {
                "role": "assistant",
                "content": f"Reading {path}.",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"cmd": f"cat {path}"})},
                    }
                ],
            }
        )
        out.append({"role": "tool", "tool_call_id": call_id, "content": listing})
        out.append(
            {"role": "assistant", "content": f"Patched {path}; see https://example.com/issues/{1000 + t}/detail."}
        )
        out.append({"role": "user", "content": f"Good, continue with pkg_{t + 1}/__init__.py."})
    return out


@pytest.fixture
async def server() -> AsyncIterator[FakeProvider]:
    async with FakeProvider() as s:
        yield s


@pytest.mark.parametrize("max_summary_tokens", [4_096, 300], ids=["whole", "cut-at-max-tokens"])
async def test_llm_summary_alters_no_identifier(server: FakeProvider, max_summary_tokens: int) -> None:
    summarizer = LLMSummarizer("openai/stand-in", api_base=server.openai_api_base, api_key="k", timeout=30.0)
    config = CompactionConfig(window=16_000, max_summary_tokens=max_summary_tokens)
    compactor = Compactor(MODEL, summarizer, config)
    messages = _session()
    result = await compactor.acompact(messages)
    assert result.compacted
    calls = result.record.get("calls", [])
    prompts = "\n".join(c.get("prompt") or "" for c in calls)
    assert re.search(r"^\[\d{6,} #\d+ ", prompts, re.M)  # the model saw our block markers ...
    nonces = {n for c in calls for n in _prompt_fence_nonces(c.get("prompt") or "")}
    assert nonces
    if max_summary_tokens == 300:  # the stand-in fits its sections to the cap, as the prompt asks
        assert all(len(c.get("summary") or "") <= 300 * 4 + len(CUT_NOTE) + 8 for c in calls)
    summary = result.summary or ""
    assert summary
    assert not any(n in summary for n in nonces)
    sources = [*source_strings(list(result.archive.values())), *result.archive]
    assert altered_identifiers(summary, sources) == []


def _prompt_fence_nonces(prompt: str) -> list[str]:
    return re.findall(r"^\[(\d{6,}) ", prompt, re.M)
