"""The command-line options and the service's request fields, derived from :class:`CompactionConfig`.

Every configuration field is a command-line option of ``compaction inspect``, ``compact`` and
``serve`` (``--<name-with-dashes>``, grouped by section, its help the field's description, its bounds
the field's), unless :data:`NOT_ON_COMMAND_LINE` says why not. The service's per-request ``options``
model is generated from the same fields (:func:`request_options_model`). A field added to the
configuration therefore appears in both, or a test fails until it is listed as an exclusion.

Kept free of FastAPI and pydantic-settings imports (the CLI's ``--help`` stays fast).
"""

from __future__ import annotations

import argparse
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from compaction.config import CompactionConfig, field_info, flat_field_names, section_models, section_of

__all__ = [
    "HISTORICAL_FLAGS",
    "NOT_ON_COMMAND_LINE",
    "RequestField",
    "add_config_arguments",
    "add_model_arguments",
    "config_from_args",
    "config_option_errors",
    "config_overrides",
    "flags_of",
    "request_options_model",
]

# Flags older than the generated ones: kept as the option's first (and named-in-errors) flag.
HISTORICAL_FLAGS: Mapping[str, str] = {"keep_recent_messages": "--keep-recent"}

# Fields no command line offers, and why.
NOT_ON_COMMAND_LINE: Mapping[str, str] = {
    "verify_rounds": "read by nothing: accepted only so saved configurations still load",
}

# What an optional field's option takes to mean None ("no cap", "no deadline").
NONE_WORD = "none"


def flags_of(name: str) -> list[str]:
    """The option strings of the configuration field ``name``: its historical flag first, if any."""
    generated = "--" + name.replace("_", "-")
    historical = HISTORICAL_FLAGS.get(name)
    return [historical, generated] if historical else [generated]


def _command_line_fields() -> list[str]:
    return [name for name in flat_field_names() if name not in NOT_ON_COMMAND_LINE]


# -- parsing and checking one value --------------------------------------------------------------


def _without_none(annotation: Any) -> tuple[tuple[Any, ...], bool]:
    """The annotation's member types other than None, and whether None was one of them."""
    if get_origin(annotation) in (Union, types.UnionType):
        members = get_args(annotation)
        return tuple(m for m in members if m is not type(None)), type(None) in members
    return (annotation,), False


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None


def _fraction_or_count(text: str) -> float | int:
    """A fraction (0..1) stays a float; more than 1 is a whole number of tokens."""
    value = _number(text)
    return int(value) if value > 1 else value


def _bound_problem(name: str, value: Any) -> str | None:
    """What is wrong with ``value`` against the field's own bounds, in words; None when it is within."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    if name == "window" and value <= 0:  # zero is not "unset": say what a window must be
        from guards import HARD_MIN_TOKENS

        return f"must be a number of tokens, at least {HARD_MIN_TOKENS:,}; got {value}"
    for bound in field_info(name).metadata:
        if isinstance(bound, annotated_types.Ge) and value < bound.ge:  # type: ignore[operator]
            return f"must be {bound.ge} or more, got {value}"
        if isinstance(bound, annotated_types.Gt) and not value > bound.gt:  # type: ignore[operator]
            return f"must be more than {bound.gt}, got {value}"
        if isinstance(bound, annotated_types.Le) and value > bound.le:  # type: ignore[operator]
            return f"must be at most {bound.le}, got {value}"
        if isinstance(bound, annotated_types.Lt) and not value < bound.lt:  # type: ignore[operator]
            return f"must be less than {bound.lt}, got {value}"
    return None


@dataclass(frozen=True)
class _Kind:
    """How one field reads from the command line."""

    parse: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    boolean: bool = False
    pair: bool = False
    metavar: str | tuple[str, str] | None = None


def _kind(name: str) -> _Kind:
    members = _without_none(field_info(name).annotation)[0]
    if members == (bool,):
        return _Kind(boolean=True)
    if len(members) == 1 and get_origin(members[0]) is Literal:
        return _Kind(choices=tuple(str(choice) for choice in get_args(members[0])))
    if set(members) == {float, int}:
        return _Kind(parse=_fraction_or_count, metavar="X")
    if members == (int,):
        return _Kind(parse=_integer, metavar="N")
    if members == (float,):
        return _Kind(parse=_number, metavar="X")
    if members == (str,):
        return _Kind(parse=str, metavar="TEXT")
    if members == (tuple[int, int],):
        return _Kind(parse=_integer, pair=True, metavar=("FIRST", "LAST"))
    raise TypeError(
        f"config field {name!r} has a type the command line cannot read ({field_info(name).annotation}): "
        "teach compaction.config_options._kind to read it, or list it in NOT_ON_COMMAND_LINE with the reason"
    )


def _takes_none(name: str, kind: _Kind) -> bool:
    """Whether the option reads the word ``none`` as None: a single value of an optional field."""
    return _without_none(field_info(name).annotation)[1] and kind.parse is not None and not kind.pair


def _value_parser(name: str, kind: _Kind, check: bool) -> Callable[[str], Any]:
    """Parse one option value; ``check``: refuse a value outside the field's bounds right away."""
    assert kind.parse is not None
    parse = kind.parse
    takes_none = _takes_none(name, kind)

    def value(text: str) -> Any:
        if takes_none and text.strip().lower() == NONE_WORD:
            return None
        parsed = parse(text)
        problem = _bound_problem(name, parsed) if check else None
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return parsed

    value.__name__ = name  # argparse names the type in "invalid <type> value" messages
    return value


