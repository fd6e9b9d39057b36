"""Loading litellm's bundled map: lazily, once, thread-safely, and without litellm installed."""

from __future__ import annotations

import doctest
import importlib.util
from concurrent.futures import ThreadPoolExecutor

import pytest

import guards
from guards import model_windows, overflow, resolve_window, window


def test_concurrent_first_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_windows, "_map_cache", None)
    loads = 0
    real_build = model_windows._build_map

    def counting_build(raw: object) -> model_windows._ModelMap:
        nonlocal loads
        loads += 1
        return real_build(raw)  # type: ignore[arg-type]

    monkeypatch.setattr(model_windows, "_build_map", counting_build)
    with ThreadPoolExecutor(max_workers=8) as pool:
        windows = list(pool.map(model_windows.lookup_litellm_window, ["gpt-4o"] * 32))
    assert windows == [128_000] * 32
    assert loads == 1


def test_without_litellm_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_windows, "_map_cache", None)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, package=None: None)
    assert model_windows.lookup_litellm_window("gpt-4o") is None
    resolution = resolve_window("gpt-4o")
    assert (resolution.tokens, resolution.source) == (200_000, "default")


@pytest.mark.parametrize("module", [guards, model_windows, window, overflow], ids=lambda m: m.__name__)
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
    assert result.failed == 0
