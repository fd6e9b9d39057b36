"""The managed context and its message lists.

:class:`Context` is the context a :class:`~compaction.middleware.ContextManager` holds: one
:class:`ContextEntry` per message (the provider-format message, its store id, its canonical form
and its exact token count) and the running total of those counts. A message is converted and
counted once, when it enters the context; a context rebuilt after a compaction carries the entries
of the messages it kept over (:meth:`Context.rebuilt`), so only what the compaction wrote is
counted. Below it: conversion, the request sent to the compactor (where the system prompt goes),
and the compactor the manager derives for its mode.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, overload

from compaction.adapters import detect_format, message_format, to_canonical, unique_ids
from compaction.compactor import Compactor
from compaction.tokens import TokenCounter
from compaction.transcript import Message, Transcript, id_payload, message_id_of

__all__ = [
    "Context",
    "ContextEntry",
    "adopted",
    "canonical",
    "derive_compactor",
    "entry_of",
    "first_format",
    "placed",
    "request_for",
    "request_transcript",
    "split_leading_system",
]

# How far back a rebuilt context looks for the entry of a kept message when the two lists stop
# lining up (a trimmed tool result, a placeholder the compaction added): keeps the rebuild linear.
_REALIGN = 8


@dataclass(frozen=True, slots=True)
class ContextEntry:
    """One message of the context: provider format, store id (None for a message the manager or
    a compaction wrote, and without a store), canonical form, and its exact count with the
    manager's base (uncalibrated) counter.

    ``payload``: what a derived message id hashes of ``message`` (:func:`id_payload`), for a message
    without an id of its own; made when the message enters the context, so that placing it in a
    request (:func:`request_transcript`) only hashes. None: derived from ``message`` when needed."""

    message: dict[str, Any]
    store_id: int | None
    canon: Message
    tokens: int
    payload: bytes | None = field(default=None, compare=False, repr=False)
    placing: dict[tuple[str, int], Message] = field(default_factory=dict, compare=False, repr=False)
    """The canonical form as a request last placed it (see :func:`placed`), by (format, index)."""


def entry_of(
    message: dict[str, Any], store_id: int | None, counter: TokenCounter, tokens: int | None = None
) -> ContextEntry:
    """``message`` (the context's own copy) converted and counted (raises on invalid input);
    ``tokens``: its count with ``counter`` when that is known already (it is not counted again)."""
    canon = canonical(message)
    count = counter.count_message(canon) if tokens is None else tokens
    return ContextEntry(message, store_id, canon, count, payload_of(message))


def payload_of(message: Mapping[str, Any]) -> bytes | None:
    """The :func:`id_payload` of a message whose canonical id is derived (None when it has an ``id``
    of its own that some format reads as its id: then it is read again when placed)."""
    return None if "id" in message else id_payload(message)


class Context:
    """The messages of the context in order, each converted and counted once, with their total.

    It grows by :meth:`append`; a compaction replaces it with a new one (:meth:`rebuilt`); the only
    removal is :meth:`split_off` of a turn held out of a compaction, put back with :meth:`extend`.
    Range totals come from running sums, so the size of any slice costs O(1).

    >>> from compaction.tokens import counter_for_model
    >>> counter = counter_for_model("gpt-4o")
    >>> ctx = Context([entry_of({"role": "user", "content": "hi"}, None, counter)])
    >>> ctx.append(entry_of({"role": "assistant", "content": "hello there"}, None, counter))
    >>> len(ctx), ctx.total == ctx.tokens(0, 1) + ctx.tokens(1)
    (2, True)
    """

    __slots__ = ("_entries", "_stored", "_sums")

    def __init__(self, entries: Iterable[ContextEntry] = ()) -> None:
        self._entries: list[ContextEntry] = []
        self._sums: list[int] = [0]  # _sums[k]: tokens of the first k entries
        self._stored: list[int] = [0]  # _stored[k]: entries with a store id among the first k
        self.extend(entries)

    @classmethod
    def counted(
        cls,
        messages: Sequence[dict[str, Any]],
        ids: Sequence[int | None],
        counter: TokenCounter,
        counts: Sequence[int | None] | None = None,
    ) -> Context:
        """A context of ``messages`` (with store ``ids``), each converted and counted; ``counts``:
        the counts with ``counter`` known already (None: count that message)."""
        known = counts if counts is not None else [None] * len(messages)
        return cls(entry_of(m, i, counter, c) for m, i, c in zip(messages, ids, known, strict=True))

    def rebuilt(
        self,
        messages: Sequence[dict[str, Any]],
        ids: Sequence[int | None],
        counter: TokenCounter,
        counts: Sequence[int | None] | None = None,
    ) -> Context:
        """A new context of ``messages`` (with store ``ids``). A message equal to one this context
        holds with the same id (the kept tail of a compaction, a stored message reloaded) takes
        that entry's canonical form and count; only the others are converted, and counted unless
        ``counts`` gives their count with ``counter`` (a store's rows). The lists are matched from
        the end, where a compaction keeps messages verbatim."""
        old = self._entries
        if not old:
            return Context.counted(messages, ids, counter, counts)
        known = list(counts) if counts is not None else [None] * len(messages)
        position = len(old) - 1
        out: list[ContextEntry] = []
        for message, store_id, tokens in zip(reversed(messages), reversed(ids), reversed(known), strict=True):
            found = None
            for k in range(position, max(position - _REALIGN, -1), -1):
                entry = old[k]
                if entry.store_id == store_id and (entry.message is message or entry.message == message):
                    found = entry
                    position = k - 1
                    break
            if found is None:
                out.append(entry_of(message, store_id, counter, tokens))
            else:
                out.append(ContextEntry(message, store_id, found.canon, found.tokens, found.payload))
        out.reverse()
        return Context(out)

    def recounted(self, counter: TokenCounter) -> Context:
        """The same messages counted with another counter (the model changed)."""
        return Context(replace(e, tokens=counter.count_message(e.canon)) for e in self._entries)

    # --- growing and holding ---------------------------------------------------------------

    def append(self, entry: ContextEntry) -> None:
        self._entries.append(entry)
        self._sums.append(self._sums[-1] + entry.tokens)
        self._stored.append(self._stored[-1] + (entry.store_id is not None))

    def extend(self, entries: Iterable[ContextEntry]) -> None:
        for entry in entries:
            self.append(entry)

    def split_off(self, start: int) -> list[ContextEntry]:
        """Remove the entries from ``start`` on and return them."""
        tail = self._entries[start:]
        del self._entries[start:], self._sums[start + 1 :], self._stored[start + 1 :]
        return tail

    # --- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __iter__(self) -> Iterator[ContextEntry]:
        return iter(self._entries)

    @overload
    def __getitem__(self, index: int) -> ContextEntry: ...
    @overload
    def __getitem__(self, index: slice) -> list[ContextEntry]: ...
    def __getitem__(self, index: int | slice) -> ContextEntry | list[ContextEntry]:
        return self._entries[index]

    @property
    def total(self) -> int:
        """Tokens of every message (the sum of their counts)."""
        return self._sums[-1]

    def tokens(self, start: int = 0, stop: int | None = None) -> int:
        """Tokens of the messages ``[start:stop]`` (slice semantics, negative indices too)."""
        begin, end, _ = slice(start, stop).indices(len(self._entries))
        return self._sums[end] - self._sums[begin] if end > begin else 0

    def messages(self, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        """The provider-format messages ``[start:stop]`` (a new list of the context's dicts)."""
        return [e.message for e in self._entries[start:stop]]

    def stored_before(self, index: int) -> int:
        """How many of the entries before ``index`` have a store id (O(1))."""
        return self._stored[index]

    def ids(self) -> list[int | None]:
        return [e.store_id for e in self._entries]

    def canon(self, start: int = 0) -> list[Message]:
        return [e.canon for e in self._entries[start:]]

    def counts(self) -> list[int]:
        return [e.tokens for e in self._entries]

    def stored(self, after: int | None = None) -> list[tuple[dict[str, Any], int]]:
        """(message, store id) of the stored messages (those with an id; after ``after`` when given)."""
        return [
            (e.message, e.store_id)
            for e in self._entries
            if e.store_id is not None and (after is None or e.store_id > after)
        ]


def request_transcript(
    request: Sequence[Mapping[str, Any]], system: Any, entries: Sequence[ContextEntry], counter: TokenCounter
) -> Transcript:
    """``to_canonical(request, system)`` built from what the context holds already: ``request``
    ends with the messages of ``entries``, in order (after what :func:`request_for` puts before
    them); each of those takes its entry's canonical form, re-identified for its position in the
    request, with the entry's count carried for ``counter`` (the counter that made it), so the
    pipeline neither reads nor counts it again. A message whose reading depends on the request's
    format (one read on its own as the other format) is read again with the rest."""
    fmt = detect_format(request, system)
    lead = len(request) - len(entries)
    if lead < 0:
        raise ValueError(f"the request holds {len(request)} messages, fewer than its {len(entries)} entries")
    # The canonical index of request[k]: Anthropic's separate system prompt is message 0.
    offset = 1 if fmt == "anthropic" and system is not None else 0
    head = list(to_canonical(request[:lead], system, format=fmt).messages) if lead or system is not None else []
    fresh = [k for k, e in enumerate(entries) if (message_format(e.message) or "openai") != fmt]
    reread = iter(to_canonical([entries[k].message for k in fresh], format=fmt).messages if fresh else ())
    wanted = set(fresh)
    out = head
    for k, entry in enumerate(entries):
        index = lead + k + offset
        raw = entry.message
        if k in wanted:
            # Read as part of another list: its id is derived again below, like every other one.
            message = next(reread)
            message = message.model_copy(update={"id": _read_id(raw, fmt, index, entry.payload)})
        else:
            message = placed(entry, fmt, index)
            message.carry_tokens(counter, entry.tokens)
        out.append(message)
    return Transcript(format=fmt, messages=unique_ids(out))


def placed(entry: ContextEntry, fmt: str, index: int) -> Message:
    """The entry's canonical form as a ``fmt`` request places it at canonical ``index``: its id is
    the one the adapter gives it there (derived ids depend on the position), the rest as it is.

    The same object each time the entry is placed at the same index (it is kept on the entry), so
    what the stages derive from the message and keep on it (its trimmed and prepared forms, its
    rendered count: :meth:`~compaction.transcript.Message.memo`) is found by the next compaction
    that reads it there, and by that compaction when the append scanned it (:mod:`.prescan`)."""
    key = (fmt, index)
    found = entry.placing.get(key)
    if found is not None:
        return found
    message = entry.canon
    new_id = _read_id(entry.message, fmt, index, entry.payload)
    if new_id != message.id:
        message = message.model_copy(update={"id": new_id})
    entry.placing.clear()  # the latest placing only: an entry moves after a compaction
    entry.placing[key] = message
    return message


def _read_id(raw: Mapping[str, Any], fmt: str, index: int, payload: bytes | None) -> str:
    """The canonical id the ``fmt`` adapter gives ``raw`` read at ``index`` of a list: its own
    ``id`` field, else one derived from the position, role and content (``payload``: the content's
    :func:`id_payload`, when it was kept)."""
    own = raw.get("id")
    if fmt == "openai":
        if isinstance(own, str | int) and not isinstance(own, bool) and own != "":
            return str(own)
    elif isinstance(own, str) and own:
        return own
    return message_id_of(index, str(raw.get("role")), id_payload(raw) if payload is None else payload)


def canonical(message: Mapping[str, Any]) -> Message:
    """One provider-format message in canonical form (raises on invalid input)."""
    if not isinstance(message, Mapping):
        raise TypeError(f"a message must be a mapping, got {type(message).__name__}")
    return to_canonical([message]).messages[0]


def first_format(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The provider format of the first message that tells it, else None."""
    for message in messages:
        fmt = message_format(message)
        if fmt is not None:
            return fmt
    return None


def request_for(
    messages: Sequence[dict[str, Any]], system: Any, fmt: str | None
) -> tuple[list[dict[str, Any]], Any, bool]:
    """(messages, system, prepended) as sent to the compactor: the system prompt goes separately
    for Anthropic-format messages, else as a leading system message.

    >>> request_for([{"role": "user", "content": "hi"}], "be brief", "openai")
    ([{'role': 'system', 'content': 'be brief'}, {'role': 'user', 'content': 'hi'}], None, True)
    >>> request_for([{"role": "user", "content": "hi"}], "be brief", "anthropic")
    ([{'role': 'user', 'content': 'hi'}], 'be brief', False)
    """
    out = list(messages)
    if system is None:
        return out, None, False
    if fmt == "anthropic":
        return out, system, False
    return [{"role": "system", "content": system}, *out], None, True


def adopted(messages: Sequence[Mapping[str, Any]], prepended: bool) -> list[dict[str, Any]]:
    """The compactor's output as context messages (without the system message :func:`request_for`
    put in front)."""
    out = [dict(m) for m in messages]
    if prepended and out and out[0].get("role") == "system":
        out = out[1:]
    return out


def split_leading_system(messages: Sequence[Mapping[str, Any]]) -> tuple[str | None, list[Mapping[str, Any]]]:
    """(system prompt, the rest) when ``messages`` open with plain-text system messages."""
    texts: list[str] = []
    rest = list(messages)
    while rest and rest[0].get("role") in ("system", "developer") and isinstance(rest[0].get("content"), str):
        texts.append(str(rest.pop(0)["content"]))
    return ("\n\n".join(texts) if texts else None), rest


def derive_compactor(base: Compactor, *, keep_recent_iterations: int | None, store_mode: bool) -> Compactor:
    """``base`` with the manager's overrides (``base`` itself when it needs none)."""
    updates: dict[str, Any] = {}
    if keep_recent_iterations is not None:
        updates["keep_recent_messages"] = 2 * keep_recent_iterations
    if store_mode:
        # The zone must be a prefix of the stored messages (see compaction.middleware.store_mode).
        updates["protect_first_user_message"] = False
        updates["summary_placement"] = "message"
    if all(getattr(base.config, key) == value for key, value in updates.items()):
        return base
    return Compactor(
        base.model,
        base.summarizer,
        base.config.model_copy(update=updates),
        counter=base.counter,
        registry=getattr(base, "registry", None),
    )