def _help(name: str) -> str:
    """The field's description, first sentence, with its default (``%`` escaped for argparse)."""
    info = field_info(name)
    text = re.sub(r"\s+", " ", (info.description or "").replace("``", "")).strip()
    sentence = re.split(r"(?<=[a-z)\]])\. ", text, maxsplit=1)[0].rstrip(".")
    default = info.default
    if isinstance(default, str) and len(default) > 40:
        shown = "the built-in text"
    elif isinstance(default, bool):
        shown = "on" if default else "off"
    else:
        shown = "none" if default is None else f"{default}"
    also = f"; '{NONE_WORD}' for none" if _takes_none(name, _kind(name)) and default is not None else ""
    return f"{sentence} (default {shown}{also})".replace("%", "%%")


# -- the options ---------------------------------------------------------------------------------


def add_config_arguments(parser: argparse.ArgumentParser, *, check: bool = True) -> None:
    """Add an option for every configuration field, one argument group per section.

    An option left out is absent from the parsed namespace (the configuration's default applies).
    ``check``: refuse a value outside the field's bounds while parsing (argparse's usage error);
    ``False`` leaves that to :func:`config_option_errors`, which reports every problem at once."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for name in _command_line_fields():
        section = section_of(name)
        if section not in groups:
            doc = (section_models()[section].__doc__ or "").strip()
            groups[section] = parser.add_argument_group(f"configuration: {section}", doc.replace("%", "%%"))
        kind = _kind(name)
        options: dict[str, Any] = {"dest": name, "default": argparse.SUPPRESS, "help": _help(name)}
        if kind.boolean:
            options["action"] = argparse.BooleanOptionalAction
        elif kind.choices is not None:
            options["choices"] = kind.choices
        else:
            options["type"] = _value_parser(name, kind, check)
            options["metavar"] = kind.metavar
            if kind.pair:
                options["nargs"] = 2
        groups[section].add_argument(*flags_of(name), **options)


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model`` and ``--summarizer``: not configuration fields (they choose the compactor's model
    and summarizer), but the command line and the server take them alike."""
    parser.add_argument(
        "--model", default="gpt-4o", help="the agent's model: chooses the tokenizer and the window (default gpt-4o)"
    )
    parser.add_argument(
        "--summarizer",
        default="extractive",
        help="'extractive' (offline, default) or a litellm model, e.g. openai/gpt-4o-mini (key from the environment)",
    )


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The configuration fields given on the command line, by flat name."""
    given = vars(args)
    overrides = {name: given[name] for name in _command_line_fields() if name in given}
    for name, value in overrides.items():
        if isinstance(value, list):  # a pair (nargs=2)
            overrides[name] = tuple(value)
    return overrides


def config_option_errors(args: argparse.Namespace) -> dict[str, str]:
    """Field name -> "--flag must be ..., got ..." for every given option outside its field's bounds."""
    problems: dict[str, str] = {}
    for name, value in config_overrides(args).items():
        problem = _bound_problem(name, value)
        if problem:
            problems[name] = f"{flags_of(name)[0]} {problem}"
    return problems


def config_from_args(args: argparse.Namespace, base: CompactionConfig | None = None) -> CompactionConfig:
    """``base`` (default: the defaults) with the options given on the command line; a ValueError of
    one line naming the options when the combination is invalid."""
    overrides = config_overrides(args)
    try:
        if base is None:
            return CompactionConfig(**overrides)
        return CompactionConfig.model_validate({**base.model_dump(), **overrides})
    except ValidationError as exc:
        raise ValueError(_one_line(exc, overrides)) from None


def _one_line(exc: ValidationError, given: Mapping[str, Any]) -> str:
    """The configuration's validation errors in one line: each with the option and section.field it
    is about (a check across a section's fields names the options given in that section)."""
    parts = []
    for error in exc.errors(include_url=False):
        location = [str(part) for part in error["loc"]]
        message = str(error["msg"]).removeprefix("Value error, ")
        if len(location) == 2 and location[1] in flat_field_names():
            parts.append(f"{flags_of(location[1])[0]} ({'.'.join(location)}): {message}")
            continue
        options = [flags_of(name)[0] for name in given if location and section_of(name) == location[0]]
        parts.append(f"{message} (given: {', '.join(options)})" if options else message)
    return "invalid configuration: " + "; ".join(parts)


# -- the service's per-request options -----------------------------------------------------------


@dataclass(frozen=True)
class RequestField:
    """A configuration field a request may override: the service's tighter limits (the sizes a
    request may carry, as ``annotated_types`` bounds) and a note added to its API description."""

    limits: tuple[Any, ...] = ()
    note: str = ""


def request_options_model(
    name: str, fields: Mapping[str, RequestField], *, doc: str, model_config: ConfigDict
) -> type[BaseModel]:
    """A pydantic model of the configuration fields ``fields``, each optional (None: keep the
    server's value), with the field's type, bounds and description plus the service's limits."""
    definitions: dict[str, Any] = {}
    for field_name, request in fields.items():
        info = field_info(field_name)
        members, _optional = _without_none(info.annotation)
        inner: Any = members[0] if len(members) == 1 else Union[members]  # noqa: UP007 (a runtime tuple)
        constrained: Any = inner
        bounds = [*info.metadata, *request.limits]
        if bounds:
            constrained = Annotated[(inner, *bounds)]
        description = " ".join((info.description or "").split())
        if request.note:
            description = f"{description} {request.note}"
        definitions[field_name] = (
            Optional[constrained],  # noqa: UP045 (built at run time)
            Field(default=None, description=description),
        )
    model: type[BaseModel] = create_model(name, __config__=model_config, __doc__=doc, **definitions)
    return model
