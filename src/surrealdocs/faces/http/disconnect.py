"""A read whose client went away stops: the handler is cancelled when the connection closes.

Starlette runs a handler to its end even when nobody waits for the answer, so a client that
gave up on a slow search (and asked again) would leave its searches running. For reads
(GET, HEAD, and POST ``/v1/search`` and ``/v1/ask``, whose bodies are small and bounded by
the body limit; an abandoned question stops its request to the chat model),
this middleware reads the request's messages into a queue the app reads from, keeps
listening after the body, and cancels the handler on ``http.disconnect``. Writes are never
cancelled this way: an ingest the client stopped waiting for still lands (or fails whole).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("surrealdocs.faces.http")
# POSTs that only read (and ask, whose upstream model request must stop with its client)
READ_POSTS = frozenset({"/v1/search", "/v1/ask"})


class CancelOnDisconnect:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method, path = scope.get("method", ""), scope.get("path", "")
        if scope["type"] != "http" or not (method in ("GET", "HEAD") or path in READ_POSTS):
            await self.app(scope, receive, send)
            return
        messages: asyncio.Queue[Message] = asyncio.Queue()
        handler = asyncio.current_task()
        assert handler is not None
        gone = False

        async def listen() -> None:
            nonlocal gone
            while True:
                message = await receive()
                messages.put_nowait(message)
                if message["type"] == "http.disconnect":
                    gone = True
                    handler.cancel()
                    return

        listener = asyncio.get_running_loop().create_task(listen())
        try:
            await self.app(scope, messages.get, send)
        except asyncio.CancelledError:
            if not gone:
                raise
            uncancel = getattr(handler, "uncancel", None)  # Python >= 3.11
            if uncancel is not None:
                uncancel()
            # a page that loads and moves on closes its streams: routine, not news
            log.debug("%s %s: the client went away; stopped", method, path)
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
