"""What a model summarizer sends: the chat messages (with Anthropic cache breakpoints where they pay),
the note a corrective request appends, and which models reason before they answer.

Request shape
    Two modes, chosen per request:

    * **Rendered mode** (``request.provider_messages is None``): the model gets
      ``[system: request.system_prompt, user: request.prompt]``. An empty system prompt is left out
      (providers reject empty text blocks).
    * **Single-pass, cache-friendly mode** (``request.provider_messages`` set): the agent's own
      conversation plus a final summarization request is sent as given, so its prefix is
      byte-identical to the agent's normal turns and the provider's prompt cache applies. The
      messages are in litellm's input format (OpenAI chat messages), whatever the provider.

    The single pass also sends the agent's tools (``request.provider_tools``) with
    ``tool_choice: "none"``: the request's prefix is then the agent's own, byte for byte, and the
    model cannot call them. The rendered mode sends no tools.

Prompt caching (``cache_control``)
    On by default for Anthropic models (the model string starts with ``anthropic/`` or contains
    ``claude``); force it with ``cache_control=True`` (e.g. an OpenAI-compatible proxy in front of
    Claude) or off with ``False``. OpenAI-style providers cache prefixes automatically, so other
    models are sent unchanged. When on:

    * rendered mode: the system block carries ``cache_control: {"type": "ephemeral"}``, so the
      summarizer's instructions are cached across chunk and merge calls;
    * single-pass mode: if the caller placed no ``cache_control`` anywhere, a breakpoint is put on
      the first system message and on the last message before the final summarization request
      (the end of the stable conversation prefix). Messages that already carry breakpoints are
      sent untouched. The caller's objects are never modified.

    A breakpoint goes only where the prefix it closes reaches the model's cacheable minimum
    (chars/4 estimate: 1,024 tokens; 2,048 for Haiku 3.x; 4,096 for Haiku 4.5 and Opus 4.5): a
    shorter one has no effect at the provider.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from compaction.summarizers.base import SummaryRequest

EPHEMERAL: dict[str, str] = {"type": "ephemeral"}


# Models that reason before answering on every request: their output cap covers the reasoning too,
# and OpenAI's reject any temperature but the default.
OPENAI_REASONING = re.compile(r"(?:^|/)(?:o\d+(?:-mini|-pro|-preview)?|gpt-5(?!-chat)[\w.-]*)(?:-\d{4}-\d{2}-\d{2})?$")


REASONING = re.compile(
    r"(?:^|/)(?:o\d+(?:-\w+)?|gpt-5(?!-chat)[\w.-]*|gpt-oss[\w.:-]*|deepseek-r1[\w.:-]*|deepseek-reasoner|qwq[\w.:-]*|"
    r"gemini-(?:2\.5|3)[\w.-]*|[\w.-]*-thinking[\w.-]*|magistral[\w.-]*)$"
)


def has_cache_control(value: Any) -> bool:
    if isinstance(value, Mapping):
        return "cache_control" in value or any(has_cache_control(v) for v in value.values())
    if isinstance(value, list):
        return any(has_cache_control(v) for v in value)
    return False


def mark(message: dict[str, Any]) -> bool:
    """Put an ephemeral breakpoint on the last content block of ``message``; False if it has none."""
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return False
        message["content"] = [{"type": "text", "text": content, "cache_control": dict(EPHEMERAL)}]
        return True
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        content[-1]["cache_control"] = dict(EPHEMERAL)
        return True
    return False


def text_of(content: Any) -> str:
    """Message content as text: a string, or the text parts of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                parts.append(str(part.get("text") or ""))
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return ""


def prefix_tokens(messages: list[dict[str, Any]], tools_chars: int) -> list[int]:
    """For each message, the estimated tokens (chars/4) of the request up to and including it."""
    out: list[int] = []
    chars = tools_chars
    for message in messages:
        chars += len(text_of(message.get("content"))) + len(repr(message.get("tool_calls") or ""))
        out.append(chars // 4)
    return out


def with_note(messages: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    """``messages`` with ``note`` appended to the last one's text (a new user message when the last
    is not the user's); the prefix before it, and so the provider's prompt cache, is unchanged."""
    out = list(messages)
    last = dict(out[-1]) if out else {}
    if last.get("role") != "user":
        return [*out, {"role": "user", "content": note}]
    content = last.get("content")
    if isinstance(content, str):
        last["content"] = f"{content}\n\n{note}"
    elif isinstance(content, list):
        last["content"] = [*content, {"type": "text", "text": note}]
    else:
        return [*out, {"role": "user", "content": note}]
    out[-1] = last
    return out


def cache_minimum(model: str) -> int:
    """The fewest prompt tokens Anthropic caches for ``model`` (a breakpoint on a shorter
    prefix is ignored by the provider)."""
    name = model.lower()
    if re.search(r"haiku-4|opus-4-5|opus-4\.5|haiku-4\.5", name):
        return 4096
    if "haiku" in name:
        return 2048
    return 1024


def chat_messages(request: SummaryRequest, *, cache: bool, minimum: int) -> list[dict[str, Any]]:
    """The chat messages sent for ``request``: the agent's own messages (copied) or a system prompt
    and a user prompt; with ``cache``, Anthropic breakpoints on prefixes of at least ``minimum``
    tokens."""
    if request.provider_messages is not None:
        # Deep copy: litellm's provider transforms may edit messages in place.
        messages = [copy.deepcopy(dict(m)) for m in request.provider_messages]
        if cache and not has_cache_control(messages):
            tools_chars = len(repr(request.provider_tools)) if request.provider_tools else 0
            prefix = prefix_tokens(messages, tools_chars)
            system = next((i for i, m in enumerate(messages) if m.get("role") in ("system", "developer")), None)
            if system is not None and prefix[system] >= minimum:
                mark(messages[system])
            if len(messages) >= 2 and len(messages) - 2 != system and prefix[len(messages) - 2] >= minimum:
                mark(messages[-2])
        return messages
    messages = []
    if request.system_prompt.strip():
        # A breakpoint on a block shorter than the model's cacheable minimum has no effect.
        if cache and len(request.system_prompt) // 4 >= minimum:
            block = {"type": "text", "text": request.system_prompt, "cache_control": dict(EPHEMERAL)}
            messages.append({"role": "system", "content": [block]})
        else:
            messages.append({"role": "system", "content": request.system_prompt})
    messages.append({"role": "user", "content": request.prompt})
    return messages
