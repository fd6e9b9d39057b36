"""Prompt caching as the providers account it: the cacheable prefix of a request and what a later
request reads from it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from compaction.testing.fake_provider.recorded import RecordedRequest, content_text, message_text


def _strip_cache_control(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_control(v) for v in value]
    return value


def _segments(req: RecordedRequest) -> list[tuple[str, int, bool]]:
    """The request as ordered cacheable blocks: (cumulative prefix key, cumulative tokens, breakpoint)."""
    blocks: list[tuple[Any, str, bool]] = []  # (canonical json value, text, has cache_control)
    body = req.body
    tools = body.get("tools")
    if tools:
        blocks.append((_strip_cache_control(tools), json.dumps(tools), False))
    system = body.get("system")
    if isinstance(system, str):
        blocks.append((system, system, False))
    elif isinstance(system, list):
        for b in system:
            blocks.append((_strip_cache_control(b), content_text([b]), isinstance(b, Mapping) and "cache_control" in b))
    for m in body.get("messages") or ():
        if not isinstance(m, Mapping):
            continue
        content = m.get("content")
        if req.route == "anthropic" and isinstance(content, list):
            for b in content:
                mark = isinstance(b, Mapping) and "cache_control" in b
                blocks.append(([m.get("role"), _strip_cache_control(b)], content_text([b]), mark))
        else:
            mark = "cache_control" in m or (
                isinstance(content, list) and any(isinstance(b, Mapping) and "cache_control" in b for b in content)
            )
            blocks.append(([m.get("role"), _strip_cache_control(dict(m))], message_text(m), mark))
    out: list[tuple[str, int, bool]] = []
    digest = hashlib.sha256()
    chars = 0
    for value, text, mark in blocks:
        digest.update(json.dumps(value, sort_keys=True, separators=(",", ":")).encode())
        chars += len(text) + 1
        out.append((digest.copy().hexdigest(), chars // 4, mark))
    return out


class PromptCache:
    """Anthropic: explicit breakpoints with a 20-block look-back. OpenAI: automatic message-prefix
    caching in 128-token steps. Both need ``min_tokens`` before anything is cached."""

    def __init__(self, min_tokens: int) -> None:
        self.min_tokens = min_tokens
        self._keys: set[str] = set()

    def account(self, req: RecordedRequest, input_tokens: int) -> tuple[int, int]:
        segs = _segments(req)
        if req.route == "anthropic":
            marks = [i for i, s in enumerate(segs) if s[2]]
            if not marks:
                return 0, 0
            hit = 0
            for b in marks:
                for j in range(b, max(-1, b - 21), -1):
                    if segs[j][0] in self._keys:
                        hit = max(hit, segs[j][1])
                        break
            last = segs[marks[-1]][1]
            for b in marks:
                if segs[b][1] >= self.min_tokens:
                    self._keys.add(segs[b][0])
            write = max(0, last - hit) if last >= self.min_tokens else 0
            return min(hit, input_tokens), min(write, input_tokens - min(hit, input_tokens))
        hit = 0
        for key, tokens, _ in segs:
            if key in self._keys:
                hit = tokens
        for key, tokens, _ in segs:
            if tokens >= self.min_tokens:
                self._keys.add(key)
        hit = hit // 128 * 128 if hit >= self.min_tokens else 0
        return min(hit, input_tokens), 0
