"""The command line's and the service's configuration options come from CompactionConfig's fields:
every field is an option of ``inspect``, ``compact`` and ``serve`` and either a per-request option
of the service or in its documented exclusion list, with the field's type, bounds and description."""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from pydantic import ValidationError

from compaction import config_options
from compaction.cli import build_parser, main
from compaction.config import CompactionConfig, field_info, flat_field_names
from compaction.config_options import (
    NOT_ON_COMMAND_LINE,
    add_config_arguments,
    config_from_args,
    config_option_errors,
    flags_of,
)
from compaction.server.schemas import NOT_PER_REQUEST, REQUEST_OPTIONS, CompactOptions
from tests.engine.test_config_sections import OLD_FIELDS

EXAMPLE = str(Path(__file__).resolve().parents[2] / "compaction" / "examples" / "coding_session.json")
ON_COMMAND_LINE = [name for name in flat_field_names() if name not in NOT_ON_COMMAND_LINE]


def _argv(name: str, value: Any) -> list[str]:
    """The command-line words that set ``name`` to ``value``."""
    flag = flags_of(name)[-1]
    if isinstance(value, bool):
        return [flag if value else flag.replace("--", "--no-", 1)]
    if isinstance(value, tuple):
        return [flag, *(str(part) for part in value)]
    return [flag, str(value)]


