"""References are whole: every identifier the summary or the ledger shows as a reference is a whole
token of the source.

Not a prefix of a longer dotted name (``self.db`` of ``self.db.wrap_database_errors`` in a
traceback, ``django.db.models.sql`` of ``from django.db.models.sql.query import Query``), not cut
out of a file name (``d7f3a9b2`` of ``analyzer-d7f3a9b2.md``), never shown cut with a glued
ellipsis (``https://cloud.google.com/docs/authenticati...``). The extraction, the cutting of long
lines and :func:`compaction.fidelity.fragment_references`, which checks them, on a session made of
those cases and on every transcript of the corpus.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from benchmarks.corpus import altered, fragments, load_corpus
from compaction import CompactionConfig, Compactor
from compaction.fidelity import fragment_references, identifier_tokens
from compaction.patterns import find_references, truncate
from compaction.stages._ledger_collect import _trim
from compaction.summarizers._extract import context_snippet, find_ids, find_paths

TRACEBACK = """Traceback (most recent call last):
  File "/testbed/django/db/backends/utils.py", line 84, in _execute
    with self.db.wrap_database_errors:
  File "/testbed/django/db/models/sql/compiler.py", line 1140, in execute_sql
    cursor.execute(sql, params)
django.db.utils.OperationalError: no such column: analytics_report.owner_id"""

LONG_URL = "https://cloud.google.com/docs/authentication/provide-credentials-adc#how-to-configure-local-development"


@pytest.mark.parametrize(
    ("text", "not_shown"),
    [
        (TRACEBACK, "self.db"),
        ("from django.db.models.sql.query import Query", "django.db.models.sql"),
        ("from django.db.models.sql.query import Query", "django.db"),
        ("report written to reports/analyzer-d7f3a9b2.md", "d7f3a9b2"),
        ("report written to analyzer-d7f3a9b2.md", "d7f3a9b2"),
        ("cp config.yaml.example settings/", "config.yaml"),
        ("see PAY-1432.md and PAY-77-draft", "PAY-77"),
    ],
)
def test_extraction_never_returns_part_of_a_token(text: str, not_shown: str) -> None:
    summarizer_refs = [v for _, v in find_paths(text)] + [v for _, _, v in find_ids(text)]
    paths, urls, ids = find_references(text)
    for found in (summarizer_refs, paths + urls + ids):
        assert not_shown not in found
        assert fragment_references(" ".join(found), [text]) == [], found


def test_whole_references_are_still_found() -> None:
    text = "fixed d7f3a9b2 in src/app/query.py; see config.yaml and PAY-1432, commit 3f9a2c1."
    assert [v for _, v in find_paths(text)] == ["src/app/query.py", "config.yaml"]
    assert [v for _, _, v in find_ids(text)] == ["d7f3a9b2", "PAY-1432", "3f9a2c1"]
    assert find_references(text) == (["src/app/query.py", "config.yaml"], [], ["d7f3a9b2", "PAY-1432", "3f9a2c1"])


@pytest.mark.parametrize("limit", [20, 40, 60, 90, 120])
def test_cutting_a_line_drops_a_reference_whole(limit: int) -> None:
    text = f"User asked: configure ADC as in {LONG_URL} then rerun src/app/very_long_module_name_for_tests.py now"
    for cut in (truncate(text, limit), _trim(text, limit)):
        assert len(cut) <= limit
        assert fragment_references(cut, [text]) == [], cut
        for token in identifier_tokens(cut):
            assert token in identifier_tokens(text), (cut, token)


def test_a_context_snippet_never_starts_or_ends_inside_a_token() -> None:
    text = "x" * 60 + "/aaaaaaaa/bbbbbbbbbb/cccccccccc/file.py PAY-12 " + "y/" * 60 + "z.py tail"
    snippet = context_snippet(text, text.index("PAY-12"), "PAY-12")
    assert "PAY-12" in snippet
    assert fragment_references(snippet, [text]) == []


def test_the_checker_catches_each_kind_of_fragment() -> None:
    source = [TRACEBACK, "from django.db.models.sql.query import Query", "wrote analyzer-d7f3a9b2.md", LONG_URL]
    assert fragment_references("File `self.db` - seen in tool output", source) == ["self.db"]
    assert fragment_references("`django.db.models.sql` - mentioned", source) == ["django.db.models.sql"]
    assert fragment_references("Hash `d7f3a9b2` in: wrote analyzer-d7f3a9b2.md", source) == ["d7f3a9b2"]
    assert fragment_references("see https://cloud.google.com/docs/authenticati...", source) == [
        "https://cloud.google.com/docs/authenticati..."
    ]
    # Whole tokens, a path's relative tail, a sentence's full stop, a redacted secret: no fragment.
    whole = (
        "django/db/models/sql/compiler.py, models/sql/compiler.py, analyzer-d7f3a9b2.md. self.db.wrap_database_errors"
    )
    assert fragment_references(whole, source) == []
    assert fragment_references("token=[REDACTED:token] at https://x.io/a_b/[REDACTED]", ["https://x.io/a_b/sk-1"]) == []


def _call(k: int, name: str, args: dict[str, Any], result: str) -> list[dict[str, Any]]:
    call = {"id": f"c{k}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    return [
        {"role": "assistant", "content": f"Step {k}: checking.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{k}", "content": result},
    ]


def _session() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": f"Set up ADC as described in {LONG_URL} and in the analyzer notes, then fix the "
            "OperationalError raised by the report query (see reports/analyzer-d7f3a9b2.md).",
        }
    ]
    outputs = [
        ("bash", {"command": "python manage.py test analytics"}, TRACEBACK + "\n" + "FAILED (errors=1)\n" * 3),
        (
            "bash",
            {"command": "grep -rn 'import Query' django/"},
            "django/db/models/query.py:12:from django.db.models.sql.query import Query\n",
        ),
        ("bash", {"command": "ls reports"}, "analyzer-d7f3a9b2.md\nanalyzer-e81c02ff.md\nsummary.txt"),
        ("bash", {"command": "cat config.yaml.example"}, "owner_id: 12\nlink: " + LONG_URL + "\n"),
    ]
    for k in range(24):
        name, args, result = outputs[k % len(outputs)]
        messages += _call(k, name, args, result + "\n" + "padding line of output\n" * 40)
    messages.append({"role": "assistant", "content": "The column owner_id is missing; a migration adds it."})
    return messages


@pytest.mark.parametrize("window", [16_000, 32_000])
def test_a_session_of_fragment_traps_compacts_with_whole_references(window: int) -> None:
    result = Compactor("gpt-4o", None, CompactionConfig(window=window)).compact(copy.deepcopy(_session()))
    assert result.compacted
    assert fragments(result) == []
    assert altered(result) == []


CORPUS = load_corpus()


@pytest.mark.parametrize("window", [16_000, 32_000, 128_000])
def test_no_fragment_on_any_transcript_of_the_corpus(window: int) -> None:
    assert len(CORPUS) >= 11
    found: dict[str, list[str]] = {}
    for name, messages, system in CORPUS:
        config = CompactionConfig(window=window, keep_recent_messages=2)
        result = Compactor("gpt-4o", None, config).compact(copy.deepcopy(messages), system=copy.deepcopy(system))
        bad = fragments(result) + altered(result)
        if bad:
            found[name] = bad
    assert found == {}
