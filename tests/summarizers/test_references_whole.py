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
from compaction.adapters import to_canonical
from compaction.fidelity import fragment_references, identifier_tokens
from compaction.patterns import find_paths, find_references, truncate
from compaction.stages._ledger_collect import MAX_ARGUMENT_SCAN_CHARS, _trim, collect_artifacts
from compaction.stages.chunk import fit_message
from compaction.summarizers._extract import context_snippet, find_ids
from compaction.summarizers._extract import find_paths as summary_paths
from compaction.tokens import counter_for_model

TRACEBACK = """Traceback (most recent call last):
  File "/testbed/django/db/backends/utils.py", line 84, in _execute
    with self.db.wrap_database_errors:
  File "/testbed/django/db/models/sql/compiler.py", line 1140, in execute_sql
    cursor.execute(sql, params)
django.db.utils.OperationalError: no such column: analytics_report.owner_id"""

COUNTER = counter_for_model("gpt-4o")
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
    summarizer_refs = [v for _, v in summary_paths(text)] + [v for _, _, v in find_ids(text)]
    paths, urls, ids = find_references(text)
    for found in (summarizer_refs, paths + urls + ids):
        assert not_shown not in found
        assert fragment_references(" ".join(found), [text]) == [], found


def test_whole_references_are_still_found() -> None:
    text = "fixed d7f3a9b2 in src/app/query.py; see config.yaml and PAY-1432, commit 3f9a2c1."
    assert [v for _, v in summary_paths(text)] == ["src/app/query.py", "config.yaml"]
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


def test_a_name_whole_in_the_source_is_not_a_fragment_beside_a_longer_one() -> None:
    # Whole somewhere in the source, so whole: a line that also holds it inside a longer name (a
    # prefixed name, a backup file, a longer path) quotes both, it does not cut one out of the other.
    source = [
        "if remote_model_tuple == model_tuple: pass",
        "cp django/db/fields.py django/db/fields.py.bak",
        "AssertionError: '/var/t/tmp1' not found in {'/private/var/t/tmp1'}",
        "sed -i 's/a/b/' x.py; grep -r x --include='*.py'",
    ]
    shown = "\n".join(
        [
            "- we check `remote_model_tuple == model_tuple`",
            "- Command `cp django/db/fields.py django/db/fields.py.bak` run 1x",
            "- AssertionError: '/var/t/tmp1' not found in {'/private/var/t/tmp1'}",
            "- grep -r x --include='*.py' after sed -i",
        ]
    )
    assert fragment_references(shown, source) == []
    # A name only ever seen inside a longer one is still a fragment, wherever it is shown.
    assert fragment_references("- we check `remote_model`", source) == ["remote_model"]


def test_a_labelled_place_that_holds_the_reference_only_as_a_part_is_a_fragment() -> None:
    source = ["git log: d7f3a9b2 fix", "wrote analyzer-d7f3a9b2.md"]
    assert fragment_references("Hash `d7f3a9b2` in: wrote analyzer-d7f3a9b2.md", source) == ["d7f3a9b2"]
    assert fragment_references("Hash `d7f3a9b2` in: git log: d7f3a9b2 fix", source) == []
    # The place holds it whole beside a longer token: whole.
    both = ["'commit_hash': 'f4b1797-dirty, f4b1797'"]
    assert fragment_references("Hash `f4b1797` in: 'commit_hash': 'f4b1797-dirty, f4b1797'", both) == []


def test_an_abbreviation_the_source_wrote_with_an_ellipsis_is_not_a_cut() -> None:
    source = ['The error says "Unable to load file /tmp/x/src", not ".../__init__.py".']
    assert fragment_references("- .../__init__.py", source) == []
    assert fragment_references("- .../x/src", source) == [".../x/src"]


def test_a_cut_after_a_whole_reference_does_not_glue_the_mark_to_it() -> None:
    command = 'python -c "from django.conf import settings; if not settings.configured: settings.configure(DEBUG=True)"'
    for limit in range(20, len(command)):
        for cut in (truncate(command, limit), _trim(command, limit)):
            assert len(cut) <= limit, (limit, cut)
            assert fragment_references(cut, [command]) == [], (limit, cut)
    assert (
        truncate("cd /testbed && python test_rename_pk.py --verbose now", 44)
        == "cd /testbed && python test_rename_pk.py ..."
    )


def test_a_long_argument_is_scanned_without_cutting_a_reference() -> None:
    padding = "x = 1\n" * (MAX_ARGUMENT_SCAN_CHARS // 6)
    for shift in range(30):
        # The scanned head ends somewhere inside "schema_editor.create_model".
        script = padding[: MAX_ARGUMENT_SCAN_CHARS - shift - 1] + "\nschema_editor.create_model(Product)\n"
        ledger = collect_artifacts(
            to_canonical(
                [
                    {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "bash", "arguments": json.dumps({"command": script})},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                ]
            ).messages
        )
        files = [item.value for item in ledger.files]
        assert not any("schema_editor" in f for f in files), (shift, files)


def test_a_module_in_an_import_statement_is_not_a_file() -> None:
    text = "from django.db import models\nimport django.conf\npython -c 'import os; import app.conf'"
    assert find_paths(text) == []
    # A file after "from" in prose, or a data file opened by the code, is still a file.
    assert find_paths("copied from config.yaml; open('data.db')") == ["config.yaml", "data.db"]


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


def test_a_message_cut_to_fit_the_summarizer_keeps_whole_lines() -> None:
    """A message larger than a chunk keeps its two ends; each end stops or starts at a line break,
    so no path of a grep listing is cut in two (the summarizer would show the piece as a file)."""
    rows = [
        f"| `file:///Users/dev/pub/nyord_vpn/.specstory/history/2025-02-22_22%3A27-s{i}.md` | L{i} |"
        for i in range(400)
    ]
    text = "\n".join(rows)
    message = to_canonical([{"role": "assistant", "content": text}]).messages[0]
    fitted = fit_message(message, 1_500, COUNTER.count_message)
    kept = fitted.text
    assert "characters cut to fit the summarizer" in kept
    head, _, tail = kept.partition("\n[... ")
    tail = tail.split("...]\n", 1)[1]
    assert rows[0] in head
    assert set(head.splitlines()) <= set(rows)
    assert set(tail.splitlines()) <= set(rows)


def test_a_shebang_names_no_file_of_the_session() -> None:
    """A script's shebang names its interpreter, not a file the session works on."""
    script = "cat > check.py << 'EOF'\n#!/usr/bin/env python\nimport sys\nEOF\npython check.py /etc/hosts"
    assert [path for _, path in summary_paths(script)] == ["check.py", "check.py", "/etc/hosts"]
    assert [path for _, path in summary_paths("/etc/hosts is read #!")] == ["/etc/hosts"]


def test_the_ledgers_paths_leave_a_shebang_out_too() -> None:
    script = "cat > check.py << 'EOF'\n#!/usr/bin/env python\nimport sys\nEOF\npython check.py /etc/hosts"
    assert find_paths(script) == ["check.py", "/etc/hosts"]
