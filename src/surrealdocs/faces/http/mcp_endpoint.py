"""The MCP server of the store (:mod:`surrealdocs.faces.mcp`) over streamable HTTP at
``/mcp/``, behind the server's API keys.

A key is checked as for ``/v1``; the write tools (``add_text``, ``ingest_path``) are offered
only when the server was started with ``--mcp-allow-writes`` *and* the key may write. The
MCP apps are made once the store is open, one per set of tools, and their session managers
run in tasks of their own for as long as the server does.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from .auth import access
from .error_responses import ApiError, error_response
from .state import ServerState


class McpEndpoint:
    """An ASGI app: authenticates, then hands the request to the MCP app for the key."""

    def __init__(self, state: ServerState, *, allow_writes: bool, max_chars: int) -> None:
        self.state = state
        self.allow_writes = allow_writes
        self.max_chars = max_chars
        self._apps: dict[bool, Any] = {}
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        try:
            allowed = await access(Request(scope, receive))
            app = await self._app(self.allow_writes and allowed.can_write)
        except ApiError as exc:
            response = error_response(exc.status, exc.code, exc.message, headers=exc.headers)
            await response(scope, receive, send)
            return
        await app(scope, receive, send)

    async def _app(self, writes: bool) -> Any:
        async with self._lock:
            if writes not in self._apps:
                try:
                    from mcp.server.transport_security import TransportSecuritySettings

                    from ..mcp import HTTP_WRITES_HINT, KEY_WRITES_HINT, mcp_http_app
                except ImportError as exc:
                    raise ApiError(501, "not_implemented", "the MCP endpoint needs the mcp"
                                   " extra: pip install '.[mcp]' in a clone of surrealdocs"
                                   f" ({exc})") from exc
                # Host and cross-site checks are the app's RequestGuard, for /mcp/ as for
                # /v1 (with --allowed-host); the SDK's own would refuse a proxy's name
                hint = KEY_WRITES_HINT if self.allow_writes else HTTP_WRITES_HINT
                app = mcp_http_app(self.state.require(), allow_writes=writes,
                                   max_chars=self.max_chars, path="/", writes_hint=hint,
                                   host=self.state.config.host,
                                   allow_private_urls=self.state.config.allow_private_urls,
                                   transport_security=TransportSecuritySettings(
                                       enable_dns_rebinding_protection=False))
                ready = asyncio.Event()
                self._tasks.append(asyncio.get_running_loop().create_task(
                    self._run(app, ready)))
                await ready.wait()
                self._apps[writes] = app
            return self._apps[writes]

    async def _run(self, app: Any, ready: asyncio.Event) -> None:
        # the session manager's task group must be entered and left in one task
        async with app.router.lifespan_context(app):
            ready.set()
            await self._stop.wait()

    async def close(self) -> None:
        self._stop.set()
        for task in self._tasks:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(task, timeout=5)
        self._tasks.clear()
        self._apps.clear()
