"""The offline summarizer on real public agent trajectories (``tests/corpus/``).

Real transcripts paste source listings, directory listings, diffs and tool output into user and
assistant messages (SWE-agent style observations arrive as user turns). None of that may come
back as a constraint or a request: those lines must be prose the user wrote.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compaction.adapters import to_canonical
from compaction.summarizers._classify import classify
from compaction.summarizers._segment import line_form, segment
from compaction.summarizers.extractive import ExtractiveSummarizer
from compaction.transcript import Transcript

CORPUS = Path(__file__).resolve().parent / "corpus"
_CODE_LIKE = re.compile(r"^\s*\d{1,6}[:|\t]|^\s*(?:def|class|import|from\s+\S+\s+import|return)\b|\s=\s\S+\)?$")


def _transcripts() -> Iterator[tuple[str, Transcript]]:
    if not CORPUS.is_dir():
        return
    for path in sorted(CORPUS.rglob("*.json")):
        try:
            data: Any = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        candidates = [data]
        if isinstance(data, dict):
            candidates = [data, {"messages": data.get("messages"), "system": data.get("system")}]
        for candidate in candidates:
            try:
                if isinstance(candidate, dict) and isinstance(candidate.get("messages"), list):
                    transcript = to_canonical(candidate["messages"], candidate.get("system"))
                elif isinstance(candidate, list):
                    transcript = to_canonical(candidate)
                else:
                    continue
            except Exception:
                continue
            if len(transcript.messages) >= 4:
                yield str(path.relative_to(CORPUS)), transcript
                break


TRANSCRIPTS = list(_transcripts())
pytestmark = pytest.mark.skipif(not TRANSCRIPTS, reason="no transcript in tests/corpus/ that the adapters read")


def _said_by_user(transcript: Transcript) -> str:
    return " ".join(" ".join(m.text.split()) for m in transcript.messages if m.is_user_turn)


@pytest.mark.parametrize(("name", "transcript"), TRANSCRIPTS, ids=[name for name, _ in TRANSCRIPTS])
def test_no_code_listing_or_output_is_a_constraint_or_request(name: str, transcript: Transcript) -> None:
    units = classify(segment(transcript.messages))
    for unit in units:
        if {"constraint", "request"} & unit.labels:
            assert unit.role == "user", (name, unit.text)
            assert unit.form == "prose", (name, unit.text)
            assert not _CODE_LIKE.search(unit.text), (name, unit.text)


@pytest.mark.parametrize(("name", "transcript"), TRANSCRIPTS, ids=[name for name, _ in TRANSCRIPTS])
def test_summary_constraints_and_requests_are_the_users_prose(name: str, transcript: Transcript) -> None:
    text = ExtractiveSummarizer().summarize_messages(transcript.messages, max_tokens=4096)
    said = _said_by_user(transcript)
    for line in text.splitlines():
        for prefix in ("- Constraint: ", "- Later request: "):
            if line.startswith(prefix):
                statement = line.removeprefix(prefix).removesuffix("...")
                assert line_form(statement) == "prose", (name, line)
                assert not _CODE_LIKE.search(statement), (name, line)
                first = statement.split(". ")[0][:60]
                assert " ".join(first.split()) in said, (name, line)
