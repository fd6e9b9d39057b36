"""Rebuild ``tests/corpus/*.json`` from fetched snapshots of the source repositories.

Not needed at test time: the converted files are committed. Run it to check or redo a conversion:

    python tests/corpus/convert.py [--swe-agent GIT_DIR] [--openhands GIT_DIR] \
        [--mini-swe-agent GIT_DIR] [--aider GIT_DIR] [--claude-code GIT_DIR] [--cursor GIT_DIR] \
        [--out tests/corpus]

(each source is converted when its clone is given).

``GIT_DIR`` is a (bare) clone of https://github.com/SWE-agent/SWE-agent, of
https://github.com/All-Hands-AI/OpenHands, of https://github.com/SWE-agent/mini-swe-agent (its fork
network holds the pinned commit of the long runs), of https://github.com/Aider-AI/aider and of
https://github.com/marot/spotter (Claude Code sessions) and of https://github.com/twardoch/nyord-vpn
(Cursor sessions exported by SpecStory); files are
read with ``git show COMMIT:PATH`` at the commits pinned below, so the output is the same whatever
the clones' HEAD is. The short transcripts are written as ``NAME.json``, the long ones (hundreds of
messages) as ``NAME.json.gz`` (gzip with no time stamp, so a rerun is byte-identical).

Every output file is ``{"messages": [...], "system": ..., "source": {...}}``: the messages in the
OpenAI Chat Completions format (system prompt as the first message, ``system`` null) or in the
Anthropic Messages format (``system`` the top-level prompt), and where each came from. No message
text is changed, cut or dropped; what the conversion does is listed in ``tests/corpus/README.md``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

SWE_AGENT_REPO = "SWE-agent/SWE-agent"
SWE_AGENT_COMMIT = "3ea751c087f32b16e039a2233dd6eefecef325d5"
OPENHANDS_REPO = "All-Hands-AI/OpenHands"
OPENHANDS_COMMIT = "156d0686c46aafb0fa9d291da6421fb6f64dddc0"

_DEMO = "trajectories/demonstrations/"
_MM = "marshmallow-code__marshmallow-1867"

# (output name, source path, output format)
SWE_AGENT_FILES: tuple[tuple[str, str, str], ...] = (
    (
        "swe_agent_pydicom_1458",
        "tests/test_data/trajectories/gpt4__swe-bench-dev-easy_first_only__default__t-0.00__p-0.95__c-3.00__install-1/"
        "pydicom__pydicom-1458.traj",
        "openai",
    ),
    (
        "swe_agent_marshmallow_1867_default",
        f"{_DEMO}replay__{_MM}__default__t-0.20__p-0.95__c-2.00__install-1___install_from_source/{_MM}.traj",
        "openai",
    ),
    (
        "swe_agent_marshmallow_1867_tools",
        f"{_DEMO}replay__{_MM}__function_calling_replace__install-1/{_MM}.traj",
        "openai",
    ),
    (
        "swe_agent_marshmallow_1867_tools_anthropic",
        f"{_DEMO}replay__{_MM}__function_calling__install-1/{_MM}.traj",
        "anthropic",
    ),
    (
        "swe_agent_marshmallow_1867_str_replace",
        f"{_DEMO}replay__{_MM}__function_calling_replace_from_source/{_MM}.traj",
        "openai",
    ),
    (
        "swe_agent_humanevalfix_python_0",
        f"{_DEMO}human_thought__swe-bench-HumanEvalFix-python__lcb__t-0.00__p-0.95__c-4.00__install-0/"
        "humanevalfix-python-0.traj",
        "openai",
    ),
    ("swe_agent_ctf_web_i_got_id", f"{_DEMO}ctf/web/i_got_id_demo.traj", "openai"),
    ("swe_agent_ctf_crypto_katy", f"{_DEMO}ctf/crypto/katy.traj", "openai"),
    ("swe_agent_ctf_rev_rock", f"{_DEMO}ctf/rev/rock.traj", "openai"),
)
OPENHANDS_FILES: tuple[tuple[str, str], ...] = (
    ("openhands_vue_todo_app", "tests/runtime/trajs/basic_gui_mode.json"),
    ("openhands_rename_file", "tests/runtime/trajs/wrong_initial_state.json"),
)

# Long runs: mini-swe-agent 1.x trajectories (DeepSeek-chat on SWE-bench tasks) that
# XieZhiliang-code committed to a fork of mini-swe-agent (MIT); GitHub serves the commit from the
# upstream repository's fork network.
MINI_SWE_AGENT_REPO = "SWE-agent/mini-swe-agent"
MINI_SWE_AGENT_COMMIT = "3c7d1d7f8fb8630b187744215f67470b6755f60c"
MINI_SWE_AGENT_FILES: tuple[tuple[str, str, str], ...] = (
    (
        "mini_swe_agent_astroid_1333",
        "output/deepseek_bench_dev/pylint-dev__astroid-1333/pylint-dev__astroid-1333.traj.json",
        "openai",
    ),
    (
        "mini_swe_agent_django_13964",
        "output/deepseek_bench1/django__django-13964/django__django-13964.traj.json",
        "openai",
    ),
    (
        "mini_swe_agent_django_11910_anthropic",
        "output/deepseek_bench1/django__django-11910/django__django-11910.traj.json",
        "anthropic",
    ),
)
# Long runs: aider's own chat history (Paul Gauthier working on aider with aider), which aider keeps
# as a test fixture. Each window is a run of consecutive whole sessions (named by its first day),
# chosen so that it quotes no API key (sessions 608-610 paste a project key: left out):
# (output name, index of the first "# aider chat started at" session, number of sessions).
AIDER_REPO = "Aider-AI/aider"
AIDER_COMMIT = "5dc9490bb35f9729ef2c95d00a19ccd30c26339c"
AIDER_PATH = "tests/fixtures/chat-history.md"
AIDER_WINDOWS: tuple[tuple[str, int, int], ...] = (
    ("aider_history_2024_08_09", 286, 112),
    ("aider_history_2024_08_13", 611, 140),
)


# Long runs: Claude Code sessions that Marco Rotili recorded while building spotter with Claude Code
# and committed, redacted of user names, e-mail addresses, signatures and tokens, as test fixtures
# of spotter (MIT): (output name, session file, output format).
CLAUDE_CODE_REPO = "marot/spotter"
CLAUDE_CODE_COMMIT = "8cc42b0bd39d04e71e509d7d58e6782ab435329f"
_SPOTTER = "test/fixtures/transcripts/"
CLAUDE_CODE_FILES: tuple[tuple[str, str, str], ...] = (
    ("claude_code_spotter_4te_anthropic", f"{_SPOTTER}ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl", "anthropic"),
    ("claude_code_spotter_gqc", f"{_SPOTTER}258c7280-ae70-4798-800f-63464d01a85d.jsonl", "openai"),
)

# Long runs: Cursor agent sessions that Adam Twardoch exported with SpecStory while building
# nyord-vpn with Cursor, committed to nyord-vpn's repository beside its MIT license: (output name,
# exported session file).
CURSOR_REPO = "twardoch/nyord-vpn"
CURSOR_COMMIT = "d38172558d41eafee6a0d1b93ea9ba42b29b7729"
_SPECSTORY = ".specstory/history/"
CURSOR_FILES: tuple[tuple[str, str], ...] = (
    (
        "cursor_nyord_vpn_njord_comparison",
        f"{_SPECSTORY}2025-02-22_19-00-comparison-of-njord-and-nyord-vpn-implementations.md",
    ),
    ("cursor_nyord_vpn_git_and_todo", f"{_SPECSTORY}2025-02-22_22-27-git-management-and-todo-updates.md"),
    (
        "cursor_nyord_vpn_troubleshooting",
        f"{_SPECSTORY}2025-02-24_05-33-vpn-connection-troubleshooting-and-debugging.md",
    ),
)


def git_show_text(git_dir: Path, commit: str, path: str) -> str:
    out = subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], check=True, capture_output=True
    ).stdout
    return out.decode("utf-8")


def git_show(git_dir: Path, commit: str, path: str) -> Any:
    return json.loads(git_show_text(git_dir, commit, path))


def _swe_tool_call_id(message: dict[str, Any]) -> str:
    ids = message.get("tool_call_ids") or []
    if len(ids) != 1:
        raise ValueError(f"expected one tool_call_id, got {ids!r}")
    return str(ids[0])


def swe_agent_openai(history: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], None]:
    """SWE-agent's ``history`` as OpenAI chat messages.

    Kept: role, content (verbatim, a string or a list of text parts), tool_calls; ``tool_call_ids``
    (a one-element list in SWE-agent) becomes ``tool_call_id``. Dropped: SWE-agent's bookkeeping
    fields (agent, message_type, is_demo, thought and action, which repeat the content, cache_control).
    """
    out: list[dict[str, Any]] = []
    for m in history:
        message: dict[str, Any] = {"role": m["role"], "content": m["content"]}
        if m.get("tool_calls"):
            message["tool_calls"] = [
                {"id": c["id"], "type": c.get("type", "function"), "function": dict(c["function"])}
                for c in m["tool_calls"]
            ]
        if m["role"] == "tool":
            message["tool_call_id"] = _swe_tool_call_id(m)
        out.append(message)
    return out, None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part["text"] for part in content if part.get("type") == "text")


def swe_agent_anthropic(history: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """SWE-agent's ``history`` (function calling) as Anthropic messages: the system message becomes
    the top-level prompt, an assistant turn a text block (its content) plus one ``tool_use`` block per
    call (``input`` the parsed JSON arguments), a tool message a user turn with one ``tool_result``."""
    system = ""
    out: list[dict[str, Any]] = []
    for m in history:
        if m["role"] == "system":
            system += _text(m["content"])
        elif m["role"] == "assistant":
            blocks: list[dict[str, Any]] = []
            if _text(m["content"]):
                blocks.append({"type": "text", "text": _text(m["content"])})
            for c in m.get("tool_calls") or []:
                arguments = json.loads(c["function"]["arguments"])
                blocks.append({"type": "tool_use", "id": c["id"], "name": c["function"]["name"], "input": arguments})
            out.append({"role": "assistant", "content": blocks})
        elif m["role"] == "tool":
            result = {"type": "tool_result", "tool_use_id": _swe_tool_call_id(m), "content": _text(m["content"])}
            out.append({"role": "user", "content": [result]})
        else:
            out.append({"role": "user", "content": _text(m["content"])})
    return out, system


def openhands_openai(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], None]:
    """OpenHands' recorded events as OpenAI chat messages, as its agent sends them.

    A user message event becomes a user turn; an agent action with ``tool_call_metadata`` becomes the
    assistant message of its recorded model response (``choices[0].message``: content and
    tool_calls, once per response); its observation becomes a tool message (``tool_call_id``, the
    observation's ``content``); an agent message without a tool call becomes an assistant turn.
    Environment events (agent state changes) and empty "No observation" events are not messages.
    """
    out: list[dict[str, Any]] = []
    responses: set[str] = set()
    for e in events:
        meta = e.get("tool_call_metadata")
        if e.get("source") == "user" and e.get("action") == "message":
            out.append({"role": "user", "content": e["args"]["content"]})
        elif meta and "action" in e:
            response = meta["model_response"]
            if response["id"] in responses:
                continue
            responses.add(response["id"])
            choice = response["choices"][0]["message"]
            message: dict[str, Any] = {"role": "assistant", "content": choice.get("content")}
            if choice.get("tool_calls"):
                message["tool_calls"] = [
                    {"id": c["id"], "type": c.get("type") or "function", "function": {
                        "name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
                    for c in choice["tool_calls"]
                ]  # fmt: skip
            out.append(message)
        elif meta and "observation" in e:
            out.append({"role": "tool", "tool_call_id": meta["tool_call_id"], "content": e["content"]})
        elif e.get("source") == "agent" and e.get("action") == "message":
            out.append({"role": "assistant", "content": e["args"]["content"]})
    return out, None


def mini_swe_agent_openai(traj: dict[str, Any]) -> tuple[list[dict[str, Any]], None]:
    """A mini-swe-agent 1.x trajectory's ``messages`` as OpenAI chat messages.

    Kept: role, content (verbatim), tool_calls (id, type, function name and arguments) and a tool
    message's ``tool_call_id``. Dropped: the per-message ``extra`` bookkeeping (the raw model
    response, which repeats the message, and the parsed actions), ``function_call``,
    ``provider_specific_fields`` and the tool call's ``index``, and the final ``exit`` entry (the
    run's exit status and submitted patch: not a chat message)."""
    out: list[dict[str, Any]] = []
    for m in traj["messages"]:
        if m["role"] == "exit":
            continue
        message: dict[str, Any] = {"role": m["role"], "content": m["content"]}
        if m.get("tool_calls"):
            message["tool_calls"] = [
                {"id": c["id"], "type": c.get("type") or "function", "function": {
                    "name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
                for c in m["tool_calls"]
            ]  # fmt: skip
        if m["role"] == "tool":
            message["tool_call_id"] = m["tool_call_id"]
        out.append(message)
    return out, None


def openai_to_anthropic(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """OpenAI chat messages as Anthropic messages: system messages become the top-level prompt, an
    assistant turn a ``text`` block (its content, when any) plus one ``tool_use`` block per call
    (``input`` the parsed JSON arguments), and each run of consecutive tool messages one user turn
    of ``tool_result`` blocks (Anthropic answers every call of a turn in the next user turn)."""
    system = ""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "system":
            system += _text(m["content"])
        elif m["role"] == "assistant":
            blocks: list[dict[str, Any]] = []
            if _text(m.get("content") or ""):
                blocks.append({"type": "text", "text": _text(m["content"])})
            for c in m.get("tool_calls") or []:
                arguments = json.loads(c["function"]["arguments"])
                blocks.append({"type": "tool_use", "id": c["id"], "name": c["function"]["name"], "input": arguments})
            out.append({"role": "assistant", "content": blocks})
        elif m["role"] == "tool":
            result = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": _text(m["content"])}
            previous = out[-1] if out else None
            if previous and previous["role"] == "user" and isinstance(previous["content"], list):
                previous["content"].append(result)
            else:
                out.append({"role": "user", "content": [result]})
        else:
            out.append({"role": "user", "content": _text(m["content"])})
    return out, system


def mini_swe_agent_anthropic(traj: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """A mini-swe-agent trajectory as Anthropic messages (:func:`mini_swe_agent_openai`, then
    :func:`openai_to_anthropic`)."""
    messages, _ = mini_swe_agent_openai(traj)
    return openai_to_anthropic(messages)


_AIDER_SESSION = re.compile(r"(?m)^# aider chat started at .*$")
# aider's terminal output: ">" then a space or the end of the line (an edit block's
# ">>>>>>> REPLACE" line is the model's text).
_AIDER_TERMINAL = re.compile(r">(?: |$)")


def aider_sessions(history: str) -> list[str]:
    """The sessions of an aider chat history file: the text after each ``# aider chat started at``
    heading, up to the next one."""
    starts = [m.end() for m in _AIDER_SESSION.finditer(history)]
    ends = [*(m.start() for m in _AIDER_SESSION.finditer(history)), len(history)][1:]
    return [history[start:end] for start, end in zip(starts, ends, strict=True)]


def _aider_line(line: str, marker: str) -> str:
    """A history line without aider's markdown: the ``#### `` / ``> `` marker and the two spaces
    that end a markdown line."""
    line = line[len(marker) :] if line.startswith(marker) else line.removeprefix(marker.rstrip())
    return line.removesuffix("  ")


def aider_openai(sessions: list[str]) -> tuple[list[dict[str, Any]], None]:
    """Consecutive aider sessions as OpenAI chat messages, in the file's order: what the user
    typed and what the model replied.

    aider writes what the user typed as ``####`` lines, the model's replies as plain markdown, and
    its own terminal output as ``>`` lines (``>`` then a space or nothing): edits applied, commits,
    token and cost reports, its prompts. A run of ``####`` lines becomes a user turn and the plain
    text between them an assistant turn. The terminal output is not a message: aider does not send
    it to the model (lint and test output that it does send comes back as typed ``####`` lines).
    The ``#### `` marker and the markdown line-end spaces are removed, blank lines at the start
    and end of a turn are dropped; the text is otherwise verbatim. The session headings
    (``# aider chat started at ...``) are not messages."""
    out: list[dict[str, Any]] = []
    for session in sessions:
        for kind, lines in _aider_blocks(session):
            text = "\n".join(lines).strip("\n")
            if kind in ("typed", "model") and text.strip():
                out.append({"role": "assistant" if kind == "model" else "user", "content": text})
    return out, None


def _aider_blocks(session: str) -> list[tuple[str, list[str]]]:
    """The runs of lines of one kind ("typed", "terminal", "model") of an aider session, in order;
    a blank line belongs to the run it is in, the ``#### `` marker is removed from typed lines."""
    blocks: list[tuple[str, list[str]]] = []
    for raw in session.splitlines():
        if not raw.strip():
            if blocks:
                blocks[-1][1].append("")
            continue
        kind = "typed" if raw.startswith("####") else "terminal" if _AIDER_TERMINAL.match(raw) else "model"
        if not blocks or blocks[-1][0] != kind:
            blocks.append((kind, []))
        blocks[-1][1].append(_aider_line(raw, "#### ") if kind == "typed" else raw)
    return blocks


def claude_code_rows(jsonl: str) -> list[dict[str, Any]]:
    """The rows of a Claude Code session file (``~/.claude/projects/.../SESSION.jsonl``) that are
    messages of the main conversation: ``user`` and ``assistant`` rows not in a side chain (a
    sub-agent's), in the file's order. Progress, hook, snapshot and queue rows are not messages."""
    rows = [json.loads(line) for line in jsonl.splitlines() if line.strip()]
    return [r for r in rows if r.get("type") in ("user", "assistant") and not r.get("isSidechain")]


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def claude_code_anthropic(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], None]:
    """A Claude Code session as Anthropic messages. Claude Code writes each content block of a
    model response as its own row (same ``message.id``) and each tool result as its own user row,
    interleaved when the model called tools in parallel (call a, result a, call b, result b). A row
    of the response the previous assistant message came from joins that message; a user row joins
    the user turn after it. So one model response is one assistant message and the results it
    awaited one user turn, blocks in the file's order, verbatim (text, thinking, tool_use,
    tool_result). A user row with text (what the user typed, or what Claude Code adds as the user:
    a skill's instructions, its summary after it compacted) is a user message of its own, as in
    the file; a plain string stays a string. The session's system prompt is not in the file:
    ``system`` is null."""
    out: list[dict[str, Any]] = []
    response_id: Any = None
    for row in rows:
        role, content = row["message"]["role"], row["message"]["content"]
        if role == "assistant":
            same = row["message"].get("id") == response_id and response_id is not None
            response_id = row["message"].get("id")
            owner = next((m for m in reversed(out) if m["role"] == "assistant"), None) if same else None
            if owner is None and out and out[-1]["role"] == "assistant":
                owner = out[-1]
            if owner is not None:
                owner["content"] = _blocks(owner["content"]) + _blocks(content)
                continue
        elif out and out[-1]["role"] == "user" and _all_results(content) and _all_results(out[-1]["content"]):
            out[-1]["content"] = _blocks(out[-1]["content"]) + _blocks(content)
            continue
        out.append({"role": role, "content": content if isinstance(content, str) else list(content)})
    return out, None


def _all_results(content: Any) -> bool:
    return isinstance(content, list) and all(b.get("type") == "tool_result" for b in content)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")


def claude_code_openai(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], None]:
    """A Claude Code session as OpenAI chat messages: the Anthropic messages of
    :func:`claude_code_anthropic`, then an assistant turn's text blocks joined by a blank line as
    ``content`` and its ``tool_use`` blocks as ``tool_calls`` (arguments the JSON of ``input``); a
    ``tool_result`` block becomes a ``tool`` message (its text parts joined by a newline), a user
    text block a user message, in order. Thinking blocks are dropped (the format has none)."""
    messages, _ = claude_code_anthropic(rows)
    out: list[dict[str, Any]] = []
    for message in messages:
        blocks = _blocks(message["content"])
        if message["role"] == "assistant":
            texts = [b["text"] for b in blocks if b.get("type") == "text"]
            calls = [
                {
                    "id": b["id"],
                    "type": "function",
                    "function": {"name": b["name"], "arguments": json.dumps(b["input"])},
                }
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            turn: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) if texts else None}
            if calls:
                turn["tool_calls"] = calls
            if texts or calls:
                out.append(turn)
            continue
        for block in blocks:
            if block.get("type") == "tool_result":
                out.append(
                    {"role": "tool", "tool_call_id": block["tool_use_id"], "content": _result_text(block["content"])}
                )
            elif block.get("type") == "text":
                out.append({"role": "user", "content": block["text"]})
    return out, None


# Cursor sessions exported by SpecStory (``.specstory/history/*.md``): the heading of each turn, the
# separator SpecStory writes between the bubbles of a turn (a blank line, ``---``, a blank line) and
# the empty heading that opens each bubble of a turn after its first.
_SPECSTORY_TURN = re.compile(r"(?m)^_\*\*(User|Assistant)\*\*_$")
_SPECSTORY_BUBBLE = "\n\n---\n\n"
_SPECSTORY_BUBBLE_HEADING = "_****_"
# A terminal bubble: Cursor's ``run_terminal_cmd`` call as SpecStory writes it, the command in a
# ``bash`` fence, then its output in a plain fence.
_SPECSTORY_TERMINAL = re.compile(r"\A```bash\n(.*?)\n```\n\n```\n(.*)\n```\Z", re.DOTALL)


def _specstory_bubbles(body: str) -> list[str]:
    """The non-empty bubbles of one SpecStory turn, without the separators and bubble headings."""
    out = []
    for bubble in body.split(_SPECSTORY_BUBBLE):
        bubble = bubble.strip("\n")
        if bubble.startswith(_SPECSTORY_BUBBLE_HEADING + "\n"):
            bubble = bubble[len(_SPECSTORY_BUBBLE_HEADING) :].strip("\n")
        if bubble.strip() and bubble.strip() not in ("---", _SPECSTORY_BUBBLE_HEADING):
            out.append(bubble)
    return out


def cursor_specstory_openai(markdown: str) -> tuple[list[dict[str, Any]], None]:
    """A Cursor agent session exported by SpecStory (markdown) as OpenAI chat messages.

    SpecStory writes each turn under ``_**User**_`` or ``_**Assistant**_`` and the bubbles of an
    assistant turn (the agent's text, a tool's summary such as ``Read file: PATH`` or the ``diff``
    of an edit, a terminal command with its output) separated by ``---`` lines, each bubble after
    the first under an empty ``_****_`` heading. A user turn becomes a user message (its bubbles
    joined by the separator). Each bubble of an assistant turn becomes one assistant message, as
    Cursor keeps it, except a terminal bubble (a ``bash`` fence followed by a plain fence): that
    becomes an assistant message calling Cursor's ``run_terminal_cmd`` tool (``{"command": ...}``)
    and a tool message holding the output, both verbatim without their fences. The other tools'
    bubbles stay text: the export shows their summaries, not their arguments and results (an
    edit's ``diff`` does not name its file). Empty bubbles, separators, bubble headings, the
    title heading and SpecStory's own header are not messages. SpecStory records no call ids:
    ``call_N`` numbers the commands in order."""
    out: list[dict[str, Any]] = []
    parts = _SPECSTORY_TURN.split(markdown)
    calls = 0
    for role, body in zip(parts[1::2], parts[2::2], strict=True):
        bubbles = _specstory_bubbles(body)
        if role == "User":
            if bubbles:
                out.append({"role": "user", "content": _SPECSTORY_BUBBLE.join(bubbles)})
            continue
        for bubble in bubbles:
            terminal = _SPECSTORY_TERMINAL.match(bubble)
            if terminal is None:
                out.append({"role": "assistant", "content": bubble})
                continue
            calls += 1
            call_id = f"call_{calls}"
            arguments = json.dumps({"command": terminal.group(1)}, ensure_ascii=False)
            call = {"id": call_id, "type": "function", "function": {"name": "run_terminal_cmd", "arguments": arguments}}
            out.append({"role": "assistant", "content": None, "tool_calls": [call]})
            out.append({"role": "tool", "tool_call_id": call_id, "content": terminal.group(2)})
    return out, None


def write_corpus_file(target: Path, data: dict[str, Any]) -> None:
    """``data`` as JSON at ``target``; gzip-compressed (``mtime`` 0: the same bytes on every run)
    when the name ends in ``.gz``."""
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    if target.suffix == ".gz":
        target.write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
    else:
        target.write_text(text, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--swe-agent", type=Path, help="git dir of SWE-agent/SWE-agent")
    parser.add_argument("--openhands", type=Path, help="git dir of All-Hands-AI/OpenHands")
    parser.add_argument("--mini-swe-agent", type=Path, help="git dir of SWE-agent/mini-swe-agent (long runs)")
    parser.add_argument("--aider", type=Path, help="git dir of Aider-AI/aider (long chat histories)")
    parser.add_argument("--claude-code", type=Path, help="git dir of marot/spotter (Claude Code sessions)")
    parser.add_argument("--cursor", type=Path, help="git dir of twardoch/nyord-vpn (Cursor sessions, SpecStory)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args()
    Job = tuple[str, str, str, str, Callable[[Any], tuple[list[dict[str, Any]], Any]], Any, str]
    jobs: list[Job] = []
    for name, path, fmt in SWE_AGENT_FILES if args.swe_agent else ():
        convert = swe_agent_openai if fmt == "openai" else swe_agent_anthropic
        traj = git_show(args.swe_agent, SWE_AGENT_COMMIT, path)
        jobs.append((name, SWE_AGENT_REPO, SWE_AGENT_COMMIT, path, convert, traj["history"], "MIT"))
    for name, path in OPENHANDS_FILES if args.openhands else ():
        events = git_show(args.openhands, OPENHANDS_COMMIT, path)
        jobs.append((name, OPENHANDS_REPO, OPENHANDS_COMMIT, path, openhands_openai, events, "MIT"))
    long_runs: set[str] = set()
    if args.mini_swe_agent:
        for name, path, fmt in MINI_SWE_AGENT_FILES:
            mini = mini_swe_agent_openai if fmt == "openai" else mini_swe_agent_anthropic
            traj = git_show(args.mini_swe_agent, MINI_SWE_AGENT_COMMIT, path)
            jobs.append((name, MINI_SWE_AGENT_REPO, MINI_SWE_AGENT_COMMIT, path, mini, traj, "MIT"))
            long_runs.add(name)
    if args.aider:
        sessions = aider_sessions(git_show_text(args.aider, AIDER_COMMIT, AIDER_PATH))
        for name, first, count in AIDER_WINDOWS:
            window = sessions[first : first + count]
            path = f"{AIDER_PATH} (sessions {first}-{first + count - 1})"
            jobs.append((name, AIDER_REPO, AIDER_COMMIT, path, aider_openai, window, "Apache-2.0"))
            long_runs.add(name)
    for name, path, fmt in CLAUDE_CODE_FILES if args.claude_code else ():
        claude = claude_code_openai if fmt == "openai" else claude_code_anthropic
        rows = claude_code_rows(git_show_text(args.claude_code, CLAUDE_CODE_COMMIT, path))
        jobs.append((name, CLAUDE_CODE_REPO, CLAUDE_CODE_COMMIT, path, claude, rows, "MIT"))
        long_runs.add(name)
    for name, path in CURSOR_FILES if args.cursor else ():
        markdown = git_show_text(args.cursor, CURSOR_COMMIT, path)
        jobs.append((name, CURSOR_REPO, CURSOR_COMMIT, path, cursor_specstory_openai, markdown, "MIT"))
        long_runs.add(name)
    for name, repo, commit, path, convert, raw, license_name in jobs:
        messages, system = convert(raw)
        source = {"repo": repo, "commit": commit, "path": path, "license": license_name, "converter": convert.__name__}
        data = {"messages": messages, "system": system, "source": source}
        target = args.out / (f"{name}.json.gz" if name in long_runs else f"{name}.json")
        write_corpus_file(target, data)
        print(f"{target.name}: {len(messages)} messages, {target.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
