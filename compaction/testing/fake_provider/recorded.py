"""What the fake provider received: one recorded request, its route and the text in it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Route = Literal["openai", "anthropic", "gemini", "count_tokens"]


ROUTES: dict[str, Route] = {
    "/v1/chat/completions": "openai",
    "/chat/completions": "openai",
    "/v1/messages": "anthropic",
    "/messages": "anthropic",
    "/v1/messages/count_tokens": "count_tokens",
    "/messages/count_tokens": "count_tokens",
}


DEFAULT_MAX_TOKENS = 4096


# Gemini's generateContent: litellm "gemini/<name>" with api_base=<base_url>/v1beta posts here.
GEMINI_PATH = re.compile(r"^(?:/v1(?:beta)?)?/models/([^/:]+):(generateContent|streamGenerateContent)$")


def estimate_tokens(text: str) -> int:
    """The fake's token count: chars/4, rounded up (0 for empty text)."""
    return (len(text) + 3) // 4


def content_text(content: Any) -> str:
    """Flatten OpenAI or Anthropic message content (string or list of blocks) to plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, list):
        return str(content)
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
            continue
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind in ("text", "input_text", "output_text"):
            parts.append(str(block.get("text", "")))
        elif kind == "tool_result":
            parts.append(content_text(block.get("content")))
        elif kind == "tool_use":
            parts.append(f"{block.get('name', '')} {json.dumps(block.get('input', {}), sort_keys=True)}")
        elif kind in ("thinking",):
            parts.append(str(block.get("thinking", "")))
        # images and documents carry no text the stand-in could use
    return "\n".join(p for p in parts if p)


def message_text(message: Mapping[str, Any]) -> str:
    text = content_text(message.get("content"))
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            fn = call.get("function", {}) if isinstance(call, Mapping) else {}
            text += f"\n{fn.get('name', '')} {fn.get('arguments', '')}"
    return text


def _gemini_parts_text(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping) and p.get("text"))


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request the fake received, as parsed JSON plus lower-cased headers."""

    index: int
    route: Route
    method: str
    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]
    raw_body: bytes = field(repr=False)
    received_at: float = 0.0  # time.monotonic()

    @property
    def model(self) -> str:
        """The ``model`` field of the body (Gemini: the model named in the path)."""
        if self.route == "gemini":
            match = GEMINI_PATH.match(self.path)
            return match.group(1) if match else ""
        return str(self.body.get("model", ""))

    @property
    def max_tokens(self) -> int:
        """The output cap the client asked for (``max_tokens`` / ``max_completion_tokens``;
        Gemini's ``generationConfig.maxOutputTokens``)."""
        if self.route == "gemini":
            config = self.body.get("generationConfig") or self.body.get("generation_config") or {}
            value = config.get("maxOutputTokens", config.get("max_output_tokens"))
        else:
            value = self.body.get("max_tokens", self.body.get("max_completion_tokens"))
        return int(value) if isinstance(value, int | float) else DEFAULT_MAX_TOKENS

    @property
    def stream(self) -> bool:
        """Whether the client asked for a server-sent-event stream."""
        return bool(self.body.get("stream")) or self.path.endswith(":streamGenerateContent")

    @property
    def messages(self) -> list[tuple[str, str]]:
        """``(role, text)`` pairs in order, the system prompt first for any wire format."""
        out: list[tuple[str, str]] = []
        if self.route == "gemini":
            system = self.body.get("systemInstruction") or self.body.get("system_instruction")
            if isinstance(system, Mapping):
                out.append(("system", _gemini_parts_text(system.get("parts"))))
            for content in self.body.get("contents") or ():
                if isinstance(content, Mapping):
                    role = "assistant" if content.get("role") == "model" else str(content.get("role") or "user")
                    out.append((role, _gemini_parts_text(content.get("parts"))))
            return out
        system = self.body.get("system")
        if system:
            out.append(("system", content_text(system)))
        for message in self.body.get("messages") or ():
            if isinstance(message, Mapping):
                out.append((str(message.get("role", "")), message_text(message)))
        return out

    @property
    def system_text(self) -> str:
        """All system text (Anthropic ``system`` field or OpenAI system/developer messages)."""
        return "\n".join(t for r, t in self.messages if r in ("system", "developer"))

    @property
    def last_user_text(self) -> str:
        """Text of the last user message ("" when there is none)."""
        for role, text in reversed(self.messages):
            if role == "user":
                return text
        return ""

    @property
    def prompt_text(self) -> str:
        """Everything the model would read: message text plus tool definitions."""
        text = "\n".join(t for _, t in self.messages)
        tools = self.body.get("tools")
        if tools:
            text += "\n" + json.dumps(tools, sort_keys=True)
        return text

    @property
    def input_tokens(self) -> int:
        """chars/4 of :attr:`prompt_text`."""
        return estimate_tokens(self.prompt_text)
