"""Just enough HTTP/1.1 for the fake: read a request (chunked bodies too), write a response in one
segment."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any, TypeAlias

from compaction.testing.fake_provider.wire import reason

# method, target, version, headers (lower-case names), body
RawRequest: TypeAlias = tuple[str, str, str, dict[str, str], bytes]


async def read_request(reader: asyncio.StreamReader) -> RawRequest | None:
    """The next request on a keep-alive connection (a chunked body joined), or None at its end."""
    line = await reader.readline()
    while line in (b"\r\n", b"\n"):
        line = await reader.readline()
    if not line:
        return None
    method, target, version = line.decode("latin-1").split()
    headers: dict[str, str] = {}
    while True:
        raw = await reader.readline()
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks: list[bytes] = []
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                break
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(chunks)
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
    return method, target, version, headers, body


async def write_response(
    writer: asyncio.StreamWriter,
    status: int,
    body: Any,
    *,
    request_id: str,
    keep_alive: bool,
    headers: Mapping[str, str] | None = None,
    raw: bytes | None = None,
) -> None:
    """Write one JSON response (``raw`` bytes instead of ``body`` when given)."""
    payload = raw if raw is not None else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
    head = [f"HTTP/1.1 {status} {reason(status)}", "content-type: application/json"]
    head.append(f"content-length: {len(payload)}")
    head.append(f"x-request-id: {request_id}")
    head.extend(f"{k}: {v}" for k, v in (headers or {}).items())
    head.append("connection: keep-alive" if keep_alive else "connection: close")
    # One write per response: head and body leave in the same segment.
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)
    await writer.drain()
