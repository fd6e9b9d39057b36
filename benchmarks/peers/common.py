"""What every peer run shares: the settings, the fake model's answers, and the measurements."""

from __future__ import annotations

import hashlib
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.generate import GeneratedTranscript, retention, retention_total, transcript_text
from compaction.adapters import to_canonical
from compaction.pairs import validate
from compaction.testing.fake_provider import RecordedRequest, stand_in_summary
from compaction.tokens import TiktokenCounter

MODEL = "gpt-4o"
WINDOW = 128_000
RESERVE = 20_000
BUDGET = WINDOW - RESERVE  # ours: window - reserve (max_output_tokens 0); OpenClaw compacts above it too
THRESHOLD = int(WINDOW * 0.8)  # ours: threshold 0.8 of the window
KEEP_MESSAGES = 6  # ours: keep_recent_messages
SUMMARY_TOKENS = 4_096  # ours: max_summary_tokens (the cap on the summarizer's answer)
API_KEY = "k"
OPENCLAW_MAX_OUTPUT_TOKENS = 16_384  # gpt-4o's output limit, the model entry's maxTokens


def openclaw_input(messages: Sequence[Mapping[str, Any]], base_url: str, **extra: Any) -> dict[str, Any]:
    """What the OpenClaw runners read: the peers' shared settings, the system prompt apart, and
    ``extra`` (the incremental runner's threshold)."""
    return {
        "base_url": base_url,
        "api_key": API_KEY,
        "model": MODEL,
        "context_window": WINDOW,
        "max_output_tokens": OPENCLAW_MAX_OUTPUT_TOKENS,
        "reserve_tokens": RESERVE,
        "keep_recent_messages": KEEP_MESSAGES,
        **extra,
        "system": next((m["content"] for m in messages if m["role"] == "system"), None),
        "messages": [m for m in messages if m["role"] != "system"],
    }


def responder(request: RecordedRequest) -> str:
    """The one stand-in LLM for every peer: the fake provider's deterministic summary of everything
    the request asks the model to read (all messages except system instructions), capped at the
    request's own ``max_tokens``.

    The fake's built-in default reads only the last user message, which suits prompts that put the
    transcript in one user message (ours, LangChain, OpenClaw) but would give LangMem, which sends
    the history as chat messages followed by "Create a summary of the conversation above:", an
    empty summary for a reason that has nothing to do with LangMem."""
    text = "\n".join(t for role, t in request.messages if role not in ("system", "developer"))
    return stand_in_summary(text, request.max_tokens)


@dataclass
class PeerRun:
    """One peer's compaction of one transcript: the context it would send next, as OpenAI dicts."""

    name: str
    ok: bool
    messages: list[dict[str, Any]] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


_COUNTER: TiktokenCounter | None = None


def counter() -> TiktokenCounter:
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = TiktokenCounter("o200k_base")
    return _COUNTER


def _texts(content: Any) -> tuple[str, int]:
    """Text and image count of OpenAI message content, independent of how it is laid out."""
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    texts: list[str] = []
    images = 0
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, Mapping):
            if block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            elif block.get("type") in ("image_url", "image"):
                images += 1
    return "".join(texts), images


def message_key(message: Mapping[str, Any]) -> str:
    """Identity of a message across the peers' representations (role, text, images, tool ids)."""
    role = str(message.get("role"))
    role = "system" if role == "developer" else role
    text, images = _texts(message.get("content"))
    calls = tuple(str(c.get("id")) for c in message.get("tool_calls") or ())
    raw = f"{role}\x00{text}\x00{images}\x00{calls}\x00{message.get('tool_call_id', '')}"
    return hashlib.sha1(raw.encode("utf-8", "surrogatepass")).hexdigest()


def compacted_zone(original: Sequence[Mapping[str, Any]], output: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices of the original messages that are not in the output unchanged (summarized, dropped or rewritten)."""
    available = Counter(message_key(m) for m in output)
    zone: list[int] = []
    for index, message in enumerate(original):
        key = message_key(message)
        if available[key] > 0:
            available[key] -= 1
        else:
            zone.append(index)
    return zone


def request_tokens(requests: Sequence[RecordedRequest]) -> list[int]:
    """Exact o200k tokens of what each request asks the model to read (message text and tool schemas)."""
    return [counter().count_text(r.prompt_text) for r in requests]


def measure(
    g: GeneratedTranscript, run: PeerRun, requests: Sequence[RecordedRequest], tokens_before: int
) -> dict[str, Any]:
    """The figures of one run: fit, violations, calls, tokens sent, wall time, retention."""
    row: dict[str, Any] = {
        "peer": run.name,
        "ok": run.ok,
        "error": run.error,
        "notes": list(run.notes),
        "extra": dict(run.extra),
        "tokens_before": tokens_before,
        "budget": BUDGET,
        "calls": len(requests),
    }
    sizes = request_tokens(requests)
    row["tokens_sent"] = sum(sizes)
    row["largest_request"] = max(sizes, default=0)
    row["requests_over_window"] = sum(1 for s in sizes if s > WINDOW)
    row["wall_s"] = statistics.median(run.wall_s) if run.wall_s else None
    row["wall_first_s"] = run.wall_s[0] if run.wall_s else None
    row["wall_all_s"] = list(run.wall_s)
    if not run.ok:
        return row
    try:
        transcript = to_canonical(run.messages)
    except Exception as exc:  # a peer's output we cannot even read is a finding, not a crash
        row["ok"] = False
        row["error"] = f"output not readable as OpenAI messages: {type(exc).__name__}: {exc}"
        return row
    after = counter().count_messages(transcript.messages)
    violations = validate(transcript)
    zone = compacted_zone(g.messages, run.messages)
    kept = retention(g.facts, transcript_text(run.messages), zone)
    k, t = retention_total(kept)
    row.update(
        {
            "tokens_after": after,
            "fit": after <= BUDGET,
            "violations": len(violations),
            "violation_kinds": sorted({v.kind for v in violations}),
            "messages_after": len(run.messages),
            "zone_messages": len(zone),
            "zone_facts": t,
            "zone_facts_kept": k,
            "retention": {c: list(v) for c, v in kept.items()},
        }
    )
    return row
