"""Context-window lookup: litellm's bundled model map (read as JSON) and a user registry.

litellm ships its model map as a JSON file inside the package. Importing litellm costs
seconds and may touch the network, so this module finds the package directory with
:func:`importlib.util.find_spec` and reads the file directly; ``litellm`` itself is never
imported.

Example:
    >>> lookup_litellm_window("openai/gpt-4o")  # doctest: +SKIP
    128000
    >>> registry = ModelRegistry()
    >>> registry.register("my-llama-*", 32_768)
    >>> registry.lookup("my-llama-70b")
    ModelLimits(window=32768, max_output_tokens=None)
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = [
    "LITELLM_MAP_FILENAME",
    "ModelLimits",
    "ModelRegistry",
    "candidate_names",
    "lookup_litellm_model_info",
    "lookup_litellm_window",
]

LITELLM_MAP_FILENAME = "model_prices_and_context_window_backup.json"


@dataclass(frozen=True, slots=True)
class _ModelMap:
    """The parsed litellm map plus the indexes used for flexible name resolution."""

    entries: Mapping[str, Mapping[str, Any]]
    # lower-cased key -> real key, for case-insensitive matches
    folded: Mapping[str, str]
    # bare name -> "provider/name" keys ("gemini-2.5-pro" -> ("gemini/gemini-2.5-pro", ...))
    prefixed: Mapping[str, tuple[str, ...]]


_EMPTY_MAP = _ModelMap(entries={}, folded={}, prefixed={})
_map_lock = threading.Lock()
_map_cache: _ModelMap | None = None


def _litellm_map_path() -> Path | None:
    # find_spec on a top-level name locates the package without executing its __init__.
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / LITELLM_MAP_FILENAME
        if candidate.is_file():
            return candidate
    return None


def _build_map(raw: Mapping[str, Any]) -> _ModelMap:
    entries: dict[str, Mapping[str, Any]] = {}
    folded: dict[str, str] = {}
    prefixed: dict[str, list[str]] = {}
    for key, value in raw.items():
        # "sample_spec" documents the schema with strings; skip anything that is not an entry.
        if key == "sample_spec" or not isinstance(value, Mapping):
            continue
        entries[key] = MappingProxyType(dict(value))
        folded.setdefault(key.lower(), key)
        _provider, sep, bare = key.partition("/")
        # only "provider/name" keys: deeper keys are resellers' copies with their own limits
        if sep and bare and "/" not in bare:
            prefixed.setdefault(bare.lower(), []).append(key)
    ordered = {bare: tuple(sorted(keys, key=lambda k: _prefix_rank(k, entries[k]))) for bare, keys in prefixed.items()}
    return _ModelMap(entries=MappingProxyType(entries), folded=MappingProxyType(folded), prefixed=ordered)


def _prefix_rank(key: str, entry: Mapping[str, Any]) -> tuple[int, int, int, str]:
    # Prefer entries that state a window, then the key whose prefix is the entry's own
    # provider (gemini/gemini-2.5-pro over a reseller's copy), then chat models, then
    # alphabetical order for determinism.
    provider = key.partition("/")[0]
    has_window = 0 if isinstance(entry.get("max_input_tokens"), int) else 1
    own_provider = 0 if entry.get("litellm_provider") == provider else 1
    chat = 0 if entry.get("mode") == "chat" else 1
    return (has_window, own_provider, chat, key)


def _model_map() -> _ModelMap:
    global _map_cache
    cached = _map_cache
    if cached is not None:
        return cached
    with _map_lock:
        if _map_cache is None:
            path = _litellm_map_path()
            loaded = _EMPTY_MAP
            if path is not None:
                try:
                    raw = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    raw = None
                if isinstance(raw, Mapping):
                    loaded = _build_map(raw)
            _map_cache = loaded
        return _map_cache


def candidate_names(model: str) -> tuple[str, ...]:
    """Return ``model`` followed by its forms with leading provider segments removed.

    >>> candidate_names("openrouter/anthropic/claude-sonnet-4-5")
    ('openrouter/anthropic/claude-sonnet-4-5', 'anthropic/claude-sonnet-4-5', 'claude-sonnet-4-5')
    """
    name = model.strip()
    names = [name]
    while "/" in name:
        name = name.partition("/")[2]
        if name:
            names.append(name)
    return tuple(dict.fromkeys(names))


def _resolve_key(model: str) -> str | None:
    table = _model_map()
    if not table.entries:
        return None
    names = candidate_names(model)
    # exact first, then case-insensitive, for each form from most to least specific
    for name in names:
        if name in table.entries:
            return name
        folded = table.folded.get(name.lower())
        if folded is not None:
            return folded
    # a bare name that litellm only knows with a provider prefix
    for name in names:
        keys = table.prefixed.get(name.lower())
        if keys:
            return keys[0]
    return None


def lookup_litellm_model_info(model: str) -> Mapping[str, Any] | None:
    """Return litellm's raw (read-only) map entry for ``model``, or None when unknown.

    Names resolve flexibly: the exact key, then with provider prefixes stripped, then a
    provider-prefixed key for a bare name. The entry holds e.g. ``input_cost_per_token``.

    >>> info = lookup_litellm_model_info("gpt-4o")  # doctest: +SKIP
    >>> info["max_input_tokens"], info["max_output_tokens"]  # doctest: +SKIP
    (128000, 16384)
    """
    if not isinstance(model, str) or not model.strip():
        return None
    key = _resolve_key(model)
    if key is None:
        return None
    return _model_map().entries[key]


def lookup_litellm_window(model: str) -> int | None:
    """Return the input context window of ``model`` from litellm's bundled map.

    Only ``max_input_tokens`` is used: ``max_tokens`` in that file is the output limit.

    >>> lookup_litellm_window("gemini-2.5-pro")  # doctest: +SKIP
    1048576
    >>> lookup_litellm_window("no-such-model") is None  # doctest: +SKIP
    True
    """
    info = lookup_litellm_model_info(model)
    if info is None:
        return None
    value = info.get("max_input_tokens")
    # bool is an int subclass; reject it along with non-positive or non-integral values
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return int(value)


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """Limits a user registered for a model (``window`` = input context window)."""

    window: int
    max_output_tokens: int | None = None


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


class ModelRegistry:
    """User-registered context windows, by exact name or glob pattern (case-insensitive).

    Lookup order: exact name (also with provider prefixes stripped), then the most
    specific matching glob (the longest pattern; the latest registration on ties).

    >>> registry = ModelRegistry({"qwen-coder": 32_768})
    >>> registry.register("ollama/*", 8_192, max_output_tokens=2_048)
    >>> registry.window("openai/qwen-coder")  # the query's provider prefix is stripped
    32768
    >>> registry.lookup("ollama/mistral")
    ModelLimits(window=8192, max_output_tokens=2048)
    """

    def __init__(self, models: Mapping[str, int | ModelLimits] | None = None) -> None:
        self._lock = threading.Lock()
        self._exact: dict[str, ModelLimits] = {}
        self._globs: dict[str, ModelLimits] = {}
        for name, limits in (models or {}).items():
            if isinstance(limits, ModelLimits):
                self.register(name, limits.window, max_output_tokens=limits.max_output_tokens)
            else:
                self.register(name, limits)

    def register(self, name: str, window: int, max_output_tokens: int | None = None) -> None:
        """Register (or replace) the window of ``name``; ``name`` may be a glob like ``"ollama/*"``."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
            raise ValueError(f"window must be a positive int, got {window!r}")
        if max_output_tokens is not None and (
            isinstance(max_output_tokens, bool) or not isinstance(max_output_tokens, int) or max_output_tokens <= 0
        ):
            raise ValueError(f"max_output_tokens must be a positive int or None, got {max_output_tokens!r}")
        key = name.strip().lower()
        limits = ModelLimits(window=window, max_output_tokens=max_output_tokens)
        with self._lock:
            target = self._globs if _is_glob(key) else self._exact
            # re-insert so a replaced glob counts as the latest registration
            target.pop(key, None)
            target[key] = limits

    def unregister(self, name: str) -> bool:
        """Remove ``name`` (exact name or glob as registered); return whether it was present."""
        key = name.strip().lower()
        with self._lock:
            return self._exact.pop(key, None) is not None or self._globs.pop(key, None) is not None

    def lookup(self, model: str) -> ModelLimits | None:
        """Return the limits registered for ``model``, or None."""
        if not isinstance(model, str) or not model.strip():
            return None
        names = [n.lower() for n in candidate_names(model)]
        with self._lock:
            for name in names:
                if name in self._exact:
                    return self._exact[name]
            globs = list(self._globs.items())
        best: tuple[int, int] | None = None
        found: ModelLimits | None = None
        for order, (pattern, limits) in enumerate(globs):
            if any(fnmatch.fnmatchcase(name, pattern) for name in names):
                rank = (len(pattern), order)
                if best is None or rank > best:
                    best, found = rank, limits
        return found

    def window(self, model: str) -> int | None:
        """Return the registered window of ``model``, or None."""
        limits = self.lookup(model)
        return None if limits is None else limits.window

    def __contains__(self, model: object) -> bool:
        return isinstance(model, str) and self.lookup(model) is not None

    def __len__(self) -> int:
        with self._lock:
            return len(self._exact) + len(self._globs)

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter([*self._exact, *self._globs])

    def __repr__(self) -> str:
        return f"ModelRegistry({len(self)} entries)"
