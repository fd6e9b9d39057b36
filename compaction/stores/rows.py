"""Rows in and out of the SQL stores' tables: argument checks, JSON and text in and out of columns
(escaped where a database cannot hold a character: :mod:`compaction._store_text`), rows to
:mod:`compaction.store` records, the compaction's caller-error checks and the archive's searchable
text. No SQL: :class:`compaction.stores.sql.SQLSessionStore` runs the statements.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from compaction._store_text import from_column, json_column, to_column
from compaction.store import CompactedTail, CompactionEntry, SessionContext, StoredMessage

__all__ = [
    "NO_ARCHIVE",
    "ContextHead",
    "CountedBatch",
    "SessionNotFound",
    "archive_rows",
    "check_compaction",
    "check_counted",
    "check_model",
    "check_owner",
    "check_search",
    "check_session_id",
    "context_after",
    "dumps",
    "dumps_tail",
    "entry_row",
    "head_of",
    "history_entries",
    "loads_message",
    "loads_tail",
    "message_rows",
    "prepared_state",
    "session_context",
    "stored_messages",
    "summary_column",
]

NO_ARCHIVE: Final[Mapping[str, Mapping[str, Any]]] = MappingProxyType({})


@dataclass(frozen=True)
class CountedBatch:
    """An append's token counts, one per message, as a writer counted them (each message on its
    own, with the session's counter, in the context's format), and the session state they were
    counted against: the stored ``model`` and ``context_format`` the writer read
    (:class:`ContextHead`). The store adds their sum to the session's running total only while the
    session still has that model and format, and keeps the per-message counts in the rows.

    ``new_format`` is the context's format after the batch (the first message that shows one);
    ``keep_total`` False drops the running total instead (the writer knows the batch changes what
    earlier messages count, e.g. the first message that shows a format other than the default)."""

    tokens: tuple[int, ...]
    model: str | None
    context_format: str | None
    new_format: str | None
    keep_total: bool = True


@dataclass(frozen=True)
class ContextHead:
    """A session's row without its messages: what an append needs to know in O(1).

    ``context_tokens`` is the running total of the context's tokens as the writer that set it
    counted them (None: unknown; recounted from the whole context and set again with
    ``set_context_tokens``); ``context_format`` the format of the context's first message that
    shows one (None: none does yet); message rows with an id at or below ``tokens_from_id`` hold
    counts made for another model or format (ignore them); ``last_id`` the session's newest
    message id (0: none)."""

    session_id: str
    system: Any
    model: str | None
    summary: str | None
    summary_through_id: int | None
    context_tokens: int | None
    context_format: str | None
    tokens_from_id: int
    last_id: int


class SessionNotFound(KeyError):
    """The session id is not in the store. A :class:`KeyError`, so ``except KeyError`` catches it.

    >>> str(SessionNotFound("s1"))
    "no session 's1' in this store (create it with create_session first)"
    """

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.session_id = session_id

    def __str__(self) -> str:
        return f"no session {self.session_id!r} in this store (create it with create_session first)"


def dumps(value: Any, what: str) -> str:
    """``value`` as compact UTF-8 JSON, or a ValueError that names ``what`` could not be stored."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{what} is not JSON-serializable: {exc}") from exc
    return json_column(text)  # lone surrogates as \uXXXX escapes: UTF-8 cannot encode them


def loads_message(text: str, error: type[Exception] = ValueError) -> dict[str, Any]:
    """A stored message column back as a dict; ``error`` (the store's database error) otherwise."""
    value = json.loads(text)
    if not isinstance(value, dict):  # only dicts are ever written
        raise error(f"stored message is {type(value).__name__}, not a JSON object")
    return value


def check_session_id(session_id: object) -> str:
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"session_id must be a non-empty str, got {session_id!r}")
    return session_id


def check_model(model: object) -> str:
    if not isinstance(model, str) or not model:
        raise ValueError(f"model must be a non-empty str, got {model!r}")
    return model


