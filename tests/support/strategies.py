"""Hypothesis strategies: realistic OpenAI and Anthropic transcripts, valid and damaged.

Valid transcripts follow the provider rules (every tool call answered right after it, in call
order; Anthropic roles alternate and start with the user) and carry the awkward things real
agents send: CJK and emoji text, base64 images, parallel tool calls, error results, thinking
blocks with signatures, ``cache_control``, unknown fields and unknown block types, keys in
unusual orders.

Damaged transcripts start from a valid one and break tool pairing the ways real histories get
broken: dropped, duplicated, moved (later, or ahead of their call) and orphaned results, repeated
call ids, aborted assistant turns and stray trailing tool messages.

Speed: every hypothesis draw costs tens of microseconds, so the *structure* of a transcript
(how many messages, which kinds, how many parallel calls, which damage where) is drawn with
hypothesis and shrinks well, while the cosmetic *filling* (the text, key order, extra fields,
tool arguments) comes from a seeded :class:`random.Random` drawn once per transcript. Sizes
stay small by default (0-30 messages, most under 10) so the CI profile is fast.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import struct
import zlib
from typing import Any, Literal

from hypothesis import assume
from hypothesis import strategies as st

from compaction.adapters import to_canonical
from compaction.errors import TranscriptError
from compaction.transcript import Transcript

Messages = list[dict[str, Any]]
SystemPrompt = str | list[dict[str, Any]] | None
Format = Literal["openai", "anthropic"]

__all__ = [
    "DAMAGES",
    "Format",
    "Messages",
    "SystemPrompt",
    "anthropic_transcripts",
    "broken_transcripts",
    "canonical_transcripts",
    "damaged_transcripts",
    "json_values",
    "openai_transcripts",
    "texts",
    "valid_transcripts",
]

# --------------------------------------------------------------------------------------------
# Filling: text, JSON, images, extra fields (seeded random, cheap)
# --------------------------------------------------------------------------------------------

_SAMPLE_TEXTS = (
    "fix the failing build",
    "Run the tests again, please.",
    "修复构建错误并运行测试",
    "日本語のテキストと絵文字 🎌",
    "한국어 메시지입니다",
    "🚀 deploy ✅ done 👩\u200d💻🔥",
    "naïve café — «quotes» “smart” ‘single’",
    "line one\nline two\n\ttabbed",
    'JSON-looking {"a": [1, 2, 3]} text',
    "   ",
    "",
    "\u0000 nul, \u2028 separator, \ufeff bom",
    "e\u0301 combining, 𝔘𝔫𝔦𝔠𝔬𝔡𝔢, \U0010fffd",
)

_TRICKY_CHARS = (
    *"漢字中文日本語かなカナ한글",
    "😀",
    "🎉",
    "👍🏽",
    "🇯🇵",
    "👨\u200d👩\u200d👧",
    "🧪",
    "✅",
    "\u200b",
    "é",
    "ß",
    "Ω",
    "\n",
    "\t",
    '"',
    "\\",
    "\x7f",
    "\u2028",
)

_TOOL_NAMES = ("read_file", "write_file", "bash", "search", "list_dir", "web_fetch", "grep", "apply_patch")

_REALISTIC_INPUTS: tuple[dict[str, Any], ...] = (
    {},
    {"path": "src/main.py"},
    {"path": "docs/設計.md", "limit": 200, "offset": 0},
    {"cmd": "pytest -q", "timeout": 120.5, "env": {"CI": "1"}},
    {"query": "emoji 🚀 search", "filters": ["py", "md"], "case_sensitive": False},
    {"patch": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n", "dry_run": None},
    {"url": "https://example.com/a?b=c&d=é", "headers": {"Accept": "*/*"}},
)

_KEYS = ("path", "query", "n", "flags", "ok", "路径", "🔑", "", "a b", "$ref")
_CACHE_CONTROLS = ({"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"})


def _png(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    chunk = struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return b"\x89PNG\r\n\x1a\n" + chunk + b"\x00" * 8


class Noise:
    """Seeded filling for a transcript: text, JSON, ids, extra fields, key order."""

    def __init__(self, seed: int, *, unknown: bool = True) -> None:
        self.rng = random.Random(seed)
        self.unknown = unknown
        self.n = 0

    def maybe(self, chance: float) -> bool:
        return self.rng.random() < chance

    def choice(self, options: Any) -> Any:
        return self.rng.choice(list(options))

    def fresh(self, prefix: str) -> str:
        """A new identifier, unique within the transcript."""
        self.n += 1
        suffix = "".join(self.rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789") for _ in range(3))
        return f"{prefix}{self.n:03d}{suffix}"

    def char(self) -> str:
        roll = self.rng.random()
        if roll < 0.45:
            return chr(self.rng.randint(0x20, 0x7E))
        if roll < 0.7:
            return str(self.choice(_TRICKY_CHARS))
        if roll < 0.8:
            return chr(self.rng.randint(0x00, 0x1F))
        if roll < 0.9:
            return chr(self.rng.randint(0xA0, 0xD7FF))
        return chr(self.rng.randint(0xE000, 0x10FFFF))

    def text(self, max_size: int = 30) -> str:
        if self.maybe(0.4):
            return str(self.choice(_SAMPLE_TEXTS))
        return "".join(self.char() for _ in range(self.rng.randint(0, max_size)))

    def json_value(self, depth: int = 0) -> Any:
        roll = self.rng.randint(0, 9 if depth < 2 else 5)
        if roll == 0:
            return None
        if roll == 1:
            return self.maybe(0.5)
        if roll == 2:
            return self.rng.randint(-(2**53), 2**53)
        if roll == 3:
            return self.choice([0.0, -0.0, 1.5, 1e-7, 1e300, -2.5e-300, self.rng.uniform(-1e6, 1e6)])
        if roll <= 5:
            return self.text(12)
        if roll <= 7:
            return [self.json_value(depth + 1) for _ in range(self.rng.randint(0, 3))]
        return self.json_object(depth + 1)

    def json_object(self, depth: int = 0) -> dict[str, Any]:
        if depth == 0 and self.maybe(0.5):
            return copy.deepcopy(self.choice(_REALISTIC_INPUTS))
        keys = [self.choice(_KEYS) if self.maybe(0.6) else self.text(6) for _ in range(self.rng.randint(0, 4))]
        return {k: self.json_value(depth) for k in keys}

    def arguments(self) -> str:
        """OpenAI ``arguments``: JSON text in the styles models produce, sometimes not JSON at all."""
        args = self.json_object()
        style = self.rng.randint(0, 9)
        if style == 0:
            return json.dumps(args, indent=2, ensure_ascii=False)
        if style == 1:
            return json.dumps(args, separators=(",", ":"))
        if style == 2:
            return json.dumps(args)[:-1]  # truncated, as interrupted streams leave it
        if style == 3:
            return ""
        if style == 4:
            return json.dumps(args)  # ASCII escapes for non-ASCII text
        return json.dumps(args, ensure_ascii=False)

    def image(self) -> tuple[str, str]:
        """(media type, base64 data) of a tiny image whose header gives its size."""
        width, height = self.rng.randint(1, 4096), self.rng.randint(1, 4096)
        if self.maybe(0.7):
            return "image/png", base64.b64encode(_png(width, height)).decode("ascii")
        gif = b"GIF89a" + struct.pack("<HH", width % 65536, height % 65536) + b"\x00" * 6
        return "image/gif", base64.b64encode(gif).decode("ascii")

    def signature(self) -> str:
        return base64.b64encode(self.rng.randbytes(self.rng.randint(8, 64))).decode("ascii")

    def arrange(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Usually the given key order, sometimes shuffled (the round trip must keep either)."""
        if len(fields) > 1 and self.maybe(0.15):
            keys = list(fields)
            self.rng.shuffle(keys)
            return {k: fields[k] for k in keys}
        return dict(fields)

    def extras(self, *, name: bool = True) -> dict[str, Any]:
        """Unknown message-level fields, kept by the adapters."""
        out: dict[str, Any] = {}
        if not self.unknown:
            return out
        if name and self.maybe(0.12):
            out["name"] = self.choice(["alice", "agent_1", "bob"])
        if self.maybe(0.12):
            out["x_custom"] = {"trace": self.text(8), "attrs": self.json_object(1)}
        if self.maybe(0.1):
            out["id"] = self.fresh("msg_")
        return out

    def cache_control(self, fields: dict[str, Any], chance: float = 0.12) -> dict[str, Any]:
        if self.unknown and self.maybe(chance):
            fields["cache_control"] = dict(self.choice(_CACHE_CONTROLS))
        return fields