def _parsed(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_every_field_is_on_the_command_line_or_excluded_with_a_reason() -> None:
    assert set(NOT_ON_COMMAND_LINE) <= set(flat_field_names())
    assert all(len(reason) > 20 for reason in NOT_ON_COMMAND_LINE.values())
    for command in (["inspect", EXAMPLE], ["compact", EXAMPLE], ["serve"]):
        parser = build_parser()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        dests = {action.dest for action in sub.choices[command[0]]._actions}
        missing = [name for name in ON_COMMAND_LINE if name not in dests]
        assert not missing, f"{command[0]}: no option for {missing}"
        assert not dests & set(NOT_ON_COMMAND_LINE)


@pytest.mark.parametrize("name", ON_COMMAND_LINE)
def test_an_option_sets_its_field(name: str) -> None:
    value = OLD_FIELDS[name][1] if name in OLD_FIELDS else pytest.fail(f"no sample value for new field {name}")
    for command in (["compact", EXAMPLE], ["inspect", EXAMPLE], ["serve"]):
        config = config_from_args(_parsed(*command, *_argv(name, value)))
        assert getattr(config, name) == value, (command, name)
        assert config == CompactionConfig(**{name: value})


def test_no_option_leaves_the_defaults() -> None:
    for command in (["compact", EXAMPLE], ["serve"]):
        args = _parsed(*command)
        assert config_from_args(args) == CompactionConfig()
        assert not hasattr(args, "keep_recent_messages")


def test_historical_flags_and_the_generated_ones_agree() -> None:
    assert flags_of("keep_recent_messages") == ["--keep-recent", "--keep-recent-messages"]
    for flag in ("--keep-recent", "--keep-recent-messages"):
        assert config_from_args(_parsed("compact", EXAMPLE, flag, "3")).keep_recent_messages == 3


def test_values_the_types_need() -> None:
    args = _parsed(
        "serve", "--threshold", "5000", "--summarize-deadline-s", "none", "--summarizer-tool-preview", "500", "200"
    )
    config = config_from_args(args)
    assert config.threshold == 5000
    assert isinstance(config.threshold, int)
    assert config.summarize_deadline_s is None
    assert config.summarizer_tool_preview == (500, 200)
    assert config_from_args(_parsed("serve", "--threshold", "0.5")).threshold == 0.5
    assert config_from_args(_parsed("serve", "--threshold", "1")).threshold == 1.0  # the whole window, not 1 token


@pytest.mark.parametrize("name", sorted(n for n in ON_COMMAND_LINE if OLD_FIELDS[n][2] is not None))
def test_a_value_outside_the_bounds_names_the_option(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    bad = OLD_FIELDS[name][2]
    flag = flags_of(name)[0]
    if isinstance(bad, str):  # a choice that is not one
        with pytest.raises(SystemExit):
            _parsed("compact", EXAMPLE, flag, bad)
        assert "invalid choice" in capsys.readouterr().err
        return
    with pytest.raises(SystemExit) as exit_info:  # inspect and compact refuse it while parsing
        _parsed("compact", EXAMPLE, flag, str(bad))
    assert exit_info.value.code == 2
    assert f"argument {flag}" in capsys.readouterr().err
    problems = config_option_errors(_parsed("serve", flag, str(bad)))  # serve reports them all at once
    assert list(problems) == [name]
    assert problems[name].startswith(f"{flag} must be")
    assert str(bad) in problems[name]


def test_checks_across_fields_are_one_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", EXAMPLE, "--min-chunk-ratio", "0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "chunking.min_chunk_ratio" in err
    assert "--min-chunk-ratio" in err


def test_help_comes_from_the_field_description() -> None:
    help_text = build_parser()._subparsers._group_actions[0].choices["compact"].format_help()  # type: ignore[union-attr]
    assert "configuration: tail:" in help_text
    assert "The recent tail kept verbatim" in help_text
    assert "(default 6)" in help_text


def test_a_percent_sign_in_a_description_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    real = field_info

    def with_percent(name: str) -> Any:
        info = real(name)
        if name == "max_chunks":
            info = copy.copy(info)
            info.description = "At most 50 % of the zone, in chunks. More words."
        return info

    monkeypatch.setattr(config_options, "field_info", with_percent)
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    assert "At most 50 % of the zone, in chunks (default 8)" in " ".join(parser.format_help().split())


def test_a_field_of_a_type_the_command_line_cannot_read_must_be_decided(monkeypatch: pytest.MonkeyPatch) -> None:
    real = field_info

    def with_a_mapping(name: str) -> Any:
        info = real(name)
        if name == "max_chunks":
            info = copy.copy(info)
            info.annotation = dict[str, int]
        return info

    monkeypatch.setattr(config_options, "field_info", with_a_mapping)
    with pytest.raises(TypeError, match=r"max_chunks.*NOT_ON_COMMAND_LINE"):
        add_config_arguments(argparse.ArgumentParser())


# -- the service's per-request options ------------------------------------------------------------


def test_every_field_is_a_request_option_or_excluded_with_a_reason() -> None:
    assert not set(REQUEST_OPTIONS) & set(NOT_PER_REQUEST)
    assert set(REQUEST_OPTIONS) | set(NOT_PER_REQUEST) == set(flat_field_names())
    assert all(len(reason) > 20 for reason in NOT_PER_REQUEST.values())
    assert set(CompactOptions.model_fields) == set(REQUEST_OPTIONS)


def _type_and_bounds(annotation: Any) -> tuple[Any, list[Any]]:
    """(the type without None, its Annotated bounds)."""
    if get_origin(annotation) in (Union, type(int | None)):
        members = [a for a in get_args(annotation) if a is not type(None)]
        annotation = members[0] if len(members) == 1 else Union[tuple(members)]  # noqa: UP007
    if get_origin(annotation) is Annotated:
        inner, *bounds = get_args(annotation)
        return inner, bounds
    return annotation, []


@pytest.mark.parametrize("name", sorted(REQUEST_OPTIONS))
def test_a_request_option_is_its_field(name: str) -> None:
    option = CompactOptions.model_fields[name]
    field = field_info(name)
    assert option.default is None
    option_type, bounds = _type_and_bounds(option.annotation)
    assert option_type == _type_and_bounds(field.annotation)[0]
    assert all(bound in bounds for bound in field.metadata), (bounds, field.metadata)  # the field's own bounds hold
    assert (option.description or "").startswith(" ".join((field.description or "").split()))
    value = OLD_FIELDS[name][1]
    options = CompactOptions.model_validate({name: value})
    update = options.model_dump(exclude_none=True)
    merged = CompactionConfig.model_validate({**CompactionConfig().model_dump(), **update})
    assert getattr(merged, name) == value
    bad = OLD_FIELDS[name][2]
    if bad is not None:
        with pytest.raises(ValidationError) as info:
            CompactOptions.model_validate({name: bad})
        assert info.value.errors()[0]["loc"] == (name,)


def test_request_limits_are_kept() -> None:
    with pytest.raises(ValidationError):
        CompactOptions.model_validate({"keep_recent_messages": 100_001})
    with pytest.raises(ValidationError):
        CompactOptions.model_validate({"summary_prompt": ""})
    with pytest.raises(ValidationError):
        CompactOptions.model_validate({"concurrency": 2})  # not per request
    schema = CompactOptions.model_json_schema()
    assert schema["title"] == "CompactOptions"
    assert schema["additionalProperties"] is False
