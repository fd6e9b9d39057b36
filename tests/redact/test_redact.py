"""Tests for compaction.redact: credentials out, ordinary references kept."""

from __future__ import annotations

import base64
import json
import random
import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.redact import (
    looks_like_secret,
    redact_if_needed,
    redact_json,
    redact_message,
    redact_record,
    redact_secrets,
)

RNG = random.Random(1234)
ALNUM = string.ascii_letters + string.digits


def fake(alphabet: str, n: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def b64url(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


OPENAI = "sk-" + fake(ALNUM, 48)
OPENAI_PROJ = "sk-proj-" + fake(ALNUM + "_-", 156)
ANTHROPIC = "sk-ant-api03-" + fake(ALNUM + "_-", 93) + "AA"
AWS = "AKIA" + fake(string.ascii_uppercase + string.digits, 16)
GITHUB = "ghp_" + fake(ALNUM, 36)
GITHUB_OAUTH = "gho_" + fake(ALNUM, 36)
GITHUB_PAT = "github_pat_" + fake(ALNUM, 22) + "_" + fake(ALNUM, 59)
SLACK = "xoxb-" + fake(string.digits, 12) + "-" + fake(string.digits, 13) + "-" + fake(ALNUM, 24)
GOOGLE = "AIza" + fake(ALNUM + "_-", 35)
STRIPE = "sk_live_" + fake(ALNUM, 24)
STRIPE_RESTRICTED = "rk_live_" + fake(ALNUM, 24)
JWT = (
    b64url({"alg": "HS256", "typ": "JWT"})
    + "."
    + b64url({"sub": "1234567890", "name": "x"})
    + "."
    + fake(ALNUM + "_-", 43)
)
PEM_BODY = "\n".join(fake(ALNUM + "+/", 64) for _ in range(6))


@pytest.mark.parametrize(
    ("secret", "kind"),
    [
        (OPENAI, "openai_key"),
        (OPENAI_PROJ, "openai_key"),
        (ANTHROPIC, "anthropic_key"),
        (AWS, "aws_access_key"),
        (GITHUB, "github_token"),
        (GITHUB_OAUTH, "github_token"),
        (GITHUB_PAT, "github_token"),
        (SLACK, "slack_token"),
        (GOOGLE, "google_api_key"),
        (STRIPE, "stripe_key"),
        (STRIPE_RESTRICTED, "stripe_key"),
        (JWT, "jwt"),
    ],
)
def test_key_shapes(secret: str, kind: str) -> None:
    text = f"using {secret} for the call"
    redacted, count = redact_secrets(text)
    assert redacted == f"using [REDACTED:{kind}] for the call"
    assert count == 1
    assert looks_like_secret(secret)


def test_private_key_block() -> None:
    block = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"
    redacted, count = redact_secrets(f"key:\n{block}\ndone")
    assert redacted == "key:\n[REDACTED:private_key]\ndone"
    assert count == 1
    openssh = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n-----END OPENSSH PRIVATE KEY-----"
    assert redact_secrets(openssh) == ("[REDACTED:private_key]", 1)


def test_truncated_private_key_block() -> None:
    # A trimmed tool result may cut the END line off; the body still goes.
    redacted, count = redact_secrets(f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}")
    assert PEM_BODY[:20] not in redacted
    assert count == 1


def test_public_key_kept() -> None:
    text = f"-----BEGIN PUBLIC KEY-----\n{PEM_BODY}\n-----END PUBLIC KEY-----"
    assert redact_secrets(text) == (text, 0)


def test_bearer_tokens() -> None:
    token = fake(ALNUM, 40)
    assert redact_secrets(f"Authorization: Bearer {token}") == ("Authorization: Bearer [REDACTED:bearer_token]", 1)
    assert redact_secrets(f'-H "authorization: bearer {token}"') == (
        '-H "authorization: bearer [REDACTED:bearer_token]"',
        1,
    )
    assert redact_secrets(f"Authorization: Bearer {JWT}")[0] == "Authorization: Bearer [REDACTED:jwt]"
    assert redact_secrets("We use Bearer authentication and Basic authentication.")[1] == 0


def test_password_in_url() -> None:
    text = "connect to https://alice:s3cr3t-pw@db.example.com:5432/app and postgres://u:p%40ss@10.0.0.1/db"
    redacted, count = redact_secrets(text)
    assert redacted == (
        "connect to https://alice:[REDACTED]@db.example.com:5432/app and postgres://u:[REDACTED]@10.0.0.1/db"
    )
    assert count == 2
    assert redact_secrets("https://example.com:8080/path")[1] == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("api_key=abc123def456", "api_key=[REDACTED:api_key]"),
        ('{"api_key": "abc123def456"}', '{"api_key": "[REDACTED:api_key]"}'),
        ("DB_PASSWORD=hunter22", "DB_PASSWORD=[REDACTED:password]"),
        ("password: correct-horse", "password: [REDACTED:password]"),
        ("token: 9f8e7d6c5b4a", "token: [REDACTED:token]"),
        ("client_secret='qwerty12345'", "client_secret='[REDACTED:secret]'"),
        ("mysql --password=hunter22 -u root", "mysql --password=[REDACTED:password] -u root"),
        ("OPENAI_API_KEY=" + OPENAI, "OPENAI_API_KEY=[REDACTED:openai_key]"),
    ],
)
def test_generic_assignments(text: str, expected: str) -> None:
    assert redact_secrets(text) == (expected, 1)


