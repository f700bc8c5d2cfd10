"""Running the HTTP server until it is stopped: uvicorn on the app, one log handler, the
marker file that tells other commands where the store is served (they cannot open an
embedded store this process holds), and a stop on request (Ctrl-C, SIGTERM) as a
success."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import uvicorn

from ...store.connection import resolve_url, serving_marker
from .app import create_app
from .server_config import ServeConfig


@dataclass
class Outcome:
    started: bool  # the server listened
    fatal: str | None  # why it stopped on its own, if it did


def serve_until_stopped(config: ServeConfig, *, log_level: str, access_log: bool,
                        announce: Callable[[str], None]) -> Outcome:
    """Serve ``config`` until Ctrl-C or SIGTERM (or a fatal error of the app)."""
    # One handler, on the root logger: the MCP SDK's server otherwise installs a rich one
    # there (logging.basicConfig, a no-op once the root has a handler), which printed each
    # of our lines twice and libraries' tracebacks as pages of rich frames.
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.getLogger("surrealdocs").setLevel(log_level.upper())
    fatal: list[str] = []

    def on_fatal(message: str) -> None:
        fatal.append(message)
        server.should_exit = True

    api = create_app(config, on_fatal=on_fatal)
    closing = api.state.server.closing

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            closing.set()  # event streams end now, not when the grace period is over
            super().handle_exit(sig, frame)

    server = Server(uvicorn.Config(
        api, host=config.host, port=config.port, log_level=log_level.lower(),
        access_log=access_log, lifespan="on", timeout_graceful_shutdown=5,
        server_header=False))
    where = f"[{config.host}]" if ":" in config.host else config.host
    announce(f"surrealdocs serve: http://{where}:{config.port}/ (API docs at /docs)")
    # uvicorn raises the stopping signal again once it has shut down: a stop on request
    # (Ctrl+C, SIGTERM) is a success here
    signal.signal(signal.SIGTERM, _interrupt)
    marker = serving_marker(resolve_url(config.settings.db))
    if marker is not None:
        with contextlib.suppress(OSError):
            marker.write_text(f"{os.getpid()}\nhttp://{where}:{config.port}/", encoding="utf-8")
    try:
        with contextlib.suppress(KeyboardInterrupt):
            server.run()
    finally:
        if marker is not None:
            with contextlib.suppress(OSError):
                marker.unlink()
    return Outcome(bool(server.started), fatal[0] if fatal else None)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
