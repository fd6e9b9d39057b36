"""The transcript generator, now :mod:`compaction.testing.transcripts` (tests import it from there
without importing ``benchmarks``); re-exported here for the benchmarks that import it by this name
(``_strings`` too: ``bench_quality`` reads every string of a message with it).

    python -m benchmarks.generate --scenario coding --messages 2000 --out session.json
"""

from __future__ import annotations

from compaction.testing.transcripts import (
    CATEGORIES,
    CUE_WORDS,
    FORMATS,
    IMAGE_SIZES,
    MAX_MESSAGES,
    MIN_MESSAGES,
    PHRASINGS,
    SCENARIOS,
    Format,
    GeneratedTranscript,
    Phrasing,
    PlantedFact,
    Scenario,
    _strings,
    blank_png_base64,
    generate,
    main,
    message_text,
    noisy_png_base64,
    retention,
    retention_total,
    text_strings,
    transcript_text,
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
    "_strings",
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

if __name__ == "__main__":
    raise SystemExit(main())
