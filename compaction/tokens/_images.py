"""Size-aware image token estimates (an image is never counted by its base64 length).

Two published formulas, chosen per counter family:

* Anthropic: scale to fit a 1568 px long edge and about 1.15 megapixels, then ``w * h / 750``.
* OpenAI tiles: ``detail="low"`` is 85; otherwise fit 2048 x 2048, scale the shortest side down to
  768, then ``85 + 170`` per 512 px tile.

When the dimensions are unknown (a URL, or a header we cannot parse) a fixed default is used:
1,600 (Anthropic-style, just above the largest image after scaling) or 765 (OpenAI-style, a
1024 x 1024 image at high detail).
"""

from __future__ import annotations

import math
from typing import Literal

from compaction.transcript import ImagePart

__all__ = [
    "ANTHROPIC_DEFAULT_IMAGE_TOKENS",
    "OPENAI_DEFAULT_IMAGE_TOKENS",
    "ImageStyle",
    "anthropic_image_tokens",
    "image_part_tokens",
    "openai_image_tokens",
]

ImageStyle = Literal["openai", "anthropic"]

ANTHROPIC_DEFAULT_IMAGE_TOKENS = 1600
OPENAI_DEFAULT_IMAGE_TOKENS = 765
_ANTHROPIC_MAX_EDGE = 1568
_ANTHROPIC_MAX_PIXELS = 1_150_000
_ANTHROPIC_PIXELS_PER_TOKEN = 750
_OPENAI_LOW = 85
_OPENAI_PER_TILE = 170
_OPENAI_FIT = 2048
_OPENAI_SHORT_SIDE = 768
_OPENAI_TILE = 512


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic's estimate: ``w * h / 750`` after scaling down to the API's size limits.

    >>> anthropic_image_tokens(1000, 1000)
    1334
    >>> anthropic_image_tokens(4000, 3000)  # scaled to ~1.15 MP first
    1534
    """
    if width <= 0 or height <= 0:
        return ANTHROPIC_DEFAULT_IMAGE_TOKENS
    scale = min(1.0, _ANTHROPIC_MAX_EDGE / max(width, height), math.sqrt(_ANTHROPIC_MAX_PIXELS / (width * height)))
    return max(1, math.ceil(width * scale * height * scale / _ANTHROPIC_PIXELS_PER_TOKEN))


def openai_image_tokens(width: int, height: int, detail: str | None = "auto") -> int:
    """OpenAI's tile formula (``"auto"`` is treated as ``"high"``, the more expensive case).

    >>> openai_image_tokens(1024, 1024)
    765
    >>> openai_image_tokens(2048, 4096)
    1105
    >>> openai_image_tokens(4096, 4096, detail="low")
    85
    """
    if detail == "low":
        return _OPENAI_LOW
    if width <= 0 or height <= 0:
        return OPENAI_DEFAULT_IMAGE_TOKENS
    w, h = float(width), float(height)
    if max(w, h) > _OPENAI_FIT:
        scale = _OPENAI_FIT / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > _OPENAI_SHORT_SIDE:
        scale = _OPENAI_SHORT_SIDE / min(w, h)
        w, h = w * scale, h * scale
    # Rounded to whole pixels before tiling, so 768.0000001 does not become an extra tile.
    tiles = math.ceil(round(w) / _OPENAI_TILE) * math.ceil(round(h) / _OPENAI_TILE)
    return _OPENAI_LOW + _OPENAI_PER_TILE * tiles


def image_part_tokens(part: ImagePart, style: ImageStyle) -> int:
    """Tokens for an image part: dimensions from its inline header when available, else the default."""
    detail = part.source.get("detail")
    if style == "openai" and detail == "low":
        return _OPENAI_LOW
    size = part.dimensions()
    if style == "openai":
        if size is None:
            return OPENAI_DEFAULT_IMAGE_TOKENS
        return openai_image_tokens(size[0], size[1], detail if isinstance(detail, str) else "auto")
    if size is None:
        return ANTHROPIC_DEFAULT_IMAGE_TOKENS
    return anthropic_image_tokens(size[0], size[1])