def message_rows(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """An append's batch as JSON texts, checked before anything is written: ``TypeError`` for a
    lone message or an item that is not a mapping, ``ValueError`` naming the index of one that is
    not JSON-serializable."""
    if isinstance(messages, Mapping | str | bytes):
        raise TypeError(f"messages must be a sequence of message dicts, got one {type(messages).__name__}")
    rows: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TypeError(f"message {index} of the batch is a {type(message).__name__}, not a mapping")
        rows.append(dumps(dict(message), f"message {index} of the batch"))
    return rows


def stored_messages(rows: Sequence[Sequence[Any]], error: type[Exception] = ValueError) -> list[StoredMessage]:
    """``(id, message, created_at[, tokens])`` rows as :class:`StoredMessage`, in row order."""
    return [
        StoredMessage(
            id=row[0],
            message=loads_message(row[1], error),
            created_at=row[2],
            tokens=None if len(row) < 4 or row[3] is None else int(row[3]),
        )
        for row in rows
    ]


def head_of(session_id: str, row: Sequence[Any]) -> ContextHead:
    """A ``(system, model, summary, summary_through_id, context_tokens, context_format,
    tokens_from_id, last_id)`` row as a :class:`ContextHead`."""
    system_json, model, summary, through, tokens, fmt, tokens_from, last = row
    return ContextHead(
        session_id=session_id,
        system=None if system_json is None else json.loads(system_json),
        model=model,
        summary=None if summary is None else from_column(summary),
        summary_through_id=through,
        context_tokens=None if tokens is None else int(tokens),
        context_format=fmt,
        tokens_from_id=int(tokens_from or 0),
        last_id=int(last or 0),
    )


def check_counted(counted: CountedBatch | None, size: int) -> None:
    """``ValueError`` unless ``counted`` has one non-negative count per message of the batch."""
    if counted is None:
        return
    if len(counted.tokens) != size:
        raise ValueError(f"counted.tokens has {len(counted.tokens)} counts for a batch of {size} messages")
    for index, tokens in enumerate(counted.tokens):
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise ValueError(f"counted.tokens[{index}] must be a non-negative int, got {tokens!r}")


def session_context(
    session_id: str, head: Sequence[Any], rows: Sequence[Sequence[Any]], error: type[Exception] = ValueError
) -> SessionContext:
    """The :class:`SessionContext` of a ``(system, model, summary, summary_through_id, tail)``
    session row and its ``(id, message, created_at)`` message rows after :func:`context_after`."""
    system_json, model, summary, through, tail_json = head
    kept, tail_through = loads_tail(tail_json, error)
    return SessionContext(
        session_id=session_id,
        summary=None if summary is None else from_column(summary),
        summary_through_id=through,
        messages=(*kept, *stored_messages(rows, error)),
        system=None if system_json is None else json.loads(system_json),
        model=model,
        tail_through_id=tail_through,
    )


def context_after(head: Sequence[Any]) -> int:
    """The id after which a session's stored messages follow its context's tail: the tail's
    ``through_id``, else ``summary_through_id`` (0 for neither), for a session row as
    :func:`session_context` reads it."""
    tail_json, through = head[4], head[3]
    if tail_json is not None:
        return int(json.loads(tail_json)["through_id"])
    return 0 if through is None else int(through)


def dumps_tail(tail: CompactedTail | None, new_through_id: int) -> str | None:
    """A compaction's tail as the JSON text of the session's ``tail`` column (None: no tail), checked
    first: ``ValueError`` when ``through_id`` is below ``new_through_id``, a message id is outside
    ``new_through_id .. through_id`` or smaller than the one before it, or a message is not a
    JSON-serializable mapping (named by its index in the tail)."""
    if tail is None:
        return None
    through = tail.through_id
    if isinstance(through, bool) or not isinstance(through, int) or through < new_through_id:
        raise ValueError(f"tail.through_id must be a message id >= new_through_id {new_through_id}, got {through!r}")
    rows: list[list[Any]] = []
    previous = new_through_id
    for index, kept in enumerate(tail.messages):
        if isinstance(kept.id, bool) or not isinstance(kept.id, int) or not previous <= kept.id <= through:
            raise ValueError(
                f"tail message {index}: id {kept.id!r} must be between {previous} and tail.through_id {through}"
            )
        if not isinstance(kept.message, Mapping):
            raise ValueError(f"tail message {index} is a {type(kept.message).__name__}, not a mapping")
        rows.append([kept.id, dict(kept.message)])
        previous = kept.id
    return dumps({"through_id": through, "messages": rows}, "the compaction's tail")


def loads_tail(text: str | None, error: type[Exception] = ValueError) -> tuple[tuple[StoredMessage, ...], int | None]:
    """The ``tail`` column back as (messages, through_id); ``((), None)`` for no tail."""
    if text is None:
        return (), None
    value = json.loads(text)
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        raise error("stored tail is not a JSON object with a messages list")
    kept = []
    for row in value["messages"]:
        if not (isinstance(row, list) and len(row) == 2 and isinstance(row[1], dict)):
            raise error("stored tail message is not an [id, message] pair")
        kept.append(StoredMessage(id=int(row[0]), message=row[1]))
    return tuple(kept), int(value["through_id"])


def prepared_state(row: Sequence[Any] | None) -> tuple[int, dict[str, Any] | None]:
    """A ``(version, state)`` prepared row as :meth:`load_prepared` returns it; ``(0, None)`` for no row."""
    if row is None:
        return 0, None
    state = json.loads(row[1])
    return int(row[0]), state if isinstance(state, dict) else None


def check_compaction(expected_through_id: int | None, new_through_id: int, entry: CompactionEntry) -> str:
    """The caller errors of ``save_compaction`` (``ValueError``: retrying could never succeed);
    the entry's record as JSON."""
    if isinstance(new_through_id, bool) or not isinstance(new_through_id, int):
        raise ValueError(f"new_through_id must be a message id (int), got {new_through_id!r}")
    if expected_through_id is not None and new_through_id <= expected_through_id:
        raise ValueError(
            f"new_through_id {new_through_id} must be above expected_through_id {expected_through_id}: "
            "a compaction only moves summary_through_id forward"
        )
    if entry.summary_through_id != new_through_id:
        raise ValueError(
            f"entry.summary_through_id ({entry.summary_through_id!r}) must equal new_through_id ({new_through_id})"
        )
    return dumps(dict(entry.record), "entry.record")


def check_owner(
    owner: Sequence[Any] | None, new_through_id: int, session_id: str, what: str = "new_through_id"
) -> None:
    """``ValueError`` unless ``owner`` (the ``session_id`` row of message ``new_through_id``) is this
    session; ``what`` names the argument in the message."""
    if owner is None or owner[0] != session_id:
        where = "no message" if owner is None else f"a message of session {owner[0]!r}"
        raise ValueError(f"{what} {new_through_id} is {where}, not a message of session {session_id!r}")


def archive_rows(session_id: str, archive: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str, str, str, str]]:
    """``(session_id, archive_id, message JSON, role, searchable text)`` for each archived message;
    the text as :func:`compaction.recall.text.searchable_archive` renders it (the agent's own
    recall traffic left out), escaped for a text column."""
    from compaction.recall.text import searchable_archive

    messages = [dumps(dict(message), f"archived message {archive_id!r}") for archive_id, message in archive.items()]
    return [
        (session_id, archive_id, message, role, to_column(text))
        for message, (archive_id, role, text) in zip(messages, searchable_archive(archive), strict=True)
    ]


