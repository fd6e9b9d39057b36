"""Secrets out of summaries, ledgers and records.

A summary or an artifact list outlives the span it came from and may be logged, cached or sent
to another model, so credentials found in it are replaced with ``[REDACTED:<kind>]``. Only shapes
that are credentials are matched: ordinary hashes, UUIDs and paths are left alone.

The token shapes come from detect-secrets' plugins (a maintained list: AWS, Azure storage,
GitHub, GitLab, npm, OpenAI, PyPI, SendGrid, Slack, Square, Stripe, Mailchimp), imported on the
first redaction, not with the package. Our own steps, each named below, cover what those plugins
miss: keys they do not know (Anthropic, Google, Hugging Face, bare npm, newer OpenAI), and
credentials that only their context gives away (passwords in URLs, also JSON-escaped ones, ``curl
-u``, ``mysql -p``, ``docker login -p``, ``.netrc``, Basic and Bearer headers, presigned URL
signatures, ``key = "a pass phrase"`` assignments).

>>> redact_secrets("export OPENAI_API_KEY=sk-proj-" + "a1B2" * 10)
('export OPENAI_API_KEY=[REDACTED:openai_key]', 1)
"""

from __future__ import annotations

import base64
import binascii
import functools
import importlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

__all__ = ["REDACTED_PREFIX", "looks_like_secret", "redact_if_needed", "redact_record", "redact_secrets"]

REDACTED_PREFIX = "[REDACTED"

_NOT_DONE = r"(?!\[REDACTED)"

# --------------------------------------------------------------------------------------------
# Step 1: detect-secrets' token shapes
# --------------------------------------------------------------------------------------------

# (plugin module, class, kind per denylist entry (None: entry not used), lower-case cues). A cue is
# a literal every match contains on its first line: text without any cue skips the full pass.
# Left out: the keyword and entropy plugins (they flag ordinary identifiers), JWT (its pattern stops
# before the signature: ours below takes the whole token), private keys (the plugin finds the BEGIN
# line; ours takes the block), and plugins whose shapes have no literal to cue on or need a
# keyword nearby (Artifactory, Discord, Telegram, Twilio, IBM, SoftLayer, Cloudant, basic auth).
_PLUGINS: tuple[tuple[str, str, tuple[str | None, ...], tuple[str, ...]], ...] = (
    ("aws", "AWSKeyDetector", ("aws_access_key", None), ("a3t", "abia", "acca", "akia", "asia")),
    ("azure_storage_key", "AzureStorageKeyDetector", ("azure_storage_key",), ("accountkey=",)),
    ("github_token", "GitHubTokenDetector", ("github_token",), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (
        "gitlab_token",
        "GitLabTokenDetector",
        ("gitlab_token",) * 7,
        (
            "glpat-",
            "gldt-",
            "glft-",
            "glsoat-",
            "glrt-",
            "gr1348941",
            "glcbt-",
            "glimt-",
            "glptt-",
            "glagent-",
            "gloas-",
        ),
    ),
    ("mailchimp", "MailchimpDetector", ("mailchimp_key",), ("-us",)),
    ("npm", "NpmDetector", ("npm_token",), ("_authtoken=",)),
    ("openai", "OpenAIDetector", ("openai_key",), ("t3blbkfj",)),
    ("pypi_token", "PypiTokenDetector", ("pypi_token", "pypi_token"), ("pypi-age",)),
    ("sendgrid", "SendGridDetector", ("sendgrid_key",), ("sg.",)),
    ("slack", "SlackDetector", ("slack_token", "slack_webhook"), ("xox", "hooks.slack.com/")),
    ("square_oauth", "SquareOAuthDetector", ("square_oauth_secret",), ("sq0csp-",)),
    ("stripe", "StripeDetector", ("stripe_key",), ("sk_live_", "rk_live_")),
)
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_-]*")


