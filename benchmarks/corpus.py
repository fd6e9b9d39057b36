"""The corpus of real public agent transcripts (``tests/corpus/``) and what tests and benchmarks
measure on it.

Each ``tests/corpus/*.json`` (short runs) and ``*.json.gz`` (long runs, gzip-compressed) is
``{"messages": [...], "system": ..., "source": {...}}``: a trajectory or chat history someone else
recorded (SWE-agent, OpenHands, mini-swe-agent, aider, Claude Code, Cursor; attribution in
``tests/corpus/README.md``)
converted to the OpenAI or Anthropic format by ``tests/corpus/convert.py``.

>>> names = [name for name, _, _ in load_corpus()]
>>> "swe_agent_pydicom_1458" in names
True
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import message_strings, summary_block
from compaction.adapters import to_canonical
from compaction.fidelity import altered_identifiers, fragment_references, source_strings
from compaction.patterns import relays_terminal
from compaction.result import CompactionResult
from compaction.stages.ledger import collect_artifacts
from compaction.summarizers._segment import line_form
from compaction.summarizers.extractive import ExtractiveSummarizer
from compaction.transcript import Message, ToolCallPart

CORPUS_DIR = Path(__file__).resolve().parent.parent / "tests" / "corpus"
# A sentence ends at ., ! or ? followed by white space (not inside "e.g. x" or "3.11").
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\"'`][.!?])\s+(?=[A-Z`\"'(])")
MIN_SENTENCE_WORDS = 4
# The reason of a compaction that was not applied because it would not shrink the context
# (``compaction.pipeline``): the input's tokens, then what the compacted context would have been.
NOT_REDUCED = re.compile(r"compaction would not reduce the context: ([\d,]+) -> ([\d,]+) tokens")


def read_corpus_file(path: Path) -> dict[str, Any]:
    """The JSON object of a corpus file, ``*.json`` or gzip-compressed ``*.json.gz``."""
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    data: dict[str, Any] = json.loads(raw.decode("utf-8"))
    return data


def corpus_files(directory: Path = CORPUS_DIR) -> list[tuple[str, Path]]:
    """``(name, path)`` of every transcript file in ``directory`` (``*.json`` and ``*.json.gz``),
    sorted by name: the file name without ``.json`` / ``.json.gz``. ``[]`` when the folder is
    missing."""
    if not directory.is_dir():
        return []
    found = [*directory.glob("*.json"), *directory.glob("*.json.gz")]
    return sorted((path.name.removesuffix(".gz").removesuffix(".json"), path) for path in found)


def load_corpus(directory: Path = CORPUS_DIR) -> list[tuple[str, list[dict[str, Any]], Any]]:
    """``(name, messages, system)`` of every transcript in ``directory`` (see :func:`corpus_files`);
    ``[]`` when the folder is missing."""
    out = []
    for name, path in corpus_files(directory):
        data = read_corpus_file(path)
        out.append((name, data["messages"], data.get("system")))
    return out


def corpus_source(name: str, directory: Path = CORPUS_DIR) -> dict[str, Any]:
    """Where transcript ``name`` came from (repo, commit, path, license, converter)."""
    path = dict(corpus_files(directory))[name]
    source: dict[str, Any] = read_corpus_file(path).get("source", {})
    return source


def request_indices(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """The messages the user wrote: the user turns before the agent's first answer (SWE-agent's task
    and demonstration), and every later user turn that is neither tool results nor a command's
    output relayed as a user turn (SWE-agent's observations: the turn answers an assistant turn that
    ended with a command, see :func:`compaction.patterns.relays_terminal`)."""
    out: list[int] = []
    previous: Message | None = None
    for i, m in enumerate(messages):
        message = to_canonical([dict(m)]).messages[0] if m.get("role") in ("user", "assistant") else None
        if m.get("role") == "user" and not _is_tool_result(m):
            answered = any(x.get("role") == "assistant" for x in messages[:i])
            if not answered or (message is not None and not relays_terminal(message, previous)):
                out.append(i)
        if message is not None:
            previous = message
    return out


def _is_tool_result(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    if message.get("role") == "tool":
        return True
    return isinstance(content, list) and any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content)


def sentences(text: str) -> list[str]:
    """The prose sentences of ``text`` (lines :func:`line_form` reads as prose, split at sentence
    ends), each of at least four words, once each, in order."""
    out: dict[str, None] = {}
    for line in text.splitlines():
        if line_form(line) != "prose":
            continue
        for sentence in _SENTENCE_END.split(line.strip()):
            sentence = sentence.strip()
            if len(sentence.split()) >= MIN_SENTENCE_WORDS:
                out[sentence] = None
    return list(out)


def request_sentences(messages: Sequence[Mapping[str, Any]], indices: Iterable[int]) -> list[str]:
    """The sentences of the user's own messages at ``indices``."""
    found: dict[str, None] = {}
    for i in indices:
        for text in message_strings(messages[i]):
            found.update(dict.fromkeys(sentences(text)))
    return list(found)


def archived_indices(messages: Sequence[Mapping[str, Any]], result: CompactionResult) -> list[int]:
    """Indices of the input messages ``result`` archived (removed, or rewritten by pruning)."""
    archived = {json.dumps(m, sort_keys=True) for m in result.archive.values()}
    return [i for i, m in enumerate(messages) if json.dumps(m, sort_keys=True) in archived]


