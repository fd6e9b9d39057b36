"""The concrete counters: tiktoken, HuggingFace tokenizers, and the chars/4 estimate."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from compaction.tokens._base import DEFAULT_CACHE_CHARS, DEFAULT_CACHE_SIZE, BaseTokenCounter
from compaction.tokens._images import ImageStyle
from compaction.tokens._loaders import anthropic_tokenizer_path, load_hf_tokenizer, load_tiktoken_encoding

if TYPE_CHECKING:
    import tiktoken
    from tokenizers import Tokenizer

__all__ = ["EstimateCounter", "HFTokenizerCounter", "TiktokenCounter", "TiktokenEncodingName"]

TiktokenEncodingName = Literal["o200k_base", "cl100k_base"]
_TIKTOKEN_ENCODINGS = ("o200k_base", "cl100k_base")


class TiktokenCounter(BaseTokenCounter):
    """Exact text counts with an OpenAI encoding, loaded from litellm's bundled file on first use.

    Images use OpenAI's tile formula. Special-token text such as ``<|endoftext|>`` in content is
    counted as ordinary text, as providers do.

    >>> counter = TiktokenCounter("o200k_base")
    >>> counter.count_text("hello world"), counter.exact
    (2, True)
    """

    def __init__(
        self,
        encoding: TiktokenEncodingName = "o200k_base",
        *,
        image_style: ImageStyle = "openai",
        cache_size: int = DEFAULT_CACHE_SIZE,
        cache_chars: int = DEFAULT_CACHE_CHARS,
    ) -> None:
        if encoding not in _TIKTOKEN_ENCODINGS:
            raise ValueError(f"unsupported tiktoken encoding {encoding!r}; expected one of {_TIKTOKEN_ENCODINGS}")
        super().__init__(
            name=f"tiktoken:{encoding}",
            exact=True,
            image_style=image_style,
            cache_size=cache_size,
            cache_chars=cache_chars,
        )
        self.encoding_name: str = encoding
        self._encoding: tiktoken.Encoding | None = None

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The tiktoken encoding (loaded on first access, shared by all counters)."""
        if self._encoding is None:
            self._encoding = load_tiktoken_encoding(self.encoding_name)
        return self._encoding

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` with the real encoding.

        >>> TiktokenCounter("cl100k_base").count_text("hello world")
        2
        """
        if not text:
            return 0
        return self._scoped_count(text, self._encoded_length)

    def _encoded_length(self, text: str) -> int:
        return len((self._encoding or self.encoding).encode_ordinary(text))

    def _count_texts(self, texts: list[str]) -> list[int]:
        # Sequential on purpose: encode_ordinary_batch's thread pool measured slower here (2 cores).
        encode = (self._encoding or self.encoding).encode_ordinary
        return [len(encode(text)) if text else 0 for text in texts]


class HFTokenizerCounter(BaseTokenCounter):
    """Text counts with a HuggingFace ``tokenizer.json`` (read locally; nothing is downloaded).

    ``exact`` defaults to True: a tokenizer file given for a model is taken to be that model's.
    Images use the Anthropic formula unless ``image_style="openai"``.

    >>> counter = HFTokenizerCounter.anthropic()
    >>> counter.count_text("hello world"), counter.exact
    (2, False)
    """

    def __init__(
        self,
        path_or_name: str | os.PathLike[str],
        *,
        exact: bool = True,
        name: str | None = None,
        image_style: ImageStyle = "anthropic",
        cache_size: int = DEFAULT_CACHE_SIZE,
        cache_chars: int = DEFAULT_CACHE_CHARS,
    ) -> None:
        path = Path(path_or_name)
        if not path.is_file():
            raise FileNotFoundError(
                f"tokenizer file {str(path)!r} not found (a local tokenizer.json path is expected; "
                "hub names are not downloaded)"
            )
        super().__init__(
            name=name or f"hf:{path.name}",
            exact=exact,
            image_style=image_style,
            cache_size=cache_size,
            cache_chars=cache_chars,
        )
        self.path = path
        self._tokenizer: Tokenizer | None = None

    @classmethod
    def anthropic(
        cls, *, cache_size: int = DEFAULT_CACHE_SIZE, cache_chars: int = DEFAULT_CACHE_CHARS
    ) -> HFTokenizerCounter:
        """The Anthropic tokenizer that litellm ships, marked ``exact=False``.

        It is Anthropic's published pre-Claude-3 tokenizer; Claude 3 and later use an unpublished
        one, so its counts are an approximation and a safety margin still applies.
        """
        return cls(
            anthropic_tokenizer_path(),
            exact=False,
            name="anthropic-bundled",
            cache_size=cache_size,
            cache_chars=cache_chars,
        )

    @property
    def tokenizer(self) -> Tokenizer:
        """The ``tokenizers.Tokenizer`` (loaded on first access, shared per file)."""
        if self._tokenizer is None:
            self._tokenizer = load_hf_tokenizer(self.path)
        return self._tokenizer

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` (no special tokens added)."""
        if not text:
            return 0
        return self._scoped_count(text, self._encoded_length)

    def _encoded_length(self, text: str) -> int:
        return len((self._tokenizer or self.tokenizer).encode(text, add_special_tokens=False))

    def _count_texts(self, texts: list[str]) -> list[int]:
        if len(texts) < 2:
            return [self.count_text(text) for text in texts]
        tokenizer = self._tokenizer or self.tokenizer
        # encode_batch_fast skips offsets and runs the batch in parallel in Rust.
        encode_batch = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
        encodings = encode_batch(texts, add_special_tokens=False)
        return [len(encoding) if text else 0 for text, encoding in zip(texts, encodings, strict=True)]


class EstimateCounter(BaseTokenCounter):
    """``ceil(chars / 4)``: free, and not exact (``exact=False``), so callers add a margin.

    Measured against real tokenizers the per-message ratio varies widely (CJK text and random
    identifiers are denser), which is why counts from it should be calibrated or given a margin.
    Images use the Anthropic formula.

    >>> EstimateCounter().count_text("hello world")
    3
    """

    cheap = True

    def __init__(
        self,
        *,
        image_style: ImageStyle = "anthropic",
        cache_size: int = DEFAULT_CACHE_SIZE,
        cache_chars: int = DEFAULT_CACHE_CHARS,
    ) -> None:
        super().__init__(
            name="estimate:chars/4",
            exact=False,
            image_style=image_style,
            cache_size=cache_size,
            cache_chars=cache_chars,
        )

    def count_text(self, text: str) -> int:
        """``ceil(len(text) / 4)``."""
        return (len(text) + 3) // 4

    def _count_texts(self, texts: list[str]) -> list[int]:
        return [(len(text) + 3) // 4 for text in texts]
