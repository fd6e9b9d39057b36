"""Secrets out of summaries, ledgers and records.

A summary or an artifact list outlives the span it came from and may be logged, cached or sent
to another model, so credentials found in it are replaced with ``[REDACTED:<kind>]``. Only shapes
that are credentials are matched: ordinary hashes, UUIDs and paths are left alone.

The token shapes come from detect-secrets' plugins (a maintained list: AWS, Azure storage,
GitHub, GitLab, npm, OpenAI, PyPI, SendGrid, Slack, Square, Stripe, Mailchimp), their denylists
copied here (importing the plugins is slow) and checked against the installed version by the
tests. Our own steps, each named below, cover what those plugins
miss: keys they do not know (Anthropic, Google, Hugging Face, bare npm, newer OpenAI), and
credentials that only their context gives away (passwords in URLs, also JSON-escaped ones, ``curl
-u``, ``mysql -p``, ``docker login -p``, ``.netrc``, Basic and Bearer headers, presigned URL
signatures, ``key = "a pass phrase"`` assignments).

>>> redact_secrets("export OPENAI_API_KEY=sk-proj-" + "a1B2" * 10)
('export OPENAI_API_KEY=[REDACTED:openai_key]', 1)

The package, one idea per module: :mod:`~compaction.redact.shapes` (token shapes),
:mod:`~compaction.redact.context` (credentials given away by their context),
:mod:`~compaction.redact.assignments` (``key = value`` and pass phrases, code left alone),
:mod:`~compaction.redact.whole_text` (key bodies, Kubernetes Secrets, colour codes),
:mod:`~compaction.redact.cues` (what lets a text skip the full pass), :mod:`~compaction.redact.steps`
(the steps in order: :func:`redact_secrets`), :mod:`~compaction.redact.windows` (a long text redacted
around its cues: :func:`redact_if_needed`), :mod:`~compaction.redact.records` (records, JSON values,
messages), over :mod:`~compaction.redact.base`.
"""

from __future__ import annotations

from compaction.redact.base import REDACTED_PREFIX

# With an underscore: internals the tests and benchmarks read (the cues and windows, the copied plugin denylists, the
# run's memo of redacted texts), importable from here as they were from the one module.
from compaction.redact.cues import _has_cue as _has_cue
from compaction.redact.cues import _possible_cues as _possible_cues
from compaction.redact.records import _redacted_text as _redacted_text
from compaction.redact.records import redact_json, redact_message, redact_record
from compaction.redact.shapes import _PLUGIN_DENYLISTS as _PLUGIN_DENYLISTS
from compaction.redact.shapes import _PLUGINS as _PLUGINS
from compaction.redact.shapes import looks_like_secret
from compaction.redact.steps import redact_secrets
from compaction.redact.windows import _cue_windows as _cue_windows
from compaction.redact.windows import redact_if_needed

__all__ = [
    "REDACTED_PREFIX",
    "looks_like_secret",
    "redact_if_needed",
    "redact_json",
    "redact_message",
    "redact_record",
    "redact_secrets",
]
