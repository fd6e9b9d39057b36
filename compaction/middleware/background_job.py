"""The background job that prepares a compaction ahead of the threshold: when it starts, what it
summarizes (the in-memory context or the stored session), and the state it leaves for the swap
(:mod:`compaction.middleware.background`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from compaction._cache import memo_scope
from compaction.budget import recent_tail_cap
from compaction.compactor import Compactor
from compaction.middleware import store_mode
from compaction.middleware.context import request_transcript
from compaction.middleware.failures import failure_reason
from compaction.middleware.prepare import PreparedState, PreparedUsage, PrepareSettings, prefix_key, verbatim_tail
from compaction.middleware.state import SessionState
from compaction.result import CompactionResult
from compaction.store import PreparedStateStore


class Preparer:
    """The background job of one managed session: at most one task, its prepared state and what
    it spent. Its methods take the session's :class:`~compaction.middleware.state.SessionState`."""

    def __init__(self, settings: PrepareSettings) -> None:
        self.settings = settings
        self.state: PreparedState | None = None
        self.usage = PreparedUsage()
        self.task: asyncio.Task[None] | None = None
        self._version = 0  # the persisted copy's version (store mode)
        self._started_at = 0  # context tokens when the last job started
        self._retry_at: int | None = None  # after a failed job: not again before the context is this big
        self.base: PreparedState | None = None  # the state the running job extends (None: from scratch)
        self.rebased: PreparedState | None = None
        """Set when ``base`` was swapped in while the job ran: the job's result then describes the
        swapped-in context (its request was that context's head plus the same messages)."""
        self.seen = 0  # context messages the running job was given (its result cannot cover more)
        self._single: tuple[Compactor, Compactor] | None = None  # (work compactor, its one-call copy)

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    # --- lifecycle ---------------------------------------------------------------------

    def maybe_start(self, session: SessionState, tokens: int) -> bool:
        """Start a job when the context (``tokens``, as the guard compares them) is past the mark
        and enough has aged out since the last one (and none is running). Never waits. Returns
        whether a job was started."""
        if not self.settings.enabled or self.running:
            return False
        trigger = _trigger_tokens(session)
        if trigger is None:
            return False
        if self._retry_at is not None and tokens < self._retry_at:
            return False
        state = self.state  # checked against the context when the job starts and when it is used
        context = session.context
        covered = min(state.covered, len(context)) if state is not None else 0
        config = session.work.config
        keep = config.keep_recent_messages
        tail = min(context.tokens(-keep) if keep else 0, recent_tail_cap(config, session.work.guard.window))
        aged = context.tokens(covered) - tail
        if tokens < self.settings.mark * trigger:
            return False
        if aged <= 0 or (state is not None and aged < self.settings.step * trigger):
            return False
        self._started_at = tokens
        self.base = state
        self.rebased = None
        self.seen = len(session.context)
        self.task = asyncio.get_running_loop().create_task(
            self._run(session), name=f"compaction-prepare:{session.session_id}"
        )
        return True

    async def cancel(self) -> None:
        """Cancel a running job and wait until it is gone (its partial work is dropped)."""
        task, self.task = self.task, None
        if task is None or task.done():
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        self.usage.discarded += 1

    async def finish(self) -> None:
        """Wait for a running job to end (it handles its own errors)."""
        task = self.task
        if task is not None and not task.done():
            await asyncio.wait([task])
        self.task = None

    def abort(self) -> None:
        """Cancel a running job without waiting (from synchronous code); the state is dropped."""
        if self.running:
            assert self.task is not None
            self.task.cancel()
            self.usage.discarded += 1
        self.task = None
        self.discard()

    def one_call(self, session: SessionState) -> Compactor:
        """The manager's compactor with chunks as large as the summarizer's window allows, for the
        calls a threshold turn makes itself (nothing prepared: a turn that jumped past the mark and
        the threshold at once; or the rest after a stale state). One call reading the whole zone
        instead of a round of chunk calls and then a merge: one model latency instead of two on the
        critical path, and the earlier summary is rewritten once either way. Zones larger than the
        summarizer's window are still chunked."""
        work = session.work
        if self._single is None or self._single[0] is not work:
            config = work.config.model_copy(update={"base_chunk_ratio": 1.0})
            single = Compactor(work.model, work.summarizer, config, counter=work.counter, registry=work.registry)
            self._single = (work, single)
        return self._single[1]

    def completion(self, session: SessionState) -> bool:
        """Whether a job that was in flight at the last threshold has landed and its state can be
        swapped in now with no call. The threshold swapped in the older state the job extends, so
        until then the context holds everything the job summarized; swapping it in brings the
        context down to what a compaction on demand leaves, instead of carrying those messages
        (and an earlier next threshold, and one more summary rewrite) into the next cycle."""
        state = self.state
        if session.store is not None or state is None or not state.completes or self.running:
            return False
        if self.valid_state(session) is None:
            return False
        return fits(session, candidate_tokens(session, state), self.settings.accept)

    def discard(self) -> None:
        if self.state is not None:
            self.usage.discarded += 1
        self.state = None

    async def _run(self, session: SessionState) -> None:
        try:
            # In the session's memos, like a compaction on demand: what the appends scanned is
            # read, not scanned again (the scans are pure, and the scope is safe to share).
            with memo_scope(session.memos):
                state = await (
                    _prepare_stored(self, session) if session.store is not None else _prepare_memory(self, session)
                )
            if state is None:
                return
            if session.store is not None and isinstance(session.store, PreparedStateStore):
                saved = session.store.save_prepared(
                    session.session_id, expected_version=self._version, state=state.to_json()
                )
                if saved is None:  # another process saved one first: take it if it still matches
                    self.usage.discarded += 1
                    self.load(session)
                    return
                self._version = state.version = saved
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a failed background job only means the threshold compacts on demand
            reason = failure_reason(exc)
            session.logger.warning("Background compaction failed: %s; the threshold will compact on demand", reason)
            trigger = _trigger_tokens(session) or 0
            self._retry_at = self._started_at + int(self.settings.step * trigger)  # not again every turn
            return
        self._retry_at = None
        self.state = state
        session.logger.info(
            "Compaction prepared in the background: %s messages covered, %s calls, %s summarizer tokens "
            "(%s spent in the background so far)",
            state.covered,
            state.result.llm_calls,
            f"{state.result.summarizer_input_tokens + state.result.summarizer_output_tokens:,}",
            f"{self.usage.tokens:,}",
        )

    # --- the state ---------------------------------------------------------------------

    def valid_state(self, session: SessionState) -> PreparedState | None:
        """The prepared state if it still describes the context's first messages, else None (and
        it is dropped)."""
        state = self.state
        if state is None:
            return None
        ok = state.covered <= len(session.context) and state.key == _key(session, state.covered)
        if ok and session.store is not None:
            ok = state.base_through_id == session.through_id and _position(session, state.through_id) == state.covered
        if not ok:
            session.logger.info("Background-prepared summary discarded: the messages it covers changed")
            self.discard()
            return None
        return state

    def load(self, session: SessionState) -> None:
        """Store mode: adopt the persisted state (another process's, or ours before a restart)
        when it matches this context."""
        store = session.store
        if store is None or not isinstance(store, PreparedStateStore):
            return
        self._version, data = store.load_prepared(session.session_id)
        self.state = None
        if not data or not isinstance(data.get("through_id"), int) or not isinstance(data.get("summary"), str):
            return
        covered = _position(session, data["through_id"])
        if covered is None or covered != data.get("covered"):
            return
        record = data.get("record") if isinstance(data.get("record"), Mapping) else {}
        archive = data.get("archive") if isinstance(data.get("archive"), Mapping) else {}
        result = CompactionResult(
            messages=[],
            compacted=True,
            reason="prepared in the background",
            tokens_before=0,
            tokens_after=0,
            budget=session.work.guard.budget,
            window=session.work.guard.window,
            exact_counts=session.work.counter.exact,
            summary=data["summary"],
            fallback_level=str((record or {}).get("fallback_level", "full")),  # type: ignore[arg-type]
            record=dict(record or {}),
        )
        self.state = PreparedState(
            key=str(data.get("key")),
            covered=covered,
            head=[store_mode.summary_message(data["summary"], session.work.config)],
            system=None,
            result=result,
            archive={str(k): dict(v) for k, v in (archive or {}).items()},
            messages_removed=int(data.get("messages_removed", 0)),
            through_id=data["through_id"],
            base_through_id=data.get("base_through_id"),
            summary=data["summary"],
            version=self._version,
        )
        self.valid_state(session)

    def clear_persisted(self, session: SessionState) -> None:
        """Store mode, after the state was used or went stale: clear the saved copy (CAS)."""
        store = session.store
        if store is None or not isinstance(store, PreparedStateStore):
            return
        version = store.save_prepared(session.session_id, expected_version=self._version, state=None)
        self._version = version if version is not None else store.load_prepared(session.session_id)[0]


