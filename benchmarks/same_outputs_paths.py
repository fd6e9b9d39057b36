"""Check that a change left the pipeline's other paths byte for byte as they were.

    python benchmarks/same_outputs_paths.py 87440ae        # this tree against a commit
    python benchmarks/same_outputs_paths.py /path/to/tree  # or against another checkout

:mod:`benchmarks.same_outputs` compacts with the offline summarizer at its defaults. This compacts
generated sessions (coding and job search, 120 and 600 messages) with a deterministic stand-in for a
model (its answer is a hash of the prompt, so any change in what it is shown shows), a model that
fails every other call, one that always fails (the fallback chain, ``failure_mode="trim"``, no
offline fallback), and configurations that reach each fitting round (the tail's cap, a shrunk tail,
the task's middle cut, ``max_messages``, a larger ledger, the conversation mode, the ``max_chunks``
escalation), plus a second compaction that extends the first one's summary. Each tree runs in its
own subprocess; an exception is an output too (its type and message). Exit status 1 and the names
of the cases that differ when any does.
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

# Run with PYTHONPATH on a tree: reads {name: messages} JSON, writes {name: output}.
_PROBE = r"""
import hashlib, json, re, sys
from compaction import CompactionConfig, Compactor
from compaction.summarizers.base import SummarizerError, SummaryResponse

class Model:
    window = 24_000
    def __init__(self, fail_every=0, short=False):
        self.n, self.fail_every, self.short = 0, fail_every, short
    async def summarize(self, request):
        self.n += 1
        if self.fail_every and self.n % self.fail_every == 0:
            raise SummarizerError("scripted failure")
        digest = hashlib.sha256(request.prompt.encode()).hexdigest()[:12]
        filler = "x " * (10 if self.short else 3000)
        return SummaryResponse(text=f"## 1. Goals\n{request.kind} {digest} {len(request.prompt)}\n{filler}")

class Broken:
    async def summarize(self, request):
        raise SummarizerError("down")

sessions = json.load(open(sys.argv[1], encoding="utf-8"))
out = {}
def case(name, messages, summarizer, **config):
    try:
        text = Compactor("gpt-4o", summarizer, CompactionConfig(**config)).compact(messages).to_json()
    except Exception as exc:
        out[name] = f"{type(exc).__name__}: {exc}"
        return
    data = json.loads(re.sub(r'"duration_s": ?[0-9.e-]+', '"duration_s": 0', text))
    calls = (data.get("record") or {}).get("calls")
    if calls:
        calls.sort(key=lambda c: json.dumps(c, sort_keys=True))
    out[name] = json.dumps(data, sort_keys=True)

for name in ("coding120", "coding600", "job_search120", "job_search600"):
    msgs = sessions[name]
    case(f"{name}-model", msgs, Model(), window=64_000)
    case(f"{name}-model-escalate", msgs, Model(), window=64_000, max_chunks=1)
    case(f"{name}-preview-escalate", msgs, Model(), window=64_000, max_chunks=2, summarizer_tool_preview=(300, 100))
    case(f"{name}-flaky", msgs, Model(fail_every=2), window=64_000)
    case(f"{name}-flaky-strict", msgs, Model(fail_every=2), window=64_000, strict=True)
    case(f"{name}-broken", msgs, Broken(), window=64_000)
    case(f"{name}-broken-trim", msgs, Broken(), window=64_000, failure_mode="trim")
    case(f"{name}-broken-no-fallback", msgs, Broken(), window=64_000, extractive_fallback=False)
    case(f"{name}-ledger", msgs, Model(short=True), window=64_000, ledger_max_tokens=20_000)
    case(f"{name}-max-messages", msgs, None, window=64_000, max_messages=6)
    case(f"{name}-small", msgs, None, window=16_000, reserve_tokens=2_000, keep_recent_messages=30)
    case(f"{name}-tail-tokens", msgs, Model(), window=32_000, reserve_tokens=4_000, keep_recent_tokens=20_000)
    case(f"{name}-conversation", msgs, Model(), window=64_000, summary_mode="conversation")

task = [{"role": "user", "content": "Task: " + " ".join(f"word{i}" for i in range(20_000))}]
for i in range(20):
    task += [{"role": "assistant", "content": f"step {i} " * 50}, {"role": "user", "content": f"ok {i} " * 50}]
wide = [{"role": "user", "content": "Do the thing."}]
for i in range(30):
    wide += [{"role": "assistant", "content": f"step {i} " * 300}, {"role": "user", "content": f"ok {i} " * 300}]
for window in (16_000, 20_000):
    case(f"task-cut{window}", task, None, window=window, reserve_tokens=1_000)
    case(f"task-cut{window}-model", task, Model(), window=window, reserve_tokens=1_000)
for share in (1.0, 0.5):
    tail = dict(window=16_000, reserve_tokens=1_000, keep_recent_share=share)
    case(f"wide{share}", wide, None, keep_recent_messages=40, **tail)
    case(f"wide{share}-model", wide, Model(), keep_recent_messages=40, **tail)
    case(f"wide{share}-block", wide, Model(), keep_recent_messages=12, max_summary_tokens=4_000,
         summary_block_max_tokens=6_000, **tail)
turns = (("user", "hi"), ("assistant", "hello"), ("user", "more"), ("assistant", "ok"))
short = [{"role": role, "content": text} for role, text in turns]
case("not-smaller", short, None, keep_recent_messages=1)
settings = dict(window=32_000, reserve_tokens=2_000)
first = Compactor("gpt-4o", None, CompactionConfig(**settings)).compact(sessions["first"])
again = list(first.messages) + sessions["later"][1:]
case("extended", again, None, **settings)
case("extended-model", again, Model(), **settings)
json.dump(out, open(sys.argv[2], "w", encoding="utf-8"))
"""


def sessions() -> dict[str, list[dict[str, Any]]]:
    from benchmarks.generate import generate

    found = {f"{kind}{n}": generate(kind, n, seed=3).messages for kind in ("coding", "job_search") for n in (120, 600)}
    found["first"], found["later"] = generate("coding", 300, seed=5).messages, generate("coding", 200, seed=6).messages
    return {name: [dict(m) for m in messages] for name, messages in found.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/same_outputs_paths.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument("base", help="a git revision of this repository, or the path of another checkout")
    args = parser.parse_args(argv)
    work, before, after = before_and_after(args.base, "same-paths-", sessions(), _PROBE)
    differ = differing(before, after)
    raised = sum(1 for text in after.values() if not text.startswith("{"))
    print(f"{len(before)} cases ({raised} raise), {len(differ)} differ" + (f": {', '.join(differ)}" if differ else ""))
    return verdict(work, differ)


if __name__ == "__main__":
    raise SystemExit(main())