def summary_column(summary: str | None) -> str | None:
    """A summary as a text column holds it (:func:`compaction._store_text.to_column`)."""
    return None if summary is None else to_column(summary)


def entry_row(session_id: str, entry: CompactionEntry, record_json: str) -> tuple[Any, ...]:
    """The ``compactions`` row's values, in column order (session_id, at, tokens_before,
    tokens_after, messages_compacted, fallback_level, summary, summary_through_id, trigger, record)."""
    return (
        session_id,
        float(entry.at),
        int(entry.tokens_before),
        int(entry.tokens_after),
        int(entry.messages_compacted),
        str(entry.fallback_level),
        summary_column(entry.summary),
        entry.summary_through_id,
        str(entry.trigger),
        record_json,
    )


def history_entries(rows: Sequence[Sequence[Any]]) -> list[CompactionEntry]:
    """``compactions`` rows (at, tokens_before, tokens_after, messages_compacted, fallback_level,
    summary, summary_through_id, trigger, record) as :class:`CompactionEntry`."""
    return [
        CompactionEntry(
            at=row[0],
            tokens_before=row[1],
            tokens_after=row[2],
            messages_compacted=row[3],
            fallback_level=row[4],
            summary=None if row[5] is None else from_column(row[5]),
            summary_through_id=row[6],
            record=json.loads(row[8]),
            trigger=row[7],
        )
        for row in rows
    ]


def check_search(query: object, limit: int, offset: int) -> str:
    """The stripped query; ``ValueError`` for a blank one or a negative ``limit`` / ``offset``."""
    text = query.strip() if isinstance(query, str) else ""
    if not text:
        raise ValueError("the query is empty")
    if limit < 0 or offset < 0:
        raise ValueError(f"limit and offset must be >= 0, got {limit} and {offset}")
    return text
