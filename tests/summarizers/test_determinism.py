"""The offline summary is the same bit for bit on every machine.

Its similarity matrix went through numpy's BLAS (OpenBLAS picks a kernel for the processor), whose
summation order, and so the last bits of each cosine, depend on the kernel: at 20,000 messages a
near-tie then broke differently on a Haswell and a SkylakeX path. The matrix is now made of integer
weights whose dot products float64 holds exactly. Here OpenBLAS is forced onto several kernels
(``OPENBLAS_CORETYPE``), each in its own process, and the matrix and whole summaries are compared
byte for byte; in process, the order of the vocabulary (which is the order of the BLAS sums) must
not change a bit either.
"""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compaction.summarizers._score import _EXACT_SUM, _integer_weights, mmr_order, similarity, tokens

ROOT = Path(__file__).resolve().parents[2]
# Kernels every x86-64 CI runner can execute (AVX2, AVX, SSE3); each sums a dot product its own way.
CORE_TYPES = ("Haswell", "Sandybridge", "Prescott")
# What OpenBLAS reports for each (with OPENBLAS_VERBOSE=2): it runs Prescott on its Katmai kernels.
REPORTED = {"Haswell": "Haswell", "Sandybridge": "Sandybridge", "Prescott": "Katmai"}


def _openblas() -> bool:
    try:
        config = np.show_config(mode="dicts")
    except TypeError:  # numpy < 1.26 prints only
        return False
    name = str(config.get("Build Dependencies", {}).get("blas", {}).get("name", ""))
    return "openblas" in name.lower()


needs_openblas_x86 = pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64") or not _openblas(),
    reason="OPENBLAS_CORETYPE needs numpy built on OpenBLAS, on x86-64",
)

_MATRIX_PROBE = r"""
import hashlib, sys
from compaction.testing.transcripts import generate
from compaction.summarizers._score import mmr_order, similarity
texts = []
for message in generate("job_search", 600, seed=3).messages:
    content = message.get("content")
    if isinstance(content, str):
        texts.extend(line for line in content.splitlines() if len(line) > 30)
texts = texts[:300]
matrix = similarity(texts)
order = mmr_order(texts, [1.0 - k / len(texts) for k in range(len(texts))])
print(hashlib.sha256(matrix.tobytes()).hexdigest(), hashlib.sha256(repr(order).encode()).hexdigest(), len(texts))
"""

_SUMMARY_PROBE = r"""
import hashlib, sys
from compaction.testing.transcripts import generate
from compaction.adapters import to_canonical
from compaction.summarizers.extractive import ExtractiveSummarizer
out = []
for scenario in ("job_search", "coding"):
    messages = to_canonical([dict(m) for m in generate(scenario, int(sys.argv[1]), seed=1).messages], None).messages
    text = ExtractiveSummarizer().summarize_messages(messages, max_tokens=4000)
    out.append(hashlib.sha256(text.encode()).hexdigest())
print(" ".join(out))
"""


def _run(probe: str, core: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_CORETYPE": core, "OPENBLAS_VERBOSE": "2"}
    done = subprocess.run(
        [sys.executable, "-c", probe, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # OpenBLAS says which kernel it took: the forced one, or the test compares nothing.
    assert f"Core: {REPORTED[core]}" in done.stdout + done.stderr, (core, done.stdout[:200])
    return done.stdout.strip().splitlines()[-1]


@needs_openblas_x86
def test_similarity_and_mmr_order_are_the_same_under_every_blas_kernel() -> None:
    found = {core: _run(_MATRIX_PROBE, core) for core in CORE_TYPES}
    assert len(set(found.values())) == 1, found


@needs_openblas_x86
def test_the_offline_summary_is_byte_identical_under_every_blas_kernel() -> None:
    found = {core: _run(_SUMMARY_PROBE, core, "500") for core in CORE_TYPES[:2]}
    assert len(set(found.values())) == 1, found


def _texts() -> list[str]:
    words = [
        "cache",
        "queue",
        "retry",
        "index",
        "shard",
        "replica",
        "lease",
        "token",
        "budget",
        "window",
        "summary",
        "ledger",
        "archive",
    ]
    return [
        " ".join(words[(k * 7 + j * 3) % len(words)] for j in range(3 + k % 9)) + f" item{k % 17}" for k in range(120)
    ]


def test_the_vocabulary_order_does_not_change_a_bit() -> None:
    # Reversing each text's words reverses the order terms enter the vocabulary, so every dot
    # product is summed in another order; TF-IDF is the same, and so must every bit be.
    texts = _texts()
    turned = [" ".join(reversed(text.split())) for text in texts]
    assert similarity(texts).tobytes() == similarity(turned).tobytes()
    relevance = [round(1.0 - 0.003 * k, 9) for k in range(len(texts))]
    assert mmr_order(texts, relevance) == mmr_order(turned, relevance)


def test_the_integer_weights_give_exact_cosines() -> None:
    rng = np.random.default_rng(5)
    weights = rng.random((40, 300)) * (rng.random((40, 300)) < 0.2) * 17.0
    whole = _integer_weights(weights)
    assert np.array_equal(whole, np.floor(whole))
    assert whole.min() >= 0
    assert float((whole * whole).sum(axis=1).max()) < _EXACT_SUM
    # Their float64 dot products are the exact integer ones, whatever the summation order.
    exact = [[sum(int(a) * int(b) for a, b in zip(row, other, strict=True)) for other in whole] for row in whole]
    assert (whole @ whole.T).tolist() == [[float(v) for v in row] for row in exact]
    # And they are the TF-IDF cosines (the rounding of the weights moves them by far less than 1e-5).
    texts = _texts()[:30]
    sims = similarity(texts)
    for i in range(len(texts)):
        for j in range(len(texts)):
            assert sims[i, j] == pytest.approx(_cosine(texts, i, j), rel=1e-5, abs=1e-9)


def _cosine(texts: list[str], i: int, j: int) -> float:
    """The cosine of texts i and j from the same TF-IDF, in plain floats (a reference)."""
    docs = [tokens(t) for t in texts]
    n = len(docs)
    vocab = sorted({t for d in docs for t in d})
    df = {t: sum(1 for d in docs if t in d) for t in vocab}

    def vec(doc: list[str]) -> dict[str, float]:
        return {t: (1 + math.log(doc.count(t))) * (math.log((1 + n) / (1 + df[t])) + 1) for t in set(doc)}

    a, b = vec(docs[i]), vec(docs[j])
    dot = sum(a[t] * b.get(t, 0.0) for t in a)
    return dot / math.sqrt(sum(v * v for v in a.values())) / math.sqrt(sum(v * v for v in b.values()))
