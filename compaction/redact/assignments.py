"""``key = value`` assignments and pass-phrase lines: the value goes when it reads like a credential, and
stays when it is code (a name, a call, a type, a format field) or a stand-in."""

from __future__ import annotations

import keyword
import re

from compaction.redact.base import (
    _IDENTIFIER_CHAIN,
    _NOT_DONE,
    _NUMBER,
    _generated,
    _is_placeholder,
    _line_end,
    _names_itself,
    _prose_value,
    _replace_group,
    _wordlike,
)

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
    if _PRINTF_FIELD.search(value):
        return True  # a log message's field ("token: server=%s has no ..."); URL escapes are hex
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


# A printf-style field ("%s", "%r", "%(name)s", "%d" before no hex digit): a URL-escaped secret
# holds "%" before two hex digits only.
_PRINTF_FIELD = re.compile(r"%\(\w+\)[sdr]|%[sr]|%d(?![0-9A-Fa-f])")


_SNAKE_NAME = re.compile(r"[a-z]+(?:_[a-z]+)+")


_MODEL_NAME = re.compile(r"[A-Za-z][\w.-]*(?:/[A-Za-z][\w.:-]*)+")


# A type written as a string ("Token[Span | None]", "OtelDestination"): annotations quote them.
_TYPE_STRING = re.compile(r"[A-Z][\w.]*(?:\[[\w.,| \[\]]*\])?")


def _stand_in(value: str, password: bool = False) -> bool:
    """A quoted value in code that is not a credential: a letter or two (``api_key="k"``), a short
    word without digits (``"fake"``, ``"sk-fake"``, ``"offline"``), a value naming what it holds
    (``"x-goog-api-key"``, ``"static-token"``), words after a key that names no password
    (``token="failed-to-connect-to-db"``, ``api_key="My API Key"``; a pass phrase may be words), a model route
    (``"openai/gpt-4o-mini"``). Credentials have digits, length or both."""
    if len(value) < 4:
        return True
    if len(value) < 12 and _STAND_IN.fullmatch(value):
        return True
    if _names_itself(value) or (not password and all(_wordlike(word) for word in value.split())):
        return True  # ("My API Key": words with spaces are a pass phrase only after a password's key)
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
        kind = _assignment_kind(key)
        if _kept_value(value.strip(), kind == "password"):
            return match.group()
        if not _key_context(match.string, match.start(), key.rstrip("\"'\\")) and _stand_in(value, kind == "password"):
            return match.group()
        count += 1
        return f"{key}{quote}[REDACTED:{kind}]{quote}"

    def plain(match: re.Match[str]) -> str:
        nonlocal count
        key, value = match.group(1), match.group(2)
        password = _assignment_kind(key) == "password"
        if len(value) < 4 or _kept_value(value, password):
            return match.group()
        # An argument list ("f(API_KEY=name, ...)") is code, not an environment line.
        in_call = match.string[match.end() : match.end() + 1] in (",", ")")
        env = _key_context(match.string, match.start(), key) and not in_call
        if not env and not key.startswith("--") and key[-1:] in "\"'" and _stand_in(value, password):
            return match.group()
        if not env and not password and _prose_value(value):
            return match.group()  # words after a key that names no password: prose or a name
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
    # The step's key word ends where the cue's does: one holds the other, and no key word holding
    # "pass" or "pwd" ends in a shorter key word without it.
    key_word = text[start:word_end].lower()
    password = "pass" in key_word or "pwd" in key_word
    separator = text[word_end:separator_end]  # a quote, spaces, then ":", "=" or "%3d"
    if password and separator.endswith(":"):
        # A pass phrase takes the rest of its line, spaces and all: the line from its start, as the step reads it.
        line = _PASS_LINE_RE.match(text, text.rfind("\n", 0, start) + 1)
        if line is not None and _pass_phrase(line.group(2)):
            return True
    value_start = _SPACES.match(text, separator_end)
    value_at = value_start.end() if value_start else separator_end
    if "\n" in text[word_end:value_at]:
        # The key's match runs across a line break: whatever it keeps, it takes along what follows,
        # which a window starting on a later line would read on its own. Counted, so its window
        # starts on the key's line as the full pass reads it.
        return True
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
    line_value = not spaced and _value_ends_line(text, value.end())  # no line break in ``around`` here
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
        if not (_kept_value(inside.strip(), password) or _stand_in(inside, password)):
            return True
    value = _ASSIGNED_VALUE.match(text, quote.end())
    if value is None:
        return False
    found = value.group()
    return not (len(found) < 4 or _kept_value(found, password) or _stand_in(found, password))
