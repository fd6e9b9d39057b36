"""What every episode script shares: the session's random source, sizes and the code base."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from compaction.testing.transcripts._codebase import _Codebase
from compaction.testing.transcripts._draw import _lognormal_size
from compaction.testing.transcripts._planting import _Planter
from compaction.testing.transcripts._vocabulary import _CJK_USER


@dataclass
class _Ctx:
    rng: random.Random
    heavy: bool
    planter: _Planter
    cb: _Codebase
    day: int = 17
    rounds: int = 0
    web: dict[str, list[str]] = field(default_factory=dict)

    def size(self, median: float, sigma: float = 1.0) -> int:
        """A tool output size: lognormal body plus a tail of huge outputs (some over 50,000 chars)."""
        rng = self.rng
        scale = 1.6 if self.heavy else 1.0
        if rng.random() < (0.07 if self.heavy else 0.03):
            return _lognormal_size(rng, 30_000 * scale, 0.8, 8_000, 400_000)
        return _lognormal_size(rng, median * scale, sigma, 60, 200_000)

    def parallel(self) -> int:
        weights = (40, 35, 15, 10) if self.heavy else (70, 18, 8, 4)
        return self.rng.choices((1, 2, 3, 4), weights=weights)[0]

    def chatter(self) -> bool:
        return self.rng.random() < (0.08 if self.heavy else 0.3)


def _cjk_maybe(rng: random.Random, text: str, p: float = 0.12) -> str:
    return f"{text} {rng.choice(_CJK_USER)}" if rng.random() < p else text