@functools.cache
def _plugin_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """(kind, pattern) of the plugins used, compiled once per process (the import costs ~0.2 s)."""
    out: list[tuple[str, re.Pattern[str]]] = []
    for module, name, kinds, _ in _PLUGINS:
        detector = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)
        for kind, pattern in zip(kinds, detector.denylist, strict=False):
            if kind is not None:
                out.append((kind, pattern))
    return tuple(out)


def _plugin_tokens(text: str) -> tuple[str, int]:
    """Every plugin match replaced (its first group when it has one: the npm pattern matches the
    whole ``.npmrc`` line), widened to the end of the token: the plugins match a fixed length and
    real keys may be longer (a 107-character Stripe key)."""
    total = 0
    for kind, pattern in _plugin_patterns():
        if pattern.search(text) is None:
            continue
        pieces: list[str] = []
        last = 0
        for match in pattern.finditer(text):
            group = 1 if pattern.groups and match.group(1) else 0
            start, end = match.span(group)
            if start < last or text.startswith(REDACTED_PREFIX, start):
                continue
            if end < len(text) and text[end - 1 : end].isalnum():
                tail = _TOKEN_TAIL.match(text, end)
                end = tail.end() if tail else end
            pieces += (text[last:start], f"[REDACTED:{kind}]")
            last = end
            total += 1
        text = "".join([*pieces, text[last:]])
    return text, total


# --------------------------------------------------------------------------------------------
# Step 2: token shapes the plugins miss
# --------------------------------------------------------------------------------------------


def _token(prefix: str, rest: str) -> re.Pattern[str]:
    """A token starting with the literal ``prefix`` at a word boundary, or right after a JSON escape
    ("...\\nsk_live_..." in escaped text). The boundary is checked behind the literal, not before
    it: a pattern that starts with a literal is scanned for many times faster."""
    lit = re.escape(prefix)
    return re.compile(f"{lit}(?:(?<=(?<![A-Za-z0-9_]){lit})|(?<=\\\\[nrt]{lit})){rest}")


# Order matters: private keys and JWTs first (they contain shapes the others would nibble at),
# Anthropic before OpenAI (both start with "sk-").
_KEY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s:,-]*)",
            re.DOTALL,
        ),
    ),
    ("jwt", _token("eyJ", r"[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")),
    ("anthropic_key", _token("sk-ant-", r"[A-Za-z0-9_-]{20,}")),
    # detect-secrets knows only the legacy "T3BlbkFJ" shape.
    ("openai_key", _token("sk-", r"(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}")),
    # The plugin knows live keys only.
    ("stripe_key", _token("sk_test_", r"[0-9A-Za-z]{16,}")),
    ("stripe_key", _token("rk_test_", r"[0-9A-Za-z]{16,}")),
    ("github_token", _token("github_pat_", r"[A-Za-z0-9_]{22,}")),  # fine-grained tokens
    ("slack_token", _token("xox", r"[abeoprs]-[A-Za-z0-9-]{10,}")),  # shapes without digit groups
    ("google_api_key", _token("AIza", r"[0-9A-Za-z_-]{35}")),
    ("huggingface_token", _token("hf_", r"[A-Za-z0-9]{30,}(?![A-Za-z0-9_])")),
    ("npm_token", _token("npm_", r"[A-Za-z0-9]{36}(?![A-Za-z0-9_])")),
)
_OWN_TOKEN_CUES = ("private key", "eyj", "sk-", "sk_test_", "rk_test_", "github_pat_", "xox", "aiza", "hf_", "npm_")


def _own_tokens(text: str) -> tuple[str, int]:
    total = 0
    for kind, pattern in _KEY_PATTERNS:
        text, n = pattern.subn(f"[REDACTED:{kind}]", text)
        total += n
    return text, total


# --------------------------------------------------------------------------------------------
# Step 3: credentials given away by their context
# --------------------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(
    r"(?i)^(?:\[REDACTED.*|\*+|x+|<[^>]*>?|\$\{?\w+\}?|%\(?\w+\)?s?|null|none|true|false|\.\.\.)$"
)


def _is_placeholder(value: str) -> bool:
    return _PLACEHOLDER.match(value) is not None


