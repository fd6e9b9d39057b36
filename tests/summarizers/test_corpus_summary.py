"""What the offline summary says on every real transcript of ``tests/corpus/`` (short and long),
after one compaction and after a turn-by-turn replay through a ContextManager, at 32k and 128k:
no narration or progress meter among its decisions, constraints and pending work; the goal named
where the first user message is a task; questions for the user only where a user can answer;
every compaction fits and keeps its tool pairs; nothing crashes.
"""

from __future__ import annotations

import functools

import pytest

from benchmarks.corpus import corpus_source, load_corpus
from benchmarks.corpus_summary import (
    WINDOWS,
    Check,
    check_once,
    check_replay,
    first_message_is_task,
    goal_stated,
    interactive,
    noise,
    questions,
)
from compaction.adapters import to_canonical
from compaction.summarizers.extractive import ExtractiveSummarizer, task_goal, task_of_prompt

CORPUS = {name: (messages, system) for name, messages, system in load_corpus()}
MODES = {"once": check_once, "replay": check_replay}
CASES = [(name, window, mode) for name in CORPUS for window in WINDOWS for mode in MODES]
IDS = [f"{name}-{window // 1000}k-{mode}" for name, window, mode in CASES]
LONG = [name for name, (messages, _) in CORPUS.items() if len(messages) >= 200]


@functools.cache
def _check(name: str, window: int, mode: str) -> Check:
    messages, system = CORPUS[name]
    return MODES[mode](name, messages, system, window)


def test_the_corpus_holds_long_sessions_of_several_agents() -> None:
    assert len(LONG) >= 9  # 200+ messages; the 160-message Cursor session is long in tokens (130k)
    converters = {corpus_source(name)["converter"] for name in LONG}
    agents = {converter.split("_")[0] for converter in converters}
    assert {"aider", "mini", "claude", "cursor"} <= agents, agents
    assert any(name.endswith("_anthropic") for name in LONG)
    assert any(converter.endswith("_openai") for converter in converters)


@pytest.mark.parametrize(("name", "window", "mode"), CASES, ids=IDS)
def test_summary_states_what_happened(name: str, window: int, mode: str) -> None:
    check = _check(name, window, mode)
    assert not check.crash, check.crash
    assert check.unfit == 0
    assert check.pair_violations == 0
    assert check.noise == [], check.noise
    assert check.goal_missing == 0, "the goal is not named though the first user message is a task"
    if not interactive(name, CORPUS[name][0]):
        assert check.questions == 0, [q for s in check.summaries for q in questions(s)]


@pytest.mark.parametrize("name", LONG)
def test_long_sessions_compact_in_a_replay_at_32k(name: str) -> None:
    assert _check(name, 32_000, "replay").compactions >= 2


def test_the_checks_catch_what_they_look_for() -> None:
    block = (
        "## 1. Goals and constraints\n- (none recorded)\n\n"
        "## 3. Technical context and decisions\n"
        "- Counting objects: 100% (11/11), done. (in run_terminal_cmd output)\n"
        "- Let's run the tests again with the debug logs:\n"
        "- I'll keep the cache in Redis, because it must survive restarts.\n\n"
        "## 6. Open issues and pending tasks\n"
        "- Pending: Let me fix the remaining linting issues:\n"
        "- Question for the user: Would you like me to focus on fixing these remaining issues?\n"
        "- Pending: User asked: Let's keep the retries at three.\n"
        "- Pending: User asked: Collecting requests>=2.0 (from nyord-vpn)\n"
    )
    assert len(noise(block)) == 4  # the user's "Let's ..." is a request, not narration; a meter is noise from anyone
    assert not goal_stated(block)
    assert len(questions(block)) == 1


