"""The counter protocol and the one shared implementation of message counting and caching.

Concrete counters differ only in :meth:`BaseTokenCounter.count_text` (and, for throughput,
:meth:`BaseTokenCounter._count_texts`); walking the parts, the overheads, the image estimates and
the cache live here, once.
"""

from __future__ import annotations

import json
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from compaction._cache import memoize_text
from compaction.tokens._images import ImageStyle, image_part_tokens
from compaction.transcript import (
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    ResultContentPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = [
    "DEFAULT_CACHE_CHARS",
    "DEFAULT_CACHE_SIZE",
    "MESSAGE_OVERHEAD",
    "NAME_OVERHEAD",
    "REPLY_PRIMING",
    "TOOL_CALL_OVERHEAD",
    "TOOL_RESULT_OVERHEAD",
    "TOOL_SCHEMA_OVERHEAD",
    "BaseTokenCounter",
    "CacheInfo",
    "TokenCounter",
    "active_count_cache_partition",
    "count_cache_partition",
]

# OpenAI's documented chat formula: every message costs 3 tokens of framing, plus 1 when it has
# a name, and every request 3 more to prime the reply. Used for all counters alike.
MESSAGE_OVERHEAD = 3
NAME_OVERHEAD = 1
REPLY_PRIMING = 3
# Framing around tool calls, tool results and tool schemas in the rendered prompt (delimiters,
# "functions." namespaces, type keywords): small, fixed approximations.
TOOL_CALL_OVERHEAD = 8
TOOL_RESULT_OVERHEAD = 6
TOOL_SCHEMA_OVERHEAD = 8

DEFAULT_CACHE_SIZE = 100_000
SCOPED_COUNT_MIN_CHARS = 512
"""Texts at least this long are counted once per memo scope (see ``BaseTokenCounter._scoped_count``);
shorter ones cost less to count than to look up and keep."""

# The content cache holds the strings of its keys; this bounds what it can keep alive.
DEFAULT_CACHE_CHARS = 32_000_000

_PARTITION: ContextVar[str | None] = ContextVar("compaction_count_cache_partition", default=None)


@contextmanager
def count_cache_partition(name: str | None) -> Iterator[None]:
    """Counts cached by content inside this block are found only inside blocks of the same name.

    Counters are shared by model family in a process, so their content cache would otherwise let
    one tenant's text count faster after another tenant sent it: a timing side channel. A service
    opens one partition per tenant (the HTTP service: per API key namespace) around each request;
    ``None`` is the default, shared partition. The partition travels with the context (tasks and
    ``asyncio.to_thread`` copy it).

    >>> from compaction.tokens import EstimateCounter
    >>> from compaction.transcript import Message, TextPart
    >>> counter = EstimateCounter()
    >>> with count_cache_partition("tenant-a"):
    ...     _ = counter.count_message(Message(role="user", parts=(TextPart(text="same text"),), id="a"))
    >>> with count_cache_partition("tenant-b"):
    ...     _ = counter.count_message(Message(role="user", parts=(TextPart(text="same text"),), id="b"))
    >>> counter.cache_info().misses  # tenant b's identical text was not found in a's partition
    2
    """
    token = _PARTITION.set(name)
    try:
        yield
    finally:
        _PARTITION.reset(token)


def active_count_cache_partition() -> str | None:
    """The partition :func:`count_cache_partition` opened in this context (None: the shared one)."""
    return _PARTITION.get()


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the input tokens of text, messages and tool schemas for one model family.

    ``exact`` is True when ``count_text`` runs the model's real tokenizer, False for estimates
    (callers then apply a safety margin).
    """

    name: str
    exact: bool

    def count_text(self, text: str) -> int:
        """Tokens of a plain string."""
        ...

    def count_message(self, message: Message) -> int:
        """Tokens of one message: its content plus the per-message overhead."""
        ...

    def count_messages(self, messages: Sequence[Message]) -> int:
        """Tokens of a conversation: the messages plus the reply priming (0 for no messages)."""
        ...

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of tool/function schemas as sent in the request."""
        ...


@dataclass(frozen=True)
class CacheInfo:
    """Message cache statistics of one counter.

    ``hits`` counts messages answered without tokenizing (same object, or same content);
    ``misses`` counts messages that were tokenized; ``size`` is the number of content entries.
    """

    hits: int
    misses: int
    size: int
    maxsize: int


class _ContentCache:
    """A bounded map from content keys to counts, with two generations instead of strict LRU.

    New and re-used entries go to the young generation; when it reaches half the bounds (entries
    or characters referenced by keys), it becomes the old one and the previous old one is dropped.
    Entries used at least once per generation survive, as with an LRU, but a hit costs one dict
    lookup and no reordering. Reads take no lock: a read racing a rotation can only miss.
    """

    def __init__(self, max_entries: int, max_chars: int) -> None:
        self.max_entries = max(2, max_entries)
        self.max_chars = max(2, max_chars)
        self._young: dict[Hashable, tuple[int, int]] = {}
        self._old: dict[Hashable, tuple[int, int]] = {}
        self._young_chars = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def get(self, key: Hashable) -> int | None:
        entry = self._young.get(key)
        if entry is not None:
            return entry[0]
        entry = self._old.get(key)
        if entry is None:
            return None
        with self._lock:
            self._old.pop(key, None)
            self._insert(key, entry)
        return entry[0]

    def put(self, key: Hashable, count: int, chars: int) -> None:
        with self._lock:
            self._insert(key, (count, chars))

    def clear(self) -> None:
        with self._lock:
            self._young, self._old, self._young_chars = {}, {}, 0

    def _insert(self, key: Hashable, entry: tuple[int, int]) -> None:
        if key not in self._young:
            self._young_chars += entry[1]
        self._young[key] = entry
        if len(self._young) >= self.max_entries // 2 or self._young_chars >= self.max_chars // 2:
            self._old, self._young, self._young_chars = self._young, {}, 0


def _flat(block: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    # String values are kept as the caller's objects (their hashes are cached by Python), so
    # keying a 1 MB base64 image costs nothing after the first time; only nested values are dumped.
    return tuple(
        (key, value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str))
        for key, value in block.items()
    )


def _part_key(part: Part | ResultContentPart) -> Hashable:
    # Exact-type checks first: isinstance on pydantic models (ABCMeta) costs ~50 ns each, and this
    # runs for every part of every message that misses the identity cache.
    if type(part) is TextPart:
        return part.text  # the common case allocates nothing
    if type(part) is ToolResultPart and isinstance(part.content, str):
        return ("result", part.content)
    if type(part) is ToolCallPart:
        return ("call", part.name, part.arguments)
    return _other_part_key(part)


def _other_part_key(part: Part | ResultContentPart) -> Hashable:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, ToolCallPart):
        return ("call", part.name, part.arguments)
    if isinstance(part, ToolResultPart):
        content = part.content
        if isinstance(content, str):
            return ("result", content)
        return ("result-parts", *map(_part_key, content))
    if isinstance(part, ReasoningPart):
        return ("reasoning", part.text)
    if isinstance(part, ImagePart):
        return ("image", _flat(part.source))
    return ("unknown", _flat(part.block))


