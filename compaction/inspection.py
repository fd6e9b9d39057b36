"""Inspect a transcript: where the tokens are, whether the pairs are valid, and what a compaction
would do and cost - without calling any model (the CLI's ``inspect`` and ``compact --dry-run``)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from compaction.compactor import run_sync
from compaction.pairs import validate
from compaction.pipeline import prepare
from compaction.transcript import ToolResultPart, Transcript
from guards import lookup_litellm_model_info

if TYPE_CHECKING:
    from compaction.compactor import Compactor


def inspect_transcript(compactor: Compactor, transcript: Transcript, *, budget: int | None = None) -> dict[str, Any]:
    """A JSON-serializable report. Never calls a model."""
    counter = compactor.counter
    messages = transcript.messages
    counts = [counter.count_message(m) for m in messages]
    total = counter.count_messages(messages)
    by_role: Counter[str] = Counter()
    by_tool: Counter[str] = Counter()
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    for message, tokens in zip(messages, counts, strict=True):
        by_role[message.role] += tokens
        for result in message.tool_results:
            by_tool[names.get(result.call_id, "(unknown call)")] += tokens // max(1, len(message.tool_results))
    largest = sorted(range(len(messages)), key=lambda i: (-counts[i], i))[:5]
    decision = compactor.decide(total)
    report: dict[str, Any] = {
        "format": transcript.format,
        "messages": len(messages),
        "tokens": total,
        "counter": getattr(counter, "name", type(counter).__name__),
        "exact": counter.exact,
        "window": compactor.guard.window,
        "budget": budget or compactor.guard.budget,
        "decision": {"action": decision.action, "reason": decision.reason},
        "tokens_by_role": dict(by_role.most_common()),
        "tokens_by_tool": dict(by_tool.most_common()),
        "largest_messages": [
            {
                "index": i,
                "id": messages[i].id,
                "role": messages[i].role,
                "tokens": counts[i],
                "preview": _preview(messages[i]),
            }
            for i in largest
        ],
        "pair_violations": [
            {"kind": v.kind, "index": v.index, "call_id": v.call_id, "detail": v.detail}
            # The turn rules compaction applies: strict alternation only with ensure_alternation=True.
            for v in validate(transcript, require_alternation=compactor.config.ensure_alternation)
        ],
        "plan": run_sync(_plan(compactor, transcript, budget)),
    }
    return report


async def _plan(compactor: Compactor, transcript: Transcript, budget: int | None) -> dict[str, Any]:
    run = compactor.plan_run(transcript, budget=budget)
    try:
        prepared = await prepare(run)
    except Exception as exc:  # a plan that cannot fit is itself the answer
        return {"possible": False, "error": str(exc)}
    zone_tokens = sum(compactor.counter.count_message(m) for m in prepared.zone)
    if prepared.plan is None:
        return {
            "possible": True,
            "compacts": False,
            "reason": "not enough messages to compact",
            "zone_messages": len(prepared.zone),
        }
    sent = sum(compactor.counter.count_message(m) for m in prepared.summarizer_input)
    chunks = len(prepared.plan.spans)
    calls = 1 if chunks <= 1 else chunks + 1
    kept = prepared.tokens_before - zone_tokens
    summary_tokens = prepared.config.max_summary_tokens
    model = getattr(compactor.summarizer, "model", None)
    cost = _cost(model, sent + calls * 600, calls * summary_tokens // 2) if isinstance(model, str) else 0.0
    return {
        "possible": True,
        "compacts": True,
        "zone_messages": len(prepared.zone),
        "zone_tokens": zone_tokens,
        "kept_messages": len(prepared.messages) - len(prepared.zone),
        "kept_tokens": kept,
        "summarizer_input_tokens": sent,
        "summarizer_input_share": round(sent / zone_tokens, 3) if zone_tokens else 0.0,
        "chunks": chunks,
        "model_calls": calls if model != "extractive" else 0,
        "estimated_tokens_after": kept + summary_tokens,
        "estimated_cost_usd": cost,
        "layout_rounds": run.record.get("layout_rounds", []),
    }


def _cost(model: str, input_tokens: int, output_tokens: int) -> float | None:
    info = lookup_litellm_model_info(model)
    if not info:
        return None
    return (
        float(info.get("input_cost_per_token", 0.0)) * input_tokens
        + float(info.get("output_cost_per_token", 0.0)) * output_tokens
    )


def _preview(message: Any) -> str:
    text = message.text or ", ".join(f"{type(p).__name__}" for p in message.parts)
    if not text and message.parts and isinstance(message.parts[0], ToolResultPart):
        text = message.parts[0].text
    text = " ".join(text.split())
    return text[:100] + ("..." if len(text) > 100 else "")


def render_inspection(report: dict[str, Any]) -> str:
    lines = [
        f"{report['messages']} messages ({report['format']} format), {report['tokens']:,} tokens "
        f"({'exact, ' if report['exact'] else 'estimated, '}{report['counter']})",
        f"window {report['window']:,}, budget {report['budget']:,}: "
        f"{report['decision']['action']} - {report['decision']['reason']}",
        "",
        "Tokens by role:",
        *[f"  {role:<10} {tokens:>10,}" for role, tokens in report["tokens_by_role"].items()],
    ]
    if report["tokens_by_tool"]:
        lines += [
            "",
            "Tokens by tool (results):",
            *[f"  {t:<24} {n:>10,}" for t, n in report["tokens_by_tool"].items()],
        ]
    lines += ["", "Largest messages:"]
    lines += [
        f"  #{m['index']:<5} {m['role']:<9} {m['tokens']:>9,}  {m['preview']}" for m in report["largest_messages"]
    ]
    violations = report["pair_violations"]
    lines += [
        "",
        f"Tool pairs: {'valid' if not violations else f'{len(violations)} problems (repaired before compaction)'}",
    ]
    lines += [f"  message {v['index']}: {v['kind']} ({v['call_id']}): {v['detail']}" for v in violations[:10]]
    plan = report["plan"]
    lines += ["", "Compaction plan (dry run, no model call):"]
    if not plan.get("possible", True):
        lines.append(f"  impossible: {plan['error']}")
    elif not plan.get("compacts"):
        lines.append(f"  nothing to do: {plan['reason']}")
    else:
        cost = plan["estimated_cost_usd"]
        lines += [
            f"  compact {plan['zone_messages']} messages ({plan['zone_tokens']:,} tokens); "
            f"keep {plan['kept_messages']} ({plan['kept_tokens']:,} tokens)",
            f"  summarizer input {plan['summarizer_input_tokens']:,} tokens "
            f"({plan['summarizer_input_share']:.0%} of the zone) in {plan['chunks']} chunk(s), "
            f"{plan['model_calls']} model call(s)" + (f", about ${cost:.4f}" if cost else ""),
            f"  about {plan['estimated_tokens_after']:,} tokens after",
        ]
    return "\n".join(lines)
