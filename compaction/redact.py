"""Secrets out of summaries and ledgers.

A summary or an artifact list outlives the span it came from and may be logged, cached or sent
to another model, so credentials found in it are replaced with ``[REDACTED:<kind>]``. Only shapes
that are credentials are matched: ordinary hashes, UUIDs and paths are left alone.

>>> redact_secrets("export OPENAI_API_KEY=sk-proj-" + "a1B2" * 10)
('export OPENAI_API_KEY=[REDACTED:openai_key]', 1)
"""

from __future__ import annotations

import re

__all__ = ["REDACTED_PREFIX", "looks_like_secret", "redact_secrets"]

REDACTED_PREFIX = "[REDACTED"

# Order matters: private keys and JWTs first (they contain shapes the others would nibble at),
# Anthropic before OpenAI (both start with "sk-"), specific keys before generic assignments.
_KEY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s:,-]*)",
            re.DOTALL,
        ),
    ),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}")),
    ("stripe_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}")),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA)[0-9A-Z]{16}\b")),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("slack_token", re.compile(r"\bxox[baprs]-[A-Za-z0-9-]{10,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
)
_SECRET_TOKEN = re.compile("|".join(f"(?:{p.pattern})" for kind, p in _KEY_PATTERNS if kind != "private_key"))

# "Authorization: Bearer <token>", also bare "Bearer <token>" and Basic credentials.
# The token must have a digit so that prose ("Basic authentication") is left alone.
_AUTH_RE = re.compile(r"(?i)(\b(?:Bearer|Basic)\s+)((?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{8,})")
# scheme://user:password@host -> the password goes, the user and host stay (they are useful context).
# The user may be empty (redis://:password@host).
_URL_PASSWORD_RE = re.compile(r"((?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)((?!\[REDACTED)[^\s@/]+)(@)")
_KEY_WORDS = (
    r"api[_-]?key|apikey|secret[_-]?key|secret[_-]?access[_-]?key|access[_-]?key|account[_-]?key"
    r"|client[_-]?secret|secret|access[_-]?token|auth[_-]?token|refresh[_-]?token"
    r"|token|password|passwd|private[_-]?key"
)
_ASSIGN_RE = re.compile(
    rf"(?i)((?:{_KEY_WORDS})[\"']?\s*[:=]\s*[\"']?|--(?:{_KEY_WORDS})[= ][\"']?)"
    r"([^\s\"',;&)}\]]{4,})"
)
_PLACEHOLDER = re.compile(
    r"(?i)^(?:\[REDACTED.*|\*+|x+|<[^>]*>?|\$\{?\w+\}?|%\(?\w+\)?s?|null|none|true|false|\.\.\.)$"
)
_RANDOM_SEGMENT = re.compile(r"(?=[^/]*\d)(?=[^/]*[A-Za-z])[A-Za-z0-9+=_-]{16,}")


def _looks_like_path(value: str) -> bool:
    """``secret_file: /run/secrets/db`` names a file; ``/kQ9x...`` (an AWS secret key may start with
    a slash) is the secret itself: base64 padding or a long random segment gives it away."""
    if not re.match(r"~?\.{0,2}/", value) or "+" in value or "=" in value:
        return False
    segments = [part for part in value.split("/") if part]
    return (len(segments) >= 2 or "." in value) and not any(_RANDOM_SEGMENT.fullmatch(p) for p in segments)


def _assignment_kind(key: str) -> str:
    key = key.lower()
    if "pass" in key or "pwd" in key:
        return "password"
    if "token" in key:
        return "token"
    if "key" in key:
        return "api_key"
    return "secret"


def _replace_assignment(match: re.Match[str]) -> str:
    key, value = match.group(1), match.group(2)
    if _PLACEHOLDER.match(value) or _looks_like_path(value):
        return match.group()
    if "token" in key.lower() and value.isdigit():
        return match.group()  # "max_token: 4096" is a number, not a credential
    return f"{key}[REDACTED:{_assignment_kind(key)}]"


# Cheap cues, so that text without any (most tool output) skips the full redaction pass. Every
# match of the patterns above starts on a line holding one of them (for assignments the cue is the key
# and its "=" or ":", so "token" in code is not one), which lets a long text be redacted around its
# cues only. They are matched in the lower-cased text: a case-insensitive alternation is several
# times slower to scan with, and a cue that matches too often only costs a little time.
_CUE = re.compile(
    r"private key|eyj|sk-|sk_|rk_|akia|asia|aida|aroa|gh[pousr]_|github_pat_|xox[baprs]-|aiza"
    r"|bearer|basic\s|://[^\s/@]*:[^\s@/]+@"
    rf"|(?:{_KEY_WORDS})[\"']?\s*[:=]|--(?:{_KEY_WORDS})[= ]"
)