_seeds = st.integers(min_value=0, max_value=2**32 - 1)


def texts(max_size: int = 24) -> st.SearchStrategy[str]:
    """Hypothesis-native text with CJK and emoji, never lone surrogates."""
    return st.one_of(
        st.sampled_from(_SAMPLE_TEXTS),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=max_size),
        st.lists(st.sampled_from(_TRICKY_CHARS), min_size=1, max_size=max_size // 2 + 1).map("".join),
    )


json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | texts(12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts(6), inner, max_size=3),
    max_leaves=6,
)


def _sizes(min_messages: int, max_messages: int) -> st.SearchStrategy[int]:
    """Message counts skewed small: most transcripts are short, some reach the maximum."""
    return st.one_of(
        st.integers(min_messages, max(min_messages, min(max_messages, 4))),
        st.integers(min_messages, max(min_messages, min(max_messages, 10))),
        st.integers(min_messages, max(min_messages, max_messages)),
    )


# --------------------------------------------------------------------------------------------
# OpenAI Chat Completions
# --------------------------------------------------------------------------------------------


def _oa_text_part(z: Noise, *, unknown: bool = True) -> dict[str, Any]:
    fields: dict[str, Any] = {"type": "text", "text": z.text()}
    if unknown:
        z.cache_control(fields)
    return z.arrange(fields)


