"""Every knob of the engine, with the defaults of the reference design, in sections.

A :class:`CompactionConfig` is made of sections (``trigger``, ``tail``, ``pruning``, ``chunking``,
``summarizer``, ``summary_block``, ``ledger``, ``redaction``, ``layout``, ``markers``, ``fallback``);
each field lives in exactly one section, under the same name it has always had. The flat names are
still the way most code reads and sets them: ``CompactionConfig(keep_recent_messages=4)`` sets
``config.tail.keep_recent_messages``, and ``config.keep_recent_messages`` reads it back (the
section holds the only copy).

>>> cfg = CompactionConfig(keep_recent_messages=4, max_summary_tokens=2_000)
>>> cfg.tail.keep_recent_messages, cfg.keep_recent_messages, cfg.summarizer.max_summary_tokens
(4, 4, 2000)
>>> cfg.base_chunk_ratio, cfg.min_chunk_ratio, cfg.safety_margin
(0.4, 0.15, 1.2)
>>> CompactionConfig(tail=TailConfig(keep_recent_messages=4)) == CompactionConfig(keep_recent_messages=4)
True
>>> CompactionConfig(threshold=0).auto_compaction_enabled
False
>>> section_of("keep_recent_share")
'tail'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.fields import FieldInfo

from compaction.config.sections import (
    ChunkingConfig,
    FailureMode,
    FallbackConfig,
    LayoutConfig,
    LedgerConfig,
    MarkersConfig,
    PruningConfig,
    RedactionConfig,
    Section,
    SummarizerConfig,
    SummaryBlockConfig,
    SummaryMode,
    SummaryPlacement,
    SummaryRole,
    TailConfig,
    TriggerConfig,
)

__all__ = [
    "ChunkingConfig",
    "CompactionConfig",
    "FailureMode",
    "FallbackConfig",
    "LayoutConfig",
    "LedgerConfig",
    "MarkersConfig",
    "PruningConfig",
    "RedactionConfig",
    "SummarizerConfig",
    "SummaryBlockConfig",
    "SummaryMode",
    "SummaryPlacement",
    "SummaryRole",
    "TailConfig",
    "TriggerConfig",
    "field_info",
    "flat_field_names",
    "section_models",
    "section_of",
]


class _Flat:
    """A flat field name on :class:`CompactionConfig`: reads the value its section holds."""

    def __init__(self, section: str, name: str) -> None:
        self.section = section
        self.name = name

    def __get__(self, instance: object | None, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return getattr(instance.__dict__[self.section], self.name)


if TYPE_CHECKING:
    _FLAT: Any = None
    """What the flat names are declared with in :class:`CompactionConfig` (for type checkers only):
    a default, so that pydantic's mypy plugin makes each an optional keyword."""


