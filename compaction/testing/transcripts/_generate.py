"""The entry point: a session of exactly ``n_messages`` messages, episode after episode."""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Iterator

from compaction.testing.transcripts._codebase import _Codebase
from compaction.testing.transcripts._coding import _coding_episode
from compaction.testing.transcripts._episode import _Ctx
from compaction.testing.transcripts._fact_values import _FactMaker
from compaction.testing.transcripts._job_search import _job_search_episode
from compaction.testing.transcripts._planting import _Planter
from compaction.testing.transcripts._research import _research_episode
from compaction.testing.transcripts._types import (
    FORMATS,
    MAX_MESSAGES,
    MIN_MESSAGES,
    PHRASINGS,
    SCENARIOS,
    Format,
    GeneratedTranscript,
    Phrasing,
    Scenario,
)
from compaction.testing.transcripts._writer import Step, _Writer

_SYSTEM_PROMPTS: dict[str, str] = {
    "coding": (
        "You are a coding agent working in the acme monorepo at /home/dev/acme (Python 3.11 services under src/, "
        "tests under tests/). Use the tools to search, read, edit and run code. Read a file before editing it. "
        "Run the relevant tests after every change and report failures exactly. Work on a feature branch; "
        "commit with a message that names the ticket. Keep answers short and factual."
    ),
    "job_search": (
        "You are Scout, a job-search assistant for Daniel Okafor, a senior .NET developer in Sheffield. You can "
        "read and write files in his job-search folder, search LinkedIn and read his Gmail (read-only). Be factual, "
        "give the link for every role, and score consistently with the rubric in search-prompt.txt."
    ),
    "research": (
        "You are a research assistant. Search the web, read pages and papers, and keep notes under notes/. "
        "Prefer primary sources, quote numbers with their units and conditions, and cite a URL for every claim."
    ),
    "mixed": (
        "You are a general agent with file, shell, web and mail tools. Work carefully, keep notes of what you did, "
        "and report results with exact paths, links and numbers."
    ),
}


_EPISODES: dict[str, Callable[[_Ctx], Iterator[Step]]] = {
    "coding": _coding_episode,
    "job_search": _job_search_episode,
    "research": _research_episode,
}


def generate(
    scenario: Scenario | str = "coding",
    n_messages: int = 2000,
    *,
    seed: int = 0,
    format: Format | str = "openai",
    tool_heavy: bool = False,
    phrasing: Phrasing | str = "templated",
) -> GeneratedTranscript:
    """A deterministic synthetic session of exactly ``n_messages`` messages (for OpenAI, the
    system message is ``messages[0]`` and counts; for Anthropic it is ``.system``).

    ``phrasing="paraphrased"`` plants decisions, constraints and next steps in the held-out
    paraphrased wording (no :data:`CUE_WORDS`); ``"templated"`` (the default) in the cue-phrase
    templates."""
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)}, not {scenario!r}")
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    if not MIN_MESSAGES <= n_messages <= MAX_MESSAGES:
        raise ValueError(f"n_messages must be within {MIN_MESSAGES}..{MAX_MESSAGES}, got {n_messages}")
    if phrasing not in PHRASINGS:
        raise ValueError(f"phrasing must be one of {', '.join(PHRASINGS)}, not {phrasing!r}")
    key = f"{scenario}:{n_messages}:{seed}:{format}:{int(tool_heavy)}"
    if phrasing != "templated":
        key += f":{phrasing}"
    rng = random.Random(zlib.crc32(key.encode()) ^ (seed * 0x9E3779B1))
    planter = _Planter(rng, n_messages, _FactMaker(rng, phrasing))
    system = _SYSTEM_PROMPTS[scenario]
    writer = _Writer(format, n_messages, rng, planter, system)  # type: ignore[arg-type]
    ctx = _Ctx(rng=rng, heavy=tool_heavy, planter=planter, cb=_Codebase(rng, tool_heavy))
    order = ("coding", "job_search", "research")
    turn = 0
    while writer.remaining > 0:
        kind = scenario if scenario != "mixed" else order[turn % 3] if rng.random() < 0.7 else rng.choice(order)
        turn += 1
        planter.flavor = kind
        for step in _EPISODES[kind](ctx):
            writer.emit(step)
            if writer.remaining <= 0:
                break
    return GeneratedTranscript(
        messages=writer.messages,
        system=system if format == "anthropic" else None,
        facts=planter.facts,
        format=format,  # type: ignore[arg-type]
        scenario=scenario,
        seed=seed,
        tool_heavy=tool_heavy,
        phrasing=phrasing,
    )