def count_context(session: SessionState) -> int:
    request, system, _ = session.request(session.context.messages())
    return session.work.count(request, system=system, tools=session.tools_after_compaction())


def _trigger_tokens(session: SessionState) -> int | None:
    config = session.work.config
    if not config.enabled or config.threshold == 0:
        return None
    guard = session.work.guard
    point = guard.threshold_tokens if guard.threshold_tokens is not None else guard.budget
    return min(point, guard.budget)


def _key(session: SessionState, covered: int) -> str:
    guard = session.work.guard
    return prefix_key(session.context.messages(0, covered), session.system, session.work.model, guard.window)


def _position(session: SessionState, through_id: int | None) -> int | None:
    """Store mode: how many context messages end with the stored message ``through_id`` (and the
    messages a compaction added after it, which carry its id)."""
    if through_id is None:
        return None
    positions = [index + 1 for index, store_id in enumerate(session.context.ids()) if store_id == through_id]
    return positions[-1] if positions else None


def merged(state: PreparedState | None, result: CompactionResult) -> tuple[dict[str, dict[str, Any]], int]:
    archive = dict(state.archive) if state is not None else {}
    archive.update(result.archive)
    removed = (state.messages_removed if state is not None else 0) + result.messages_removed
    return archive, removed


async def _prepare_memory(preparer: Preparer, session: SessionState) -> PreparedState | None:
    """One job without a store: compact (head of the prepared state +) the messages after it."""
    state = preparer.valid_state(session)
    snapshot = session.context.messages()
    system_now = session.system
    covered = state.covered if state is not None else 0
    head = state.head if state is not None else []
    request, system, prepended = session.request([*head, *snapshot[covered:]])
    transcript = request_transcript(request, system, session.context[covered:], session.base)
    key_of = prefix_key  # bound now: the context may change while the job runs
    model, window = session.work.model, session.work.guard.window
    result = await session.work.acompact(
        request, system=system, tools=session.tools_after_compaction(), trigger="threshold", transcript=transcript
    )
    preparer.usage.add(result)
    if not result.compacted:
        return None
    out = list(result.messages)
    kept = verbatim_tail(request, out, limit=len(snapshot) - covered)
    new_covered = len(snapshot) - kept
    if new_covered <= covered:
        return None
    new_head = out[: len(out) - kept]
    if prepended and new_head and new_head[0].get("role") == "system":
        new_head = new_head[1:]
    if state is not None and preparer.rebased is state:
        # ``state`` was swapped in while this job ran: the context is now ``head`` plus the messages
        # after what it covered, exactly what this job summarized, so its result covers the first
        # ``len(head) + (new_covered - covered)`` messages of the new context (checked again on use).
        # What ``state`` archived is already applied; only this job's removals are still pending.
        swapped = [*head, *snapshot[covered:new_covered]]
        return PreparedState(
            key=key_of(swapped, system_now, model, window),
            covered=len(swapped),
            head=new_head,
            system=result.system,
            result=result,
            archive=dict(result.archive),
            messages_removed=result.messages_removed,
            completes=True,
        )
    archive, removed = merged(state, result)
    return PreparedState(
        key=key_of(snapshot[:new_covered], system_now, model, window),
        covered=new_covered,
        head=new_head,
        system=result.system,
        result=result,
        archive=archive,
        messages_removed=removed,
    )


