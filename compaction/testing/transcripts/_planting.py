"""Planting: a schedule of facts spread over the whole session, woven into the messages that can
hold them, in the templated (cue-word) or the held-out paraphrased wording."""

from __future__ import annotations

import random
from collections import deque

from compaction.testing.transcripts._fact_values import _FactMaker
from compaction.testing.transcripts._types import CATEGORIES, PlantedFact

# Planted facts per message, by category (at least 2 of each in any session).
_FACT_RATES: dict[str, float] = {
    "path": 1 / 120,
    "url": 1 / 150,
    "identifier": 1 / 120,
    "error": 1 / 150,
    "number": 1 / 130,
    "command": 1 / 150,
    "decision": 1 / 180,
    "constraint": 1 / 350,
    "next_step": 1 / 220,
}


# ------------------------------------------------------------------------------------------------
# Paraphrased facts: the same kinds of fact, worded without the classifier's cue words
# ------------------------------------------------------------------------------------------------
#
# Held out: these phrasings are for measuring only. They must never be used to tune the offline
# summarizer's classifier (its cue lists, patterns or tests), or the measure they give is void.
# The templated forms above speak the classifier's language ("Decision: I'll ..., because ...",
# "Important: ...", "Next step: ..."); these say the same with none of :data:`CUE_WORDS`: a choice
# with its reason, a rule stated as a fact about the world, a pending task as an item on a list.
# The sentence forms are below; a value that itself holds a cue word is worded both ways by its
# maker above (:meth:`_FactMaker._worded`).

CUE_WORDS: tuple[str, ...] = (
    "decision",
    "decided",
    "decide",
    "because",
    "since",
    "the reason",
    "i'll",
    "i will",
    "i'm going to",
    "we'll",
    "let's",
    "next step",
    "next,",
    "then",
    "after this",
    "after that",
    "afterwards",
    "important",
    "rule",
    "must",
    "never",
    "always",
    "only",
    "don't",
    "do not",
    "should",
    "todo",
    "pending",
    "remaining",
    "instead of",
    "rather than",
    "please",
    "from now on",
    "going forward",
    "not allowed",
    "required",
)
"""Words and phrases the templated facts and the classifier's cues use: no paraphrased sentence
that plants a decision, constraint or next step holds one (as a whole word, any case)."""


_USER_TPL_PLAIN: dict[str, tuple[str, ...]] = {
    "decision": ("My call: {v}, seeing that {d}.", "Better to {v}; {d}."),
    "constraint": ("For the record, {v}.", "Heads-up: {v}.", "Worth knowing: {v}."),
    "next_step": ("Queued for you behind this: {v}.", "On the list for when this lands: {v}."),
}
_ASSISTANT_TPL_PLAIN: dict[str, tuple[str, ...]] = {
    "decision": (
        "Weighing it up, the better option is to {v}: {d}.",
        "Having compared the options, the way forward is to {v}. What tipped it: {d}.",
    ),
    "next_step": ("Still open on my list: {v}.", "Queued up behind this fix: {v}."),
}


