"""Files changed are files changed: the summary and the ledger list a file as modified only where an
edit, a write, a patch or a diff in the span touched it.

A SWE-bench-like session mentions module names (``django.db``), timing fragments (``134s/``) and
files it only reads inside commands that also write something; before, every path of a writing
command was listed as modified. Here exactly the files an edit tool, a shell write target (``>``,
``tee``, ``sed -i``, ``mv``/``cp`` destinations), or a patch's headers name are, in the summary's
"Files and code changes" section, its timeline and the ledger. Edits that name their file
elsewhere count too: SWE-agent's ``edit N:M`` (the file last ``open``ed, as a text action or a
tool), ``str_replace_editor``/``create``/``apply_patch`` run as commands, aider's SEARCH/REPLACE
blocks (the file name on the line before the fence), Claude Code's Edit/Write calls, each checked
on real corpus lines. On every real transcript of the corpus, each file shown as modified is named
by an edit (:func:`benchmarks.corpus.modified_without_an_edit`, also run by ``bench_refs``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from benchmarks.corpus import load_corpus, modified_in_summary, modified_without_an_edit
from compaction.adapters import to_canonical
from compaction.patterns import OpenFile, diff_paths, search_replace_paths, shell_written_paths
from compaction.stages.ledger import collect_artifacts
from compaction.summarizers.extractive import ExtractiveSummarizer
from compaction.transcript import Message

PATCH = """diff --git a/django/db/models/sql/compiler.py b/django/db/models/sql/compiler.py
--- a/django/db/models/sql/compiler.py
+++ b/django/db/models/sql/compiler.py
@@ -10,3 +10,3 @@
-    return a
+    return b
"""


def _call(k: int, name: str, args: dict[str, Any], result: str) -> list[dict[str, Any]]:
    call = {"id": f"c{k}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{k}", "content": result},
    ]


def _session() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Fix the QuerySet.union() ordering bug in django/db/models/query.py."}
    ]
    steps: list[tuple[str, dict[str, Any], str]] = [
        ("bash", {"command": "cd /testbed && cat django/db/models/query.py | head -50"}, "class QuerySet:\n    pass"),
        (
            "bash",
            {
                "command": "cd /testbed && python -c 'from django.db import models; from django.conf import settings'"
                " > /tmp/import_check.txt 2>&1; cat /tmp/import_check.txt"
            },
            "Ran 12 tests in 134s/it\nOK",
        ),
        ("bash", {"command": "sed -i '134s/order_by/clear_ordering/' django/db/models/sql/query.py"}, ""),
        ("str_replace_editor", {"command": "view", "path": "/testbed/django/db/backends/utils.py"}, "def wrap(): ..."),
        (
            "str_replace_editor",
            {"command": "create", "path": "/testbed/reproduce.py", "file_text": "from django.db import models\n"},
            "File created successfully at: /testbed/reproduce.py",
        ),
        ("apply_patch", {"patch": PATCH}, "Applied."),
        ("write_file", {"cwd": "/testbed", "path": "notes/plan.md", "content": "1. fix union\n"}, "ok"),
        (
            "bash",
            {"command": "python -m pytest tests/queries/test_qs_combinators.py -x 2>&1 | tee pytest.log | tail -5"},
            "django.db.utils.OperationalError in self.db.wrap_database_errors\n1 passed in 134s",
        ),
        ("bash", {"command": "git diff django/db/models/sql/query.py && grep -rn union django/db/models/"}, "ok"),
    ]
    for k, (name, args, result) in enumerate(steps):
        messages += _call(k, name, args, result)
    messages.append({"role": "assistant", "content": "The union ordering is fixed in django/db/models/sql/query.py."})
    return messages


CHANGED = {
    "/tmp/import_check.txt",
    "django/db/models/sql/query.py",
    "/testbed/reproduce.py",
    "django/db/models/sql/compiler.py",
    "notes/plan.md",
    "pytest.log",
}


def _canonical(messages: list[dict[str, Any]]) -> tuple[Message, ...]:
    return to_canonical(messages, None).messages


def test_the_summary_lists_as_modified_exactly_the_files_changed() -> None:
    text = ExtractiveSummarizer().summarize_messages(_canonical(_session()), max_tokens=3000)
    assert modified_in_summary(text) == CHANGED, text
    # Files only read are listed, as read or used, never as modified.
    assert re.search(r"^- `/testbed/django/db/backends/utils.py` - read", text, re.MULTILINE), text
    for fragment in ("django.db", "django.conf", "134s/", "/testbed"):
        assert f"`{fragment}` - modified" not in text


def test_the_ledger_marks_as_edited_exactly_the_files_changed() -> None:
    ledger = collect_artifacts(_canonical(_session()))
    assert set(ledger.edited) == CHANGED
    assert "/testbed/django/db/backends/utils.py" in {item.value for item in ledger.files}


@pytest.mark.parametrize(
    ("command", "written"),
    [
        ("python -c 'import django.db' > out.txt", ["out.txt"]),
        ('python -c "print(1 > 0)"', []),
        ("sed -n '134,140p' a.py", []),
        ("sed -i.bak -e 's/a/b/' -e 's/c/d/' x.py y.py", ["x.py", "y.py"]),
        ("cp src/a.py /tmp/a.py && mv /tmp/a.py src/b.py", ["/tmp/a.py", "src/b.py"]),
        ("cat > src/new.py <<'EOF'\nx = 1 > 0\nEOF", ["src/new.py"]),
        ("git apply <<EOF\n" + PATCH + "EOF", ["django/db/models/sql/compiler.py"]),
        ("pytest -q 2>&1 | tee -a run.log", ["run.log"]),
        ("ls -la /testbed 2>/dev/null; echo $HOME > $OUT", []),
        ("git checkout main && git checkout -- a.py", ["a.py"]),
        ("sudo FOO=1 rm -f build/x.o", ["build/x.o"]),
        ("echo 'unterminated > x", []),
        ("str_replace_editor str_replace /testbed/a.py --old_str 'x = 1' --new_str 'x = 2'", ["/testbed/a.py"]),
        ("str_replace_editor view /testbed/a.py", []),
        ("create reproduce.py", ["reproduce.py"]),
        ('apply_patch "*** Begin Patch\n*** Update File: src/x.py\n@@\n-a\n+b\n*** End Patch"', ["src/x.py"]),
        ("edit -w notes.txt", []),
    ],
)
def test_shell_write_targets(command: str, written: list[str]) -> None:
    assert shell_written_paths(command) == written


def test_diff_headers() -> None:
    assert diff_paths(PATCH) == ["django/db/models/sql/compiler.py"]
    assert diff_paths("*** Begin Patch\n*** Add File: a/b.ts\n+x\n*** Delete File: c.md\n*** End Patch") == [
        "a/b.ts",
        "c.md",
    ]
    assert diff_paths("--- a/gone.py\n+++ /dev/null\n") == ["gone.py"]
    assert diff_paths("--- a summary of the plan ---\nnothing else") == []


CORPUS = {name: (messages, system) for name, messages, system in load_corpus()}


@pytest.mark.parametrize("name", list(CORPUS))
def test_every_file_shown_as_modified_is_named_by_an_edit(name: str) -> None:
    messages, system = CORPUS[name]
    assert modified_without_an_edit(messages, system) == []


def _edited(name: str) -> tuple[set[str], set[str]]:
    """What the ledger and the summary of corpus transcript ``name`` list as modified."""
    messages, system = CORPUS[name]
    canonical = to_canonical(messages, system).messages
    text = ExtractiveSummarizer().summarize_messages(canonical, max_tokens=4000)
    return set(collect_artifacts(canonical).edited), modified_in_summary(text)


def test_swe_agent_text_edits_change_the_file_last_opened() -> None:
    # "open src/marshmallow/fields.py 1474", then "edit 1475:1475 ... end_of_edit" in the code
    # block the turn ends with, answered by the terminal; "create reproduce.py" before.
    messages, _ = CORPUS["swe_agent_marshmallow_1867_default"]
    assert messages[18]["content"].rstrip().endswith("open src/marshmallow/fields.py 1474\n```")
    assert "edit 1475:1475" in messages[22]["content"]
    ledger, summary = _edited("swe_agent_marshmallow_1867_default")
    assert ledger == {"src/marshmallow/fields.py", "reproduce.py"}
    assert "src/marshmallow/fields.py" in summary
    editor = OpenFile()
    assert editor.command("open src/marshmallow/fields.py 1474\n") == []
    body = messages[22]["content"].split("```\n")[-1].removesuffix("```")
    assert editor.command(body) == ["src/marshmallow/fields.py"]


@pytest.mark.parametrize(
    "name", ["swe_agent_marshmallow_1867_tools", "swe_agent_marshmallow_1867_tools_anthropic", "swe_agent_pydicom_1458"]
)
def test_edit_tools_without_a_path_change_the_open_file(name: str) -> None:
    # The "edit" tool ({"search": ..., "replace": ...}) and the text-mode "edit 287:295" name no
    # file: they change the one "open" chose.
    ledger, summary = _edited(name)
    opened = "pydicom/pixel_data_handlers/numpy_handler.py" if "pydicom" in name else "src/marshmallow/fields.py"
    assert opened in ledger
    assert opened in summary


def test_aider_search_replace_blocks_name_their_file_on_the_line_before() -> None:
    messages, _ = CORPUS["aider_history_2024_08_13"]
    reply = messages[84]["content"]
    assert "\nrepomap.py\n```python\n<<<<<<< SEARCH\n" in reply
    assert search_replace_paths(reply) == ["repomap.py"]
    ledger, summary = _edited("aider_history_2024_08_13")
    assert {"aider/repomap.py", "aider/coders/base_coder.py", "tmp.code-in-json.sh"} <= ledger
    assert {"aider/repomap.py", "aider/coders/base_coder.py"} <= summary
    # A user's message quoting a block is no edit, nor is prose that mentions one.
    assert search_replace_paths("See the <<<<<<< SEARCH marker in aider/io.py.") == []


def test_claude_code_edit_and_write_calls_change_their_file_path() -> None:
    ledger, summary = _edited("claude_code_spotter_4te_anthropic")
    root = "/home/USER/projects/spotter-worktrees/spotter-4te/"
    assert {root + "mix.exs", root + "lib/spotter/telemetry/otel.ex", root + "config/runtime.exs"} <= ledger
    assert "lib/spotter/telemetry/otel.ex" in summary or root + "lib/spotter/telemetry/otel.ex" in summary


def test_a_command_block_nobody_ran_is_no_edit() -> None:
    # A chat answer ending with a suggested command: no terminal output follows, nothing changed.
    messages = [
        {"role": "user", "content": "How do I drop the cache?"},
        {"role": "assistant", "content": "Remove the file:\n```\nrm build/cache.db\n```"},
        {"role": "user", "content": "Thanks, and how do I rebuild it?"},
    ]
    canonical = _canonical(messages)
    assert collect_artifacts(canonical).edited == set()
    text = ExtractiveSummarizer().summarize_messages(canonical, max_tokens=1000)
    assert modified_in_summary(text) == set()
    relayed = [*messages[:2], {"role": "user", "content": "(Current directory: /repo)\nbash-$"}]
    assert collect_artifacts(_canonical(relayed)).edited == {"build/cache.db"}
