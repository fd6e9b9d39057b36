"""Secrets out of summaries, ledgers and records.

A summary or an artifact list outlives the span it came from and may be logged, cached or sent
to another model, so credentials found in it are replaced with ``[REDACTED:<kind>]``. Only shapes
that are credentials are matched: ordinary hashes, UUIDs and paths are left alone.

The token shapes come from detect-secrets' plugins (a maintained list: AWS, Azure storage,
GitHub, GitLab, npm, OpenAI, PyPI, SendGrid, Slack, Square, Stripe, Mailchimp), their denylists
copied here (importing the plugins is slow) and checked against the installed version by the
tests. Our own steps, each named below, cover what those plugins
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
import keyword
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from compaction._cache import memoize_text

if TYPE_CHECKING:
    from compaction.transcript import Message

__all__ = [
    "REDACTED_PREFIX",
    "looks_like_secret",
    "redact_if_needed",
    "redact_message",
    "redact_record",
    "redact_secrets",
]

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


# The denylist entries of those plugins, copied from detect-secrets 1.5.0 (Yelp, Apache License 2.0,
# https://github.com/Yelp/detect-secrets) in the order of _PLUGINS, with their flags: importing the
# plugins costs 0.1-0.5 s of CPU (the package imports requests and discovers every plugin), paid
# by the first compaction of a process before its first model call. Tests check that these are
# still the installed version's denylists, entry by entry.
_PLUGIN_DENYLISTS: dict[str, tuple[tuple[str, re.RegexFlag], ...]] = {
    "aws": (
        (r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}", re.UNICODE),
        (
            "aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?[\\'\\\"]([0-9a-zA-Z/+]{40})[\\'\\\"]",
            re.IGNORECASE | re.UNICODE,
        ),
    ),
    "azure_storage_key": ((r"AccountKey=[a-zA-Z0-9+\/=]{88}", re.UNICODE),),
    "github_token": ((r"(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}", re.UNICODE),),
    "gitlab_token": (
        (r"(glpat|gldt|glft|glsoat|glrt)-[A-Za-z0-9_\-]{20,50}(?!\w)", re.UNICODE),
        (r"GR1348941[A-Za-z0-9_\-]{20,50}(?!\w)", re.UNICODE),
        (r"glcbt-([0-9a-fA-F]{2}_)?[A-Za-z0-9_\-]{20,50}(?!\w)", re.UNICODE),
        (r"glimt-[A-Za-z0-9_\-]{25}(?!\w)", re.UNICODE),
        (r"glptt-[A-Za-z0-9_\-]{40}(?!\w)", re.UNICODE),
        (r"glagent-[A-Za-z0-9_\-]{50,1024}(?!\w)", re.UNICODE),
        (r"gloas-[A-Za-z0-9_\-]{64}(?!\w)", re.UNICODE),
    ),
    "mailchimp": ((r"[0-9a-z]{32}-us[0-9]{1,2}", re.UNICODE),),
    "npm": ((r"\/\/.+\/:_authToken=\s*((npm_.+)|([A-Fa-f0-9-]{36})).*", re.UNICODE),),
    "openai": ((r"sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}", re.UNICODE),),
    "pypi_token": (
        (r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9-_]{70,}", re.UNICODE),
        (r"pypi-AgENdGVzdC5weXBpLm9yZw[A-Za-z0-9-_]{70,}", re.UNICODE),
    ),
    "sendgrid": ((r"SG\.[a-zA-Z0-9_-]{22}\.[a-zA-Z0-9_-]{43}", re.UNICODE),),
    "slack": (
        (r"xox(?:a|b|p|o|s|r)-(?:\d+-)+[a-z0-9]+", re.IGNORECASE | re.UNICODE),
        (
            r"https://hooks\.slack\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+",
            re.IGNORECASE | re.VERBOSE | re.UNICODE,
        ),
    ),
    "square_oauth": ((r"sq0csp-[0-9A-Za-z\\\-_]{43}", re.UNICODE),),
    "stripe": ((r"(?:r|s)k_live_[0-9a-zA-Z]{24}", re.UNICODE),),
}


@functools.cache
def _plugin_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """(kind, pattern) of the plugins used, compiled once per process."""
    out: list[tuple[str, re.Pattern[str]]] = []
    for module, _, kinds, _ in _PLUGINS:
        for kind, (pattern, flags) in zip(kinds, _PLUGIN_DENYLISTS[module], strict=True):
            if kind is not None:
                out.append((kind, re.compile(pattern, flags)))
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
    # After a percent escape too: "access_token%3DeyJ..." in a URL-encoded query or form body.
    return re.compile(f"{lit}(?:(?<=(?<![A-Za-z0-9_]){lit})|(?<=\\\\[nrt]{lit})|(?<=%[0-9A-Fa-f]{{2}}{lit})){rest}")


# Order matters: private keys and JWTs first (they contain shapes the others would nibble at),
# Anthropic before OpenAI (both start with "sk-").
_KEY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            # Without its END line (a cut output), the body up to the first character no key body
            # or header has; backslashes included: a JSON-escaped block's lines end in "\\n".
            r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s:,\\-]*)",
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
    # A PEM block base64-encoded as a whole ("LS0tLS1CRUdJTi" is "-----BEGIN"): kubeconfig's
    # client-key-data, a Kubernetes TLS secret, Helm values. Only private keys: see _encoded_pem.
    ("private_key", re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/]*={0,2}")),
    # Vault service, batch and recovery tokens.
    ("vault_token", _token("hvs.", r"[A-Za-z0-9_-]{24,}")),
    ("vault_token", _token("hvb.", r"[A-Za-z0-9_-]{24,}")),
    ("vault_token", _token("hvr.", r"[A-Za-z0-9_-]{24,}")),
    ("docker_token", _token("dckr_pat_", r"[A-Za-z0-9_-]{20,}")),
    ("digitalocean_token", _token("dop_v1_", r"[a-f0-9]{64}")),
    ("shopify_token", _token("shpat_", r"[a-fA-F0-9]{32}")),
    ("grafana_token", _token("glsa_", r"[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}")),
    ("tailscale_key", _token("tskey-", r"[a-z]+-[A-Za-z0-9]{10,}-[A-Za-z0-9]{10,}")),
    ("age_secret_key", _token("AGE-SECRET-KEY-1", r"[0-9A-Z]{50,}")),
    ("google_oauth_token", _token("ya29.", r"[0-9A-Za-z_-]{20,}")),
)
_OWN_TOKEN_CUES = (
    "private key",
    "eyj",
    "sk-",
    "sk_test_",
    "rk_test_",
    "github_pat_",
    "xox",
    "aiza",
    "hf_",
    "npm_",
    "ls0tls1crudjti",
    "hvs.",
    "hvb.",
    "hvr.",
    "dckr_pat_",
    "dop_v1_",
    "shpat_",
    "glsa_",
    "tskey-",
    "age-secret-key-1",
    "ya29.",
)


def _encoded_pem(value: str) -> bool:
    """Is ``value`` (base64 of a PEM block) a private key? A certificate is public."""
    head = value[:120]
    try:
        decoded = base64.b64decode(head[: len(head) // 4 * 4], validate=True).decode("ascii", "replace")
    except (binascii.Error, ValueError):
        return False
    public = "CERTIFICATE" in decoded or "PUBLIC KEY" in decoded
    return "PRIVATE KEY" in decoded or ("-----BEGIN" in decoded and len(decoded) < 40 and not public)


def _own_tokens(text: str) -> tuple[str, int]:
    total = 0
    for kind, pattern in _KEY_PATTERNS:
        if pattern.pattern.startswith("LS0t"):
            text, n = _replace_group(pattern, 0, f"[REDACTED:{kind}]", text, lambda v: not _encoded_pem(v))
        else:
            text, n = pattern.subn(f"[REDACTED:{kind}]", text)
        total += n
    return text, total


# --------------------------------------------------------------------------------------------
# Step 3: credentials given away by their context
# --------------------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(
    r"(?i)^(?:\[REDACTED.*|\*+|x+|<[^>]*>?|\$\{?\w+\}?|%\(?\w+\)?s?|null|none|true|false|\.\.\.|\{\{.*\}\}|\{[^}\s]*\}?)$"
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
# The password runs to the last "@" before the host: an unescaped "@" may be part of it.
_URL_PASSWORD_RE = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*:(?:\\?/){2}[^\s:/@\\\"']*:"
    + _NOT_DONE
    + r"([^\s/\\\"']+)@(?=[^\s@/\\\"'?#]*(?:[\s/\\\"'?#]|$))"
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
# Other schemes of an Authorization header (Django REST's "Token", "ApiKey", "SSWS", "Digest"...):
# after the header name only, where the scheme word cannot be prose.
_AUTH_SCHEME_RE = re.compile(
    r"(?i)(?=[a-z])\b(?:proxy-)?authorization\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?(?!bearer\b|basic\b)[A-Za-z][\w-]*[ \t]+"
    + _NOT_DONE
    + r"([^\s\"'\\,;`]{8,})"
)


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

    text = _AUTH_RE.sub(replace, text)
    text, n = _replace_group(
        _AUTH_SCHEME_RE,
        1,
        "[REDACTED:auth_token]",
        text,
        lambda v: _is_placeholder(v) or _names_code(v, line_value=False),
    )
    return text, count + n


# Command lines that take a password as an argument.
_CURL_USER_RE = re.compile(r"(?=-)(?<=\s)(?:-u\s*|--user[\s=]+)(['\"]?)[^\s:'\"]+:" + _NOT_DONE + r"([^\s'\"]+)\1")
_MYSQL_RE = re.compile(
    r"(?=m)\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb|mariadb-dump)\b[^\n]*?\s-p(['\"]?)"
    + _NOT_DONE
    + r"([^\s'\"]+)\1"
)
# Any "<tool> login ... -p <password>": docker, podman, az, oc, cf, helm registry, argocd...
_LOGIN_RE = re.compile(r"(?=l)\blogin\b[^\n]*?\s(?:-p|--password)(?:\s+|=)(['\"]?)" + _NOT_DONE + r"([^\s'\"]+)\1")
# Tools whose password flag is their own: redis-cli -a, sshpass -p, openssl -passin pass:...,
# htpasswd -b FILE USER PASSWORD (the third word after the flags).
_TOOL_PASSWORD_RE = re.compile(
    r"(?=[rsoh])\b(?:redis-cli\b[^\n]*?\s(?:-a|--pass)\s+|sshpass\b[^\n]*?\s-p\s*"
    r"|openssl\b[^\n]*?\s-(?:passin|passout|pass|k)\s+(?:pass:)?"
    r"|htpasswd\s+-(?=[a-zA-Z]*b)(?:(?=[a-zA-Z]*n)[a-zA-Z]+\s+\S+\s+|(?![a-zA-Z]*n)[a-zA-Z]+\s+\S+\s+\S+\s+))(['\"]?)"
    + _NOT_DONE
    + r"([^\s'\"]+)\1"
)
# .netrc: "machine <host> login <user> password <secret>", on one line or several.
_NETRC_RE = re.compile(
    r"(?=[md])\b(?:machine\s+\S+|default)(?:\s+(?:login|account|port)\s+\S+){0,3}\s+password\s+" + _NOT_DONE + r"(\S+)"
)


def _not_a_password_argument(value: str) -> bool:
    """A uid:gid ("docker run -u 1000:1000"), a placeholder ("$TOKEN"), or where openssl reads the
    password from (``env:VAR``, ``file:path``) rather than the password."""
    value = value.rstrip(",;.`\"'")
    return (
        not value
        or value.isdigit()
        or _is_placeholder(value)
        or value.lower() in _PASSWORD_NAMES
        or value.startswith(("env:", "file:", "fd:", "`"))
        or REDACTED_PREFIX in value
        or value == "stdin"
    )


def _command_lines(text: str) -> tuple[str, int]:
    total = 0
    steps = ((_CURL_USER_RE, 2), (_MYSQL_RE, 2), (_LOGIN_RE, 2), (_TOOL_PASSWORD_RE, 2), (_NETRC_RE, 1))
    for pattern, group in steps:
        text, n = _replace_group(pattern, group, "[REDACTED:password]", text, _not_a_password_argument)
        total += n
    return text, total


_KEY_WORDS = (
    r"api[_-]?key|apikey|secret[_-]?key|secret[_-]?access[_-]?key|access[_-]?key|account[_-]?key"
    r"|client[_-]?secret|secret|access[_-]?token|auth[_-]?token|refresh[_-]?token"
    r"|token|password|passwd|private[_-]?key|(?<![a-z])pass(?:phrase)?|(?<![a-z])pwd|key[_-]data"
)
_QUOTE = r"(?:\\?[\"'])"  # a quote, maybe JSON-escaped
# "=" or ":", or "=" percent-encoded in a form body or a query ("access_token%3D...").
_ASSIGN_KEY = rf"(?:{_KEY_WORDS}){_QUOTE}?\s*(?:[:=]|%3[Dd])\s*"
# key = "a quoted value", spaces allowed: the whole pass phrase goes.
# Each starts with a lookahead for the first character of a key ("--" for a flag): it only skips
# positions where no alternative can start (same flags, so the same case folding), about three
# times faster over long texts than trying the alternation at every character.
_QUOTED_ASSIGN_RE = re.compile(
    rf"(?i)(?=[acprstk])({_ASSIGN_KEY})(\\?[\"'])" + _NOT_DONE + r"((?:(?!\2)[^\n]){1,200}?)\2"
)
# An unquoted value runs to a space, a quote or a separator; "&" ends it only before another
# parameter ("&user=bob"): "Tr0ub4dor&3xyz!" is one password, replaced whole.
_VALUE_RUN = r"(?:[^\s\"'`,;&)}\]\\%]|%(?!26)|&(?![\w.-]+=))+"
_ASSIGN_RE = re.compile(rf"(?i)(?=[acprstk-])({_ASSIGN_KEY}{_QUOTE}?|--(?:{_KEY_WORDS})[= ][\"']?)({_VALUE_RUN})")
_RANDOM_SEGMENT = re.compile(r"(?=[^/]*\d)(?=[^/]*[A-Za-z])[A-Za-z0-9+=_-]{16,}")
_IDENTIFIER_CHAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[./][A-Za-z_][A-Za-z0-9_]*)*")
_NUMBER = re.compile(r"[-+]?\d[\d_]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
_CALL_OR_INDEX = re.compile(r"[A-Za-z_][\w.]*[(\[]")
# Lower-case names of types an annotation may end with ("token: datetime"): the built-in types,
# typing's aliases and the standard library's value types.
_TYPE_NAMES = frozenset(
    [
        "str",
        "bytes",
        "int",
        "float",
        "complex",
        "bool",
        "dict",
        "list",
        "tuple",
        "set",
        "frozenset",
        "object",
        "bytearray",
        "memoryview",
        "type",
        "any",
        "none",
        "optional",
        "union",
        "callable",
        "iterable",
        "iterator",
        "sequence",
        "mapping",
        "datetime",
        "date",
        "time",
        "timedelta",
        "timezone",
        "decimal",
        "uuid",
        "path",
        "purepath",
    ]
)
_KEY_CHARS = re.compile(r"[\w.-]*$")
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


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
    if "key_data" in key or "key-data" in key:
        return "private_key"
    if "key" in key:
        return "api_key"
    return "secret"


def _keep_value(key: str, value: str) -> bool:
    return _kept_value(value, _assignment_kind(key) == "password")


def _kept_value(value: str, password: bool) -> bool:
    """Is ``value`` no credential whatever its key: a placeholder, a path, a URL, or a number after a
    key that does not name a password ("max_token: 4096"; a PIN may be one)?"""
    if _is_placeholder(value) or _looks_like_path(value) or _URL_SCHEME.match(value):
        return True
    return not password and _NUMBER.fullmatch(value) is not None


def _names_code(value: str, *, line_value: bool) -> bool:
    """Is an unquoted ``value`` after a key word code rather than a credential? Calls, subscripts
    and attributes (``x.set(c``, ``parts[``, ``self.token``), format fields (``{token!r}``), type
    names (``token: UUID``, ``password: str``) and variables (``api_key=api_key``): a credential
    in code is a literal, quoted. A bare word counts as a credential only where it reads like one:
    with digits (``hunter22``), or as the whole value of a ``key: value`` line (a YAML setting)."""
    if value.endswith(":") or value[0] in "{%<$(*@[" or _CALL_OR_INDEX.match(value):
        return True
    if ("{" in value and "}" in value) or ("{" in value and value.endswith("[")):
        return True  # a format field inside ("os.environ/{p['env_key']}")
    value = value.rstrip(".")  # the end of a sentence
    if not _IDENTIFIER_CHAIN.fullmatch(value):
        return False
    if "." in value or "/" in value or value.lower() in _TYPE_NAMES or keyword.iskeyword(value):
        return True
    digits = any(c.isdigit() for c in value)
    if value[0].isupper() and not digits:
        return True  # a type or class name
    if "_" in value and (not line_value or (value.islower() and not digits)):
        # snake_case names ("api_key=api_key"); a generated token has a long random segment
        return not any(_generated(part) for part in value.split("_"))
    if line_value:
        return False
    return not digits or len(value) < 8


_STAND_IN = re.compile(r"[A-Za-z]+(?:[-_][A-Za-z]+)*-?")
_SNAKE_NAME = re.compile(r"[a-z]+(?:_[a-z]+)+")
_MODEL_NAME = re.compile(r"[A-Za-z][\w.-]*(?:/[A-Za-z][\w.:-]*)+")


# A type written as a string ("Token[Span | None]", "OtelDestination"): annotations quote them.
_TYPE_STRING = re.compile(r"[A-Z][\w.]*(?:\[[\w.,| \[\]]*\])?")


def _stand_in(value: str) -> bool:
    """A quoted value in code that is not a credential: a letter or two (``api_key="k"``), a short
    word without digits (``"fake"``, ``"sk-fake"``, ``"offline"``), a model route
    (``"openai/gpt-4o-mini"``). Credentials have digits, length or both."""
    if len(value) < 4:
        return True
    if len(value) < 12 and _STAND_IN.fullmatch(value):
        return True
    if _SNAKE_NAME.fullmatch(value):  # a function or field name ("token": "schedule_window")
        return True
    if _TYPE_STRING.fullmatch(value) and not any(c.isdigit() for c in value):
        return True
    return _MODEL_NAME.fullmatch(value) is not None and not any(_generated(p) for p in re.split(r"[/.:_-]", value))


def _key_context(text: str, start: int, key: str) -> bool:
    """Is the key around a key word's match (``DB_PASSWORD`` around ``PASSWORD``) an environment
    line's (``NAME=value``: upper case, no spaces around ``=``)? There every value is a setting."""
    head = _KEY_CHARS.search(text, max(0, start - 64), start)
    bare = ((head.group() if head else "") + key).removesuffix("=")
    env = key.endswith("=") and "=" not in bare and not any(c.isspace() or c.islower() for c in bare)
    return env and any(c.isupper() for c in bare)


def _value_ends_line(text: str, end: int) -> bool:
    rest = text[end : _line_end(text, end)].strip()
    return not rest or rest.startswith("#")


# A pass phrase as a whole YAML value, spaces and all ("passphrase: plum Kx7!r9 lantern"): a few
# words, one of them with a digit or a symbol, no code characters (a docstring's "password: The
# password (8+ characters)." stays).
_PASS_LINE_RE = re.compile(
    r"(?im)(?=[ \t\w-])^([ \t]*(?:-[ \t]+)?[\w.-]*(?:pass(?:word|wd|phrase)?|pwd)\\?[\"']?[ \t]*:[ \t]+)"
    + _NOT_DONE
    + r"(?![\"'\[{|>])([^\n#]*?\S[ \t]+\S[^\n#]*?)[ \t]*$"
)
_CODE_CHARS = re.compile(r"[(\[{=|<>`]")


def _pass_phrase(value: str) -> bool:
    words = value.split()
    if len(words) > 6 or _CODE_CHARS.search(value) or value.endswith("."):
        return False
    return any(any(c.isdigit() or c in "!#$%&*@^~?+" for c in w) for w in words)


def _pass_phrase_lines(text: str) -> tuple[str, int]:
    return _replace_group(_PASS_LINE_RE, 2, "[REDACTED:password]", text, lambda v: not _pass_phrase(v))


def _assignments(text: str) -> tuple[str, int]:
    # Counted by comparing replacements, since placeholder values are passed through unchanged.
    count = 0

    def quoted(match: re.Match[str]) -> str:
        nonlocal count
        key, quote, value = match.group(1), match.group(2), match.group(3)
        if _keep_value(key, value.strip()):
            return match.group()
        if not _key_context(match.string, match.start(), key.rstrip("\"'\\")) and _stand_in(value):
            return match.group()
        count += 1
        return f"{key}{quote}[REDACTED:{_assignment_kind(key)}]{quote}"

    def plain(match: re.Match[str]) -> str:
        nonlocal count
        key, value = match.group(1), match.group(2)
        if len(value) < 4 or _keep_value(key, value):
            return match.group()
        # An argument list ("f(API_KEY=name, ...)") is code, not an environment line.
        in_call = match.string[match.end() : match.end() + 1] in (",", ")")
        env = _key_context(match.string, match.start(), key) and not in_call
        if not env and not key.startswith("--") and key[-1:] in "\"'" and _stand_in(value):
            return match.group()
        if value.lower() == re.sub(r"[\s\"'\\:=]", "", key).lower():
            return match.group()  # "token=token": a keyword argument passed on
        if not env and not key.startswith("--"):
            # "password: hunter" and "password=hunter" end a line of settings; "x = name" is code,
            # and so is "if token:" followed by the block's first word on the next line.
            spaced = not key.rstrip().endswith(":") and key != key.replace(" ", "").replace("\t", "")
            line_value = not spaced and "\n" not in key and _value_ends_line(match.string, match.end())
            if _names_code(value, line_value=line_value):
                return match.group()
        count += 1
        return f"{key}[REDACTED:{_assignment_kind(key)}]"

    text = _QUOTED_ASSIGN_RE.sub(quoted, text)
    text = _ASSIGN_RE.sub(plain, text)
    return text, count


# What the two steps above read after a key word: the unquoted value of _ASSIGN_RE (after its
# optional quote), the start of a line up to a pass phrase's key.
_ASSIGNED_VALUE = re.compile(_VALUE_RUN)
_KEY_WORD_RUN = re.compile(r"[\w-]*")
_SPACES = re.compile(r"\s*")


def _keyed_value_may_be_secret(text: str, cue: re.Match[str]) -> bool:
    """May :func:`_assignments` or :func:`_pass_phrase_lines` replace the value after a key-word cue
    (a match of the key-word cue at the same offsets in ``text``)? False only where neither can: an
    unquoted value that is code (``token: int``, ``token: {record!r}``, ``token = self.repo.get(``),
    a placeholder, a path, a URL or (unless the key names a password) a number. Decided on ``text``,
    with the steps' own tests; where the cue cannot tell what a step will see (the whole key, an
    environment line), the answer is yes."""
    start, separator_end = cue.start(), cue.end()
    word = _KEY_WORD_RUN.match(text, start)
    word_end = word.end() if word else start
    head = _KEY_CHARS.search(text, max(0, start - 64), start)
    identifier = text[head.start() if head else start : word_end].lower()
    password = "pass" in identifier or "pwd" in identifier
    separator = text[word_end:separator_end]  # a quote, spaces, then ":", "=" or "%3d"
    if password and separator.endswith(":"):
        return True  # a pass phrase takes the rest of the line, spaces and all
    value_start = _SPACES.match(text, separator_end)
    value_at = value_start.end() if value_start else separator_end
    environment = (
        separator.endswith("=")
        and value_at == separator_end
        and not any(c.isspace() for c in separator)
        and not any(c.islower() for c in text[word_end - 3 : word_end])  # every key word has 3 or more
    )
    if environment:
        return True  # NAME=value: on an environment line any value is a setting
    if text[value_at : value_at + 1] in ('"', "'", "\\"):
        return _quoted_value_may_be_secret(text, value_at, password)
    value = _ASSIGNED_VALUE.match(text, value_at)
    if value is None:
        return False
    found = value.group()
    if len(found) < 4 or _kept_value(found, password):
        return False
    around = text[word_end:value_at]
    spaced = not around.rstrip().endswith(":") and (" " in around or "\t" in around)
    line_value = not spaced and "\n" not in around and _value_ends_line(text, value.end())
    return not _names_code(found, line_value=line_value)


_OPENING_QUOTE = re.compile(r"\\?[\"']")
_QUOTED_VALUE = re.compile(r"(\\?[\"'])" + _NOT_DONE + r"((?:(?!\1)[^\n]){1,200}?)\1")


def _quoted_value_may_be_secret(text: str, value_at: int, password: bool) -> bool:
    """The rest of :func:`_keyed_value_may_be_secret` for a value that opens with a quote, off an
    environment line: the quoted step keeps a stand-in (``"token": "refresh_page"``), and so does
    the plain step, which reads the value from after the quote."""
    quote = _OPENING_QUOTE.match(text, value_at)
    if quote is None:
        return False  # a backslash before no quote: neither step takes a value here
    quoted = _QUOTED_VALUE.match(text, value_at)
    if quoted is not None:
        inside = quoted.group(2)
        if not (_kept_value(inside.strip(), password) or _stand_in(inside)):
            return True
    value = _ASSIGNED_VALUE.match(text, quote.end())
    if value is None:
        return False
    found = value.group()
    return not (len(found) < 4 or _kept_value(found, password) or _stand_in(found))


# What documentation writes where a URL's password goes ("postgresql://user:password@host").
_PASSWORD_NAMES = frozenset({"pass", "password", "passwd", "pwd", "pw", "secret"})


def _url_passwords(text: str) -> tuple[str, int]:
    return _replace_group(
        _URL_PASSWORD_RE,
        1,
        "[REDACTED]",
        text,
        lambda v: len(v) < 2 or _is_placeholder(v) or v.lower() in _PASSWORD_NAMES,
    )


def _url_signatures(text: str) -> tuple[str, int]:
    return _replace_group(_URL_SIGNATURE_RE, 1, "[REDACTED:url_signature]", text, _is_placeholder)


# NAME_KEY=value, NAME_AUTH=..., NAME_CREDENTIALS=... (RAILS_MASTER_KEY, ENCRYPTION_KEY, SIGNING_KEY):
# "key" alone names sort keys and cache keys too, so the value must look generated as well.
_ENV_KEY_RE = re.compile(
    r"(?=[A-Z])(?<![\w.-])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:KEY|AUTH|CREDENTIALS?|SALT|SEED|KEY_BASE)"
    r"\s?=\s?(['\"]?)" + _NOT_DONE + r"([A-Za-z0-9+/=_.:-]{12,})\1(?![\w.(\[])"
)


def _generated(value: str) -> bool:
    """Does ``value`` look machine-generated (a key, not a word or a name)?"""
    digits = any(c.isdigit() for c in value)
    letters = any(c.isalpha() for c in value)
    mixed_case = any(c.isupper() for c in value) and any(c.islower() for c in value)
    if not (digits and letters):
        return False
    if "_" in value and _IDENTIFIER_CHAIN.fullmatch(value):  # snake_case, unless a part is random
        return any(_generated(part) for part in value.split("_") if part)
    return len(value) >= 16 or mixed_case


def _env_keys(text: str) -> tuple[str, int]:
    return _replace_group(_ENV_KEY_RE, 2, "[REDACTED:api_key]", text, lambda v: not _generated(v))


# Cookie and Set-Cookie headers: every cookie's value (Set-Cookie's attributes stay readable).
_COOKIE_RE = re.compile(r"(?i)(?=[cs])\b(?:set-)?cookie\\?[\"']?\s*:\s*([^\n\"'\\]+)")
_COOKIE_PAIR_RE = re.compile(r"([^\s=;,]+)=" + _NOT_DONE + r"([^;\s,]+)")
_COOKIE_ATTRIBUTES = frozenset({"path", "domain", "expires", "max-age", "samesite", "priority", "version"})


def _cookies(text: str) -> tuple[str, int]:
    count = 0

    def pair(match: re.Match[str]) -> str:
        nonlocal count
        name, value = match.group(1), match.group(2)
        if name.lower() in _COOKIE_ATTRIBUTES or len(value) < 4 or _is_placeholder(value):
            return match.group()
        count += 1
        return f"{name}=[REDACTED:cookie]"

    def header(match: re.Match[str]) -> str:
        start = match.start(1) - match.start()
        return match.group()[:start] + _COOKIE_PAIR_RE.sub(pair, match.group(1))

    return _COOKIE_RE.sub(header, text), count


# A .pgpass line: hostname:port:database:username:password (the host names a host, not a time).
_PGPASS_RE = re.compile(
    r"(?m)^[ \t]*(?=[^\s:]*[A-Za-z.*])[^\s:#]+:(?:\d+|\*):[^\s:]+:[^\s:]+:" + _NOT_DONE + r"(\S+)[ \t]*$"
)


def _pgpass_lines(text: str) -> tuple[str, int]:
    return _replace_group(_PGPASS_RE, 1, "[REDACTED:password]", text, _is_placeholder)


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


# --------------------------------------------------------------------------------------------
# Whole-text steps: shapes without a cue on their line, looked for in every text
# --------------------------------------------------------------------------------------------

# A run of key-body lines without its armour (the BEGIN line cut off, or scrolled out of a
# terminal): two or more lines of base64 of one width, 40 to 100 characters, perhaps indented
# (YAML) or joined by JSON-escaped line breaks. Public blocks (certificates) keep their bodies.
_B64_LINE = r"[A-Za-z0-9+/]{40,100}={0,2}"
_BREAK = r"[ \t]*(?:\r?\n|(?:\\{1,2}r)?\\{1,2}n)[ \t]*"
_KEY_BODY_RE = re.compile(
    rf"(?:(?<![A-Za-z0-9+/=\\])|(?<=\\n)){_B64_LINE}(?:{_BREAK}{_B64_LINE})+"
    rf"(?:{_BREAK}[A-Za-z0-9+/]{{1,100}}={{0,2}})?(?![A-Za-z0-9+/=])"
)
_BODY_SPLIT = re.compile(_BREAK)
# Any run has a second line: a line break, then 40 key characters. Most texts have none, and this
# scan, led by the break, is many times faster than the run's pattern.
_BODY_LINE_CUE = re.compile(r"(?:\n|\\n)[ \t]*[A-Za-z0-9+/]{40}")
_PUBLIC_ARMOUR = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*(?:CERTIFICATE|PUBLIC KEY)[A-Z ]*-----\s*(?:\\{1,2}[nr])*\s*$")


def _key_body(run: str, before: str) -> bool:
    lines = _BODY_SPLIT.split(run)
    full = lines if len(lines[-1]) == len(lines[0]) else lines[:-1]
    if len(full) < 2 or len({len(line) for line in full}) != 1:
        return False
    if not all(re.search(r"[A-Z]", x) and re.search(r"[a-z]", x) and re.search(r"[0-9+/]", x) for x in full):
        return False
    return _PUBLIC_ARMOUR.search(before[-200:]) is None


def _key_bodies(text: str) -> tuple[str, int]:
    if _BODY_LINE_CUE.search(text) is None:
        return text, 0
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        if not _key_body(match.group(), match.string[: match.start()]):
            return match.group()
        count += 1
        return "[REDACTED:private_key]"

    return _KEY_BODY_RE.sub(replace, text), count


# Kubernetes Secrets: every value of their data and stringData maps (YAML or JSON).
_SECRET_KIND_RE = re.compile(r"kind\\?[\"']?\s*:\s*\\?[\"']?Secret\b")
_YAML_DATA_RE = re.compile(r"(?m)^([ \t]*)(?:data|stringData):[ \t]*\n((?:\1[ \t]+[^\n]*\n?)+)")
_YAML_ENTRY_RE = re.compile(r"(?m)^([ \t]+[\"']?[\w.-]+[\"']?:[ \t]*)(?!\[REDACTED|[|>][-+]?[ \t]*$)(\S[^\n]*)$")
_JSON_DATA_RE = re.compile(r"\\?[\"'](?:data|stringData)\\?[\"']\s*:\s*\{([^{}]*)\}")
_JSON_ENTRY_RE = re.compile(r"(\\?[\"'][\w.-]+\\?[\"']\s*:\s*\\?[\"'])" + _NOT_DONE + r"([^\"'\\]+)")


def _kubernetes_secrets(text: str) -> tuple[str, int]:
    if _SECRET_KIND_RE.search(text) is None:
        return text, 0
    count = 0

    def entry(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return match.group(1) + "[REDACTED:kubernetes_secret]"

    def block(match: re.Match[str]) -> str:
        start = match.start(2) - match.start()
        return match.group()[:start] + _YAML_ENTRY_RE.sub(entry, match.group(2))

    def json_block(match: re.Match[str]) -> str:
        start = match.start(1) - match.start()
        return (
            match.group()[:start]
            + _JSON_ENTRY_RE.sub(entry, match.group(1))
            + match.group()[match.end(1) - match.start() :]
        )

    text = _YAML_DATA_RE.sub(block, text)
    return _JSON_DATA_RE.sub(json_block, text), count


# Colour and cursor codes (raw in terminal output, or JSON-escaped) break a key's lines apart:
# redaction also looks at the text without them, and keeps the codes when they hid nothing.
_ANSI_RE = re.compile(r"(?:\x1b|\\u001[bB])\[[0-9;?]*[A-Za-z]")
_ANSI_CUES = ("\x1b", "\\u001b", "\\u001B")


def _whole_text_steps(text: str) -> tuple[str, int]:
    total = 0
    for step in (_key_bodies, _kubernetes_secrets):
        text, n = step(text)
        total += n
    return text, total


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
        ("pass", ""),
        ("passphrase", ""),
        ("pwd", ""),
        ("key", "data"),
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
    "authorization",
    "redis-cli",
    "sshpass",
    "openssl",
    "htpasswd",
    "cookie",
)
# Separate patterns, not one alternation: each scans with its own literal-prefix and first-
# character shortcuts, which a single alternation of them all loses (three times slower).
# The ones led by an alternation start with it, not with a lookahead for its first characters: an
# alternation whose branches all start with a literal gives the engine a set of first characters
# to skip to in its fast scan, and a leading lookahead turns that off (CPython 3.11: the three
# scans 25-60 % slower with one, on the bench, corpus and 2,000-message histories).
_CUES: tuple[re.Pattern[str], ...] = (
    re.compile(_trie(_LITERAL_CUES)),
    re.compile(rf"{_trie(_KEY_WORD_LIST)}(?:\\?[\"'])?\s*(?:[:=]|%3d)"),
    re.compile(rf"--{_trie(_KEY_WORD_LIST)}[= ]"),
    re.compile(r":(?:\\?/){2}[^\s/@]*:[^\s@/]+@"),
    re.compile(r"-u\s*['\"]?[^\s:'\"]+:"),
    # a .netrc entry up to its password: the entry's items may take a line each, and the window
    # must reach the value (on the password's line or the next non-blank one, as _NETRC_RE allows)
    re.compile(r"(?:machine\s+\S+|default)(?:\s+(?:login|account|port)\s+\S+){0,3}\s+password"),
    re.compile(r"_(?:key|auth|credentials?|salt|seed|key_base)\s?=\s?['\"]?[a-z0-9+/=_.:-]{12}"),
    re.compile(r":(?:\d+|\*):[^\s:]+:[^\s:]+:\S"),  # a .pgpass line's port and what follows
    re.compile(r"auth\\?[\"']\s*:"),
)


# Every key word holds one of these, and the .netrc cue needs "password": two to six
# substring checks (much faster than a regex scan) rule out the key-word cues and the .netrc cue
# for most texts. Computed, not assumed: a key word without an anchor turns the shortcut off.
_KEY_ANCHORS = ("key", "token", "secret", "pass", "pwd")
_KEY_SHORTCUT = all(any(a in w for a in _KEY_ANCHORS) for w in _KEY_WORD_LIST)


def _has_cue(lowered: str, text: str | None = None) -> bool:
    """Does ``lowered`` (``text`` lower-cased) hold a cue? With ``text`` (of the same length), a
    key-word cue counts only where the value after it may be a credential (see _keyed_value_may_be_secret)."""
    return any(_search_cue(k, lowered, text, 0) is not None for k in _possible_cues(lowered))


# The key-word cue: the assignment and pass-phrase steps are the only ones it stands for.
_KEYED_CUE = 1


def _search_cue(k: int, lowered: str, text: str | None, pos: int) -> re.Match[str] | None:
    """The first match of ``_CUES[k]`` in ``lowered`` from ``pos`` on; a key-word cue whose value
    cannot be a credential is passed over (only with ``text``: the verdict reads the original case)."""
    pattern = _CUES[k]
    while True:
        match = pattern.search(lowered, pos)
        if match is None or k != _KEYED_CUE or text is None or _keyed_value_may_be_secret(text, match):
            return match
        # A later key word starting inside this match ends at the same separator: same value, same verdict.
        pos = match.end()


def _keyed(lowered: str) -> bool:
    """False when no key-word cue (_CUES[1], _CUES[2]) can match ``lowered``."""
    return not _KEY_SHORTCUT or any(a in lowered for a in _KEY_ANCHORS)


def _netrc_worded(lowered: str) -> bool:
    """False when the .netrc cue (_CUES[5]) cannot match ``lowered``."""
    return "password" in lowered


def _possible_cues(lowered: str) -> tuple[int, ...]:
    """The indexes in _CUES of the patterns that may match ``lowered`` (the others cannot: their
    substring checks above fail), so a scan for cue spans skips whole passes over a long text."""
    keyed, netrc = _keyed(lowered), _netrc_worded(lowered)
    return tuple(k for k in range(len(_CUES)) if (keyed or k not in (1, 2)) and (netrc or k != 5))


def _cue_spans(lowered: str, text: str | None = None) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of the cues in ``lowered``, in order of their start; each pattern is searched
    again only once the scan has passed its last match. With ``text``, key-word cues whose value
    cannot be a credential are left out (see :func:`_search_cue`)."""
    found = {k: _search_cue(k, lowered, text, 0) for k in _possible_cues(lowered)}
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
                found[k] = _search_cue(k, lowered, text, pos)


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
    """Merged ``(start, end)`` spans of whole lines: each line with a cue and the lines after it
    (``lowered`` is ``text`` lower-cased, of the same length)."""
    windows: list[tuple[int, int]] = []
    pos = 0
    for cue_start, cue_end in _cue_spans(lowered, text):
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
    redacted = _redact_windows(text)
    plain = _without_ansi(text)
    if plain is not None:
        redacted_plain = _redact_windows(plain)
        if redacted_plain != _ANSI_RE.sub("", redacted):
            return redacted_plain
    return redacted


def _redact_windows(text: str) -> str:
    text = _redact_cue_windows(text)
    return _whole_text_steps(text)[0]


def _redact_cue_windows(text: str) -> str:
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


@memoize_text
def _redacted_text(text: str) -> str:
    """:func:`redact_if_needed`, memoized within the compaction run (the zone's texts are read by
    several stages)."""
    return redact_if_needed(text)


def redact_message(message: Message) -> Message:
    """``message`` with every text a summarizer, the ledger or the archive index may read redacted:
    text parts, tool-call arguments, tool results (their text blocks too). The message itself when
    nothing changed (most messages), so its cached derived views stay."""
    from compaction.transcript import TextPart, ToolCallPart, ToolResultPart

    def part_redacted(part: Any) -> Any:
        if isinstance(part, TextPart):
            text = _redacted_text(part.text)
            return part if text is part.text or text == part.text else part.model_copy(update={"text": text})
        if isinstance(part, ToolCallPart):
            arguments = _redacted_text(part.arguments)
            if arguments == part.arguments:
                return part
            return part.model_copy(update={"arguments": arguments})
        if isinstance(part, ToolResultPart):
            if isinstance(part.content, str):
                content: Any = _redacted_text(part.content)
                if content == part.content:
                    return part
            else:
                blocks = tuple(part_redacted(block) for block in part.content)
                if all(a is b for a, b in zip(blocks, part.content, strict=True)):
                    return part
                content = blocks
            return part.model_copy(update={"content": content})
        return part

    parts = tuple(part_redacted(part) for part in message.parts)
    if all(a is b for a, b in zip(parts, message.parts, strict=True)):
        return message
    return message.model_copy(update={"parts": parts})
