"""Context-window resolution and the per-request token guard.

The guard answers one question before each model call: given this many prompt tokens,
is it fine to send (``ok``), close to the compaction point (``warn``), time to compact
(``compact``), or impossible to send at all (``block``)?

Example:
    >>> guard = ContextWindowGuard("my-model", window=100_000, threshold=0.8)
    >>> guard.budget, guard.threshold_tokens
    (80000, 80000)
    >>> guard.check(85_200).action  # estimated: x1.2 -> 102,240 > window 100,000
    'block'
    >>> guard.check(75_000, exact=True).action  # >= 90 % of the threshold
    'warn'
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from guards.model_windows import ModelRegistry, lookup_litellm_model_info, lookup_litellm_window

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
    "GuardAction",
    "GuardDecision",
    "WindowResolution",
    "WindowSource",
    "apply_safety_margin",
    "resolve_window",
]

logger = logging.getLogger(__name__)

HARD_MIN_TOKENS = 16_000
WARN_BELOW_TOKENS = 32_000
DEFAULT_WINDOW = 200_000
DEFAULT_RESERVE_TOKENS = 20_000
SAFETY_MARGIN = 1.2
DEFAULT_THRESHOLD_FRACTION = 0.8
#: Share of the compaction point at which ``check`` starts answering "warn".
WARN_RATIO = 0.9

WindowSource = Literal["explicit", "registry", "litellm", "default"]
GuardAction = Literal["ok", "warn", "compact", "block"]


class ContextWindowTooSmall(ValueError):
    """The model's context window is below :data:`HARD_MIN_TOKENS`; compaction cannot work in it.

    >>> str(ContextWindowTooSmall(8192))
    'Model context window too small (8192 tokens). Minimum is 16000.'
    """

    def __init__(self, tokens: int, minimum: int = HARD_MIN_TOKENS) -> None:
        super().__init__(f"Model context window too small ({tokens} tokens). Minimum is {minimum}.")
        self.tokens = tokens
        self.minimum = minimum

    def __reduce__(self) -> tuple[type[ContextWindowTooSmall], tuple[int, int]]:
        # keep pickling (multiprocessing, pytest-xdist) working despite the custom __init__
        return (type(self), (self.tokens, self.minimum))


@dataclass(frozen=True, slots=True)
class WindowResolution:
    """Where a model's context window came from.

    ``max_output_tokens`` is the model's output limit when the source knows it
    (informational: the guard only reserves what the caller passes).
    """

    model: str
    tokens: int
    source: WindowSource
    warnings: tuple[str, ...] = ()
    max_output_tokens: int | None = None


def _require_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _require_non_negative_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return value


def _require_model(model: object) -> str:
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"model must be a non-empty string, got {model!r}")
    return model


def resolve_window(
    model: str,
    *,
    explicit: int | None = None,
    registry: ModelRegistry | None = None,
    enforce_minimum: bool = True,
) -> WindowResolution:
    """Resolve the context window of ``model``.

    Order: ``explicit`` > the user ``registry`` > litellm's bundled map > the default
    window of 200,000 tokens (with a warning). Warnings are also logged at WARNING on the
    ``guards.window`` logger.

    Raises :class:`ContextWindowTooSmall` for a window under 16,000 tokens unless
    ``enforce_minimum`` is False; a window under 32,000 tokens adds a warning.

    >>> resolve_window("anything", explicit=64_000)
    WindowResolution(model='anything', tokens=64000, source='explicit', warnings=(), max_output_tokens=None)
    >>> resolve_window("ollama/llama3")  # doctest: +SKIP
    Traceback (most recent call last):
    ...
    guards.window.ContextWindowTooSmall: Model context window too small (8192 tokens). Minimum is 16000.
    """
    model = _require_model(model)
    warnings: list[str] = []
    max_output: int | None = None
    source: WindowSource
    if explicit is not None:
        tokens = _require_positive_int("explicit", explicit)
        source = "explicit"
    else:
        limits = registry.lookup(model) if registry is not None else None
        litellm_window = None if limits is not None else lookup_litellm_window(model)
        if limits is not None:
            tokens, source, max_output = limits.window, "registry", limits.max_output_tokens
        elif litellm_window is not None:
            tokens, source = litellm_window, "litellm"
            info = lookup_litellm_model_info(model) or {}
            output = info.get("max_output_tokens")
            valid = isinstance(output, int) and not isinstance(output, bool) and output > 0
            max_output = output if valid else None
        else:
            tokens, source = DEFAULT_WINDOW, "default"
            warnings.append(
                f"model {model!r} not found in any registry; assuming the default window of {DEFAULT_WINDOW:,} tokens"
            )
    if tokens < HARD_MIN_TOKENS:
        if enforce_minimum:
            raise ContextWindowTooSmall(tokens)
        warnings.append(
            f"model {model!r} has a {tokens:,}-token context window ({source}), "
            f"below the hard minimum of {HARD_MIN_TOKENS:,}"
        )
    elif tokens < WARN_BELOW_TOKENS:
        warnings.append(
            f"model {model!r} has a small context window of {tokens:,} tokens ({source}); "
            f"below {WARN_BELOW_TOKENS:,} compaction has little room to work"
        )
    for message in warnings:
        logger.warning(message)
    return WindowResolution(
        model=model, tokens=tokens, source=source, warnings=tuple(warnings), max_output_tokens=max_output
    )


def _exact_fraction(value: float) -> Fraction:
    # repr() gives the shortest decimal form, so 1.2 becomes exactly 6/5 and
    # 85,200 x 1.2 stays 102,240 instead of drifting to 102,241 after ceil.
    return Fraction(repr(float(value)))


def apply_safety_margin(tokens: int, *, exact: bool, margin: float = SAFETY_MARGIN) -> int:
    """Inflate an estimated token count by ``margin`` (rounded up); exact counts pass through.

    >>> apply_safety_margin(85_200, exact=False)
    102240
    >>> apply_safety_margin(85_200, exact=True)
    85200
    """
    if exact:
        return tokens
    return math.ceil(tokens * _exact_fraction(margin))


@dataclass(frozen=True, slots=True)
class GuardDecision:
    """The outcome of :meth:`ContextWindowGuard.check`.

    ``tokens`` is the count passed in; ``effective_tokens`` has the safety margin applied
    when the count was an estimate. ``limit_tokens`` is ``window - max_output_tokens``:
    above it the request cannot be sent.
    """

    action: GuardAction
    tokens: int
    effective_tokens: int
    window: int
    budget: int
    threshold_tokens: int | None
    exact: bool
    reason: str
    limit_tokens: int

    @property
    def needs_compaction(self) -> bool:
        """True for ``compact`` and ``block``: the history must shrink before (or to) send."""
        return self.action in ("compact", "block")


class ContextWindowGuard:
    """Decide, per request, whether a prompt fits the model's context window.

    Arguments:
        model: model name used to resolve the window (see :func:`resolve_window`).
        window: explicit window in tokens; overrides every lookup.
        registry: user registry consulted before litellm's map.
        reserve_tokens: tokens kept free for the compaction call and its response.
            For small windows the reserve is scaled down so that the budget keeps at
            least half the window (a fixed reserve leaves nothing on 16K-32K models);
            the scaling is recorded in :attr:`warnings`.
        max_output_tokens: the ``max_tokens`` the caller requests; it counts against the window.
        threshold: when to compact. A float in (0, 1] is a fraction of the window, an
            int > 1 an absolute token count, 0 disables automatic compaction (``check``
            then never answers "compact"; it still answers "block").
        safety_margin: multiplier (>= 1) applied to estimated counts only.

    Decisions, on the effective count E (estimate x margin, or the exact count):
        * ``block``: E > window - max_output_tokens, the request cannot be sent;
        * ``compact``: E >= threshold_tokens, or E > budget;
        * ``warn``: E >= 90 % of the compaction point, which is min(threshold, budget),
          or the budget when the threshold is disabled (then E > budget is also "warn");
        * ``ok`` otherwise.

    >>> guard = ContextWindowGuard("m", window=200_000)
    >>> guard.budget, guard.threshold_tokens, guard.warn_tokens
    (180000, 160000, 144000)
    >>> guard.check(150_000).reason
    '~150,000 estimated tokens (x1.2 = 180,000) >= threshold 160,000'
    """

    __slots__ = (
        "_budget",
        "_margin",
        "_max_output_tokens",
        "_reserve_tokens",
        "_resolution",
        "_threshold_tokens",
        "_warn_tokens",
        "_warnings",
    )

    def __init__(
        self,
        model: str,
        *,
        window: int | None = None,
        registry: ModelRegistry | None = None,
        reserve_tokens: int = DEFAULT_RESERVE_TOKENS,
        max_output_tokens: int = 0,
        threshold: float | int = DEFAULT_THRESHOLD_FRACTION,
        safety_margin: float = SAFETY_MARGIN,
    ) -> None:
        _require_model(model)
        if window is not None:
            _require_positive_int("window", window)
        if registry is not None and not isinstance(registry, ModelRegistry):
            raise ValueError(f"registry must be a ModelRegistry or None, got {type(registry).__name__}")
        _require_non_negative_int("reserve_tokens", reserve_tokens)
        _require_non_negative_int("max_output_tokens", max_output_tokens)
        _validate_threshold(threshold)
        if (
            isinstance(safety_margin, bool)
            or not isinstance(safety_margin, int | float)
            or not math.isfinite(safety_margin)
            or safety_margin < 1
        ):
            raise ValueError(f"safety_margin must be a finite number >= 1, got {safety_margin!r}")

        resolution = resolve_window(model, explicit=window, registry=registry)
        total = resolution.tokens
        if max_output_tokens >= total:
            raise ValueError(
                f"max_output_tokens ({max_output_tokens:,}) must be smaller than the context window ({total:,} tokens)"
            )
        warnings = list(resolution.warnings)

        # Keep at least half the window for the conversation; the reserve gives way first.
        reserve = min(reserve_tokens, max(0, total // 2 - max_output_tokens))
        if reserve < reserve_tokens:
            message = (
                f"reserve_tokens scaled down from {reserve_tokens:,} to {reserve:,} so the budget "
                f"keeps at least half of the {total:,}-token window"
            )
            warnings.append(message)
            # Designed behaviour for small windows, not a fault: on the debug log only, and in
            # ``warnings`` for callers who want to show it.
            logger.debug(message)
        budget = total - reserve - max_output_tokens

        threshold_tokens = _threshold_tokens(threshold, total)
        point = budget if threshold_tokens is None else min(threshold_tokens, budget)

        self._resolution = resolution
        self._reserve_tokens = reserve
        self._max_output_tokens = max_output_tokens
        self._budget = budget
        self._threshold_tokens = threshold_tokens
        self._warn_tokens = math.ceil(point * _exact_fraction(WARN_RATIO))
        self._margin = float(safety_margin)
        self._warnings = tuple(warnings)

    @property
    def model(self) -> str:
        """The model name the window was resolved for."""
        return self._resolution.model

    @property
    def resolution(self) -> WindowResolution:
        """How the window was resolved (source and warnings)."""
        return self._resolution

    @property
    def window(self) -> int:
        """The model's context window in tokens."""
        return self._resolution.tokens

    @property
    def reserve_tokens(self) -> int:
        """The reserve actually kept (possibly scaled down from the requested one)."""
        return self._reserve_tokens

    @property
    def max_output_tokens(self) -> int:
        """Output tokens requested per call; they count against the window."""
        return self._max_output_tokens

    @property
    def budget(self) -> int:
        """Prompt tokens allowed: ``window - reserve_tokens - max_output_tokens`` (always > 0)."""
        return self._budget

    @property
    def limit_tokens(self) -> int:
        """Largest prompt that can be sent at all: ``window - max_output_tokens``."""
        return self.window - self._max_output_tokens

    @property
    def threshold_tokens(self) -> int | None:
        """Token count at which to compact, or None when automatic compaction is disabled."""
        return self._threshold_tokens

    @property
    def warn_tokens(self) -> int:
        """Effective token count from which :meth:`check` answers at least "warn"."""
        return self._warn_tokens

    @property
    def safety_margin(self) -> float:
        """Multiplier applied to estimated counts."""
        return self._margin

    @property
    def warnings(self) -> tuple[str, ...]:
        """Warnings from resolving the window and from scaling the reserve."""
        return self._warnings

    def effective_tokens(self, tokens: int, *, exact: bool) -> int:
        """Apply the safety margin to an estimated count (ceil); return exact counts unchanged.

        >>> ContextWindowGuard("m", window=100_000).effective_tokens(1_000, exact=False)
        1200
        """
        _require_non_negative_int("tokens", tokens)
        return apply_safety_margin(tokens, exact=exact, margin=self._margin)

    def check(self, tokens: int, *, exact: bool = False) -> GuardDecision:
        """Classify a prompt of ``tokens`` tokens (an estimate unless ``exact``).

        >>> guard = ContextWindowGuard("m", window=100_000, threshold=80_000)
        >>> guard.check(85_200, exact=True).reason
        '85,200 exact tokens >= threshold 80,000'
        """
        if not isinstance(exact, bool):
            raise ValueError(f"exact must be a bool, got {exact!r}")
        effective = self.effective_tokens(tokens, exact=exact)
        if exact:
            described = f"{tokens:,} exact tokens"
        else:
            described = f"~{tokens:,} estimated tokens (x{self._margin:g} = {effective:,})"
        action, reason = self._decide(effective, described)
        return GuardDecision(
            action=action,
            tokens=tokens,
            effective_tokens=effective,
            window=self.window,
            budget=self._budget,
            threshold_tokens=self._threshold_tokens,
            exact=exact,
            reason=reason,
            limit_tokens=self.limit_tokens,
        )

    def _decide(self, effective: int, described: str) -> tuple[GuardAction, str]:
        threshold = self._threshold_tokens
        if effective > self.limit_tokens:
            if self._max_output_tokens:
                limit = f"limit {self.limit_tokens:,} (window {self.window:,} - max output {self._max_output_tokens:,})"
            else:
                limit = f"window {self.window:,}"
            return "block", f"{described} > {limit}; the request cannot be sent"
        if threshold is not None and effective >= threshold:
            return "compact", f"{described} >= threshold {threshold:,}"
        if effective > self._budget:
            over = (
                f"{described} > budget {self._budget:,} (window {self.window:,} - reserve "
                f"{self._reserve_tokens:,} - max output {self._max_output_tokens:,})"
            )
            if threshold is None:
                return "warn", f"{over}; automatic compaction is disabled"
            return "compact", over
        if effective >= self._warn_tokens:
            if threshold is not None and threshold <= self._budget:
                point = f"threshold {threshold:,}"
            else:
                point = f"budget {self._budget:,}"
            return "warn", f"{described} >= {self._warn_tokens:,} ({WARN_RATIO:.0%} of {point})"
        return "ok", f"{described} < warning level {self._warn_tokens:,}"

    def __repr__(self) -> str:
        return (
            f"ContextWindowGuard(model={self.model!r}, window={self.window}, budget={self._budget}, "
            f"threshold_tokens={self._threshold_tokens}, source={self._resolution.source!r})"
        )


def _validate_threshold(threshold: object) -> None:
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise ValueError(f"threshold must be a float in (0, 1], an int > 1 or 0, got {threshold!r}")
    if threshold == 0:
        return
    if isinstance(threshold, int):
        if threshold < 2:
            raise ValueError(
                f"threshold must be a float in (0, 1], an int > 1 (absolute tokens) or 0, got {threshold!r}; "
                "use 1.0 for the whole window"
            )
        return
    if not math.isfinite(threshold) or not 0 < threshold <= 1:
        raise ValueError(
            f"threshold as a float must be a fraction in (0, 1], got {threshold!r}; "
            "pass an int for an absolute token count"
        )


def _threshold_tokens(threshold: float | int, window: int) -> int | None:
    if threshold == 0:
        return None
    if isinstance(threshold, int):
        if threshold > window:
            raise ValueError(f"threshold ({threshold:,} tokens) exceeds the context window ({window:,} tokens)")
        return threshold
    return max(1, math.floor(window * _exact_fraction(threshold)))
