"""Rebuild ``tests/corpus/*.json`` from fetched snapshots of the source repositories.

Not needed at test time: the converted files are committed. Run it to check or redo a conversion:

    python tests/corpus/convert.py --swe-agent GIT_DIR --openhands GIT_DIR [--out tests/corpus]

``GIT_DIR`` is a (bare) clone of https://github.com/SWE-agent/SWE-agent and of
https://github.com/All-Hands-AI/OpenHands; files are read with ``git show COMMIT:PATH`` at the
commits pinned below, so the output is the same whatever the clones' HEAD is.

Every output file is ``{"messages": [...], "system": ..., "source": {...}}``: the messages in the
OpenAI Chat Completions format (system prompt as the first message, ``system`` null) or in the
Anthropic Messages format (``system`` the top-level prompt), and where each came from. No message
text is changed, cut or dropped; what the conversion does is listed in ``tests/corpus/README.md``.
"""

from __future__ import annotations

import argparse
import json
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


def git_show(git_dir: Path, commit: str, path: str) -> Any:
    out = subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], check=True, capture_output=True
    ).stdout
    return json.loads(out)


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--swe-agent", type=Path, required=True, help="git dir of SWE-agent/SWE-agent")
    parser.add_argument("--openhands", type=Path, required=True, help="git dir of All-Hands-AI/OpenHands")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args()
    jobs: list[tuple[str, str, str, str, Callable[[Any], tuple[list[dict[str, Any]], Any]], Any]] = []
    for name, path, fmt in SWE_AGENT_FILES:
        convert = swe_agent_openai if fmt == "openai" else swe_agent_anthropic
        traj = git_show(args.swe_agent, SWE_AGENT_COMMIT, path)
        jobs.append((name, SWE_AGENT_REPO, SWE_AGENT_COMMIT, path, convert, traj["history"]))
    for name, path in OPENHANDS_FILES:
        events = git_show(args.openhands, OPENHANDS_COMMIT, path)
        jobs.append((name, OPENHANDS_REPO, OPENHANDS_COMMIT, path, openhands_openai, events))
    for name, repo, commit, path, convert, raw in jobs:
        messages, system = convert(raw)
        source = {"repo": repo, "commit": commit, "path": path, "license": "MIT", "converter": convert.__name__}
        data = {"messages": messages, "system": system, "source": source}
        target = args.out / f"{name}.json"
        target.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{target.name}: {len(messages)} messages, {target.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
