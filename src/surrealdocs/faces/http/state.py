"""The server's one knowledge base: opened in the background when the app starts (so that
readiness can say "not yet" while migrations run), closed when it stops.

States: ``opening`` (connecting, migrating, recovering) → ``ready`` → ``closing``; or
``failed`` (the store could not be opened, or the server may not run like this: no API key
while bound to a non-loopback address).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from ...core.kb import KnowledgeBase
from ...core.key_service import ApiKey, token_hash
from ...errors import ConfigurationError, SurrealDocsError
from .error_responses import ApiError
from .server_config import ServeConfig

log = logging.getLogger("surrealdocs.faces.http")


def refuse_without_keys(host: str) -> str:
    return (f"refusing to serve on {host} without API keys: anyone who can reach it could "
            "read and change the store. Create one first (surrealdocs keys create --name "
            "NAME), or bind to loopback (--host 127.0.0.1)")


class ServerState:
    """The knowledge base behind the API, and what the server knows about its keys."""

    def __init__(self, config: ServeConfig,
                 on_fatal: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.kb: KnowledgeBase | None = None
        self.state = "opening"
        self.error: str | None = None
        self.started = time.time()
        self.closing = asyncio.Event()
        self._on_fatal = on_fatal
        self._task: asyncio.Task[None] | None = None
        self._keys: dict[str, tuple[float, ApiKey | None]] = {}
        self._key_count: tuple[float, int] | None = None
        self._touched: dict[str, float] = {}

    # ----- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._open())

    async def _open(self) -> None:
        settings = self.config.settings
        try:
            kb = await KnowledgeBase.open(settings=settings, run_jobs=True)
        except SurrealDocsError as exc:
            self._fail(str(exc))
            return
        except Exception as exc:
            log.exception("cannot open the store")
            self._fail(f"cannot open the store: {type(exc).__name__}: {exc}")
            return
        try:
            keys = await kb.keys.count()
            if keys == 0 and not self.config.loopback:
                raise ConfigurationError(refuse_without_keys(self.config.host))
            if settings.chunked:
                removed = await kb.ingest_jobs.sweep()
                if removed:
                    log.info("removed %d upload folders no job waits for", removed)
        except BaseException as exc:
            await kb.close()
            if isinstance(exc, SurrealDocsError):
                self._fail(str(exc))
                return
            raise
        if keys:
            log.info("%d API key(s): every request to /v1 needs one", keys)
        else:
            log.warning("no API keys: serving without authentication, on loopback (%s) only."
                        " Create one with: surrealdocs keys create --name NAME",
                        self.config.host)
        log.info("store %s ready (model %s)", kb.store.url,
                 kb.embedder.name if kb.embedder else "none")
        self.kb, self.state = kb, "ready"

    def _fail(self, message: str) -> None:
        self.state, self.error = "failed", message
        log.error("%s", message)
        if self._on_fatal is not None:
            self._on_fatal(message)

    async def close(self) -> None:
        self.closing.set()
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.kb is not None:
            self.state = "closing"
            kb, self.kb = self.kb, None
            await kb.close()

    # ----- what the handlers need -------------------------------------------------------
    def require(self) -> KnowledgeBase:
        if self.kb is None or self.state != "ready":
            if self.state == "failed":
                raise ApiError(503, "not_ready", f"the store could not be opened: {self.error}")
            raise ApiError(503, "not_ready", f"the server is {self.state}: try again shortly",
                           headers={"Retry-After": "1"})
        return self.kb

    def readiness(self) -> dict[str, Any]:
        builds = self.kb.store.index_builds if self.kb is not None else 0
        reasons = []
        if self.state == "opening":
            reasons.append("opening the store (migrations, crash recovery)")
        elif self.state != "ready":
            reasons.append(f"{self.state}: {self.error}" if self.error else self.state)
        if builds:
            reasons.append("building a vector graph")
        return {"ready": not reasons, "state": self.state, "index_builds": builds,
                "reasons": reasons}

    # ----- keys -------------------------------------------------------------------------
    async def keys_required(self) -> bool:
        """Keys are needed when the store has any, and always off loopback (if every key
        was revoked meanwhile, nobody gets in rather than everybody)."""
        if not self.config.loopback:
            return True
        kb = self.require()
        now = time.monotonic()
        if self._key_count is None or self._key_count[0] < now:
            self._key_count = (now + self.config.key_cache_seconds, await kb.keys.count())
        return self._key_count[1] > 0

    async def key_of(self, token: str) -> ApiKey | None:
        """The key of a token (remembered a few seconds, so a revoke on a shared store takes
        effect within ``key_cache_seconds``)."""
        kb = self.require()
        now = time.monotonic()
        digest = token_hash(token)
        cached = self._keys.get(digest)
        if cached is not None and cached[0] >= now:
            return cached[1]
        key = await kb.keys.verify(token)
        if len(self._keys) > 10_000:
            self._keys.clear()
        self._keys[digest] = (now + self.config.key_cache_seconds, key)
        if key is not None and self._touched.get(key.name, 0.0) < now - 60:
            self._touched[key.name] = now
            with contextlib.suppress(SurrealDocsError):
                await kb.keys.touch(key)
        return key