@pytest.mark.parametrize(
    "text",
    [
        "commit 3f9a2c1b4d5e6f708192a3b4c5d6e7f8091a2b3c",
        "request 6f1c0e4a-5b7d-4c2e-9a1b-0d2e3f4a5b6c failed",
        "edit /home/bob/src/app/main.py and C:\\Users\\bob\\token.txt",
        "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "max_tokens: 4096, prompt_tokens=1200, tokens: 33",
        "password: ********",
        "api_key=${OPENAI_API_KEY}",
        "token: <your-token>",
        "GOOGLE_APPLICATION_CREDENTIALS=/etc/gcp/key.json",
        "the password is stored in the vault",
        "call_abc123def456ghi and req_01HXYZ8K2M3N4P5Q",
        "https://github.com/octo/app/pull/12",
    ],
)
def test_ordinary_text_untouched(text: str) -> None:
    assert redact_secrets(text) == (text, 0)


def test_counts_several() -> None:
    text = f"{OPENAI}\n{AWS}\nAuthorization: Bearer {fake(ALNUM, 30)}\npassword=abcdefgh"
    redacted, count = redact_secrets(text)
    assert count == 4
    assert redacted.count("[REDACTED:") == 4


def test_idempotent() -> None:
    text = f"key {ANTHROPIC} and https://u:pw123456@h.io and token={fake(ALNUM, 20)}"
    once, _ = redact_secrets(text)
    assert redact_secrets(once) == (once, 0)


_KNOWN_SECRETS = (OPENAI, ANTHROPIC, AWS, GITHUB, SLACK, STRIPE)


@given(st.lists(st.text(max_size=40) | st.sampled_from(_KNOWN_SECRETS), max_size=6))
def test_the_count_is_the_markers_added_and_nothing_grows_back(pieces: list[str]) -> None:
    """Random text with known secrets spliced in (spaces around them, so each stays one token):
    the count is the number of markers added, every spliced secret is gone, text without anything
    redacted comes back unchanged, and a second pass finds nothing."""
    text = " ".join(pieces)
    redacted, count = redact_secrets(text)
    assert count == redacted.count("[REDACTED:") - text.count("[REDACTED:")
    spliced = [p for p in pieces if p in _KNOWN_SECRETS]
    assert count >= len(set(spliced))
    assert not any(secret in redacted for secret in spliced)
    if count == 0:
        assert redacted == text
    assert redact_secrets(redacted)[1] == 0


