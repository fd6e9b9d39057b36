"""Small random draws shared by the content makers: hex and UUIDs, heavy-tailed sizes, filler text."""

from __future__ import annotations

import math
import random
import string
from collections.abc import Sequence

_ALNUM = string.ascii_letters + string.digits


def _hex(rng: random.Random, n: int) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


def _uuid(rng: random.Random) -> str:
    h = _hex(rng, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[rng.randrange(4)]}{h[17:20]}-{h[20:32]}"


def _lognormal_size(rng: random.Random, median: float, sigma: float, lo: int, hi: int) -> int:
    return int(min(hi, max(lo, median * math.exp(rng.gauss(0.0, sigma)))))


def _fill(rng: random.Random, pool: Sequence[str], size: int, sep: str = "\n") -> str:
    """Lines drawn from ``pool`` until about ``size`` characters (cut at a line boundary)."""
    if size <= 0 or not pool:
        return ""
    avg = max(8, sum(len(p) for p in pool[:50]) // min(len(pool), 50) + len(sep))
    out: list[str] = []
    total = 0
    while total < size:
        batch = rng.choices(pool, k=max(1, (size - total) // avg + 1))
        for line in batch:
            out.append(line)
            total += len(line) + len(sep)
            if total >= size:
                break
    return sep.join(out)


def _title(text: str) -> str:
    return text[:1].upper() + text[1:]


def _slug(text: str) -> str:
    keep = [c.lower() if c.isalnum() else "-" for c in text]
    return "-".join(p for p in "".join(keep).split("-") if p)
