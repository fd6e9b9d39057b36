"""Reading a model summarizer's reply: a reply cut at its output limit made visible, and the usage it
reports.
"""

from __future__ import annotations

import re
from typing import Any

from compaction.patterns import ELLIPSIS
from compaction.summarizers.reply_check import CUT_NOTE

# finish_reason values of an answer stopped by its output cap (litellm maps Anthropic's
# "max_tokens" to "length"; the raw value is accepted too).
CUT_FINISH = frozenset({"length", "max_tokens"})


# No tokenizer packs more than this many characters into a token on average over a summary, so a
# reply longer than this per token of its cap is not an answer within the cap: a broken or hostile
# endpoint. It is cut before anything reads it (a 50 MB reply once took minutes to process).
MAX_CHARS_PER_TOKEN = 16


_BULLET_ONLY = re.compile(r"^\s*(?:[-*+>]|\d+[.)]|#+)?\s*$")


def mark_cut_reply(text: str) -> str:
    r"""An answer stopped at its output limit, with the cut made visible.

    The provider stops mid-token, so the last token may be part of a longer one: it is dropped
    (and a list bullet left alone on its line with it). A line that stops short gets the ellipsis
    glued to what remains, as the extractive summarizer marks its cuts, an open code span is
    closed, and a note line says the summary stops there.

    >>> print(mark_cut_reply("## Files\n- src/app/main.py\n- src/storage/e"))
    ## Files
    - src/app/main.py
    [... the summarizer reached its output limit here ...]
    >>> print(mark_cut_reply("ran `pytest tests/test_a"))
    ran `pytest...`
    [... the summarizer reached its output limit here ...]
    """
    body = text.rstrip()
    whole_line = "\n" in text[len(body) :]  # the model had ended its last line
    if body == text:  # the last token may be part of a longer one
        space = max(body.rfind(" "), body.rfind("\n"), body.rfind("\t"))
        body = body[:space] if space > 0 else body
    lines = body.rstrip(" \t,;:-(").split("\n")
    while len(lines) > 1 and _BULLET_ONLY.match(lines[-1]):
        lines.pop()
        whole_line = True
    body = "\n".join(lines).rstrip(" \t,;:-(")
    if body.endswith("`") and body.count("`") % 2 == 1:
        body = body[:-1].rstrip(" \t,;:-(")
    if body and not whole_line and not body.endswith(("\u2026", ELLIPSIS)):
        body += ELLIPSIS
    if body.count("`") % 2 == 1:
        body += "`"
    return f"{body}\n{CUT_NOTE}" if body else CUT_NOTE


def reported_usage(response: Any) -> tuple[int, int, int]:
    usage = getattr(response, "usage", None)
    if usage is None:
        return 0, 0, 0
    prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion = int(getattr(usage, "completion_tokens", 0) or 0)
    details = getattr(usage, "prompt_tokens_details", None)
    # litellm normalizes Anthropic's cache_read_input_tokens into prompt_tokens_details too;
    # the raw field is the fallback for responses that skipped normalization.
    cached = getattr(details, "cached_tokens", None) or getattr(usage, "cache_read_input_tokens", None) or 0
    return prompt, completion, int(cached)