# Lines of a long tool output: filler, every secret shape, and keys whose value follows a line break.
_LINES = [
    "    return self.token_bucket.refill(amount)  # token is not a secret here",
    "2025-11-03T13:11:11Z INFO gateway request served in 12 ms",
    "",
    "   ",
    f"export OPENAI_API_KEY={OPENAI}",
    f"aws_access_key_id = {AWS}",
    f"Authorization: Bearer {fake(ALNUM, 30)}",
    "Authorization: Bearer",
    f"    {fake(ALNUM, 24)}1",
    "password:",
    f"{fake(ALNUM, 12)}9",
    "DATABASE_URL=postgres://app:hunter22secret@db.internal:5432/app",
    f"github: {GITHUB}",
    f"jwt {JWT}",
    "access_key: Zx81kQ7Lm2Pq",
    "client_secret='s3cr3t-value-42'",
    # Shapes found by context (issue 19): they must be found around their cues as in the full pass.
    "$ curl -u admin:Kq81xZ0pLm https://api.example.com",
    "$ mysql -h db -u root -pKq81xZ0pLm app",
    "$ docker login -u bot -p Kq81xZ0pLm registry.example.com",
    "machine api.example.com",
    "  login bot",
    "  password Kq81xZ0pLm",
    '{"url": "postgres:\\/\\/app:Kq81xZ0pLm@db:5432\\/x"}',
    "Authorization: Basic ZGVwbG95Omh1bnRlcnR3bw==",
    'DB_PASSWORD="tangerine quartz lantern"',
    "GET https://b.s3.amazonaws.com/k?X-Amz-Signature=" + "ab12" * 16 + "&X-Amz-Date=20251103T000000Z",
    "hf_" + fake(string.ascii_letters, 34),
]


@given(st.lists(st.sampled_from(_LINES), min_size=40, max_size=400))
def test_windowed_redaction_matches_the_full_pass(lines: list[str]) -> None:
    # Long texts are redacted around their cues only: the result must be the full pass's.
    text = "\n".join(["x" * 120] * 40 + lines)
    assert len(text) >= 4096
    assert redact_if_needed(text) == redact_secrets(text)[0]


def test_windowed_redaction_keeps_unchanged_text_identical() -> None:
    text = "\n".join([_LINES[0]] * 200)
    assert redact_if_needed(text) is text


# Code is not a credential: names, calls, attributes, type names and format fields stay as they are
# (the summarizer is told to quote code exactly), and so do stand-in literals of examples and tests.
CODE_LINES = [
    "        api_key=api_key,",
    "    token = _generic_recursion_cache.set(previously_seen_type_refs)",
    "def reset(token: UUID) -> None:",
    "    token: UUID",
    'raise ValueError(f"missing token: {token!r}")',
    "username, password = get_auth_from_url(proxy)",
    "password = password.encode('latin1')",
    "self.password = password",
    "    password: bytes | str",
    "    password: Optional[str] = None,",
    "password=parts['password'],",
    "if not api_key:\n    return None",
    'def reset_carrier(token: "Token[Mapping[str, str] | None]") -> None:',
    'headers["Authorization"] = f"Bearer {token}"',
    "access_token = self._token_repo.get(token_id)",
    "model, api_base, api_key = 'openai/gpt-4o-mini', base, 'offline'",
    'client = OpenAI(api_key="sk-fake", base_url=base)',
    "hashed_token=key_hash,",
    "ARGILLA_API_KEY=_credentials_api_key,",
    '"input_cost_per_token": 1.5e-06,',
    "postgresql://user:password@host:5432/db",
    "token = token or os.environ['TOKEN']",
    "secret_key: SecretStr = Field(...)",
    # Names, prose and placeholders that read like a key's value (seen in popular libraries' source):
    # a header's or an enum member's name, a sentinel, words after a key word in a sentence, a log
    # message's printf field, a masked or templated example, prose about Basic authentication.
    'GOOGLE_API_KEY_HEADER = "x-goog-api-key"',
    'static_token = "static-token"',
    'PROFILE_PASSWORD = "profile-username-password"',
    'token="__scope_auth_check__",',
    'token="failed-to-connect-to-db",',
    'client = OpenAI(api_key="My API Key", base_url=base)',
    '"api_key": "your-api-key",  # optional',
    "- prompt_cost_per_token + completion_cost_per_token: Token-based pricing",
    'logger.warning("refresh_oauth_token: server=%s has no token_url configured", name)',
    'raise UsageError("the URL must not hold credentials; pass --api-key separately")',
    "# Per-route authorization: the route-level gate accepts this call when the scope matches",
    "Schemes: bearer and token are sent verbatim, basic base64-encoded.",
    "- x-upstream-authorization: Basic base64_encoded_creds",
    '"access_token": "glpat_***",',
    '#    "api_key": "sk-1****cdef",',
    'api_key="pat/<token>"',
]


