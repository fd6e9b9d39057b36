"""The transcript generator, now :mod:`compaction.testing.transcripts` (tests import it from there
without importing ``benchmarks``); re-exported here, under the package's own ``__all__``, for the
benchmarks that import it by this name, so the two export lists cannot drift apart.

    python -m benchmarks.generate --scenario coding --messages 2000 --out session.json
"""

from __future__ import annotations

from compaction.testing.transcripts import *  # noqa: F403  (the export list is the package's)
from compaction.testing.transcripts import __all__ as __all__
from compaction.testing.transcripts import main

if __name__ == "__main__":
    raise SystemExit(main())
