"""Pruning tool results: the cheapest compaction, no model call.

Tool output is most of a long agent transcript and the part least worth keeping whole. Two steps,
after OpenClaw's context pruning: a soft trim keeps the head and tail of every long result (plus,
unlike a blind cut, the lines of the middle that carry errors, paths, URLs or ids), then a hard
clear replaces the oldest results with a placeholder while tool results still take more than a
share of the window. A cleared result keeps its measurement lines (``p95 latency: 230 ms``, ``Ran
120 tests in 3.4s``) verbatim under the placeholder, a few lines within a small budget: measured
values are the facts a summary cannot rebuild from the archive id alone. Results in the most
recent assistant turns are never cleared, tool calls and user/assistant text are never touched,
and every result keeps its call id so pairs stay valid.

:func:`prepare_for_summarizer` builds what a summarizer sees: no image payloads, no tool
metadata, no reasoning scratchpad, optionally only a preview of each result. A model summarizer
reads the results cut to a shared room instead (:mod:`compaction.stages.fit`).

>>> from compaction.transcript import Message, ToolResultPart
>>> msg = Message(role="tool", id="t1", parts=(ToolResultPart(call_id="c1", content="x" * 5000),))
>>> out = prune_tool_results([msg], settings=PruneSettings(), window_tokens=100_000, count=lambda m: len(m.text) // 4)
>>> out.items[0].action, out.chars_before
('trimmed', 5000)
>>> out.messages[0].parts[0].text.splitlines()[1]
'[... 2,000 of 5,000 characters cut here; the full output is archived as t1 ...]'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from functools import partial
from typing import Literal

from compaction._cache import memoize_text
from compaction.patterns import head_cut, important_lines, measurement_lines, tail_cut
from compaction.render import CLEARED_PREFIX
from compaction.transcript import ImagePart, Message, Part, ReasoningPart, TextPart, ToolResultPart, UnknownPart

__all__ = [
    "CLEARED_PREFIX",
    "PruneOutcome",
    "PruneSettings",
    "PrunedItem",
    "prepare_for_summarizer",
    "prune_tool_results",
    "trim_middle",
]
# Recognizes our own trim note, so pruning twice never cuts an already-trimmed result again.
_TRIM_NOTE = re.compile(r"\n\[\.\.\. [\d,]+ of [\d,]+ characters cut here;")
_MEASURE_SCAN_CHARS = 200_000  # characters of a cut or cleared result searched for measurement lines


@dataclass(frozen=True)
class PruneSettings:
    """Pruning limits. ``preview=(first, last)`` makes :func:`prepare_for_summarizer` show the
    summarizer only that many leading and trailing characters of each tool result. A cleared result,
    and the cut middle of a trimmed one, keep up to ``cleared_measurement_lines`` measurement lines,
    ``cleared_measurement_chars`` characters in all (0 keeps none)."""

    soft_trim_chars: int = 4000
    head_chars: int = 1500
    tail_chars: int = 1500
    max_kept_middle_lines: int = 40
    kept_line_chars: int = 300
    hard_clear_share: float = 0.5
    protect_last_assistant_turns: int = 3
    preview: tuple[int, int] | None = None
    cleared_measurement_lines: int = 5
    cleared_measurement_chars: int = 400

    def __post_init__(self) -> None:
        sizes = (
            self.soft_trim_chars,
            self.head_chars,
            self.tail_chars,
            self.max_kept_middle_lines,
            self.kept_line_chars,
            self.protect_last_assistant_turns,
            self.cleared_measurement_lines,
            self.cleared_measurement_chars,
            *(self.preview or ()),
        )
        if any(n < 0 for n in sizes):
            raise ValueError("prune sizes must not be negative")
        if not 0 < self.hard_clear_share <= 1:
            raise ValueError("hard_clear_share must be in (0, 1]")

    def __hash__(self) -> int:
        # The settings are part of every memo key of a run (tens of thousands of lookups): the
        # fields are hashed once. Equal settings have equal fields, so equal hashes.
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(tuple(getattr(self, f.name) for f in fields(self)))
            object.__setattr__(self, "_hash", cached)
        return cached


@dataclass(frozen=True)
class PrunedItem:
    """One tool result that was trimmed or cleared, with its sizes in characters."""

    message_id: str
    call_id: str
    action: Literal["trimmed", "cleared"]
    original_chars: int
    kept_chars: int


@dataclass(frozen=True)
class PruneOutcome:
    """The pruned messages (unchanged ones are the same objects) and what was done."""

    messages: tuple[Message, ...]
    items: tuple[PrunedItem, ...]
    chars_before: int
    chars_after: int


@memoize_text
def trim_middle(
    text: str,
    *,
    head: int,
    tail: int,
    archive_id: str,
    max_lines: int = 40,
    line_chars: int = 300,
    measurements: tuple[int, int] = (0, 0),
) -> str | None:
    """``text`` cut to its first ``head`` and last ``tail`` characters, with the important lines of
    the cut middle (errors, paths, URLs, ids) and a note in between; None when that is not shorter.
    ``measurements=(lines, chars)`` also keeps that many measurement lines of the middle (within
    ``chars`` characters), as a cleared result does.

    >>> body = "a" * 100 + "\\nTraceback (most recent call last):\\n" + "b" * 100
    >>> lines = trim_middle(body, head=5, tail=5, archive_id="m9").splitlines()
    >>> lines[0], lines[2], lines[-1]
    ('aaaaa…', 'Traceback (most recent call last):', '…bbbbb')
    >>> lines[1][:60]
    '[... 226 of 236 characters cut here; 1 line with errors, pat'
    """
    if head + tail >= len(text):
        return None
    # Both cuts fall at whitespace when some is near, else the cut token carries an ellipsis: a
    # reader (or a summarizer) never takes half a path or id for a whole one.
    head, head_mark = head_cut(text, head)
    start, tail_mark = tail_cut(text, len(text) - tail)
    tail = len(text) - start
    middle = text[head:start]
    lines, found = important_lines(middle, max_lines) if max_lines else ([], 0)
    lines = [line if len(line) <= line_chars else line[: max(line_chars - 1, 0)] + "…" for line in lines]
    measured = [m for m in measurement_lines(middle[:_MEASURE_SCAN_CHARS], *measurements) if m not in lines]
    cut = f"{len(middle):,} of {len(text):,} characters cut here"
    archived = f"the full output is archived as {archive_id} ..."
    if not lines and not measured:
        trimmed = f"{text[:head]}{head_mark}\n[... {cut}; {archived}]\n{tail_mark}{text[start:]}"
    else:
        count = f"{len(lines)}" if found == len(lines) else f"{len(lines)} of {found}"
        kinds = [f"{count} {'line' if found == 1 else 'lines'} with errors, paths, URLs or ids"] if lines else []
        if measured:
            kinds.append(f"{len(measured)} measurement line{'s' if len(measured) != 1 else ''}")
        kept = " and ".join(kinds) + " kept below"
        trimmed = "\n".join(
            [
                text[:head] + head_mark,
                f"[... {cut}; {kept}; {archived}]",
                *lines,
                *measured,
                f"[... end of kept lines; the last {tail:,} characters follow ...]",
                tail_mark + text[start:],
            ]
        )
    return trimmed if len(trimmed) < len(text) else None


def _result_chars(part: ToolResultPart) -> int:
    return len(part.text) + sum(image.payload_chars for image in part.images)


def _with_text(part: ToolResultPart, text: str) -> ToolResultPart:
    """``part`` with its text replaced; string content stays a string, and in list content the text
    goes where the first text block was, other blocks (images) keep their places."""
    if isinstance(part.content, str):
        return part.model_copy(update={"content": text})
    blocks: list[TextPart | ImagePart | UnknownPart] = []
    placed = False
    for block in part.content:
        if isinstance(block, TextPart):
            if not placed:
                blocks.append(block.model_copy(update={"text": text}))
                placed = True
        else:
            blocks.append(block)
    if not placed:
        blocks.insert(0, TextPart(text=text))
    return part.model_copy(update={"content": tuple(blocks)})


def _rebuilt(message: Message, parts: tuple[Part, ...], **update: object) -> Message:
    new = message.with_parts(parts)
    return new.model_copy(update=update) if update else new


def _if_changed(message: Message, parts: tuple[Part, ...]) -> Message:
    """``message`` itself when every part is the same object, else a copy with ``parts``."""
    if all(new is old for new, old in zip(parts, message.parts, strict=True)):
        return message
    return _rebuilt(message, parts)


def _protected_from(messages: Sequence[Message], turns: int) -> int:
    """Index from which tool results are protected: after the ``turns``-th to last assistant message.
    With fewer assistant messages than that, everything is protected."""
    if turns <= 0:
        return len(messages)
    assistants = [i for i, m in enumerate(messages) if m.role == "assistant"]
    return assistants[-turns] if len(assistants) >= turns else -1


_CLEARED_TOKENS = 40  # a placeholder's size, roughly


def _cleared_tokens(message: Message, s: PruneSettings) -> int:
    """About how many tokens ``message``'s results take once cleared: the placeholders and the
    measurement lines they keep (digits make short tokens: 3 characters a token)."""
    results = message.tool_results
    kept = sum(len(line) + 1 for part in results for line in _kept_measurements(part.text, s))
    return _CLEARED_TOKENS * len(results) + kept // 3


def _trimmed_tokens(message: Message, tokens: int, s: PruneSettings) -> int:
    """About how many tokens ``message`` will take once its long results are soft-trimmed."""
    chars = kept = 0
    for part in message.tool_results:
        size = len(part.text)
        chars += size
        long = size > s.soft_trim_chars and not part.text.startswith(CLEARED_PREFIX)
        kept += min(size, s.head_chars + s.tail_chars + 600 + s.cleared_measurement_chars) if long else size
    return tokens if chars == 0 or kept >= chars else max(1, round(tokens * kept / chars))


def _soft_trimmed(part: ToolResultPart, archive_id: str, s: PruneSettings) -> ToolResultPart:
    text = part.text
    # Already trimmed or cleared results are left alone, so pruning twice changes nothing.
    if len(text) <= s.soft_trim_chars or _TRIM_NOTE.search(text) or text.startswith(CLEARED_PREFIX):
        return part
    trimmed = trim_middle(
        text,
        head=s.head_chars,
        tail=s.tail_chars,
        archive_id=archive_id,
        max_lines=s.max_kept_middle_lines,
        line_chars=s.kept_line_chars,
        measurements=(s.cleared_measurement_lines, s.cleared_measurement_chars),
    )
    return part if trimmed is None else _with_text(part, trimmed)


@memoize_text
def _kept_measurements(text: str, s: PruneSettings) -> list[str]:
    """The measurement lines a cleared result keeps: verbatim, at most a few, within a character
    budget (see :func:`compaction.patterns.measurement_lines`)."""
    return measurement_lines(text[:_MEASURE_SCAN_CHARS], s.cleared_measurement_lines, s.cleared_measurement_chars)


def _cleared(
    part: ToolResultPart, original: ToolResultPart, tool: str, archive_id: str, settings: PruneSettings
) -> ToolResultPart:
    if part.text.startswith(CLEARED_PREFIX):
        return part
    images = len(original.images)
    with_images = f" and {images} image{'s' if images != 1 else ''}" if images else ""
    kept = _kept_measurements(original.text, settings)
    with_kept = f"; {len(kept)} measurement line{'s' if len(kept) != 1 else ''} kept below" if kept else ""
    note = "\n".join(
        [
            f"{CLEARED_PREFIX} {tool} output of {len(original.text):,} characters{with_images}, "
            f"archived as {archive_id}{with_kept}]",
            *kept,
        ]
    )
    # The content keeps its form (string or list of blocks); only the call id and error flag matter.
    content: str | tuple[TextPart, ...] = note if isinstance(part.content, str) else (TextPart(text=note),)
    return part.model_copy(update={"content": content})


def _clear_message(message: Message, tools: tuple[str, ...], settings: PruneSettings) -> Message:
    names = iter(tools)
    parts = tuple(
        _cleared(p, p, next(names), message.id, settings) if isinstance(p, ToolResultPart) else p for p in message.parts
    )
    return _if_changed(message, parts)


def _trim_message(message: Message, settings: PruneSettings) -> Message:
    parts = tuple(_soft_trimmed(p, message.id, settings) if isinstance(p, ToolResultPart) else p for p in message.parts)
    return _if_changed(message, parts)


def soft_trimmed(message: Message, settings: PruneSettings) -> Message:
    """``message`` with its long tool results soft-trimmed (head, tail, the important and
    measurement lines of the middle), kept on the message: the prune stage, the summarizer's view
    and a managed session's scan on append all read the same trim."""
    return message.memo(("prune.trimmed", settings), partial(_trim_message, message, settings))


