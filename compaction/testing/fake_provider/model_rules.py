"""The real APIs' rules for particular models: which reason before answering, which parameters
they reject.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from compaction.testing.fake_provider.recorded import RecordedRequest

# Models that reason before answering on every request, as the real APIs treat them.
OPENAI_REASONING = re.compile(r"^(?:o\d+(?:-mini|-pro|-preview)?|gpt-5(?!-chat)[\w.-]*)$")
GEMINI_THINKING = re.compile(r"^gemini-(?:2\.5|3)")


def rejected_params(rec: RecordedRequest) -> tuple[str, str] | None:
    """The (message, code) of the 400 a real API answers to parameters the model does not take:
    OpenAI reasoning models reject a temperature other than 1 and ``max_tokens``; Anthropic with
    extended thinking rejects a temperature other than 1 and a ``max_tokens`` not above the
    thinking budget."""
    body = rec.body
    temperature = body.get("temperature")
    if rec.route == "openai" and OPENAI_REASONING.match(rec.model):
        if temperature is not None and temperature != 1:
            return (
                f"Unsupported value: 'temperature' does not support {temperature} with this model. "
                "Only the default (1) value is supported.",
                "unsupported_value",
            )
        if "max_tokens" in body:
            return (
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "unsupported_parameter",
            )
    if rec.route == "anthropic":
        thinking = body.get("thinking")
        if isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
            if temperature is not None and temperature != 1:
                return ("`temperature` may only be set to 1 when thinking is enabled.", "invalid_request_error")
            budget = int(thinking.get("budget_tokens") or 0)
            if rec.max_tokens <= budget:
                return ("`max_tokens` must be greater than `thinking.budget_tokens`.", "invalid_request_error")
    return None


def reasoning_spent(rec: RecordedRequest, reasoning_tokens: int | None) -> int:
    """Output tokens a request's model spends reasoning before it answers, within its cap:
    OpenAI o-series and gpt-5 and Gemini 2.5+ (up to ``thinkingBudget``) spend half the cap,
    Anthropic with ``thinking`` enabled its whole ``budget_tokens``; ``reasoning_tokens``, when
    set, replaces those amounts. Never the whole cap."""
    half = rec.max_tokens // 2
    spent = 0
    if rec.route == "openai" and OPENAI_REASONING.match(rec.model):
        spent = half
    elif rec.route == "anthropic":
        thinking = rec.body.get("thinking")
        if isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
            spent = int(thinking.get("budget_tokens") or 0)
    elif rec.route == "gemini" and GEMINI_THINKING.match(rec.model):
        config = rec.body.get("generationConfig") or {}
        limit = (config.get("thinkingConfig") or {}).get("thinkingBudget")
        spent = half if not isinstance(limit, int) else min(limit, half)
    if not spent:
        return 0
    if reasoning_tokens is not None:
        spent = reasoning_tokens
    return max(0, min(spent, rec.max_tokens - 1))