def _replace_group(
    pattern: re.Pattern[str], group: int, label: str, text: str, keep: Callable[[str], bool]
) -> tuple[str, int]:
    """``text`` with ``group`` of every match of ``pattern`` replaced by ``label`` unless ``keep(value)``."""
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        value = match.group(group)
        if keep(value):
            return match.group()
        count += 1
        start, end = match.start(group) - match.start(), match.end(group) - match.start()
        whole = match.group()
        return whole[:start] + label + whole[end:]

    return pattern.sub(replace, text), count


# scheme://user:password@host -> the password goes, the user and host stay (they are useful context).
# The user may be empty (redis://:password@host); JSON may escape the slashes (postgres:\/\/u:p@h).
_URL_PASSWORD_RE = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*:(?:\\?/){2}[^\s:/@\\\"']*:" + _NOT_DONE + r"([^\s@/\\\"']+)@"
)
# The signature and session token of a presigned URL (AWS S3, Google Cloud Storage, Azure SAS).
_URL_SIGNATURE_RE = re.compile(
    r"(?i)(?:[?&;]|\\u0026)(?:X-Amz-Signature|X-Amz-Security-Token|X-Goog-Signature|Signature|sig)="
    + _NOT_DONE
    + r"([^&\s\"'#\\]+)"
)
# "Authorization: Bearer <token>", also bare "Bearer <token>", and Basic credentials.
# The patterns below that start with a lookahead for their first character ("(?=m)") match what they
# would without it: it only lets the engine skip positions where no match can start (2-3x faster).
_AUTH_RE = re.compile(r"(?i)(?=b)\b(Bearer|Basic)\s+" + _NOT_DONE + r"([A-Za-z0-9._~+/=-]{8,})")


