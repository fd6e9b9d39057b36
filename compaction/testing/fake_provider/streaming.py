"""Streaming: a completion as the server-sent events of the OpenAI or Anthropic format, paced by the
latency model."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

from compaction.testing.fake_provider.recorded import RecordedRequest
from compaction.testing.fake_provider.replies import LatencyModel
from compaction.testing.fake_provider.wire import ANTHROPIC_STOP, Completion, anthropic_usage, openai_usage

# One streamed piece of text: 64 characters, 16 tokens at the fake's chars/4.
_PIECE_CHARS = 64
_PIECE_TOKENS = 16


class _EventStream:
    """Writes server-sent events as HTTP/1.1 chunks, pacing the text pieces."""

    def __init__(self, writer: asyncio.StreamWriter, per_piece_s: float) -> None:
        self._writer = writer
        self._per_piece_s = per_piece_s

    async def send(self, event: str | None, data: Mapping[str, Any] | str) -> None:
        payload = data if isinstance(data, str) else json.dumps(data)
        frame = (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"
        encoded = frame.encode()
        self._writer.write(f"{len(encoded):x}\r\n".encode() + encoded + b"\r\n")
        await self._writer.drain()

    async def pace(self) -> None:
        """Wait as long as the model takes to write one piece."""
        if self._per_piece_s > 0:
            await asyncio.sleep(self._per_piece_s)


async def write_stream(
    writer: asyncio.StreamWriter,
    rec: RecordedRequest,
    c: Completion,
    seq: int,
    latency: LatencyModel,
    *,
    keep_alive: bool,
) -> None:
    """Answer ``rec`` with ``c`` as an event stream: the head, the first-token wait, then the events
    of the request's format (OpenAI's for the OpenAI route, Anthropic's otherwise)."""
    head = [
        "HTTP/1.1 200 OK",
        "content-type: text/event-stream",
        "cache-control: no-cache",
        "transfer-encoding: chunked",
        "connection: keep-alive" if keep_alive else "connection: close",
    ]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
    ttft = latency.first_token_s(c.input_tokens)
    if ttft > 0:
        await asyncio.sleep(ttft)
    text = c.text or ""
    pieces = [text[i : i + _PIECE_CHARS] for i in range(0, len(text), _PIECE_CHARS)]
    events = _EventStream(writer, latency.per_output_token_s * _PIECE_TOKENS)
    if rec.route == "openai":
        await _openai_events(events, rec, c, seq, pieces)
    else:
        await _anthropic_events(events, rec, c, seq, pieces)
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def _openai_events(
    events: _EventStream, rec: RecordedRequest, c: Completion, seq: int, pieces: list[str]
) -> None:
    base = {
        "id": f"chatcmpl-fake-{seq}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": rec.model,
    }
    if not c.no_output:
        await events.send(None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        if c.tool_call:
            call = {
                "index": 0,
                "id": f"call_fake_{seq}",
                "type": "function",
                "function": {"name": c.tool_name, "arguments": json.dumps(c.tool_args)},
            }
            await events.send(None, {**base, "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
        for piece in pieces:
            await events.pace()
            await events.send(None, {**base, "choices": [{"index": 0, "delta": {"content": piece}}]})
        await events.send(None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": c.finish}]})
    if (rec.body.get("stream_options") or {}).get("include_usage"):
        await events.send(None, {**base, "choices": [], "usage": openai_usage(c)})
    await events.send(None, "[DONE]")


async def _anthropic_events(
    events: _EventStream, rec: RecordedRequest, c: Completion, seq: int, pieces: list[str]
) -> None:
    message: dict[str, Any] = {
        "id": f"msg_fake_{seq}",
        "type": "message",
        "role": "assistant",
        "model": rec.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**anthropic_usage(c), "output_tokens": 1},
    }
    await events.send("message_start", {"type": "message_start", "message": message})
    if c.tool_call:
        block = {"type": "tool_use", "id": f"toolu_fake_{seq}", "name": c.tool_name, "input": {}}
        await events.send("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block})
        delta = {"type": "input_json_delta", "partial_json": json.dumps(c.tool_args)}
        await events.send("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
        await events.send("content_block_stop", {"type": "content_block_stop", "index": 0})
    elif not c.no_output:
        block = {"type": "text", "text": ""}
        await events.send("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block})
        for piece in pieces:
            await events.pace()
            delta = {"type": "text_delta", "text": piece}
            await events.send("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
        await events.send("content_block_stop", {"type": "content_block_stop", "index": 0})
    stop = {"stop_reason": ANTHROPIC_STOP[c.finish], "stop_sequence": None}
    await events.send(
        "message_delta", {"type": "message_delta", "delta": stop, "usage": {"output_tokens": c.output_tokens}}
    )
    await events.send("message_stop", {"type": "message_stop"})
