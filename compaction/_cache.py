"""A small memo for pure functions of text, bounded by entries and by the characters it keeps alive.

Agent runtimes compact the same growing session again and again; tool outputs do not change, so
scanning and trimming them once is enough. Keys are the text strings themselves: Python caches a
string's hash, and the caller's strings are shared by every re-conversion of its messages.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def memoize_text(max_entries: int = 8_192, max_chars: int = 64_000_000) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Memoize ``func(text, *args)`` (hashable arguments), least recently used out first."""

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        entries: OrderedDict[Hashable, R] = OrderedDict()
        sizes: dict[Hashable, int] = {}
        lock = threading.Lock()
        kept = [0]

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            key = (args, tuple(sorted(kwargs.items())))
            with lock:
                if key in entries:
                    entries.move_to_end(key)
                    return entries[key]
            value = func(*args, **kwargs)
            size = sum(len(a) for a in args if isinstance(a, str))
            with lock:
                if key not in entries:
                    entries[key] = value
                    sizes[key] = size
                    kept[0] += size
                    while entries and (len(entries) > max_entries or kept[0] > max_chars):
                        old, _ = entries.popitem(last=False)
                        kept[0] -= sizes.pop(old)
            return value

        def cache_clear() -> None:
            with lock:
                entries.clear()
                sizes.clear()
                kept[0] = 0

        wrapper.cache_clear = cache_clear  # type: ignore[attr-defined]
        return wrapper

    return decorate
