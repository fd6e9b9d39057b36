"""guards: context-window resolution, per-request token budgets and error classification.

The lower layer of ``compaction``: no dependency on the engine and no import of litellm
(its bundled model map is read as plain JSON).

Example:
    >>> from guards import ContextWindowGuard, classify_error, ErrorKind
    >>> guard = ContextWindowGuard("my-model", window=128_000, max_output_tokens=4_096)
    >>> guard.budget
    103904
    >>> guard.check(95_000).action  # an estimate: x1.2 = 114,000 > budget
    'compact'
    >>> classify_error("prompt is too long: 213462 tokens > 200000 maximum").kind is ErrorKind.CONTEXT_OVERFLOW
    True
"""

from guards.model_windows import (
    ModelLimits,
    ModelRegistry,
    lookup_litellm_model_info,
    lookup_litellm_window,
)
from guards.overflow import (
    ErrorClassification,
    ErrorKind,
    classify_error,
    detect_silent_overflow,
    is_context_overflow,
    parse_retry_after,
)
from guards.window import (
    DEFAULT_RESERVE_TOKENS,
    DEFAULT_THRESHOLD_FRACTION,
    DEFAULT_WINDOW,
    HARD_MIN_TOKENS,
    SAFETY_MARGIN,
    WARN_BELOW_TOKENS,
    WARN_RATIO,
    ContextWindowGuard,
    ContextWindowTooSmall,
    GuardAction,
    GuardDecision,
    WindowResolution,
    WindowSource,
    apply_safety_margin,
    resolve_window,
)

__all__ = [
    "DEFAULT_RESERVE_TOKENS",
    "DEFAULT_THRESHOLD_FRACTION",
    "DEFAULT_WINDOW",
    "HARD_MIN_TOKENS",
    "SAFETY_MARGIN",
    "WARN_BELOW_TOKENS",
    "WARN_RATIO",
    "ContextWindowGuard",
    "ContextWindowTooSmall",
    "ErrorClassification",
    "ErrorKind",
    "GuardAction",
    "GuardDecision",
    "ModelLimits",
    "ModelRegistry",
    "WindowResolution",
    "WindowSource",
    "apply_safety_margin",
    "classify_error",
    "detect_silent_overflow",
    "is_context_overflow",
    "lookup_litellm_model_info",
    "lookup_litellm_window",
    "parse_retry_after",
    "resolve_window",
]
