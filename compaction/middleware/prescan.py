"""The per-text scans of a message, done once when it enters a managed session.

A compaction reads mostly messages appended since the one before it, and most of its CPU used to be
the first scan of their texts. Those scans are pure functions of a text (and of settings that stay
put), memoized in a :class:`~compaction._cache.MemoScope`; a session keeps one scope for all its
compactions (:attr:`~compaction.middleware.state.SessionState.memos`). :func:`scan_on_entry` runs
them when a message is appended, in that scope, with the arguments the next compaction calls them
with (the message as that compaction's request places it: same canonical id, redacted the same
way), so that compaction finds their results instead of scanning:

* redaction of its texts (:func:`~compaction.redact.redact_if_needed`), and the message's redacted
  copy, kept on it (:func:`~compaction.redact.redact_message`);
* the prune stage's soft trim of a long result (the important and measurement lines of its middle);
* the ledger's scan (paths, URLs, ids, errors, commands) and its items as the ledger shows them;
* the topic index's statements (segmented, each one labelled);
* for a model summarizer, its tokens as the summarizer's prompt renders it after the message
  before it (the counter keeps long texts' counts in the scope).

What is kept is what those functions return, for this session's own texts, within the scope's
bounds (:data:`~compaction.middleware.state.SESSION_MEMO_ENTRIES` entries and
:data:`~compaction.middleware.state.SESSION_MEMO_CHARS` characters, least recently used out first);
nothing is shared with another session. An append costs O(message): every scan reads the new
message alone (and the one before it, already scanned, to place a result under its call).

What depends on the zone as a whole (the words common to several results, where the view cuts a
result and that cut's scans, the rendered prompt of each call) is still computed by the compaction.
"""

from __future__ import annotations

from functools import partial

from compaction._cache import memo_scope
from compaction.middleware.context import placed
from compaction.middleware.state import SessionState
from compaction.redact import redact_message
from compaction.stages.layout import prune_settings
from compaction.stages.ledger import scan_for_ledger
from compaction.stages.prune import prepare_for_summarizer, soft_trimmed
from compaction.stages.view import RenderedCache, rendered_counts
from compaction.summarizers.base import reads_rendered_prompt
from compaction.summarizers.topics import scan_statements
from compaction.tokens import TokenCounter
from compaction.transcript import Message

__all__ = ["scan_on_entry"]


def scan_on_entry(state: SessionState, start: int) -> None:
    """Scan the texts of the context's entries from ``start`` on (just appended), in the session's
    memo scope, as the next compaction will (see the module docstring)."""
    context = state.context
    if start >= len(context):
        return
    config = state.work.config
    settings = prune_settings(config)
    # A model summarizer reads the rendered prompt: its view measures each message rendered.
    counter = state.work.counter if reads_rendered_prompt(state.work.summarizer) else None
    # The request's format (request_transcript detects it the same way: a separate system prompt
    # only goes with Anthropic messages) and the canonical index of the request's first entry.
    fmt = state.format or "openai"
    lead = 1 if state.system is not None else 0

    def forms(index: int) -> tuple[Message, Message | None]:
        """The entry as the zone reads it (placed, redacted) and as the summarizer's view shows it
        when no result has to be cut (None: nothing of it is shown)."""
        position = lead + (index if state.store is None else context.stored_before(index))
        message = placed(context[index], fmt, position)
        # Kept on the placed message: the next append reads the forms of this one again (as the
        # message before its own) and finds them.
        return message.memo(("prescan.forms", config.redact_secrets, settings), partial(derive, message))

    def derive(message: Message) -> tuple[Message, Message | None]:
        readable = redact_message(message) if config.redact_secrets else message
        # The soft trim, kept on the message under the prune stage's own key (its note names the
        # message's id: hence the placing), and the view's form of it, kept on the trimmed one.
        shown = prepare_for_summarizer([soft_trimmed(readable, settings)], settings=settings)
        return readable, shown[0] if shown else None

    with memo_scope(state.memos):
        # The message before the first new one, as the view shows it: a result right under its
        # call renders without a marker of its own, so its measure depends on what comes before.
        previous = forms(start - 1)[1] if counter is not None and start > 0 else None
        for index in range(start, len(context)):
            readable, shown = forms(index)
            _scan(readable, shown, redact=config.redact_secrets, ledger=config.artifact_ledger)
            if counter is not None and shown is not None:
                _measure(counter, previous, shown)
                previous = shown


def _scan(readable: Message, shown: Message | None, *, redact: bool, ledger: bool) -> None:
    """The scans of the zone's reading of a message: the ledger's (and its items as the ledger
    shows them, redacted), and the topic index's statements of what the view shows."""
    if shown is not None:
        scan_statements(shown)
    if ledger:
        scan_for_ledger(readable, redact_items=redact)


def _measure(counter: TokenCounter, previous: Message | None, message: Message) -> None:
    """Count ``message`` rendered as the view measures it after ``previous``: the view keeps the
    count on the message (the one the compaction reads, see :func:`.context.placed`), the counter
    keeps a long text's count in the scope. ``previous`` was measured when it was appended: the
    cache given holds a stand-in for it, so only ``message`` is rendered and counted here."""
    if previous is None:
        rendered_counts(counter, [message])
        return
    measured: RenderedCache = {(id(None), id(previous)): (None, previous, 0)}
    rendered_counts(counter, [previous, message], measured)
