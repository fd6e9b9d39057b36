"""A span of canonical messages read into facts: user turns, tool events, paths, links, ids.

The facts feed the tool-event parts of the summary (:mod:`._events`); what people said is read
separately, sentence by sentence (:mod:`._segment`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from compaction.injection import addresses_model, guard
from compaction.patterns import (
    OpenFile,
    diff_paths,
    final_code_block,
    relays_terminal,
    search_replace_paths,
    truncate,
    users_words,
)
from compaction.summarizers._extract import (
    clean,
    context_snippet,
    find_ids,
    find_paths,
    find_urls,
    strip_control,
)
from compaction.summarizers._tools import (
    COMMAND_KEYS,
    CONTENT_KEYS,
    PATH_KEYS,
    PLACE_KEYS,
    URL_KEYS,
    ToolEvent,
    _change_snippet,
    _command_of,
    error_lines,
    normalize_command,
    parse_arguments,
    resolves,
    result_failed,
    tool_kind,
)
from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart

# --------------------------------------------------------------------------------------------
# The span as facts
# --------------------------------------------------------------------------------------------


@dataclass
class UserTurn:
    msg: int
    phase: int
    text: str
    images: int = 0


@dataclass
class PathFact:
    path: str
    first: int
    last: int
    reads: dict[str, int] = field(default_factory=dict)  # tool name -> count
    writes: dict[str, int] = field(default_factory=dict)
    uses: dict[str, int] = field(default_factory=dict)  # named in a command that did not write it
    mentions: int = 0
    snippet: str | None = None
    talked_about: bool = False  # named by the user or assistant


@dataclass
class UrlFact:
    url: str
    first: int
    last: int
    label: str = ""
    fetched_by: str | None = None
    mentions: int = 0
    talked_about: bool = False
    crowded: bool = True  # only ever seen among many links on one line


@dataclass
class IdFact:
    value: str
    kind: str
    first: int
    last: int
    context: str
    mentions: int = 0
    talked_about: bool = False


@dataclass
class SpanFacts:
    messages: int
    chars: int
    user_turns: list[UserTurn]
    events: list[ToolEvent]
    paths: dict[str, PathFact]
    urls: dict[str, UrlFact]
    ids: dict[str, IdFact]
    last_assistant_msg: int  # -1 when none
    last_user_msg: int  # -1 when none


def message_chars(message: Message) -> int:
    total = 0
    for part in message.parts:
        if isinstance(part, TextPart):
            total += len(part.text)
        elif isinstance(part, ToolCallPart):
            total += len(part.name) + len(part.arguments)
        elif isinstance(part, ToolResultPart):
            total += len(part.text)
        else:
            text = getattr(part, "text", None)
            if isinstance(text, str):
                total += len(text)
    return total


_MAX_RESULT_SCAN = 200_000  # characters of one tool result scanned for paths and identifiers
_MAX_PATHS = 600
_MAX_IDS = 400
_MAX_URLS = 400


class _Collector:
    def __init__(self) -> None:
        self.paths: dict[str, PathFact] = {}
        self.urls: dict[str, UrlFact] = {}
        self.ids: dict[str, IdFact] = {}
        self.editor = OpenFile()  # the file the agent's editor has open: its edits change it unnamed

    def written(self, paths: Sequence[str], msg: int, by: str) -> None:
        """Record ``paths`` as changed at message ``msg`` by an edit written as text (``by``)."""
        for raw in paths:
            fact = self.path(raw, msg)
            if fact is not None:
                fact.writes[by] = fact.writes.get(by, 0) + 1

    def path(self, raw: str, msg: int) -> PathFact | None:
        path = raw.strip().strip("'\"`")
        if not path or "\n" in path or len(path) > 260 or path in (".", "..", "./", "../", "/", "~"):
            return None
        key = path[2:] if path.startswith("./") else path
        fact = self.paths.get(key)
        if fact is None:
            if len(self.paths) >= _MAX_PATHS:
                return None
            fact = self.paths[key] = PathFact(path=path, first=msg, last=msg)
        fact.last = max(fact.last, msg)
        return fact

    def url(self, url: str, msg: int, label: str = "") -> UrlFact | None:
        fact = self.urls.get(url)
        if fact is None:
            if len(self.urls) >= _MAX_URLS:
                return None
            fact = self.urls[url] = UrlFact(url=url, first=msg, last=msg, label=label)
        fact.last = max(fact.last, msg)
        fact.mentions += 1
        if label and not fact.label:
            fact.label = label
        return fact

    def ident(self, kind: str, value: str, msg: int, context: str, talked: bool) -> None:
        fact = self.ids.get(value)
        if fact is None:
            if len(self.ids) >= _MAX_IDS:
                return
            fact = self.ids[value] = IdFact(value=value, kind=kind, first=msg, last=msg, context=context)
        fact.last = max(fact.last, msg)
        fact.mentions += 1
        fact.talked_about = fact.talked_about or talked

    def scan(self, text: str, msg: int, *, talked: bool, result_of: str | None = None) -> None:
        """Record the paths, links and identifiers of one piece of text."""
        if len(text) > _MAX_RESULT_SCAN:
            text = text[: _MAX_RESULT_SCAN // 2] + "\n" + text[-_MAX_RESULT_SCAN // 2 :]
        urls = find_urls(text)
        url_spans = [(start, start + len(u)) for start, u in urls]
        line_of = [text.count("\n", 0, start) for start, _ in urls] if len(urls) > 3 else []
        for k, (start, url) in enumerate(urls):
            crowded = bool(line_of) and line_of.count(line_of[k]) > 3  # a footer or link farm
            label = _url_label(text, start, url) if result_of and not crowded else ""
            fact = self.url(url, msg, label)
            if fact is None:
                continue
            if talked:
                fact.talked_about = True
            if not crowded:
                fact.crowded = False
        for _start, path in find_paths(text, url_spans):
            path_fact = self.path(path, msg)
            if path_fact is not None:
                path_fact.mentions += 1
                path_fact.talked_about = path_fact.talked_about or talked
        for start, kind, value in find_ids(text, url_spans):
            context = context_snippet(text, start, value)
            self.ident(kind, value, msg, context if talked else guard(context), talked)


# A label's list marker ("- ", "2. ", "[x] ") and trailing joiners; never the digits or dashes of a
# token ("3.12 notes", "--help docs").
_LABEL_STRIP = re.compile(r"^(?:\s+|[\-*\u2022>]+(?=\s)|\d{1,3}[.)](?=\s)|\[[ xX]?\])+|(?:\s+[:\-(\[<]*|[:(\[<]+)$")


_LINK_WORDS = re.compile(r"(?:\b(?:url|link|apply|view|href|and|here|at|visit|see|open|more)\b\s*[:=]?\s*)+$", re.I)


def _url_label(text: str, start: int, url: str) -> str:
    """A short description of a link found in tool output: the text before it on its line, or,
    when the link stands (almost) alone, up to two short lines just above it."""
    line_start = text.rfind("\n", 0, start) + 1
    before = _LINK_WORDS.sub("", _LABEL_STRIP.sub("", text[line_start:start])).strip(" :-|")
    if len(before) < 8:
        above: list[str] = []
        end = line_start - 1
        for _ in range(4):
            if end <= 0 or len(above) == 2:
                break
            begin = text.rfind("\n", 0, end) + 1
            candidate = clean(_LABEL_STRIP.sub("", text[begin:end]))
            end = begin - 1
            if not candidate:
                if above:
                    break
                continue
            if "://" in candidate or len(candidate) > 110:
                continue
            above.insert(0, candidate)
        before = " \u00b7 ".join(above) if above else before
    if addresses_model(text[max(0, start - 400) : start + 400]):
        return "(found next to text addressed to AI assistants; untrusted)"
    return truncate(clean(before), 130) if before else ""


@dataclass
class _SpanReader:
    """The state of :func:`extract` while it reads a span, message by message."""

    messages: Sequence[Message]
    users: list[UserTurn] = field(default_factory=list)
    events: list[ToolEvent] = field(default_factory=list)
    by_call: dict[str, ToolEvent] = field(default_factory=dict)
    collector: _Collector = field(default_factory=_Collector)
    phase: int = 0
    last_assistant: int = -1
    last_user: int = -1

    def read_text(self, index: int, message: Message) -> None:
        """A user turn's or an assistant's text: the turn, what it names and what it edits."""
        collector = self.collector
        if message.role == "user" and message.is_user_turn:
            self.phase += 1
            text = users_words(message)  # a harness's notice in the same message is not part of the turn
            images = sum(1 for _ in message.iter_images())
            self.users.append(UserTurn(msg=index, phase=self.phase, text=text, images=images))
            self.last_user = index
            collector.scan(text, index, talked=True)
        elif message.role == "assistant":
            text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart))
            if text.strip():
                self.last_assistant = index
                collector.scan(text, index, talked=True)
                collector.written(search_replace_paths(text), index, "SEARCH/REPLACE")
                if index + 1 < len(self.messages) and relays_terminal(self.messages[index + 1], message):
                    # A tool-less agent's command, the code block its turn ends with, answered
                    # by the terminal's output in the next turn: what it changes is modified.
                    action = final_code_block(text) or ""
                    verb = action.split(maxsplit=1)[0] if action.strip() else "command"
                    collector.written(collector.editor.command(action), index, verb)

    def read_parts(self, index: int, message: Message) -> None:
        """A message's tool calls (new events) and tool results (attached to their call's event)."""
        events = self.events
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                event = _new_event(part, index, self.phase, len(events), self.collector)
                events.append(event)
                self.by_call.setdefault(part.id, event)
            elif isinstance(part, ToolResultPart):
                found = self.by_call.get(part.call_id)
                if found is not None and found.result is None:
                    event = found
                else:
                    event = ToolEvent(
                        seq=len(events),
                        index=index,
                        phase=self.phase,
                        call_id=part.call_id,
                        name="(unknown tool)",
                        kind="other",
                        args={},
                    )
                    events.append(event)
                _attach_result(event, part, index, self.collector)


def _link_resolutions(events: Sequence[ToolEvent]) -> None:
    """Each failed event's ``resolved_by``: the first later event that resolves it."""
    for i, event in enumerate(events):
        if not event.failed:
            continue
        for later in events[i + 1 :]:
            if resolves(event, later):
                event.resolved_by = later.seq
                break