def _oa_image_part(z: Noise) -> dict[str, Any]:
    roll = z.rng.randint(0, 5)
    if roll == 0:  # the URL as a plain string, as some clients send it
        return {"type": "image_url", "image_url": f"https://example.com/img/{z.fresh('i')}.png"}
    if roll == 1:
        return {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg", "detail": "low"}}
    media, data = z.image()
    image: dict[str, Any] = {"url": f"data:{media};base64,{data}"}
    if roll <= 4:
        image["detail"] = z.choice(["low", "high", "auto"])
    return z.arrange({"type": "image_url", "image_url": z.arrange(image)})


def _oa_unknown_part(z: Noise) -> dict[str, Any]:
    if z.maybe(0.5):
        return {"type": "input_audio", "input_audio": {"data": "UklGRiQAAABXQVZFZm10IBAAAAAB", "format": "wav"}}
    return {"type": "file", "file": {"file_id": z.fresh("file-"), "filename": "report.pdf"}}


def _oa_parts(z: Noise, kinds: list[int], *, images: bool, unknown: bool) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for kind in kinds:
        if kind == 1 and images:
            parts.append(_oa_image_part(z))
        elif kind == 2 and unknown:
            parts.append(_oa_unknown_part(z))
        else:
            parts.append(_oa_text_part(z, unknown=unknown))
    return parts


_part_kinds = st.lists(st.integers(0, 2), min_size=1, max_size=4)


@st.composite
def _oa_system(draw: st.DrawFn, z: Noise) -> dict[str, Any]:
    role = "developer" if z.maybe(0.3) else "system"
    content: Any = z.text() if draw(st.booleans()) else [_oa_text_part(z, unknown=z.unknown) for _ in range(2)]
    return z.arrange({"role": role, "content": content, **z.extras()})


@st.composite
def _oa_user(draw: st.DrawFn, z: Noise, *, images: bool) -> dict[str, Any]:
    content: Any = (
        z.text() if draw(st.booleans()) else _oa_parts(z, draw(_part_kinds), images=images, unknown=z.unknown)
    )
    return z.arrange({"role": "user", "content": content, **z.extras()})


@st.composite
def _oa_assistant_text(draw: st.DrawFn, z: Noise) -> dict[str, Any]:
    kind = draw(st.integers(0, 3))
    content: Any
    if kind <= 1:
        content = z.text()
    elif kind == 2:
        content = [_oa_text_part(z, unknown=False) for _ in range(z.rng.randint(1, 2))]
    else:
        content = [{"type": "refusal", "refusal": z.text()}]
    fields: dict[str, Any] = {"role": "assistant", "content": content}
    if z.unknown and z.maybe(0.2):
        fields["refusal"] = None
    if z.unknown and z.maybe(0.15):
        fields["reasoning_content"] = z.text()
    return z.arrange({**fields, **z.extras()})


def _oa_tool_call(z: Noise, call_id: str) -> dict[str, Any]:
    function = z.arrange({"name": z.choice(_TOOL_NAMES), "arguments": z.arguments()})
    fields: dict[str, Any] = {"id": call_id, "type": "function", "function": function}
    if z.unknown and z.maybe(0.1):
        fields["index"] = z.rng.randint(0, 3)
    return z.arrange(fields)


@st.composite
def _oa_exchange(draw: st.DrawFn, z: Noise, *, max_calls: int = 4) -> Messages:
    """An assistant message with 1-4 parallel tool calls, then one tool message per call in order."""
    n = draw(st.integers(1, max(1, max_calls)))
    form = draw(st.integers(0, 3))
    ids = [z.fresh("call_") for _ in range(n)]
    fields: dict[str, Any] = {"role": "assistant"}
    if form == 0:
        fields["content"] = None
    elif form == 1:
        fields["content"] = z.text()
    elif form == 2:
        fields["content"] = ""
    fields["tool_calls"] = [_oa_tool_call(z, call_id) for call_id in ids]
    out = [z.arrange({**fields, **z.extras()})]
    for call_id in ids:
        roll = z.rng.randint(0, 5)
        content: Any
        if roll <= 2:
            content = z.text(60)
        elif roll <= 4:
            content = json.dumps(z.json_object(), ensure_ascii=False)
        else:
            content = [_oa_text_part(z, unknown=False) for _ in range(z.rng.randint(1, 2))]
        result: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "content": content}
        if z.unknown and z.maybe(0.15):
            result["name"] = z.choice(_TOOL_NAMES)
        if z.unknown and z.maybe(0.08):
            result["x_custom"] = {"elapsed_ms": z.rng.randint(0, 10_000)}
        out.append(z.arrange(result))
    return out


