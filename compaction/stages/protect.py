"""Protect: decide what is kept verbatim and what is compacted.

Kept: system messages, the first user message (the task), pinned messages (with their whole tool
exchange), and the recent tail (by messages or by tokens), widened to a safe cut point so no tool
pair is split. Everything else before the tail is the compaction zone. The last user request is
tracked so reconstruct can quote it when it falls inside the zone.

The tail kept verbatim is bounded in tokens (``CompactionConfig.keep_recent_share`` of the window):
the pipeline trims its largest tool results first, then, if it is still over,
:func:`tail_start_within` moves its start to the first later safe cut point that fits.

When the task alone is larger than the budget leaves it, the last step of the pipeline's fallback
chain keeps its head and tail and cuts its middle (:func:`cut_task_middle`), with a marker naming
the archive id of the whole message.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from compaction.pairs import safe_cut_points, units
from compaction.patterns import head_cut, tail_cut
from compaction.transcript import Message, TextPart


@dataclass(frozen=True)
class Partition:
    head: tuple[int, ...]
    """Leading system messages and the first user message, kept in front."""
    first_user: int | None
    kept_middle: tuple[int, ...]
    """Pinned units and mid-conversation system messages between head and tail, kept verbatim."""
    zone: tuple[int, ...]
    """The indices compacted away, oldest first; always whole units."""
    tail_start: int
    """``messages[tail_start:]`` is the verbatim recent tail."""
    last_user_request: int | None

    @property
    def last_request_in_zone(self) -> bool:
        return self.last_user_request is not None and self.last_user_request in set(self.zone)

    def to_dict(self) -> dict[str, object]:
        return {
            "head": list(self.head),
            "first_user": self.first_user,
            "kept_middle": list(self.kept_middle),
            "zone": [self.zone[0], self.zone[-1]] if self.zone else [],
            "zone_size": len(self.zone),
            "tail_start": self.tail_start,
            "last_user_request": self.last_user_request,
        }


def partition(
    messages: Sequence[Message],
    token_counts: npt.NDArray[np.int64],
    *,
    keep_recent_messages: int,
    keep_recent_tokens: int | None = None,
    pinned_ids: Collection[str] = (),
    protect_first_user: bool = True,
) -> Partition:
    """Split ``messages`` into head, kept middle, zone and tail (indices into ``messages``)."""
    n = len(messages)
    cuts = safe_cut_points(messages)

    leading = 0
    while leading < n and messages[leading].role == "system":
        leading += 1
    # The task is what the user typed: a turn that also carries tool results belongs to the call
    # before it, and keeping it in front without that call would leave orphan results.
    first_user = first_user_index(messages)
    head = list(range(leading))
    head_end = leading
    if protect_first_user and first_user is not None:
        head.append(first_user)
        head_end = first_user + 1

    wanted = _tail_start_wanted(token_counts, keep_recent_messages, keep_recent_tokens)
    # Widen the tail back to a safe cut point, but never into the head.
    tail_start = max((c for c in cuts if c <= wanted), default=0)
    if tail_start < head_end:
        tail_start = min((c for c in cuts if c >= head_end), default=n)

    pinned_set = set(pinned_ids)
    kept: set[int] = set()
    if pinned_set or any(m.pinned for m in messages[:tail_start]):
        for unit in units(messages[:tail_start]):
            members = range(unit.start, unit.end)
            if any(messages[i].pinned or pin_ids(messages[i]) & pinned_set for i in members):
                kept.update(members)
    head_set = set(head)
    kept.update(i for i in range(head_end, tail_start) if messages[i].role == "system")
    kept -= head_set
    zone = tuple(i for i in range(tail_start) if i not in head_set and i not in kept and messages[i].role != "system")
    last_user = next((i for i in range(n - 1, -1, -1) if messages[i].is_user_turn), None)
    return Partition(
        head=tuple(head),
        first_user=first_user if protect_first_user else None,
        kept_middle=tuple(sorted(kept)),
        zone=zone,
        tail_start=tail_start,
        last_user_request=last_user,
    )


def pin_ids(message: Message) -> set[str]:
    """The ids a pin can name the message by: its canonical id, and its own ``id`` field (several
    messages can carry the same one; the adapters give the later ones distinct canonical ids)."""
    own = message.own_id
    return {message.id} if own is None else {message.id, own}


def _tail_start_wanted(
    token_counts: npt.NDArray[np.int64], keep_recent_messages: int, keep_recent_tokens: int | None
) -> int:
    n = len(token_counts)
    if keep_recent_tokens is None:
        return max(0, n - keep_recent_messages)
    # The longest suffix whose tokens fit keep_recent_tokens (searchsorted on the reversed cumsum).
    suffix = np.cumsum(token_counts[::-1])
    fitting = int(np.searchsorted(suffix, keep_recent_tokens, side="right"))
    return n - fitting


def tail_start_within(
    messages: Sequence[Message], token_counts: npt.NDArray[np.int64], start: int, max_tokens: int
) -> int:
    """The first safe cut point at or after ``start`` from which the tail takes at most
    ``max_tokens`` tokens (``len(messages)``, an empty tail, when not even the last unit fits).
    Moving the start forward, never back, keeps the bound; cutting only at safe points keeps every
    tool call with its results.

    >>> from compaction.transcript import Message, TextPart
    >>> roles = ["user", "assistant"] * 2
    >>> msgs = [Message(role=r, id=str(i), parts=(TextPart(text="x"),)) for i, r in enumerate(roles)]
    >>> tail_start_within(msgs, np.array([5, 50, 5, 5]), 0, 20), tail_start_within(msgs, np.array([5, 5, 5, 30]), 0, 20)
    (2, 4)
    """
    n = len(messages)
    suffix = np.concatenate((np.cumsum(token_counts[::-1])[::-1], [0]))
    return next((c for c in safe_cut_points(messages) if c >= start and int(suffix[c]) <= max_tokens), n)


def first_user_index(messages: Sequence[Message]) -> int | None:
    """The index of the first user message after the leading system messages (the task): a turn
    that also carries tool results belongs to the call before it, and keeping it in front without
    that call would leave orphan results."""
    leading = 0
    while leading < len(messages) and messages[leading].role == "system":
        leading += 1
    return next(
        (i for i in range(leading, len(messages)) if messages[i].is_user_turn and not messages[i].has_tool_results),
        None,
    )


_MIN_TASK_PART = 200  # characters of a text part of the task kept however much has to go


def cut_task_middle(message: Message, keep_chars: int) -> Message | None:
    """``message`` (the task) with the middle of its text cut so that about ``keep_chars``
    characters of it remain (its head and its tail, cut at whitespace when some is near), and a
    marker in their place naming how much was cut and the archive id of the whole message (its
    ``id``). Only the text parts are cut, the longest first; None when no text part is long enough
    to cut. The message is a new object: the original is left as it is, for the archive.

    >>> task = Message(role="user", id="m0", parts=(TextPart(text="Fix it. " + "detail " * 200 + "Thanks."),))
    >>> text = cut_task_middle(task, 60).parts[0].text
    >>> text.startswith("Fix it.") and text.endswith("Thanks.") and "archived as m0" in text
    True
    """
    texts = sorted(
        ((k, part) for k, part in enumerate(message.parts) if isinstance(part, TextPart)),
        key=lambda kp: -len(kp[1].text),
    )
    excess = sum(len(part.text) for _, part in texts) - max(keep_chars, 0)
    parts = list(message.parts)
    for k, part in texts:
        text = part.text
        room = max(len(text) - excess, _MIN_TASK_PART)
        if excess <= 0 or room >= len(text):
            continue
        head, head_mark = head_cut(text, room - room // 2)
        start, tail_mark = tail_cut(text, len(text) - room // 2)
        if start <= head:
            continue
        cut = start - head
        marker = (
            f"[... {cut:,} of {len(text):,} characters of this message cut here to fit the context window; "
            f"the whole message is archived as {message.id} ...]"
        )
        parts[k] = part.model_copy(update={"text": f"{text[:head]}{head_mark}\n{marker}\n{tail_mark}{text[start:]}"})
        excess -= cut - len(marker) - 2 - len(head_mark) - len(tail_mark)
    if parts == list(message.parts):
        return None
    return message.model_copy(update={"parts": tuple(parts)})
