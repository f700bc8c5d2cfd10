"""Helpers of the server's tests: an app on a real embedded store, run by FastAPI's
TestClient (the app's event loop in a thread; ``call`` runs a coroutine in it)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient

from conftest import PATIENCE
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.faces.http import ServeConfig, create_app

T = TypeVar("T")
# what a browser on this machine sends as Host to a server on loopback (the server refuses
# any other name: DNS rebinding)
BASE_URL = "http://127.0.0.1:8000"


class Server:
    def __init__(self, client: TestClient, uploads: Path) -> None:
        self.client = client
        self.uploads = uploads

    @property
    def kb(self) -> KnowledgeBase:
        kb = self.client.app.state.server.kb  # type: ignore[attr-defined]
        assert kb is not None
        return kb

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` in the app's event loop."""
        portal = self.client.portal
        assert portal is not None

        async def run() -> T:
            return await fn(*args, **kwargs)

        return portal.call(run)

    def wait_job(self, job_id: str, timeout: float = PATIENCE) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.client.get(f"/v1/jobs/{job_id}").json()
            if job.get("status") in ("done", "failed"):
                return dict(job)
            time.sleep(0.05)
        raise AssertionError(f"job {job_id} did not finish")

    def events(self, job_id: str, headers: dict[str, str] | None = None) -> list[tuple[str, Any]]:
        """The Server-Sent Events of a job, until the stream ends."""
        out: list[tuple[str, Any]] = []
        with self.client.stream("GET", f"/v1/jobs/{job_id}/events", headers=headers) as r:
            assert r.status_code == 200, r.read()
            assert r.headers["content-type"].startswith("text/event-stream")
            event = None
            for line in r.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    out.append((str(event), json.loads(line[6:])))
        return out


def settings_for(tmp_path: Path, db: str | None = None, **more: Any) -> Settings:
    return Settings(db=db or "mem://", model="hashing-64",
                    uploads_dir=str(tmp_path / "uploads"), **more)


@contextmanager
def serve(tmp_path: Path, *, db: str | None = None, settings: Settings | None = None,
          wait: bool = True, **config: Any) -> Iterator[Server]:
    settings = settings or settings_for(tmp_path, db)
    config.setdefault("key_cache_seconds", 0.0)
    app = create_app(ServeConfig(settings=settings, **config))
    with TestClient(app, base_url=BASE_URL) as client:
        server = Server(client, Path(settings.uploads_dir or ""))
        if wait:
            wait_ready(client)
        yield server


def wait_ready(client: TestClient, timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = client.get("/v1/ready")
        if r.status_code == 200:
            return
        if r.json().get("state") == "failed":
            raise AssertionError(r.json())
        time.sleep(0.02)
    raise AssertionError("the server did not get ready")


def assert_error(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    """The response is an error of the one shape, with this status (and code)."""
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error["code"], str) and isinstance(error["message"], str), body
    assert "Traceback" not in response.text
    if code is not None:
        assert error["code"] == code, body
    return dict(error)


# ----- `surrealdocs serve` in a process of its own ------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(tmp_path: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "surrealdocs", "serve", "--port", str(port), "--model",
         "hashing-64", "--no-access-log", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
    try:
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_ready_process(proc: subprocess.Popen[str], url: str,
                       timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(proc.stdout.read() if proc.stdout else "exited")
        try:
            if httpx.get(url + "/v1/ready", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError("the server did not get ready")