def prune_tool_results(
    messages: Sequence[Message], *, settings: PruneSettings, window_tokens: int, count: Callable[[Message], int]
) -> PruneOutcome:
    """Soft-trim long tool results, then hard-clear the oldest unprotected ones while tool results
    take more than ``hard_clear_share`` of ``window_tokens`` (measured with ``count`` on the
    messages that carry them).

    >>> from compaction.transcript import Message, ToolResultPart
    >>> msgs = [Message(role="tool", id="t1", parts=(ToolResultPart(call_id="c1", content="ok"),))]
    >>> out = prune_tool_results(msgs, settings=PruneSettings(), window_tokens=1000, count=lambda m: 1)
    >>> out.messages[0] is msgs[0], out.items
    (True, ())
    """
    names = {call.id: call.name for m in messages for call in m.tool_calls}
    items: dict[tuple[int, str], PrunedItem] = {}
    out = list(messages)

    def record(index: int, action: Literal["trimmed", "cleared"], after: Message) -> None:
        for original, new in zip(messages[index].tool_results, after.tool_results, strict=True):
            if new is not original:
                kept = _result_chars(new)
                items[(index, new.call_id)] = PrunedItem(after.id, new.call_id, action, _result_chars(original), kept)

    # Decide the hard clears first, on the sizes results will have after soft trimming, so that no
    # time is spent trimming (and scanning for important lines) results that are then cleared.
    carrying = [i for i, m in enumerate(messages) if m.has_tool_results]
    after_trim = {i: _trimmed_tokens(messages[i], count(messages[i]), settings) for i in carrying}
    limit = settings.hard_clear_share * window_tokens
    total = sum(after_trim.values())
    protected_from = _protected_from(messages, settings.protect_last_assistant_turns)
    cleared: set[int] = set()
    for index in carrying:
        if total <= limit or index >= protected_from:
            break
        if all(p.text.startswith(CLEARED_PREFIX) for p in messages[index].tool_results):
            continue
        cleared.add(index)
        total -= max(0, after_trim[index] - _cleared_tokens(messages[index], settings))

    for index in carrying:
        message = messages[index]
        if index in cleared:
            tools = tuple(names.get(p.call_id, "tool") for p in message.tool_results)
            out[index] = message.memo(
                ("prune.cleared", tools, settings), partial(_clear_message, message, tools, settings)
            )
            record(index, "cleared", out[index])
        else:
            out[index] = soft_trimmed(message, settings)
            record(index, "trimmed", out[index])

    def tool_chars(msgs: Sequence[Message]) -> int:
        return sum(_result_chars(p) for m in msgs for p in m.tool_results)

    ordered = tuple(item for _, item in sorted(items.items(), key=lambda kv: kv[0][0]))
    return PruneOutcome(tuple(out), ordered, tool_chars(messages), tool_chars(out))