def redact_secrets(text: str) -> tuple[str, int]:
    """``text`` with credentials replaced by ``[REDACTED:<kind>]``, and how many were replaced.

    Kinds: private_key, jwt, anthropic_key, openai_key, stripe_key, aws_access_key, github_token,
    slack_token, google_api_key, bearer_token, password, token, api_key, secret. A password in a
    URL keeps the URL readable: ``https://user:[REDACTED]@host``.

    >>> redact_secrets("curl -H 'Authorization: Bearer abcdef123456' https://bob:hunter22@db.local/x")
    ("curl -H 'Authorization: Bearer [REDACTED:bearer_token]' https://bob:[REDACTED]@db.local/x", 2)
    >>> redact_secrets("commit 3f9a2c1 at /etc/hosts, id 6f1c0e4a-5b7d-4c2e-9a1b-0d2e3f4a5b6c")[1]
    0
    """
    if _CUE.search(text.lower()) is None:
        return text, 0  # no pattern can match: skip the full pass
    return _redact_all(text)


def _redact_all(text: str) -> tuple[str, int]:
    total = 0
    for kind, pattern in _KEY_PATTERNS:
        text, n = pattern.subn(f"[REDACTED:{kind}]", text)
        total += n
    text, n = _URL_PASSWORD_RE.subn(r"\1[REDACTED]\3", text)
    total += n
    text, n = _AUTH_RE.subn(r"\1[REDACTED:bearer_token]", text)
    total += n
    # Counted by comparing replacements, since placeholder values are passed through unchanged.
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        out = _replace_assignment(match)
        count += out != match.group()
        return out

    text = _ASSIGN_RE.sub(replace, text)
    return text, total + count


def looks_like_secret(token: str) -> bool:
    """True when ``token`` contains a credential shape (API key, token, JWT).

    >>> looks_like_secret("ghp_" + "A1b2" * 9), looks_like_secret("req_01HXYZ8K2M3N4P")
    (True, False)
    """
    return _SECRET_TOKEN.search(token) is not None


# Texts at least this long are redacted window by window (see _cue_windows), shorter ones at once.
_WINDOWED_MIN_CHARS = 4_096
# A value may follow its key or "Bearer" after line breaks: a window reaches this many non-blank
# lines past the cue's line.
_WINDOW_LINES_AFTER = 2


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _cue_windows(text: str, lowered: str) -> list[tuple[int, int]]:
    """Merged ``(start, end)`` spans of whole lines: each line with a cue and the lines after it."""
    windows: list[tuple[int, int]] = []
    pos = 0
    while (m := _CUE.search(lowered, pos)) is not None:
        start = text.rfind("\n", 0, m.start()) + 1
        end = cue_line_end = _line_end(text, m.end())
        taken = 0
        while end < len(text) and taken < _WINDOW_LINES_AFTER:
            next_end = _line_end(text, end + 1)
            taken += bool(text[end + 1 : next_end].strip())
            end = next_end
        if windows and start <= windows[-1][1] + 1:
            windows[-1] = (windows[-1][0], max(end, windows[-1][1]))
        else:
            windows.append((start, end))
        pos = cue_line_end + 1  # cues on the lines taken along still open their own windows
    return windows


def redact_if_needed(text: str) -> str:
    """``text`` with secrets redacted, as :func:`redact_secrets` does; a long text is redacted only
    in the lines around its cues (tool output of megabytes where a few lines of code assign a token).

    >>> redact_if_needed("plain log line"), redact_if_needed("token=abcd1234efgh5678")
    ('plain log line', 'token=[REDACTED:token]')
    """
    if len(text) < _WINDOWED_MIN_CHARS:
        return redact_secrets(text)[0]
    lowered = text.lower()
    if _CUE.search(lowered) is None:
        return text
    if len(lowered) != len(text) or "private key" in lowered:
        return _redact_all(text)[0]  # offsets would differ; a key block spans many lines
    pieces: list[str] = []
    last = 0
    changed = False
    for start, end in _cue_windows(text, lowered):
        window = text[start:end]
        redacted = _redact_all(window)[0]
        changed = changed or redacted != window
        pieces += (text[last:start], redacted)
        last = end
    return "".join([*pieces, text[last:]]) if changed else text
