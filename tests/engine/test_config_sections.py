"""CompactionConfig in sections: every field the flat configuration had still sets and reads the
same value by its flat name, each value lives in one section, and both shapes load and dump."""

from __future__ import annotations

import ast
import inspect
import json
from typing import Any

import pytest
from pydantic import ValidationError

from compaction import config as config_module
from compaction.config import (
    CompactionConfig,
    TailConfig,
    field_info,
    flat_field_names,
    section_models,
    section_of,
)
from compaction.prompts import CHUNK_PROMPT, MERGE_PROMPT, SUMMARY_PROMPT, SYSTEM_PROMPT

# Every field of the flat CompactionConfig (before the sections, commit ceb68fd), frozen here:
# name -> (its default then, a valid other value, a value its bounds refuse or None).
OLD_FIELDS: dict[str, tuple[Any, Any, Any]] = {
    "enabled": (True, False, None),
    "window": (None, 64_000, 0),
    "reserve_tokens": (20_000, 8_000, -1),
    "max_output_tokens": (0, 4_000, -1),
    "threshold": (0.8, 0.5, None),
    "safety_margin": (1.2, 1.5, 0.5),
    "keep_recent_messages": (6, 4, -1),
    "keep_recent_tokens": (None, 3_000, -1),
    "keep_recent_share": (0.10, 0.2, 0),
    "protect_first_user_message": (True, False, None),
    "prune_min_chars": (4_000, 2_000, 100),
    "prune_head_chars": (1_500, 1_000, -1),
    "prune_tail_chars": (1_500, 700, -1),
    "prune_hard_clear_share": (0.5, 0.3, 1.5),
    "summarizer_tool_preview": (None, (500, 200), None),
    "summarizer_input_max_chars": (None, 100_000, 1_000),
    "base_chunk_ratio": (0.4, 0.5, 0),
    "min_chunk_ratio": (0.15, 0.1, 0),
    "summarizer_window": (None, 32_000, 0),
    "max_chunks": (8, 4, 0),
    "max_summary_tokens": (4_096, 2_000, 10),
    "concurrency": (8, 2, 0),
    "system_prompt": (SYSTEM_PROMPT, "You summarize.", None),
    "summary_prompt": (SUMMARY_PROMPT, "Summarize.", None),
    "chunk_prompt": (CHUNK_PROMPT, "Summarize this part.", None),
    "merge_prompt": (MERGE_PROMPT, "Merge the parts.", None),
    "summary_mode": ("rendered", "conversation", "verbatim"),
    "summarize_deadline_s": (300.0, 60.0, 0),
    "summary_block_share": (0.0625, 0.1, 0.6),
    "summary_block_max_tokens": (None, 4_000, 100),
    "artifact_ledger": (True, False, None),
    "ledger_share": (0.25, 0.4, 0),
    "ledger_max_tokens": (None, 6_000, -1),
    "redact_secrets": (True, False, None),
    "redact_record": (True, False, None),
    "failure_mode": ("fallback", "trim", "retry"),
    "extractive_fallback": (True, False, None),
    "max_messages": (None, 40, 1),
    "strict": (False, True, None),
    "summary_placement": ("first_user", "message", "system"),
    "summary_role": ("user", "system", "assistant"),
    "summary_start_marker": ("[CONTEXT SUMMARY]", "<<summary>>", None),
    "summary_end_marker": ("[END CONTEXT SUMMARY]", "<</summary>>", None),
    "acknowledgement": ("Understood. Continuing with the current task.", "OK.", None),
    "last_request_prefix": ("The last request from the user was:", "You asked:", None),
    "ensure_alternation": (None, True, None),
    "verify_rounds": (4, 2, -1),
    "overflow_attempts": (3, 1, -1),
}
OLD_NAMES = sorted(OLD_FIELDS)
REFUSED = sorted(name for name, (_default, _other, bad) in OLD_FIELDS.items() if bad is not None)


