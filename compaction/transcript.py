"""The canonical transcript: one immutable shape for OpenAI and Anthropic conversations.

Every stage of the pipeline works on these models; adapters (``compaction.adapters``) convert
from and back to the provider formats. Nothing a provider sent is dropped: fields and block
types we do not model are kept in ``extra`` or as :class:`UnknownPart`, reasoning blocks are
kept byte-for-byte (signatures included), and the original key order is remembered so a
converted-back message serializes exactly as it came in (prompt caches compare bytes).

>>> msg = Message(role="user", parts=(TextPart(text="fix the build"),), id="m1")
>>> msg.text
'fix the build'
>>> msg.model_copy(update={"pinned": True}).pinned
True
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import struct
from collections.abc import Callable, Hashable, Iterator, Mapping
from functools import cached_property
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")
Role = Literal["system", "user", "assistant", "tool"]
ContentForm = Literal["string", "parts", "null", "absent"]
TranscriptFormat = Literal["openai", "anthropic"]

_FROZEN = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=False)


class _Part(BaseModel):
    model_config = _FROZEN
    # Fields of the provider block that we do not model (cache_control, citations, ...), kept as-is.
    extra: dict[str, Any] = Field(default_factory=dict)
    # The provider block's original key order, so it serializes back byte-identically.
    key_order: tuple[str, ...] = ()


class TextPart(_Part):
    """Plain text."""

    kind: Literal["text"] = "text"
    text: str


class ImagePart(_Part):
    """An image. ``source`` is the provider's payload kept verbatim: OpenAI's ``image_url`` object
    (``{"url": ..., "detail": ...}``) or Anthropic's ``source`` object (base64 or url)."""

    kind: Literal["image"] = "image"
    source: dict[str, Any]

    @property
    def url(self) -> str | None:
        url = self.source.get("url")
        return url if isinstance(url, str) and not url.startswith("data:") else None

    @property
    def base64_data(self) -> str | None:
        """The base64 payload, from an Anthropic base64 source or an OpenAI data URL."""
        if self.source.get("type") == "base64" and isinstance(self.source.get("data"), str):
            return str(self.source["data"])
        url = self.source.get("url")
        if isinstance(url, str) and url.startswith("data:") and "," in url:
            return url.split(",", 1)[1]
        return None

    @property
    def payload_chars(self) -> int:
        data = self.base64_data
        return len(data) if data is not None else len(json.dumps(self.source))

    def dimensions(self) -> tuple[int, int] | None:
        """Width and height read from the image header (PNG, GIF, JPEG, WebP), when the bytes are inline."""
        data = self.base64_data
        if data is None:
            return None
        return _image_dimensions(data)


class ToolCallPart(_Part):
    """A tool call made by the assistant. ``arguments`` is JSON text exactly as the model produced
    it (OpenAI) or as serialized from Anthropic's ``input`` object."""

    kind: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: str
    # "string": OpenAI's JSON-in-a-string; "object": Anthropic's input object.
    arguments_form: Literal["string", "object"] = "string"
    # OpenAI nests name/arguments under "function"; unknown keys of that object are kept here.
    function_extra: dict[str, Any] = Field(default_factory=dict)
    function_key_order: tuple[str, ...] = ()

    @property
    def arguments_valid(self) -> bool:
        try:
            json.loads(self.arguments)
        except ValueError:
            return False
        return True


class UnknownPart(_Part):
    """A block type we do not model, kept verbatim and passed through untouched."""

    kind: Literal["unknown"] = "unknown"
    block: dict[str, Any]


class ReasoningPart(_Part):
    """A reasoning/thinking block (``thinking`` or ``redacted_thinking``), kept byte-for-byte."""

    kind: Literal["reasoning"] = "reasoning"
    block: dict[str, Any]

    @property
    def text(self) -> str:
        value = self.block.get("thinking", self.block.get("data", ""))
        return value if isinstance(value, str) else json.dumps(value)


ResultContentPart = Annotated[TextPart | ImagePart | UnknownPart, Field(discriminator="kind")]


