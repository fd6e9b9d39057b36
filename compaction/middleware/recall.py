"""``recall`` inside the manager: which tools are offered, answering calls, and weaving answers
that wait for the caller's next messages into the context.

When a response mixes ``recall`` with other calls, it goes back to the caller with the answers
pending (:class:`PendingRecall`); they are put right after the assistant message that made the
calls (OpenAI tool messages), or inside the next user message (Anthropic, whose tool results must
share one user message)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from compaction.adapters import message_format
from compaction.errors import TranscriptError
from compaction.middleware.context import canonical
from compaction.recall import RECALL_TOOL_NAME, RecallSource, answer_recall, recall_tool
from compaction.recall.calls import tool_result_messages
from compaction.tokens import TokenCounter

__all__ = ["PendingRecall", "answer_safely", "call_ids", "offered_tools", "reply_format", "tool_name", "weave_answers"]


@dataclass(frozen=True)
class PendingRecall:
    """Answers to the recall calls of a response returned to the caller, until its assistant
    message is appended (and, Anthropic, the user message of tool results after it)."""

    ids: frozenset[str]
    answers: list[tuple[str, str]]
    after_assistant: bool = False

    def blocks(self) -> list[dict[str, Any]]:
        return [{"type": "tool_result", "tool_use_id": i, "content": text} for i, text in self.answers]


def tool_name(tool: Mapping[str, Any]) -> Any:
    function = tool.get("function")
    return function.get("name") if isinstance(function, Mapping) else tool.get("name")


def offered_tools(tools: Sequence[dict[str, Any]], *, offer_recall: bool, fmt: str | None) -> list[dict[str, Any]]:
    """``tools`` plus the ``recall`` tool when it is offered, in the format of the tools (else of
    the context, ``fmt``)."""
    if not offer_recall or any(tool_name(t) == RECALL_TOOL_NAME for t in tools):
        return list(tools)
    if any("input_schema" in t for t in tools):
        schema: Literal["openai", "anthropic"] = "anthropic"
    elif tools or fmt != "anthropic":
        schema = "openai"
    else:
        schema = "anthropic"
    return [*tools, recall_tool(schema)]


def reply_format(response_format: Literal["openai", "anthropic"], fmt: str | None) -> Literal["openai", "anthropic"]:
    """The format of the messages the manager appends for a recall round: the context's own wins."""
    if fmt in ("openai", "anthropic"):
        return "anthropic" if fmt == "anthropic" else "openai"
    return response_format


def answer_safely(
    source: RecallSource, arguments: str, *, counter: TokenCounter, max_tokens: int, logger: logging.Logger
) -> str:
    """The answer to one call; a failure becomes an answer the model reads."""
    try:
        return answer_recall(source, arguments, counter=counter, max_tokens=max_tokens)
    except Exception as exc:  # a broken store must not break the agent loop: the model reads why
        logger.warning("Recall failed: %s", exc)
        return f"recall error: the archive could not be searched ({type(exc).__name__}: {exc})"


def call_ids(message: Mapping[str, Any]) -> set[str]:
    """Ids of the tool calls in ``message`` (none when it cannot be read)."""
    try:
        return {call.id for call in canonical(message).tool_calls}
    except (TranscriptError, TypeError):
        return set()


def weave_answers(
    messages: Sequence[Mapping[str, Any]], pending: PendingRecall | None, fmt: str | None
) -> tuple[tuple[Mapping[str, Any], ...], PendingRecall | None]:
    """(``messages`` with the pending answers woven in, what is still pending)."""
    out: list[Mapping[str, Any]] = []
    for message in messages:
        if pending is None:
            out.append(message)
        elif pending.after_assistant:
            content = message.get("content")
            if message.get("role") == "user" and isinstance(content, list):
                out.append({**message, "content": [*pending.blocks(), *content]})
            else:
                out += [*tool_result_messages(pending.answers, "anthropic"), message]
            pending = None
        else:
            out.append(message)
            if message.get("role") == "assistant" and pending.ids & call_ids(message):
                if (message_format(message) or fmt) == "anthropic":
                    pending = replace(pending, after_assistant=True)
                else:
                    out += tool_result_messages(pending.answers, "openai")
                    pending = None
    return tuple(out), pending