def _basic_credentials(value: str) -> bool:
    """Does ``value`` decode (base64) to ``user:password``? Then it is a Basic credential even
    without a digit in it."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    return ":" in decoded and decoded.isprintable()


def _auth_headers(text: str) -> tuple[str, int]:
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        scheme, value = match.group(1), match.group(2)
        # A digit or a decodable user:password tells a credential from prose ("Basic authentication").
        if not any(c.isdigit() for c in value) and not (scheme.lower() == "basic" and _basic_credentials(value)):
            return match.group()
        count += 1
        return match.group()[: match.start(2) - match.start()] + "[REDACTED:bearer_token]"

    return _AUTH_RE.sub(replace, text), count


# Command lines that take a password as an argument.
_CURL_USER_RE = re.compile(r"(?=-)(?<=\s)(?:-u\s*|--user[\s=]+)(['\"]?)[^\s:'\"]+:" + _NOT_DONE + r"([^\s'\"]+)\1")
_MYSQL_RE = re.compile(
    r"(?=m)\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb|mariadb-dump)\b[^\n]*?\s-p(['\"]?)"
    + _NOT_DONE
    + r"([^\s'\"]+)\1"
)
_LOGIN_RE = re.compile(
    r"(?=[dpbsn])\b(?:docker|podman|buildah|skopeo|nerdctl)\s+login\b[^\n]*?\s(?:-p|--password)(?:\s+|=)(['\"]?)"
    + _NOT_DONE
    + r"([^\s'\"]+)\1"
)
# .netrc: "machine <host> login <user> password <secret>", on one line or several.
_NETRC_RE = re.compile(
    r"(?=[md])\b(?:machine\s+\S+|default)(?:\s+(?:login|account|port)\s+\S+){0,3}\s+password\s+" + _NOT_DONE + r"(\S+)"
)


def _command_lines(text: str) -> tuple[str, int]:
    total = 0
    steps = ((_CURL_USER_RE, 2), (_MYSQL_RE, 2), (_LOGIN_RE, 2), (_NETRC_RE, 1))
    for pattern, group in steps:
        # "docker run -u 1000:1000" is a uid:gid, not a password; "$TOKEN" is a placeholder.
        text, n = _replace_group(
            pattern, group, "[REDACTED:password]", text, lambda v: v.isdigit() or _is_placeholder(v)
        )
        total += n
    return text, total


_KEY_WORDS = (
    r"api[_-]?key|apikey|secret[_-]?key|secret[_-]?access[_-]?key|access[_-]?key|account[_-]?key"
    r"|client[_-]?secret|secret|access[_-]?token|auth[_-]?token|refresh[_-]?token"
    r"|token|password|passwd|private[_-]?key"
)
_QUOTE = r"(?:\\?[\"'])"  # a quote, maybe JSON-escaped
_ASSIGN_KEY = rf"(?:{_KEY_WORDS}){_QUOTE}?\s*[:=]\s*"
# key = "a quoted value", spaces allowed: the whole pass phrase goes.
# Each starts with a lookahead for the first character of a key ("--" for a flag): it only skips
# positions where no alternative can start (same flags, so the same case folding), about three
# times faster over long texts than trying the alternation at every character.
_QUOTED_ASSIGN_RE = re.compile(
    rf"(?i)(?=[acprst])({_ASSIGN_KEY})(\\?[\"'])" + _NOT_DONE + r"((?:(?!\2)[^\n]){1,200}?)\2"
)
_ASSIGN_RE = re.compile(
    rf"(?i)(?=[acprst-])({_ASSIGN_KEY}{_QUOTE}?|--(?:{_KEY_WORDS})[= ][\"']?)"
    r"([^\s\"',;&)}\]\\]{4,})"
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


def _keep_value(key: str, value: str) -> bool:
    if _is_placeholder(value) or _looks_like_path(value):
        return True
    return "token" in key.lower() and value.isdigit()  # "max_token: 4096" is a number, not a credential


def _assignments(text: str) -> tuple[str, int]:
    # Counted by comparing replacements, since placeholder values are passed through unchanged.
    count = 0

    def quoted(match: re.Match[str]) -> str:
        nonlocal count
        key, quote, value = match.group(1), match.group(2), match.group(3)
        if _keep_value(key, value.strip()):
            return match.group()
        count += 1
        return f"{key}{quote}[REDACTED:{_assignment_kind(key)}]{quote}"

    def plain(match: re.Match[str]) -> str:
        nonlocal count
        key, value = match.group(1), match.group(2)
        if _keep_value(key, value):
            return match.group()
        count += 1
        return f"{key}[REDACTED:{_assignment_kind(key)}]"

    text = _QUOTED_ASSIGN_RE.sub(quoted, text)
    text = _ASSIGN_RE.sub(plain, text)
    return text, count


def _url_passwords(text: str) -> tuple[str, int]:
    return _replace_group(_URL_PASSWORD_RE, 1, "[REDACTED]", text, lambda v: False)


def _url_signatures(text: str) -> tuple[str, int]:
    return _replace_group(_URL_SIGNATURE_RE, 1, "[REDACTED:url_signature]", text, _is_placeholder)


# The steps, in order: a step never sees what an earlier one replaced as a value of its own.
_STEPS: tuple[Callable[[str], tuple[str, int]], ...] = (
    _own_tokens,
    _plugin_tokens,
    _url_passwords,
    _url_signatures,
    _auth_headers,
    _command_lines,
    _assignments,
)


def _trie(words: Iterable[str]) -> str:
    """One regex alternation for ``words``, factored by common prefixes (``gl(?:pat|dt)-``): the
    regex engine tries an alternation branch by branch at every position, so a flat list of fifty
    literals scans about five times slower."""
    root: dict[str, Any] = {}
    for word in words:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 and "" not in node else "(?:" + "|".join(branches) + ")"
        return body + ("?" if "" in node else "")

    return build(root)


_KEY_WORD_LIST = tuple(
    f"{a}{sep}{b}" if b else a
    for a, b in (
        ("api", "key"),
        ("secret", "key"),
        ("secret", "access_key"),
        ("secret", "access-key"),
        ("secret", "accesskey"),
        ("access", "key"),
        ("account", "key"),
        ("client", "secret"),
        ("access", "token"),
        ("auth", "token"),
        ("refresh", "token"),
        ("private", "key"),
        ("apikey", ""),
        ("secret", ""),
        ("token", ""),
        ("password", ""),
        ("passwd", ""),
    )
    for sep in (("_", "-", "") if b else ("",))
)


# Cheap cues, so that text without any (most tool output) skips the full redaction pass. Every
# match of the steps above starts on a line holding one of them (for assignments the cue is the key
# and its "=" or ":", so "token" in code is not one), which lets a long text be redacted around its
# cues only. They are matched in the lower-cased text: a case-insensitive alternation is several
# times slower to scan with, and a cue that matches too often only costs a little time.
_LITERAL_CUES = (
    *_OWN_TOKEN_CUES,
    *(c for p in _PLUGINS for c in p[3]),
    "x-amz-signature=",
    "x-amz-security-token=",
    "x-goog-signature=",
    "signature=",
    "sig=",
    "bearer",
    "basic ",
    "mysql",
    "mariadb",
    "login",
    "--user",
)
# Separate patterns, not one alternation: each scans with its own literal-prefix and first-
# character shortcuts, which a single alternation of them all loses (three times slower).
# The ones led by an alternation start with it, not with a lookahead for its first characters: an
# alternation whose branches all start with a literal gives the engine a set of first characters
# to skip to in its fast scan, and a leading lookahead turns that off (CPython 3.11: the three
# scans 25-60 % slower with one, on the bench, corpus and 2,000-message histories).
_CUES: tuple[re.Pattern[str], ...] = (
    re.compile(_trie(_LITERAL_CUES)),
    re.compile(rf"{_trie(_KEY_WORD_LIST)}(?:\\?[\"'])?\s*[:=]"),
    re.compile(rf"--{_trie(_KEY_WORD_LIST)}[= ]"),
    re.compile(r":(?:\\?/){2}[^\s/@]*:[^\s@/]+@"),
    re.compile(r"-u\s*['\"]?[^\s:'\"]+:"),
    re.compile(r"(?:machine\s+\S+|default)\s+(?:login|password)"),
)


# Every key word holds one of these, and the last cue needs "login" or "password": two or four
# substring checks (much faster than a regex scan) rule out the key-word cues and the .netrc cue
# for most texts. Computed, not assumed: a key word without an anchor turns the shortcut off.
_KEY_ANCHORS = ("key", "token", "secret", "pass")
_KEY_SHORTCUT = all(any(a in w for a in _KEY_ANCHORS) for w in _KEY_WORD_LIST)


def _has_cue(lowered: str) -> bool:
    return any(_CUES[k].search(lowered) is not None for k in _possible_cues(lowered))


def _keyed(lowered: str) -> bool:
    """False when no key-word cue (_CUES[1], _CUES[2]) can match ``lowered``."""
    return not _KEY_SHORTCUT or any(a in lowered for a in _KEY_ANCHORS)


def _netrc_worded(lowered: str) -> bool:
    """False when the .netrc cue (_CUES[5]) cannot match ``lowered``."""
    return "login" in lowered or "password" in lowered


def _possible_cues(lowered: str) -> tuple[int, ...]:
    """The indexes in _CUES of the patterns that may match ``lowered`` (the others cannot: their
    substring checks above fail), so a scan for cue spans skips whole passes over a long text."""
    keyed, netrc = _keyed(lowered), _netrc_worded(lowered)
    return tuple(k for k in range(len(_CUES)) if (keyed or k not in (1, 2)) and (netrc or k != 5))


def _cue_spans(lowered: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of the cues in ``lowered``, in order of their start; each pattern is searched
    again only once the scan has passed its last match."""
    found = {k: _CUES[k].search(lowered) for k in _possible_cues(lowered)}
    pos = 0
    while True:
        live = [m for m in found.values() if m is not None]
        if not live:
            return
        first = min(live, key=lambda m: m.start())
        yield first.start(), first.end()
        pos = first.start() + 1
        for k, m in found.items():
            if m is not None and m.start() < pos:
                found[k] = _CUES[k].search(lowered, pos)


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
    if not _has_cue(text.lower()):
        return text, 0  # no pattern can match: skip the full pass
    return _redact_all(text)


