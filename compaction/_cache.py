"""Memos for pure functions of text, kept for one compaction run and never shared between runs.

A compaction reads the same text more than once (the ledger's scan, the prune stage's trims, the
summarizer view's rounds over the same results, redaction before each of them): within a run,
each is computed once. A memo kept by the process instead would make a text that another tenant
(or session) already sent faster to compact, a timing side channel between tenants, and would make
the cost of a compaction depend on what the process happened to see before. So the memos live in a
:class:`MemoScope`: :func:`memo_scope` opens one for a run (the pipeline does, for every run) and
every memoized function called inside it, in this task or a thread started from it
(``asyncio.to_thread`` copies the context), shares it. Outside a scope the functions just compute.

A scope is bounded (entries and characters of text kept alive, least recently used out first) and
dropped with its run.

``@memoize_text(min_chars=N)`` memoizes only calls whose text (the first string argument) has at
least ``N`` characters: a line or an id costs less to compute again than to look up and keep, and
would only crowd the scope. A shorter call just computes, with no lookup and no store. Bare
``@memoize_text`` memoizes every call.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final, ParamSpec, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["DEFAULT_MAX_CHARS", "DEFAULT_MAX_ENTRIES", "MemoScope", "active_scope", "memo_scope", "memoize_text"]

DEFAULT_MAX_ENTRIES: Final = 262_144
"""Entries one scope keeps over all its functions (a run over 20,000 messages makes ~100,000)."""

DEFAULT_MAX_CHARS: Final = 256_000_000
"""Characters of argument text one scope's entries hold, counted once per entry (a text several
functions memoize is counted by each, though it is one string, which its run's caller holds anyway)."""


class MemoScope:
    """The memos of one run: per memoized function, its computed values by arguments.

    ``hits`` and ``misses`` count lookups since the scope was opened (what a test of the isolation
    reads: a run in a new scope misses on every text, whatever other runs computed)."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        if max_entries < 0 or max_chars < 0:
            raise ValueError(f"max_entries and max_chars must be >= 0, got {max_entries} and {max_chars}")
        self.max_entries = max_entries
        self.max_chars = max_chars
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[Hashable, object] = OrderedDict()
        self._sizes: dict[Hashable, int] = {}
        self._chars = 0
        self._lock = threading.Lock()  # the ledger's scan runs in a thread beside the summarizer

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: Hashable) -> tuple[bool, object]:
        """``(True, value)`` when ``key`` was stored, else ``(False, None)``."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return True, self._entries[key]
            self.misses += 1
            return False, None

    def store(self, key: Hashable, value: object, chars: int) -> None:
        """Keep ``value`` under ``key`` (``chars``: the text it keeps alive), evicting the least
        recently used entries beyond the bounds."""
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = value
            self._sizes[key] = chars
            self._chars += chars
            while self._entries and (len(self._entries) > self.max_entries or self._chars > self.max_chars):
                old, _ = self._entries.popitem(last=False)
                self._chars -= self._sizes.pop(old)


_SCOPE: ContextVar[MemoScope | None] = ContextVar("compaction_memo_scope", default=None)


def active_scope() -> MemoScope | None:
    """The scope memoized functions use here, if any."""
    return _SCOPE.get()


@contextmanager
def memo_scope(scope: MemoScope | None = None) -> Iterator[MemoScope]:
    """Use ``scope`` (default: the active one, else a new one) for the memos of the code inside.

    Nested runs (a pipeline started inside another's scope) share the outer scope."""
    current = _SCOPE.get()
    chosen = scope if scope is not None else current if current is not None else MemoScope()
    if chosen is current:
        yield chosen
        return
    token = _SCOPE.set(chosen)
    try:
        yield chosen
    finally:
        _SCOPE.reset(token)


@overload
def memoize_text(func: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def memoize_text(*, min_chars: int = 0) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def memoize_text(
    func: Callable[P, R] | None = None, /, *, min_chars: int = 0
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Memoize ``func(text, *args)`` (hashable arguments) in the active :class:`MemoScope`;
    without one, every call computes. With ``min_chars``, only calls whose first string argument
    has at least that many characters are memoized (see the module's docstring)."""
    if min_chars < 0:
        raise ValueError(f"min_chars must be >= 0, got {min_chars}")
    if func is None:
        return lambda function: _memoized(function, min_chars)
    return _memoized(func, min_chars)


def _memoized(func: Callable[P, R], min_chars: int) -> Callable[P, R]:
    name = f"{func.__module__}.{func.__qualname__}"

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        scope = _SCOPE.get()
        if scope is None or (min_chars and _text_chars(args, kwargs) < min_chars):
            return func(*args, **kwargs)
        key = (name, args, tuple(sorted(kwargs.items())) if kwargs else ())
        found, value = scope.lookup(key)
        if found:
            return value  # type: ignore[return-value]
        result = func(*args, **kwargs)
        scope.store(key, result, _chars(args))
        return result

    return wrapper


def _text_chars(args: tuple[object, ...], kwargs: dict[str, object]) -> int:
    """Characters of the first string argument (positional first, then by keyword); 0 without one."""
    for arg in args:
        if isinstance(arg, str):
            return len(arg)
    for arg in kwargs.values():
        if isinstance(arg, str):
            return len(arg)
    return 0


def _chars(args: tuple[object, ...]) -> int:
    """Characters of the text arguments (strings, and tuples of them)."""
    total = 0
    for arg in args:
        if isinstance(arg, str):
            total += len(arg)
        elif isinstance(arg, tuple):
            total += sum(len(item) for item in arg if isinstance(item, str))
    return total