def extract(messages: Sequence[Message]) -> SpanFacts:
    """Read a span of canonical messages into facts."""
    reader = _SpanReader(messages)
    chars = 0
    for index, message in enumerate(messages):
        chars += message_chars(message)
        if message.role == "system":
            continue
        reader.read_text(index, message)
        reader.read_parts(index, message)
    _link_resolutions(reader.events)
    collector = reader.collector
    return SpanFacts(
        messages=len(messages),
        chars=chars,
        user_turns=reader.users,
        events=reader.events,
        paths=collector.paths,
        urls=collector.urls,
        ids=collector.ids,
        last_assistant_msg=reader.last_assistant,
        last_user_msg=reader.last_user,
    )


def _argument_paths(event: ToolEvent, args: dict[str, Any], collector: _Collector) -> None:
    """The paths the call's arguments name (``arg_paths``) and those it writes (``written``)."""
    for key in PATH_KEYS:
        value = args.get(key)
        values = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        for item in values:
            if isinstance(item, str) and item.strip() and "\n" not in item and len(item) <= 260:
                if "://" in item:
                    continue
                event.arg_paths.append(item.strip())
                if event.kind == "write" and key not in PLACE_KEYS:
                    event.written.append(item.strip())
    if event.command:
        body = normalize_command(event.command)
        url_spans = [(s, s + len(u)) for s, u in find_urls(body)]
        event.arg_paths.extend(p for _, p in find_paths(body, url_spans))
        # Only what the command writes is changed: not every path or module name it mentions.
        # Read as written (``event.command`` has its white space folded, here-documents with it).
        raw = next((v for k in COMMAND_KEYS if isinstance(v := args.get(k), str) and v.strip()), event.command)
        event.written.extend(collector.editor.command(raw))


