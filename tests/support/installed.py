"""Optional packages the tests need: skipped outside CI when missing, a failure in CI.

The ``test`` extra installs every package imported here (the ``bench`` extra: matplotlib too, and the
test extra includes it). With ``pytest.importorskip`` a broken install would skip whole modules
(the server's, the integrations') and the run would still pass; CI sets ``CI`` and installs the
extras, so there a missing package is the breakage to report, never a skip.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

__all__ = ["in_ci", "require"]


def in_ci() -> bool:
    """``CI`` is set to anything but an empty, "0" or "false" value (CI services set ``CI=true``)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require(module: str, *, extra: str = "test") -> ModuleType:
    """Import ``module``; when it is missing, skip (outside CI) or fail (in CI).

    Usable at module level (skips or fails the whole module) and inside a test."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if in_ci():
            pytest.fail(f"{module} is not importable in CI, where .[{extra}] is installed: {exc}", pytrace=False)
        pytest.skip(f"{module} is not installed: pip install -e '.[{extra}]'", allow_module_level=True)