@pytest.mark.parametrize("line", CODE_LINES)
def test_code_is_left_alone(line: str) -> None:
    assert redact_secrets(line) == (line, 0)


_NAMES = st.from_regex(r"[a-z][a-z_]{0,12}[a-z]", fullmatch=True)
_KEYS = st.sampled_from(
    ["api_key", "token", "password", "secret", "access_token", "client_secret", "db_pass", "pwd", "passphrase"]
)
_VALUES = st.one_of(
    _NAMES,  # a variable
    st.builds("{}.{}".format, _NAMES, _NAMES),  # an attribute
    st.builds("{}({})".format, _NAMES, _NAMES),  # a call
    st.builds("{}[{!r}]".format, _NAMES, _NAMES),  # a subscript
    st.builds("{{{}!r}}".format, _NAMES),  # a format field
    st.sampled_from(["str", "bytes", "UUID", "SecretStr", "Optional[str]", "str | None", "None", "True"]),
)
_TYPES = st.sampled_from(["str", "bytes", "UUID", "SecretStr", "Optional[str]", "str | None", "Token[Any]", "int"])
_FORMS = st.sampled_from(["{k}={v},", "{k} = {v}", "{k}: {v},", "f({k}={v})", "self.{k} = {v}", "x({k}, {v})"])
_CODE_LINE = st.one_of(
    st.builds(lambda f, k, v: f.format(k=k, v=v), _FORMS, _KEYS, _VALUES),
    # A bare lower-case word alone after "key:" is a YAML setting ("password: hunter"): annotations
    # name types.
    st.builds("{}: {}".format, _KEYS, _TYPES),
    st.builds("{}: {} = None".format, _KEYS, _TYPES),
)


# Plain words (drawn letters could spell a key's prefix: "sk-aaaa-..." is an OpenAI key's shape).
_PLAIN_WORDS = [
    "failed",
    "connect",
    "route",
    "level",
    "static",
    "stored",
    "user",
    "scope",
    "check",
    "header",
    "based",
    "default",
    "pricing",
    "request",
    "server",
    "local",
    "team",
    "client",
    "upstream",
    "value",
    "name",
    "here",
    "owner",
    "data",
]
_WORD = st.sampled_from(_PLAIN_WORDS)
_NON_PASSWORD_KEYS = st.sampled_from(["api_key", "token", "secret", "access_token", "client_secret", "auth_token"])
_SLUG = st.lists(_WORD, min_size=2, max_size=5).map("-".join)
_PROSE_LINE = st.one_of(
    # a key word inside a sentence, more words after its value ("per_token: token-based pricing")
    st.builds("- the {}: {} {} here".format, _NON_PASSWORD_KEYS, _SLUG, _WORD),
    # a sentinel or header name in code
    st.builds('{} = "{}"'.format, _NON_PASSWORD_KEYS, _SLUG),
    # a value that names itself, whatever the key
    st.builds('{} = "x-{}-{}"'.format, _KEYS, _WORD, st.sampled_from(["key", "token", "secret", "password"])),
)


@given(st.lists(st.one_of(_CODE_LINE, _PROSE_LINE), min_size=1, max_size=30))
def test_code_like_text_without_secrets_is_never_redacted(lines: list[str]) -> None:
    text = "\n".join("    " + line for line in lines)
    assert redact_secrets(text) == (text, 0)
    assert redact_if_needed(text) == text


