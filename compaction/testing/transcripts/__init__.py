"""Seeded, deterministic synthetic agent sessions with planted facts: the ground truth of the tests and
benchmarks.

``generate(scenario, n_messages, seed=..., format=..., tool_heavy=...)`` returns a
:class:`GeneratedTranscript`: provider-format messages (OpenAI, or Anthropic with a separate
``system``) of a realistic agent session, and the :class:`PlantedFact` s hidden in it with the index
of the message that holds each one.

Scenarios:

* ``coding`` - a coding agent on a Python service: tickets, grep, file reads, failing test runs
  with tracebacks, edits, re-runs, lint, git; CI and service logs (some outputs over 50,000 chars).
* ``job_search`` - a daily job search: the search prompt and its scoring rubric, LinkedIn
  searches, long job descriptions (some in German, French or Japanese), JobServe alert emails,
  scoring tables, the ``todays-jobs-YYYY-MM-DD.md`` report.
* ``research`` - web searches, long fetched pages (some Chinese), papers, screenshots, notes.
* ``mixed`` - the three, one task after another in one session.

Every session has heavy-tailed tool output sizes (lognormal plus a tail of huge outputs), parallel
tool calls (1-4), failed tools (``is_error`` / non-zero exit codes), images (real PNGs of varying
dimensions, base64), code, CJK and mixed-language text. Every tool call has its results right after
it, and Anthropic sessions alternate roles, so ``compaction.pairs.validate`` finds nothing.

Planted facts (categories in :data:`CATEGORIES`) are unique values placed at evenly spread
positions through the whole session: file paths, URLs, identifiers (git hashes, UUIDs, ticket
ids), error messages, numbers with units, commands, decisions with their reason, user constraints
and next steps. :func:`retention` checks which of those inside a compacted zone survive verbatim.

The package's modules: ``_types`` (the public types), ``_generate`` (the entry point), one module per
episode script (``_coding``, ``_job_search``, ``_research``) over what they share (``_episode``,
``_writer``, ``_codebase``, ``_vocabulary``, ``_draw``, ``_images``), the planted facts
(``_fact_values``, ``_planting``), the metrics helpers (``_text``) and the command line (``_cli``).

    python -m compaction.testing.transcripts --scenario coding --messages 2000 --format anthropic --seed 1 \\
        --out session.json --facts facts.json
"""

from __future__ import annotations

from compaction.testing.transcripts._cli import main
from compaction.testing.transcripts._generate import generate
from compaction.testing.transcripts._images import IMAGE_SIZES, blank_png_base64, noisy_png_base64
from compaction.testing.transcripts._planting import CUE_WORDS
from compaction.testing.transcripts._text import (
    message_text,
    retention,
    retention_total,
    text_strings,
    transcript_text,
)
from compaction.testing.transcripts._types import (
    CATEGORIES,
    FORMATS,
    MAX_MESSAGES,
    MIN_MESSAGES,
    PHRASINGS,
    SCENARIOS,
    Format,
    GeneratedTranscript,
    Phrasing,
    PlantedFact,
    Scenario,
)

__all__ = [
    "CATEGORIES",
    "CUE_WORDS",
    "FORMATS",
    "IMAGE_SIZES",
    "MAX_MESSAGES",
    "MIN_MESSAGES",
    "PHRASINGS",
    "SCENARIOS",
    "Format",
    "GeneratedTranscript",
    "Phrasing",
    "PlantedFact",
    "Scenario",
    "blank_png_base64",
    "generate",
    "main",
    "message_text",
    "noisy_png_base64",
    "retention",
    "retention_total",
    "text_strings",
    "transcript_text",
]
