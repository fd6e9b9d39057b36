"""The context manager's options, validated in one place.

:class:`ManagerSettings` holds what :class:`~compaction.middleware.ContextManager` is configured
with besides its collaborators (compactor, store, counters, handlers): the triggers, the loop
protection, recall and background preparation. It is frozen: a manager's options do not change
during its session (the model does, through ``set_model``).

>>> ManagerSettings(every_n_iterations=0)
Traceback (most recent call last):
...
ValueError: every_n_iterations must be >= 1, got 0
"""

from __future__ import annotations

from dataclasses import dataclass

from compaction.middleware.prepare import PrepareSettings
from compaction.recall import DEFAULT_MAX_TOKENS

__all__ = ["ManagerSettings"]


@dataclass(frozen=True)
class ManagerSettings:
    """The manager's options (see :class:`~compaction.middleware.ContextManager` for each).

    ``prepare`` is normalized: ``True``/``False`` become :class:`PrepareSettings` with that
    ``enabled``. Each bad value raises :class:`ValueError` naming the argument."""

    session_id: str = "default"
    every_n_iterations: int | None = None
    keep_recent_iterations: int | None = None
    max_consecutive_compactions: int = 3
    recall: bool = True
    recall_max_tokens: int = DEFAULT_MAX_TOKENS
    max_recall_rounds: int = 3
    prepare: PrepareSettings | bool = False

    def __post_init__(self) -> None:
        if self.max_recall_rounds < 0:
            raise ValueError(f"max_recall_rounds must be >= 0, got {self.max_recall_rounds}")
        if self.every_n_iterations is not None and self.every_n_iterations < 1:
            raise ValueError(f"every_n_iterations must be >= 1, got {self.every_n_iterations}")
        if self.keep_recent_iterations is not None and self.keep_recent_iterations < 0:
            raise ValueError(f"keep_recent_iterations must be >= 0, got {self.keep_recent_iterations}")
        if self.max_consecutive_compactions < 1:
            raise ValueError(f"max_consecutive_compactions must be >= 1, got {self.max_consecutive_compactions}")
        if not isinstance(self.prepare, PrepareSettings):
            object.__setattr__(self, "prepare", PrepareSettings(enabled=bool(self.prepare)))

    @property
    def preparation(self) -> PrepareSettings:
        """``prepare`` as settings (always a :class:`PrepareSettings` once constructed)."""
        assert isinstance(self.prepare, PrepareSettings)
        return self.prepare
