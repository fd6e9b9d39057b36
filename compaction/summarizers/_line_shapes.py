"""What a line is by its shape, whoever wrote it: the speaker narrating the move they are about to
make, a tool's progress meter, a line of code that reads as words, a user's go-ahead. The extractive summarizer's
classifier (:mod:`compaction.summarizers._classify`) never takes such a line for a decision, a rule
or pending work.
"""

from __future__ import annotations

import re

__all__ = ["ANNOUNCES", "CODE_SPAN", "INTRODUCES", "goes_ahead", "is_code_shaped", "is_meter", "is_narration"]


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


# Narration of what the speaker is about to do right now ("Let's run the tests again:", "Now I'll
# check the logs", "First, let me look at ...", "I'll start by exploring"): it says what was said,
# not what was chosen or what is left. A plan put off ("Next, I will open a PR") is a next step,
# and a bare "I'll X with Y" may state a method (a decision): neither is narration.
_NARRATION = _rx(
    r"^(?:(?:now|next|then|first|finally|so|ok(?:ay)?|great|good|perfect|alright|all right|and|also|again|"
    r"actually|first of all|to (?:start|begin|confirm|verify)|in (?:the )?meantime)[,!.:]?\s+)*"
    r"(?:let me|let's|lets|let us|time to)\b"
    r"|^(?:(?:now|first|so|ok(?:ay)?|great|good|perfect|alright|all right|again|actually|first of all)[,!.:]?\s+)+"
    r"(?:i'll|i will|i'm going to|i am going to|we'll|we will|we're going to|i need to|we need to)\b"
    r"|^(?:i'll|i will|we'll|we will)\s+(?:start|begin)\s+(?:by|with)\b"
    # "Waiting 30 seconds and retrying the same job.": the pause being made, not a value of anything.
    r"|^(?:(?:now|so|ok(?:ay)?)[,!.:]?\s+)?(?:waiting|retrying|sleeping|pausing|backing off)\b"
    # "I'll first read ...", "I'll now check ...": the move about to be made.
    r"|^(?:i'll|i will|we'll|we will|let me)\s+(?:\w+\s+)?(?:first|now|quickly|go ahead and)\b"
    # "I'll help you implement ...": the opening of an answer, not a plan.
    r"|^(?:i'll|i will|i can|i'd be happy to|i'm happy to|i am happy to|happy to)\s+(?:help|assist)\b"
    # "Based on the test results, let's focus on ...": a lead-in, then the move.
    r"|^(?:based on|looking at|judging by|from|after|with)\b[^,]{0,120},\s+(?:now\s+)?"
    r"(?:let me|let's|lets|let us|i'll|i will|we'll|we will|i'm going to|i am going to)\b"
)
# A reason that makes a move a choice: "as the issue says" or "since `v2`" (a comparison, a point
# in time) is not one.
_STRONG_REASON = _rx(
    r"\b(?:because|so that|given that|due to|the reason is|which means|otherwise|in order to|"
    r"to (?:avoid|prevent|ensure|make sure|keep|preserve|guarantee)|as (?:it|they|we|this|that) (?!is\b|are\b)\w+|"
    r"since (?!`|\d|the (?:start|beginning|last|first|previous)\b|then\b|last\b|yesterday\b|before\b))"
)
# A line that announces what follows ("... the results:", "Here's the fix:") is narration too.
ANNOUNCES = re.compile(r"[:\u2026]\s*$|\.\.\.\s*$")
INTRODUCES = re.compile(r":\s*$")
# A progress meter or transfer statistics of a tool: "Counting objects: 100% (11/11), done.",
# "12.3 MiB | 4.56 MiB/s", "45%|#####     | 9/20 [00:03<00:04", "Tokens: 2,028 sent, 300 received",
# "Requirement already satisfied: idna>=2.5 in ...", "Resolved 58 packages in 635ms".
_METER = _rx(
    r"\b\d{1,3}(?:\.\d+)?\s?%\s*\(\d+/\d+\)"
    r"|\d(?:[\d.,]*\d)?\s?(?:[kmgt]i?b|bytes?|b)/s\b"
    r"|\d+(?:\.\d+)?\s?%\s*\|"
    r"|\|[#=\u2588\u2589\u258a\u258b\u258c\u258d\u258e\u258f >-]{4,}\|"
    r"|\[\d{1,2}:\d{2}(?::\d{2})?<\d{1,2}:\d{2}"
    r"|\b[\d,.]+[kmg]?\s+(?:sent|received|transferred|uploaded|downloaded)\b.{0,40}\b[\d,.]+[kmg]?\s+"
    r"(?:sent|received|transferred|uploaded|downloaded)\b"
    r"|^\s*(?:downloading|uploading|receiving|fetching|pulling|pushing|extracting)\s+\S+\s+\(\d[\d.,]*\s?(?:[kmgt]i?b|bytes?)\)"
    # A package installer's progress: pip's status lines, uv's counts with their timings.
    r"|^\s*(?:requirement already satisfied|collecting|using cached|obtaining|installing collected packages|"
    r"building wheels? for|created wheel for|stored in directory|preparing metadata|getting requirements to build|"
    r"attempting uninstall|found existing installation|uninstalling)\b"
    r"|^\s*(?:resolved|prepared|installed|uninstalled|audited|built|downloaded)\s+\d+\s+packages?\s+in\s+[\d.]+\s*m?s\b"
)