@pytest.mark.parametrize(
    ("text", "secret", "label"),
    [
        ("my password: Tr0ub4dor&3xyz!", "&3xyz!", "password"),
        ("password=Kq81&xZ0pLm", "xZ0pLm", "password"),
        ("DB_PASSWORD=plainletters", "plainletters", "password"),
        ("password: hunter", "hunter", "password"),
        ("passphrase: plum Kx7!r9 lantern", "lantern", "password"),
        # Words are a password's value all the same, and any value is one on an environment line.
        ('password = "correct-horse-battery-staple"', "staple", "password"),
        ('db_password = "tangerine quartz lantern"', "lantern", "password"),
        ("API_KEY=changeme", "changeme", "api_key"),
        ("SECRET_KEY=supersecretvalue", "supersecretvalue", "api_key"),
        ("export GITHUB_TOKEN=plainletterstoken", "plainletterstoken", "token"),
        # Credential shapes beside the words and names left alone (see CODE_LINES).
        ('api_key = "sk-9876543210abcdef"', "9876543210abcdef", "api_key"),
        ("Authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy", "bearer_token"),
        ('token = "qzkvhtwplmxbrdfgnsjcyaeoqzkvhtwp"', "qzkvhtwplmxbrdfgnsjcyaeo", "token"),  # letters, no word
    ],
)
def test_the_whole_secret_value_goes(text: str, secret: str, label: str) -> None:
    redacted, count = redact_secrets(text)
    assert count == 1
    assert secret not in redacted, redacted
    assert f"[REDACTED:{label}]" in redacted


def test_the_projects_own_code_is_not_redacted() -> None:
    # The package, its guards, benchmarks and examples rendered as tool output (``cat file.py``):
    # the only lines redaction may change are doctests that show redaction itself at work.
    root = Path(__file__).resolve().parents[2]
    changed: list[str] = []
    for folder in ("compaction", "guards", "benchmarks", "examples"):
        for path in sorted((root / folder).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            out = redact_if_needed(source)
            if out == source:
                continue
            for old, new in zip(source.splitlines(), out.splitlines(), strict=True):
                demo = old.lstrip().startswith(">>>") or path.parent.name == "redact"
                if old != new and not demo:
                    changed.append(f"{path.relative_to(root)}: {old.strip()}")
    assert not changed, changed


def test_a_long_text_is_redacted_from_its_first_character_and_on_line_boundaries() -> None:
    filler = "".join(f"plain log line {i}\n" for i in range(400))  # long: redacted in windows
    first = "token=abcd1234efgh5678\n" + filler
    assert redact_if_needed(first) == "token=[REDACTED:token]\n" + filler
    # cues on consecutive lines each open a window; every window is whole lines
    text = filler + "token=abcd1234efgh5678\npassword=hunter2hunter2\napi_key=zyxw9876vuts5432\n" + filler
    assert redact_if_needed(text) == redact_secrets(text)[0]
    assert "hunter2" not in redact_if_needed(text)
    from compaction.redact import _cue_windows

    windows = _cue_windows(text, text.lower())
    assert windows
    for start, end in windows:
        assert start == 0 or text[start - 1] == "\n"
        assert end == len(text) or text[end] == "\n"
    assert _cue_windows(first, first.lower())[0][0] == 0


def test_a_window_reaches_two_non_blank_lines_past_its_cue() -> None:
    """A .netrc entry spread over lines: the cue ("machine <host>" up to "login") ends on the second
    line, and the password sits two non-blank lines further, past an ``account`` line and a blank
    one that hold no cue. Only the cue's window reaches it in a long text."""
    filler = "".join(f"plain log line {i}\n" for i in range(300))
    entry = "machine example.com\n  login alice\n  account main\n\n  password hunter22x9\n"
    expected = "machine example.com\n  login alice\n  account main\n\n  password [REDACTED:password]\n"
    assert redact_secrets(entry) == (expected, 1)
    text = filler + entry + filler
    assert redact_if_needed(text) == filler + expected + filler


@pytest.mark.parametrize(
    "entry",
    [
        "machine example.com\nlogin alice\naccount main\nport 22\npassword hunter22x9\n",
        "default\nlogin alice\naccount main\nport 22\npassword hunter22x9\n",
        "machine\nexample.com\nlogin\nalice\npassword\nhunter22x9\n",
        "machine example.com login alice password hunter22x9\n",
    ],
)
def test_a_netrc_entry_item_by_item_is_redacted_in_a_long_text_too(entry: str) -> None:
    """A .netrc entry may put each item on its own line (login, account, port, then password): the
    windows of a long text must reach the password as the full pass of a short text does."""
    filler = "".join(f"plain log line {i}\n" for i in range(300))
    expected = entry.replace("hunter22x9", "[REDACTED:password]")
    assert redact_secrets(entry) == (expected, 1)
    assert redact_if_needed(filler + entry + filler) == filler + expected + filler


def test_the_plugin_shapes_are_the_installed_detect_secrets_denylists() -> None:
    """The plugins' patterns are copied (importing detect-secrets is slow): entry by entry, pattern
    and flags, they must be what the installed version's plugins match."""
    import importlib
    import re

    from compaction import redact

    for module, name, _, _ in redact._PLUGINS:
        detector = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)
        installed = [(pattern.pattern, pattern.flags) for pattern in detector.denylist]
        copied = [(text, re.compile(text, flags).flags) for text, flags in redact._PLUGIN_DENYLISTS[module]]
        assert copied == installed, module


