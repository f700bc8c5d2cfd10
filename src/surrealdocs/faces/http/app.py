"""The FastAPI application: the ``/v1`` API, OpenAPI at ``/docs``, the search page at ``/``.

One process owns the store: the app opens one :class:`~surrealdocs.KnowledgeBase` when it
starts (in the background, so readiness can report the opening) with its job runner on, and
closes it when it stops. Everything else is in the knowledge base.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...version import __version__
from .disconnect import CancelOnDisconnect
from .error_responses import error_response, install
from .guard import RequestGuard, accepted_hosts
from .mcp_endpoint import McpEndpoint
from .routes import router
from .server_config import ServeConfig
from .state import ServerState

STATIC = Path(str(resources.files("surrealdocs.faces.http") / "static"))
# the page loads nothing from elsewhere and runs no inline script
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                               "style-src 'self'; script-src 'self'; connect-src 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def create_app(config: ServeConfig | None = None, *,
               on_fatal: Callable[[str], None] | None = None) -> FastAPI:
    """The server for ``config``. ``on_fatal(message)`` is called when the store cannot be
    opened or the server may not run as configured (``surrealdocs serve`` then stops)."""
    config = config or ServeConfig()
    state = ServerState(config, on_fatal)
    mcp = McpEndpoint(state, allow_writes=config.mcp_allow_writes,
                      max_chars=config.mcp_max_chars)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.start()
        try:
            yield
        finally:
            await mcp.close()
            await state.close()

    app = FastAPI(
        title="surrealdocs", version=__version__, lifespan=lifespan,
        description="A searchable knowledge base inside SurrealDB: upload documents, search "
                    "them by BM25, vectors or both, group them in notebooks. Send an API key "
                    "as `Authorization: Bearer KEY` (or `X-API-Key`) when the server has "
                    "keys. Errors are `{\"error\": {\"code\": ..., \"message\": ...}}`.")
    app.state.server = state
    install(app)
    app.include_router(router)

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.mount("/mcp", mcp, name="mcp")
    app.add_middleware(BodyLimit, limit=config.max_request_bytes)
    app.add_middleware(CancelOnDisconnect)
    app.add_middleware(PageHeaders)
    if config.cors_origins:
        app.add_middleware(
            CORSMiddleware, allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST", "PUT", "DELETE"],
            allow_headers=["Authorization", "X-API-Key", "Content-Type"],
            expose_headers=["Location"], max_age=600)
    app.add_middleware(RequestGuard, hosts=accepted_hosts(config.host, config.allowed_hosts),
                       cors_origins=config.cors_origins)
    return app


class BodyLimit:
    """413 for a request body over ``limit`` bytes, declared or streamed."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers") or []:
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                response = error_response(
                    413, "payload_too_large",
                    f"the request is {int(value)} bytes; the limit is {self.limit}")
                await response(scope, receive, send)
                return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:  # (FastAPI turns other errors here into 400)
                    raise HTTPException(413, f"the request is over the limit of {self.limit}"
                                             " bytes")
            return message

        await self.app(scope, limited, send)


class PageHeaders:
    """The page's security headers on the page and its files (not on /docs, whose
    Swagger UI loads its script from a CDN)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path == "/" or path.startswith("/static/")):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers: list[Any] = list(message.get("headers") or [])
                present = {k.lower() for k, _ in headers}
                for name, value in PAGE_HEADERS.items():
                    if name.lower().encode() not in present:
                        headers.append((name.lower().encode(), value.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)