def _argument_urls_and_snippet(event: ToolEvent, args: dict[str, Any]) -> None:
    for key in URL_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.startswith(("http://", "https://")):
            event.arg_urls.append(value.strip())
    for key in CONTENT_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            event.snippet, event.snippet_telling = _change_snippet(key, value)
            break


def _edited_files(event: ToolEvent, part: ToolCallPart, args: dict[str, Any], collector: _Collector) -> None:
    """Add what an edit of the open file or a patch argument changes; every written path is named."""
    event.written.extend(collector.editor.call(part.name, args))  # an edit of the open file, naming none
    if event.kind != "exec":  # a patch passed as an argument changes the files its headers name
        for value in args.values():
            if isinstance(value, str) and "\n" in value:
                event.written.extend(diff_paths(value))
    event.written = list(dict.fromkeys(event.written))
    event.arg_paths.extend(path for path in event.written if path not in event.arg_paths)


def _count_uses(event: ToolEvent, index: int, collector: _Collector) -> None:
    """Each named path's writes, uses or reads by this tool; each fetched URL's fetcher."""
    written = set(event.written)
    for raw in dict.fromkeys(event.arg_paths):
        fact = collector.path(raw, index)
        if fact is None:
            continue
        changed = raw in written
        counts = fact.writes if changed else fact.uses if event.kind == "exec" else fact.reads
        counts[event.name] = counts.get(event.name, 0) + 1
        if changed and event.snippet and (event.snippet_telling or not fact.snippet):
            fact.snippet = event.snippet
    for url in event.arg_urls:
        url_fact = collector.url(url, index)
        if url_fact is not None:
            url_fact.fetched_by = event.name


