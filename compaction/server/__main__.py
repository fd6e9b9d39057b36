"""``python -m compaction.server --host 127.0.0.1 --port 8080 --db compaction.db --model gpt-4o``."""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from compaction.server.runner import main as run_server
    except ImportError as exc:  # FastAPI or uvicorn missing: say what to install, not a traceback
        missing = exc.name or "fastapi/uvicorn"
        print(
            f"python -m compaction.server: error: the HTTP service needs the 'server' extra (missing {missing}): "
            "pip install 'compaction-engine[server]' (from a clone: pip install -e '.[server]')",
            file=sys.stderr,
        )
        return 2
    return run_server()


if __name__ == "__main__":
    sys.exit(main())
