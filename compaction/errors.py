"""Exceptions raised by the compaction engine. Each one says what is wrong and where."""

from __future__ import annotations


class TranscriptError(ValueError):
    """A transcript that cannot be read: names the message index, the field and the problem.

    >>> err = TranscriptError("unknown role 'bot'", index=3, field="role")
    >>> str(err)
    "message 3: field 'role': unknown role 'bot'"
    """

    def __init__(self, problem: str, *, index: int | None = None, field: str | None = None) -> None:
        self.index = index
        self.field = field
        self.problem = problem
        where = []
        if index is not None:
            where.append(f"message {index}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = ": ".join(where)
        super().__init__(f"{prefix}: {problem}" if prefix else problem)


class CompactionError(RuntimeError):
    """Compaction could not produce a result within the budget (raised when ``strict=True``,
    or when no result can fit at all). The message says exactly why."""


class ContextOverflowError(RuntimeError):
    """The agent's own request still overflows the model's window after every recovery attempt."""

    def __init__(
        self,
        message: str,
        *,
        attempts: int = 0,
        requested_tokens: int | None = None,
        allowed_tokens: int | None = None,
    ) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.requested_tokens = requested_tokens
        self.allowed_tokens = allowed_tokens
