"""Messages entering a managed session's context: checked, converted and counted once, stored.

:func:`append_messages` is what :meth:`~compaction.middleware.ContextManager.append` does: each
message is read into canonical form and counted once, here, and carried in the context with
its count (:class:`~compaction.middleware.context.ContextEntry`); in store mode the batch is stored
first, with those counts when the store keeps them (so a service reading the session knows its size
without counting it again), and a new session's leading system messages become its system prompt.
:func:`open_stored` opens a stored session: the messages given to the manager are appended, then
the context is loaded from the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compaction.adapters import message_format
from compaction.errors import TranscriptError
from compaction.middleware import store_mode
from compaction.middleware.context import ContextEntry, canonical, payload_of, split_leading_system
from compaction.middleware.prescan import scan_on_entry
from compaction.middleware.recall import weave_answers
from compaction.middleware.state import SessionState
from compaction.store import SessionStore
from compaction.transcript import Message

__all__ = ["append_messages", "check_messages", "open_stored"]


def check_messages(messages: Sequence[Any]) -> None:
    """``TranscriptError`` naming the index of an item that is not a message object."""
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TranscriptError(f"expected a message object, got {type(message).__name__}", index=position)


def append_messages(state: SessionState, messages: Sequence[Mapping[str, Any]]) -> None:
    """Append ``messages`` to the context (and to the store), each converted and counted once.
    ``recall`` answers waiting for the next user message are woven in first."""
    if not messages:
        return
    check_messages(messages)
    if state.recall_pending is not None:
        messages, state.recall_pending = weave_answers(messages, state.recall_pending, state.format)
    store = state.store
    if store is not None and state.system is None and not state.context and state.summary is None:
        system, rest = split_leading_system(messages)
        if system is not None:
            state.system = system
            store.create_session(state.session_id, system=system)
            state.refresh_fixed()
            messages = tuple(rest)
            if not messages:
                return
    canon = [canonical(m) for m in messages]
    copies = [dict(m) for m in messages]
    base = state.base
    counts = [base.count_message(c) for c in canon]
    ids: list[int | None] = [None] * len(copies)
    if store is not None:
        ids = list(_store_batch(state, store, list(zip(copies, canon, counts, strict=True))))
    reading = state.reading
    start = len(state.context)
    for message, canonical_message, store_id, tokens in zip(copies, canon, ids, counts, strict=True):
        entry = ContextEntry(message, store_id, canonical_message, tokens, payload_of(message))
        state.context.append(entry)
        if state.format is None:
            state.format = message_format(message)
        if reading is not None and reading.expect_response:
            reading.expect_response = False
            if message.get("role") == "assistant":
                reading.base_sum += entry.tokens  # the answer is in the reported completion tokens
    scan_on_entry(state, start)


def _store_batch(
    state: SessionState, store: SessionStore, batch: list[tuple[dict[str, Any], Message, int]]
) -> list[int]:
    """Store the batch, with the counts just made when the store keeps them (then a service
    reading the session knows its size without counting it again)."""
    counted = store_mode.appended_counts(store, batch, state.base, state.work.model, state.system, state.format)
    copies = [message for message, _, _ in batch]
    if counted is None:
        return list(store.append(state.session_id, copies))
    return list(store.append(state.session_id, copies, counted=counted))  # type: ignore[call-arg]


def open_stored(state: SessionState, store: SessionStore, messages: Sequence[Mapping[str, Any]]) -> None:
    """Open the stored session: create it if it is new (with the compactor's model), append
    ``messages``, and load the context from the store."""
    system = state.system
    # Leading system messages of a new stored session become its system prompt: stored, they
    # would sit in front of every summarized run and the summary could never move past them.
    if system is None and not store_mode.has_stored_messages(store, state.session_id):
        system, messages = split_leading_system(messages)
        state.system = system
        state.refresh_fixed()
    store.create_session(state.session_id, system=system, model=state.work.model)
    if messages:
        for m in messages:
            canonical(m)  # invalid input fails before anything is stored
        store.append(state.session_id, [dict(m) for m in messages])
    state.load_from_store()