def _redact_all(text: str) -> tuple[str, int]:
    total = 0
    for step in _STEPS:
        text, n = step(text)
        total += n
    return text, total


@functools.cache
def _secret_token_re() -> re.Pattern[str]:
    shapes = [p.pattern for kind, p in _KEY_PATTERNS if kind != "private_key"]
    shapes += [p.pattern if not p.flags & re.IGNORECASE else f"(?i:{p.pattern})" for _, p in _plugin_patterns()]
    return re.compile("|".join(f"(?:{s})" for s in shapes))


def looks_like_secret(token: str) -> bool:
    """True when ``token`` contains a credential shape (API key, token, JWT).

    >>> looks_like_secret("ghp_" + "A1b2" * 9), looks_like_secret("req_01HXYZ8K2M3N4P")
    (True, False)
    """
    return _secret_token_re().search(token) is not None


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
    for cue_start, cue_end in _cue_spans(lowered):
        if cue_start < pos:
            continue
        start = text.rfind("\n", 0, cue_start) + 1
        end = cue_line_end = _line_end(text, cue_end)
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
    if len(lowered) != len(text) or "private key" in lowered:
        # offsets would differ; a key block spans many lines
        return _redact_all(text)[0] if _has_cue(lowered) else text
    windows = _cue_windows(text, lowered)  # none without a cue: the text has nothing to redact
    if not windows:
        return text
    pieces: list[str] = []
    last = 0
    changed = False
    for start, end in windows:
        window = text[start:end]
        redacted = _redact_all(window)[0]
        changed = changed or redacted != window
        pieces += (text[last:start], redacted)
        last = end
    return "".join([*pieces, text[last:]]) if changed else text


