"""The package surface: a light import, every public name resolvable, documented examples true."""

from __future__ import annotations

import doctest
import importlib
import json
import subprocess
import sys

import pytest

import compaction

HEAVY = ("litellm", "openai", "httpx", "tiktoken", "tokenizers", "numpy", "pydantic")


def test_import_is_light_and_never_loads_litellm() -> None:
    code = f"import sys, json; import compaction, guards; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_first_use_of_the_api_still_does_not_load_litellm() -> None:
    code = (
        "import sys; from compaction import Compactor; "
        "c = Compactor('gpt-4o'); r = c.compact([{'role': 'user', 'content': 'hi'}]); "
        "print('litellm' in sys.modules, 'openai' in sys.modules, r.reason)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "not", "enough", "messages", "to", "compact"]


def test_every_public_name_resolves() -> None:
    for name in compaction.__all__:
        assert getattr(compaction, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = compaction.nope  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "module",
    [
        "compaction",
        "compaction.adapters",
        "compaction.budget",
        "compaction.config",
        "compaction.compactor",
        "compaction.errors",
        "compaction.pairs",
        "compaction.patterns.harness",
        "compaction.patterns.measurements",
        "compaction.render",
        "compaction.transcript",
        "compaction.stages.chunk",
        "compaction.stages.fit",
        "compaction.summarizers._segment",
        "compaction.summarizers._select",
        "compaction.summarizers.scripted",
        "compaction.tokens",
    ],
)
def test_documented_examples(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module} has no examples"
    assert result.failed == 0