def test_every_old_field_has_a_flat_name_and_one_section() -> None:
    assert set(OLD_FIELDS) <= set(flat_field_names())
    holders = {name: [s for s, model in section_models().items() if name in model.model_fields] for name in OLD_NAMES}
    assert all(len(sections) == 1 for sections in holders.values()), holders
    assert sum(len(model.model_fields) for model in section_models().values()) == len(flat_field_names())
    assert set(CompactionConfig.model_fields) == set(section_models())


@pytest.mark.parametrize("name", OLD_NAMES)
def test_defaults_are_the_old_defaults(name: str) -> None:
    config = CompactionConfig()
    assert getattr(config, name) == OLD_FIELDS[name][0]
    assert getattr(getattr(config, section_of(name)), name) == OLD_FIELDS[name][0]


@pytest.mark.parametrize("name", OLD_NAMES)
def test_flat_keyword_sets_the_same_value_as_its_section(name: str) -> None:
    value = OLD_FIELDS[name][1]
    section = section_of(name)
    flat = CompactionConfig(**{name: value})
    grouped = CompactionConfig(**{section: {name: value}})
    by_model = CompactionConfig(**{section: section_models()[section](**{name: value})})
    assert getattr(flat, name) == value
    assert getattr(getattr(flat, section), name) == value
    assert flat == grouped == by_model
    assert hash(flat) == hash(grouped) == hash(by_model)
    assert flat != CompactionConfig()
    assert flat.explicit_fields() == {name}
    for other in OLD_NAMES:  # nothing else moved
        if other != name:
            assert getattr(flat, other) == OLD_FIELDS[other][0], other


@pytest.mark.parametrize("name", OLD_NAMES)
def test_model_copy_by_flat_name(name: str) -> None:
    base = CompactionConfig(window=50_000)
    value = OLD_FIELDS[name][1]
    copy = base.model_copy(update={name: value})
    assert getattr(copy, name) == value
    assert copy == CompactionConfig(**{"window": 50_000, **{name: value}})
    assert name in copy.explicit_fields()
    assert getattr(base, name) == (50_000 if name == "window" else OLD_FIELDS[name][0])  # the original is untouched


@pytest.mark.parametrize("name", REFUSED)
def test_a_refused_value_names_the_section_and_the_field(name: str) -> None:
    with pytest.raises(ValidationError) as info:
        CompactionConfig(**{name: OLD_FIELDS[name][2]})
    assert f"{section_of(name)}.{name}" in str(info.value)
    with pytest.raises(ValidationError) as nested:
        CompactionConfig.model_validate({section_of(name): {name: OLD_FIELDS[name][2]}})
    assert f"{section_of(name)}.{name}" in str(nested.value)


def test_checks_across_fields_name_section_and_fields() -> None:
    cases = [
        ({"threshold": 1.5}, "trigger.threshold"),
        ({"threshold": -3}, "trigger.threshold"),
        ({"min_chunk_ratio": 0.5}, "chunking.min_chunk_ratio must not exceed chunking.base_chunk_ratio"),
        ({"summary_end_marker": "[CONTEXT SUMMARY]"}, "markers.summary_start_marker"),
    ]
    for kwargs, words in cases:
        with pytest.raises(ValidationError) as info:
            CompactionConfig(**kwargs)
        assert words in str(info.value), kwargs


def test_unknown_names_are_refused() -> None:
    with pytest.raises(ValidationError, match="keep_recent_mesages"):
        CompactionConfig(keep_recent_mesages=4)
    with pytest.raises(ValidationError, match=r"tail\.keep_recent_mesages"):
        CompactionConfig(tail={"keep_recent_mesages": 4})
    with pytest.raises(ValueError, match="no field 'keep_recent_mesages'"):
        CompactionConfig().model_copy(update={"keep_recent_mesages": 4})


def _all_other_values() -> dict[str, Any]:
    return {name: other for name, (_default, other, _bad) in OLD_FIELDS.items()}