@st.composite
def openai_transcripts(
    draw: st.DrawFn,
    *,
    min_messages: int = 0,
    max_messages: int = 30,
    tools: bool = True,
    images: bool = True,
    unknown: bool = True,
    system: bool = True,
) -> Messages:
    """A valid OpenAI Chat Completions message list.

    Optional system/developer messages, then turns: a user message, 0-3 assistant tool rounds
    (each followed by one ``tool`` message per call, in call order) and an assistant reply. The
    transcript may stop after any complete message or exchange, never on unanswered calls.
    """
    z = Noise(draw(_seeds), unknown=unknown)
    target = draw(_sizes(min_messages, max_messages))
    out: Messages = []
    if system:
        out.extend(draw(_oa_system(z)) for _ in range(draw(st.integers(0, 2))))
    while len(out) < max(target, min_messages):
        out.append(draw(_oa_user(z, images=images)))
        for _ in range(draw(st.integers(0, 3)) if tools else 0):
            room = max_messages - len(out) - 1
            if room < 1 or len(out) >= target:
                break
            out.extend(draw(_oa_exchange(z, max_calls=min(4, room))))
        if len(out) < target:
            out.append(draw(_oa_assistant_text(z)))
    return out


# --------------------------------------------------------------------------------------------
# Anthropic Messages
# --------------------------------------------------------------------------------------------


