"""The one place that imports litellm, lazily.

``import litellm`` costs ~5 s and ~166 MB, and without ``LITELLM_LOCAL_MODEL_COST_MAP`` it
fetches the model price map from the network at import time. ``import compaction`` must stay
cheap, so every module that needs litellm calls :func:`load_litellm` at call time.
"""

from __future__ import annotations

import functools
import importlib
import os
from types import ModuleType
from typing import Any

__all__ = ["load_litellm"]


@functools.cache
def load_litellm() -> ModuleType:
    """Import litellm once, offline and quiet, and return the module."""
    # Use the bundled price/context map: no network fetch, no background swap mid-run.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # importlib rather than `import litellm` keeps mypy from type-checking all of litellm.
    module = importlib.import_module("litellm")
    litellm: Any = module  # its attributes are untyped for us
    # Otherwise unknown model names print a "Provider List" banner to stdout.
    litellm.suppress_debug_info = True
    return module
