"""Everything one error says, gathered before any rule of :mod:`guards.overflow` runs: class names
along the MRO (and of its causes), status codes, error codes in attributes and bodies, headers,
message texts, and the codes, class names and token numbers quoted in those texts."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Bounds the regex work on pathological messages (some providers echo the request).
MAX_TEXT_CHARS = 20_000
_MAX_CAUSE_DEPTH = 3


def rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


@dataclass(slots=True)
class Evidence:
    """Everything gathered from one error, before any rule runs."""

    class_names: list[str] = field(default_factory=list)
    status: int | None = None
    codes: list[str] = field(default_factory=list)
    # Class names and codes quoted inside message texts: text evidence, not structure.
    text_class_names: list[str] = field(default_factory=list)
    text_codes: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    numbers: dict[str, int] = field(default_factory=dict)

    def add_status(self, value: object) -> None:
        status = _as_status(value)
        if status is not None and self.status is None:
            self.status = status

    def add_code(self, value: object) -> None:
        if isinstance(value, str):
            code = value.strip()
            # "error" is the envelope type of Anthropic bodies, not a code
            if code and code.lower() != "error" and code not in self.codes:
                self.codes.append(code)
        else:
            # numeric "code" fields hold the HTTP status (Gemini, llama.cpp)
            self.add_status(value)

    def add_text(self, value: object) -> None:
        if isinstance(value, str) and value.strip():
            text = value[:MAX_TEXT_CHARS]
            if not any(text in seen for seen in self.texts):
                self.texts.append(text)

    def add_headers(self, value: object) -> None:
        for key, item in _items(value):
            if isinstance(key, str) and isinstance(item, str | int | float):
                self.headers.setdefault(key.lower(), str(item))


def _as_status(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and 100 <= value <= 599:
        return value
    return None


def _safe_getattr(obj: object, name: str) -> Any:
    # Properties on SDK objects can raise (e.g. an unread streaming response).
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _items(value: object) -> Iterable[tuple[object, object]]:
    if isinstance(value, Mapping):
        return list(value.items())
    items = _safe_getattr(value, "items")
    if callable(items):
        try:
            return [(k, v) for k, v in items()]
        except Exception:
            return []
    return []


_BODY_TEXT_KEYS = ("message", "detail", "msg", "error_message", "errorMessage")
_BODY_STATUS_KEYS = ("status_code", "http_status", "statusCode", "http_code")
_BODY_NUMBER_KEYS = ("n_prompt_tokens", "n_ctx")


def _walk_body(body: object, ev: Evidence, depth: int = 0) -> None:
    """Collect codes, texts, statuses and numbers from a JSON-like error body."""
    if depth > 4:
        return
    if isinstance(body, str):
        ev.add_text(body)
        parsed = _parse_json(body)
        if parsed is not None:
            _walk_body(parsed, ev, depth + 1)
        return
    if isinstance(body, list | tuple):
        for item in body[:10]:
            _walk_body(item, ev, depth + 1)
        return
    if not isinstance(body, Mapping):
        return
    # nested "error" first: its code is more specific than the envelope's
    if "error" in body:
        _walk_body(body["error"], ev, depth + 1)
    for key in ("code", "type", "status", "__type"):
        if key in body:
            ev.add_code(body[key])
    for key in _BODY_STATUS_KEYS:
        if key in body:
            ev.add_status(body[key])
    for key in _BODY_TEXT_KEYS:
        if key in body:
            _walk_body(body[key], ev, depth + 1)
    for key in _BODY_NUMBER_KEYS:
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            ev.numbers.setdefault(key, value)
    if "headers" in body:
        ev.add_headers(body["headers"])
    for key in ("body", "details", "response"):
        if key in body:
            _walk_body(body[key], ev, depth + 1)
    delay = body.get("retryDelay")
    if isinstance(delay, str):
        ev.add_text(f"retryDelay: {delay}")


def _parse_json(text: str) -> object | None:
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        parsed: object = json.loads(stripped)
    except ValueError:
        return None
    return parsed


_IGNORED_CLASSES = frozenset({"object", "BaseException", "Exception"})


def _gather_exception(error: BaseException, ev: Evidence, *, primary: bool) -> None:
    if primary:
        ev.class_names.extend(c.__name__ for c in type(error).__mro__ if c.__name__ not in _IGNORED_CLASSES)
    for name in ("status_code", "http_status", "status"):
        value = _safe_getattr(error, name)
        if isinstance(value, str) and not value.strip().isdigit():
            ev.add_code(value)  # e.g. Gemini "RESOURCE_EXHAUSTED"
        else:
            ev.add_status(value)
    response = _safe_getattr(error, "response")
    if response is not None:
        ev.add_status(_safe_getattr(response, "status_code"))
        ev.add_headers(_safe_getattr(response, "headers"))
    ev.add_headers(_safe_getattr(error, "headers"))
    for name in ("code", "type", "error_code"):
        value = _safe_getattr(error, name)
        if isinstance(value, str | int) and not isinstance(value, bool):
            ev.add_code(value)
    for name in ("body", "error", "json_body"):
        value = _safe_getattr(error, name)
        if isinstance(value, Mapping | str | list):
            _walk_body(value, ev)
    message = _safe_getattr(error, "message")
    if isinstance(message, str):
        ev.add_text(message)
    with contextlib.suppress(Exception):  # a broken __str__ must not hide the error
        ev.add_text(str(error))


# Class names and codes quoted inside texts, e.g. "litellm.RateLimitError: ..." or
# "{'code': 'context_length_exceeded'}" in a logged message.
_TEXT_CLASS = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception))\b")
# "code" keys first: they are more specific than "type" ("invalid_api_key" vs "invalid_request_error")
_TEXT_CODES = tuple(
    re.compile(rf"""["']{key}["']\s*:\s*["']([A-Za-z][A-Za-z0-9_.#:-]*)["']""")
    for key in ("code", "(?:__)?type", "status")
)
_TEXT_STATUS = re.compile(
    r"""(?:error code|status code|status_code|http status|\bstatus|\bhttp(?:/\d(?:\.\d)?)?|["']code["'])"""
    r"""\s*[:=]?\s*["']?([1-5]\d\d)\b""",
    re.IGNORECASE,
)
_TEXT_NUMBER = re.compile(r"""["']?(n_prompt_tokens|n_ctx)["']?\s*[:=]\s*(\d+)""")


def gather(error: object) -> Evidence:
    ev = Evidence()
    if isinstance(error, BaseException):
        _gather_exception(error, ev, primary=True)
        # SDK wrappers keep the provider's error as the cause; it often has the body.
        seen = {id(error)}
        cause = error.__cause__ or error.__context__
        for _ in range(_MAX_CAUSE_DEPTH):
            if cause is None or id(cause) in seen:
                break
            seen.add(id(cause))
            _gather_exception(cause, ev, primary=False)
            cause = cause.__cause__ or cause.__context__
    elif isinstance(error, Mapping | str):
        _walk_body(error, ev)
    else:
        raise TypeError(f"error must be an exception, a string or a mapping, got {type(error).__name__}")
    for text in ev.texts:
        for match in _TEXT_CLASS.finditer(text):
            if match.group(1) not in ev.class_names and match.group(1) not in ev.text_class_names:
                ev.text_class_names.append(match.group(1))
        for pattern in _TEXT_CODES:
            for match in pattern.finditer(text):
                code = match.group(1).strip()
                if code and code.lower() != "error" and code not in ev.codes and code not in ev.text_codes:
                    ev.text_codes.append(code)
        if ev.status is None:
            status_match = _TEXT_STATUS.search(text)
            if status_match:
                ev.add_status(int(status_match.group(1)))
        for match in _TEXT_NUMBER.finditer(text):
            ev.numbers.setdefault(match.group(1), int(match.group(2)))
    return ev
