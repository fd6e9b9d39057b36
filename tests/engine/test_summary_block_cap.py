"""The summary block is small by default: a documented cap that scales with the window, counted in
the run's tokens (exact for exact tokenizers), with a larger ledger available as a setting."""

from __future__ import annotations

import re

import pytest

from benchmarks.common import summary_block
from compaction import CompactionConfig, Compactor
from compaction.budget import block_cap, within_block_cap
from compaction.testing.transcripts import generate


@pytest.fixture(scope="module")
def session() -> tuple[list[dict[str, object]], str | None]:
    g = generate("coding", 600, seed=5, format="openai")
    return list(g.messages), g.system


@pytest.mark.parametrize("window", [32_000, 64_000, 128_000])
def test_block_fits_its_cap_in_exact_tokens(session: tuple[list[dict[str, object]], str | None], window: int) -> None:
    messages, system = session
    compactor = Compactor("gpt-4o", None, CompactionConfig(window=window))
    result = compactor.compact(messages, system=system)
    assert result.compacted
    block = summary_block(result)
    cap = block_cap(CompactionConfig(), window)
    assert cap == int(window * 0.0625)
    assert compactor.counter.count_text(block) <= cap
    # The cap is used, not left empty: the ledger takes what the summary leaves.
    assert compactor.counter.count_text(block) > cap * 0.7
    assert "## Artifacts" in block
    # The block names the archive ids of what it covers, and each is in the archive.
    named = re.search(r"archived \((\S+) to (\S+)\)", block)
    assert named is not None
    assert {named[1], named[2]} <= set(result.archive)


def test_a_larger_ledger_is_a_setting(session: tuple[list[dict[str, object]], str | None]) -> None:
    messages, system = session
    lean = Compactor("gpt-4o", None, CompactionConfig(window=128_000))
    large = Compactor("gpt-4o", None, CompactionConfig(window=128_000, ledger_max_tokens=32_000))
    lean_block = summary_block(lean.compact(messages, system=system))
    large_block = summary_block(large.compact(messages, system=system))
    assert lean.counter.count_text(lean_block) <= 8_000 < lean.counter.count_text(large_block)


def test_explicit_block_cap_and_summary_share() -> None:
    config = CompactionConfig(summary_block_max_tokens=3_000)
    assert block_cap(config, 1_000_000) == 3_000
    capped = within_block_cap(config, 1_000_000)
    assert capped.max_summary_tokens == 3_000 - 750 - 120  # the ledger's share and the markers stay free
    assert within_block_cap(CompactionConfig(), 128_000).max_summary_tokens == 4_096  # under the cap already
    with pytest.raises(ValueError, match="summary_block_max_tokens"):
        CompactionConfig(summary_block_max_tokens=10)
