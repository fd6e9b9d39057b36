"""Check that a change left the context manager's behaviour as it was, and how much it converts itself.

    python benchmarks/same_manager_outputs.py 87440ae        # this tree against a commit
    python benchmarks/same_manager_outputs.py /path/to/tree  # or against another checkout

``benchmarks/same_outputs.py`` compares ``Compactor`` outputs; this compares a
:class:`~compaction.middleware.ContextManager` driven turn by turn: generated sessions (coding and
job search, 600 messages, seed 3) appended one message at a time with ``before_turn`` before each
model call (32k window, threshold 0.8, ``keep_recent_messages=6``), in memory mode with recall on
and off and in store mode (SQLite), once with one manager and once with a new manager opening the
stored session after every compaction (as after a restart). Compared: every compaction's
``to_json()`` (``duration_s`` set to 0), the manager's ``tokens`` and ``measure()`` after every
turn, and the final messages and history length. Exit status 1 and the names of the cases that
differ when any does.

It also prints, per tree, the median number of messages the manager converted to canonical form
(and counted) itself during each compaction: the messages a compaction wrote, when counts are
carried; the whole compacted context, when they are not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.same_outputs import before_and_after, differing, verdict  # noqa: E402

# Run with PYTHONPATH on a tree: reads {name: messages} JSON, writes {"outputs": {case: text}, "converted": [...]}.
_PROBE = r"""
import asyncio, json, re, statistics, sys
from compaction import CompactionConfig, Compactor
from compaction.middleware import ContextManager
import compaction.middleware.context as context_module
from compaction.sqlite_store import SQLiteSessionStore

conversions = [0]
to_canonical = context_module.to_canonical

def counting(*args, **kwargs):
    conversions[0] += 1
    return to_canonical(*args, **kwargs)

context_module.to_canonical = counting  # what the manager converts itself, one message at a time
sessions = json.load(open(sys.argv[1], encoding="utf-8"))
converted = []

def clean(result):
    data = json.loads(re.sub(r'"duration_s": ?[0-9.e-]+', '"duration_s": 0', result.to_json()))
    calls = (data.get("record") or {}).get("calls")
    if calls:
        calls.sort(key=lambda c: json.dumps(c, sort_keys=True))
    return data

async def loop(messages, reopen=False, **kwargs):
    config = CompactionConfig(window=32_000, threshold=0.8, keep_recent_messages=6)
    cm = ContextManager(Compactor("gpt-4o", config=config), **kwargs)
    out = []
    for i, message in enumerate(messages):
        cm.append(message)
        following = messages[i + 1]["role"] if i + 1 < len(messages) else "assistant"
        if message["role"] != "assistant" and following == "assistant":
            before = conversions[0]
            result = await cm.before_turn()
            if result is not None:
                out.append(clean(result))
                if result.compacted:
                    converted.append(conversions[0] - before)
                    if reopen:  # a restart: a new manager loads the session from the store
                        cm = ContextManager(Compactor("gpt-4o", config=config), **kwargs)
            out.append([cm.tokens, cm.measure().tokens])
    out.append(cm.messages)
    out.append(len(cm.history()))
    return json.dumps(out, indent=1, sort_keys=True)

outputs = {}
for name, messages in sessions.items():
    outputs[f"{name}_memory"] = asyncio.run(loop(messages))
    outputs[f"{name}_memory_no_recall"] = asyncio.run(loop(messages, recall=False))
    outputs[f"{name}_store"] = asyncio.run(loop(messages, store=SQLiteSessionStore(), session_id="s"))
    outputs[f"{name}_store_reopened"] = asyncio.run(
        loop(messages, reopen=True, store=SQLiteSessionStore(), session_id="s")
    )
json.dump({"outputs": outputs, "converted": converted}, open(sys.argv[2], "w", encoding="utf-8"))
"""


def sessions() -> dict[str, list[dict[str, Any]]]:
    from benchmarks.generate import generate

    return {kind: [dict(m) for m in generate(kind, 600, seed=3).messages] for kind in ("coding", "job_search")}


def main(argv: list[str] | None = None) -> int:
    import statistics

    parser = argparse.ArgumentParser(prog="python benchmarks/same_manager_outputs.py")
    parser.add_argument("base", help="a git revision of this repository, or the path of another checkout")
    args = parser.parse_args(argv)
    work, before, after = before_and_after(args.base, "same-manager-outputs-", sessions(), _PROBE)
    old, new = before["outputs"], after["outputs"]
    differ = differing(old, new)
    compactions = sum(text.count('"compacted": true') for text in old.values())
    print(
        f"{len(old)} cases, {compactions} compactions, {len(differ)} differ"
        + (f": {', '.join(differ)}" if differ else "")
    )
    for label, figures in (("base", before), ("this tree", after)):
        converted = figures["converted"]
        median = statistics.median(converted) if converted else 0
        print(
            f"{label}: messages the manager converted and counted per compaction, "
            f"median {median:g}, total {sum(converted)}"
        )
    return verdict(work, differ)


if __name__ == "__main__":
    raise SystemExit(main())
