"""The substitution steps in order, and :func:`redact_secrets`: one text through all of them."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable

from compaction.redact.assignments import _assignments, _pass_phrase_lines
from compaction.redact.base import _NOT_DONE, _basic_credentials, _replace_group
from compaction.redact.context import (
    _auth_headers,
    _command_lines,
    _cookies,
    _env_keys,
    _pgpass_lines,
    _url_passwords,
    _url_signatures,
)
from compaction.redact.cues import _has_cue
from compaction.redact.shapes import _own_tokens, _plugin_tokens
from compaction.redact.whole_text import _ANSI_CUES, _ANSI_RE, _whole_text_steps

# Docker's config.json: "auth" is base64 of user:password.
_DOCKER_AUTH_RE = re.compile(r"(?i)(?=a)\bauth\\?[\"']\s*:\s*\\?[\"']" + _NOT_DONE + r"([A-Za-z0-9+/=]{8,})")


# Base64 of a JSON document that holds a credential (a .dockerconfigjson, a secret manifest).
_ENCODED_JSON_RE = re.compile(r"(?<![A-Za-z0-9+/=.])eyJ[A-Za-z0-9+/]{16,}={0,2}(?![A-Za-z0-9+/=.])")


def _holds_credential(value: str) -> bool:
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    return '"auth' in decoded or redact_secrets(decoded)[1] > 0


def _encoded_credentials(text: str) -> tuple[str, int]:
    text, n = _replace_group(_DOCKER_AUTH_RE, 1, "[REDACTED:password]", text, lambda v: not _basic_credentials(v))
    text, m = _replace_group(_ENCODED_JSON_RE, 0, "[REDACTED:encoded_secret]", text, lambda v: not _holds_credential(v))
    return text, n + m


# The steps, in order: a step never sees what an earlier one replaced as a value of its own.
_STEPS: tuple[Callable[[str], tuple[str, int]], ...] = (
    _own_tokens,
    _plugin_tokens,
    _encoded_credentials,
    _url_passwords,
    _url_signatures,
    _auth_headers,
    _cookies,
    _command_lines,
    _pgpass_lines,
    _env_keys,
    _pass_phrase_lines,
    _assignments,
)


def redact_secrets(text: str) -> tuple[str, int]:
    """``text`` with credentials replaced by ``[REDACTED:<kind>]``, and how many were replaced.

    Kinds: private_key, jwt, anthropic_key, openai_key, stripe_key, aws_access_key, github_token,
    gitlab_token, slack_token, slack_webhook, google_api_key, huggingface_token, npm_token,
    azure_storage_key, url_signature, bearer_token, password, token, api_key, secret (and the other
    detect-secrets shapes above). A password in a URL keeps the URL readable:
    ``https://user:[REDACTED]@host``.

    >>> redact_secrets("curl -H 'Authorization: Bearer abcdef123456' https://bob:hunter22@db.local/x")
    ("curl -H 'Authorization: Bearer [REDACTED:bearer_token]' https://bob:[REDACTED]@db.local/x", 2)
    >>> redact_secrets("mysql -u root -phunter22 app")
    ('mysql -u root -p[REDACTED:password] app', 1)
    >>> redact_secrets("commit 3f9a2c1 at /etc/hosts, id 6f1c0e4a-5b7d-4c2e-9a1b-0d2e3f4a5b6c")[1]
    0
    """
    redacted, count = _redact_text(text)
    plain = _without_ansi(text)
    if plain is not None:
        # The codes stay unless they hid a secret: then the text is returned without them.
        redacted_plain, count_plain = _redact_text(plain)
        if redacted_plain != _ANSI_RE.sub("", redacted):
            return redacted_plain, count_plain
    return redacted, count


def _without_ansi(text: str) -> str | None:
    """``text`` without terminal escape codes, or None when it has none."""
    if not any(cue in text for cue in _ANSI_CUES):
        return None
    plain = _ANSI_RE.sub("", text)
    return plain if plain != text else None


def _redact_text(text: str) -> tuple[str, int]:
    count = 0
    lowered = text.lower()
    # else no pattern can match: skip the full pass
    if _has_cue(lowered, text if len(lowered) == len(text) else None):
        text, count = _redact_all(text)
    text, found = _whole_text_steps(text)
    return text, count + found


def _redact_all(text: str) -> tuple[str, int]:
    total = 0
    for step in _STEPS:
        text, n = step(text)
        total += n
    return text, total
