"""API keys, per-key session namespaces, per-key rate limits and client permissions.

Keys come from ``COMPACTION_API_KEYS`` (comma-separated) and/or a keys file (``--api-keys-file``),
one key per line::

    # secret or sha256:<hex of the secret's SHA-256>, then optional fields
    sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 namespace=team-a allow=summary_prompt
    a-raw-secret-of-at-least-16-characters

Only SHA-256 digests are kept in memory; a presented key is hashed and compared with
:func:`hmac.compare_digest` against every stored digest. Each key owns a session namespace: the
store keeps a session as ``"<namespace>@<session id>"`` (``@`` cannot occur in a client's session
id), so a key never reaches another key's sessions, whatever id it names. With no keys the service
is open (one shared namespace), as before.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from compaction.server.errors import ApiError

__all__ = [
    "DISABLE_REDACTION",
    "PERMISSIONS",
    "SUMMARY_PROMPT",
    "ApiKey",
    "KeyRing",
    "RateLimiter",
    "check_options",
    "presented_key",
    "public_session_id",
    "scoped_session_id",
]

DISABLE_REDACTION: Final = "disable_redaction"
SUMMARY_PROMPT: Final = "summary_prompt"
PERMISSIONS: Final = frozenset({DISABLE_REDACTION, SUMMARY_PROMPT})
"""What a client may only do with the server's permission (``--allow`` or a key's ``allow=``)."""

NAMESPACE_SEPARATOR: Final = "@"
MIN_KEY_LENGTH: Final = 16
_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
_DIGEST = re.compile(r"^sha256:([0-9a-fA-F]{64})$")


@dataclass(frozen=True)
class ApiKey:
    """One configured key: its SHA-256 digest (never the key), its namespace, its permissions."""

    digest: bytes
    namespace: str
    permissions: frozenset[str] = frozenset()


def _parse_entry(entry: str, where: str) -> ApiKey:
    fields = entry.split()
    secret, options = fields[0], fields[1:]
    match = _DIGEST.match(secret)
    if match:
        digest = bytes.fromhex(match.group(1))
    elif len(secret) < MIN_KEY_LENGTH:
        raise ValueError(f"{where}: an API key must have at least {MIN_KEY_LENGTH} characters (or be sha256:<hex>)")
    else:
        digest = hashlib.sha256(secret.encode()).digest()
    namespace = "k" + hashlib.sha256(b"compaction-namespace:" + digest).hexdigest()[:16]
    permissions: set[str] = set()
    for option in options:
        name, _, value = option.partition("=")
        if name == "namespace" and _NAMESPACE.match(value):
            namespace = value
        elif name == "allow":
            wanted = {p for p in value.split(",") if p}
            unknown = wanted - PERMISSIONS
            if unknown:
                raise ValueError(f"{where}: unknown permission(s) {sorted(unknown)}; known: {sorted(PERMISSIONS)}")
            permissions |= wanted
        else:
            raise ValueError(f"{where}: unknown or invalid field {option!r} (namespace=NAME, allow=PERM,PERM)")
    return ApiKey(digest, namespace, frozenset(permissions))


class KeyRing:
    """The configured keys; :meth:`authenticate` finds the key a client presented."""

    def __init__(self, keys: Sequence[ApiKey]) -> None:
        if not keys:
            raise ValueError("no API key configured (an empty keys file or COMPACTION_API_KEYS)")
        digests = [k.digest for k in keys]
        if len(set(digests)) != len(digests):
            raise ValueError("the same API key is configured twice")
        self.keys = tuple(keys)

    @classmethod
    def parse(cls, env_value: str | None = None, file_text: str | None = None, file_name: str = "keys file") -> KeyRing:
        """Keys from the environment value (comma-separated) and a keys file's text."""
        keys: list[ApiKey] = []
        for n, entry in enumerate((env_value or "").split(","), 1):
            if entry.strip():
                keys.append(_parse_entry(entry.strip(), f"COMPACTION_API_KEYS entry {n}"))
        for n, line in enumerate((file_text or "").splitlines(), 1):
            line = line.strip()
            if line and not line.startswith("#"):
                keys.append(_parse_entry(line, f"{file_name} line {n}"))
        return cls(keys)

    def authenticate(self, presented: str | None) -> ApiKey | None:
        """The key whose digest matches ``presented``; every digest is compared (constant time each)."""
        if not presented:
            return None
        digest = hashlib.sha256(presented.encode("utf-8", "surrogateescape")).digest()
        found = None
        for key in self.keys:
            if hmac.compare_digest(digest, key.digest):
                found = key
        return found


def load_keys(environ: Mapping[str, str], keys_file: str | None) -> KeyRing | None:
    """The key ring from ``COMPACTION_API_KEYS`` and ``keys_file``; None when neither names a key."""
    env_value = environ.get("COMPACTION_API_KEYS", "")
    text = None
    if keys_file:
        with open(keys_file, encoding="utf-8") as handle:
            text = handle.read()
    if not env_value.strip() and not (text or "").strip():
        if keys_file:
            raise ValueError(f"{keys_file}: no API key in the file")
        return None
    return KeyRing.parse(env_value, text, keys_file or "keys file")


def presented_key(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The key in ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``."""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
        elif name == b"x-api-key" and value.strip():
            return value.decode("latin-1").strip()
    return None


def scoped_session_id(key: ApiKey | None, session_id: str) -> str:
    """The store's id of a client's session: in the key's namespace (unchanged without keys)."""
    return session_id if key is None else f"{key.namespace}{NAMESPACE_SEPARATOR}{session_id}"


def public_session_id(stored_id: str) -> str:
    """The client's view of a stored session id (the namespace removed)."""
    return stored_id.split(NAMESPACE_SEPARATOR, 1)[-1]


def check_options(options: Any, granted: frozenset[str]) -> None:
    """403 when per-request options need a permission the caller lacks: switching secret redaction
    off, or replacing the summary prompt (both can make the service echo what it should not)."""
    if options is None:
        return
    if options.redact_secrets is False and DISABLE_REDACTION not in granted:
        raise _forbidden("options.redact_secrets", "switching redaction off", DISABLE_REDACTION)
    if options.summary_prompt is not None and SUMMARY_PROMPT not in granted:
        raise _forbidden("options.summary_prompt", "replacing the summary prompt", SUMMARY_PROMPT)


def _forbidden(field: str, what: str, permission: str) -> ApiError:
    return ApiError(
        403,
        "forbidden",
        f"{what} needs the server permission {permission!r} (serve --allow {permission}, or allow= on the key)",
        field=field,
    )


class RateLimiter:
    """A token bucket per key: ``rate`` requests per second on average, bursts of ``burst``."""

    def __init__(self, rate: float, burst: int) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"rate limit must be positive with a burst of at least 1, got {rate}/s, {burst}")
        self.rate = rate
        self.burst = burst
        self._buckets: dict[str, tuple[float, float]] = {}  # namespace -> (tokens, at)
        self._lock = threading.Lock()

    def wait_time(self, name: str, now: float | None = None) -> float:
        """0 and one token taken when ``name`` may make a request now; else the seconds until it may."""
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, at = self._buckets.get(name, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - at) * self.rate)
            if tokens >= 1.0:
                self._buckets[name] = (tokens - 1.0, now)
                return 0.0
            self._buckets[name] = (tokens, now)
            return (1.0 - tokens) / self.rate
