"""CPU time of a piece of work, for upper bounds in tests that a shared machine must not move.

Wall time is moved by other processes (a 30 s bound took 104 s at load 30). Process CPU time is
not, but it is moved by what the rest of the test session left behind: threads still running in
the process (litellm's logging workers, a proxy's loop) count in ``time.process_time()``, and the
work's own allocations can trigger a full garbage collection over every object the earlier tests
left alive (a 2 MB log scan measured 1.42 s at the end of the suite, 0.15 s alone: 0.68 s of it
one full collection over 1.2 million objects). :func:`cpu_seconds` measures only the work: the
heap is collected and frozen first, so a collection during the work walks the work's objects
only, and with ``threads="this"`` only the calling thread's time counts.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal


@contextmanager
def cpu_seconds(threads: Literal["this", "all"] = "this") -> Iterator[list[float]]:
    """``with cpu_seconds() as t: ...`` then ``t[0]`` is the CPU time the work took, in seconds.
    ``threads="all"`` counts every thread of the process (work that hands parts to worker threads);
    ``"this"`` only the calling thread's."""
    clock = time.thread_time if threads == "this" else time.process_time
    gc.collect()
    gc.freeze()  # what earlier tests left alive is not walked again by the work's collections
    box = [0.0]
    start = clock()
    try:
        yield box
    finally:
        box[0] = clock() - start
        gc.unfreeze()
