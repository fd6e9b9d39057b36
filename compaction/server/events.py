"""Per-session compaction events and their server-sent-events encoding.

An :class:`EventBus` lives in the server's event loop. Publishing never blocks: every subscriber
has a bounded queue, and a subscriber that falls behind loses its oldest events (the SSE ``id``
lets it notice the gap and re-read the history). Each session keeps its last events in a small
ring buffer so a client that reconnects with ``Last-Event-ID`` receives what it missed.

Wire format (one event)::

    id: 7
    event: compaction.finished
    data: {"session_id": "s1", "tokens_before": 23775, "tokens_after": 4959, ...}

Heartbeats are SSE comments (``: heartbeat``), which every SSE client ignores.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

from compaction.event_log import EventLog, StoredEvent, events_past
from compaction.server.auth import public_session_id

logger = logging.getLogger("compaction.server")

__all__ = [
    "COMPACTION_FAILED",
    "COMPACTION_FINISHED",
    "COMPACTION_STARTED",
    "Event",
    "EventBus",
    "EventType",
    "StreamLimitReached",
    "StreamSlot",
    "StreamSlots",
    "comment",
]

EventType = Literal["compaction.started", "compaction.finished", "compaction.failed"]
COMPACTION_STARTED: Final = "compaction.started"
COMPACTION_FINISHED: Final = "compaction.finished"
COMPACTION_FAILED: Final = "compaction.failed"


@dataclass(frozen=True)
class Event:
    """One published event; ``id`` numbers the session's events (1, 2, 3, ...)."""

    id: int
    type: EventType
    session_id: str
    data: Mapping[str, Any]
    at: float = field(default_factory=time.time)

    def encode(self) -> bytes:
        """The event as one SSE frame (``data`` is a single line of JSON)."""
        payload = json.dumps(dict(self.data), ensure_ascii=False, separators=(",", ":"))
        return f"id: {self.id}\nevent: {self.type}\ndata: {payload}\n\n".encode()


class StreamSlots:
    """The open event streams of one server process, counted in total and per API key namespace.

    Each SSE stream holds a connection (a file descriptor) for as long as the client wants: without
    a cap one key could open enough idle streams to exhaust the process's descriptors and make the
    server reset every other connection. ``per_key`` applies only when the server has API keys;
    an open service (no keys) has the total cap only."""

    def __init__(self, total: int, per_key: int) -> None:
        self.total = total
        self.per_key = per_key
        self._open: dict[str | None, int] = {}
        self._count = 0

    @property
    def open(self) -> int:
        return self._count

    def acquire(self, namespace: str | None) -> StreamSlot:
        """A slot for one stream of ``namespace`` (None: no API keys). Raises
        :class:`StreamLimitReached` with the reason when a cap is reached."""
        if self._count >= self.total:
            raise StreamLimitReached(f"this server has {self.total} event streams open, its limit; retry later")
        held = self._open.get(namespace, 0)
        if namespace is not None and held >= self.per_key:
            raise StreamLimitReached(
                f"this API key has {held} event streams open, the limit per key; close one "
                "(a stream resumes where it left off with Last-Event-ID)"
            )
        self._open[namespace] = held + 1
        self._count += 1
        return StreamSlot(self, namespace)

    def _release(self, namespace: str | None) -> None:
        self._count -= 1
        left = self._open[namespace] - 1
        if left:
            self._open[namespace] = left
        else:
            del self._open[namespace]


class StreamLimitReached(Exception):
    """No slot for another event stream; the message says which limit."""


class StreamSlot:
    """One held slot; :meth:`release` frees it (once, however often it is called)."""

    def __init__(self, slots: StreamSlots, namespace: str | None) -> None:
        self._slots: StreamSlots | None = slots
        self._namespace = namespace

    def release(self) -> None:
        if self._slots is not None:
            self._slots._release(self._namespace)
            self._slots = None


def comment(text: str) -> bytes:
    """An SSE comment frame (ignored by clients; keeps proxies from closing an idle stream)."""
    return f": {text}\n\n".encode()


class _Subscriber:
    def __init__(self, maxsize: int) -> None:
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize)
        self.dropped = 0

    def offer(self, event: Event | None) -> None:
        while True:
            try:
                self.queue.put_nowait(event)
                return
            except asyncio.QueueFull:  # a slow reader loses its oldest event, never blocks the publisher
                self.queue.get_nowait()
                self.dropped += 1


