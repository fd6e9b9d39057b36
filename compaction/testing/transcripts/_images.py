"""Images: real PNG files (valid signature, IHDR, IDAT, IEND) of chosen dimensions, base64."""

from __future__ import annotations

import base64
import random
import struct
import zlib
from dataclasses import dataclass
from functools import lru_cache

IMAGE_SIZES: tuple[tuple[int, int], ...] = (
    (1280, 800),
    (1920, 1080),
    (2560, 1440),
    (390, 844),
    (800, 600),
    (3024, 1964),
    (64, 64),
    (512, 512),
    (1440, 900),
    (1024, 4096),
)


def _png_chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


@lru_cache(maxsize=32)
def blank_png_base64(width: int, height: int) -> str:
    """A valid 1-bit grayscale PNG of ``width`` x ``height`` (small payload, large dimensions)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    row = b"\x00" + b"\xff" * ((width + 7) // 8)
    png = b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr)
    png += _png_chunk(b"IDAT", zlib.compress(row * height, 9)) + _png_chunk(b"IEND", b"")
    return base64.b64encode(png).decode("ascii")


def noisy_png_base64(rng: random.Random, width: int, height: int) -> str:
    """A valid 8-bit grayscale PNG of random pixels: a payload as large as a real screenshot."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    raw = b"".join(b"\x00" + rng.randbytes(width) for _ in range(height))
    png = b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr)
    png += _png_chunk(b"IDAT", zlib.compress(raw, 1)) + _png_chunk(b"IEND", b"")
    return base64.b64encode(png).decode("ascii")


@dataclass(frozen=True)
class _Image:
    width: int
    height: int
    data: str  # base64 PNG


def _image(rng: random.Random, *, big: bool = False) -> _Image:
    if big:
        w, h = rng.choice(((480, 320), (640, 400), (400, 300)))
        return _Image(w, h, noisy_png_base64(rng, w, h))
    w, h = rng.choice(IMAGE_SIZES)
    return _Image(w, h, blank_png_base64(w, h))
