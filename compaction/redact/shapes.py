"""Credentials known by their shape: detect-secrets' token patterns (copied, checked against the installed
version by the tests) and the shapes those plugins miss."""

from __future__ import annotations

import base64
import binascii
import functools
import re

from compaction.redact.base import REDACTED_PREFIX, _replace_group

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
