"""OpenAI Agents SDK: :class:`CompactingSession`, a ``Session`` that compacts its history.

Use it wherever the SDK takes a session (``Runner.run(agent, "...", session=session)``)::

    from compaction import Compactor, CompactionConfig
    from compaction.integrations.openai_agents import CompactingSession

    session = CompactingSession("user-42", Compactor("gpt-4o"), path="agent.db")

Storage. The session's items (Responses-API input items: messages, ``function_call``,
``function_call_output``, ``reasoning``, and any other type) are appended verbatim to a
:class:`~compaction.store.SessionStore` (a :class:`~compaction.sqlite_store.SQLiteSessionStore`
by default), which never deletes anything. ``get_items`` returns the stored summary (one user
message item) followed by the items after ``summary_through_id``; items are returned exactly as
they were added, so nothing is converted back.

Compacting. After each ``add_items`` the history is converted to chat messages (only to count and
summarize it), and when the compactor's threshold is reached the oldest part is summarized: the
summary and the id of the last summarized item are saved with the store's compare-and-swap, the
summarized items' chat forms go to the store's archive (searchable by ``compaction.recall``) and
the originals stay in the store. A ``function_call`` and its ``function_call_output`` are never
separated: each assistant turn (its text, reasoning and calls) becomes one chat message, followed
by its outputs, and the compactor only cuts between such groups.

Deleting. ``pop_item`` and ``clear_session`` append a marker item instead of deleting (the store is
append-only): the marker hides the popped item (or everything before a clear) from
``get_items``; the originals stay stored.

Within one run. The SDK reads a session once per ``Runner.run`` and keeps the run's own items in
memory, so what ``add_items`` compacts takes effect from the next run. For a long tool loop inside
one run, pass ``RunConfig(call_model_input_filter=session.filter_model_input)``: before each model
call the run's input is compacted the same way when it reaches the threshold (in memory only: the
session stores every item and compacts them itself; the summary is reused by later calls of the
run, so each part of the run is summarized once there, and once more when the session compacts
what it stored).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from compaction.compactor import Compactor
from compaction.config import CompactionConfig
from compaction.integrations._responses import ChatView, items_to_chat
from compaction.middleware import store_mode
from compaction.result import CompactionResult
from compaction.sqlite_store import SQLiteSessionStore
from compaction.store import CompactionEntry, SessionStore

if TYPE_CHECKING:  # the SDK's types; the module itself imports nothing from ``agents``
    from agents.memory.session_settings import SessionSettings

__all__ = ["MARKER_TYPE", "ChatView", "CompactingSession", "items_to_chat"]

LOGGER = logging.getLogger("compaction.integrations.openai_agents")

MARKER_TYPE = "compaction.session_marker"
"""The ``type`` of the marker items ``pop_item`` and ``clear_session`` append (never returned)."""


@dataclass(frozen=True)
class _Visible:
    """What ``get_items`` shows: the summary (unless hidden) and the live items with their store ids."""

    summary: str | None
    through_id: int | None
    items: list[dict[str, Any]]
    ids: list[int]


@dataclass(frozen=True)
class _RunSummary:
    """An in-run compaction: the run's input items it summarized and the summary (inner text)."""

    prefix: list[Any]
    summary: str


def _marker(action: Literal["pop", "pop_summary", "clear"], target: int | None = None) -> dict[str, Any]:
    return {"type": MARKER_TYPE, "action": action, "target": target}


