"""Steps (a user turn, an assistant sentence, a round of tool calls) and the writer that turns them
into OpenAI or Anthropic messages with the facts due woven in."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from compaction.testing.transcripts._draw import _ALNUM
from compaction.testing.transcripts._images import _Image
from compaction.testing.transcripts._planting import _Planter
from compaction.testing.transcripts._types import Format


@dataclass
class _Call:
    name: str
    args: dict[str, Any]
    result: str
    is_error: bool = False
    image: _Image | None = None  # shown in the result (Anthropic); OpenAI gets a text note


@dataclass
class _User:
    text: str
    images: list[_Image] = field(default_factory=list)


@dataclass
class _Say:
    text: str


@dataclass
class _Tools:
    calls: list[_Call]
    text: str = ""


Step = _User | _Say | _Tools

_WRAP_UPS = (
    "Done. Let me know what you'd like next.",
    "That's finished; tell me if you want anything else.",
    "All set for now.",
    "Finished. Anything else?",
)
_NUDGES = ("Go ahead.", "Yes, continue.", "OK, carry on.", "Sounds good, go ahead.")
_CLOSING_USER = ("Thanks, let's stop here for today.", "OK, that's enough for now.", "Great, thanks.")


class _Writer:
    def __init__(self, fmt: Format, n: int, rng: random.Random, planter: _Planter, system: str) -> None:
        self.fmt = fmt
        self.n = n
        self.rng = rng
        self.planter = planter
        self.messages: list[dict[str, Any]] = []
        self.last: str | None = None  # "user" (tool results count as user) or "assistant"
        self.call_ids: set[str] = set()
        if fmt == "openai":
            self.messages.append({"role": "system", "content": system})

    @property
    def remaining(self) -> int:
        return self.n - len(self.messages)

    @property
    def index(self) -> int:
        return len(self.messages)

    def emit(self, step: Step) -> None:
        if self.remaining <= 0:
            return
        if isinstance(step, _User):
            self._user(step)
        elif isinstance(step, _Say):
            self._say(step.text)
        else:
            self._tools(step)

    # --- one message each ---
    def _user(self, step: _User) -> None:
        if self.last == "user":
            if self.remaining < 2:
                self._say(self.rng.choice(_WRAP_UPS))
                return
            self._say(self.rng.choice(_WRAP_UPS))
        text = self.planter.text("user", step.text, self.index)
        content: str | list[dict[str, Any]] = text
        if step.images:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
            for image in step.images:
                if self.fmt == "openai":
                    url = f"data:image/png;base64,{image.data}"
                    detail = self.rng.choice(("auto", "auto", "high", "low"))
                    blocks.append({"type": "image_url", "image_url": {"url": url, "detail": detail}})
                else:
                    source = {"type": "base64", "media_type": "image/png", "data": image.data}
                    blocks.append({"type": "image", "source": source})
            content = blocks
        self.messages.append({"role": "user", "content": content})
        self.last = "user"

    def _say(self, text: str) -> None:
        if self.last != "user":
            if self.last is None or self.remaining < 2:
                self._user(_User(self.rng.choice(_CLOSING_USER if self.remaining < 2 else _NUDGES)))
                return
            self._user(_User(self.rng.choice(_NUDGES)))
        text = self.planter.text("assistant", text, self.index)
        self.messages.append({"role": "assistant", "content": text})
        self.last = "assistant"

    def _call_id(self) -> str:
        while True:
            if self.fmt == "openai":
                cid = "call_" + "".join(self.rng.choices(_ALNUM, k=24))
            else:
                cid = "toolu_01" + "".join(self.rng.choices(_ALNUM, k=22))
            if cid not in self.call_ids:
                self.call_ids.add(cid)
                return cid

    def _tools(self, step: _Tools) -> None:
        calls = step.calls
        if self.last != "user":
            if self.remaining < 3:
                self._say(self.rng.choice(_WRAP_UPS))
                return
            self._user(_User(self.rng.choice(_NUDGES)))
        if self.fmt == "openai":
            if self.remaining < 2:
                self._say(self.rng.choice(_WRAP_UPS))
                return
            calls = calls[: self.remaining - 1]
        elif self.remaining < 2:
            self._say(self.rng.choice(_WRAP_UPS))
            return
        text = self.planter.text("assistant", step.text, self.index) if step.text else ""
        ids = [self._call_id() for _ in calls]
        if self.fmt == "openai":
            tool_calls = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.args, ensure_ascii=False)},
                }
                for cid, c in zip(ids, calls, strict=True)
            ]
            self.messages.append({"role": "assistant", "content": text or None, "tool_calls": tool_calls})
            for cid, c in zip(ids, calls, strict=True):
                body = c.result
                if c.image is not None:
                    body += f"\n[screenshot saved: {c.image.width}x{c.image.height} PNG]"
                body = self.planter.result(body, self.index)
                if c.is_error and not body.startswith(("Error", "Exit code")):
                    body = "Error: " + body
                self.messages.append({"role": "tool", "tool_call_id": cid, "content": body})
        else:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            blocks += [
                {"type": "tool_use", "id": cid, "name": c.name, "input": c.args}
                for cid, c in zip(ids, calls, strict=True)
            ]
            self.messages.append({"role": "assistant", "content": blocks})
            index = self.index
            results: list[dict[str, Any]] = []
            budget = 2
            for cid, c in zip(ids, calls, strict=True):
                before = len(self.planter.facts)
                body = self.planter.result(c.result, index, limit=budget) if budget > 0 else c.result
                budget -= len(self.planter.facts) - before
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": cid}
                if c.image is not None:
                    source = {"type": "base64", "media_type": "image/png", "data": c.image.data}
                    block["content"] = [{"type": "text", "text": body}, {"type": "image", "source": source}]
                else:
                    block["content"] = body
                if c.is_error:
                    block["is_error"] = True
                results.append(block)
            self.messages.append({"role": "user", "content": results})
        self.last = "user"
