"""Credentials given away by their context: passwords in URLs, presigned URL signatures, Authorization
headers, command lines that take a password, cookies, .pgpass lines, NAME_KEY=value settings."""

from __future__ import annotations

import re

from compaction.redact.assignments import _names_code
from compaction.redact.base import (
    _NOT_DONE,
    REDACTED_PREFIX,
    _basic_credentials,
    _generated,
    _is_placeholder,
    _prose_value,
    _replace_group,
)

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


_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


# Other schemes of an Authorization header (Django REST's "Token", "ApiKey", "SSWS", "Digest"...):
# after the header name only, where the scheme word cannot be prose.
_AUTH_SCHEME_RE = re.compile(
    r"(?i)(?=[a-z])\b(?:proxy-)?authorization\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?(?!bearer\b|basic\b)[A-Za-z][\w-]*[ \t]+"
    + _NOT_DONE
    + r"([^\s\"'\\,;`]{8,})"
)


def _auth_headers(text: str) -> tuple[str, int]:
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        scheme, value = match.group(1), match.group(2)
        # A digit or a decodable user:password tells a credential from prose ("Basic authentication");
        # Basic credentials are base64, so "basic base64-encoded" is prose too.
        basic = scheme.lower() == "basic"
        if basic and not _BASE64.fullmatch(value):
            return match.group()
        if not any(c.isdigit() for c in value) and not (basic and _basic_credentials(value)):
            return match.group()
        count += 1
        return match.group()[: match.start(2) - match.start()] + "[REDACTED:bearer_token]"

    text = _AUTH_RE.sub(replace, text)
    text, n = _replace_group(
        _AUTH_SCHEME_RE,
        1,
        "[REDACTED:auth_token]",
        text,
        # "authorization: the route-level gate": words after a word are prose, not a scheme and its credential.
        lambda v: _is_placeholder(v) or _names_code(v, line_value=False) or _prose_value(v),
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