class CompactingSession:
    """An OpenAI Agents SDK ``Session`` whose history is compacted when it reaches the threshold.

    ``compactor`` chooses the model (window, tokenizer), the summarizer and the config (store mode
    summarizes a prefix of the history: ``protect_first_user_message`` is turned off and the summary
    is its own message). ``store`` is any :class:`~compaction.store.SessionStore`; without one, a
    :class:`~compaction.sqlite_store.SQLiteSessionStore` at ``path`` (``":memory:"`` by default).
    ``system`` is the agent's instructions when you want them counted (the SDK sends them apart).
    """

    def __init__(
        self,
        session_id: str,
        compactor: Compactor | None = None,
        *,
        store: SessionStore | None = None,
        path: str = ":memory:",
        system: str | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise ValueError(f"session_id must be a non-empty str, got {session_id!r}")
        base = compactor or Compactor("gpt-4o")
        self.session_id = session_id
        self.session_settings = session_settings
        self.compactor = _in_store_mode(base)
        self.store: SessionStore = store if store is not None else SQLiteSessionStore(path)
        self._owns_store = store is None
        self.system = system
        self.last_result: CompactionResult | None = None
        self.run_compactions: list[CompactionResult] = []
        """Compactions of a run's input by :meth:`filter_model_input`, oldest first."""
        self._run_summary: _RunSummary | None = None
        self._lock = asyncio.Lock()
        self.store.create_session(session_id, model=base.model)

    # --- the Session protocol ------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The history: the summary as a user message item, then the items after it, oldest first;
        with ``limit`` (or ``session_settings.limit``), the latest ``limit`` of them."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        visible = self._visible()
        out: list[Any] = [self._summary_item(visible.summary)] if visible.summary else []
        out += visible.items
        if limit is not None:
            out = out[-limit:] if limit > 0 else []
        return out

    async def add_items(self, items: list[Any]) -> None:
        """Append ``items`` (stored verbatim), then compact when the threshold is reached."""
        if not items:
            return
        copies = [dict(item) if isinstance(item, Mapping) else item for item in items]
        items_to_chat(copies)  # an item that is not a mapping fails here, before anything is stored
        async with self._lock:
            self.store.append(self.session_id, copies)
            if self.compactor.config.auto_compaction_enabled:
                await self._compact_if_needed(force=False, instructions=None)

    async def pop_item(self) -> Any | None:
        """Hide and return the newest item (the summary item when nothing follows it); None when empty."""
        async with self._lock:
            visible = self._visible()
            if visible.items:
                self.store.append(self.session_id, [_marker("pop", visible.ids[-1])])
                return visible.items[-1]
            if visible.summary:
                self.store.append(self.session_id, [_marker("pop_summary", visible.through_id)])
                return self._summary_item(visible.summary)
            return None

    async def clear_session(self) -> None:
        """Hide every item and the summary; the store keeps them (it never deletes)."""
        async with self._lock:
            self.store.append(self.session_id, [_marker("clear")])

    # --- within a run ---------------------------------------------------------------------

    async def filter_model_input(self, data: Any) -> Any:
        """``RunConfig(call_model_input_filter=...)``: the run's input, compacted when it reaches
        the threshold (see the module docstring). Fails open: on any error the input is sent as is."""
        model_data = data.model_data
        try:
            items = await self.compact_input(list(model_data.input), model_data.instructions)
        except Exception:
            LOGGER.exception("compacting the run's input failed; sending it as it is")
            return model_data
        return model_data if items is None else replace(model_data, input=items)

    async def compact_input(self, items: list[Any], instructions: str | None = None) -> list[Any] | None:
        """``items`` with their oldest part replaced by a summary item when they reach the threshold
        (a summary made earlier in the run for the same leading items is reused); None when
        ``items`` can go as they are."""
        earlier, rest = None, items
        cached = self._run_summary
        if cached is not None and len(items) >= len(cached.prefix) and items[: len(cached.prefix)] == cached.prefix:
            earlier, rest = cached.summary, items[len(cached.prefix) :]
        config = self.compactor.config
        view = items_to_chat(rest)
        system = [{"role": "system", "content": instructions}] if instructions else []
        head = [store_mode.summary_message(earlier, config)] if earlier else []
        unchanged = None if earlier is None else [self._summary_item(earlier), *rest]
        if not self.compactor.should_compact([*system, *head, *view.messages]).should_compact:
            return unchanged
        request = [*system, *view.messages]
        previous = store_mode.previous_summary_body(earlier, config) if earlier else None
        result = await self.compactor.acompact(request, previous_summary=previous, trigger="threshold")
        through = store_mode.through_from_archive(request, None, [cover[-1] for cover in view.covers], result)
        if not result.compacted or through is None:
            return unchanged
        inner = store_mode.summary_block_text(result.messages, config) or (result.summary or "")
        consumed = len(items) - len(rest) + through + 1
        self._run_summary = _RunSummary(prefix=list(items[:consumed]), summary=inner)
        self.run_compactions.append(result)
        return [self._summary_item(inner), *items[consumed:]]

    # --- compaction ----------------------------------------------------------------------

    async def compact(self, instructions: str | None = None) -> CompactionResult:
        """Compact now, whatever the threshold says (``instructions`` focus the summary)."""
        async with self._lock:
            return await self._compact_if_needed(force=True, instructions=instructions)

    def tokens(self) -> int:
        """The compactor's count of the history as the model will see it."""
        visible = self._visible()
        return self.compactor.count(self._chat(visible).messages)

    def history(self) -> list[CompactionEntry]:
        """This session's compactions, oldest first."""
        return self.store.history(self.session_id)

    def close(self) -> None:
        """Close the store when this session opened it."""
        if self._owns_store and isinstance(self.store, SQLiteSessionStore):
            self.store.close()

    async def _compact_if_needed(self, *, force: bool, instructions: str | None) -> CompactionResult:
        visible = self._visible()
        whole = self._chat(visible).messages
        decision = self.compactor.should_compact(whole)
        tokens = self.compactor.count(whole)
        if not force and not decision.should_compact:
            return self._skip("under the threshold", tokens)
        view = items_to_chat(visible.items)
        request = ([{"role": "system", "content": self.system}] if self.system else []) + view.messages
        config = self.compactor.config
        previous = store_mode.previous_summary_body(visible.summary, config) if visible.summary else None
        trigger: Literal["manual", "threshold"] = "manual" if force else "threshold"
        result = await self.compactor.acompact(request, instructions, previous_summary=previous, trigger=trigger)
        result = replace(result, tokens_before=tokens)
        self.last_result = result
        if not result.compacted:
            return result
        # One store id per chat message: the last item it covers (the through id when it is the
        # last summarized message).
        last_ids = [visible.ids[cover[-1]] for cover in view.covers]
        through = store_mode.through_from_archive(request, None, last_ids, result)
        if through is None:
            return self._set(replace(result, compacted=False, reason="the compaction summarized no stored item"))
        inner = store_mode.summary_block_text(result.messages, config) or (result.summary or "")
        archive = dict(result.archive)
        entry = CompactionEntry(
            at=_now(),
            tokens_before=tokens,
            tokens_after=result.tokens_after,
            messages_compacted=result.messages_removed,
            fallback_level=result.fallback_level,
            summary=inner,
            summary_through_id=through,
            record=result.record,
            trigger=trigger,
        )
        saved = self.store.save_compaction(
            self.session_id,
            expected_through_id=visible.through_id,  # what this compaction read: a CAS against other writers
            new_through_id=through,
            summary=inner,
            entry=entry,
            archive=archive,
        )
        if not saved:
            return self._set(replace(result, compacted=False, reason="another writer compacted this session first"))
        return result

    def _skip(self, reason: str, tokens: int) -> CompactionResult:
        guard = self.compactor.guard
        return CompactionResult(
            messages=[],
            compacted=False,
            reason=reason,
            tokens_before=tokens,
            tokens_after=tokens,
            budget=guard.budget,
            window=guard.window,
            exact_counts=self.compactor.counter.exact,
        )

    def _set(self, result: CompactionResult) -> CompactionResult:
        self.last_result = result
        return result

    # --- reading -------------------------------------------------------------------------

    def _visible(self) -> _Visible:
        context = self.store.context(self.session_id)
        summary = context.summary
        rows: list[tuple[int, dict[str, Any]]] = []
        for stored in context.messages:
            message = stored.message
            if message.get("type") != MARKER_TYPE:
                rows.append((stored.id, message))
                continue
            action = message.get("action")
            if action == "clear":
                rows, summary = [], None
            elif action == "pop_summary":
                summary = None
            elif action == "pop":
                rows = [row for row in rows if row[0] != message.get("target")]
        return _Visible(summary, context.summary_through_id, [m for _, m in rows], [i for i, _ in rows])

    def _chat(self, visible: _Visible) -> ChatView:
        view = items_to_chat(visible.items)
        head: list[dict[str, Any]] = []
        if self.system:
            head.append({"role": "system", "content": self.system})
        if visible.summary:
            head.append(store_mode.summary_message(visible.summary, self.compactor.config))
        return ChatView([*head, *view.messages], [[] for _ in head] + view.covers)

    def _summary_item(self, inner: str) -> dict[str, Any]:
        return dict(store_mode.summary_message(inner, self.compactor.config))

    def __repr__(self) -> str:
        return f"CompactingSession(session_id={self.session_id!r}, model={self.compactor.model!r})"


def _in_store_mode(base: Compactor) -> Compactor:
    """``base`` with the settings a prefix-summarizing store needs (as ``ContextManager`` sets them)."""
    updates: dict[str, Any] = {"protect_first_user_message": False, "summary_placement": "message"}
    config: CompactionConfig = base.config
    if all(getattr(config, key) == value for key, value in updates.items()):
        return base
    return Compactor(
        base.model,
        base.summarizer,
        config.model_copy(update=updates),
        counter=base.counter,
        registry=base.registry,
    )


def _now() -> float:
    import time

    return time.time()
