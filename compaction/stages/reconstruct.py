"""Reconstruct: put the compacted conversation back together.

Order: system messages first and untouched (prompt caches compare bytes); the first user message
with the summary merged in between markers (or the summary as its own message); an
acknowledgement only where roles would otherwise not alternate; pinned messages; the tail,
unchanged. A summary block from an earlier compaction is found by its markers and extended, never
nested.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from compaction.config import CompactionConfig
from compaction.stages.protect import Partition
from compaction.transcript import Message, TextPart, derive_message_id


@dataclass(frozen=True)
class SummaryBlock:
    """What goes between the markers."""

    body: str
    compacted_messages: int
    last_request: str | None = None
    archive_span: tuple[str, str] | None = None
    """The archive ids of the first and last compacted message, named so the agent can recall them."""

    def render(self, config: CompactionConfig) -> str:
        markers = (config.summary_start_marker, config.summary_end_marker)
        parts = [config.summary_start_marker, defang_markers(self.body.strip(), markers)]
        if self.last_request:
            parts.append(f"{config.last_request_prefix}\n{defang_markers(self.last_request.strip(), markers)}")
        parts.append(
            f"({self.compacted_messages} earlier messages were compacted into this summary; {self._archived()}"
        )
        parts.append(config.summary_end_marker)
        return "\n\n".join(parts)

    def _archived(self) -> str:
        if self.archive_span is None:
            return "their originals are archived.)"
        first, last = self.archive_span
        ids = first if first == last else f"{first} to {last}"
        return f"their originals are archived ({ids}) and can be recalled by archive id or exact text.)"


def defang_markers(text: str, markers: Sequence[str]) -> str:
    """``text`` with every occurrence of the summary markers altered (``[END CONTEXT SUMMARY]`` becomes
    ``[quoted: END CONTEXT SUMMARY]``), so that quoted tool output or user text inside a summary cannot
    close the block early or open a second one."""
    for marker in markers:
        if marker and marker in text:
            text = text.replace(marker, f"{marker[:1]}quoted: {marker[1:]}")
    for marker in markers:  # pathological configured markers survive the first pass: drop them
        while marker and marker in text:
            text = text.replace(marker, "")
    return text


def split_previous_summary(message: Message, config: CompactionConfig) -> tuple[Message | None, str | None]:
    """``message`` without an earlier summary block, and that block's body. The message is None
    when the block was all it held (a summary message from an earlier compaction)."""
    start, end = config.summary_start_marker, config.summary_end_marker
    for k, part in enumerate(message.parts):
        if not isinstance(part, TextPart) or start not in part.text or end not in part.text:
            continue
        before, _, rest = part.text.partition(start)
        body, _, after = rest.partition(end)
        remaining = before.rstrip() + ("\n\n" + after.strip() if after.strip() else "")
        body = _strip_block_trailer(body, config)
        parts = list(message.parts)
        if remaining:
            parts[k] = part.model_copy(update={"text": remaining})
        else:
            del parts[k]
        if not parts:
            return None, body
        return message.with_parts(tuple(parts)), body
    return message, None


def strip_previous_summary(
    messages: Sequence[Message], config: CompactionConfig
) -> tuple[tuple[Message, ...], str | None]:
    """Messages with an earlier summary block taken out (it is extended, not nested), and its body."""
    out: list[Message] = []
    previous: str | None = None
    for message in messages:
        if previous is None and message.role in ("user", "system") and config.summary_start_marker in message.text:
            stripped, body = split_previous_summary(message, config)
            if body is not None:
                previous = body
                if stripped is not None:
                    out.append(stripped)
                continue
        out.append(message)
    return tuple(out), previous


def _strip_block_trailer(body: str, config: CompactionConfig) -> str:
    lines = body.strip().splitlines()
    if lines and lines[-1].startswith("(") and "earlier messages were compacted" in lines[-1]:
        lines = lines[:-1]
    text = "\n".join(lines).strip()
    prefix = config.last_request_prefix
    if prefix in text:  # the quoted request is re-derived each time, not carried forward
        text = text[: text.rfind(prefix)].rstrip()
    return text


def _api_role(message: Message) -> str:
    return "user" if message.role == "tool" else message.role


def _filler(role: Literal["user", "assistant"], text: str, position: int) -> Message:
    return Message(
        role=role,
        parts=(TextPart(text=text),),
        id=derive_message_id(position, role, ["compaction", text]),
        content_form="string",
    )


def reconstruct(
    messages: Sequence[Message],
    partition: Partition,
    block: SummaryBlock | None,
    config: CompactionConfig,
    *,
    alternation: bool,
    keep_adjacent_turns: bool = False,
    summary_role: Literal["user", "system"] = "user",
) -> tuple[Message, ...]:
    """The new message list. ``messages`` are the repaired originals (the first user message may
    already be stripped of an earlier summary block).

    With ``alternation`` a filler message goes wherever two messages of one role would follow each
    other; with ``keep_adjacent_turns`` too, only where compaction brought them together: turns of
    one role that already followed each other in ``messages`` stay as they are (the Anthropic API
    combines them into one turn)."""
    out: list[Message] = []
    origin: list[int | None] = []  # each output message's index in ``messages`` (None: new)
    summary_text = block.render(config) if block is not None else None
    placed = False
    for head in partition.head:
        message = messages[head]
        if summary_text and head == partition.first_user and config.summary_placement == "first_user":
            message = message.with_parts((*message.parts, TextPart(text="\n\n" + summary_text)))
            placed = True
        out.append(message)
        origin.append(head)
    rest: list[tuple[int | None, Message]] = [(i, messages[i]) for i in partition.kept_middle]
    rest += [(i, messages[i]) for i in range(partition.tail_start, len(messages))]
    if summary_text and not placed:
        role: Literal["user", "system"] = summary_role
        # First of the rest, so alternation (when required) is restored around it too.
        summary_message = Message(
            role=role,
            parts=(TextPart(text=summary_text),),
            id=derive_message_id(len(out), role, ["summary", summary_text]),
            content_form="string",
        )
        rest.insert(0, (None, summary_message))
    for index, message in rest:
        if alternation and message.role != "system":
            at = next((k for k in reversed(range(len(out))) if out[k].role != "system"), None)
            if at is None and _api_role(message) != "user":
                out.append(_filler("user", "Continue.", len(out)))
                origin.append(None)
            elif (
                at is not None
                and _api_role(out[at]) == _api_role(message)
                and not (keep_adjacent_turns and _adjacent(messages, origin[at], index))
            ):
                filler_role: Literal["user", "assistant"] = "assistant" if _api_role(message) == "user" else "user"
                text = config.acknowledgement if filler_role == "assistant" else "Continue."
                out.append(_filler(filler_role, text, len(out)))
                origin.append(None)
        out.append(message)
        origin.append(index)
    return tuple(out)


def _adjacent(messages: Sequence[Message], before: int | None, after: int | None) -> bool:
    """Whether ``messages[before]`` and ``messages[after]`` followed each other (system messages aside)."""
    if before is None or after is None or after <= before:
        return False
    return all(messages[k].role == "system" for k in range(before + 1, after))