def _message_key(message: Message) -> Hashable:
    name = message.extra.get("name") if message.extra else None
    return (
        message.source_role or message.role,
        name if isinstance(name, str) else None,
        *map(_part_key, message.parts),
    )


def _key_chars(key: Hashable) -> int:
    if isinstance(key, str):
        return len(key)
    if isinstance(key, tuple):
        return sum(map(_key_chars, key))
    return 0


def _json_default(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)


def dump_json(value: Any) -> str:
    """JSON text as a client sends it (non-ASCII kept as-is, mappings of any type accepted)."""
    return json.dumps(value, ensure_ascii=False, default=_json_default)


class BaseTokenCounter(ABC):
    """Message counting shared by every counter; subclasses provide :meth:`count_text`.

    Counts are cached per message twice over: by object identity (a weak reference, so nothing
    is kept alive) for re-counting the same message objects, and by content (role, name and the
    string objects of the parts) so freshly re-converted messages with the same strings are not
    tokenized again. Both are bounded. :meth:`count_messages` also remembers the last list and
    its total, so counting that list plus appended messages only looks at the new ones.
    Messages are treated as immutable: mutating a part's dict in place is not noticed.

    >>> from compaction.tokens import EstimateCounter
    >>> from compaction.transcript import Message, TextPart
    >>> counter = EstimateCounter()
    >>> history = [Message(role="user", parts=(TextPart(text="x" * 40),), id="m1")]
    >>> counter.count_messages(history)
    17
    >>> counter.count_messages([*history, Message(role="user", parts=(TextPart(text="hi"),), id="m2")])
    22
    >>> counter.cache_info().misses  # the first message was tokenized once
    2
    """

    name: str
    exact: bool
    image_style: ImageStyle
    cheap: ClassVar[bool] = False
    """Whether a count costs no tokenizer (an estimate by characters): planning then uses counts."""

    def __init__(
        self,
        *,
        name: str,
        exact: bool,
        image_style: ImageStyle,
        cache_size: int = DEFAULT_CACHE_SIZE,
        cache_chars: int = DEFAULT_CACHE_CHARS,
    ) -> None:
        self.name = name
        self.exact = exact
        self.image_style = image_style
        self._cache_size = max(2, cache_size)
        self._content = _ContentCache(cache_size, cache_chars)
        self._by_id: dict[int, tuple[weakref.ReferenceType[Message], int]] = {}
        # The last list counted and its total (without priming): the one thing held strongly.
        self._last: tuple[list[Message], int] = ([], 0)
        self._hits = 0
        self._misses = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, exact={self.exact})"

    @abstractmethod
    def count_text(self, text: str) -> int:
        """Tokens of a plain string."""

    @memoize_text(min_chars=SCOPED_COUNT_MIN_CHARS)
    def _scoped_count(self, text: str, encode: Callable[[str], int]) -> int:
        """``encode(text)``; a text of at least :data:`SCOPED_COUNT_MIN_CHARS` characters is counted
        once per active :class:`~compaction._cache.MemoScope` (a compaction run's, or a managed
        session's, which measures each message as the summarizer's prompt shows it when the
        message is appended). Outside a scope nothing is kept. The memo is keyed by the counter
        object itself (and ``encode``, one of its methods): counters never share a count."""
        return encode(text)

    def _count_texts(self, texts: list[str]) -> list[int]:
        """Tokens of many strings; overridden where a batch API is faster."""
        return [self.count_text(text) for text in texts]

    def count_image(self, part: ImagePart) -> int:
        """Tokens of an image, from its dimensions (never from its base64 length)."""
        return image_part_tokens(part, self.image_style)

    def count_message(self, message: Message) -> int:
        """Tokens of one message: content plus :data:`MESSAGE_OVERHEAD` (and name overhead)."""
        entry = self._by_id.get(id(message))
        if entry is not None and entry[0]() is message:
            self._hits += 1
            return entry[1]
        return self._count_new([message])[0]

    def count_messages(self, messages: Sequence[Message]) -> int:
        """Sum of :meth:`count_message` plus :data:`REPLY_PRIMING`; 0 for an empty list."""
        if not messages:
            return 0
        current = list(messages)
        start, total = 0, 0
        last, last_total = self._last
        n = len(last)
        # The same list again, maybe with messages appended: the prefix is compared in C (identity
        # first, so ~2 us for 2,000 messages) instead of looking up each message. Only tried when
        # its ends are the same objects, so re-converted lists skip the slower model equality.
        if 0 < n <= len(current) and current[0] is last[0] and current[n - 1] is last[n - 1] and current[:n] == last:
            start, total = n, last_total
        get = self._by_id.get
        missing: list[Message] = []
        for message in current[start:] if start else current:
            entry = get(id(message))
            if entry is not None and entry[0]() is message:
                total += entry[1]
            else:
                missing.append(message)
        self._hits += len(current) - len(missing)
        if missing:
            total += sum(self._count_new(missing))
        self._last = (current, total)
        return total + REPLY_PRIMING

    def count_each(self, messages: Sequence[Message]) -> list[int]:
        """:meth:`count_message` of each message, those not found in the caches tokenized in one
        batch (each distinct string once)."""
        get = self._by_id.get
        counts: list[int | None] = []
        missing: list[Message] = []
        for message in messages:
            entry = get(id(message))
            if entry is not None and entry[0]() is message:
                counts.append(entry[1])
            else:
                counts.append(None)
                missing.append(message)
        self._hits += len(messages) - len(missing)
        fresh = iter(self._count_new(missing) if missing else ())
        return [count if count is not None else next(fresh) for count in counts]

    def message_texts(self, message: Message) -> tuple[list[str], int]:
        """The strings :meth:`count_message` tokenizes for ``message`` (role and name first), and
        its tokens besides them (framing, overheads, images)."""
        return self._plan(message)

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of tool schemas: the JSON of each plus :data:`TOOL_SCHEMA_OVERHEAD`."""
        total = 0
        for tool in tools:
            text = dump_json(tool)
            partition = _PARTITION.get()
            key: Hashable = ("tool-schema", text) if partition is None else (partition, "tool-schema", text)
            count = self._content.get(key)
            if count is None:
                count = self.count_text(text)
                self._content.put(key, count, len(text))
            total += count + TOOL_SCHEMA_OVERHEAD
        return total

    def cache_info(self) -> CacheInfo:
        """Hits and misses of the message cache since creation (or the last :meth:`cache_clear`)."""
        return CacheInfo(hits=self._hits, misses=self._misses, size=len(self._content), maxsize=self._cache_size)

    def cache_clear(self) -> None:
        """Forget all cached counts and reset the statistics."""
        self._content.clear()
        self._by_id = {}
        self._last = ([], 0)
        self._hits = self._misses = 0

    def _count_new(self, messages: list[Message]) -> list[int]:
        """Counts of messages not found by identity: from the content cache, else tokenized in one batch."""
        keys = [_message_key(message) for message in messages]
        partition = _PARTITION.get()
        if partition is not None:
            keys = [(partition, key) for key in keys]
        counts: list[int | None] = [self._content.get(key) for key in keys]
        todo = [i for i, count in enumerate(counts) if count is None]
        if todo:
            plans = [self._plan(messages[i]) for i in todo]
            texts = [text for texts, _ in plans for text in texts]
            # Each distinct string is tokenized once per batch: roles and tool names recur in
            # every message, and agents re-read files and re-run commands whose output repeats.
            distinct = dict.fromkeys(texts)
            if len(distinct) < len(texts):
                count_of = dict(zip(distinct, self._count_texts(list(distinct)), strict=True))
                sizes = [count_of[text] for text in texts]
            else:
                sizes = self._count_texts(texts)
            start = 0
            for i, (texts, fixed) in zip(todo, plans, strict=True):
                end = start + len(texts)
                count = fixed + sum(sizes[start:end])
                start = end
                counts[i] = count
                self._content.put(keys[i], count, _key_chars(keys[i]))
        self._hits += len(messages) - len(todo)
        self._misses += len(todo)
        if len(self._by_id) + len(messages) > self._cache_size:
            self._by_id = {}
        by_id = self._by_id
        result: list[int] = []
        for message, maybe in zip(messages, counts, strict=True):
            assert maybe is not None
            by_id[id(message)] = (weakref.ref(message), maybe)
            result.append(maybe)
        return result

    def _plan(self, message: Message) -> tuple[list[str], int]:
        """The strings to tokenize for a message, and its fixed tokens (overheads, images)."""
        texts = [message.source_role or message.role]
        fixed = MESSAGE_OVERHEAD
        name = message.extra.get("name") if message.extra else None
        if isinstance(name, str):
            texts.append(name)
            fixed += NAME_OVERHEAD
        for part in message.parts:
            fixed += self._plan_part(part, texts)
        return texts, fixed

    def _plan_part(self, part: Part | ResultContentPart, texts: list[str]) -> int:
        if isinstance(part, TextPart):
            texts.append(part.text)
            return 0
        if isinstance(part, ToolCallPart):
            texts.append(part.name)
            texts.append(part.arguments)
            return TOOL_CALL_OVERHEAD
        if isinstance(part, ToolResultPart):
            if isinstance(part.content, str):
                texts.append(part.content)
                return TOOL_RESULT_OVERHEAD
            return TOOL_RESULT_OVERHEAD + sum(self._plan_part(sub, texts) for sub in part.content)
        if isinstance(part, ReasoningPart):
            # Thinking sent back to the model is input: it is billed and fills the window.
            texts.append(part.text)
            return 0
        if isinstance(part, ImagePart):
            return self.count_image(part)
        texts.append(dump_json(part.block))
        return 0
