"""LangChain v1 agents: :class:`CompactionMiddleware`, a drop-in for ``SummarizationMiddleware``.

    from langchain.agents import create_agent
    from compaction.integrations.langchain import CompactionMiddleware

    agent = create_agent(model, tools, middleware=[
        CompactionMiddleware("gpt-4o", trigger=("tokens", 100_000), keep=("messages", 20)),
    ])

It speaks ``SummarizationMiddleware``'s vocabulary (``trigger`` as ``("tokens" | "messages" |
"fraction", n)``, a ``{"tokens": .., "messages": ..}`` clause (AND) or a list of either (OR);
``keep`` as one such tuple; ``token_counter``; ``summary_prompt``) and makes the same kind of state
update in ``before_model``: ``RemoveMessage(REMOVE_ALL_MESSAGES)`` then the new history, whose
compacted span is replaced by one ``HumanMessage`` holding the summary. What it does differently:

* the engine underneath is :class:`compaction.Compactor`: cuts never split a tool call from its
  result, a state that arrives with broken pairs (an orphan ``ToolMessage``, a call without a
  result) is repaired before the model sees it, the summary carries the artifact ledger (paths,
  commands, ids), and a summarizer failure falls back (partial, then annotation-only) instead of
  raising; a later compaction extends the earlier summary instead of nesting it;
* the default summarizer is the offline extractive one (no model call, no API key); pass a LangChain
  chat model (``summarizer=ChatOpenAI(...)``), a litellm model name, or any
  :class:`compaction.Summarizer` for an LLM summary;
* every message taken out of the state is kept, per LangGraph thread: :meth:`CompactionMiddleware.removed`
  returns the original LangChain objects (ids intact), :meth:`CompactionMiddleware.compactions` the
  :class:`compaction.CompactionResult` of each run (archive, ledger, record), and
  :meth:`CompactionMiddleware.recall_tool` is a LangChain tool the agent can call to search them.

Requires the ``langchain`` extra (``langchain>=1.0,<1.5``). Not imported by ``import compaction``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from langchain.agents.middleware.summarization import ContextSize, TokenCounter, TriggerClause
from langchain.agents.middleware.types import AgentMiddleware, AgentState
from langchain_core.exceptions import ContextOverflowError as LangChainOverflowError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    convert_to_messages,
)
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.constants import TAG_NOSTREAM
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from compaction.adapters import from_canonical, to_canonical
from compaction.compactor import Compactor
from compaction.config import CompactionConfig
from compaction.integrations._langchain_sizes import (
    check_size,
    clause_met,
    derive_config,
    normalize_trigger,
    smallest_message_trigger,
    smallest_token_trigger,
)
from compaction.integrations._messages import LC_SOURCE, Conversions, MessageMap, message_key, pairs_intact
from compaction.pairs import repair, validate
from compaction.recall import RECALL_TOOL_NAME, MemoryRecallIndex, answer_recall
from compaction.recall import recall_tool as recall_tool_definition
from compaction.result import CompactionResult
from compaction.summarizers.base import (
    EmptySummaryError,
    Summarizer,
    SummarizerError,
    SummarizerOverflowError,
    SummaryRequest,
    SummaryResponse,
    SummaryUsage,
)
from compaction.transcript import Transcript

__all__ = ["ChatModelSummarizer", "CompactionMiddleware", "LangChainCompaction"]


LOGGER = logging.getLogger("compaction.integrations.langchain")


class ChatModelSummarizer:
    """A LangChain chat model (or any Runnable from messages to a message) as a :class:`compaction.Summarizer`.

    The model gets the engine's rendered request (a system prompt and one human message holding
    the span to summarize, tool output fenced as data), no tools. Its call is tagged ``nostream``
    so a streaming agent does not stream the summary to the user. Errors become the engine's typed
    failures (LangChain's ``ContextOverflowError`` -> :class:`SummarizerOverflowError`, so the span
    is split; anything else -> :class:`SummarizerError`, so the fallback chain takes over); an empty
    answer is :class:`EmptySummaryError`. ``window`` is the model profile's ``max_input_tokens``.
    With ``bind_max_tokens`` (default) the request's output cap is passed as ``max_tokens`` (which
    ChatOpenAI, ChatAnthropic and ChatLiteLLM accept); turn it off for a model that rejects it.
    """

    def __init__(self, model: Runnable[Any, Any], *, bind_max_tokens: bool = True) -> None:
        self.model = model
        self.bind_max_tokens = bind_max_tokens
        self.window: int | None = _profile_window(model)
        self.name = _model_name(model) or type(model).__name__

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        messages: list[BaseMessage]
        if request.provider_messages is not None:
            messages = list(convert_to_messages([dict(m) for m in request.provider_messages]))
        else:
            messages = [SystemMessage(request.system_prompt)] if request.system_prompt.strip() else []
            messages.append(HumanMessage(request.prompt))
        config: Any = {"metadata": {"lc_source": LC_SOURCE}, "tags": [TAG_NOSTREAM]}
        runnable: Any = self.model.bind(max_tokens=request.max_tokens) if self.bind_max_tokens else self.model
        try:
            response = await runnable.ainvoke(messages, config=config)
        except LangChainOverflowError as exc:
            raise SummarizerOverflowError(f"{self.name}: the summary request overflowed: {exc}") from exc
        except Exception as exc:
            raise SummarizerError(f"{self.name} raised {type(exc).__name__}: {exc}") from exc
        text = response.text.strip()
        if not text:
            raise EmptySummaryError(f"{self.name} answered with no text")
        usage = getattr(response, "usage_metadata", None) or {}
        details = usage.get("input_token_details") or {}
        return SummaryResponse(
            text=text,
            usage=SummaryUsage(
                input_tokens=int(usage.get("input_tokens", 0)),
                output_tokens=int(usage.get("output_tokens", 0)),
                cached_input_tokens=int(details.get("cache_read", 0)),
            ),
            model=self.name,
        )


@dataclass(frozen=True)
class LangChainCompaction:
    """One compaction of a thread's state: the engine's result (archive by id, ledger, record) and
    the original LangChain messages it took out of the state (or rewrote), ids intact."""

    thread_id: str
    result: CompactionResult
    removed: tuple[BaseMessage, ...]


@dataclass
class _Thread:
    compactions: list[LangChainCompaction] = field(default_factory=list)
    removed: list[BaseMessage] = field(default_factory=list)
    pending: list[Mapping[str, Mapping[str, Any]]] = field(default_factory=list)
    conversions: Conversions = field(default_factory=Conversions)
    _index: MemoryRecallIndex = field(default_factory=MemoryRecallIndex)
    _guard: threading.Lock = field(default_factory=threading.Lock)
    wait: tuple[int, int] | None = None
    """(tokens, messages): after a compaction that left the trigger still met, the next one waits
    until the state grows to either figure (or no longer fits the budget), so it cannot loop."""

    def archive(self, archive: Mapping[str, Mapping[str, Any]]) -> None:
        if archive:
            with self._guard:
                self.pending.append(archive)

    @property
    def index(self) -> MemoryRecallIndex:
        """The recall index, built on first use (indexing 2,000 messages takes a second: it is paid
        by the first recall, not by the compaction in front of a model call)."""
        with self._guard:  # parallel tool calls may recall at once
            while self.pending:
                self._index.add_archive(self.pending.pop(0))
            return self._index


@dataclass(frozen=True)
class _Plan:
    messages: list[AnyMessage]
    dicts: list[dict[str, Any]]
    transcript: Transcript
    tokens: int
    compact: bool
    broken: bool
    replacements: dict[int, BaseMessage] = field(default_factory=dict)  # messages given tool-call ids


class CompactionMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Compacts the agent's message state before each model call.

    ``model``: the agent's model, a name (``"gpt-4o"``, ``"openai:gpt-4o"``) or a chat model; it
    sets the window (the profile's ``max_input_tokens``, else our model registry) and the tokenizer.
    It is never called. ``trigger`` / ``keep``: as ``SummarizationMiddleware``'s (see the module
    docstring); ``trigger=None`` uses ``config.threshold`` (0.8 of the window by default) instead of
    never compacting, ``keep=None`` keeps ``config.keep_recent_messages`` (6). With a token trigger
    the summary block is capped at a quarter of it and the verbatim tail at half of it (unless
    ``config`` sets them), so one compaction gets well under the trigger. ``token_counter``: counts
    LangChain messages for the trigger (default: our tokenizer for ``model``). ``summary_prompt``:
    the instructions an LLM summarizer gets (a ``{messages}`` placeholder is dropped: the span
    follows the prompt). ``summarizer``: None (offline extractive), a LangChain chat model, a
    litellm model name or a :class:`compaction.Summarizer`. ``config``: every other engine knob.
    ``recall=True`` registers :meth:`recall_tool` with the agent.
    """

    def __init__(
        self,
        model: str | BaseChatModel,
        *,
        trigger: ContextSize | TriggerClause | list[ContextSize | TriggerClause] | None = None,
        keep: ContextSize | None = None,
        token_counter: TokenCounter | None = None,
        summary_prompt: str | None = None,
        summarizer: Runnable[Any, Any] | Summarizer | str | None = None,
        config: CompactionConfig | None = None,
        recall: bool = False,
    ) -> None:
        super().__init__()
        name = _model_name(model) or "unknown"
        window = _profile_window(model) if isinstance(model, BaseChatModel) else None
        base = config or CompactionConfig()
        if window is None:
            window = base.window or Compactor(name, config=base).guard.window
        self.trigger = trigger
        self.keep = keep
        self.token_counter = token_counter
        self._clauses = normalize_trigger(trigger)
        if keep is not None:
            check_size(keep, "keep")
        engine = _summarizer(summarizer)
        self.compactor = Compactor(name, engine, derive_config(base, window, self._clauses, keep, summary_prompt))
        self._threads: dict[str, _Thread] = {}
        self._lock = threading.Lock()
        self.tools = [self.recall_tool()] if recall else []

    # --- what was removed ---
    def compactions(self, thread_id: str | None = None) -> list[LangChainCompaction]:
        """The compactions of a LangGraph thread (default: the one running now, else ``"default"``)."""
        return list(self._thread(thread_id).compactions)

    def removed(self, thread_id: str | None = None) -> list[BaseMessage]:
        """Every original LangChain message taken out of a thread's state (or rewritten), oldest
        first, the same objects that were in the state."""
        return list(self._thread(thread_id).removed)

    def recall_tool(self) -> BaseTool:
        """The ``recall`` tool as a LangChain tool: searches the originals compacted out of the
        calling thread's state (exact identifiers verbatim, else words), or reads one by archive id;
        answers are paged and at most ~2,000 tokens."""
        definition = recall_tool_definition()["function"]

        def recall(query: str | None = None, archive_id: str | None = None, page: int | None = None) -> str:
            arguments = {
                k: v for k, v in (("query", query), ("archive_id", archive_id), ("page", page)) if v is not None
            }
            return answer_recall(self._thread(None).index, arguments, counter=self.compactor.counter)

        return StructuredTool.from_function(recall, name=RECALL_TOOL_NAME, description=definition["description"])

    # --- the hooks ---
    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        plan = self._plan(state)
        if plan is None:
            return None
        result = self.compactor.compact(plan.dicts, trigger="threshold") if plan.compact else None
        return self._update(plan, result)

    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        plan = self._plan(state)
        if plan is None:
            return None
        result = await self.compactor.acompact(plan.dicts, trigger="threshold") if plan.compact else None
        return self._update(plan, result)

    # --- internals ---
    def _thread(self, thread_id: str | None) -> _Thread:
        key = thread_id if thread_id is not None else _current_thread_id()
        with self._lock:
            return self._threads.setdefault(key, _Thread())

    def _count(self, messages: Sequence[AnyMessage], transcript: Transcript) -> int:
        if self.token_counter is not None:
            return int(self.token_counter(messages))
        return self.compactor.count(transcript)

    def _plan(self, state: AgentState[Any]) -> _Plan | None:
        messages = list(state["messages"])
        if not messages:
            return None
        conversions = self._thread(None).conversions
        dicts, canonical = conversions.convert(messages)
        transcript = Transcript(format="openai", messages=tuple(canonical))
        tokens = self._count(messages, transcript)
        broken = not pairs_intact(messages) and bool(validate(transcript))
        compact = self._should_compact(tokens, len(messages))
        return _Plan(messages, dicts, transcript, tokens, compact, broken, dict(conversions.replacements))

    def _should_compact(self, tokens: int, count: int) -> bool:
        config = self.compactor.config
        if not config.enabled:
            return False
        decision = self.compactor.decide(tokens)
        over_budget = decision.effective_tokens > decision.budget
        if self._clauses is None:
            fire = decision.should_compact
        else:
            window = self.compactor.guard.window
            fire = any(clause_met(clause, tokens, count, window) for clause in self._clauses)
        thread = self._thread(None)
        if not fire:
            thread.wait = None  # the state is back under the trigger: the next crossing compacts at once
        wait = thread.wait
        if fire and wait is not None and not over_budget and tokens < wait[0] and count < wait[1]:
            LOGGER.debug("compaction waits: the last one could not get under the trigger (%s tokens now)", tokens)
            return False
        return fire or over_budget

    def _update(self, plan: _Plan, result: CompactionResult | None) -> dict[str, Any] | None:
        thread = self._thread(None)
        if result is not None and result.compacted:
            new, gone = MessageMap(plan.messages, plan.dicts, plan.replacements).back(result.messages)
            record = LangChainCompaction(_current_thread_id(), result, tuple(gone))
            thread.compactions.append(record)
            thread.removed.extend(gone)
            thread.archive(result.archive)
            thread.archive(_unarchived(plan, gone, result.archive))
            after = self._count(new, to_canonical(result.messages, format="openai"))
            thread.wait = self._wait_after(after, len(new))
            LOGGER.info(
                "compacted %d messages: %s -> %s tokens (%s, fallback %s, %d model calls)",
                len(gone),
                f"{plan.tokens:,}",
                f"{after:,}",
                result.reason,
                result.fallback_level,
                result.llm_calls,
            )
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *new]}
        if result is not None:
            LOGGER.info("compaction triggered but not applied: %s", result.reason)
            thread.wait = self._wait_after(plan.tokens, len(plan.messages))
        if not plan.broken:
            if plan.replacements:  # tool calls without ids: the state gets the repaired copies
                LOGGER.warning(
                    "gave ids to the tool calls and results of %d message(s) that had none", len(plan.replacements)
                )
                repaired = [plan.replacements.get(i, m) for i, m in enumerate(plan.messages)]
                return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *repaired]}
            return None
        return self._repair(plan, thread)

    def _wait_after(self, tokens: int, count: int) -> tuple[int, int] | None:
        """The growth the next compaction waits for, when this state still meets the trigger."""
        if not self._should_compact_ignoring_wait(tokens, count):
            return None
        threshold = self.compactor.guard.threshold_tokens or tokens
        step = max(1, smallest_token_trigger(self._clauses, self.compactor.guard.window) or threshold) // 4
        return tokens + step, count + max(2, smallest_message_trigger(self._clauses) // 4)

    def _should_compact_ignoring_wait(self, tokens: int, count: int) -> bool:
        if self._clauses is None:
            return self.compactor.decide(tokens).should_compact
        return any(clause_met(c, tokens, count, self.compactor.guard.window) for c in self._clauses)

    def _repair(self, plan: _Plan, thread: _Thread) -> dict[str, Any]:
        """Failure mode A without a compaction: the state's broken tool pairs fixed before the model
        sees them (orphan results out, archived; a call without a result gets a synthetic one)."""
        fixed, report = repair(to_canonical(plan.dicts, format="openai"))  # fresh, position-derived ids
        new, gone = MessageMap(plan.messages, plan.dicts, plan.replacements).back(from_canonical(fixed).messages)
        thread.removed.extend(gone)
        thread.archive(_unarchived(plan, gone, {}))
        LOGGER.warning(
            "repaired broken tool pairs in the agent state: %d orphan or duplicate result(s) removed, "
            "%d missing result(s) synthesized",
            len(report.removed),
            len(report.synthesized),
        )
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *new]}