def _image_note(image: ImagePart, archive_id: str) -> TextPart:
    if image.url is not None:
        return TextPart(text=f"[image: {image.url}, archived as {archive_id}]")
    media = image.source.get("media_type")
    url = image.source.get("url")
    if not isinstance(media, str) and isinstance(url, str) and url.startswith("data:"):
        media = url[5:].split(";", 1)[0].split(",", 1)[0]
    dims = image.dimensions()
    described = " ".join(x for x in (f"{dims[0]}x{dims[1]}" if dims else "", media or "image") if x)
    kilobytes = max(1, round(image.payload_chars * 3 / 4 / 1024))
    return TextPart(text=f"[image: {described}, about {kilobytes:,} KB, archived as {archive_id}]")


def prepare_for_summarizer(messages: Sequence[Message], *, settings: PruneSettings) -> tuple[Message, ...]:
    """What the summarizer sees: images as text placeholders, tool-result ``extra`` and message
    ``extra`` (except ``name``) stripped, reasoning blocks dropped (a message left empty is
    dropped), and tool results cut to ``settings.preview`` when it is set.

    >>> from compaction.transcript import Message, ReasoningPart, TextPart
    >>> msg = Message(role="assistant", id="a1", parts=(ReasoningPart(block={"thinking": "hmm"}), TextPart(text="ok")))
    >>> [p.kind for p in prepare_for_summarizer([msg], settings=PruneSettings())[0].parts]
    ['text']
    """
    prepared: list[Message] = []
    for message in messages:
        seen = message.memo(("prune.prepared", settings), partial(_prepared, message, settings))
        if seen is not None:
            prepared.append(seen)
    return tuple(prepared)


