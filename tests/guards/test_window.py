"""Tests for guards.window and guards.model_windows."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from guards import (
    DEFAULT_WINDOW,
    ContextWindowGuard,
    ContextWindowTooSmall,
    ModelLimits,
    ModelRegistry,
    apply_safety_margin,
    lookup_litellm_model_info,
    lookup_litellm_window,
    resolve_window,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def too_small(tokens: int) -> str:
    return re.escape(f"Model context window too small ({tokens} tokens). Minimum is 16000.")


# --------------------------------------------------------------------------- litellm map


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o", 128_000),
        ("openai/gpt-4o", 128_000),
        ("GPT-4o", 128_000),
        ("claude-sonnet-4-5", 200_000),
        ("anthropic/claude-sonnet-4-5", 200_000),
        ("claude-sonnet-4-5-20250929", 200_000),
        ("gemini-2.5-pro", 1_048_576),
        ("gemini/gemini-2.5-pro", 1_048_576),
        ("ollama/llama3", 8_192),
        ("llama3", 8_192),  # bare name only known as ollama/llama3
        ("ollama_chat/llama3", 8_192),  # unknown prefix stripped, then re-prefixed
    ],
)
def test_litellm_window_lookup(model: str, window: int) -> None:
    assert lookup_litellm_window(model) == window


@pytest.mark.parametrize("model", ["no-such-model-xyz", "", "   ", "openai/no-such-model-xyz"])
def test_litellm_window_unknown(model: str) -> None:
    assert lookup_litellm_window(model) is None
    assert lookup_litellm_model_info(model) is None


def test_litellm_window_is_input_limit_not_max_tokens() -> None:
    info = lookup_litellm_model_info("gpt-4o")
    assert info is not None
    assert info["max_input_tokens"] == 128_000
    assert info["max_output_tokens"] == 16_384
    assert info["input_cost_per_token"] > 0
    assert info["output_cost_per_token"] > 0
    with pytest.raises(TypeError):
        info["max_input_tokens"] = 1  # type: ignore[index]


# --------------------------------------------------------------------------- registry


def test_registry_exact_glob_and_prefix_stripping() -> None:
    registry = ModelRegistry({"qwen-coder": 32_768})
    registry.register("ollama/*", 8_192, max_output_tokens=2_048)
    registry.register("ollama/llama3*", 65_536)
    assert registry.window("qwen-coder") == 32_768
    assert registry.window("openai/QWEN-coder") == 32_768  # prefix stripped, case-insensitive
    assert registry.lookup("ollama/mistral") == ModelLimits(8_192, 2_048)
    assert registry.window("ollama/llama3.1") == 65_536  # the longer pattern is more specific
    assert registry.lookup("other") is None
    assert "ollama/phi" in registry
    assert len(registry) == 3
    assert set(registry) == {"qwen-coder", "ollama/*", "ollama/llama3*"}
    assert registry.unregister("ollama/llama3*")
    assert not registry.unregister("ollama/llama3*")
    assert registry.window("ollama/llama3.1") == 8_192


def test_registry_replace_entry() -> None:
    registry = ModelRegistry()
    registry.register("m", 50_000)
    registry.register("M", 60_000)
    assert registry.window("m") == 60_000
    assert len(registry) == 1


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"name": "", "window": 1_000}, "name"),
        ({"name": "m", "window": 0}, "window"),
        ({"name": "m", "window": True}, "window"),
        ({"name": "m", "window": 1_000.0}, "window"),
        ({"name": "m", "window": 1_000, "max_output_tokens": 0}, "max_output_tokens"),
    ],
)
def test_registry_validation(kwargs: dict[str, object], argument: str) -> None:
    with pytest.raises(ValueError, match=argument):
        ModelRegistry().register(**kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- resolution


def test_resolution_order() -> None:
    registry = ModelRegistry({"gpt-4o": 64_000})
    explicit = resolve_window("gpt-4o", explicit=50_000, registry=registry)
    assert (explicit.tokens, explicit.source, explicit.warnings) == (50_000, "explicit", ())
    from_registry = resolve_window("gpt-4o", registry=registry)
    assert (from_registry.tokens, from_registry.source) == (64_000, "registry")
    from_litellm = resolve_window("gpt-4o", registry=ModelRegistry())
    assert (from_litellm.tokens, from_litellm.source) == (128_000, "litellm")
    assert from_litellm.max_output_tokens == 16_384
    default = resolve_window("no-such-model-xyz", registry=registry)
    assert (default.tokens, default.source) == (DEFAULT_WINDOW, "default")


def test_sonnet_resolves_to_200k() -> None:
    resolution = resolve_window("anthropic/claude-sonnet-4-5")
    assert (resolution.tokens, resolution.source) == (200_000, "litellm")
    assert resolution.warnings == ()


def test_default_window_warns_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="guards"):
        resolution = resolve_window("foo")
    message = "model 'foo' not found in any registry; assuming the default window of 200,000 tokens"
    assert resolution.warnings == (message,)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("guards")] == [message]


def test_ollama_llama3_is_too_small() -> None:
    resolution = resolve_window("ollama/llama3", enforce_minimum=False)
    assert (resolution.tokens, resolution.source) == (8_192, "litellm")
    assert "below the hard minimum" in resolution.warnings[0]
    with pytest.raises(ContextWindowTooSmall, match=f"^{too_small(8192)}$"):
        resolve_window("ollama/llama3")
    with pytest.raises(ContextWindowTooSmall) as raised:
        ContextWindowGuard("ollama/llama3")
    assert str(raised.value) == "Model context window too small (8192 tokens). Minimum is 16000."
    assert (raised.value.tokens, raised.value.minimum) == (8_192, 16_000)
    assert isinstance(raised.value, ValueError)


def test_too_small_from_explicit_and_registry() -> None:
    with pytest.raises(ContextWindowTooSmall, match=too_small(15999)):
        ContextWindowGuard("m", window=15_999)
    with pytest.raises(ContextWindowTooSmall, match=too_small(4096)):
        ContextWindowGuard("tiny", registry=ModelRegistry({"tiny": 4_096}))


@pytest.mark.parametrize(("window", "warns"), [(16_000, True), (31_999, True), (32_000, False), (128_000, False)])
def test_warning_below_32k(window: int, warns: bool) -> None:
    resolution = resolve_window("m", explicit=window)
    assert bool(resolution.warnings) is warns
    if warns:
        assert f"{window:,} tokens" in resolution.warnings[0]


def test_too_small_error_pickles() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(ContextWindowTooSmall(8192)))
    assert str(error) == "Model context window too small (8192 tokens). Minimum is 16000."


# --------------------------------------------------------------------------- budget


@pytest.mark.parametrize(
    ("window", "reserve", "max_output", "budget", "kept_reserve", "scaled"),
    [
        (200_000, 20_000, 0, 180_000, 20_000, False),
        (200_000, 20_000, 4_096, 175_904, 20_000, False),
        (128_000, 0, 16_384, 111_616, 0, False),
        (40_000, 20_000, 0, 20_000, 20_000, False),  # exactly half: untouched
        (32_000, 20_000, 0, 16_000, 16_000, True),
        (16_000, 20_000, 0, 8_000, 8_000, True),
        (16_000, 20_000, 2_000, 8_000, 6_000, True),
        (20_000, 20_000, 12_000, 8_000, 0, True),  # output alone takes more than half
    ],
)
def test_budget_arithmetic(
    window: int, reserve: int, max_output: int, budget: int, kept_reserve: int, scaled: bool
) -> None:
    guard = ContextWindowGuard("m", window=window, reserve_tokens=reserve, max_output_tokens=max_output)
    assert guard.budget == budget
    assert guard.reserve_tokens == kept_reserve
    assert guard.limit_tokens == window - max_output
    assert guard.budget == guard.window - guard.reserve_tokens - guard.max_output_tokens
    assert any("reserve_tokens scaled down" in w for w in guard.warnings) is scaled


def test_guard_uses_registry() -> None:
    guard = ContextWindowGuard("acme/big", registry=ModelRegistry({"acme/*": 500_000}))
    assert (guard.window, guard.resolution.source, guard.model) == (500_000, "registry", "acme/big")


# --------------------------------------------------------------------------- threshold


@pytest.mark.parametrize(
    ("threshold", "tokens"),
    [(0.8, 160_000), (0.5, 100_000), (1.0, 200_000), (0.001, 200), (100_000, 100_000), (2, 2), (0, None), (0.0, None)],
)
def test_threshold_tokens(threshold: float, tokens: int | None) -> None:
    assert ContextWindowGuard("m", window=200_000, threshold=threshold).threshold_tokens == tokens


def test_default_threshold_and_warn_level() -> None:
    guard = ContextWindowGuard("m", window=200_000)
    assert (guard.budget, guard.threshold_tokens, guard.warn_tokens) == (180_000, 160_000, 144_000)


# --------------------------------------------------------------------------- margin


def test_margin_only_on_estimates() -> None:
    guard = ContextWindowGuard("m", window=200_000)
    assert guard.effective_tokens(85_200, exact=False) == 102_240  # no float drift to 102,241
    assert guard.effective_tokens(85_200, exact=True) == 85_200
    assert guard.effective_tokens(1, exact=False) == 2  # rounded up
    assert guard.effective_tokens(0, exact=False) == 0
    assert apply_safety_margin(1_000, exact=False, margin=1.5) == 1_500
    assert ContextWindowGuard("m", window=200_000, safety_margin=1.0).effective_tokens(999, exact=False) == 999


# --------------------------------------------------------------------------- decisions


def test_reason_matches_spec_example() -> None:
    guard = ContextWindowGuard("m", window=200_000, threshold=80_000)
    decision = guard.check(85_200)
    assert decision.action == "compact"
    assert decision.reason == "~85,200 estimated tokens (x1.2 = 102,240) >= threshold 80,000"
    assert (decision.tokens, decision.effective_tokens, decision.exact) == (85_200, 102_240, False)
    assert (decision.window, decision.budget, decision.threshold_tokens) == (200_000, 180_000, 80_000)
    assert decision.needs_compaction


@pytest.mark.parametrize(
    ("tokens", "exact", "action", "reason"),
    [
        (50_000, False, "ok", "~50,000 estimated tokens (x1.2 = 60,000) < warning level 72,000"),
        (71_999, True, "ok", "71,999 exact tokens < warning level 72,000"),
        (72_000, True, "warn", "72,000 exact tokens >= 72,000 (90% of threshold 80,000)"),
        (60_000, False, "warn", "~60,000 estimated tokens (x1.2 = 72,000) >= 72,000 (90% of threshold 80,000)"),
        (80_000, True, "compact", "80,000 exact tokens >= threshold 80,000"),
        (85_200, True, "compact", "85,200 exact tokens >= threshold 80,000"),
        (90_000, True, "compact", "90,000 exact tokens >= threshold 80,000"),  # == limit: still sendable
        (
            90_001,
            True,
            "block",
            "90,001 exact tokens > limit 90,000 (window 100,000 - max output 10,000); the request cannot be sent",
        ),
        (
            85_200,
            False,
            "block",
            "~85,200 estimated tokens (x1.2 = 102,240) > limit 90,000 (window 100,000 - max output 10,000); "
            "the request cannot be sent",
        ),
    ],
)
def test_decisions(tokens: int, exact: bool, action: str, reason: str) -> None:
    # window 100,000 - max output 10,000 - no reserve: budget = limit = 90,000; threshold 80,000
    guard = ContextWindowGuard("m", window=100_000, max_output_tokens=10_000, reserve_tokens=0, threshold=80_000)
    assert (guard.budget, guard.limit_tokens, guard.warn_tokens) == (90_000, 90_000, 72_000)
    decision = guard.check(tokens, exact=exact)
    assert (decision.action, decision.reason) == (action, reason)
    assert decision.limit_tokens == 90_000


def test_block_reason_without_max_output() -> None:
    decision = ContextWindowGuard("m", window=100_000).check(100_001, exact=True)
    assert decision.action == "block"
    assert decision.reason == "100,001 exact tokens > window 100,000; the request cannot be sent"


def test_compact_when_over_budget_below_threshold() -> None:
    guard = ContextWindowGuard("m", window=100_000, threshold=1.0)  # threshold 100,000 > budget 80,000
    assert guard.warn_tokens == 72_000  # 90 % of the budget, the real compaction point
    over = guard.check(80_001, exact=True)
    assert over.action == "compact"
    assert over.reason == "80,001 exact tokens > budget 80,000 (window 100,000 - reserve 20,000 - max output 0)"
    assert guard.check(80_000, exact=True).action == "warn"
    assert guard.check(72_000, exact=True).reason == "72,000 exact tokens >= 72,000 (90% of budget 80,000)"


def test_threshold_zero_never_compacts() -> None:
    guard = ContextWindowGuard("m", window=100_000, threshold=0)
    assert guard.threshold_tokens is None
    actions = {guard.check(n, exact=True).action for n in range(0, 120_001, 500)}
    assert actions == {"ok", "warn", "block"}
    over = guard.check(85_000, exact=True)
    assert over.action == "warn"
    assert over.reason.endswith("; automatic compaction is disabled")
    assert guard.check(100_001, exact=True).action == "block"
    assert guard.check(10_000).action == "ok"


def test_decision_is_frozen() -> None:
    decision = ContextWindowGuard("m", window=100_000).check(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.action = "block"  # type: ignore[misc]


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"window": 0}, "window"),
        ({"window": -5}, "window"),
        ({"window": True}, "window"),
        ({"window": 100_000.0}, "window"),
        ({"reserve_tokens": -1}, "reserve_tokens"),
        ({"max_output_tokens": -1}, "max_output_tokens"),
        ({"max_output_tokens": 100_000}, "max_output_tokens"),
        ({"threshold": 1}, "threshold"),
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": -0.1}, "threshold"),
        ({"threshold": float("nan")}, "threshold"),
        ({"threshold": True}, "threshold"),
        ({"threshold": "0.8"}, "threshold"),
        ({"threshold": 100_001}, "threshold"),
        ({"safety_margin": 0.9}, "safety_margin"),
        ({"safety_margin": float("inf")}, "safety_margin"),
        ({"safety_margin": True}, "safety_margin"),
        ({"safety_margin": "1.2"}, "safety_margin"),
        ({"registry": {"m": 100_000}}, "registry"),
    ],
)
def test_guard_argument_validation(kwargs: dict[str, object], argument: str) -> None:
    kwargs.setdefault("window", 100_000)
    # The message starts with the argument's name (searched, a mangled name would still match).
    with pytest.raises(ValueError, match=rf"^{argument}\b"):
        ContextWindowGuard("m", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("model", ["", "  ", None, 42])
def test_model_validation(model: object) -> None:
    with pytest.raises(ValueError, match="model"):
        ContextWindowGuard(model, window=100_000)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="model"):
        resolve_window(model)  # type: ignore[arg-type]


def test_resolve_window_validates_explicit() -> None:
    with pytest.raises(ValueError, match=r"^explicit must be a positive int, got 0$"):
        resolve_window("m", explicit=0)


@pytest.mark.parametrize(
    ("tokens", "exact", "argument"),
    [(-1, False, "tokens"), (True, False, "tokens"), (1.5, False, "tokens"), (10, "yes", "exact")],
)
def test_check_validation(tokens: object, exact: object, argument: str) -> None:
    guard = ContextWindowGuard("m", window=100_000)
    with pytest.raises(ValueError, match=rf"^{argument} must be"):
        guard.check(tokens, exact=exact)  # type: ignore[arg-type]


def test_validation_messages_name_the_wrong_type_and_the_fix() -> None:
    with pytest.raises(ValueError, match=r"^registry must be a ModelRegistry or None, got dict$"):
        ContextWindowGuard("m", window=100_000, registry={"m": 100_000})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"; use 1\.0 for the whole window$"):
        ContextWindowGuard("m", window=100_000, threshold=1)
    with pytest.raises(ValueError, match=r"; pass an int for an absolute token count$"):
        ContextWindowGuard("m", window=100_000, threshold=1.5)
    with pytest.raises(ValueError, match=r"^window must be a positive int, got 0$"):
        ContextWindowGuard("m", window=0)


def test_smallest_values_at_the_edges_are_accepted() -> None:
    # A window of 1 token is a positive int (refused by the minimum, not by the type check).
    assert resolve_window("m", explicit=1, enforce_minimum=False).tokens == 1
    # An absolute threshold equal to the window is allowed; one token more is not.
    assert ContextWindowGuard("m", window=100_000, threshold=100_000).threshold_tokens == 100_000
    with pytest.raises(ValueError, match=r"^threshold \(100,001 tokens\) exceeds the context window"):
        ContextWindowGuard("m", window=100_000, threshold=100_001)
    # A tiny fraction still gives a threshold of one token, not zero (and not two).
    assert ContextWindowGuard("m", window=100_000, threshold=1e-9).threshold_tokens == 1


def test_odd_window_gives_an_int_budget_and_the_scaling_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="guards"):
        guard = ContextWindowGuard("m", window=16_001)
    # half of 16,001 rounds down: the reserve is 8,000 and the budget keeps 8,001
    assert (guard.reserve_tokens, guard.budget) == (8_000, 8_001)
    assert isinstance(guard.budget, int)
    assert isinstance(guard.reserve_tokens, int)
    message = (
        "reserve_tokens scaled down from 20,000 to 8,000 so the budget keeps at least half of the 16,001-token window"
    )
    assert message in guard.warnings
    assert message in [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]


def test_warn_reason_names_the_threshold_when_it_equals_the_budget() -> None:
    guard = ContextWindowGuard("m", window=100_000, threshold=80_000)  # budget 80,000 too
    assert guard.budget == 80_000
    decision = guard.check(75_000, exact=True)
    assert decision.reason == "75,000 exact tokens >= 72,000 (90% of threshold 80,000)"


def test_explicit_window_has_no_output_limit() -> None:
    assert resolve_window("gpt-4o", explicit=64_000).max_output_tokens is None
    assert resolve_window("m", registry=ModelRegistry({"m": 64_000})).max_output_tokens is None


def test_registry_hit_does_not_consult_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    import guards.window

    def no_lookup(model: str) -> None:
        raise AssertionError(f"litellm's map consulted for {model!r}")

    monkeypatch.setattr(guards.window, "lookup_litellm_window", no_lookup)
    monkeypatch.setattr(guards.window, "lookup_litellm_model_info", no_lookup)
    resolution = resolve_window("gpt-4o", registry=ModelRegistry({"gpt-4o": 64_000}))
    assert (resolution.tokens, resolution.source) == (64_000, "registry")


@pytest.mark.parametrize(
    ("output", "kept"), [(16_384, 16_384), (1, 1), (0, None), (-5, None), (True, None), ("4096", None), (None, None)]
)
def test_litellm_output_limit_kept_only_when_a_positive_int(
    monkeypatch: pytest.MonkeyPatch, output: object, kept: int | None
) -> None:
    import guards.window

    monkeypatch.setattr(guards.window, "lookup_litellm_window", lambda model: 128_000)
    monkeypatch.setattr(guards.window, "lookup_litellm_model_info", lambda model: {"max_output_tokens": output})
    resolution = resolve_window("some-model")
    assert (resolution.tokens, resolution.source, resolution.max_output_tokens) == (128_000, "litellm", kept)


# --------------------------------------------------------------------------- import hygiene


def test_import_guards_loads_neither_litellm_nor_compaction() -> None:
    code = textwrap.dedent(
        """
        import json, sys
        import guards
        guards.lookup_litellm_window("gpt-4o")
        guards.resolve_window("anthropic/claude-sonnet-4-5")
        guards.classify_error("prompt is too long: 2 tokens > 1 maximum")
        loaded = [m for m in sys.modules if m.split(".")[0] in ("litellm", "compaction", "openai", "httpx")]
        print(json.dumps(loaded))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(result.stdout) == []