def compacted_originals(result: CompactionResult) -> list[str]:
    """Every non-blank string of the messages ``result`` archived, as
    :func:`compaction.fidelity.source_strings` reads them (keys and decoded tool arguments too):
    what a summary may quote."""
    return [s for s in source_strings(list(result.archive.values())) if s.strip()]


def altered(result: CompactionResult) -> list[str]:
    """Identifier-like tokens the summary block of ``result`` shows that occur verbatim in no
    compacted original (``[]`` when nothing was compacted). The archive ids the block names are
    the compactor's own references, not the transcript's: they are framing."""
    return altered_identifiers(shown_block(result), compacted_originals(result), framing=list(result.archive))


def fragments(result: CompactionResult) -> list[str]:
    """References the summary block of ``result`` shows that are not whole: cut with a glued
    ellipsis, or only a part of a longer token of the compacted originals
    (:func:`compaction.fidelity.fragment_references`; ``[]`` when nothing was compacted)."""
    return fragment_references(shown_block(result), compacted_originals(result), framing=list(result.archive))


def not_reduced(result: CompactionResult) -> tuple[int, int] | None:
    """``(tokens before, tokens the compacted context would have had)`` when ``result`` was not
    applied because it would not shrink the context; ``None`` otherwise."""
    match = NOT_REDUCED.fullmatch(result.reason or "")
    if result.compacted or match is None:
        return None
    before, after = (int(g.replace(",", "")) for g in match.groups())
    return before, after


# Protocol fields: they pair calls with results and say what a block is; nobody reads them.
_PROTOCOL_KEYS = frozenset({"id", "tool_call_id", "tool_use_id", "type", "role", "signature", "cache_control"})


def content_strings(value: Any) -> list[str]:
    """The non-blank strings of a message (or a list of them) that someone wrote or a tool printed:
    texts, tool names and arguments (decoded from JSON), tool results; not the call ids and other
    protocol fields, and not the keys.

    This is deliberately narrower than :func:`compaction.fidelity.source_strings`, which the
    fidelity check uses (:func:`compacted_originals`). That one is what a summary *may* quote, so
    it is generous: keys (``file_name``), call ids, roles. This one is what must *stay* in the
    context or be found by recall, so it is the content only: a call id or a ``"tool_call_id"`` key
    is protocol, and counting its identifier tokens as lost when recall does not find them would
    measure the wire format, not the transcript.

    >>> content_strings({"role": "tool", "tool_call_id": "call_1", "content": "ok"})
    ['ok']
    """
    out: list[str] = []
    _content(value, out)
    return [s for s in out if s.strip()]


def _content(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if key in _PROTOCOL_KEYS:
                continue
            if key == "arguments" and isinstance(item, str):
                try:
                    _content(json.loads(item), out)
                    continue
                except ValueError:
                    pass
            _content(item, out)
    elif isinstance(value, list | tuple):
        for item in value:
            _content(item, out)


_MODIFIED_LINE = re.compile(r"^- `([^`]+)` - modified", re.MULTILINE)
_TIMELINE = re.compile(r"modified \d+ \(([^)]*)\)")
_TEXT_EDIT = re.compile(r"^<{5,9} SEARCH\s*$|```\s*\Z", re.MULTILINE)


def modified_in_summary(text: str) -> set[str]:
    """The files a summary lists as modified: its "Files and code changes" lines and its timeline."""
    listed = set(_MODIFIED_LINE.findall(text))
    for group in _TIMELINE.findall(text):
        listed.update(p.strip() for p in group.split(",") if p.strip() and p.strip() != "...")
    return listed


def edit_texts(messages: Sequence[Message]) -> list[str]:
    """Where an edit can name a file: every tool call's arguments (decoded), and the assistant
    texts written as edits (holding a SEARCH/REPLACE block, or ending with the code block a
    tool-less agent issues its command in). Deliberately simpler than the code it checks."""
    out = [s for m in messages for p in m.parts if isinstance(p, ToolCallPart) for s in source_strings(p.arguments)]
    out += [m.text for m in messages if m.role == "assistant" and _TEXT_EDIT.search(m.text.rstrip())]
    return out


def modified_without_an_edit(messages: list[dict[str, Any]], system: Any, max_tokens: int = 4000) -> list[str]:
    """The files the offline summary of the whole transcript (its section 4 and timeline) and the
    artifact ledger list as modified that no edit names (:func:`edit_texts`: a file is named as
    it is or by a relative tail, as "reproduce.py" created by that name and shown under the
    absolute path a tool's output gave it). Target: ``[]``."""
    canonical = to_canonical(messages, system).messages
    named = edit_texts(canonical)
    text = ExtractiveSummarizer().summarize_messages(canonical, max_tokens=max_tokens)
    listed = modified_in_summary(text) | set(collect_artifacts(canonical).edited)
    bad = []
    for path in sorted(listed):
        tails = [path] + [path.split("/", k)[-1] for k in range(1, path.count("/") + 1)]
        if not any(tail in value for tail in tails for value in named):
            bad.append(path)
    return bad


def shown_block(result: CompactionResult) -> str:
    """What the summary block shows: summary, artifact ledger, quoted request, markers."""
    return summary_block(result) or (result.summary or "")


__all__ = [
    "CORPUS_DIR",
    "NOT_REDUCED",
    "altered",
    "archived_indices",
    "compacted_originals",
    "content_strings",
    "corpus_files",
    "corpus_source",
    "edit_texts",
    "fragments",
    "load_corpus",
    "modified_in_summary",
    "modified_without_an_edit",
    "not_reduced",
    "read_corpus_file",
    "request_indices",
    "request_sentences",
    "sentences",
    "shown_block",
]