class ToolResultPart(_Part):
    """The result of a tool call. ``content`` is a string or a tuple of parts, as the provider sent it."""

    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    content: str | tuple[ResultContentPart, ...] = ""
    is_error: bool | None = None

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def images(self) -> tuple[ImagePart, ...]:
        if isinstance(self.content, str):
            return ()
        return tuple(p for p in self.content if isinstance(p, ImagePart))


Part = Annotated[
    TextPart | ImagePart | ToolCallPart | ToolResultPart | ReasoningPart | UnknownPart,
    Field(discriminator="kind"),
]


class Message(BaseModel):
    """One message of a conversation, provider-neutral and immutable.

    ``role`` is ``tool`` for a message that carries only tool results (an OpenAI tool message,
    or an Anthropic user message made of ``tool_result`` blocks). ``pinned`` messages are never
    compacted away. ``extra`` keeps every message-level field we do not model (``name``, ``id``,
    ``cache_control``, provider-specific keys).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    parts: tuple[Part, ...] = ()
    id: str
    pinned: bool = False
    content_form: ContentForm = "parts"
    extra: dict[str, Any] = Field(default_factory=dict)
    key_order: tuple[str, ...] = ()
    # The role string the provider used when it differs from ``role`` (OpenAI "developer").
    source_role: str | None = None

    # Derived views are cached on the instance (messages are immutable); ``model_copy`` drops them
    # so a copy with new parts never reports the old ones.
    @cached_property
    def text(self) -> str:
        """All plain text of the message (text parts, and the text of tool results)."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart | ToolResultPart))

    @cached_property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCallPart))

    @cached_property
    def tool_results(self) -> tuple[ToolResultPart, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolResultPart))

    @property
    def own_id(self) -> str | None:
        """The ``id`` field the caller gave the message, if any. ``id`` above is the canonical id,
        unique in a transcript; the caller's may repeat (the adapters keep it in ``extra``)."""
        value = self.extra.get("id")
        return str(value) if isinstance(value, str | int) and not isinstance(value, bool) and value != "" else None

    @property
    def has_tool_calls(self) -> bool:
        return bool(self.tool_calls)

    @property
    def has_tool_results(self) -> bool:
        return bool(self.tool_results)

    @cached_property
    def is_user_turn(self) -> bool:
        """A user message with something the user said (not only tool results)."""
        return self.role == "user" and any(not isinstance(p, ToolResultPart | ReasoningPart) for p in self.parts)

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` once per message and key. Stages that derive a message from another (pruned,
        prepared for the summarizer) use it, since agents compact the same messages again and again."""
        store: dict[Hashable, Any] = self.__dict__.setdefault("_memo", {})
        if key not in store:
            store[key] = compute()
        return store[key]  # type: ignore[no-any-return]

    def carried_tokens(self, counter: object) -> int | None:
        """The token count ``counter`` gave this message, when one was carried with it (see
        :meth:`carry_tokens`), else None."""
        counts: dict[object, int] | None = self.__dict__.get("_tokens")
        return counts.get(counter) if counts is not None else None

    def carry_tokens(self, counter: object, tokens: int) -> None:
        """Carry ``counter``'s exact count of this message with it, so that whoever holds the
        message next (the pipeline's input count) sums it instead of counting again. ``counter`` is
        the counter object itself (its identity names what was counted). The count stays with a copy
        that changes only what no counter reads (:data:`_COUNT_NEUTRAL`: the id, the pin)."""
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise ValueError(f"a carried token count must be an int >= 0, got {tokens!r}")
        self.__dict__.setdefault("_tokens", {})[counter] = tokens

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Message:
        copy = super().model_copy(update=update, deep=deep)
        for name in _DERIVED:
            copy.__dict__.pop(name, None)
        counts = copy.__dict__.pop("_tokens", None)
        if counts and update is not None and update.keys() <= _COUNT_NEUTRAL:
            copy.__dict__["_tokens"] = dict(counts)
        return copy

    def iter_images(self) -> Iterator[ImagePart]:
        for part in self.parts:
            if isinstance(part, ImagePart):
                yield part
            elif isinstance(part, ToolResultPart):
                yield from part.images

    def with_parts(self, parts: tuple[Part, ...]) -> Message:
        """A copy with new parts. String-form messages whose parts are no longer one text part
        become parts-form so nothing is lost on the way back out."""
        form = self.content_form
        if form == "string" and not (len(parts) == 1 and isinstance(parts[0], TextPart)):
            only_text_and_calls = all(isinstance(p, TextPart | ToolCallPart) for p in parts)
            texts = [p for p in parts if isinstance(p, TextPart)]
            form = "string" if only_text_and_calls and len(texts) <= 1 else "parts"
        return self.model_copy(update={"parts": parts, "content_form": form})


_DERIVED = ("text", "tool_calls", "tool_results", "is_user_turn", "_memo")
_COUNT_NEUTRAL = frozenset({"id", "pinned"})
"""Fields a token counter never reads: a copy changing only these keeps the carried counts."""


class Transcript(BaseModel):
    """A whole conversation in canonical form, remembering the provider format it came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: TranscriptFormat
    messages: tuple[Message, ...]

    def __len__(self) -> int:
        return len(self.messages)

    def replace(self, messages: tuple[Message, ...]) -> Transcript:
        return Transcript(format=self.format, messages=messages)


def derive_message_id(index: int, role: str, payload: Any) -> str:
    """A stable id for a message that has none: from its position, role and whole content (tool calls
    included), so two different messages at the same position never share an archive id."""
    return message_id_of(index, role, id_payload(payload))


def id_payload(payload: Any) -> bytes:
    """What :func:`derive_message_id` hashes of ``payload``: kept by whoever derives the id of the
    same content at several positions, so that each derivation only hashes."""
    return json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8", "replace")


def message_id_of(index: int, role: str, encoded: bytes) -> str:
    """:func:`derive_message_id` from the :func:`id_payload` of its payload."""
    digest = hashlib.sha1(f"{index}\x00{role}\x00".encode(), usedforsecurity=False)
    digest.update(encoded)
    return "m_" + digest.hexdigest()[:16]


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-like data (dicts and lists copied, scalars shared), so that neither the
    caller's objects nor ours can be changed through the other."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [copy_json(v) for v in value]
    return value


def ordered(fields: Mapping[str, Any], key_order: tuple[str, ...]) -> dict[str, Any]:
    """``fields`` as a dict whose keys follow ``key_order`` first, then any new keys."""
    if not key_order:
        return dict(fields)
    out: dict[str, Any] = {k: fields[k] for k in key_order if k in fields}
    for key, value in fields.items():
        if key not in out:
            out[key] = value
    return out


def _image_dimensions(data: str) -> tuple[int, int] | None:
    try:
        head = base64.b64decode(data[:65536] + "=" * (-len(data[:65536]) % 4), validate=False)
    except (binascii.Error, ValueError):
        return None
    if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24:
        width, height = struct.unpack(">II", head[16:24])
        return int(width), int(height)
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        width, height = struct.unpack("<HH", head[6:10])
        return int(width), int(height)
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP" and len(head) >= 30:
        chunk = head[12:16]
        if chunk == b"VP8X":
            width = 1 + int.from_bytes(head[24:27], "little")
            height = 1 + int.from_bytes(head[27:30], "little")
            return width, height
        if chunk == b"VP8 " and len(head) >= 30:
            width, height = struct.unpack("<HH", head[26:30])
            return int(width & 0x3FFF), int(height & 0x3FFF)
        if chunk == b"VP8L" and len(head) >= 25:
            bits = int.from_bytes(head[21:25], "little")
            return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
        return None
    if head.startswith(b"\xff\xd8"):
        return _jpeg_dimensions(head)
    return None


def _jpeg_dimensions(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height = int.from_bytes(data[i + 5 : i + 7], "big")
            width = int.from_bytes(data[i + 7 : i + 9], "big")
            return width, height
        i += 2 + length
    return None
