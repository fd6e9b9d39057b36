"""The service's start-up options and :class:`ServerSettings` cannot drift apart: ``compaction serve``
with no options configures exactly the settings' defaults, and every settings field is an option or
is named here with where it comes from instead. (The configuration's own options are generated from
:class:`CompactionConfig`: ``tests/engine/test_config_options.py``.)"""

from __future__ import annotations

import argparse
import inspect
from dataclasses import fields
from typing import Any

import pytest

from tests.support.installed import require

require("fastapi")

from compaction.server.options import add_arguments
from compaction.server.runner import _limits
from compaction.server.settings import ServerSettings

# Settings fields no start-up option sets one to one, and where their value comes from.
NOT_AN_OPTION = {
    "store_path": "--db (the path, or a PostgreSQL URL opened as the store)",
    "config": "the configuration options, generated from CompactionConfig",
    "compactor_cache_size": "not configurable: compactors kept per model and configuration",
}


def _settings_from_no_options(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.delenv("COMPACTION_API_KEYS", raising=False)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args([])
    summarizer = None if args.summarizer == "extractive" else args.summarizer
    return {
        "model": args.model,
        "summarizer": summarizer,
        "max_body_bytes": args.max_body_bytes,
        "heartbeat_s": args.heartbeat,
        "drain_timeout_s": args.drain_timeout,
        **_limits(args),
    }


def test_no_options_configure_the_settings_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    configured = _settings_from_no_options(monkeypatch)
    defaults = ServerSettings()
    assert {name: getattr(defaults, name) for name in configured} == configured


def test_every_settings_field_is_an_option_or_named_with_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    configured = set(_settings_from_no_options(monkeypatch))
    assert {f.name for f in fields(ServerSettings)} - configured == set(NOT_AN_OPTION)
    assert not configured & set(NOT_AN_OPTION)


def test_create_app_defaults_are_the_settings_defaults() -> None:
    # create_app takes every ServerSettings field by name: its defaults are the settings' own.
    from compaction.server.app import create_app

    defaults = ServerSettings()
    parameters = inspect.signature(create_app).parameters
    compared = {name: p.default for name, p in parameters.items() if name not in ("store", "config")}
    assert set(compared) == {f.name for f in fields(ServerSettings)} - {"config", "compactor_cache_size"}
    assert compared == {name: getattr(defaults, name) for name in compared}
    assert parameters["config"].default is None  # None: CompactionConfig(), the settings' default
