"""The token counts an overflow error states: requested, allowed and the excess, in each known
provider's wording (or llama.cpp's ``n_prompt_tokens`` / ``n_ctx`` fields)."""

from __future__ import annotations

import re

from guards._error_evidence import Evidence, rx

_NUM = r"\d[\d,]*"
# Each pattern names its groups: requested, allowed, input + output (summed), excess.
_COUNT_PATTERNS: tuple[re.Pattern[str], ...] = (
    rx(
        rf"input length and `?max_tokens`? exceed context limit:?\s*(?P<input>{_NUM})\s*\+\s*"
        rf"(?P<output>{_NUM})\s*>\s*(?P<allowed>{_NUM})"
    ),
    rx(rf"prompt is too long:?\s*(?P<requested>{_NUM})\s*tokens?\s*>\s*(?P<allowed>{_NUM})"),
    rx(
        rf"configured limit of (?P<allowed>{_NUM}) tokens?\.?\s*your messages resulted in "
        rf"(?P<requested>{_NUM})"
    ),
    rx(
        rf"you passed (?P<input>{_NUM}) input tokens and requested (?P<output>{_NUM}) output tokens"
        rf"[^0-9]{{0,80}}context length is only (?P<allowed>{_NUM})"
    ),
    rx(
        rf"maximum context length is (?P<allowed>{_NUM}) tokens?"
        rf"(?:[^0-9]{{0,80}}?(?:resulted in|requested(?: about)?|request has|contains) (?P<requested>{_NUM}))?"
    ),
    rx(
        rf"input token count\s*\(?(?P<requested>{_NUM})?\)?\s*exceeds the maximum number of tokens allowed"
        rf"(?:\s*\(?(?P<allowed>{_NUM})\)?)?"
    ),
    rx(
        rf"prompt contains (?P<input>{_NUM}) tokens(?: and (?P<output>{_NUM}) draft tokens)?,?\s*"
        rf"too large for model with (?P<allowed>{_NUM}) maximum context length"
    ),
    rx(rf"exceeded (?:max )?context length by (?P<excess>{_NUM}) tokens?"),
    rx(
        rf"size limit exceeded by (?P<excess>{_NUM}) tokens?"
        rf"(?:[^0-9]{{0,80}}?limit for this model is (?P<allowed>{_NUM}) tokens?)?"
    ),
    rx(rf"total number of tokens[^.]{{0,40}} cannot exceed (?P<allowed>{_NUM}) - received (?P<requested>{_NUM})"),
    rx(
        rf"`?inputs`? tokens \+ `?max_new_tokens`? must be <= (?P<allowed>{_NUM})\.?\s*Given:\s*(?P<input>{_NUM}) "
        rf"`?inputs`? tokens and (?P<output>{_NUM}) `?max_new_tokens`?"
    ),
    rx(rf"input prompt \((?P<requested>{_NUM}) tokens\) is too long and exceeds limit of (?P<allowed>{_NUM})"),
    rx(
        rf"decoder prompt \(length (?P<requested>{_NUM})\) is longer than the maximum model length of "
        rf"(?P<allowed>{_NUM})"
    ),
    rx(
        rf"\(total length (?P<requested>{_NUM})\) is too long to fit into the model "
        rf"\(context length (?P<allowed>{_NUM})\)"
    ),
    rx(
        rf"input \((?P<requested>{_NUM}) tokens\) is longer than the model'?s context length "
        rf"\((?P<allowed>{_NUM}) tokens\)"
    ),
    rx(
        rf"request \((?P<requested>{_NUM}) tokens\) exceeds the available context size "
        rf"\((?P<allowed>{_NUM}) tokens\)"
    ),
    rx(rf"maximum prompt length is (?P<allowed>{_NUM}) but the request contains (?P<requested>{_NUM})"),
    rx(rf"token limit:?\s*(?P<allowed>{_NUM})\s*\(requested:?\s*(?P<requested>{_NUM})\)"),
    rx(rf"prompt token count of (?P<requested>{_NUM}) exceeds the limit of (?P<allowed>{_NUM})"),
    rx(rf"context length of only (?P<allowed>{_NUM}) tokens"),
)


def _int(text: str | None) -> int | None:
    return None if text is None else int(text.replace(",", ""))


def token_counts(ev: Evidence) -> tuple[int | None, int | None, int | None]:
    requested = allowed = excess = None
    joined = "\n".join(ev.texts)
    for pattern in _COUNT_PATTERNS:
        match = pattern.search(joined)
        if match is None:
            continue
        groups = match.groupdict()
        allowed = _int(groups.get("allowed"))
        excess = _int(groups.get("excess"))
        requested = _int(groups.get("requested"))
        if groups.get("input") is not None:
            # the provider counts the output reservation (or draft tokens) against the window too
            requested = (_int(groups["input"]) or 0) + (_int(groups.get("output")) or 0)
        break
    if requested is None and "n_prompt_tokens" in ev.numbers:
        requested = ev.numbers["n_prompt_tokens"]
    if allowed is None and "n_ctx" in ev.numbers:
        allowed = ev.numbers["n_ctx"]
    if excess is None and requested is not None and allowed is not None and requested > allowed:
        excess = requested - allowed
    if requested is None and allowed is not None and excess is not None:
        requested = allowed + excess  # "exceeded by N tokens. The limit ... is M tokens"
    return requested, allowed, excess
