"""The artifact ledger: an index of the exact references (files, URLs, ids, commands, errors) a
summary must not lose.

Summaries keep decisions but drop the artifact trail: in published measurements file paths
survive a compaction ~10 % of the time and commands ~0.2 %. The ledger collects them
deterministically from the compacted span, and :func:`render_ledger` appends only what the summary
did not already keep verbatim, within a token budget (the run's counter), with secrets redacted.
It is an index, not a dump: the originals stay archived and one recall away, so the ledger lists
what an agent most needs to name without asking.

What gets the budget when not everything fits, in tiers: first what the conversation itself named
(the user's or the agent's words), the files the agent's calls edited and the commands that failed;
then what tools reported and what the agent's calls touched; rows of listings last. Within a tier
the categories (errors and tool failures counting as one) share the budget evenly by length (more
of the short ids than of the long error lines); within a category the *families* take turns (a
directory, a site, an id format, a program with its options, an error's type and first word, each
split by where it was seen and whether an earlier ledger kept it), rarer families first, newest
first within each, so a bulk listing cannot push the one-off references out. A tool failure that
repeats is one line with its count. Each category is listed under a heading that says where its
items were seen, so a later compaction that carries them forward (:func:`carry_forward`, with the
references the earlier summary named, so a later summary that drops them does not lose them)
ranks them as before.

>>> from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart
>>> call = ToolCallPart(id="c1", name="bash", arguments='{"command": "pytest -x"}')
>>> result = ToolResultPart(call_id="c1", content="FAILED tests/test_io.py::test_read")
>>> msgs = [Message(role="assistant", id="a1", parts=(call,)), Message(role="tool", id="t1", parts=(result,))]
>>> ledger = collect_artifacts(msgs)
>>> [i.value for i in ledger.commands], [i.value for i in ledger.files]
(['pytest -x'], ['tests/test_io.py'])
>>> print(render_ledger(ledger, summary_text="We ran pytest -x.", max_tokens=200))
## Artifacts
Exact references from the compacted span, most recent first:
Files:
- tests/test_io.py
Errors:
- FAILED tests/test_io.py::test_read
"""

from __future__ import annotations

import heapq
import math
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import accumulate

from compaction._cache import memoize_text
from compaction.budget import last_true
from compaction.redact import redact_secrets
from compaction.stages._ledger_collect import _collect_text, _collected, _Collector, collect_artifacts

# The memoized scans, bound here too, as before collecting had a module of its own (their memos
# live in each run's scope: see compaction._cache).
from compaction.stages._ledger_collect import _scan as _scan
from compaction.stages._ledger_collect import _text_commands as _text_commands
from compaction.stages._ledger_items import _CATEGORIES, _TITLES, ArtifactLedger, LedgerItem, ToolFailure, family
from compaction.transcript import Message

__all__ = [
    "ArtifactLedger",
    "LedgerItem",
    "ToolFailure",
    "carry_forward",
    "collect_artifacts",
    "family",
    "redacted_item",
    "render_ledger",
    "scan_for_ledger",
    "split_artifacts",
]

_WHOLE_REDACTION = re.compile(r"\s*(?:\[REDACTED(?::\w+)?\]\s*)+")


# The message index of carried items: older than every new item (index >= 0).
NAMED_BY_EARLIER_SUMMARY = -1
FROM_EARLIER_LEDGER = -2

_SECTION_HEADING = "## Artifacts"
# Where an item was seen (see _source), in the order a category lists them, and the suffix of the
# heading it is listed under: a later compaction that carries the item forward reads it back, so
# an item keeps its rank however often it is carried.
_SOURCES = {
    "said": " (named in the conversation)",
    "edited": " (edited)",
    "failed": " (failed)",
    "called": " (tool-call arguments)",
    "output": "",
    "listed": " (rows of listings)",
}
# When not everything fits, what the conversation said and what a tool reported on its own come
# first; then the arguments of the agent's own calls (the trajectory the summary narrates: the
# files it opened, the commands it ran, the ids it fetched, repeated call after call); rows of
# listings last.
_RANKS = {"said": 0, "edited": 0, "failed": 0, "output": 1, "called": 1, "listed": 2}
# "bash: KeyError: 'x'", "bash (3 times): KeyError: 'x'", and the older "bash (call_1): KeyError: 'x'".
_FAILURE_LINE = re.compile(r"^(?P<tool>.+?)(?: \((?:(?P<times>\d+) times|(?P<call>[^()]*))\))?: (?P<error>.*)$")