def test_redaction_does_not_import_detect_secrets() -> None:
    """A process's first redaction (and the identifier scan's secret check) compiles the copied
    shapes; the plugins' package, which costs 0.1-0.5 s to import, is not loaded."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from compaction.redact import looks_like_secret, redact_if_needed\n"
        "out = redact_if_needed('key AKIA' + 'A' * 16 + ' token=abcd1234efgh5678 xoxb-1-abc')\n"
        "assert out.count('[REDACTED') == 3, out\n"
        "assert looks_like_secret('ghp_' + 'A1b2' * 9)\n"
        "print('detect_secrets' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, env={"PYTHONPATH": str(root)}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# -- records, JSON values and messages --------------------------------------------------------------

SECRET = "token=abcd1234efgh5678"
REDACTED = "token=[REDACTED:token]"


def test_redact_json_redacts_every_string_but_the_skipped_keys_and_keeps_the_rest() -> None:
    value = {
        "content": f"use {SECRET}",
        "n": 3,
        "flag": None,
        "nested": [{"text": SECRET}, (SECRET, 4.5)],
        "prompt": SECRET,
        7: SECRET,
    }
    out = redact_json(value, skip_keys=frozenset({"prompt"}))
    assert out == {
        "content": f"use {REDACTED}",
        "n": 3,
        "flag": None,
        "nested": [{"text": REDACTED}, [REDACTED, 4.5]],
        "prompt": SECRET,  # a skipped key's value stays
        7: REDACTED,  # a non-string key skips nothing
    }
    assert value["content"] == f"use {SECRET}"  # a copy: the argument is unchanged
    # the key of the top value counts too; a skipped key's nested strings are not skipped
    assert redact_json(SECRET, skip_keys=frozenset({"prompt"}), key="prompt") == SECRET
    assert redact_json(SECRET, skip_keys=frozenset({"prompt"}), key="other") == REDACTED
    assert redact_json({"prompt": [SECRET]}, skip_keys=frozenset({"prompt"})) == {"prompt": [REDACTED]}
    assert redact_json(SECRET) == REDACTED
    # a long text goes through the windowed pass, as redact_if_needed does
    filler = "".join(f"plain log line {i}\n" for i in range(400))
    assert redact_json({"content": filler + SECRET}) == {"content": filler + REDACTED}


def test_redact_record_skips_the_prompts_only_when_the_run_sent_them_redacted() -> None:
    entries = {"prompt": SECRET, "system_prompt": SECRET, "instructions": SECRET, "calls": [{"summary": SECRET}]}
    redacted_entries = {"instructions": REDACTED, "calls": [{"summary": REDACTED}]}
    for config in ({"redact_secrets": True, "note": SECRET}, {"note": SECRET}):
        record = {**entries, "config": config}
        out = redact_record(record)
        # the config entry as it is; the prompts, sent redacted, are not redacted again
        assert out == {**redacted_entries, "prompt": SECRET, "system_prompt": SECRET, "config": config}
    no_config = redact_record(entries)  # no config at all: the default (redacted when sent)
    assert no_config == {**redacted_entries, "prompt": SECRET, "system_prompt": SECRET}
    not_a_mapping = redact_record({**entries, "config": "x"})
    assert not_a_mapping == {**redacted_entries, "prompt": SECRET, "system_prompt": SECRET, "config": "x"}
    sent_plain = redact_record({**entries, "config": {"redact_secrets": False}})
    assert sent_plain == {
        **redacted_entries,
        "prompt": REDACTED,
        "system_prompt": REDACTED,
        "config": {"redact_secrets": False},
    }


def test_redact_message_redacts_texts_arguments_and_results_and_keeps_what_is_clean() -> None:
    from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart

    clean_text = TextPart(text="plain words")
    clean_call = ToolCallPart(id="c1", name="run", arguments='{"cmd": "ls"}')
    clean_result = ToolResultPart(call_id="c1", content="file.txt")
    clean_blocks = ToolResultPart(call_id="c2", content=(TextPart(text="a"), TextPart(text="b")))
    clean = Message(role="assistant", id="m0", parts=(clean_text, clean_call, clean_result, clean_blocks))
    assert redact_message(clean) is clean  # nothing to redact: the message itself

    message = Message(
        role="assistant",
        id="m1",
        parts=(
            TextPart(text=f"set {SECRET}"),
            clean_text,
            ToolCallPart(id="c1", name="run", arguments=f'{{"cmd": "export {SECRET}"}}'),
            clean_call,
            ToolResultPart(call_id="c1", content=f"echo {SECRET}"),
            clean_result,
            ToolResultPart(call_id="c2", content=(TextPart(text="fine"), TextPart(text=SECRET))),
            clean_blocks,
        ),
    )
    out = redact_message(message)
    assert out is not message
    assert message.parts[0].text == f"set {SECRET}"  # the caller's message is unchanged
    text, same_text, call, same_call, result, same_result, blocks, same_blocks = out.parts
    assert text.text == f"set {REDACTED}"
    assert call.arguments == f'{{"cmd": "export {REDACTED}"}}'
    assert (call.id, call.name) == ("c1", "run")
    assert result.content == f"echo {REDACTED}"
    assert [b.text for b in blocks.content] == ["fine", REDACTED]
    assert blocks.content[0] is message.parts[6].content[0]  # the clean block kept as it is
    # parts without a secret are the same objects (their cached views stay)
    assert same_text is clean_text
    assert same_call is clean_call
    assert same_result is clean_result
    assert same_blocks is clean_blocks
    assert (out.role, out.id) == ("assistant", "m1")


# -- the long-text path: its windows, its shortcuts and the counts -----------------------------------

FILLER = "".join(f"plain log line {i}\n" for i in range(300))  # long: redacted in windows


def test_cue_windows_are_the_cue_line_and_two_non_blank_lines_merged_when_adjacent() -> None:
    """The windows themselves (the redaction inside a wider window is the same, so only they show a
    window that grew or shrank): whole lines, two non-blank one-character lines taken past a blank
    one, adjacent windows merged, windows one blank line apart kept apart."""
    from compaction.redact import _cue_windows

    lines = ["intro", "token=abcd1234efgh5678", "a", "", "b", "password=hunter2hunter2", "c", "d", ""]
    lines += ["api_key=zyxw9876vuts5432", "e", "f", "g", "h"]
    text = "\n".join(lines)

    def span(first: int, last: int) -> tuple[int, int]:
        start = sum(len(line) + 1 for line in lines[:first])
        return start, start + len("\n".join(lines[first : last + 1]))

    assert _cue_windows(text, text.lower()) == [span(1, 7), span(9, 11)]
    assert _cue_windows("\n" + lines[1], "\n" + lines[1]) == [(1, 1 + len(lines[1]))]


def test_a_cue_at_the_start_of_a_taken_line_opens_its_own_window() -> None:
    """A .netrc entry right after a token line: its "machine" cue sits on a line the token's window
    takes along, and its own window must still run to the password four lines further."""
    entry = "token=abcd1234efgh5678\nmachine example.com\nlogin alice\naccount main\nport 22\npassword hunter22x9\n"
    expected = entry.replace("abcd1234efgh5678", "[REDACTED:token]").replace("hunter22x9", "[REDACTED:password]")
    assert redact_if_needed(FILLER + entry + FILLER) == FILLER + expected + FILLER


def test_the_cue_shortcuts_rule_out_only_what_cannot_match() -> None:
    from compaction.redact import _has_cue, _possible_cues

    assert not _has_cue("plain log line 12\nall good")
    assert _has_cue("x token=abc")
    assert _has_cue("machine example.com login alice password pw")
    assert _possible_cues("plain words") == (0, 3, 4, 6, 7, 8)  # no key word, no "password"
    assert _possible_cues("the token: x") == (0, 1, 2, 3, 4, 6, 7, 8)
    assert _possible_cues("password") == tuple(range(9))


def test_colour_codes_are_kept_unless_they_hid_a_secret() -> None:
    coloured = "\x1b[31mtoken=abcd1234efgh5678 \x1b[0mdone"
    for redact in (lambda t: redact_secrets(t)[0], redact_if_needed):
        long_coloured = FILLER + coloured + "\n" + FILLER
        assert redact(coloured) == "\x1b[31mtoken=[REDACTED:token] \x1b[0mdone"
        assert redact(long_coloured) == FILLER + "\x1b[31mtoken=[REDACTED:token] \x1b[0mdone\n" + FILLER
        # the codes split a key's shape: only the text without them shows it, and is returned
        hidden = "key ghp_A1b2C3d4E5f6G7h8J9\x1b[1mk0L1m2N3p4Q5r6S7t8\x1b[0m end"
        assert redact(hidden) == "key [REDACTED:github_token] end"
        assert redact(FILLER + hidden + "\n" + FILLER) == FILLER + "key [REDACTED:github_token] end\n" + FILLER
    assert redact_secrets("key ghp_A1b2C3d4E5f6G7h8J9\x1b[1mk0L1m2N3p4Q5r6S7t8\x1b[0m end")[1] == 1


def test_a_private_key_block_in_a_long_text_is_redacted_whole() -> None:
    """A key block spans more lines than a window: a long text holding one is redacted in one pass."""
    block = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----\n"
    short, count = redact_secrets(block)
    assert count == 1
    assert PEM_BODY.splitlines()[2] not in short
    assert redact_if_needed(FILLER + block + FILLER) == FILLER + short + FILLER


def test_a_text_whose_lower_case_is_longer_is_redacted_at_the_right_offsets() -> None:
    """ "İ".lower() is two characters: the windows, found in the lower-cased text, would sit at the
    wrong offsets; such a text is redacted in one pass."""
    text = "İ" * 200 + "\n" + FILLER + "token=abcd1234efgh5678\n" + FILLER
    assert redact_if_needed(text) == "İ" * 200 + "\n" + FILLER + "token=[REDACTED:token]\n" + FILLER


def test_a_long_text_with_a_cue_and_nothing_to_redact_is_returned_itself() -> None:
    text = FILLER + "access_token = self._token_repo.get(token_id)\n" + FILLER  # a cue, code after it
    assert redact_if_needed(text) is text


def test_the_count_adds_every_steps_replacements() -> None:
    """A cue's secret, a key body without its armour, and a Kubernetes Secret's two values: 4."""
    manifest = "kind: Secret\ndata:\n  user: YWRtaW4=\n  host: ZGIubG9jYWw=\n"
    text = f"token=abcd1234efgh5678\n{PEM_BODY}\n\n{manifest}"
    redacted, count = redact_secrets(text)
    assert count == 4
    assert redacted.count("[REDACTED:") == 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Token 9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b", "Authorization: Token [REDACTED:auth_token]"),
        ("RAILS_MASTER_KEY=8f3e2a9c1b7d4e6f0a5c", "RAILS_MASTER_KEY=[REDACTED:api_key]"),
        ("db.example.com:5432:app:alice:s3cretPw9", "db.example.com:5432:app:alice:[REDACTED:password]"),
        (
            "https://b.s3.amazonaws.com/k?X-Amz-Signature=abc123def456&x=1",
            "https://b.s3.amazonaws.com/k?X-Amz-Signature=[REDACTED:url_signature]&x=1",
        ),
        ("passphrase: plum Kx7!r9 lantern", "passphrase: [REDACTED:password]"),
        ("Cookie: session=abc123def456; theme=dark", "Cookie: session=[REDACTED:cookie]; theme=[REDACTED:cookie]"),
        # no digit, but it decodes to user:password
        ("Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", "Authorization: Basic [REDACTED:bearer_token]"),
        ("postgres://u:ab@host/db", "postgres://u:[REDACTED]@host/db"),  # two characters are a password
    ],
)
def test_each_step_writes_its_own_label_and_keeps_the_context(text: str, expected: str) -> None:
    assert redact_secrets(text) == (expected, expected.count("[REDACTED"))
