"""What the ``compaction`` command exits with, and the error that carries the code."""

from __future__ import annotations

EXIT_USAGE, EXIT_FILE, EXIT_JSON, EXIT_TRANSCRIPT, EXIT_COMPACTION, EXIT_MODEL = 2, 3, 4, 5, 6, 7
EXIT_NO_MATCH, EXIT_NOT_FOUND = 1, 8
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer killed by a closed pipe


class CliError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code