def _an_text_block(z: Noise, *, unknown: bool = True) -> dict[str, Any]:
    fields: dict[str, Any] = {"type": "text", "text": z.text()}
    if unknown:
        z.cache_control(fields)
        if z.maybe(0.05):
            fields["citations"] = None
    return z.arrange(fields)


def _an_image_block(z: Noise, *, unknown: bool = True) -> dict[str, Any]:
    if z.maybe(0.2):
        source: dict[str, Any] = {"type": "url", "url": f"https://example.com/{z.fresh('img')}.png"}
    else:
        media, data = z.image()
        source = z.arrange({"type": "base64", "media_type": media, "data": data})
    fields: dict[str, Any] = {"type": "image", "source": source}
    if unknown:
        z.cache_control(fields)
    return z.arrange(fields)


def _an_unknown_block(z: Noise) -> dict[str, Any]:
    if z.maybe(0.6):
        return {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": z.text()},
            "title": z.choice(["notes.txt", "README", "設計書.md"]),
        }
    return {
        "type": "search_result",
        "source": "https://example.com/doc",
        "title": "Doc",
        "content": [{"type": "text", "text": z.text()}],
        "citations": {"enabled": True},
    }


def _an_blocks(z: Noise, kinds: list[int], *, images: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for kind in kinds:
        if kind == 1 and images:
            blocks.append(_an_image_block(z, unknown=z.unknown))
        elif kind == 2 and z.unknown:
            blocks.append(_an_unknown_block(z))
        else:
            blocks.append(_an_text_block(z, unknown=z.unknown))
    return blocks


def _reasoning(z: Noise, thinking: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if thinking and z.maybe(0.4):
        blocks.append(z.arrange({"type": "thinking", "thinking": z.text(60), "signature": z.signature()}))
    if thinking and z.maybe(0.15):
        blocks.append({"type": "redacted_thinking", "data": z.signature()})
    return blocks


@st.composite
def _an_system(draw: st.DrawFn, z: Noise) -> SystemPrompt:
    kind = draw(st.integers(0, 2))
    if kind == 0:
        return None
    if kind == 1:
        return z.text()
    return [_an_text_block(z, unknown=z.unknown) for _ in range(z.rng.randint(1, 3))]


@st.composite
def _an_user(draw: st.DrawFn, z: Noise, *, images: bool) -> dict[str, Any]:
    content: Any = z.text() if draw(st.booleans()) else _an_blocks(z, draw(_part_kinds), images=images)
    return z.arrange({"role": "user", "content": content, **z.extras(name=False)})


@st.composite
def _an_assistant_text(draw: st.DrawFn, z: Noise, *, thinking: bool) -> dict[str, Any]:
    content: Any
    if draw(st.booleans()):
        content = z.text()
    else:
        content = [
            *_reasoning(z, thinking),
            *(_an_text_block(z, unknown=z.unknown) for _ in range(z.rng.randint(1, 2))),
        ]
    return z.arrange({"role": "assistant", "content": content, **z.extras(name=False)})


def _an_tool_result(z: Noise, call_id: str, *, images: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
    roll = z.rng.randint(0, 9)
    if roll <= 5:
        fields["content"] = z.text(60)
    elif roll <= 8:
        fields["content"] = [
            _an_image_block(z, unknown=False) if images and z.maybe(0.25) else _an_text_block(z, unknown=False)
            for _ in range(z.rng.randint(1, 3))
        ]
    # roll 9: no content at all (the API allows it)
    if z.maybe(0.3):
        fields["is_error"] = z.maybe(0.5)
    z.cache_control(fields)
    return z.arrange(fields)


@st.composite
def _an_exchange(draw: st.DrawFn, z: Noise, *, thinking: bool, images: bool) -> Messages:
    """An assistant message with 1-4 ``tool_use`` blocks, then one user message with all results."""
    n = draw(st.integers(1, 4))
    with_text = draw(st.booleans())
    ids = [z.fresh("toolu_") for _ in range(n)]
    blocks = _reasoning(z, thinking)
    if with_text:
        blocks.append(_an_text_block(z, unknown=z.unknown))
    for call_id in ids:
        use = {"type": "tool_use", "id": call_id, "name": z.choice(_TOOL_NAMES), "input": z.json_object()}
        blocks.append(z.arrange(z.cache_control(use, 0.08)))
    assistant = z.arrange({"role": "assistant", "content": blocks, **z.extras(name=False)})
    results = [_an_tool_result(z, call_id, images=images) for call_id in ids]
    if z.unknown and z.maybe(0.1):
        results.append({"type": "text", "text": z.text()})  # a user note after the results
    return [assistant, z.arrange({"role": "user", "content": results, **z.extras(name=False)})]


@st.composite
def anthropic_transcripts(
    draw: st.DrawFn,
    *,
    min_messages: int = 0,
    max_messages: int = 30,
    tools: bool = True,
    thinking: bool = True,
    images: bool = True,
    unknown: bool = True,
    system: bool = True,
) -> tuple[Messages, SystemPrompt]:
    """A valid Anthropic ``(messages, system)`` pair: roles alternate, the first message is a user
    message, every ``tool_use`` is answered by the next user message (all results, in call order)."""
    z = Noise(draw(_seeds), unknown=unknown)
    target = draw(_sizes(min_messages, max_messages))
    system_prompt = draw(_an_system(z)) if system else None
    out: Messages = []
    while len(out) < max(target, min_messages):
        out.append(draw(_an_user(z, images=images)))
        for _ in range(draw(st.integers(0, 3)) if tools else 0):
            if len(out) + 2 > max_messages or len(out) >= target:
                break
            out.extend(draw(_an_exchange(z, thinking=thinking, images=images)))
        if len(out) < target:
            out.append(draw(_an_assistant_text(z, thinking=thinking)))
    return out, system_prompt


def valid_transcripts(fmt: Format, **kwargs: Any) -> st.SearchStrategy[tuple[Messages, SystemPrompt]]:
    """``(messages, system)`` for either format (``system`` is always None for OpenAI)."""
    if fmt == "openai":
        return openai_transcripts(**kwargs).map(lambda m: (m, None))
    return anthropic_transcripts(**kwargs)


def canonical_transcripts(fmt: Format, **kwargs: Any) -> st.SearchStrategy[Transcript]:
    """Valid transcripts read into canonical form."""
    return valid_transcripts(fmt, **kwargs).map(lambda ms: to_canonical(ms[0], ms[1], format=fmt))


# --------------------------------------------------------------------------------------------
# Damage
# --------------------------------------------------------------------------------------------

DAMAGES = (
    "drop_result",
    "duplicate_result",
    "move_result_later",
    "move_result_before_call",
    "orphan_result",
    "duplicate_call_id",
    "aborted_turn_end",
    "aborted_turn_then_user",
    "trailing_tool_message",
)

Location = tuple[int, int | None]  # (message index, block index for Anthropic; None for OpenAI)


class _Shape:
    """Format-specific access to the tool calls and results of provider dicts."""

    def __init__(self, fmt: Format) -> None:
        self.fmt = fmt

    def call_lists(self, messages: Messages) -> list[tuple[int, list[dict[str, Any]]]]:
        """(index, the mutable list holding the calls) of each assistant message with calls."""
        out: list[tuple[int, list[dict[str, Any]]]] = []
        for i, m in enumerate(messages):
            if m.get("role") != "assistant":
                continue
            if self.fmt == "openai":
                if m.get("tool_calls"):
                    out.append((i, m["tool_calls"]))
            elif isinstance(m.get("content"), list) and any(b.get("type") == "tool_use" for b in m["content"]):
                out.append((i, m["content"]))
        return out

    def calls(self, messages: Messages) -> list[tuple[int, dict[str, Any]]]:
        return [
            (i, c)
            for i, holder in self.call_lists(messages)
            for c in holder
            if self.fmt == "openai" or c.get("type") == "tool_use"
        ]

    def results(self, messages: Messages) -> list[Location]:
        out: list[Location] = []
        for i, m in enumerate(messages):
            if self.fmt == "openai":
                if m.get("role") == "tool":
                    out.append((i, None))
            elif m.get("role") == "user" and isinstance(m.get("content"), list):
                out.extend((i, j) for j, b in enumerate(m["content"]) if b.get("type") == "tool_result")
        return out

    def result_id(self, messages: Messages, loc: Location) -> str:
        i, j = loc
        return str(messages[i]["tool_call_id"] if j is None else messages[i]["content"][j]["tool_use_id"])

    def set_result_id(self, messages: Messages, loc: Location, call_id: str) -> None:
        i, j = loc
        if j is None:
            messages[i]["tool_call_id"] = call_id
        else:
            messages[i]["content"][j]["tool_use_id"] = call_id

    def take_result(self, messages: Messages, loc: Location) -> dict[str, Any]:
        """Remove a result and return a message holding only it; an emptied carrier is deleted."""
        i, j = loc
        if j is None:
            return messages.pop(i)
        block = messages[i]["content"].pop(j)
        if not messages[i]["content"]:
            del messages[i]
        return {"role": "user", "content": [block]}

    def result_message(self, call_id: str, text: str) -> dict[str, Any]:
        if self.fmt == "openai":
            return {"role": "tool", "tool_call_id": call_id, "content": text}
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}]}

    def call_message(self, ids: list[str]) -> dict[str, Any]:
        if self.fmt == "openai":
            calls = [
                {"id": i, "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "make"}'}} for i in ids
            ]
            return {"role": "assistant", "content": None, "tool_calls": calls}
        blocks = [{"type": "tool_use", "id": i, "name": "bash", "input": {"cmd": "make"}} for i in ids]
        return {"role": "assistant", "content": blocks}


def _apply(draw: st.DrawFn, z: Noise, shape: _Shape, messages: Messages, damage: str) -> str:
    """Apply one damage in place. Returns the damage applied: ``aborted_turn_end`` stands in when
    the wanted damage has nothing to act on (no results, no calls)."""
    results = shape.results(messages)
    calls = shape.calls(messages)

    def pick(n: int) -> int:
        return draw(st.integers(0, n - 1))

    if damage == "drop_result" and results:
        shape.take_result(messages, results[pick(len(results))])
        return damage
    if damage == "duplicate_result" and results:
        i, j = results[pick(len(results))]
        if j is not None and draw(st.booleans()):  # twice in the same carrier
            messages[i]["content"].insert(j + 1, copy.deepcopy(messages[i]["content"][j]))
        else:
            twin = (
                copy.deepcopy(messages[i])
                if j is None
                else {"role": "user", "content": [copy.deepcopy(messages[i]["content"][j])]}
            )
            messages.insert(draw(st.integers(i + 1, len(messages))), twin)
        return damage
    if damage == "move_result_later" and results:
        loc = results[pick(len(results))]
        carrier = shape.take_result(messages, loc)
        position = draw(st.integers(loc[0], len(messages)))
        messages[position:position] = [{"role": "user", "content": z.text()}, carrier]
        return damage
    if damage == "move_result_before_call" and results:
        # Logs merged out of order put a result ahead of its call: it is still that call's result.
        loc = results[pick(len(results))]
        call_id = shape.result_id(messages, loc)
        call_index = next((i for i, c in calls if c["id"] == call_id), None)
        if call_index is not None:
            carrier = shape.take_result(messages, loc)
            messages.insert(draw(st.integers(0, call_index)), carrier)
            return damage
    if damage == "orphan_result" and calls:
        index, call = calls[pick(len(calls))]
        holder = next(h for i, h in shape.call_lists(messages) if i == index)
        holder.remove(call)
        if not holder:
            if shape.fmt == "openai":
                del messages[index]["tool_calls"]
            if shape.fmt == "anthropic" or not messages[index].get("content"):
                del messages[index]
        return damage
    if damage == "duplicate_call_id" and len(calls) >= 2:
        a = pick(len(calls))
        b = (a + 1 + pick(len(calls) - 1)) % len(calls)
        old, new = calls[b][1]["id"], calls[a][1]["id"]
        calls[b][1]["id"] = new
        for loc in shape.results(messages):
            if shape.result_id(messages, loc) == old:
                shape.set_result_id(messages, loc, new)
        return damage
    if damage == "duplicate_call_id" and calls:  # the same call and result again, later
        call_id = calls[0][1]["id"]
        messages.extend([shape.call_message([call_id]), shape.result_message(call_id, "again")])
        return damage
    if damage == "aborted_turn_then_user":
        if calls:
            index, _ = calls[pick(len(calls))]
            ids = {c["id"] for i, c in calls if i == index}
            for loc in sorted(shape.results(messages), reverse=True):
                if shape.result_id(messages, loc) in ids:
                    shape.take_result(messages, loc)
            messages.insert(index + 1, {"role": "user", "content": z.text()})
        else:
            messages.extend([shape.call_message([z.fresh("zz_")]), {"role": "user", "content": "never mind"}])
        return damage
    if damage == "trailing_tool_message":
        known = [c["id"] for _, c in calls]
        reuse = bool(known) and draw(st.booleans())
        call_id = known[pick(len(known))] if reuse else z.fresh("zz_")
        messages.append(shape.result_message(call_id, z.text()))
        return damage
    # aborted_turn_end, and the stand-in when the wanted damage has nothing to act on.
    messages.append(shape.call_message([z.fresh("zz_") for _ in range(draw(st.integers(1, 3)))]))
    return "aborted_turn_end"


@st.composite
def damaged_transcripts(
    draw: st.DrawFn, fmt: Format, *, max_damages: int = 3, max_messages: int = 24, min_messages: int | None = None
) -> tuple[Transcript, list[str]]:
    """A damaged transcript in canonical form, and the damages applied to it (in order)."""
    sizes = (
        {"max_messages": max_messages}
        if min_messages is None
        else {"min_messages": min_messages, "max_messages": max_messages}
    )
    messages, system = draw(valid_transcripts(fmt, **sizes))
    messages = copy.deepcopy(messages)
    z = Noise(draw(_seeds))
    shape = _Shape(fmt)
    wanted = draw(st.lists(st.sampled_from(DAMAGES), min_size=1, max_size=max_damages))
    applied = [_apply(draw, z, shape, messages, damage) for damage in wanted]
    try:
        transcript = to_canonical(messages, system, format=fmt)
    except TranscriptError:  # pragma: no cover - every damage keeps the dicts readable
        assume(False)
        raise
    return transcript, applied


def broken_transcripts(fmt: Format, **kwargs: Any) -> st.SearchStrategy[Transcript]:
    """Canonical transcripts with broken tool pairing (see :data:`DAMAGES`)."""
    return damaged_transcripts(fmt, **kwargs).map(lambda pair: pair[0])
