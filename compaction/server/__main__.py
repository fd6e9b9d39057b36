"""``python -m compaction.server --host 127.0.0.1 --port 8080 --db compaction.db --model gpt-4o``."""

from __future__ import annotations

import sys

from compaction.server.runner import main

if __name__ == "__main__":
    sys.exit(main())