def _prepared(message: Message, settings: PruneSettings) -> Message | None:
    """One message as the summarizer sees it; None when nothing of it is left."""
    parts: list[Part] = []
    for part in message.parts:
        if isinstance(part, ReasoningPart):
            continue  # the model's scratchpad: verbose, often encrypted, not facts to keep
        if isinstance(part, ImagePart):
            parts.append(_image_note(part, message.id))
        elif isinstance(part, ToolResultPart):
            parts.append(_summarizer_result(part, message.id, settings))
        else:
            parts.append(part)
    if not parts and message.parts:
        return None
    extra = {k: v for k, v in message.extra.items() if k == "name"}
    same_parts = len(parts) == len(message.parts) and all(a is b for a, b in zip(parts, message.parts, strict=True))
    if same_parts and extra == message.extra:
        return message
    return _rebuilt(message, tuple(parts), extra=extra)


def _summarizer_result(part: ToolResultPart, archive_id: str, settings: PruneSettings) -> ToolResultPart:
    new = part if not part.extra else part.model_copy(update={"extra": {}})
    if settings.preview is not None:
        first, last = settings.preview
        trimmed = trim_middle(
            part.text,
            head=first,
            tail=last,
            archive_id=archive_id,
            max_lines=settings.max_kept_middle_lines,
            line_chars=settings.kept_line_chars,
            measurements=(settings.cleared_measurement_lines, settings.cleared_measurement_chars),
        )
        if trimmed is not None:
            new = _with_text(new, trimmed)
    if new.images and not isinstance(new.content, str):
        content = tuple(_image_note(b, archive_id) if isinstance(b, ImagePart) else b for b in new.content)
        new = new.model_copy(update={"content": content})
    return new
