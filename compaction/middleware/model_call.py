"""A model call with the managed context: the request, overflow recovery, usage, ``recall`` rounds.

:class:`ModelCall` is :meth:`~compaction.middleware.ContextManager.complete` on the session's state.
Each call sends the context as a provider accepts it (:mod:`.sendable`) through
:meth:`Compactor.complete <compaction.Compactor.complete>`; when that had to compact or truncate to
get the request accepted, the context becomes what was sent (:mod:`.overflow`). Its usage becomes
the next reading. A response whose every tool call is ``recall`` is answered from the archive and
the model called again (at most ``max_recall_rounds`` times); a response that mixes ``recall``
with other calls is returned, its ``recall`` answers kept for the next append (:mod:`.recall`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from compaction.middleware.background import Preparer
from compaction.middleware.intake import append_messages
from compaction.middleware.measure import decide
from compaction.middleware.overflow import apply_recovery, litellm_call
from compaction.middleware.recall import PendingRecall, answer_safely, reply_format
from compaction.middleware.run import run_compaction
from compaction.middleware.sendable import sendable_request
from compaction.middleware.state import SessionState
from compaction.middleware.turn import Streak
from compaction.middleware.usage import parse_usage
from compaction.recall import RECALL_TOOL_NAME
from compaction.recall.calls import assistant_message, parse_response, tool_result_messages

__all__ = ["ModelCall", "flush_recall_answers"]


@dataclass(frozen=True)
class ModelCall:
    """One :meth:`~compaction.middleware.ContextManager.complete`: the session's state, its
    background preparer, the streak a successful call resets, the lock a compaction holds, and the
    turn (for the log line of a compaction). Each call's outcome is ``state.last_outcome``."""

    state: SessionState
    preparer: Preparer | None
    streak: Streak
    lock: asyncio.Lock
    iteration: int

    async def complete(self, call: Any, kwargs: dict[str, Any]) -> Any:
        """The model's response to the context (see the module docstring)."""
        state = self.state
        tools = kwargs.pop("tools", None)
        if tools is not None:
            state.set_tools(tools)
        flush_recall_answers(state)
        rounds = 0
        while True:
            response = await self._once(call, kwargs)
            source = state.recall_source
            parsed = parse_response(response) if source is not None else None
            calls = [c for c in parsed.calls if c.name == RECALL_TOOL_NAME] if parsed is not None else []
            if source is None or parsed is None or not calls:
                return response
            counter, limit, logger = state.work.counter, state.settings.recall_max_tokens, state.logger
            answers = [
                (c.id, answer_safely(source, c.arguments, counter=counter, max_tokens=limit, logger=logger))
                for c in calls
            ]
            if len(calls) == len(parsed.calls) and rounds < state.settings.max_recall_rounds:
                rounds += 1
                fmt = reply_format(parsed.format, state.format)
                logger.info("Recall: answered %s call(s), calling the model again (round %s)", len(calls), rounds)
                append_messages(state, [assistant_message(parsed, fmt), *tool_result_messages(answers, fmt)])
                continue
            state.recall_pending = PendingRecall(frozenset(c.id for c in calls), answers)
            return response

    async def _once(self, call: Any, kwargs: dict[str, Any]) -> Any:
        state, preparer = self.state, self.preparer
        if preparer is not None and preparer.state is not None:
            measure = state.measure()
            decision = decide(state.work, measure)
            if decision.action == "block":  # would overflow: swap the prepared summary in first
                async with self.lock:
                    await run_compaction(state, preparer, "overflow", measure, decision, iteration=self.iteration)
        request, system, prepended = state.request(state.context.messages())
        request = sendable_request(state, request, prepended)
        tokens_before = state.measure().tokens
        state.turn_mark = len(state.context)
        tools = state.offered_tools()
        if "model" in kwargs:  # the compactor's default call passes its own model= as well: not twice
            kwargs = dict(kwargs)
            model = kwargs.pop("model")
            if call is None and model is not None:
                call = litellm_call(model, kwargs, tools)
        outcome = await state.work.complete(request, system=system, call=call, tools=tools, **kwargs)
        state.last_outcome = outcome
        if outcome.compactions or outcome.truncated_tool_results:
            async with self.lock:
                await apply_recovery(state, preparer, outcome, prepended, tokens_before, len(request))
        self.streak.reset()
        report = parse_usage(outcome.response)
        if report is not None:
            state.record_usage(report)
        return outcome.response


def flush_recall_answers(state: SessionState) -> None:
    """Before the next model call: answers still waiting for the next user message go in now."""
    pending, state.recall_pending = state.recall_pending, None
    if pending is None:
        return
    if pending.after_assistant:
        append_messages(state, tool_result_messages(pending.answers, "anthropic"))
    else:
        state.logger.warning(
            "Recall: %s answer(s) dropped: the assistant message that called recall was not appended",
            len(pending.answers),
        )
