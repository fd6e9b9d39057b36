"""Loading a file of examples/ as a module, for the tests that run an example offline."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(file_name: str) -> ModuleType:
    """``examples/<file_name>`` imported (run) as a fresh module named ``<stem>_example``."""
    spec = importlib.util.spec_from_file_location(f"{Path(file_name).stem}_example", EXAMPLES / file_name)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
