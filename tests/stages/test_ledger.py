"""Tests for compaction.stages.ledger: collecting and rendering the artifact ledger."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.stages.ledger import (
    ArtifactLedger,
    LedgerItem,
    ToolFailure,
    carry_forward,
    collect_artifacts,
    render_ledger,
)
from compaction.transcript import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

OPENAI_KEY = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2


def user(mid: str, text: str) -> Message:
    return Message(role="user", id=mid, parts=(TextPart(text=text),))


def assistant(mid: str, text: str = "", *calls: tuple[str, str, dict[str, Any] | str]) -> Message:
    parts: list[Any] = [TextPart(text=text)] if text else []
    for call_id, name, args in calls:
        arguments = args if isinstance(args, str) else json.dumps(args)
        parts.append(ToolCallPart(id=call_id, name=name, arguments=arguments))
    return Message(role="assistant", id=mid, parts=tuple(parts))


def result(mid: str, call_id: str, content: str, is_error: bool | None = None) -> Message:
    return Message(role="tool", id=mid, parts=(ToolResultPart(call_id=call_id, content=content, is_error=is_error),))


def values(items: tuple[LedgerItem, ...]) -> list[str]:
    return [i.value for i in items]


def test_files_from_argument_keys_text_and_results() -> None:
    msgs = [
        user("u1", "Please fix docs/guide.md"),
        assistant(
            "a1",
            "",
            ("c1", "read_file", {"path": "src/a.py"}),
            ("c2", "edit", {"file_path": "src/b.py", "old": "x", "new": "y"}),
            ("c3", "multi_edit", {"edits": [{"filename": "README"}, {"target": "lib/c.ts"}]}),
            ("c4", "grep", {"paths": ["tests/", "conftest.py"], "pattern": "foo"}),
        ),
        result("t1", "c1", "1: import os\n2: from pkg.util import x  # see pkg/util.py"),
        result("t2", "c2", "ok"),
        result("t3", "c3", "ok"),
        result("t4", "c4", "tests/test_x.py:3: foo"),
    ]
    ledger = collect_artifacts(msgs)
    assert values(ledger.files) == [
        "tests/test_x.py",
        "pkg/util.py",
        "conftest.py",
        "tests/",
        "lib/c.ts",
        "README",
        "src/b.py",
        "src/a.py",
        "docs/guide.md",
    ]
    assert ledger.files[0].last_seen == 5
    assert ledger.files[-1].last_seen == 0


def test_re_seen_item_moves_to_front_with_new_index() -> None:
    msgs = [user("u1", "look at src/a.py and src/b.py"), user("u2", "now src/a.py again")]
    ledger = collect_artifacts(msgs)
    assert ledger.files == (LedgerItem("src/a.py", 1), LedgerItem("src/b.py", 0))


def test_urls_and_identifiers() -> None:
    msgs = [
        user("u1", "Ticket PAY-1432, see https://jira.example.com/browse/PAY-1432"),
        assistant("a1", "", ("c1", "fetch", {"url": "https://api.example.com/v1/items?id=7"})),
        result("t1", "c1", "request req_01HXYZ8K2M3N4P5Q -> commit 3f9a2c1b"),
    ]
    ledger = collect_artifacts(msgs)
    assert values(ledger.urls) == ["https://api.example.com/v1/items?id=7", "https://jira.example.com/browse/PAY-1432"]
    assert values(ledger.identifiers) == ["3f9a2c1b", "req_01HXYZ8K2M3N4P5Q", "PAY-1432"]


def test_commands() -> None:
    msgs = [
        assistant(
            "a1",
            "",
            ("c1", "Bash", {"command": "pytest -x tests/test_io.py"}),
            ("c2", "shell", {"command": ["bash", "-lc", "git status"]}),
            ("c3", "execute_command", {"cmd": "npm run build\nnpm test"}),
            ("c4", "search", {"command": "not a shell"}),  # not a command tool
        ),
        result("t1", "c1", "$ pytest -x tests/test_io.py\n1 passed"),
        result("t2", "c2", "clean"),
        result("t3", "c3", "$ make lint\nok"),
        result("t4", "c4", "none"),
    ]
    ledger = collect_artifacts(msgs)
    assert values(ledger.commands) == ["make lint", "pytest -x tests/test_io.py", "npm run build …", "git status"]
    assert "tests/test_io.py" in values(ledger.files)


def test_errors_and_tool_failures() -> None:
    long_line = "ValueError: " + "v" * 400
    msgs = [
        assistant("a1", "", ("c1", "bash", {"command": "python run.py"}), ("c2", "read_file", {"path": "x.txt"})),
        result("t1", "c1", f'Traceback (most recent call last):\n  File "run.py", line 3\n{long_line}\nexit code 1'),
        result("t2", "c2", "file not found: x.txt", is_error=True),
        user("u1", "I also saw this:\nModuleNotFoundError: No module named 'yaml'"),
        assistant("a2", "The TypeError is fixed."),  # assistants only talk about errors
    ]
    ledger = collect_artifacts(msgs)
    trimmed = long_line[:199] + "…"
    assert values(ledger.errors) == [
        "ModuleNotFoundError: No module named 'yaml'",
        "file not found: x.txt",
        "exit code 1",
        trimmed,
        "Traceback (most recent call last):",
    ]
    assert all(len(e) <= 200 for e in values(ledger.errors))
    assert ledger.tool_failures == (
        ToolFailure("read_file", "c2", "file not found: x.txt", 2),
        ToolFailure("bash", "c1", "Traceback (most recent call last):", 1),
    )


def test_successful_results_are_not_failures() -> None:
    msgs = [assistant("a1", "", ("c1", "bash", {"command": "true"})), result("t1", "c1", "done\nexit code 0")]
    ledger = collect_artifacts(msgs)
    assert ledger.tool_failures == ()
    assert ledger.errors == ()


def test_one_result_cannot_flood_the_ledger() -> None:
    listing = "\n".join(f"./src/file{i}.py" for i in range(500))
    msgs = [assistant("a1", "", ("c1", "bash", {"command": "find ."})), result("t1", "c1", listing)]
    ledger = collect_artifacts(msgs)
    assert len(ledger.files) == 50
    assert ledger.files[0].value == "./src/file499.py"  # the last lines of the output, newest first
    assert ledger.files[-1].value == "./src/file450.py"


def test_ignores_reasoning_and_bad_json_arguments() -> None:
    msgs = [
        Message(role="assistant", id="a1", parts=(ReasoningPart(block={"thinking": "maybe src/secret_plan.py"}),)),
        assistant("a2", "", ("c1", "read", "{not json: src/z.py")),
        result("t1", "c1", "error: bad arguments"),
    ]
    ledger = collect_artifacts(msgs)
    assert values(ledger.files) == ["src/z.py"]


def test_deterministic() -> None:
    msgs = [user("u1", "fix src/a.py for PAY-1"), assistant("a1", "", ("c1", "bash", {"command": "ls"}))]
    assert collect_artifacts(msgs) == collect_artifacts(list(msgs))
    assert collect_artifacts([]) == ArtifactLedger()


# --- rendering -------------------------------------------------------------------------------


def sample() -> ArtifactLedger:
    msgs = [
        user("u1", "Fix PAY-1432 in src/pay/charge.py, see https://docs.example.com/pay"),
        assistant("a1", "", ("c1", "bash", {"command": "pytest tests/test_charge.py"})),
        result("t1", "c1", "FAILED tests/test_charge.py::test_refund - KeyError: 'amount'\nexit code 1"),
        assistant("a2", "", ("c2", "read_file", {"path": "src/pay/refund.py"})),
        result("t2", "c2", "def refund(): ..."),
    ]
    return collect_artifacts(msgs)


def test_render_lists_only_missing_items_most_recent_first() -> None:
    summary = "We are fixing PAY-1432 in src/pay/charge.py; ran pytest tests/test_charge.py."
    out = render_ledger(sample(), summary_text=summary, max_tokens=1000)
    assert out == "\n".join(
        [
            "## Artifacts",
            "Exact references from the compacted span, most recent first:",
            "Tool failures:",
            "- bash: FAILED tests/test_charge.py::test_refund - KeyError: 'amount'",
            "Files (tool-call arguments):",
            "- src/pay/refund.py",
            "URLs (named in the conversation):",
            "- https://docs.example.com/pay",
            "Errors:",
            "- exit code 1",
        ]
    )


def test_render_empty_when_summary_has_everything() -> None:
    ledger = ArtifactLedger(files=(LedgerItem("src/a.py", 0),), commands=(LedgerItem("make", 0),))
    assert render_ledger(ledger, summary_text="ran make on src/a.py", max_tokens=500) == ""
    assert render_ledger(ArtifactLedger(), summary_text="", max_tokens=500) == ""


def test_render_drops_oldest_first_and_says_how_many() -> None:
    files = tuple(LedgerItem(f"src/module_{i:02d}.py", i) for i in reversed(range(30)))
    ledger = ArtifactLedger(files=files)
    out = render_ledger(ledger, summary_text="", max_tokens=60)
    assert math.ceil(len(out) / 4) <= 60
    lines = out.splitlines()
    kept = [line[2:] for line in lines if line.startswith("- ")]
    assert kept == [f"src/module_{i:02d}.py" for i in range(29, 29 - len(kept), -1)]
    assert lines[-1] == f"({30 - len(kept)} more references omitted to fit the token budget.)"
    assert len(kept) >= 5


def test_render_too_small_budget_is_empty() -> None:
    ledger = ArtifactLedger(files=(LedgerItem("src/a.py", 0),))
    assert render_ledger(ledger, summary_text="", max_tokens=5) == ""


@given(st.integers(min_value=0, max_value=400))
def test_render_always_within_budget(max_tokens: int) -> None:
    out = render_ledger(sample(), summary_text="", max_tokens=max_tokens)
    assert math.ceil(len(out) / 4) <= max_tokens


def test_render_redacts_secrets() -> None:
    msgs = [
        assistant(
            "a1",
            "",
            (
                "c1",
                "bash",
                {"command": f"curl -H 'Authorization: Bearer abc123def456ghi' https://api.x.io/v1?key={OPENAI_KEY}"},
            ),
        ),
        result("t1", "c1", f"error: invalid key {OPENAI_KEY}", is_error=True),
        user("u1", f"my key is {OPENAI_KEY} and the db is https://bob:hunter22@db.local/app"),
    ]
    ledger = collect_artifacts(msgs)
    out = render_ledger(ledger, summary_text="", max_tokens=2000)
    assert OPENAI_KEY not in out
    assert "abc123def456ghi" not in out
    assert "hunter22" not in out
    assert "https://bob:[REDACTED]@db.local/app" in out
    assert "[REDACTED:bearer_token]" in out
    raw = render_ledger(ledger, summary_text="", max_tokens=2000, redact=False)
    assert OPENAI_KEY in raw


def test_secret_only_items_never_appear() -> None:
    ledger = ArtifactLedger(identifiers=(LedgerItem(OPENAI_KEY, 0), LedgerItem("PAY-9", 0)))
    out = render_ledger(ledger, summary_text="", max_tokens=500)
    assert "REDACTED" not in out
    assert out.endswith("- PAY-9")


@pytest.mark.parametrize("budget", [20, 35, 50, 80])
def test_render_budget_keeps_what_was_said_before_call_arguments(budget: int) -> None:
    out = render_ledger(sample(), summary_text="", max_tokens=budget)
    if out:
        assert "omitted" in out.splitlines()[-1]
        if "src/pay/refund.py" in out:  # read by the agent's call; the user named src/pay/charge.py
            assert "src/pay/charge.py" in out


def test_render_budget_keeps_the_newest_of_each_kind_longest() -> None:
    pay = [LedgerItem(f"src/pay/module_{i}.py", 10 + i) for i in reversed(range(8))]
    files = (*pay, LedgerItem("tests/test_a.py", 1))
    # tests/ has one file, src/pay eight: the lone one comes first, then src/pay newest first.
    priority = ["tests/test_a.py", *(f.value for f in pay)]
    counts = set()
    for budget in range(20, 120):
        out = render_ledger(ArtifactLedger(files=files), summary_text="", max_tokens=budget)
        kept = [line[2:] for line in out.splitlines() if line.startswith("- ")]
        assert set(kept) == set(priority[: len(kept)])
        assert kept == [f.value for f in files if f.value in kept]  # shown most recent first
        counts.add(len(kept))
    assert {1, 2, 3, 9} <= counts


def test_a_flood_of_one_kind_cannot_push_rarer_references_out() -> None:
    # A search page's 300 links (newest), and four links to other sites seen before them.
    rare = [
        "https://sentry.io/organizations/acme/issues/4201/",
        "https://github.com/acme/api/pull/77",
        "https://docs.acme.dev/runbooks/billing",
        "https://careers.fabrikam.com/jobs/7001-engineer",
    ]
    flood = [f"https://www.linkedin.com/jobs/view/{3900000000 + i}/" for i in range(300)]
    urls = tuple(LedgerItem(u, 10) for u in reversed(flood)) + tuple(LedgerItem(u, 1) for u in rare)
    out = render_ledger(ArtifactLedger(urls=urls), summary_text="", max_tokens=400)
    kept = [line[2:] for line in out.splitlines() if line.startswith("- ")]
    assert all(u in kept for u in rare)
    assert 20 < len(kept) < 304
    assert kept[0] == flood[-1]  # shown most recent first
    assert kept.index(rare[0]) > kept.index(flood[-1])


def test_code_and_location_lines_are_not_errors() -> None:
    grep = "\n".join(
        [
            'src/pay/charge.py:88:        raise KeyError(f"missing amount: {row!r}")',
            '116\t        raise TimeoutError("lock")',
            ">       raise ValueError(bad)",
            "tests/test_charge.py:41: KeyError",
            "E       KeyError: 'amount'",
            "FAILED tests/test_charge.py::test_refund - KeyError: 'amount'",
        ]
    )
    msgs = [assistant("a1", "", ("c1", "bash", {"command": "pytest"})), result("t1", "c1", grep + "\nexit code 1")]
    ledger = collect_artifacts(msgs)
    assert values(ledger.errors) == [
        "exit code 1",
        "FAILED tests/test_charge.py::test_refund - KeyError: 'amount'",
        "KeyError: 'amount'",
    ]
    assert ledger.tool_failures[0].error == "KeyError: 'amount'"


def test_carry_forward_keeps_references_the_earlier_summary_named() -> None:
    earlier = render_ledger(sample(), summary_text="", max_tokens=1000)
    summary = "## Progress\n- Deployed with `kubectl -n pay rollout restart deployment/pay-api`; see OPS-4410."
    ledger = carry_forward(collect_artifacts([user("u9", "now look at src/new.py")]), earlier, summary)
    assert values(ledger.files) == ["src/new.py", "src/pay/charge.py", "src/pay/refund.py", "tests/test_charge.py"]
    assert "src/pay/charge.py" in ledger.mentioned  # the heading said so
    assert "src/pay/refund.py" in ledger.called
    assert "OPS-4410" in values(ledger.identifiers)
    assert "kubectl -n pay rollout restart deployment/pay-api" in values(ledger.commands)
    assert {i.last_seen for i in ledger.identifiers if i.value == "OPS-4410"} == {-1}
    assert ledger.tool_failures[0].tool == "bash"
    assert ledger.tool_failures[0].error == "FAILED tests/test_charge.py::test_refund - KeyError: 'amount'"
    # The next summary drops them: the ledger lists them.
    out = render_ledger(ledger, summary_text="## Progress\n- moved on", max_tokens=1000)
    assert "- OPS-4410" in out
    assert "- kubectl -n pay rollout restart deployment/pay-api" in out


def test_what_the_conversation_said_is_not_lost_in_the_flood_of_its_kind() -> None:
    # The user names one link of a site whose links also flood a tool's output.
    named = "https://www.linkedin.com/jobs/view/3900000007/"
    listing = "\n".join(f"https://www.linkedin.com/jobs/view/{3900001000 + i}/" for i in range(50))
    msgs = [user("u1", f"Apply to {named} first.")]
    for n in range(6):
        msgs += [assistant(f"a{n}", "", (f"c{n}", "search", {"q": f"page {n}"})), result(f"t{n}", f"c{n}", listing)]
        listing = listing.replace("39000", f"39{n + 1}00")
    ledger = collect_artifacts(msgs)
    assert named in ledger.mentioned
    assert not any(u.value in ledger.mentioned for u in ledger.urls[:50])
    out = render_ledger(ledger, summary_text="", max_tokens=150)
    assert "omitted" in out
    assert named in out


def test_assistants_quoted_errors_are_collected_from_backticks() -> None:
    msgs = [
        assistant("a1", "It fails with `write_file failed: [Errno 13] Permission denied: 'out/x.md'`, retrying."),
        assistant("a2", "Some errors are expected here."),  # talk about errors, no quote
    ]
    ledger = collect_artifacts(msgs)
    assert values(ledger.errors) == ["write_file failed: [Errno 13] Permission denied: 'out/x.md'"]


def test_an_overlong_error_line_is_shown_from_the_error() -> None:
    line = "- Last action: " + "edit_file(path=src/a.py) -> ok; " * 8 + "ERROR AssertionError: expected 3, got 2"
    ledger = collect_artifacts([user("u1", line)])
    assert values(ledger.errors) == ["ERROR AssertionError: expected 3, got 2"]


def test_repeated_failures_are_one_line_with_a_count_that_carries_forward() -> None:
    msgs = []
    for i in range(4):
        msgs.append(assistant(f"a{i}", "", (f"c{i}", "bash", {"command": "make deploy"})))
        error = "Error: quota exceeded" if i < 3 else "Error: disk full"
        msgs.append(result(f"t{i}", f"c{i}", error, is_error=True))
    out = render_ledger(collect_artifacts(msgs), summary_text="", max_tokens=1000)
    failures = out.split("Tool failures:\n")[1].split("\n")[:2]
    assert failures == ["- bash: Error: disk full", "- bash (3 times): Error: quota exceeded"]
    assert "c0" not in out  # call ids mean nothing once the calls are summarized
    # The next compaction sees one more quota failure: the count adds up, the line stays one.
    more = [
        assistant("a9", "", ("c9", "bash", {"command": "make deploy"})),
        result("t9", "c9", "Error: quota exceeded", is_error=True),
    ]
    carried = carry_forward(collect_artifacts(more), out)
    again = render_ledger(carried, summary_text="", max_tokens=1000)
    assert "- bash (4 times): Error: quota exceeded" in again
    assert again.count("quota exceeded") == 1
    assert "- bash: Error: disk full" in again


def test_failure_lines_of_tools_with_spaces_in_their_names_are_carried() -> None:
    earlier = "## Artifacts\nTool failures:\n- web search (2 times): HTTP 429: slow down"
    failure = carry_forward(ArtifactLedger(), earlier).tool_failures[0]
    assert (failure.tool, failure.error, failure.times) == ("web search", "HTTP 429: slow down", 2)


def test_failure_lines_of_the_older_format_are_carried() -> None:
    earlier = "## Artifacts\nTool failures:\n- read_file (toolu_01A): file not found: x.txt"
    failure = carry_forward(ArtifactLedger(), earlier).tool_failures[0]
    assert (failure.tool, failure.call_id, failure.error, failure.times) == (
        "read_file",
        "toolu_01A",
        "file not found: x.txt",
        1,
    )


def test_references_singled_out_in_output_come_before_rows_of_listings() -> None:
    # Thirty build outputs that each name the commit they built, then ten `git log` listings of
    # commits of the same format (the newest output): the builds' commits are what mattered.
    def sha(i: int) -> str:
        return hashlib.sha1(str(i).encode()).hexdigest()

    msgs = []
    for n in range(30):
        msgs.append(assistant(f"a{n}", "", (f"b{n}", "bash", {"command": "make build"})))
        msgs.append(result(f"r{n}", f"b{n}", f"built from commit {sha(-n - 1)}\nok"))
    for n in range(10):
        log = "\n".join(f"commit {sha(i)}" for i in range(n * 100, n * 100 + 20))
        msgs += [assistant(f"g{n}", "", (f"l{n}", "bash", {"command": "git log"})), result(f"t{n}", f"l{n}", log)]
    ledger = collect_artifacts(msgs)
    assert sha(-1) not in ledger.listed
    assert sha(0) in ledger.listed
    out = render_ledger(
        ArtifactLedger(identifiers=ledger.identifiers, listed=ledger.listed), summary_text="", max_tokens=450
    )
    assert "omitted" in out
    assert all(sha(-n - 1) in out for n in range(30))


def test_categories_share_the_budget_by_length_not_by_count() -> None:
    # Short ids and long error lines, far more of each than fit: each category gets about the same
    # room, so more of the short ids are listed than of the long errors.
    ids = tuple(LedgerItem(f"PAY-{1000 + i}", 100 - i) for i in range(100))
    errors = tuple(
        LedgerItem(f"psycopg.errors.UniqueViolation: duplicate key violates constraint c{i} (id={i})", 100 - i)
        for i in range(100)
    )
    out = render_ledger(ArtifactLedger(identifiers=ids, errors=errors), summary_text="", max_tokens=500)
    lines = set(out.splitlines())
    kept_ids = [i.value for i in ids if f"- {i.value}" in lines]
    kept_errors = [e.value for e in errors if f"- {e.value}" in lines]
    assert len(kept_ids) > 3 * len(kept_errors) > 0
    id_chars, error_chars = sum(map(len, kept_ids)), sum(map(len, kept_errors))
    assert 0.7 < id_chars / error_chars < 1.4


def test_a_table_of_links_in_prose_is_a_listing_and_a_lone_link_is_said() -> None:
    table = "\n".join(f"| Role {i} | https://www.linkedin.com/jobs/view/{3900000000 + i}/ |" for i in range(6))
    lone = "https://www.glassdoor.co.uk/Reviews/fabrikam-Reviews-E1.htm"
    ledger = collect_artifacts([assistant("a1", f"Scores for today:\n{table}\nReviews: {lone}")])
    assert lone in ledger.mentioned
    assert lone not in ledger.listed
    rows = [u.value for u in ledger.urls if "linkedin" in u.value]
    assert len(rows) == 6
    assert set(rows) <= ledger.listed
    assert not set(rows) & ledger.mentioned


def test_arguments_of_calls_rank_after_what_the_conversation_said() -> None:
    # The user asks for six test runs; the agent then runs forty others of the same shape.
    asked = [f"pytest tests/test_vip_{i}.py -x" for i in range(6)]
    msgs = [user(f"u{i}", f"Also run `{c}` before you finish.") for i, c in enumerate(asked)]
    for i in range(40):
        msgs += [
            assistant(f"a{i}", "", (f"c{i}", "bash", {"command": f"pytest tests/test_{i}.py -x"})),
            result(f"t{i}", f"c{i}", "1 passed"),
        ]
    ledger = collect_artifacts(msgs)
    assert set(asked) <= ledger.mentioned
    assert "pytest tests/test_39.py -x" in ledger.called
    only_commands = ArtifactLedger(commands=ledger.commands, mentioned=ledger.mentioned, called=ledger.called)
    out = render_ledger(only_commands, summary_text="", max_tokens=110)
    kept = [line[2:] for line in out.splitlines() if line.startswith("- ")]
    assert "omitted" in out
    assert len(kept) < 12
    assert set(asked) <= set(kept)  # all of them, though older than the runs
    assert "Commands (tool-call arguments):\n- pytest tests/test_39.py -x" in out  # then the newest runs


def test_carried_items_keep_where_they_were_seen() -> None:
    # A first compaction had room for a git log's rows; the next one has less room and new items:
    # the carried rows go before the commit a build singled out, however often they are carried.
    def sha(i: int) -> str:
        return hashlib.sha1(str(i).encode()).hexdigest()

    built = sha(-1)
    msgs = [
        assistant("a0", "", ("b0", "bash", {"command": "make build"})),
        result("r0", "b0", f"built from commit {built}\nok"),
        assistant("a1", "", ("l1", "bash", {"command": "git log"})),
        result("t1", "l1", "\n".join(f"commit {sha(i)}" for i in range(20))),
    ]
    first = render_ledger(collect_artifacts(msgs), summary_text="", max_tokens=2000)
    assert f"Identifiers:\n- {built}" in first
    assert "Identifiers (rows of listings):" in first
    earlier = first
    shown_rows = []
    for step in range(3):  # carried again and again, with new references each time
        new = collect_artifacts([user(f"u{step}", f"Also check PAY-{step} and src/step_{step}.py")])
        ledger = carry_forward(new, earlier)
        rows = {sha(i) for i in range(20) if f"- {sha(i)}" in earlier}
        assert rows
        assert rows <= ledger.listed
        assert built not in ledger.listed
        shown_rows.append(len(rows))
        earlier = render_ledger(ledger, summary_text="", max_tokens=250)
        assert f"- {built}" in earlier
        assert f"- PAY-{step}" in earlier
        assert f"- src/step_{step}.py" in earlier
    assert shown_rows[0] == 20 > shown_rows[-1]  # the rows made room
    # An earlier ledger without source headings (an older version's) is read as tool output.
    old = "## Artifacts\nIdentifiers:\n- PAY-7"
    carried = carry_forward(ArtifactLedger(), old)
    assert values(carried.identifiers) == ["PAY-7"]
    assert not carried.mentioned
    assert not carried.listed


def test_tool_failures_and_errors_share_one_part_of_the_budget() -> None:
    files = tuple(LedgerItem(f"src/area_{i}/module.py", 300 - i) for i in range(100))
    errors = tuple(
        LedgerItem(f"ValueError: bad value {i} in the {i}th batch of the import", 200 - i) for i in range(100)
    )
    failures = tuple(
        ToolFailure("bash", f"c{i}", f"KeyError: 'key_{i}' while loading row {i}", 100 - i) for i in range(100)
    )
    ledger = ArtifactLedger(files=files, errors=errors, tool_failures=failures)
    out = render_ledger(ledger, summary_text="", max_tokens=800)
    lines = out.splitlines()
    file_chars = sum(len(line) for line in lines if line.startswith("- src/"))
    error_chars = sum(len(line) for line in lines if line.startswith(("- ValueError", "- bash")))
    assert "omitted" in lines[-1]
    assert 0.8 < file_chars / error_chars < 1.25  # not a third of the room for files, two for errors


def test_edits_and_failed_commands_are_collected_with_their_source() -> None:
    msgs = [
        assistant(
            "a1",
            "",
            ("c1", "str_replace_editor", {"command": "view", "path": "/repo/src/read_only.py"}),
            ("c2", "str_replace_editor", {"command": "str_replace", "path": "/repo/src/fixed.py", "old_str": "a"}),
            ("c3", "write_file", {"path": "notes/plan.md", "content": "plan"}),
            ("c4", "bash", {"command": "pytest tests/test_fixed.py -x"}),
            ("c5", "bash", {"command": "ls src"}),
        ),
        result("r1", "c1", "1\timport os"),
        result("r2", "c2", "ok"),
        result("r3", "c3", "written"),
        result("r4", "c4", "FAILED tests/test_fixed.py::test_a - AssertionError: 1 != 2", is_error=True),
        result("r5", "c5", "a.py b.py"),
    ]
    ledger = collect_artifacts(msgs)
    assert ledger.edited == {"/repo/src/fixed.py", "notes/plan.md"}
    assert ledger.failed == {"pytest tests/test_fixed.py -x"}
    out = render_ledger(ledger, summary_text="", max_tokens=2_000)
    assert "Files (edited):\n- notes/plan.md\n- /repo/src/fixed.py" in out
    assert "Commands (failed):\n- pytest tests/test_fixed.py -x" in out
    # Carried forward, the sources survive: an edited file stays edited, a failed command failed.
    carried = carry_forward(ArtifactLedger(), out)
    assert carried.edited == ledger.edited
    assert carried.failed == ledger.failed


def test_index_tier_named_edited_and_failed_before_what_tools_reported() -> None:
    # One edited file and one failed command among many references a tool merely printed: under a
    # small budget the index keeps the first two, whatever the categories.
    printed = tuple(LedgerItem(f"https://example.org/page/{i}", 100 + i) for i in range(40))
    paths = tuple(LedgerItem(f"build/out/artifact_{i}.o", 50 + i) for i in range(40))
    ledger = ArtifactLedger(
        urls=printed,
        files=(*paths, LedgerItem("src/core.py", 3)),
        commands=(LedgerItem("make test", 2),),
        edited=frozenset({"src/core.py"}),
        failed=frozenset({"make test"}),
    )
    out = render_ledger(ledger, summary_text="", max_tokens=60)
    assert "- src/core.py" in out
    assert "- make test" in out
    assert "omitted" in out


def test_render_measures_with_the_given_counter() -> None:
    files = tuple(LedgerItem(f"src/module_{i}.py", i) for i in range(100))
    ledger = ArtifactLedger(files=files)
    per_char = render_ledger(ledger, summary_text="", max_tokens=600, count=len)
    quarter = render_ledger(ledger, summary_text="", max_tokens=600)
    assert len(per_char) <= 600 < len(quarter) <= 2_400


_EXIT_WORDS = ["exit", "Exit", "EXITED", "exited with", " with", " exit", " code", " status", ":", "=", " ", "0", "1"]
_EXIT_WORDS += ["-3", "returned non-zero", "Returned Non-Zero", "non-zero exit", "NON-ZERO EXIT", "re", "\n", "aexit"]


@given(st.lists(st.sampled_from(_EXIT_WORDS), max_size=10), st.sampled_from(["", "\u0130 "]))
def test_nonzero_exit_answers_as_the_regex_scan(words: list[str], prefix: str) -> None:
    from compaction.stages._ledger_collect import _NONZERO_EXIT, _nonzero_exit

    text = prefix + "".join(words)
    assert _nonzero_exit(text) == (_NONZERO_EXIT.search(text) is not None)


def test_nonzero_exit_examples() -> None:
    from compaction.stages._ledger_collect import _nonzero_exit

    assert _nonzero_exit("build log\nProcess exited with exit code 2\n")
    assert _nonzero_exit("Command 'make' returned non-zero exit status 1.")
    assert not _nonzero_exit("exit code 0\nexit status: 0")
    assert not _nonzero_exit("reexit code 1")  # not a word: no match, as the regex says


@pytest.mark.parametrize(
    "module", ["compaction.stages.ledger", "compaction.stages._ledger_collect", "compaction.stages._ledger_items"]
)
def test_documented_examples_of_the_ledger_modules(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module} has no examples"
    assert result.failed == 0
