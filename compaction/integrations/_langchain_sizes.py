"""LangChain's ``trigger`` and ``keep`` (as ``SummarizationMiddleware`` spells them): checked, and
turned into the engine's configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain.agents.middleware.summarization import ContextSize

from compaction.budget import block_cap
from compaction.config import CompactionConfig

_KINDS = ("tokens", "messages", "fraction")


# --- trigger and keep, as SummarizationMiddleware spells them ---
def check_size(size: Any, name: str) -> tuple[str, float]:
    if not isinstance(size, tuple) or len(size) != 2:
        raise ValueError(f"{name} must be a (kind, value) tuple such as ('tokens', 3000), got {size!r}")
    kind, value = size
    if kind not in _KINDS:
        raise ValueError(f"Unsupported context size type {kind!r} for {name} (expected tokens, messages or fraction)")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} value must be numeric, got {value!r}")
    if kind == "fraction" and not 0 < value <= 1:
        raise ValueError(f"Fractional {name} values must be between 0 and 1, got {value}.")
    if kind != "fraction" and (not isinstance(value, int) or value <= 0):
        raise ValueError(f"{name} {kind} must be a positive integer, got {value!r}")
    return str(kind), float(value)


def normalize_trigger(trigger: Any) -> list[dict[str, float]] | None:
    """OR over clauses, AND within one; None when no trigger was given."""
    if trigger is None:
        return None
    items = trigger if isinstance(trigger, list) else [trigger]
    clauses: list[dict[str, float]] = []
    for item in items:
        if isinstance(item, tuple):
            kind, value = check_size(item, "trigger")
            clauses.append({kind: value})
        elif isinstance(item, Mapping):
            if not item:
                raise ValueError("trigger clause must specify at least one of 'tokens', 'messages', 'fraction'")
            clauses.append(dict(check_size((k, v), "trigger") for k, v in item.items()))
        else:
            raise TypeError(f"Unsupported trigger item type: {type(item).__name__}")
    return clauses


def clause_met(clause: Mapping[str, float], tokens: int, count: int, window: int) -> bool:
    for kind, value in clause.items():
        if kind == "messages" and count < value:
            return False
        if kind == "tokens" and tokens < value:
            return False
        if kind == "fraction" and tokens < max(1, int(window * value)):
            return False
    return True


def smallest_token_trigger(clauses: list[dict[str, float]] | None, window: int) -> int | None:
    values = [
        int(v) if k == "tokens" else max(1, int(window * v))
        for clause in clauses or ()
        for k, v in clause.items()
        if k in ("tokens", "fraction")
    ]
    return min(values) if values else None


def smallest_message_trigger(clauses: list[dict[str, float]] | None) -> int:
    values = [int(v) for clause in clauses or () for k, v in clause.items() if k == "messages"]
    return min(values) if values else 0


def derive_config(
    base: CompactionConfig,
    window: int,
    clauses: list[dict[str, float]] | None,
    keep: ContextSize | None,
    summary_prompt: str | None,
) -> CompactionConfig:
    """The engine's config for LangChain's trigger/keep; fields ``base`` sets explicitly win."""
    explicit = base.explicit_fields()
    update: dict[str, Any] = {"window": window}
    if "summary_placement" not in explicit:
        update["summary_placement"] = "message"  # one HumanMessage, as SummarizationMiddleware adds
    if keep is not None:
        kind, value = keep
        if kind == "messages":
            update["keep_recent_messages"] = int(value)
        else:
            update["keep_recent_tokens"] = int(value) if kind == "tokens" else max(1, int(window * value))
    reference = smallest_token_trigger(clauses, window)
    if reference is not None:
        if "summary_block_max_tokens" not in explicit:
            update["summary_block_max_tokens"] = max(256, min(block_cap(base, window), reference // 4))
        if "keep_recent_share" not in explicit:
            update["keep_recent_share"] = min(base.keep_recent_share, max(1, reference // 2) / window)
    if summary_prompt is not None:
        update["summary_prompt"] = summary_prompt.replace("{messages}", "(the conversation follows)")
    return base.model_copy(update=update)