async def _prepare_stored(preparer: Preparer, session: SessionState) -> PreparedState | None:
    """One job in store mode: the stored messages after the prepared (or stored) summary."""
    state = preparer.valid_state(session)
    snapshot = session.context.messages()
    ids = session.context.ids()
    system_now = session.system
    base_through = session.through_id
    config = session.work.config
    after = state.through_id if state is not None else None
    rest = [(m, i) for m, i in zip(snapshot, ids, strict=True) if i is not None and (after is None or i > after)]
    entries = [e for e in session.context if e.store_id is not None and (after is None or e.store_id > after)]
    inner = state.summary if state is not None else session.summary
    previous = store_mode.previous_summary_body(inner, config) if inner else None
    request, system, _ = session.request([m for m, _ in rest])
    transcript = request_transcript(request, system, entries, session.base)
    model, window = session.work.model, session.work.guard.window
    result = await session.work.acompact(
        request,
        system=system,
        previous_summary=previous,
        tools=session.tools_after_compaction(),
        trigger="threshold",
        transcript=transcript,
    )
    preparer.usage.add(result)
    if not result.compacted:
        return None
    through = store_mode.through_from_archive(request, system, [i for _, i in rest], result)
    summary = store_mode.summary_block_text(result.messages, config) or (result.summary or "")
    if through is None or not summary:
        return None
    covered = max(k + 1 for k, i in enumerate(ids) if i == through)  # with the messages added after it
    archive, removed = merged(state, result)
    return PreparedState(
        key=prefix_key(snapshot[:covered], system_now, model, window),
        covered=covered,
        head=[store_mode.summary_message(summary, config)],
        system=None,
        result=result,
        archive=archive,
        messages_removed=removed,
        through_id=through,
        base_through_id=base_through,
        summary=summary,
    )


