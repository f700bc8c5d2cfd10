"""A loopback chat server for the tests of ``ask``: it speaks the OpenAI chat-completions API
(``POST /v1/chat/completions``, streamed as server-sent events or not) and Ollama's
(``POST /api/chat``, newline-delimited JSON), answers with the text a test scripts, records
every request it was sent, and can refuse a number of requests with 429 first or answer 404
for an unknown model."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ChatServer:
    url: str = ""
    reply: str = "The answer [1]."
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    busy: int = 0  # refuse this many requests with 429 first
    script: list[str] = field(default_factory=list)  # the next replies, before ``reply``
    pause: float = 0.0  # seconds between streamed pieces (a slow model)
    aborted: int = 0  # streams whose client went away before the end
    models: tuple[str, ...] = ("tiny",)
    echo_key: bool = False  # refuse with 401, quoting the key sent in other forms
    raw: bytes | None = None  # answer 200 with these bytes, whatever was asked


    def prompt(self) -> str:
        """The user message of the last request."""
        return str(self.requests[-1]["messages"][-1]["content"])


@contextmanager
def chat_server() -> Iterator[ChatServer]:
    state = ChatServer()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(body)
            state.headers.append(dict(self.headers))
            if state.raw is not None:
                self._send(200, "application/json", state.raw)
                return
            if state.echo_key:
                import base64
                key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                quoted = (f"bad key {key.lower()} / {key.upper()} / "
                          f"{base64.b64encode(('Authorization: Bearer ' + key).encode()).decode()}")
                self._send(401, "application/json", json.dumps({"error": quoted}).encode())
                return
            if state.busy > 0:
                state.busy -= 1
                self._send(429, "application/json", b'{"error": "slow down"}',
                           {"Retry-After": "0"})
                return
            if body.get("model") not in state.models:
                self._send(404, "application/json",
                           json.dumps({"error": f"model {body.get('model')} not found"}).encode())
                return
            reply = state.script.pop(0) if state.script else state.reply
            words = [w + " " for w in reply.split(" ")]
            words[-1] = words[-1].rstrip()
            if self.path.endswith("/chat/completions"):
                if not body.get("stream"):
                    self._send(200, "application/json", json.dumps({"choices": [
                        {"message": {"content": reply}, "finish_reason": "stop"}]}).encode())
                    return
                lines = [f"data: {json.dumps({'choices': [{'delta': {'content': w}}]})}\n\n"
                         for w in words]
                lines.append("data: [DONE]\n\n")
                if state.pause:
                    self._trickle(lines)
                    return
                self._send(200, "text/event-stream", "".join(lines).encode())
            elif self.path.endswith("/api/chat"):
                lines = [json.dumps({"message": {"content": w}, "done": False}) + "\n"
                         for w in words]
                lines.append(json.dumps({"message": {"content": ""}, "done": True}) + "\n")
                self._send(200, "application/x-ndjson", "".join(lines).encode())
            else:
                self._send(404, "text/plain", b"no such path")

        def _trickle(self, lines: list[str]) -> None:
            """Stream the lines one by one, ``pause`` apart (no length: until closed)."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                for line in lines:
                    self.wfile.write(line.encode())
                    self.wfile.flush()
                    time.sleep(state.pause)
            except (BrokenPipeError, ConnectionResetError):
                state.aborted += 1
            self.close_connection = True

        def _send(self, status: int, kind: str, data: bytes,
                  extra: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
