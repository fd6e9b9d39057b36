"""Metrics helpers: the text of messages, and which planted facts a compacted text kept."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from compaction.testing.transcripts._types import CATEGORIES, PlantedFact


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        kind = value.get("type")
        for key, item in value.items():
            if kind == "base64" and key == "data":
                continue  # image bytes
            if key == "url" and isinstance(item, str) and item.startswith("data:"):
                continue
            if key == "arguments" and isinstance(item, str):
                with contextlib.suppress(ValueError):
                    _strings(json.loads(item), out)
            _strings(item, out)
    elif isinstance(value, list | tuple):
        for item in value:
            _strings(item, out)


def text_strings(value: Any) -> list[str]:
    """Every string of a provider-format value (a message, a list of them, a system prompt), tool
    arguments decoded, image payloads left out: what :func:`message_text` joins."""
    out: list[str] = []
    _strings(value, out)
    return out


def message_text(message: Mapping[str, Any]) -> str:
    """Every string of a provider-format message (text, tool arguments decoded, tool results),
    without image payloads: what a verbatim fact check looks in."""
    out: list[str] = []
    _strings(message, out)
    return "\n".join(out)


def transcript_text(messages: Sequence[Mapping[str, Any]], system: Any = None) -> str:
    """:func:`message_text` of every message (and the Anthropic system prompt)."""
    out: list[str] = []
    if system is not None:
        _strings(system, out)
    for message in messages:
        _strings(message, out)
    return "\n".join(out)


def retention(
    facts: Sequence[PlantedFact], text: str, zone: Collection[int] | None = None
) -> dict[str, tuple[int, int]]:
    """Per category, ``(kept, total)``: how many planted facts appear verbatim in ``text``.

    Only facts whose ``message_index`` is in ``zone`` (the compacted messages' indices) count;
    ``zone=None`` counts every fact."""
    wanted = set(zone) if zone is not None else None
    counts: dict[str, list[int]] = {}
    for fact in facts:
        if wanted is not None and fact.message_index not in wanted:
            continue
        slot = counts.setdefault(fact.category, [0, 0])
        slot[0] += fact.value in text
        slot[1] += 1
    return {c: (counts[c][0], counts[c][1]) for c in CATEGORIES if c in counts}


def retention_total(result: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
    """Sum of a :func:`retention` result over all categories."""
    return sum(k for k, _ in result.values()), sum(t for _, t in result.values())
