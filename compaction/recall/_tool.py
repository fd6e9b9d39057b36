"""The ``recall`` tool: its definition for the model, and the answer to a call, bounded and redacted.

The answer is plain text the model reads: which archived messages match (each with its archive
id, role and a snippet around the match) or one archived message in full, a page at a time, never
more than ``max_tokens`` (default 2,000) tokens. Archived text is data, not instructions: a line
of it that addresses the model ("SYSTEM OVERRIDE: ...") is marked as untrusted
(:func:`compaction.injection.mark`), as the summary and the ledger mark it. A bad call gets an answer that says what is
wrong, never an exception: the agent loop goes on and the model can call again.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, cast, runtime_checkable

from compaction.injection import UNTRUSTED, addresses_model
from compaction.recall._memory import IdRange
from compaction.recall._snippets import fit_answer, marked, message_parts, snippet
from compaction.recall.text import Phrase, archive_text, query_words
from compaction.store import ArchiveHit, ArchiveSearch, SessionStore
from compaction.tokens import TokenCounter

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_PAGE_SIZE",
    "MAX_QUERY_CHARS",
    "RECALL_TOOL_NAME",
    "RecallAnswer",
    "RecallSource",
    "StoreRecall",
    "answer_recall",
    "recall",
    "recall_tool",
]

RECALL_TOOL_NAME: Final = "recall"
DEFAULT_MAX_TOKENS: Final = 2_000
DEFAULT_PAGE_SIZE: Final = 8
MAX_QUERY_CHARS: Final = 1_000
_MIN_MAX_TOKENS: Final = 200
_ARGUMENTS: Final = ("query", "archive_id", "page", "from_id", "to_id")

_DESCRIPTION: Final = (
    "Search the earlier conversation compacted out of your context (the original messages behind the "
    "summary, tool output included). `query`: an exact identifier (path, URL, hash, ticket id, command, "
    "error) finds every message holding it verbatim; words find related messages. `archive_id` (named in "
    "the summary or a hit) reads one message in full. `from_id`/`to_id`: search only that archive-id range "
    "(a topic index line's). Long answers are paged: call again with `page`."
)
_PARAMETERS: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "An exact identifier or a few words."},
        "archive_id": {"type": "string", "description": "The archive id of a message to read in full."},
        "page": {"type": "integer", "minimum": 1, "description": "Page of the answer (default 1)."},
        "from_id": {"type": "string", "description": "First archive id searched."},
        "to_id": {"type": "string", "description": "Last archive id searched."},
    },
    "additionalProperties": False,
}


def recall_tool(format: Literal["openai", "anthropic"] = "openai") -> dict[str, Any]:
    """The ``recall`` tool definition: an OpenAI Chat Completions ``tools`` entry, or an Anthropic
    Messages ``tools`` entry (``input_schema``). A new dict each time (callers may modify it).

    >>> recall_tool()["function"]["name"], sorted(recall_tool("anthropic")["input_schema"]["properties"])
    ('recall', ['archive_id', 'from_id', 'page', 'query', 'to_id'])
    """
    parameters = json.loads(json.dumps(_PARAMETERS))
    if format == "anthropic":
        return {"name": RECALL_TOOL_NAME, "description": _DESCRIPTION, "input_schema": parameters}
    if format != "openai":
        raise ValueError(f"format must be 'openai' or 'anthropic', got {format!r}")
    return {
        "type": "function",
        "function": {"name": RECALL_TOOL_NAME, "description": _DESCRIPTION, "parameters": parameters},
    }


@runtime_checkable
class RecallSource(Protocol):
    """Where recall searches: :class:`~compaction.recall.MemoryRecallIndex` or :class:`StoreRecall`."""

    def search(self, query: str, *, limit: int = DEFAULT_PAGE_SIZE, offset: int = 0) -> ArchiveSearch:
        """The archived messages matching ``query``, best first (``ValueError`` for a blank query).

        A source that can search an archive-id range also takes ``within=(first, last)`` (both
        built-in sources do); recall passes it only for a call that names a range."""
        ...

    def fetch(self, archive_id: str) -> ArchiveHit | None:
        """One archived message with its whole searchable text, or None."""
        ...


_WARM_QUERY = "x"  # one short word: both word indexes are built, and the search itself is ~1 ms


@dataclass(frozen=True)
class StoreRecall:
    """A session of a :class:`~compaction.store.SessionStore` as a :class:`RecallSource`.

    Archive ids may repeat across sessions; everything here is scoped to ``session_id``."""

    store: SessionStore
    session_id: str

    def search(
        self, query: str, *, limit: int = DEFAULT_PAGE_SIZE, offset: int = 0, within: IdRange | None = None
    ) -> ArchiveSearch:
        if within is None:  # a store written before ranges takes no ``within``
            return self.store.search_archive(self.session_id, query, limit=limit, offset=offset)
        if not _takes_within(self.store.search_archive):
            raise ValueError("this store cannot search an archive-id range")
        return self.store.search_archive(self.session_id, query, limit=limit, offset=offset, within=within)

    def warm(self) -> None:
        """Bring the session's recall index up to date now (the store's first search of a session
        indexes its whole archive, later ones the rows archived since): call it off the request
        path after a compaction archived messages, so the next recall does not wait for it."""
        self.store.search_archive(self.session_id, _WARM_QUERY, limit=0)

    def fetch(self, archive_id: str) -> ArchiveHit | None:
        message = self.store.archived(archive_id, session_id=self.session_id)
        if message is None:
            return None
        role, text = archive_text(message)
        return ArchiveHit(archive_id, role, text)


@dataclass(frozen=True)
class RecallAnswer:
    """The answer to one recall call: ``text`` is what the model reads (bounded, redacted).

    ``hits`` are the page's hits of a search, or the message read by archive id; ``total`` how many
    messages match (1 for a read), ``verbatim`` how many of them hold the query verbatim; ``page``
    and ``pages`` count hits pages of a search or parts of a message. ``error`` says what was wrong
    with the call (``text`` then starts with ``recall error:``); ``not_found`` marks an unknown
    archive id."""

    text: str
    hits: tuple[ArchiveHit, ...] = ()
    total: int = 0
    verbatim: int = 0
    page: int = 1
    pages: int = 0
    error: str | None = None
    not_found: bool = False


def _error(message: str, *, page: int = 1, pages: int = 0, not_found: bool = False) -> RecallAnswer:
    return RecallAnswer(f"recall error: {message}", page=page, pages=pages, error=message, not_found=not_found)


@dataclass(frozen=True)
class _Request:
    query: str | None
    archive_id: str | None
    page: int | None
    within: IdRange | None = None


class _BadCall(ValueError):
    pass


def answer_recall(
    source: RecallSource,
    arguments: str | Mapping[str, Any],
    *,
    counter: TokenCounter | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> str:
    """The text answering one ``recall`` call with ``arguments`` (the call's JSON text or object):
    :func:`recall` ``(...).text``.

    >>> from compaction.recall import MemoryRecallIndex
    >>> index = MemoryRecallIndex({"m_1": {"role": "user", "content": "Deploy with make deploy ENV=staging"}})
    >>> print(answer_recall(index, '{"query": "make deploy"}'))
    recall: 1 archived message holds "make deploy" verbatim (page 1 of 1).
    [1] archive id m_1 (user):
    Deploy with make deploy ENV=staging
    >>> print(answer_recall(index, {"page": 2}))
    recall error: give `query` (an exact identifier or words) or `archive_id` (a message to read in full).
    """
    return recall(source, arguments, counter=counter, max_tokens=max_tokens, page_size=page_size).text


def recall(
    source: RecallSource,
    arguments: str | Mapping[str, Any],
    *,
    counter: TokenCounter | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> RecallAnswer:
    """Answer one ``recall`` call with ``arguments`` (the call's JSON text or object).

    The text is at most ``max_tokens`` tokens by ``counter`` (a chars/4 estimate without one);
    search answers show ``page_size`` hits a page. Bad arguments, an unknown archive id or a page
    past the end get an answer whose text starts ``recall error:`` and says what to do instead.

    >>> from compaction.recall import MemoryRecallIndex
    >>> index = MemoryRecallIndex({"m_1": {"role": "tool", "tool_call_id": "c1", "content": "ok " * 3000}})
    >>> answer = recall(index, {"archive_id": "m_1", "page": 2}, max_tokens=500)
    >>> answer.page, answer.pages, answer.hits[0].role, answer.text.splitlines()[0]
    (2, 5, 'tool', 'recall: archive id m_1 (tool), part 2 of 5.')
    """
    if max_tokens < _MIN_MAX_TOKENS:
        raise ValueError(f"max_tokens must be >= {_MIN_MAX_TOKENS}, got {max_tokens}")
    if page_size < 1:
        raise ValueError(f"page_size must be >= 1, got {page_size}")
    count = counter.count_text if counter is not None else _estimate
    try:
        request = _parse(arguments)
        if request.archive_id is not None:
            return _read(source, request, count, max_tokens)
        assert request.query is not None
        return _search(source, request.query, request.page or 1, count, max_tokens, page_size, request.within)
    except _BadCall as exc:
        return _error(str(exc))


def _estimate(text: str) -> int:
    return math.ceil(len(text) / 4)


def _parse(arguments: str | Mapping[str, Any]) -> _Request:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError as exc:
            raise _BadCall(
                f'the arguments are not valid JSON ({exc}); send an object like {{"query": "..."}}'
            ) from None
    if not isinstance(arguments, Mapping):
        raise _BadCall(f"the arguments must be a JSON object, got {type(arguments).__name__}")
    unknown = sorted(str(key) for key in arguments if key not in _ARGUMENTS)
    if unknown:
        raise _BadCall(
            f"unknown argument {', '.join(map(repr, unknown))}; the arguments are query, archive_id, page, "
            "from_id, to_id"
        )
    query = _text_argument(arguments, "query")
    if query is not None and len(query) > MAX_QUERY_CHARS:
        raise _BadCall(f"the query is {len(query):,} characters; search for at most {MAX_QUERY_CHARS:,}")
    archive_id = _text_argument(arguments, "archive_id")
    first, last = _text_argument(arguments, "from_id"), _text_argument(arguments, "to_id")
    within = None if first is None and last is None else (first, last)
    if within is not None and query is None:
        raise _BadCall("from_id and to_id bound a search: give `query` too (a topic index line's words).")
    if query is None and archive_id is None:
        raise _BadCall("give `query` (an exact identifier or words) or `archive_id` (a message to read in full).")
    page = arguments.get("page")
    if isinstance(page, str) and page.strip().isdigit():
        page = int(page)
    if page is not None and (isinstance(page, bool) or not isinstance(page, int) or page < 1):
        raise _BadCall(f"page must be a whole number from 1, got {page!r}")
    return _Request(query, archive_id, page, within)


def _text_argument(arguments: Mapping[str, Any], name: str) -> str | None:
    value = arguments.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _BadCall(f"{name} must be a string, got {type(value).__name__} {json.dumps(value)[:60]}")
    return value.strip() or None


# --- search ------------------------------------------------------------------------------


def _find(source: RecallSource, query: str, offset: int, page_size: int, within: IdRange | None) -> ArchiveSearch:
    """One page of the source's hits, within the archive-id range when there is one."""
    if within is None:
        return source.search(query, limit=page_size, offset=offset)
    if not _takes_range(source):
        raise _BadCall("this archive cannot search an archive-id range; call again without from_id and to_id.")
    try:
        return cast(_RangeSource, source).search(query, limit=page_size, offset=offset, within=within)
    except ValueError as exc:
        raise _BadCall(f"{exc}; use the archive ids of a topic index line or of a recall hit.") from None


def _head(found: ArchiveSearch, shown: str, page: int, pages: int, within: IdRange | None) -> str:
    """The answer's first line: how many messages match, how, and which page this is."""
    noun = "message" if found.total == 1 else "messages"
    verb = "holds" if found.total == 1 else "hold"
    scope = "" if within is None else f" {_range_text(within)}"
    if found.verbatim:
        return f"recall: {found.total:,} archived {noun}{scope} {verb} {shown} verbatim (page {page} of {pages})."
    where = "archived message" if within is None else f"archived message {_range_text(within)}"
    share = "message shares" if found.total == 1 else "messages share"
    return (
        f"recall: no {where} holds {shown} verbatim; {found.total:,} {share} its words, "
        f"best first (page {page} of {pages})."
    )


def _tail(found: ArchiveSearch, shown: str, page: int, pages: int, within: IdRange | None) -> str:
    """The answer's last line: the call for the next page, and whether the search stopped early."""
    more = (
        ""
        if within is None
        else "".join(
            f", {json.dumps(name)}: {json.dumps(value, ensure_ascii=False)}"
            for name, value in zip(("from_id", "to_id"), within, strict=True)
            if value is not None
        )
    )
    tail = f'More: recall {{"query": {shown}{more}, "page": {page + 1}}}.' if page < pages else ""
    if not found.complete:
        budget = (
            "The search stopped at its budget: these are the matches among the most recent messages; "
            "a longer or more exact query finds older ones."
        )
        tail = f"{tail} {budget}" if tail else budget
    return tail


def _search(
    source: RecallSource,
    query: str,
    page: int,
    count: Callable[[str], int],
    max_tokens: int,
    page_size: int,
    within: IdRange | None = None,
) -> RecallAnswer:
    found = _find(source, query, (page - 1) * page_size, page_size, within)
    pages = math.ceil(found.total / page_size)
    shown = json.dumps(query, ensure_ascii=False)
    if found.total == 0:
        where = "archived message" if within is None else f"archived message {_range_text(within)}"
        text = (
            f"recall: no {where} matches {shown}. Try a shorter exact piece of it (a file name, an id) or other words."
        )
        return RecallAnswer(text, page=page)
    if not found.hits:
        return _error(f"page {page} is past the last page ({pages}) for {shown}.", page=page, pages=pages)
    head = _head(found, shown, page, pages, within)
    tail = _tail(found, shown, page, pages, within)
    words = query_words(query)
    phrase = Phrase(query)

    def render(chars: int) -> str:
        lines = [head]
        for rank, hit in enumerate(found.hits, start=found.offset + 1):
            lines.append(f"[{rank}] archive id {hit.archive_id} ({hit.role}):")
            lines.append(snippet(hit, phrase, words, chars))
        if tail:
            lines.append(tail)
        return "\n".join(lines)

    text = fit_answer(render, count, max_tokens, start=max_tokens * 4 // len(found.hits))
    return RecallAnswer(text, found.hits, found.total, found.verbatim, page, pages)


class _RangeSource(Protocol):
    def search(self, query: str, *, limit: int, offset: int, within: IdRange) -> ArchiveSearch: ...


def _takes_range(source: RecallSource) -> bool:
    """Whether ``source.search`` takes ``within`` (a source written before ranges may not)."""
    return _takes_within(source.search)


def _takes_within(search: Callable[..., ArchiveSearch]) -> bool:
    try:
        parameters = inspect.signature(search).parameters
    except (TypeError, ValueError):
        return False
    return "within" in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def _range_text(within: IdRange) -> str:
    first, last = within
    if first is not None and last is not None:
        return f"from {first} to {last}"
    return f"from {first}" if first is not None else f"up to {last}"


# --- read one message --------------------------------------------------------------------


def _read(source: RecallSource, request: _Request, count: Callable[[str], int], max_tokens: int) -> RecallAnswer:
    assert request.archive_id is not None
    hit = source.fetch(request.archive_id)
    shown = json.dumps(request.archive_id, ensure_ascii=False)
    if hit is None:
        return _error(
            f"no archived message has the id {shown}. Use an id named in the summary or in a recall hit, "
            "or search with `query`.",
            not_found=True,
        )

    def frame(page: int, pages: int, note: str) -> tuple[str, str]:
        head = f"recall: archive id {hit.archive_id} ({hit.role}), part {page} of {pages}.{note}"
        more = f'\nMore: recall {{"archive_id": {shown}, "page": {page + 1}}}.' if page < pages else ""
        return head, more

    head, more = frame(99, 100, _NOT_HELD)
    # Room for the untrusted marks the part may get (a few tokens each).
    marks = sum(map(addresses_model, hit.text.split("\n"))) if addresses_model(hit.text) else 0
    parts = message_parts(hit.text, count, max_tokens - count(head + more) - 8 - marks * count(UNTRUSTED))
    page = request.page
    note = ""
    if page is None and request.query is not None:
        span = Phrase(request.query).find(hit.text)
        if span is None:
            note = _NOT_HELD
        else:
            page = next(i for i, (begin, end) in enumerate(parts, start=1) if span[0] < end or end == len(hit.text))
            note = f" Part {page} holds the query."
    page = page or 1
    if page > len(parts):
        return _error(
            f"page {page} is past the last part ({len(parts)}) of archive id {shown}.", page=page, pages=len(parts)
        )
    begin, end = parts[page - 1]
    head, more = frame(page, len(parts), note)
    return RecallAnswer(f"{head}\n{marked(hit.text, begin, end)}{more}", (hit,), 1, 0, page, len(parts))


_NOT_HELD: Final = " The query is not in this message."
