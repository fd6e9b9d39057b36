"""Request bodies parsed by pydantic-core's JSON parser: the app's route class."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic_core import from_json


class _JSONBodyRequest(Request):
    """A request whose JSON body is parsed by pydantic-core's parser: a few times faster than
    ``json.loads`` on a large transcript, with the same values (NaN, Infinity and big integers
    included). What it refuses (lone surrogates, a BOM, UTF-16/32, malformed JSON) goes to
    ``json.loads`` as before, so every error answer is unchanged."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = from_json(body)
            except ValueError:
                self._json = json.loads(body)
        return self._json


class JSONBodyRoute(APIRoute):
    """The app's route class: request bodies are parsed by :class:`_JSONBodyRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(_JSONBodyRequest(request.scope, request.receive))

        return route