def split_artifacts(summary: str) -> tuple[str, str]:
    """``summary`` without its "## Artifacts" section, and that section ("" when there is none)."""
    at = summary.find("\n" + _SECTION_HEADING)
    if at < 0:
        return (summary, "") if not summary.startswith(_SECTION_HEADING) else ("", summary)
    return summary[:at].rstrip(), summary[at + 1 :]


def carry_forward(ledger: ArtifactLedger, earlier_section: str, earlier_summary: str = "") -> ArtifactLedger:
    r"""``ledger`` plus what an earlier compaction kept, as older than anything new, so successive
    compactions do not drop it (drift): the references named in the earlier summary's text (its
    next version may leave some out), then the items of its "## Artifacts" section.

    >>> old = "## Artifacts\nExact references from the compacted span, most recent first:\nFiles:\n- a.py\n- b.py"
    >>> [i.value for i in carry_forward(ArtifactLedger(files=(LedgerItem("b.py", 3),)), old, "edited c.py").files]
    ['b.py', 'c.py', 'a.py']
    """
    titles = {
        title + suffix: (category, source) for category, title in _TITLES.items() for source, suffix in _SOURCES.items()
    }
    carried: dict[str, list[str]] = {category: [] for category in _TITLES}
    sources: dict[str, set[str]] = {source: set() for source in _SOURCES}
    category: str | None = None
    source = "output"
    for line in earlier_section.splitlines():
        if line.endswith(":") and line[:-1] in titles:
            category, source = titles[line[:-1]]
        elif line.startswith("- ") and category is not None:
            carried[category].append(line[2:])
            sources[source].add(line[2:])
    scan = _Collector()
    _collect_text(scan, earlier_summary, 0, "user")  # its error lines are errors it chose to keep
    named = scan.ledger()
    if not any(carried.values()) and not named.total:
        return ledger

    def merged(current: tuple[LedgerItem, ...], category: str) -> tuple[LedgerItem, ...]:
        older = [(v.value, NAMED_BY_EARLIER_SUMMARY) for v in getattr(named, category, ())]
        older += [(v, FROM_EARLIER_LEDGER) for v in carried[category]]
        seen = {item.value for item in current}
        out = list(current)
        for value, index in older:
            if value not in seen:
                seen.add(value)
                out.append(LedgerItem(value, index))
        return tuple(out)

    failures = list(ledger.tool_failures)
    for line in carried["tool_failures"]:
        if m := _FAILURE_LINE.match(line):
            times = int(m["times"] or 1)
            failures.append(ToolFailure(m["tool"], m["call"] or "", m["error"], FROM_EARLIER_LEDGER, times))
    return ArtifactLedger(
        files=merged(ledger.files, "files"),
        urls=merged(ledger.urls, "urls"),
        identifiers=merged(ledger.identifiers, "identifiers"),
        commands=merged(ledger.commands, "commands"),
        errors=merged(ledger.errors, "errors"),
        tool_failures=tuple(failures),
        mentioned=ledger.mentioned | sources["said"],
        called=ledger.called | sources["called"],
        edited=ledger.edited | sources["edited"],
        failed=ledger.failed | sources["failed"],
        # A carried row stays a row unless this span singled it out; a row of this span that was
        # singled out before is not one.
        listed=(ledger.listed - sources["output"])
        | (sources["listed"] - {i.value for c in _CATEGORIES for i in getattr(ledger, c)}),
    )


def _quarter_chars(text: str) -> int:
    return math.ceil(len(text) / 4)


_Entry = tuple[int, str, str, str]  # (recency position, category, shown text, source)


def _source(ledger: ArtifactLedger, key: str, last_seen: int) -> str:
    """Where an item was seen: the conversation's own words (or the earlier summary's), a tool
    call's arguments, a tool's output, or only rows of listings. It is part of the item's family, so
    a value the user or the agent wrote is not lost in the flood of its kind in tool output; an
    earlier ledger's items keep the source they were listed under."""
    if last_seen == NAMED_BY_EARLIER_SUMMARY or key in ledger.mentioned:
        return "said"
    if key in ledger.edited:
        return "edited"
    if key in ledger.failed:
        return "failed"
    if key in ledger.called:
        return "called"
    return "listed" if key in ledger.listed else "output"