def test_the_goal_is_taken_from_a_task_outside_the_span() -> None:
    messages, system = CORPUS["mini_swe_agent_django_13964"]
    assert first_message_is_task(messages, system)
    task = next(m["content"] for m in messages if m["role"] == "user")
    goal = task_goal(task)
    assert goal is not None
    assert goal.split(".")[0] in " ".join(task.split())
    prompt = f"<task>\n{task}\n</task>\n\nConversation history:\n<history>\n...\n</history>"
    assert task_of_prompt(prompt) == task
    assert task_of_prompt("Conversation history:\n<history>\n<task>\nx\n</task>\n</history>") is None
    span = to_canonical(messages, system).messages[40:80]
    without = ExtractiveSummarizer().summarize_messages(span, max_tokens=2000)
    with_task = ExtractiveSummarizer().summarize_messages(span, max_tokens=2000, task=task)
    assert not goal_stated(without)
    assert goal_stated(with_task)


def test_a_task_pasted_among_log_lines_is_named_by_the_users_own_sentences() -> None:
    """A first message that is mostly a log reads as relayed output; the goal is still the user's
    sentences between its lines (what they ask), not a log line."""
    log = [
        f"[10:00:{k:02d}] DEBUG    worker.sync:run:{100 + k} - fetched batch {k} from https://api.example.org/v1/items"
        for k in range(60)
    ]
    log.insert(20, "—— Why does it fetch the same batch twice? Please cache the batches per run.")
    log.insert(45, "Establishing connection")
    goal = task_goal("\n".join(log))
    assert goal is not None
    assert "Why does it fetch the same batch twice?" in goal
    assert "DEBUG" not in goal
    assert "Establishing connection" not in goal


def _primary_request(summary: str) -> str:
    return next(line for line in summary.splitlines() if "Primary request: " in line).split("Primary request: ", 1)[1]


def test_the_goal_comes_from_the_task_block_not_the_standing_instructions() -> None:
    """A first message of standing instructions (a persona, a response format) with the task in a
    ``<task>`` block: the goal is the block's request, and the span's own first turn ("do it") is a
    later request, not the primary one."""
    messages, system = CORPUS["cursor_nyord_vpn_git_and_todo"]
    task = next(m["content"] for m in messages if m["role"] == "user")
    assert task.lstrip().startswith("<instructions>")
    goal = task_goal(task)
    assert goal is not None
    assert goal.startswith("Check git and update @TODO.md")
    canonical = to_canonical(messages, system).messages
    first = next(k for k, m in enumerate(canonical) if m.role == "user")
    span = canonical[first + 1 : first + 60]
    summary = ExtractiveSummarizer().summarize_messages(span, max_tokens=3000, task=task)
    assert _primary_request(summary).startswith("Check git and update @TODO.md")
    assert "Later request: do it" in summary


@pytest.mark.parametrize("tag", ["pr_description", "issue", "task", "problem_statement", "issue_description"])
def test_a_task_block_inside_the_span_names_the_goal(tag: str) -> None:
    """The SWE-bench / mini-swe-agent / OpenHands shape: instructions around a tagged issue."""
    task = (
        "<instructions>\nYou are a helpful assistant that can interact with a computer shell.\n"
        "Your response must contain exactly one bash code block.\n</instructions>\n"
        f"<{tag}>\nConsider the following PR description:\n"
        "QuerySet.only() after select_related() crashes on proxy models. Steps to reproduce:\n"
        "```\nFoo.objects.select_related('bar').only('bar__name')\n```\n"
        f"</{tag}>\n<example_response>\nTHOUGHT: I will look at the files.\n</example_response>"
    )
    history = [{"role": "user", "content": task}]
    for k in range(12):
        history.append({"role": "assistant", "content": f"Looking at file {k}.\n```bash\ncat src/m{k}.py\n```"})
        history.append({"role": "user", "content": f"<returncode>0</returncode>\n<output>\nline {k}\n</output>"})
    span = to_canonical(history).messages
    summary = ExtractiveSummarizer().summarize_messages(span, max_tokens=2000)
    assert _primary_request(summary).startswith("QuerySet.only() after select_related() crashes on proxy models.")
    assert goal_stated(summary)