class EventBus:
    """Fan-out of compaction events to the SSE streams of each session.

    Use it from the event loop's thread only (publishing from a worker thread goes through
    ``loop.call_soon_threadsafe``). :meth:`close` ends every open stream, which is what a graceful
    shutdown needs: long-lived SSE connections would otherwise keep the server waiting.

    With an :class:`~compaction.event_log.EventLog` (the session store), events go through the
    store: :meth:`publish` appends them (on a writer thread, in order), and while this process has
    subscribers it polls the log every ``poll_s`` seconds and hands each new event to them, so a
    stream on any process that shares the store sees every compaction of its session. Without one
    (a custom store), events stay in this process. Either way a session numbers its own events.
    """

    def __init__(
        self,
        *,
        log: EventLog | None = None,
        poll_s: float = 0.25,
        history: int = 64,
        queue_size: int = 256,
        max_sessions: int = 10_000,
    ) -> None:
        self._log = log
        self._poll_s = poll_s
        self._numbers: dict[str, int] = {}
        self._history: dict[str, deque[Event]] = {}
        self._history_size = history
        self._max_sessions = max_sessions
        self._subscribers: dict[str, set[_Subscriber]] = {}
        self._queue_size = queue_size
        self._closed = False
        self._writer: concurrent.futures.ThreadPoolExecutor | None = None
        self._poller: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._cursor: int | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    def subscriber_count(self, session_id: str | None = None) -> int:
        if session_id is not None:
            return len(self._subscribers.get(session_id, ()))
        return sum(len(s) for s in self._subscribers.values())

    def publish(self, session_id: str, type: EventType, data: Mapping[str, Any]) -> None:
        """Publish an event of ``session_id`` (from the event loop's thread)."""
        if self._log is None:
            self._deliver(self._remember(session_id, type, data))
            return
        if self._closed:  # shutting down after the drain: store it now, nobody here is streaming
            try:
                self._log.append_event(session_id, type, data)
            except Exception as exc:
                logger.error("could not store a compaction event: %s", exc)
            return
        if self._writer is None:  # one thread: the log receives a session's events in order
            self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="compaction-events")
        future = self._writer.submit(self._log.append_event, session_id, type, data)
        loop = asyncio.get_running_loop()
        future.add_done_callback(lambda done: loop.call_soon_threadsafe(self._written, done))

    def _written(self, done: concurrent.futures.Future[StoredEvent]) -> None:
        error = done.exception()
        if error is not None:
            logger.error("could not store a compaction event: %s", error)
            return
        if self._wake is not None:  # this process's subscribers need not wait for the next poll;
            self._wake.set()  # the poller hands events over in the log's order, other processes' included

    async def written(self) -> None:
        """Wait until every event this process published so far is in the log (what a read of the
        session's events right after a compaction needs)."""
        writer = self._writer
        if writer is not None:
            await asyncio.to_thread(writer.submit(lambda: None).result)

    async def flush(self) -> None:
        """Wait until every event published so far is stored and handed to this process's streams
        (a graceful shutdown calls it before :meth:`close`, so the last events reach them)."""
        writer = self._writer
        if writer is None or self._closed:  # closing waited for every write already
            return
        await asyncio.to_thread(writer.submit(lambda: None).result)  # after every earlier write
        await self._poll_once()

    def _remember(self, session_id: str, type: EventType, data: Mapping[str, Any]) -> Event:
        """An in-process event: numbered within its session, kept in the session's ring."""
        number = self._numbers.get(session_id, 0) + 1
        event = Event(id=number, type=type, session_id=session_id, data=data)
        ring = self._history.get(session_id)
        if ring is None:
            if len(self._history) >= self._max_sessions:  # forget the session that was idle longest
                forgotten = next(iter(self._history))
                self._history.pop(forgotten)
                self._numbers.pop(forgotten, None)
            ring = self._history[session_id] = deque(maxlen=self._history_size)
        else:  # most recently used sessions last
            self._history[session_id] = self._history.pop(session_id)
        self._numbers[session_id] = number
        ring.append(event)
        return event

    def _deliver(self, event: Event) -> None:
        for subscriber in self._subscribers.get(event.session_id, ()):
            subscriber.offer(event)

    async def recent(self, session_id: str, *, after_id: int | None = None) -> list[Event]:
        """The session's kept events numbered above ``after_id`` (all kept ones for None)."""
        if self._log is None:
            ring = self._history.get(session_id, ())
            return [e for e in ring if after_id is None or e.id > after_id]
        stored = await asyncio.to_thread(self._log.session_events, session_id, after_id=after_id or 0)
        return [_from_log(e) for e in stored]

    async def _poll(self) -> None:
        """Hand new events of the log to this process's subscribers; idle while it has none."""
        log, wake = self._log, self._wake
        assert log is not None
        assert wake is not None
        while not self._closed:
            if not self._subscribers:
                self._cursor = None  # the next subscriber starts from the log's end, not from here
                wake.clear()
                await wake.wait()
                continue
            if self._cursor is None:
                self._cursor = await asyncio.to_thread(log.event_cursor)
            wake.clear()
            await self._poll_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), self._poll_s)

    async def _poll_once(self) -> None:
        """Hand this process's subscribers the log's events past the cursor, in the log's order."""
        log, cursor = self._log, self._cursor
        if log is None or cursor is None or not self._subscribers:
            return
        try:
            batch = await asyncio.to_thread(events_past, log, cursor)
        except Exception as exc:  # the store is unreachable for now: try again at the next poll
            logger.warning("could not read compaction events: %s", exc)
            return
        for stored in batch:
            if self._cursor is not None and stored.cursor <= self._cursor:
                continue  # a concurrent pass delivered it already
            self._cursor = stored.cursor
            self._deliver(_from_log(stored))

    def _ensure_poller(self) -> None:
        if self._wake is None:
            self._wake = asyncio.Event()
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll(), name="compaction-event-poller")
        self._wake.set()

    async def stream(
        self,
        session_id: str,
        *,
        last_event_id: int | None = None,
        heartbeat: float = 15.0,
        max_duration: float | None = None,
    ) -> AsyncIterator[bytes]:
        """SSE frames for one client: an opening comment (sent once the subscription is live),
        missed events after ``last_event_id``, then live events and heartbeats until the bus
        closes, ``max_duration`` passes, or the client goes away."""
        subscriber = _Subscriber(self._queue_size)
        self._subscribers.setdefault(session_id, set()).add(subscriber)
        deadline = None if max_duration is None else time.monotonic() + max_duration
        try:
            if self._log is not None:
                if self._cursor is None:  # live events start here: what came before is replayed on request
                    self._cursor = await asyncio.to_thread(self._log.event_cursor)
                if not self._closed:
                    self._ensure_poller()
            yield b"retry: 2000\n" + comment(f"subscribed to session {public_session_id(session_id)}")
            seen = 0
            if last_event_id is not None:
                for event in await self.recent(session_id, after_id=last_event_id):
                    seen = event.id
                    yield event.encode()
            while not self._closed:
                timeout = heartbeat
                if deadline is not None:
                    timeout = min(timeout, deadline - time.monotonic())
                    if timeout <= 0:
                        break
                try:
                    item = await asyncio.wait_for(subscriber.queue.get(), timeout)
                except TimeoutError:
                    if deadline is None or time.monotonic() < deadline:
                        yield comment("heartbeat")
                    continue
                if item is None:
                    break
                if item.id > seen:  # not already replayed
                    seen = item.id
                    yield item.encode()
            yield comment("stream closed")
        finally:
            subs = self._subscribers.get(session_id)
            if subs is not None:
                subs.discard(subscriber)
                if not subs:
                    del self._subscribers[session_id]

    def close(self) -> None:
        """End every open stream (idempotent); events already published are still stored."""
        self._closed = True
        for subs in self._subscribers.values():
            for subscriber in subs:
                subscriber.offer(None)
        if self._wake is not None:
            self._wake.set()
        if self._writer is not None:
            self._writer.shutdown(wait=True)


def _from_log(stored: StoredEvent) -> Event:
    return Event(
        id=stored.id,
        type=cast(EventType, stored.type),
        session_id=stored.session_id,
        data=stored.data,
        at=stored.at,
    )
