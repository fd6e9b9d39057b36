"""The cues: text without one skips the full redaction pass, so every change a step makes must sit
on a cued line. A key word's cue counts only where the value after it may be a credential
(``token: int``, ``token: {record!r}`` and ``token = self.repo.get(...)`` are code): these tests
hold the cue to being a superset of what the steps replace, over key-value lines of every form."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from compaction.redact import _cue_windows, _has_cue, redact_if_needed, redact_secrets
from compaction.redact.steps import _redact_all as redact_all

_KEY_WORDS = [
    "api_key",
    "apikey",
    "api-key",
    "secret_key",
    "secret_access_key",
    "access_key",
    "account_key",
    "client_secret",
    "secret",
    "access_token",
    "auth_token",
    "refresh_token",
    "token",
    "password",
    "passwd",
    "pass",
    "passphrase",
    "pwd",
    "private_key",
    "key_data",
    "bypass",
    "tokens",
]
_KEYS = st.builds(
    lambda prefix, word, case, quote: f"{prefix}{case(word)}{quote}",
    st.sampled_from(["", "DB_", "my_", "self.", "x.", '"', "'", '\\"', "  - ", "    ", "OPENAI_", "{", "f(", "--"]),
    st.sampled_from(_KEY_WORDS),
    st.sampled_from([str.lower, str.upper, str.title, lambda w: w[:-1] + w[-1].upper()]),
    st.sampled_from(["", '"', "'", '\\"']),
)
_SEPARATORS = st.sampled_from(
    [":", "=", " = ", ": ", "=  ", "%3D", "%3d", ":\n", ":\n\n  ", "\t=\t", " :", "= ", ": \t", "=\n    "]
)
_VALUES = st.one_of(
    st.sampled_from(
        [
            "int",
            "UUID",
            "datetime",
            "None",
            "dict[str, Any]",
            "Optional[str]",
            "{record!r}",
            "{abc def}",
            "self._token_repo.get(token_id)",
            "sync_refund(event, limit)",
            "token",
            "api_key",
            "hunter",
            "hunter22",
            "Kq81xZ0pLm",
            "plainletters",
            "Tr0ub4dor&3xyz!",
            "plum Kx7!r9 lantern",
            "int, n: 1)",
            "-73",
            "4096",
            "1.5e-06",
            "${TOKEN}",
            "<your-token>",
            "***",
            "/etc/app/key.pem",
            "./a.b",
            "/kQ9xZ81mLp0Qr7Ts2Uv4",
            "https://example.com/x",
            '"quoted value 42"',
            "'sk-fake'",
            "`hunter22`",
            "(abcdefgh",
            "(abc)",
            "abcd1234efgh5678",
            "a_b_c",
            "snake_case_name9x1y2z3w4v5",
            "Abc",
            "abc",
            "x",
            "",
            "%41bc1234",
            "a%2Fb%2Fc123",
            "value&user=bob",
            "Kq81&xZ0pLm",
            "if",
            "None # note",
            "api_key: Kq81xZ0pLm",  # after a line break: a second key the first one's match takes along
            '"refresh_page"',
            '"Token[Any]"',
            '"openai/gpt-4o-mini"',
            '"abcd1234efgh',
            '"hunter22"',
            '\\"abcd1234efgh\\"',
            "'fake'",
            '"plum Kx7!r9 lantern"',
            '"a b"',
            '""',
            "\\x",
        ]
    ),
    st.from_regex(r"[A-Za-z0-9_.:/+=-]{1,24}", fullmatch=True),
)
_ENDINGS = st.sampled_from(["", ",", ")", " # note", " and more", "\n    return x", "&user=bob", ".", "\n"])
_LINE = st.builds("{}{}{}{}".format, _KEYS, _SEPARATORS, _VALUES, _ENDINGS)
_TEXT = st.lists(_LINE | st.sampled_from(["plain words", "", "    x = 1"]), min_size=1, max_size=6).map("\n".join)


@settings(max_examples=1500)
@given(_TEXT)
@example("token: Kq81xZ0pLm")
@example("TOKEN=UUID")
@example("password: int, n: 1)")
@example("my password: Tr0ub4dor&3xyz!")
@example("if token:\n    hunter22")
@example('"token": "refresh_page", "amount": 3')
@example('TOKEN="refresh_page"')
@example('password: " 12345678"')
@example('password: "12345678')
@example('token:"ab12')
def test_every_change_the_steps_make_is_cued(text: str) -> None:
    """The property the cue's value test must keep: when the steps change a text, it has a cue (else
    ``redact_secrets`` would skip them and leak)."""
    if redact_all(text)[0] != text:
        assert _has_cue(text.lower(), text), text


@settings(max_examples=300)
@given(st.lists(_LINE | st.sampled_from(["plain log line", "", "   "]), min_size=1, max_size=40))
@example(["password:", "access_key: Zx81kQ7Lm2Pq"])
@example(["if token:", "    api_key=Kq81xZ0pLm"])
def test_long_texts_redacted_around_their_cues_match_the_full_pass(lines: list[str]) -> None:
    """A long text is redacted only in the windows of its (filtered) cues: the result is the full pass's."""
    filler = "x" * 120 + "\n"
    text = filler * 40 + "\n".join(lines) + "\n" + filler * 5
    assert redact_if_needed(text) == redact_secrets(text)[0]


def test_code_after_a_key_word_is_no_cue() -> None:
    """The shapes of a coding session's source that used to send whole files through every step."""
    code = [
        "    token: int",
        "def reset(token: UUID) -> None:",
        'raise ValueError(f"missing token: {record!r}")',
        "    token = self._token_repo.get(token_id)",
        "    token = sync_refund(event, limit)",
        "def f(token: dict[str, Any], account: list[str]) -> Decimal:",
        "    token: None = None",
        "    cost_per_token: 1.5e-06",
        "    max_tokens: -73",
        "    secret_file: /run/secrets/db",
        "    token: ${TOKEN}",
        "f(api_key=api_key, token=token)",
        '{"token": "refresh_page", "amount": 3}',
        '    token: "4096',  # an unclosed quote: the plain step reads a number
        '    token: ""',
        "    token: \\d+",  # a backslash before no quote: no step reads a value
        "    token: `name`",  # a backtick starts no value
        "    token = hunter",  # spaced: a name (a setting would read "token: hunter")
        "token\t=\tstate",
        "    token: /run/secrets/db",
        "    password: str | None = None",
    ]
    for line in code:
        assert not _has_cue(line.lower(), line), line
        assert redact_secrets(line) == (line, 0)
    text = "\n".join(code * 60)
    assert len(text) > 4096
    assert _cue_windows(text, text.lower()) == []


def test_values_that_may_be_credentials_stay_cued() -> None:
    """Each of these is redacted, so each must keep its cue: settings, environment lines, quoted
    values, pass phrases, a value on the next line, a number after a password's key."""
    secrets = [
        "token: 9f8e7d6c5b4a",
        "password: hunter",
        "DB_PASSWORD=plainletters",
        "API_TOKEN=UUIDVALUE",
        'client_secret = "qwerty12345"',
        "passphrase: plum Kx7!r9 lantern",
        "password: 48151623",
        "access_token%3DKq81xZ0pLm",
        "my password: Tr0ub4dor&3xyz!",
        "Authorization:\n  token: Kq81xZ0pLm",
    ]
    for line in secrets:
        assert redact_secrets(line)[1] >= 1, line
        assert _has_cue(line.lower(), line), line
