"""Error answers: ``{"error": {...}}`` bodies, the API error exception, the exception handlers."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from compaction.errors import CompactionError, TranscriptError
from compaction.middleware.events import CompactionFailed
from compaction.redact import redact_if_needed
from compaction.server.schemas import (
    ErrorBody,
    ErrorResponse,
)
from compaction.summarizers.base import SummarizerError

_Handler = TypeVar("_Handler", bound=Callable[..., Any])

logger = logging.getLogger("compaction.server")

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("compaction_request_id", default=None)


class ApiError(Exception):
    """An error answered as ``{"error": {...}}`` with ``status``."""

    def __init__(
        self,
        status: int,
        type: str,
        message: str,
        *,
        index: int | None = None,
        field: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message
        self.index = index
        self.field = field
        self.headers = dict(headers or {})

    def body(self) -> ErrorBody:
        return ErrorBody(
            type=self.type, message=self.message, index=self.index, field=self.field, request_id=REQUEST_ID.get()
        )


def error_response(status: int, body: ErrorBody, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        ErrorResponse(error=body).model_dump(mode="json", exclude_none=True), status_code=status, headers=headers
    )


def transcript_error(exc: TranscriptError, *, index_offset: int = 0) -> ApiError:
    index = None if exc.index is None else exc.index - index_offset
    return transcript_api_error(index, exc.field, exc.problem)


def transcript_api_error(index: int | None, field: str | None, problem: str) -> ApiError:
    """The 400 for a transcript problem at message ``index`` (negative: the session's system)."""
    if index is not None and index < 0:  # the injected system message: the problem is the session's system
        return ApiError(400, "invalid_transcript", f"system: {problem}", field="system")
    where = f"message {index}: " if index is not None else ""
    if field:
        where += f"field {field!r}: "
    return ApiError(400, "invalid_transcript", where + problem, index=index, field=field)


def not_found(kind: str, key: str) -> ApiError:
    return ApiError(404, "not_found", f"no {kind} {key!r}")


ERRORS: dict[int, str] = {
    400: "Invalid transcript (with the message index and field) or invalid options",
    401: "Missing or invalid API key (only when the server has API keys)",
    403: "An option needs a server permission (disable_redaction, summary_prompt)",
    404: "Unknown session (of this API key) or archive id",
    408: "The request body did not arrive in time",
    413: "Request body larger than the server's limit",
    422: "Request does not match the schema (invalid_request), or the compaction cannot fit (compaction_failed)",
    429: "This API key's rate limit (or its open event streams' limit) is reached; see Retry-After",
    500: "Internal error: a generic message and the request id, never a traceback",
    502: "The summarizer model failed (summarizer_failed)",
    503: "The server is shutting down; retry elsewhere",
}
PAYLOAD = (400, 408, 413, 422)  # any operation with a JSON body


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The documented error answers of an operation (500 is documented for every operation)."""
    return {status: {"model": ErrorResponse, "description": ERRORS[status]} for status in statuses}


def session_read(router: APIRouter, path: str, model: type[Any]) -> Callable[[_Handler], _Handler]:
    """The decorator of a ``GET`` route reading a session's data: answers ``model``; 404 for an
    unknown session or item, 422 for bad parameters."""
    return router.get(path, response_model=model, tags=["sessions"], responses=error_responses(404, 422))


def one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())[:2000]


_PUBLIC_ERRORS = (TranscriptError, CompactionError, SummarizerError)


def public_error(event: CompactionFailed, request_id: str | None) -> ErrorBody:
    """What a failed event may say: library errors verbatim, anything else generically (the
    details go to the log with the request id)."""
    exc = event.exception
    # Redacted: an error may quote what it failed on (a provider's answer, a message's text), and
    # the event stream and the session's status are further channels for it.
    if isinstance(exc, TranscriptError):
        message = redact_if_needed(one_line(exc))
        return ErrorBody(type="invalid_transcript", message=message, index=exc.index, field=exc.field)
    if isinstance(exc, CompactionError):
        return ErrorBody(type="compaction_failed", message=redact_if_needed(one_line(exc)))
    if isinstance(exc, SummarizerError):
        return ErrorBody(type="summarizer_failed", message=redact_if_needed(one_line(exc)))
    logger.error("compaction of session %s failed (request id %s): %s", event.session_id, request_id, event.error)
    return ErrorBody(type="internal_error", message="internal error", request_id=request_id)


# ---------------------------------------------------------------------------------------------
# exception handlers


async def api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.body(), exc.headers)


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    details = [
        {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
        for e in errors[:20]
    ]
    first = errors[0] if errors else {}
    body_problem = _body_problem(request, first)
    if body_problem is not None:
        body = ErrorBody(type="invalid_request", message=body_problem, request_id=REQUEST_ID.get(), details=details)
        return error_response(422, body)
    loc = [p for p in first.get("loc", ()) if p != "body"]
    index = None
    if len(loc) >= 2 and loc[0] == "messages" and isinstance(loc[1], int):
        index = loc[1]
        loc = loc[2:]
    where = ".".join(str(p) for p in loc) or None
    message = str(first.get("msg", "invalid request"))
    prefix = (f"message {index}: " if index is not None else "") + (f"{where}: " if where else "")
    body = ErrorBody(
        type="invalid_request",
        message=prefix + message,
        index=index,
        field=where,
        request_id=REQUEST_ID.get(),
        details=details,
    )
    return error_response(422, body)


def _body_problem(request: Request, error: Mapping[str, Any]) -> str | None:
    """The message for a body that is not a JSON object at all (no field of it is at fault), or
    None when the error is about a field."""
    loc = tuple(error.get("loc", ()))
    if error.get("type") == "json_invalid":  # loc is ("body", character offset)
        detail = (error.get("ctx") or {}).get("error") or error.get("msg") or "invalid JSON"
        at = f" at character {loc[1]}" if len(loc) > 1 and isinstance(loc[1], int) else ""
        return f"the request body is not valid JSON: {detail}{at}"
    if loc != ("body",):
        return None
    content_type = request.headers.get("content-type")
    if content_type is None or "json" not in content_type.lower():
        got = f"content type {content_type!r}" if content_type else "no content type"
        return f"the request body must be JSON sent with Content-Type: application/json (got {got})"
    value = error.get("input")
    kind = (
        "null"
        if value is None
        else {list: "an array", str: "a string", bool: "a boolean"}.get(
            type(value), "a number" if isinstance(value, int | float) else type(value).__name__
        )
    )
    return f"the request body must be a JSON object, got {kind}"


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    kinds = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}
    kind = kinds.get(exc.status_code, "invalid_request" if exc.status_code < 500 else "internal_error")
    message = exc.detail if isinstance(exc.detail, str) and exc.status_code < 500 else "request failed"
    body = ErrorBody(type=kind, message=message, request_id=REQUEST_ID.get())
    return error_response(exc.status_code, body, exc.headers)


def install_error_handlers(app: FastAPI) -> None:
    """Every error the app answers, in the ``{"error": {...}}`` shape."""
    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