def test_all_old_keywords_at_once_and_every_round_trip() -> None:
    config = CompactionConfig(**_all_other_values())
    for name, value in _all_other_values().items():
        assert getattr(config, name) == value, name
    nested = config.model_dump()
    assert set(nested) == set(section_models())
    assert CompactionConfig.model_validate(nested) == config
    assert CompactionConfig.model_validate_json(config.model_dump_json()) == config
    flat = config.to_flat()
    assert set(flat) == set(flat_field_names())
    assert CompactionConfig.model_validate(flat) == config
    assert CompactionConfig.model_validate(json.loads(json.dumps(config.to_flat(mode="json")))) == config
    assert CompactionConfig(**flat) == config
    assert hash(CompactionConfig(**flat)) == hash(config)


def test_a_saved_flat_configuration_loads() -> None:
    """The record of a compaction (and saved configurations) carry the flat shape."""
    saved = {name: default for name, (default, _other, _bad) in OLD_FIELDS.items()}
    saved["keep_recent_messages"] = 3
    assert CompactionConfig.model_validate(json.loads(json.dumps(saved))) == CompactionConfig(keep_recent_messages=3)
    assert CompactionConfig().to_flat(mode="json") == json.loads(json.dumps(saved | {"keep_recent_messages": 6}))


def test_a_flat_name_overrides_its_section() -> None:
    """What the service does: the server's configuration dumped, a request's flat overrides on top."""
    base = CompactionConfig(keep_recent_messages=8, keep_recent_tokens=5_000)
    merged = CompactionConfig.model_validate({**base.model_dump(), "keep_recent_messages": 2})
    assert merged.keep_recent_messages == 2
    assert merged.keep_recent_tokens == 5_000
    given = CompactionConfig(tail=TailConfig(keep_recent_tokens=5_000), keep_recent_messages=2)
    assert (given.keep_recent_messages, given.keep_recent_tokens) == (2, 5_000)
    assert given.explicit_fields() == {"keep_recent_messages", "keep_recent_tokens"}


def test_immutable_by_either_name() -> None:
    config = CompactionConfig()
    with pytest.raises((AttributeError, ValidationError)):
        config.keep_recent_messages = 3  # type: ignore[misc]
    with pytest.raises(ValidationError):
        config.tail.keep_recent_messages = 3  # type: ignore[misc]
    with pytest.raises(ValidationError):
        config.tail = TailConfig()  # type: ignore[misc]
    assert config.keep_recent_messages == 6


def _flat_declarations() -> dict[str, Any]:
    """The flat names CompactionConfig declares for type checkers (under ``if TYPE_CHECKING:`` in
    its class body, absent at run time), each with its declared type."""
    tree = ast.parse(inspect.getsource(config_module))
    (cls,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "CompactionConfig"]
    (block,) = [
        node
        for node in cls.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
    ]
    found: dict[str, Any] = {}
    for statement in block.body:
        assert isinstance(statement, ast.AnnAssign), ast.unparse(statement)
        assert isinstance(statement.target, ast.Name), ast.unparse(statement)
        assert statement.target.id not in found, statement.target.id
        found[statement.target.id] = eval(ast.unparse(statement.annotation), vars(config_module))
    return found


def test_flat_names_are_declared_once_each_with_their_fields_type() -> None:
    """What mypy checks constructor keywords and readers against: every field, in section order,
    typed as the field is (a field added to a section without its declaration fails here)."""
    declared = _flat_declarations()
    assert list(declared) == list(flat_field_names())
    for name, annotation in declared.items():
        assert annotation == field_info(name).annotation, name


def test_auto_compaction_switch() -> None:
    assert CompactionConfig().auto_compaction_enabled
    assert not CompactionConfig(threshold=0).auto_compaction_enabled
    assert not CompactionConfig(enabled=False).auto_compaction_enabled