# A code line that reads as words (``remaining = limit - total``, ``self.io.tool_output(f"...")``,
# ``f"{pad} tokens left"``): an assignment, a call or a string literal, not a sentence.
_CODE_SHAPED = re.compile(
    r"^\s*(?:[A-Za-z_][\w.\[\]'\"]*\s*(?:[-+*/%|&]|//)?=(?!=)\s*\S"
    r"|(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*\(.*\)[,;]?\s*$"
    r"|(?:[rfb]?[\"'][^\"']*[\"']\s*)+[,)]*\s*$"
    r"|(?:return|raise|yield|assert|await|import|from \S+ import|def|class|if|elif|for|while|with)\b.*:?\s*$(?<![.!?]))"
)


def is_narration(text: str) -> bool:
    """Is ``text`` narration of the speaker's own next move ("Let's run the tests again:", "Now
    I'll check the logs") with no reason given: neither a decision nor pending work?

    >>> is_narration("Let's run the tests again with the debug logs:")
    True
    >>> is_narration("I'll use a token bucket, because the queue drops events.")
    False
    """
    body = CODE_SPAN.sub("`code`", text.strip())
    if _STRONG_REASON.search(body) and not ANNOUNCES.search(body):
        return False  # a move with its reason is a decision
    return bool(_NARRATION.match(body)) or bool(ANNOUNCES.search(body))


def is_meter(text: str) -> bool:
    """Is ``text`` a progress meter or transfer statistics (percent done with counts, a speed, a
    progress bar, bytes or tokens sent and received)?

    >>> is_meter("Counting objects: 100% (11/11), done.")
    True
    >>> is_meter("Writing objects: 100% (6/6), 1.02 KiB | 1.02 MiB/s, done.")
    True
    >>> is_meter("Downloading wrapt-1.13.3.tar.gz (48 kB)")
    True
    >>> is_meter("Coverage is 71.9% now.")
    False
    """
    return _METER.search(text) is not None


def is_code_shaped(text: str) -> bool:
    """Is ``text`` a line of code that reads as words (an assignment, a dotted call, a string
    literal, a statement keyword)?

    >>> is_code_shaped("remaining = limit - total")
    True
    >>> is_code_shaped('print("Retry forever with no wait if an IOError occurs, raise any other errors")')
    True
    >>> is_code_shaped("The limit was raised to 40 because the queue overflowed.")
    False
    """
    return _CODE_SHAPED.match(text) is not None


CODE_SPAN = re.compile(r"`[^`]*`")


# A user turn that only approves what the agent proposed ("do it", "go ahead", "yes, continue"): it
# asks for the proposal, so the proposal is what its request line must say.
_GO_AHEAD = re.compile(
    r"^(?:(?:ok(?:ay)?|yes|yep|yeah|sure|sounds good|great|good|perfect|alright|fine|then)[\s,.!:)]*)*"
    r"(?:please[\s,]+)?(?:do (?:it|that|so|this|them)|go (?:on|ahead)(?: with (?:it|that|this))?|continue|proceed|"
    r"keep going|carry on|try (?:it|that)|make it so|implement (?:it|that|this)|(?:the )?next(?: one)?)"
    r"(?:[\s,]+please)?[\s.!:)]*$",
    re.I,
)
_GO_AHEAD_WORDS = 8


def goes_ahead(text: str) -> bool:
    """Whether a user turn only gives the go-ahead to what the agent proposed.

    >>> goes_ahead("DO IT"), goes_ahead("Sounds good, go ahead."), goes_ahead("do it in Rust instead")
    (True, True, False)
    """
    stripped = text.strip()
    return len(stripped.split()) <= _GO_AHEAD_WORDS and _GO_AHEAD.match(stripped) is not None
