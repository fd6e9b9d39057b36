""":func:`redact_if_needed`: a long text redacted only in the lines around its cues."""

from __future__ import annotations

from compaction._cache import memoize_text
from compaction.redact.base import _line_end
from compaction.redact.cues import _cue_spans, _has_cue
from compaction.redact.steps import _redact_all, _without_ansi, redact_secrets
from compaction.redact.whole_text import _ANSI_RE, _whole_text_steps

# Texts at least this long are redacted window by window (see _cue_windows), shorter ones at once.
_WINDOWED_MIN_CHARS = 4_096


# A value may follow its key or "Bearer" after line breaks: a window reaches this many non-blank
# lines past the cue's line.
_WINDOW_LINES_AFTER = 2


def _cue_windows(text: str, lowered: str) -> list[tuple[int, int]]:
    """Merged ``(start, end)`` spans of whole lines: each line with a cue and the lines after it
    (``lowered`` is ``text`` lower-cased, of the same length)."""
    windows: list[tuple[int, int]] = []
    pos = 0
    for cue_start, cue_end in _cue_spans(lowered, text):
        if cue_start < pos:
            continue
        start = text.rfind("\n", 0, cue_start) + 1
        end = cue_line_end = _line_end(text, cue_end)
        taken = 0
        while end < len(text) and taken < _WINDOW_LINES_AFTER:
            next_end = _line_end(text, end + 1)
            taken += bool(text[end + 1 : next_end].strip())
            end = next_end
        if windows and start <= windows[-1][1] + 1:
            windows[-1] = (windows[-1][0], max(end, windows[-1][1]))
        else:
            windows.append((start, end))
        pos = cue_line_end + 1  # cues on the lines taken along still open their own windows
    return windows


MEMO_MIN_CHARS = 256
"""Texts at least this long are redacted once per memo scope (see :func:`redact_if_needed`)."""


@memoize_text(min_chars=MEMO_MIN_CHARS)
def redact_if_needed(text: str) -> str:
    """``text`` with secrets redacted, as :func:`redact_secrets` does; a long text is redacted only
    in the lines around its cues (tool output of megabytes where a few lines of code assign a token).
    A text of :data:`MEMO_MIN_CHARS` or more is memoized in the active
    :class:`~compaction._cache.MemoScope` (a run's, or a managed session's, which redacts each text
    as it is appended): the stages that read a text each redact it. A shorter one (a line, an id)
    costs less to redact than to keep: it would only crowd the memo.

    >>> redact_if_needed("plain log line"), redact_if_needed("token=abcd1234efgh5678")
    ('plain log line', 'token=[REDACTED:token]')
    """
    if len(text) < _WINDOWED_MIN_CHARS:
        return redact_secrets(text)[0]
    redacted = _redact_windows(text)
    plain = _without_ansi(text)
    if plain is not None:
        redacted_plain = _redact_windows(plain)
        if redacted_plain != _ANSI_RE.sub("", redacted):
            return redacted_plain
    return redacted


def _redact_windows(text: str) -> str:
    text = _redact_cue_windows(text)
    return _whole_text_steps(text)[0]


def _redact_cue_windows(text: str) -> str:
    lowered = text.lower()
    if len(lowered) != len(text) or "private key" in lowered:
        # offsets would differ; a key block spans many lines
        return _redact_all(text)[0] if _has_cue(lowered) else text
    windows = _cue_windows(text, lowered)  # none without a cue: the text has nothing to redact
    if not windows:
        return text
    pieces: list[str] = []
    last = 0
    changed = False
    for start, end in windows:
        window = text[start:end]
        redacted = _redact_all(window)[0]
        changed = changed or redacted != window
        pieces += (text[last:start], redacted)
        last = end
    return "".join([*pieces, text[last:]]) if changed else text
