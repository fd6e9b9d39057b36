"""Prepared state: a summary of the context's oldest messages made ahead of the threshold.

A :class:`PreparedState` says "the first ``covered`` messages of the context can be replaced by
``head``" (the summary block message(s) the compactor wrote for them, with whatever it keeps in
front such as the first user message). It is only valid for the exact messages it was made from:
:func:`prefix_key` hashes them together with the system prompt, the model and the window, and the
state is used only when the key of the current context's first ``covered`` messages is the same.
Any edit, removal, new system prompt, model or window change therefore discards it.

In store mode the state is also described by store ids (``base_through_id``: the stored summary
it extends; ``through_id``: the last stored message it covers), so another process can adopt it
after a restart; it is saved with a compare-and-swap on a version number
(:class:`compaction.store.PreparedStateStore`).

>>> key = prefix_key([{"role": "user", "content": "hi"}], "be brief", "gpt-4o", 128_000)
>>> key == prefix_key([{"role": "user", "content": "hi"}], "be brief", "gpt-4o", 128_000)
True
>>> key == prefix_key([{"role": "user", "content": "hi!"}], "be brief", "gpt-4o", 128_000)
False
>>> verbatim_tail([{"n": 1}, {"n": 2}, {"n": 3}], [{"s": 0}, {"n": 2}, {"n": 3}], limit=5)
2
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compaction.result import CompactionResult

__all__ = ["PrepareSettings", "PreparedState", "PreparedUsage", "prefix_key", "verbatim_tail"]


@dataclass(frozen=True)
class PrepareSettings:
    """When the context manager prepares summaries in the background.

    ``mark``: start once the context passes this fraction of the compaction trigger (the guard's
    threshold in tokens). ``step``: after the first job, start another only when at least this
    fraction of the trigger has aged out of the protected tail since the last one (each job sends
    the previous summary again, so small steps cost more tokens). ``accept``: at the threshold the
    prepared summary is swapped in with no model call when the context it gives stays under this
    fraction of the trigger (after waiting for a job in flight: under halfway from it to the
    trigger); above it, one call summarizes what aged out since.
    ``enabled=False`` is the off switch."""

    enabled: bool = True
    mark: float = 0.65
    step: float = 0.25
    accept: float = 0.8

    def __post_init__(self) -> None:
        for name in ("mark", "step", "accept"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"PrepareSettings.{name} must be within (0, 1], got {value}")


@dataclass
class PreparedUsage:
    """Summarizer spending of background jobs (all of it, adopted or thrown away)."""

    jobs: int = 0
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    discarded: int = 0
    """Prepared states thrown away (stale, lost a race, cancelled)."""

    def add(self, result: CompactionResult) -> None:
        self.jobs += 1
        self.calls += result.llm_calls
        self.input_tokens += result.summarizer_input_tokens
        self.output_tokens += result.summarizer_output_tokens

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, int]:
        return {
            "jobs": self.jobs,
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "discarded": self.discarded,
        }


@dataclass
class PreparedState:
    """The first ``covered`` context messages, summarized: replace them by ``head``."""

    key: str
    covered: int
    head: list[dict[str, Any]]
    system: Any
    result: CompactionResult
    """The background compaction that made (the latest increment of) this state."""
    archive: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Every original the increments took out of context, by archive id."""
    messages_removed: int = 0
    through_id: int | None = None
    base_through_id: int | None = None
    summary: str | None = None
    """Store mode: the summary text between the markers (what the store saves)."""
    version: int | None = None
    """Store mode: the version of the persisted copy (compare-and-swap)."""
    completes: bool = False
    """Made by a job that was in flight when the state it extends was swapped in at the threshold:
    it finishes that compaction, so it is swapped in as soon as it lands (no call)."""

    def to_json(self) -> dict[str, Any]:
        """What the store persists (store mode: enough to rebuild the state in another process)."""
        return {
            "key": self.key,
            "covered": self.covered,
            "summary": self.summary,
            "through_id": self.through_id,
            "base_through_id": self.base_through_id,
            "messages_removed": self.messages_removed,
            "archive": self.archive,
            # Not the whole record: its prompts hold the summarized messages again (they are stored).
            "record": {
                "fallback_level": self.result.fallback_level,
                **{k: self.result.record[k] for k in ("outcome", "partition") if k in self.result.record},
            },
        }


def _stable(value: Any) -> Any:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)


def prefix_key(messages: Sequence[Mapping[str, Any]], system: Any, model: str, window: int) -> str:
    """A digest of ``messages`` (in order), the system prompt, the model and its window."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(_stable([model, window, system]).encode("utf-8", "replace"))
    for message in messages:
        digest.update(b"\x1e")
        digest.update(_stable(message).encode("utf-8", "replace"))
    return digest.hexdigest()


def verbatim_tail(original: Sequence[Mapping[str, Any]], compacted: Sequence[Mapping[str, Any]], *, limit: int) -> int:
    """How many trailing messages of ``compacted`` are ``original``'s last ones unchanged (at most
    ``limit``): the compaction kept them verbatim, everything before them it replaced."""
    kept = 0
    while (
        kept < limit
        and kept < len(original)
        and kept < len(compacted)
        and dict(original[-1 - kept]) == dict(compacted[-1 - kept])
    ):
        kept += 1
    return kept
