"""Files changed are files changed: the summary and the ledger list a file as modified only where an
edit, a write, a patch or a diff in the span touched it.

A SWE-bench-like session mentions module names (``django.db``), timing fragments (``134s/``) and
files it only reads inside commands that also write something; before, every path of a writing
command was listed as modified. Here exactly the files an edit tool, a shell write target (``>``,
``tee``, ``sed -i``, ``mv``/``cp`` destinations), or a patch's headers name are, in the summary's
"Files and code changes" section, its timeline and the ledger; on every real transcript of the
corpus, each file shown as modified is named by some tool call's arguments.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from benchmarks.corpus import load_corpus
from compaction.adapters import to_canonical
from compaction.fidelity import source_strings
from compaction.patterns import diff_paths, shell_written_paths
from compaction.stages.ledger import collect_artifacts
from compaction.summarizers.extractive import ExtractiveSummarizer
from compaction.transcript import Message, ToolCallPart

_MODIFIED_LINE = re.compile(r"^- `([^`]+)` - modified", re.MULTILINE)
_TIMELINE = re.compile(r"modified \d+ \(([^)]*)\)")

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


def _modified_in_summary(text: str) -> set[str]:
    listed = set(_MODIFIED_LINE.findall(text))
    for group in _TIMELINE.findall(text):
        listed.update(p.strip() for p in group.split(",") if p.strip() and p.strip() != "...")
    return listed


def _canonical(messages: list[dict[str, Any]]) -> tuple[Message, ...]:
    return to_canonical(messages, None).messages


def test_the_summary_lists_as_modified_exactly_the_files_changed() -> None:
    text = ExtractiveSummarizer().summarize_messages(_canonical(_session()), max_tokens=3000)
    assert _modified_in_summary(text) == CHANGED, text
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


CORPUS = load_corpus()


@pytest.mark.parametrize("name", [name for name, _, _ in CORPUS])
def test_every_file_shown_as_modified_is_named_by_a_call(name: str) -> None:
    _, messages, system = next(entry for entry in CORPUS if entry[0] == name)
    canonical = to_canonical(messages, system).messages
    called = [s for m in canonical for p in m.parts if isinstance(p, ToolCallPart) for s in source_strings(p.arguments)]
    text = ExtractiveSummarizer().summarize_messages(canonical, max_tokens=4000)
    for path in _modified_in_summary(text) | set(collect_artifacts(canonical).edited):
        # Named by a call as it is, or by its relative tail (the summary shows "reproduce.py",
        # created by that name, under the absolute path the tool's output gave it).
        tails = [path] + [path.split("/", k)[-1] for k in range(1, path.count("/") + 1)]
        assert any(tail in value for tail in tails for value in called), (name, path)