_HOSTS: dict[str, frozenset[str]] = {
    "user": frozenset(CATEGORIES),
    "assistant": frozenset(c for c in CATEGORIES if c != "constraint"),
    "result": frozenset(("path", "url", "identifier", "error", "number")),
}
_USER_TPL: dict[str, tuple[str, ...]] = {
    "path": (
        "The problem is probably somewhere in {v}.",
        "Please also have a look at {v} while you're in there.",
        "I touched {v} last week, so check that too.",
    ),
    "url": ("Background is here: {v}", "The details are at {v} if you need them.", "Someone reported this at {v}"),
    "identifier": ("This is tracked as {d} {v}.", "For reference, the {d} is {v}.", "Use {d} {v} as the baseline."),
    "error": ("When I try it I get `{v}`.", "The logs from this morning say: {v}", "It fails with {v}"),
    "number": ("The {d} we need is {v}.", "Last time the {d} was {v}, so use that as the baseline."),
    "command": ("Run `{v}` before you finish.", "You can reproduce it with `{v}`."),
    "decision": ("Let's {v}, because {d}.", "I've decided to {v}, since {d}."),
    "constraint": ("{v}.", "Important: {v}.", "One rule for this: {v}."),
    "next_step": ("When that's done, {v}.", "After this, please {v}."),
}
_ASSISTANT_TPL: dict[str, tuple[str, ...]] = {
    "path": ("The relevant part is in {v}.", "I'll also need to change {v}.", "Found it: {v} handles this."),
    "url": ("According to {v}, this is expected.", "Source: {v}"),
    "identifier": ("That is {d} {v}.", "Noted the {d}: {v}."),
    "error": ("The root cause is `{v}`.", "It fails with `{v}`."),
    "number": ("The {d} is now {v}.", "Measured {d}: {v}."),
    "command": ("I'll run `{v}` to confirm.", "To reproduce: `{v}`."),
    "decision": ("Decision: I'll {v}, because {d}.", "I'm going to {v}; the reason is that {d}."),
    "next_step": ("Next step: {v}.", "Next, I will {v}."),
}
_RESULT_TPL: dict[str, tuple[str, ...]] = {
    "path": ("saved {v}", "  -> {v}", "file: {v}", "\tmodified:   {v}"),
    "url": ("See also: {v}", "link: {v}", "  {v}"),
    "identifier": ("{d}: {v}", "{d} {v}"),
    "error": ("{v}", "ERROR {v}", "E   {v}"),
    "number": ("{d}: {v}", "{d} = {v}"),
}


class _Planter:
    def __init__(self, rng: random.Random, n: int, maker: _FactMaker) -> None:
        self.rng = rng
        self.maker = maker
        self.plain = maker.phrasing == "paraphrased"
        self.flavor = "coding"
        self.facts: list[PlantedFact] = []
        self.queues: dict[str, deque[int]] = {}
        for category in CATEGORIES:
            count = max(2, round(n * _FACT_RATES[category]))
            self.queues[category] = deque(int((i + rng.random()) * n / count) for i in range(count))

    def _due(self, host: str, index: int, limit: int) -> list[str]:
        out: list[str] = []
        for category in CATEGORIES:
            queue = self.queues[category]
            if queue and queue[0] <= index and category in _HOSTS[host]:
                queue.popleft()
                out.append(category)
                if len(out) >= limit:
                    break
        return out

    def _new(self, category: str, index: int) -> tuple[str, str]:
        value, detail = self.maker.make(category, self.flavor)
        self.facts.append(PlantedFact(category, value, index, detail))
        return value, detail

    def text(self, host: str, text: str, index: int) -> str:
        """``text`` with the facts due at ``index`` woven in as sentences (user or assistant)."""
        templates = _USER_TPL if host == "user" else _ASSISTANT_TPL
        plain = _USER_TPL_PLAIN if host == "user" else _ASSISTANT_TPL_PLAIN
        for category in self._due(host, index, 2):
            value, detail = self._new(category, index)
            forms = plain[category] if self.plain and category in plain else templates[category]
            sentence = self.rng.choice(forms).format(v=value, d=detail)
            if not text:
                text = sentence
            elif self.rng.random() < (0.75 if host == "user" else 0.5):
                text = f"{text.rstrip()} {sentence}"
            else:
                text = f"{sentence} {text}"
        return text

    def result(self, text: str, index: int, limit: int = 1) -> str:
        """``text`` (a tool result) with the facts due at ``index`` as lines at random positions."""
        for category in self._due("result", index, limit):
            value, detail = self._new(category, index)
            line = self.rng.choice(_RESULT_TPL[category]).format(v=value, d=detail)
            if not text:
                text = line
                continue
            cut = text.find("\n", self.rng.randrange(len(text)))
            text = f"{text}\n{line}" if cut < 0 else f"{text[: cut + 1]}{line}\n{text[cut + 1 :]}"
        return text
