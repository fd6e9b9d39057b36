"""Reading a model summarizer's reply: a reply cut at its output limit made visible, and the usage it
reports.

Cut replies
    * an answer cut at the output limit (``finish_reason`` ``"length"``; litellm maps Anthropic's
      ``"max_tokens"`` stop reason to it) ends mid-token: :func:`mark_cut_reply` drops the partial
      last token and marks the cut with an ellipsis, as the extractive summarizer marks its cuts,
      so no half of a path or id passes as whole.
    * an answer longer than 16 characters per token of its cap is cut to that length before
      anything else reads it, and marked the same way (a runaway or hostile endpoint).

Usage and cost
    ``input_tokens`` is the provider's full prompt count, cached reads included (litellm folds
    Anthropic's ``cache_read_input_tokens`` back in); ``cached_input_tokens`` is the cached part.
    ``cost_usd`` comes from litellm's offline price table and is ``None`` for models it does not
    know. ``calls`` is the number of HTTP attempts made.
"""

from __future__ import annotations

import re
from typing import Any

from compaction.patterns import ELLIPSIS
from compaction.summarizers.base import EmptySummaryError
from compaction.summarizers.llm_request import text_of
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


def read_reply(response: Any, model: str, max_tokens: int, *, reasons: bool) -> tuple[str, bool]:
    """The text of a completion ``response`` and whether its output limit cut it (a reply over
    :data:`MAX_CHARS_PER_TOKEN` per token of ``max_tokens`` is cut there and marked as cut).
    :class:`EmptySummaryError` when it holds no text; ``reasons``: the model writes reasoning
    tokens first, which may have used up its whole limit."""
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise EmptySummaryError(f"{model} returned no choices")
    message = getattr(choices[0], "message", None)
    text = text_of(getattr(message, "content", None))
    limit = max_tokens * MAX_CHARS_PER_TOKEN
    finish = str(getattr(choices[0], "finish_reason", None) or "")
    cut = finish in CUT_FINISH
    if len(text) > limit:
        text, cut = mark_cut_reply(text[:limit]), True
    elif text.strip() and cut:
        text = mark_cut_reply(text)
    text = text.strip()
    if not text:
        if getattr(message, "tool_calls", None):
            raise EmptySummaryError(f"{model} answered with only a tool call and no text")
        if cut and reasons:
            raise EmptySummaryError(
                f"{model} spent its whole output limit on reasoning and wrote no summary (raise reasoning_headroom)"
            )
        raise EmptySummaryError(f"{model} returned an empty or whitespace-only summary")
    return text, cut
