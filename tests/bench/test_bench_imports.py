"""Every benchmark script imports: a helper that moves (as the server helpers did into
``benchmarks/common.py``) must not leave a benchmark that fails only when someone runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_IMPORT_ALL = """
import importlib, json, sys, traceback
failures = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException:  # a benchmark that exits on import is a failure too
        failures[name] = traceback.format_exc(limit=2)
print(json.dumps(failures))
"""


def _benchmark_modules() -> list[str]:
    names = []
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        if path.name == "__main__.py":
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if path.name == "__init__.py" else parts))
    return names


def test_every_benchmark_module_imports() -> None:
    modules = _benchmark_modules()
    assert "benchmarks.bench_responsive" in modules
    assert "benchmarks.peers.driver" in modules
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL, *modules], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    failures = json.loads(done.stdout.strip().splitlines()[-1])
    assert failures == {}, "\n".join(f"{name}:\n{trace}" for name, trace in failures.items())
