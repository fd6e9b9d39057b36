"""Fidelity: no identifier a summary or ledger shows is altered (issue 14, item 1).

A hypothesis property over messages full of ``__dunder__``, ``**kwargs``, ``a__b``, ``*``, ``_``,
backticks, markdown emphasis, headings, bullets, tables, code fences, long paths and URLs: the
offline extractive summarizer and the whole compactor (offline, a small window so it compacts)
show only identifiers that occur verbatim in the originals. Plus the exact cases of the issue.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction import CompactionConfig, Compactor
from compaction.adapters import to_canonical
from compaction.fidelity import altered_identifiers, identifier_tokens, source_strings
from compaction.summarizers._extract import context_snippet, split_sentences, truncate
from compaction.summarizers._sections import parse_sections
from compaction.summarizers._tools import last_meaningful_line
from compaction.summarizers.extractive import ExtractiveSummarizer

# ------------------------------------------------------------------------------------------------
# The checker itself
# ------------------------------------------------------------------------------------------------


def test_identifier_tokens_kinds() -> None:
    text = (
        "see /pydicom__pydicom/pydicom/dataset.py and https://github.com/a__b/c?x=1, call "
        "super().__init__(**kwargs) then a__b and MAX_SIZE; run `pytest -x --lf`; commit 3f9a2c1 for PAY-1432"
    )
    tokens = identifier_tokens(text)
    for expected in (
        "/pydicom__pydicom/pydicom/dataset.py",
        "https://github.com/a__b/c?x=1",
        "super().__init__",
        "a__b",
        "MAX_SIZE",
        "-x",
        "--lf",
        "3f9a2c1",
        "PAY-1432",
    ):
        assert expected in tokens
    assert "e.g" not in identifier_tokens("e.g. i.e. plain words")


def test_altered_identifiers_exact_cases() -> None:
    source = [
        "Open /pydicom__pydicom/pydicom/dataset.py and /marshmallow-code__marshmallow/src/fields.py;"
        " it calls super().__init__(**kwargs)."
    ]
    shown = (
        "Edited /pydicompydicom/pydicom/dataset.py and /marshmallow-codemarshmallow/src/fields.py: super().init(kwargs)"
    )
    assert altered_identifiers(shown, source) == [
        "/pydicompydicom/pydicom/dataset.py",
        "/marshmallow-codemarshmallow/src/fields.py",
        "super().init",
    ]
    assert altered_identifiers("see `/pydicom__pydicom/pydicom/dataset.py`, **done**", source) == []


def test_cut_tokens_and_redaction() -> None:
    source = ["open src/app/main.py with token=sk-proj-abcdefghijklmnopqrstuvwxyz0123 at https://x.io/a_b/c"]
    # A partial path shown as if whole is an alteration; marked with an ellipsis it is a cut.
    assert altered_identifiers("open src/app/ma", source) == ["src/app/ma"]
    assert altered_identifiers("open src/app/ma...", source) == []
    assert altered_identifiers("open src/app/ma\u2026", source) == []
    assert altered_identifiers("open ...app/main.py", source) == []
    # A relative tail of a path, and a path followed by its line number, are whole tokens.
    assert altered_identifiers("app/main.py", source) == []
    assert altered_identifiers("x.py:12", ["src/x.py:12: error"]) == []
    # The placeholder is not an identifier; the URL beside it is checked as a cut.
    assert altered_identifiers("token=[REDACTED:token] at https://x.io/a_b/[REDACTED]", source) == []
    assert altered_identifiers("https://x.io/a_c/[REDACTED]", source) == ["https://x.io/a_c/"]


# ------------------------------------------------------------------------------------------------
# The exact defects of the cleaning
# ------------------------------------------------------------------------------------------------


def test_split_sentences_keeps_dunders_and_double_underscores() -> None:
    text = (
        "The bug is in /pydicom__pydicom/pydicom/dataset.py where super().__init__(**kwargs) is called. "
        "Also see /marshmallow-code__marshmallow/src/marshmallow/fields.py and a__b."
    )
    joined = " ".join(split_sentences(text))
    assert "/pydicom__pydicom/pydicom/dataset.py" in joined
    assert "super().__init__(**kwargs)" in joined
    assert "/marshmallow-code__marshmallow/src/marshmallow/fields.py" in joined
    assert altered_identifiers(joined, [text]) == []


def test_split_sentences_still_removes_markdown_emphasis() -> None:
    assert split_sentences("**Important:** keep the __init__ **as is**.") == ["Important: keep the __init__ as is."]
    assert split_sentences("Use __very careful__ wording, f(*args, **kwargs) and a**b.") == [
        "Use very careful wording, f(*args, **kwargs) and a**b."
    ]


def test_unit_after_number_is_not_a_title() -> None:
    assert split_sentences("The query took 40 ms. Then the cache warmed up.") == [
        "The query took 40 ms.",
        "Then the cache warmed up.",
    ]
    assert split_sentences("I spoke to Ms. Smith about it.") == ["I spoke to Ms. Smith about it."]


def test_single_initial_is_not_a_sentence_end() -> None:
    assert split_sentences("The report is by A. Datum and it is long.") == ["The report is by A. Datum and it is long."]


def test_truncate_marks_a_cut_inside_a_token() -> None:
    text = "see " + "/very/long/path/" * 10 + "file.py now"
    out = truncate(text, 60)
    assert len(out) <= 60
    assert altered_identifiers(out, [text]) == []
    # An open code span cut in the middle: the cut is marked inside it, not closed over a partial path.
    code = "ran `pytest /very/long/path/to/tests/test_something_quite_long.py -x` ok"
    out = truncate(code, 40)
    assert len(out) <= 40
    assert altered_identifiers(out, [code]) == []


def test_snippet_starting_mid_token_is_marked() -> None:
    text = (
        "prefix "
        + "x" * 5
        + "/aaaaaaaaaa/bbbbbbbbbbbb/cccccccccccc/dddddddddd/eeeeeeee/ffff/file.py ID PAY-12 "
        + "y" * 90
    )
    start = text.index("PAY-12")
    snippet = context_snippet(text, start, "PAY-12")
    assert "PAY-12" in snippet
    assert altered_identifiers(snippet, [text]) == []


def test_decoration_strip_keeps_dunders() -> None:
    assert last_meaningful_line("ok\n__init__.py __main__") == "__init__.py __main__"
    assert last_meaningful_line("===== 3 passed in 0.1s =====") == "3 passed in 0.1s"
    assert last_meaningful_line("--dry-run done") == "--dry-run done"


def test_parse_sections_keeps_bold_markers_inside_tokens() -> None:
    text = "## 1. Goals and constraints\n- keep **kwargs in f(**kwargs) and **bold** words\n- #88 and C#"
    lines = parse_sections(text)[0][0]
    assert lines[0] == "keep **kwargs in f(**kwargs) and bold words"
    assert altered_identifiers("\n".join(lines), [text]) == []


# ------------------------------------------------------------------------------------------------
# The property
# ------------------------------------------------------------------------------------------------

_NAMES = st.sampled_from(
    [
        "__init__",
        "__dunder__",
        "__main__",
        "a__b",
        "foo_bar__baz",
        "_private",
        "MAX_SIZE",
        "os.path.join",
        "self.__dict__",
        "super().__init__",
        "pydicom__pydicom",
        "marshmallow-code__marshmallow",
        "x_",
        "__all__",
    ]
)
_WORDS = st.sampled_from(
    ["the", "fix", "bug", "in", "We", "Then", "ok", "A.", "Datum", "took", "40", "ms.", "Ms.", "e.g.", "done."]
)
_PUNCT = st.sampled_from(["*", "_", "**", "__", "`", "~", "#", "|", "-", "--", ">", ".", ",", ":", "(", ")", "'"])


@st.composite
def _path(draw: st.DrawFn) -> str:
    parts = draw(
        st.lists(st.one_of(_NAMES, st.sampled_from(["src", "tests", "lib", "a_b", "x__y"])), min_size=1, max_size=8)
    )
    ext = draw(st.sampled_from([".py", ".md", "", "/", ".json"]))
    lead = draw(st.sampled_from(["/", "./", "", "/workspace/"]))
    return lead + "/".join(p.replace("().", "_").replace(".", "_") for p in parts) + ext


@st.composite
def _url(draw: st.DrawFn) -> str:
    return "https://github.com/" + draw(_path()).lstrip("./") + draw(st.sampled_from(["", "#L12", "?q=a__b"]))


@st.composite
def _token(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 9))
    if kind <= 1:
        return draw(_path())
    if kind == 2:
        return draw(_url())
    if kind == 3:
        name = draw(_NAMES)
        return draw(st.sampled_from([f"{name}(**kwargs)", f"`{name}`", f"**{name}**", f"_{name}_", f"*{name}*", name]))
    if kind == 4:
        return draw(_PUNCT) + draw(_WORDS) + draw(_PUNCT)
    if kind == 5:
        return draw(st.sampled_from(["--dry-run", "-x", "**kwargs", "*args", "3f9a2c1e", "PAY-1432", "#12"]))
    return draw(_WORDS)


@st.composite
def _line(draw: st.DrawFn) -> str:
    words = " ".join(draw(st.lists(_token(), min_size=1, max_size=14)))
    joiner = draw(st.sampled_from(["", "", "", "- ", "* ", "1. ", "## ", "> ", "| ", "**", "__", "    "]))
    line = joiner + words
    if joiner == "| ":
        line += " | " + draw(_token()) + " |"
    elif joiner in ("**", "__"):
        line += joiner
    return line


@st.composite
def _text(draw: st.DrawFn) -> str:
    lines = draw(st.lists(_line(), min_size=1, max_size=6))
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), "```python\n" + draw(_line()) + "\n```")
    if draw(st.booleans()):
        lines.insert(0, "| a | b |\n|---|---|")
    return "\n".join(lines)


@st.composite
def _session(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    turns = draw(st.integers(2, 6))
    for t in range(turns):
        messages.append({"role": "user", "content": draw(_text())})
        for c in range(draw(st.integers(0, 2))):
            call_id = f"call_{t}_{c}"
            if draw(st.booleans()):
                name, args = "bash", {"command": "cd /repo && " + draw(_line()).replace("\n", " ")}
            else:
                name, args = draw(st.sampled_from(["edit_file", "read_file"])), {"path": draw(_path())}
                if name == "edit_file":
                    args["new_string"] = draw(_text())
            messages.append(
                {
                    "role": "assistant",
                    "content": draw(st.one_of(st.none(), _text())),
                    "tool_calls": [
                        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                    ],
                }
            )
            result = draw(_text())
            if draw(st.booleans()):
                result = "Traceback (most recent call last):\n" + result + "\nAttributeError: " + draw(_line())
            messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
        messages.append({"role": "assistant", "content": draw(_text())})
    return messages


def _strings(value: Any) -> Iterator[str]:
    return source_strings(value)


def sources_of(messages: Sequence[Mapping[str, Any]], *extra: str) -> list[str]:
    return [*(s for m in messages for s in _strings(m)), *extra]


@given(_session())
def test_extractive_summary_alters_no_identifier(messages: list[dict[str, Any]]) -> None:
    canonical = to_canonical(messages)
    summary = ExtractiveSummarizer().summarize_messages(canonical.messages, max_tokens=1_500)
    assert altered_identifiers(summary, sources_of(messages)) == []


@given(_session())
def test_compactor_alters_no_identifier(messages: list[dict[str, Any]]) -> None:
    compactor = Compactor("gpt-4o", None, CompactionConfig(window=16_000, keep_recent_messages=2))
    result = compactor.compact(messages)
    shown = "\n".join(s for m in result.messages for s in _strings(m) if "CONTEXT SUMMARY" in s or "Artifacts" in s)
    assert altered_identifiers(shown, sources_of(messages, *result.archive)) == []


def test_property_sessions_compact() -> None:
    """The compactor test is not vacuous: a generated session of this size is compacted."""
    messages = [{"role": "system", "content": "x"}]
    for i in range(4):
        messages.append({"role": "user", "content": f"fix /pydicom__pydicom/pydicom/f{i}.py " + "word " * 200})
        messages.append(
            {"role": "assistant", "content": f"edited super().__init__(**kwargs) in a__b_{i} " + "ok " * 200}
        )
    result = Compactor("gpt-4o", None, CompactionConfig(window=16_000, keep_recent_messages=2)).compact(messages)
    assert result.compacted
    shown = "\n".join(s for m in result.messages for s in _strings(m))
    assert altered_identifiers(shown, sources_of(messages, *result.archive)) == []


@pytest.mark.parametrize("text", ["**kwargs and __init__", "a__b", "`x__y` *a* _b_"])
def test_tokens_of_originals_are_never_altered(text: str) -> None:
    assert altered_identifiers(text, [text]) == []