# Record entries that are already redacted when the run redacts: the prompts were built from
# redacted pieces, and redacting a whole prompt again could join pieces across message boundaries
# ("password:" ending one message, the next message's first word), changing the prompt that
# replay looks its answer up by.
_SENT_AS_REDACTED = frozenset({"prompt", "system_prompt"})


def redact_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a compaction record with every string redacted (the ``config`` entry as it is):
    the summarizer's answers, the instructions, error messages. The prompts are redacted too,
    unless the run already redacted what it sent (``config.redact_secrets``).

    >>> redact_record({"instructions": "use token=abcd1234efgh", "calls": [{"summary": "ok"}]})
    {'instructions': 'use token=[REDACTED:token]', 'calls': [{'summary': 'ok'}]}
    """
    config = record.get("config")
    sent_redacted = not isinstance(config, Mapping) or bool(config.get("redact_secrets", True))
    skip = _SENT_AS_REDACTED if sent_redacted else frozenset()
    return {k: v if k == "config" else redact_json(v, skip_keys=skip, key=k) for k, v in record.items()}


def redact_json(value: Any, *, skip_keys: frozenset[str] = frozenset(), key: str | None = None) -> Any:
    """A copy of a JSON value with every string redacted, except the values of ``skip_keys``
    (messages as the service returns them, a record's entries). Strings without a cue are
    returned as they are, without a full pass: most (ids, cut points, plain messages) hold none.

    >>> redact_json({"role": "tool", "content": "use token=abcd1234efgh", "n": 3})
    {'role': 'tool', 'content': 'use token=[REDACTED:token]', 'n': 3}
    """

    seen: dict[str, str] = {}  # the same text twice (a message in removed and in archive): one pass

    def walk(value: Any, key: str | None) -> Any:
        if isinstance(value, str):
            if key in skip_keys:
                return value
            if value not in seen:
                seen[value] = redact_if_needed(value)  # checks for a cue first: most hold none
            return seen[value]
        if isinstance(value, Mapping):
            return {k: walk(v, k if isinstance(k, str) else None) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [walk(v, None) for v in value]
        return value

    return walk(value, key)
