"""Choosing a counter from a model name."""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path

from compaction.tokens._base import TokenCounter
from compaction.tokens._counters import EstimateCounter, HFTokenizerCounter, TiktokenCounter
from compaction.tokens._loaders import MAX_TOKENIZER_FILES

__all__ = ["MAX_MODEL_NAMES", "MAX_TOKENIZER_FILES", "counter_for_model", "model_family"]

logger = logging.getLogger("compaction.tokens")

_O200K = re.compile(r"^(?:chatgpt-4o|gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o1|o3|o4|codex)(?=$|[-.:@_])")
_CL100K = re.compile(r"^(?:gpt-4|gpt-3\.5|gpt-35|text-embedding)(?=$|[-.:@_])")

_LOCK = threading.Lock()
# Model names come from callers (a service's clients send any string): the name -> counter map keeps
# the most recent MAX_MODEL_NAMES; a name dropped from it finds its family's counter again.
MAX_MODEL_NAMES = 1_024
# Counters by family, plus one per tokenizer file given; each holds a bounded message cache, so
# at most MAX_TOKENIZER_FILES files (the oldest is dropped, with its cache and its model names) are kept.
_BY_MODEL: dict[tuple[str, str | None], TokenCounter] = {}
_BY_FAMILY: dict[str, TokenCounter] = {}


def model_family(model: str) -> str:
    """``"o200k_base"``, ``"cl100k_base"``, ``"anthropic"`` or ``"unknown"`` for a model name.

    Provider prefixes (``openai/``, ``azure/``, ``openrouter/openai/``...) and ``ft:`` are ignored.

    >>> model_family("azure/gpt-4o-mini"), model_family("gpt-4-turbo"), model_family("anthropic/claude-sonnet-4-5")
    ('o200k_base', 'cl100k_base', 'anthropic')
    """
    name = model.strip().lower()
    if "claude" in name or name.startswith("anthropic/"):
        return "anthropic"
    base = name.rsplit("/", 1)[-1]
    base = base.removeprefix("ft:")
    if _O200K.match(base):
        return "o200k_base"
    if _CL100K.match(base):
        return "cl100k_base"
    return "unknown"


def counter_for_model(model: str, *, tokenizer_path: str | os.PathLike[str] | None = None) -> TokenCounter:
    """The counter to use for ``model``; one instance per (model, path), shared by model family.

    * ``tokenizer_path`` given: an :class:`HFTokenizerCounter` on that file (exact).
    * gpt-4o, gpt-4.1, gpt-4.5, gpt-5, o1/o3/o4 (any provider prefix): tiktoken o200k_base, exact.
    * gpt-4, gpt-3.5, text-embedding: tiktoken cl100k_base, exact.
    * claude, ``anthropic/...``: litellm's bundled Anthropic tokenizer, ``exact=False``: Claude 3 and
      later use an unpublished tokenizer, so its counts are only close and keep the safety margin.
    * anything else: :class:`EstimateCounter` (chars/4, ``exact=False``), with a WARNING on the
      ``compaction.tokens`` logger, once per model name (among the last :data:`MAX_MODEL_NAMES` used).

    Tokenizer files are read on the first count, not here.

    >>> counter_for_model("openai/gpt-4o").name
    'tiktoken:o200k_base'
    >>> counter_for_model("claude-sonnet-4-5").exact
    False
    """
    path = str(Path(tokenizer_path).resolve()) if tokenizer_path is not None else None
    key = (model, path)
    counter = _BY_MODEL.get(key)
    if counter is not None:
        return counter
    with _LOCK:
        counter = _BY_MODEL.get(key)
        if counter is None:
            counter = _choose(model, path)
            if len(_BY_MODEL) >= MAX_MODEL_NAMES:
                del _BY_MODEL[next(iter(_BY_MODEL))]
            _BY_MODEL[key] = counter
    return counter


def _choose(model: str, path: str | None) -> TokenCounter:
    if path is not None:
        return _shared(f"hf:{path}", lambda: HFTokenizerCounter(path))
    family = model_family(model)
    if family in ("o200k_base", "cl100k_base"):
        return _shared(family, lambda: TiktokenCounter("o200k_base" if family == "o200k_base" else "cl100k_base"))
    if family == "anthropic":
        return _shared(family, HFTokenizerCounter.anthropic)
    logger.warning(
        "unknown model %r: no tokenizer is known for it, so token counts use the chars/4 estimate "
        "(not exact; budgets apply the 1.2 safety margin). Pass tokenizer_path for exact counts.",
        model,
    )
    return _shared("estimate", EstimateCounter)


def _shared(family: str, make: Callable[[], TokenCounter]) -> TokenCounter:
    # Models of one family share a counter, so they share its message cache too. Called under _LOCK.
    counter = _BY_FAMILY.get(family)
    if counter is None:
        counter = make()
        files = [key for key in _BY_FAMILY if key.startswith("hf:")]
        if family.startswith("hf:") and len(files) >= MAX_TOKENIZER_FILES:
            dropped = _BY_FAMILY.pop(files[0])
            for name in [name for name, held in _BY_MODEL.items() if held is dropped]:
                del _BY_MODEL[name]
        _BY_FAMILY[family] = counter
    return counter
