"""The server: the HTTP/1.1 loop in its own thread, the script and rules that choose an answer,
and the completion each request gets.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Literal, Self

from compaction.testing.fake_provider.http1 import RawRequest, read_request, write_response
from compaction.testing.fake_provider.model_rules import reasoning_spent, rejected_params
from compaction.testing.fake_provider.prompt_cache import PromptCache
from compaction.testing.fake_provider.recorded import GEMINI_PATH, ROUTES, RecordedRequest, Route, estimate_tokens
from compaction.testing.fake_provider.replies import Action, Fault, FaultKind, LatencyModel, Reply, Responder, as_action
from compaction.testing.fake_provider.stand_in import requested_headings, stand_in_summary
from compaction.testing.fake_provider.streaming import write_stream
from compaction.testing.fake_provider.wire import (
    ERROR_FAULTS,
    TOOL_ARGS,
    TOOL_NAME,
    Completion,
    anthropic_body,
    error_body,
    fault_error,
    gemini_body,
    openai_body,
)


class _Rule:
    def __init__(self, predicate: Callable[[RecordedRequest], bool], action: Action, times: int | None) -> None:
        self.predicate = predicate
        self.action = action
        self.remaining = times


class FakeProvider:
    """A fake OpenAI + Anthropic HTTP server on 127.0.0.1 (port 0 by default).

    Use as ``with FakeProvider() as server:`` or ``async with FakeProvider() as server:``, or call
    :meth:`start` / :meth:`stop`. ``context_window`` makes oversize requests fail with the route's
    overflow error; ``prompt_cache`` simulates provider prompt caching in the usage numbers.
    """

    def __init__(
        self,
        *,
        responder: Responder | None = None,
        latency: LatencyModel | None = None,
        context_window: int | None = None,
        prompt_cache: bool = False,
        prompt_cache_min_tokens: int = 1024,
        model_rules: bool = True,
        reasoning_tokens: int | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.responder = responder
        self.latency = latency or LatencyModel()
        self.context_window = context_window
        self.model_rules = model_rules
        self.reasoning_tokens = reasoning_tokens
        self._cache = PromptCache(prompt_cache_min_tokens) if prompt_cache else None
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._queue: deque[Action] = deque()
        self._rules: list[_Rule] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._startup_error: BaseException | None = None
        self.errors: list[Exception] = []  # exceptions raised by responders or bad scripts
        self._seq = 0
        self._stopping = False

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Start serving in a background thread; returns ``self``. Idempotent."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        self._stopping = False
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=self._run, args=(loop, ready), name="fake-provider", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake provider did not start within 10 s")
        if self._startup_error is not None:
            self._thread.join(1)
            self._thread = None
            raise RuntimeError("fake provider failed to start") from self._startup_error
        return self

    def _run(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._handle, self._host, self._port, backlog=512)
            )
            self._port = self._server.sockets[0].getsockname()[1]
        except BaseException as exc:  # reported to start()
            self._startup_error = exc
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            leftovers = asyncio.all_tasks(loop)
            for task in leftovers:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
            loop.close()

    def stop(self) -> None:
        """Close every connection (hung ones included) and stop the server thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._thread = None
        self._loop = None

    async def _shutdown(self) -> None:
        self._stopping = True
        if self._server is not None:
            self._server.close()
        # A connection accepted just before close() gets its handler started, so it is closed too.
        await asyncio.sleep(0.01)
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)

    # -- addresses -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._thread is None:
            raise RuntimeError("fake provider is not running; use `with FakeProvider() as server:`")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{self._host}:{self.port}"

    @property
    def openai_api_base(self) -> str:
        """The litellm ``api_base`` for ``openai/<name>`` models."""
        return f"{self.base_url}/v1"

    @property
    def anthropic_api_base(self) -> str:
        """The litellm ``api_base`` for ``anthropic/<name>`` models."""
        return self.base_url

    @property
    def gemini_api_base(self) -> str:
        """The litellm ``api_base`` for ``gemini/<name>`` models (Google AI Studio's generateContent)."""
        return f"{self.base_url}/v1beta"

    # -- scripting -------------------------------------------------------------------------

    def script(self, actions: Iterable[Action]) -> None:
        """Queue answers for the next completion requests, one each, in order.

        Items are text (a successful answer), :class:`Reply` or :class:`Fault`.
        """
        with self._lock:
            self._queue.extend(actions)

    def fail_next(self, fault: Fault, times: int = 1) -> None:
        """Queue ``fault`` for the next ``times`` completion requests."""
        self.script([fault] * times)

    def fail_when(self, predicate: Callable[[RecordedRequest], bool], fault: Action, times: int | None = None) -> None:
        """Answer ``fault`` to every completion request matching ``predicate`` (at most ``times``)."""
        with self._lock:
            self._rules.append(_Rule(predicate, fault, times))

    def reset(self) -> None:
        """Forget recorded requests, queued answers, rules and cached prefixes."""
        with self._lock:
            self._requests.clear()
            self.errors.clear()
            self._queue.clear()
            self._rules.clear()
            if self._cache is not None:
                self._cache = PromptCache(self._cache.min_tokens)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far (a snapshot), count_tokens included."""
        with self._lock:
            return list(self._requests)

    @property
    def completion_requests(self) -> list[RecordedRequest]:
        """Requests to the two completion routes only."""
        return [r for r in self.requests if r.route != "count_tokens"]

    @property
    def pending(self) -> int:
        """Queued answers not consumed yet."""
        with self._lock:
            return len(self._queue)

    # -- connection handling ---------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.add(writer)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            # Without this, a small response on a keep-alive connection waits ~40 ms for the
            # client's delayed ACK (Nagle + delayed-ACK interaction).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while not self._stopping:
                request = await read_request(reader)
                if request is None or self._stopping:
                    break
                try:
                    keep_alive = await self._respond(request, reader, writer)
                except (ConnectionError, asyncio.IncompleteReadError):
                    raise
                except Exception as exc:
                    # A bug in a responder or script: answer 500 saying so, and keep it for the test.
                    self.errors.append(exc)
                    body = {"error": {"message": f"fake provider error: {exc!r}", "type": "fake_provider_error"}}
                    await self._write(writer, 500, body, keep_alive=False)
                    break
                if not keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        except asyncio.CancelledError:
            # Only stop() cancels handlers. Ending normally keeps Python 3.11's stream callback
            # from logging the cancellation as an unhandled error.
            pass
        finally:
            self._writers.discard(writer)
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _write(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: Any,
        *,
        keep_alive: bool,
        headers: Mapping[str, str] | None = None,
        raw: bytes | None = None,
    ) -> None:
        await write_response(
            writer, status, body, request_id=f"req_fake_{self._seq}", keep_alive=keep_alive, headers=headers, raw=raw
        )

    async def _respond(self, request: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; returns whether the connection stays open."""
        method, target, version, headers, raw = request
        conn = headers.get("connection", "").lower()
        keep_alive = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
        path = target.split("?", 1)[0]
        route = _route(method, path)
        if route is None:
            msg = f"no route for {method} {path}"
            await self._write(writer, 404, {"error": {"message": msg, "type": "not_found"}}, keep_alive=keep_alive)
            return keep_alive
        try:
            body = _json_object(raw)
        except ValueError as exc:
            err = error_body(route, 400, "invalid_request_error", f"invalid JSON body: {exc}", None)
            await self._write(writer, 400, err, keep_alive=keep_alive)
            return keep_alive
        rec, seq = self._record(route, method, path, headers, body, raw)
        if route == "count_tokens":
            await self._write(writer, 200, {"input_tokens": rec.input_tokens}, keep_alive=keep_alive)
            return keep_alive
        rejection = rejected_params(rec) if self.model_rules else None
        if rejection is not None:
            await self._write(
                writer, 400, error_body(route, 400, "invalid_request_error", *rejection), keep_alive=keep_alive
            )
            return keep_alive
        action = await self._resolve(rec)
        while isinstance(action, Fault) and action.kind is FaultKind.SLOW:
            await asyncio.sleep(action.delay_s)
            action = action.reply or await self._default_reply(rec)
        if isinstance(action, Reply):
            completion = self._completion(rec, action)
        else:
            if action.delay_s > 0:
                await asyncio.sleep(action.delay_s)
            if action.kind not in _CONTENT_FAULTS:
                return await self._answer_fault(action, rec, reader, writer, keep_alive=keep_alive)
            completion = self._fault_completion(rec, action)
        await self._answer(completion, rec, seq, writer, keep_alive=keep_alive)
        return keep_alive

    def _record(
        self, route: Route, method: str, path: str, headers: dict[str, str], body: dict[str, Any], raw: bytes
    ) -> tuple[RecordedRequest, int]:
        """Keep the request in :attr:`requests`; it and its sequence number."""
        with self._lock:
            self._seq += 1
            rec = RecordedRequest(
                index=len(self._requests),
                route=route,
                method=method,
                path=path,
                headers=headers,
                body=body,
                raw_body=raw,
                received_at=time.monotonic(),
            )
            self._requests.append(rec)
            return rec, self._seq

    async def _answer_fault(
        self,
        fault: Fault,
        rec: RecordedRequest,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        keep_alive: bool,
    ) -> bool:
        """Answer with a fault that is not content (a hang, a drop, broken JSON, an HTTP error);
        returns whether the connection stays open."""
        kind = fault.kind
        if kind is FaultKind.HANG:
            # Wait for the client to give up (EOF) or for stop(); never answer.
            while await reader.read(65536):
                pass
            return False
        if kind is FaultKind.DROP:
            return False
        if kind is FaultKind.MALFORMED_JSON:
            broken = b'{"id": "broken", "object": "chat.completion", "choices": [{"index": 0, "message": {"con'
            await self._write(writer, 200, None, keep_alive=keep_alive, raw=broken)
            return keep_alive
        if kind not in ERROR_FAULTS:  # pragma: no cover - the content faults never reach here
            raise AssertionError(f"not an answering fault: {kind}")
        status, extra, err_body = fault_error(rec.route, fault, rec)
        await self._write(writer, status, err_body, keep_alive=keep_alive, headers=extra)
        return keep_alive

    async def _answer(
        self, completion: Completion, rec: RecordedRequest, seq: int, writer: asyncio.StreamWriter, *, keep_alive: bool
    ) -> None:
        """Answer with a completion in the request's format, streamed when it asked for a stream."""
        if rec.stream:
            await write_stream(writer, rec, completion, seq, self.latency, keep_alive=keep_alive)
            return
        delay = self.latency.delay(completion.input_tokens, completion.output_tokens)
        if delay > 0:
            await asyncio.sleep(delay)
        if rec.route == "openai":
            body_out = openai_body(rec, completion, seq)
        elif rec.route == "gemini":
            body_out = gemini_body(rec, completion, seq)
        else:
            body_out = anthropic_body(rec, completion, seq)
        await self._write(writer, 200, body_out, keep_alive=keep_alive)

    async def _resolve(self, rec: RecordedRequest) -> Reply | Fault:
        with self._lock:
            for rule in self._rules:
                if rule.predicate(rec):
                    if rule.remaining is not None:
                        rule.remaining -= 1
                        if rule.remaining <= 0:
                            self._rules.remove(rule)
                    return as_action(rule.action)
            if self._queue:
                return as_action(self._queue.popleft())
        window = self.context_window
        if window is not None and rec.input_tokens + rec.max_tokens > window:
            return Fault.context_overflow(rec.input_tokens + rec.max_tokens, window)
        return await self._default_reply(rec)

    async def _default_reply(self, rec: RecordedRequest) -> Reply | Fault:
        if self.responder is not None:
            result = self.responder(rec)
            if inspect.isawaitable(result):
                result = await result
            return as_action(result)
        # Written whole: _completion stops it at max_tokens mid-token with finish_reason "length",
        # as a real provider stops a model that runs out of room. A request that asks for the
        # summary's sections gets them, fitted to its cap, as a model following its instructions.
        text = rec.last_user_text
        asked = requested_headings(text + "\n" + rec.system_text)
        return Reply(stand_in_summary(text, self._answer_cap(rec) if asked else None))

    def reasoning_spent(self, rec: RecordedRequest) -> int:
        """Output tokens a request's model spends reasoning before it answers, within its cap
        (:func:`~compaction.testing.fake_provider.model_rules.reasoning_spent`); 0 without
        ``model_rules``."""
        return reasoning_spent(rec, self.reasoning_tokens) if self.model_rules else 0

    def _answer_cap(self, rec: RecordedRequest) -> int:
        return max(1, rec.max_tokens - self.reasoning_spent(rec))

    def _completion(self, rec: RecordedRequest, reply: Reply) -> Completion:
        text = reply.text
        finish: Literal["stop", "length", "tool_calls"] = "stop"
        cap = self._answer_cap(rec) * 4  # reasoning tokens come out of the same cap
        if len(text) > cap:  # the provider stops at max_tokens, as a real one would
            text, finish = text[:cap], "length"
        if reply.finish_reason in ("stop", "length", "tool_calls"):
            finish = reply.finish_reason  # type: ignore[assignment]
        completion = self._with_usage(rec, Completion(text, 0, 0, finish), reply)
        completion.reasoning_tokens = self.reasoning_spent(rec)
        return completion

    def _fault_completion(self, rec: RecordedRequest, fault: Fault) -> Completion:
        kind = fault.kind
        if kind is FaultKind.EMPTY_CHOICES:
            c = Completion(None, 0, 0, no_output=True)
        elif kind is FaultKind.EMPTY_CONTENT:
            c = Completion("", 0, 0)
        elif kind is FaultKind.WHITESPACE_CONTENT:
            c = Completion("  \n\t \n ", 0, 0)
        elif kind is FaultKind.TOOL_CALL_ONLY:
            name = fault.tool_name or TOOL_NAME
            args = dict(fault.tool_args if fault.tool_args is not None else TOOL_ARGS)
            c = Completion(None, 0, 0, finish="tool_calls", tool_call=True, tool_name=name, tool_args=args)
        else:  # pragma: no cover - other kinds never reach here
            raise AssertionError(f"not a content fault: {kind}")
        return self._with_usage(rec, c, None)

    def _with_usage(self, rec: RecordedRequest, c: Completion, reply: Reply | None) -> Completion:
        c.input_tokens = rec.input_tokens
        answer = c.text or ""
        if c.tool_call:
            answer = c.tool_name + json.dumps(c.tool_args)
        c.output_tokens = estimate_tokens(answer)
        if self._cache is not None:
            with self._lock:
                c.cache_read, c.cache_write = self._cache.account(rec, c.input_tokens)
        if reply is not None:
            if reply.input_tokens is not None:
                c.input_tokens = reply.input_tokens
            if reply.output_tokens is not None:
                c.output_tokens = reply.output_tokens
            if reply.cached_tokens is not None:
                c.cache_read = reply.cached_tokens
        return c


def _route(method: str, path: str) -> Route | None:
    """The route a request goes to; None for anything but a POST to a known path."""
    if method != "POST":
        return None
    route = ROUTES.get(path.rstrip("/") or "/")
    if route is None and GEMINI_PATH.match(path):
        route = "gemini"
    return route


def _json_object(raw: bytes) -> dict[str, Any]:
    body = json.loads(raw or b"{}")
    if not isinstance(body, dict):
        raise ValueError("body is not a JSON object")
    return body


# Faults answered with a completion (no text, blank text, only a tool call), not with an error.
_CONTENT_FAULTS = frozenset(
    {FaultKind.EMPTY_CHOICES, FaultKind.EMPTY_CONTENT, FaultKind.WHITESPACE_CONTENT, FaultKind.TOOL_CALL_ONLY}
)