def _failure_groups(failures: Sequence[ToolFailure]) -> list[tuple[int, str, str, int]]:
    """``(last seen, tool, error, times)`` per tool and error: one line for a failure that repeats
    (call ids say nothing once the calls are summarized, and an agent stuck on one error retries
    it many times; the count is what tells)."""
    groups: dict[tuple[str, str], list[int]] = {}  # (tool, error) -> [last seen, times]
    for f in failures:
        group = groups.setdefault((f.tool, f.error), [f.last_seen, 0])
        group[0] = max(group[0], f.last_seen)
        group[1] += f.times
    return [(seen, tool, error, times) for (tool, error), (seen, times) in groups.items()]


def _missing(ledger: ArtifactLedger, summary_text: str, redact: bool) -> list[_Entry]:
    """Every item the summary does not contain verbatim, in the order the budget takes them."""
    by_category = _not_in_summary(_candidates(ledger), ledger, summary_text, redact)
    return _share_by_room([_family_turns(by_category, group) for group in _CATEGORY_GROUPS])


# A failed call's error is an error: tool failures and errors share one part of the budget.
_CATEGORY_GROUPS = (("files",), ("urls",), ("identifiers",), ("commands",), ("tool_failures", "errors"))


def _candidates(ledger: ArtifactLedger) -> list[tuple[int, str, str, str]]:
    """Every item of the ledger as ``(last_seen, category, key checked, shown)``: the failed calls
    grouped by tool and error, then each category's items (an error shown with its tool is not
    listed again)."""
    entries: list[tuple[int, str, str, str]] = []
    for last_seen, tool, error, times in _failure_groups(ledger.tool_failures):
        shown = f"{tool}: {error}" if times == 1 else f"{tool} ({times} times): {error}"
        entries.append((last_seen, "tool_failures", error, shown))
    failure_errors = {f.error for f in ledger.tool_failures}
    for category in _CATEGORIES:
        for item in getattr(ledger, category):
            if category == "errors" and item.value in failure_errors:
                continue  # already shown with its tool
            entries.append((item.last_seen, category, item.value.rstrip("…").rstrip(), item.value))
    return entries


def _not_in_summary(
    entries: Sequence[tuple[int, str, str, str]], ledger: ArtifactLedger, summary_text: str, redact: bool
) -> dict[str, list[tuple[_Entry, str]]]:
    """Per category, newest first, the entries the summary does not hold, each with its family
    (its source and kind); with ``redact``, shown redacted, and left out when nothing but a secret."""
    by_category: dict[str, list[tuple[_Entry, str]]] = {}  # (entry, family)
    for position, (last_seen, category, key, shown) in enumerate(sorted(entries, key=lambda e: -e[0])):  # stable
        if key in summary_text:
            continue
        source = _source(ledger, shown, last_seen)
        # What an earlier ledger kept takes turns with the new items of its kind instead of
        # queueing behind all of them.
        carried = "earlier " if last_seen == FROM_EARLIER_LEDGER else ""
        kind = f"{carried}{source}:" + family("errors" if category == "tool_failures" else category, key)
        if redact:
            cleaned, n = redacted_item(shown)
            if n and _WHOLE_REDACTION.fullmatch(cleaned):
                continue  # the item was nothing but a secret: it never appears
            if n and redacted_item(key)[0] in summary_text:
                continue
            shown = cleaned
        by_category.setdefault(category, []).append(((position, category, shown, source), kind))
    return by_category


def scan_for_ledger(message: Message, *, redact_items: bool) -> None:
    """Make the ledger's scans of ``message`` (as the zone reads it: redacted when the run
    redacts) in the active memo scope, and with ``redact_items`` its items as the ledger shows
    them: what a managed session does as each message is appended, so that the next compaction's
    ledger reads them instead of scanning."""
    # The values as the ledger's items hold them, without making a ledger of one message.
    seen = _collected([message], redact=False).seen
    if redact_items:
        for category in _CATEGORIES:
            for value in seen[category]:
                redacted_item(value)


@memoize_text
def redacted_item(text: str) -> tuple[str, int]:
    """:func:`redact_secrets` of a ledger item, memoized in the run's (or the managed session's)
    scope: an item is met again in every compaction that carries it forward, and a managed session
    redacts each message's items as the message is appended."""
    return redact_secrets(text)