class CompactionConfig(BaseModel):
    """Configuration for :class:`compaction.Compactor`, in sections. Immutable; use ``model_copy(update=...)``.

    Built from sections, from the flat field names, or both: ``CompactionConfig(keep_recent_messages=4)``,
    ``CompactionConfig(tail=TailConfig(keep_recent_messages=4))`` and
    ``CompactionConfig.model_validate({"tail": {"keep_recent_messages": 4}})`` are the same
    configuration. A flat name given together with its section overrides that one value of the
    section. ``model_dump()`` gives the sectioned form, :meth:`to_flat` the flat one; both load back.
    Every flat name reads its section's value (``config.keep_recent_messages``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    trigger: TriggerConfig = TriggerConfig()
    """When a compaction runs, and the window and budget it aims for."""

    tail: TailConfig = TailConfig()
    """The recent messages kept verbatim, and the protected first request."""

    pruning: PruningConfig = PruningConfig()
    """How large tool results are cut down before anything is summarized."""

    chunking: ChunkingConfig = ChunkingConfig()
    """How the summarized span is split into chunks, and how many run at once."""

    summarizer: SummarizerConfig = SummarizerConfig()
    """What the summarizer is asked, what it reads, and how long it may take."""

    summary_block: SummaryBlockConfig = SummaryBlockConfig()
    """The size of the summary block every later turn re-sends."""

    ledger: LedgerConfig = LedgerConfig()
    """The artifact ledger: the references kept verbatim after the summary."""

    redaction: RedactionConfig = RedactionConfig()
    """Credentials kept out of the summarizer's input and of what a compaction returns."""

    layout: LayoutConfig = LayoutConfig()
    """The shape of the returned conversation: where the summary goes, roles, the message cap."""

    markers: MarkersConfig = MarkersConfig()
    """The fixed texts compaction writes into the conversation."""

    fallback: FallbackConfig = FallbackConfig()
    """What happens when the summarizer fails or the model reports an overflow."""

    # The flat names, which the engine and most callers read: each reads the one value its section
    # holds (a descriptor that _install_flat_names puts on the class for every section field).
    # Declared for type checkers only, with the field's type: pydantic's mypy plugin makes each one
    # a keyword argument of the constructor and a read-only attribute, so mypy checks the flat
    # keywords at every call and every reader. tests/engine/test_config_sections.py checks that this
    # listing names every section field once, with its type.
    if TYPE_CHECKING:
        # trigger
        enabled: bool = _FLAT
        threshold: float | int = _FLAT
        window: int | None = _FLAT
        reserve_tokens: int = _FLAT
        max_output_tokens: int = _FLAT
        safety_margin: float = _FLAT
        # tail
        keep_recent_messages: int = _FLAT
        keep_recent_tokens: int | None = _FLAT
        keep_recent_share: float = _FLAT
        protect_first_user_message: bool = _FLAT
        # pruning
        prune_min_chars: int = _FLAT
        prune_head_chars: int = _FLAT
        prune_tail_chars: int = _FLAT
        prune_hard_clear_share: float = _FLAT
        # chunking
        base_chunk_ratio: float = _FLAT
        min_chunk_ratio: float = _FLAT
        max_chunks: int = _FLAT
        concurrency: int = _FLAT
        summarizer_window: int | None = _FLAT
        # summarizer
        max_summary_tokens: int = _FLAT
        summary_mode: SummaryMode = _FLAT
        summarize_deadline_s: float | None = _FLAT
        summarizer_tool_preview: tuple[int, int] | None = _FLAT
        summarizer_input_max_chars: int | None = _FLAT
        system_prompt: str = _FLAT
        summary_prompt: str = _FLAT
        chunk_prompt: str = _FLAT
        merge_prompt: str = _FLAT
        # summary_block
        summary_block_share: float = _FLAT
        summary_block_max_tokens: int | None = _FLAT
        # ledger
        artifact_ledger: bool = _FLAT
        ledger_share: float = _FLAT
        ledger_max_tokens: int | None = _FLAT
        # redaction
        redact_secrets: bool = _FLAT
        redact_record: bool = _FLAT
        # layout
        summary_placement: SummaryPlacement = _FLAT
        summary_role: SummaryRole = _FLAT
        ensure_alternation: bool | None = _FLAT
        max_messages: int | None = _FLAT
        # markers
        summary_start_marker: str = _FLAT
        summary_end_marker: str = _FLAT
        acknowledgement: str = _FLAT
        last_request_prefix: str = _FLAT
        # fallback
        failure_mode: FailureMode = _FLAT
        extractive_fallback: bool = _FLAT
        strict: bool = _FLAT
        overflow_attempts: int = _FLAT
        verify_rounds: int = _FLAT

    @model_validator(mode="before")
    @classmethod
    def _accept_flat_names(cls, data: Any) -> Any:
        """Move flat field names into their sections (a flat name overrides its section's value)."""
        if not isinstance(data, Mapping) or not any(name in _SECTION_OF for name in data):
            return data
        moved: dict[str, Any] = {}
        by_section: dict[str, dict[str, Any]] = {}
        for key, value in data.items():
            section = _SECTION_OF.get(key)
            if section is None:
                moved[key] = value
            else:
                by_section.setdefault(section, {})[key] = value
        for section, values in by_section.items():
            given = moved.get(section)
            if isinstance(given, Section):
                given = given.model_dump(exclude_unset=True)  # keeps which values were set explicitly
            if given is None:
                moved[section] = values
            elif isinstance(given, Mapping):
                moved[section] = {**given, **values}
            else:  # not a section: let validation name the section's type error, and each name's
                moved.update(values)
        return moved

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with ``update`` applied: flat field names or whole sections. Like pydantic's
        ``model_copy``, the values are not validated; unlike it, an unknown name is refused."""
        if not update:
            return super().model_copy(deep=deep)
        sections: dict[str, Any] = {}
        by_section: dict[str, dict[str, Any]] = {}
        for key, value in update.items():
            if key in _SECTIONS:
                sections[key] = value
            elif key in _SECTION_OF:
                by_section.setdefault(_SECTION_OF[key], {})[key] = value
            else:
                raise ValueError(f"CompactionConfig has no field {key!r} (fields: {', '.join(sorted(_SECTION_OF))})")
        for section, values in by_section.items():
            base = sections.get(section, getattr(self, section))
            sections[section] = base.model_copy(update=values)
        return super().model_copy(update=sections, deep=deep)

    def to_flat(self, *, mode: Literal["python", "json"] = "python") -> dict[str, Any]:
        """Every field under its flat name (the form of configurations saved before the sections);
        ``CompactionConfig.model_validate`` loads it back."""
        flat: dict[str, Any] = {}
        for section in _SECTIONS:
            flat.update(getattr(self, section).model_dump(mode=mode))
        return flat

    def explicit_fields(self) -> frozenset[str]:
        """The flat names of the fields given explicitly (at construction or by ``model_copy``),
        as opposed to left at their defaults."""
        return frozenset(name for section in _SECTIONS for name in getattr(self, section).model_fields_set)

    @property
    def auto_compaction_enabled(self) -> bool:
        return self.enabled and self.threshold != 0


def _sections() -> dict[str, type[Section]]:
    found: dict[str, type[Section]] = {}
    for name, field in CompactionConfig.model_fields.items():
        section = field.annotation
        if not (isinstance(section, type) and issubclass(section, Section)):
            raise TypeError(f"CompactionConfig.{name} is not a section")
        found[name] = section
    return found


def _install_flat_names() -> dict[str, str]:
    """Flat name -> its section; puts on :class:`CompactionConfig` a descriptor for each flat name
    that reads its section's value, and checks that each field is in exactly one section."""
    section_of: dict[str, str] = {}
    for section, model in _SECTIONS.items():
        for name in model.model_fields:
            if name in section_of or name in _SECTIONS or hasattr(CompactionConfig, name):
                raise TypeError(f"config field {name!r} of section {section!r} is not a unique name")
            section_of[name] = section
            setattr(CompactionConfig, name, _Flat(section, name))
    return section_of


_SECTIONS = _sections()
_SECTION_OF = _install_flat_names()


def section_of(name: str) -> str:
    """The section that holds the flat field ``name`` (KeyError for an unknown name)."""
    return _SECTION_OF[name]


def field_info(name: str) -> FieldInfo:
    """The pydantic field (type, bounds, default, description) of the flat field ``name``."""
    return _SECTIONS[_SECTION_OF[name]].model_fields[name]


def section_models() -> dict[str, type[BaseModel]]:
    """Section name -> its model, in declaration order."""
    return dict(_SECTIONS)


def flat_field_names() -> tuple[str, ...]:
    """Every field's flat name, section by section in declaration order."""
    return tuple(_SECTION_OF)
