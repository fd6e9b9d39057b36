"""Token accounting: how many input tokens a transcript, a message or a tool list costs.

Pick a counter with :func:`counter_for_model` (tiktoken for OpenAI models, litellm's bundled
Anthropic tokenizer for Claude, chars/4 otherwise), or build one directly. Tokenizer files come
from litellm's package directory and load on the first count; importing this module imports
neither litellm nor any tokenizer, and nothing here uses the network.

What a message costs (the same rules for every counter; only ``count_text`` differs):

* 3 tokens of framing per message, plus the tokens of its role, plus the tokens of ``extra["name"]``
  and 1 more when it has one; 3 tokens per conversation to prime the reply (OpenAI's documented
  chat formula, applied to all providers as a close, slightly generous approximation);
* text parts: their text;
* tool calls: name + arguments JSON text + 8;
* tool results: their text (and images) + 6;
* reasoning/thinking blocks: their text (they are input when sent back);
* unknown blocks: their JSON text;
* images: from the dimensions in the inline header, never from the base64 length: Anthropic's
  ``w*h/750`` after fitting 1568 px / 1.15 MP (Anthropic tokenizer and estimate counters), or
  OpenAI's ``85 + 170`` per 512 px tile (``detail="low"``: 85) for tiktoken counters; 1,600 or 765
  when the size is unknown (URL images, unreadable headers);
* tool schemas (:meth:`TokenCounter.count_tools`): JSON of each schema + 8.

Counts are cached per message by identity and by content, so re-counting a transcript after
appending a message tokenizes only the new one, even when the caller rebuilt its messages from
the same dicts. Every cache here is bounded (the table "Caches and memos" in docs/architecture.md).

>>> from compaction.transcript import Message, TextPart
>>> counter = counter_for_model("gpt-4o")
>>> counter.count_messages([Message(role="user", parts=(TextPart(text="hello world"),), id="m1")])
9
"""

from __future__ import annotations

from compaction.tokens._base import (
    MESSAGE_OVERHEAD,
    NAME_OVERHEAD,
    REPLY_PRIMING,
    TOOL_CALL_OVERHEAD,
    TOOL_RESULT_OVERHEAD,
    TOOL_SCHEMA_OVERHEAD,
    BaseTokenCounter,
    CacheInfo,
    TokenCounter,
    active_count_cache_partition,
    count_cache_partition,
)
from compaction.tokens._calibrated import CalibratedCounter
from compaction.tokens._counters import EstimateCounter, HFTokenizerCounter, TiktokenCounter, TiktokenEncodingName
from compaction.tokens._estimate import PlanningEstimator
from compaction.tokens._images import (
    ANTHROPIC_DEFAULT_IMAGE_TOKENS,
    OPENAI_DEFAULT_IMAGE_TOKENS,
    ImageStyle,
    anthropic_image_tokens,
    openai_image_tokens,
)
from compaction.tokens._loaders import TokenizerUnavailableError, anthropic_tokenizer_path, litellm_tokenizer_dir
from compaction.tokens._select import counter_for_model, model_family

__all__ = [
    "ANTHROPIC_DEFAULT_IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "NAME_OVERHEAD",
    "OPENAI_DEFAULT_IMAGE_TOKENS",
    "REPLY_PRIMING",
    "TOOL_CALL_OVERHEAD",
    "TOOL_RESULT_OVERHEAD",
    "TOOL_SCHEMA_OVERHEAD",
    "BaseTokenCounter",
    "CacheInfo",
    "CalibratedCounter",
    "EstimateCounter",
    "HFTokenizerCounter",
    "ImageStyle",
    "PlanningEstimator",
    "TiktokenCounter",
    "TiktokenEncodingName",
    "TokenCounter",
    "TokenizerUnavailableError",
    "active_count_cache_partition",
    "anthropic_image_tokens",
    "anthropic_tokenizer_path",
    "count_cache_partition",
    "counter_for_model",
    "litellm_tokenizer_dir",
    "model_family",
    "openai_image_tokens",
]