def candidate(session: SessionState, state: PreparedState) -> list[dict[str, Any]]:
    """The context the state gives: its head, then every message after what it covers."""
    if session.store is None:
        return [*state.head, *session.context.messages(state.covered)]
    assert state.through_id is not None
    return [*state.head, *(m for m, _ in session.context.stored(after=state.through_id))]


def candidate_tokens(session: SessionState, state: PreparedState) -> int:
    return swap_request(session, state)[3]


def swap_request(session: SessionState, state: PreparedState) -> tuple[list[dict[str, Any]], Any, bool, int]:
    """Memory mode: the request the state gives (messages, system, whether a system message was
    prepended) and its tokens."""
    request, system, prepended = session.request(candidate(session, state))
    if state.system is not None and system is not None:
        system = state.system
    return (
        request,
        system,
        prepended,
        session.work.count(request, system=system, tools=session.tools_after_compaction()),
    )


def fits(session: SessionState, tokens: int, accept: float) -> bool:
    """Whether a context of ``tokens`` may be swapped in with no call: under ``accept`` of the
    trigger and within the budget."""
    trigger = _trigger_tokens(session)
    guard = session.work.guard
    effective = tokens if session.work.counter.exact else int(tokens * guard.safety_margin)
    limit = guard.budget if trigger is None else min(guard.budget, int(accept * trigger))
    return effective <= limit