def _unarchived(plan: _Plan, gone: Sequence[BaseMessage], archive: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The messages that left the state but are not in the engine's ``archive`` (e.g. an orphan
    result that repair dropped), by ``lc-<message id>``, so recall finds them too."""
    archived = {message_key(d) for d in archive.values()}
    gone_ids = {id(m) for m in gone}
    return {
        f"lc-{m.id or i}": d
        for i, (m, d) in enumerate(zip(plan.messages, plan.dicts, strict=True))
        if id(m) in gone_ids and message_key(d) not in archived
    }


def _summarizer(summarizer: Any) -> Summarizer | str | None:
    """The engine's summarizer for the ``summarizer`` argument, or a TypeError that says what fits."""
    if summarizer is None or isinstance(summarizer, (str, Summarizer)):
        return summarizer
    if isinstance(summarizer, Runnable):  # a chat model, or one wrapped by bind / with_config / with_retry
        return ChatModelSummarizer(summarizer)
    raise TypeError(
        "summarizer must be None (offline), a LangChain chat model or Runnable, a litellm model name or a "
        f"compaction.Summarizer, got {type(summarizer).__name__}"
    )


def _model_name(model: str | Runnable[Any, Any]) -> str | None:
    """A litellm-style name: ``"openai:gpt-4o"`` (LangChain's spelling) becomes ``"openai/gpt-4o"``."""
    if isinstance(model, str):
        return model.replace(":", "/", 1)
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return None


def _profile_window(model: Any) -> int | None:
    profile = getattr(model, "profile", None)
    value = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
    return value if isinstance(value, int) and value > 0 else None


def _current_thread_id() -> str:
    from langgraph.config import get_config

    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # called outside a graph run
        return "default"
    return str(cast(Mapping[str, Any], configurable).get("thread_id", "default"))
