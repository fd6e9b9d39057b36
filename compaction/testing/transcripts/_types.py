"""The generator's public types: scenarios, formats, phrasings, categories, a planted fact and a generated session."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import Any, Literal

Scenario = Literal["coding", "job_search", "research", "mixed"]
Format = Literal["openai", "anthropic"]
Phrasing = Literal["templated", "paraphrased"]

SCENARIOS: tuple[str, ...] = ("coding", "job_search", "research", "mixed")
FORMATS: tuple[str, ...] = ("openai", "anthropic")
PHRASINGS: tuple[str, ...] = ("templated", "paraphrased")
CATEGORIES: tuple[str, ...] = (
    "path",
    "url",
    "identifier",
    "error",
    "number",
    "command",
    "decision",
    "constraint",
    "next_step",
)
MIN_MESSAGES = 10
MAX_MESSAGES = 200_000


@dataclass(frozen=True)
class PlantedFact:
    """A fact with ground truth: ``value`` appears verbatim in ``messages[message_index]``.

    ``detail`` is the decision's reason for ``category == "decision"``, the measured quantity for
    numbers, the kind of identifier for identifiers (``commit``, ``ticket``...), else empty."""

    category: str
    value: str
    message_index: int
    detail: str = ""


@dataclass
class GeneratedTranscript:
    """A generated session. ``messages`` are in ``format``; ``system`` is set for Anthropic only
    (OpenAI sessions carry their system prompt as ``messages[0]``)."""

    messages: list[dict[str, Any]]
    system: str | None
    facts: list[PlantedFact]
    format: Format
    scenario: str = "coding"
    seed: int = 0
    tool_heavy: bool = False
    phrasing: str = "templated"

    def payload(self) -> list[dict[str, Any]] | dict[str, Any]:
        """What the CLI writes: the message list (OpenAI) or ``{system, messages}`` (Anthropic)."""
        if self.format == "anthropic":
            return {"system": self.system, "messages": self.messages}
        return self.messages

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.payload(), ensure_ascii=False, indent=indent)

    def facts_json(self) -> list[dict[str, Any]]:
        return [asdict(f) for f in self.facts]

    def facts_in(self, indices: Collection[int]) -> list[PlantedFact]:
        wanted = set(indices)
        return [f for f in self.facts if f.message_index in wanted]