def _family_turns(by_category: dict[str, list[tuple[_Entry, str]]], group: Sequence[str]) -> list[_Entry]:
    """The entries of a group of categories in the order they are taken: the families take turns,
    the rarer first, each newest first, after the rank of their source (:data:`_RANKS`). A flood
    of one kind (the links of a search page, the lines of a log, a `git log`) cannot push the
    rarer references out."""
    items = [x for category in group for x in by_category.get(category, [])]
    sizes = Counter(kind for _, kind in items)
    turn: Counter[str] = Counter()
    keyed = []
    for entry, kind in items:
        keyed.append((_RANKS[entry[3]], turn[kind], sizes[kind], entry[0], entry))
        turn[kind] += 1
    return [entry for *_, entry in sorted(keyed)]


def _share_by_room(queues: Sequence[Sequence[_Entry]]) -> list[_Entry]:
    """The groups' queues as one order. Tiers first: everything named in the conversation, edited
    or failed, in every category, before what tools reported or the agent's calls merely touched,
    before rows of listings. Within a tier the groups take turns by the room they have used: the
    next item comes from the group whose chosen lines are shortest so far, so each gets an even
    share of the budget (a list of short ids holds more lines than a list of long error messages)."""
    order: list[_Entry] = []
    used = [(_RANKS[queues[n][0][3]], 0, n) for n in range(len(queues)) if queues[n]]
    heapq.heapify(used)
    taken = [0] * len(queues)
    while used:
        _, chars, n = heapq.heappop(used)
        entry = queues[n][taken[n]]
        order.append(entry)
        taken[n] += 1
        if taken[n] < len(queues[n]):
            heapq.heappush(used, (_RANKS[queues[n][taken[n]][3]], chars + len(entry[2]) + 3, n))
    return order


def _render(missing: list[_Entry], kept: int) -> str:
    lines = ["## Artifacts", "Exact references from the compacted span, most recent first:"]
    groups: dict[tuple[str, str], list[str]] = {}
    for _, category, text, source in sorted(missing[:kept]):
        groups.setdefault((category, source), []).append(text)
    for category in ("tool_failures", *_CATEGORIES):
        for source, suffix in _SOURCES.items():
            if shown := groups.get((category, source)):
                lines.append(f"{_TITLES[category]}{suffix}:")
                lines.extend(f"- {text}" for text in shown)
    omitted = len(missing) - kept
    if omitted:
        noun = "reference" if omitted == 1 else "references"
        lines.append(f"({omitted} more {noun} omitted to fit the token budget.)")
    return "\n".join(lines)


def render_ledger(
    ledger: ArtifactLedger,
    *,
    summary_text: str,
    max_tokens: int,
    redact: bool = True,
    count: Callable[[str], int] | None = None,
) -> str:
    """The "## Artifacts" section for the items ``summary_text`` lacks, within ``max_tokens`` as
    ``count`` measures them (the run's token counter; ``ceil(chars / 4)`` without one), each category
    listed most recent first under a heading per source (where its items were seen). When not
    everything fits, what was named in the conversation, edited or failed comes first in every
    category; within that tier and the next ones the categories share the budget evenly by length,
    and within each the families take turns (see the module docstring): rows of listings, then the
    oldest items of the largest families go first. Empty when nothing is missing or nothing fits.

    >>> led = ArtifactLedger(files=(LedgerItem("src/b.py", 3), LedgerItem("src/a.py", 1)))
    >>> print(render_ledger(led, summary_text="edited src/a.py", max_tokens=100))
    ## Artifacts
    Exact references from the compacted span, most recent first:
    Files:
    - src/b.py
    """
    missing = _missing(ledger, summary_text, redact)
    measure = count or _quarter_chars

    def fits(kept: int) -> bool:
        return measure(_render(missing, kept)) <= max_tokens

    if not missing:
        return ""
    whole = _render(missing, len(missing))
    whole_tokens = measure(whole)
    if whole_tokens <= max_tokens:
        return whole
    # With the "omitted" line present, the length grows with every kept item (a line of at least
    # two tokens, against at most one the omitted count saves): the most that fit is searched from
    # a guess, the items whose lines, counted one by one, add up to the room the headings (as the
    # whole section has them) and the omitted line leave. A line counted alone differs from the
    # same line in the section by a token or so, so the guess is close: two or three counts of the
    # section instead of a halving's ten.
    lines = list(accumulate(measure(f"- {entry[2]}") + 1 for entry in missing))
    headings = whole_tokens - lines[-1]
    omitted = measure(f"({len(missing)} more references omitted to fit the token budget.)") + 1
    guess = min(len(missing) - 1, max(1, bisect_right(lines, max_tokens - headings - omitted)))
    lo = last_true(0, len(missing) - 1, fits, guess)
    return _render(missing, lo) if lo > 0 and fits(lo) else ""