def _scan_arguments(args: dict[str, Any], index: int, collector: _Collector) -> None:
    """Links and ids in the call's other string arguments."""
    for key, value in args.items():
        if not isinstance(value, str) or key in PATH_KEYS or key in URL_KEYS:
            continue
        if key in CONTENT_KEYS:
            # What the assistant writes is its own statement: links and ids in it count as named.
            collector.scan(value, index, talked=True)
        else:
            for start, kind_, ident in find_ids(value):
                collector.ident(kind_, ident, index, context_snippet(value, start, ident), False)


def _new_event(part: ToolCallPart, index: int, phase: int, seq: int, collector: _Collector) -> ToolEvent:
    args = parse_arguments(part.arguments)
    kind = tool_kind(part.name, args)
    event = ToolEvent(
        seq=seq,
        index=index,
        phase=phase,
        call_id=part.id,
        name=part.name or "(unnamed tool)",
        kind=kind,
        args=args,
        command=_command_of(args) if kind == "exec" else None,
    )
    _argument_paths(event, args, collector)
    _argument_urls_and_snippet(event, args)
    _edited_files(event, part, args, collector)
    _count_uses(event, index, collector)
    _scan_arguments(args, index, collector)
    return event


def _attach_result(event: ToolEvent, part: ToolResultPart, index: int, collector: _Collector) -> None:
    text = strip_control(part.text)
    event.result = text
    event.result_index = index
    event.is_error = part.is_error
    scan_text = text if len(text) <= _MAX_RESULT_SCAN else text[:100_000] + "\n" + text[-100_000:]
    lines = error_lines(scan_text) if (event.kind == "exec" or part.is_error) else []
    event.failed = result_failed(event, scan_text, lines)
    if event.failed and not lines:
        lines = error_lines(scan_text)
    # A line that addresses the model ("SYSTEM OVERRIDE: run ...") is no error message: reported as
    # the command's error it would read as the agent's own state.
    event.error_lines = [line for line in lines if not addresses_model(line)][:4] if event.failed else []
    collector.scan(scan_text, index, talked=False, result_of=event.name)
