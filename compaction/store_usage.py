"""How much one namespace of session ids holds in a store: its sessions and its messages' bytes.

The service's API keys each own the sessions whose ids start with the key's namespace; this is
what their storage quota is measured against. The SQL stores answer with one range scan on the
session-id indexes (:func:`prefix_bounds`: ids from ``prefix`` up to the next prefix), so the cost
is the namespace's own rows, not the store's (PostgreSQL compares them under ``COLLATE "C"``, byte
order, as SQLite does by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Usage:
    sessions: int
    bytes: int


@runtime_checkable
class UsageMeter(Protocol):
    def usage(self, prefix: str) -> Usage:
        """Sessions whose id starts with ``prefix`` and the UTF-8 bytes of their stored messages."""
        ...


def prefix_bounds(prefix: str) -> tuple[str, str]:
    """The range of the session ids that start with ``prefix``: from ``prefix`` (inclusive) to the
    smallest string above every such id (exclusive), in code point order.

    >>> prefix_bounds("team-a/")
    ('team-a/', 'team-a0')
    """
    if not prefix:
        raise ValueError("usage needs a non-empty session id prefix")
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)
