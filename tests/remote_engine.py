"""A test fixture, not a server: SurrealDB's RPC protocol on loopback, forwarded to an
embedded engine, so that surrealdocs' remote code path (``ws://`` and ``http://`` URLs, user
and password) can be tested without a SurrealDB binary.

What it is
    An aiohttp application on ``127.0.0.1`` (port 0: the OS picks a free one) with one route,
    ``/rpc``, as a SurrealDB server has: a WebSocket speaking the ``cbor`` subprotocol (what
    the SDK's ``AsyncSurreal("ws://...")`` asks for) and ``POST /rpc`` with a CBOR body (what
    ``AsyncSurreal("http://...")`` sends). It runs in a background thread with its own event
    loop, over its own ``surrealdb_embedded.AsyncEmbeddedDB`` (``mem://`` by default, or a
    ``surrealkv://`` path). The embedded engine already executes CBOR-encoded RPC requests, so
    the fixture is a transport: it passes each request's bytes to the engine and the answer's
    bytes back. It decodes nothing but the top-level keys of the request envelope.

Sessions and authentication are the engine's own
    Each WebSocket connection gets a session of its own in the engine (the ``attach`` RPC),
    and every request that names no session is run in it, so ``use``, ``let``/``unset``,
    ``signin`` and ``invalidate`` stay per connection as on a server. Such a session starts
    anonymous, and the engine refuses anonymous queries ("Anonymous access not allowed") and
    wrong passwords ("There was a problem with authentication") by itself. The fixture
    defines one root user (``DEFINE USER ... ON ROOT ... ROLES OWNER``) on the engine's own
    session, which is never exposed. An HTTP request runs in a session made for it alone:
    ``Surreal-NS``/``Surreal-DB`` headers become a ``use``, ``Authorization: Bearer <token>``
    an ``authenticate`` (``Basic`` a ``signin``); a refused token or password answers 401.
    Sessions are detached when their connection or request ends.

What a real server does that this does not
    Live queries (the embedded engine has no notification channel: ``live`` answers
    "Unable to perform the realtime query"), client-side transactions (``begin`` answers
    "Method not allowed"), the JSON subprotocol, TLS, ``/sql``, ``/key``, ``/import`` and
    the other HTTP endpoints, capabilities flags, and many processes sharing one store.
    ``query_stream`` answers "Method not found" exactly as a pre-3.3 server does, and the
    SDK falls back to buffered ``query``.

Use
    The pytest fixtures at the end (``remote_engine``, ``remote_url``, ``remote_http_url``,
    ``remote_settings``, ``remote_http_settings``) are loaded with
    ``pytest_plugins = ["remote_engine"]`` in a test module (as ``test_remote.py`` does) or
    in ``tests/conftest.py`` for every module. Importing the fixture functions by name works
    too, but ruff then reports each test argument as a redefinition (F811). Directly::

        with RemoteEngine() as engine:          # mem://; RemoteEngine("surrealkv://...")
            settings = engine.settings()        # Settings(db="ws://127.0.0.1:PORT", ...)
            settings = engine.settings("http")  # the HTTP transport
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
import concurrent.futures
import contextlib
import json
import re
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from aiohttp import WSCloseCode, WSMsgType, web
from surrealdb.data.cbor import decode, encode
from surrealdb_embedded import AsyncEmbeddedDB

from surrealdocs import Settings

__all__ = [
    "RemoteEngine",
    "remote_engine",
    "remote_http_settings",
    "remote_http_url",
    "remote_settings",
    "remote_url",
]

DEFAULT_USER = "root"
DEFAULT_PASSWORD = "fixture-root-password"
_START_TIMEOUT = 20.0
_STOP_TIMEOUT = 20.0
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# --- just enough CBOR to read and edit the top level of an RPC envelope ----------------------

class _CborError(ValueError):
    pass


def _head(buf: bytes, i: int) -> tuple[int, int, int | None]:
    """Major type, argument (``None`` for an indefinite length) and the offset after the
    head of the item at ``i``."""
    try:
        initial = buf[i]
    except IndexError:
        raise _CborError("truncated CBOR") from None
    major, info = initial >> 5, initial & 0x1F
    i += 1
    if info < 24:
        return major, i, info
    if info == 31:
        if major in (0, 1, 6):
            raise _CborError("indefinite length on a type that has none")
        return major, i, None
    if info > 27:
        raise _CborError(f"reserved additional information {info}")
    size = 1 << (info - 24)
    if i + size > len(buf):
        raise _CborError("truncated CBOR")
    return major, i + size, int.from_bytes(buf[i:i + size], "big")


def _skip(buf: bytes, i: int) -> int:
    """The offset just after the CBOR data item that starts at ``i``."""
    major, i, arg = _head(buf, i)
    if major in (0, 1, 7):  # integers, floats and simple values: the head is the item
        return i
    if major == 6:  # a tag: its one content item follows
        return _skip(buf, i)
    if arg is None:  # indefinite length: items (or byte/text chunks) up to a break
        while True:
            if i >= len(buf):
                raise _CborError("truncated CBOR")
            if buf[i] == 0xFF:
                return i + 1
            i = _skip(buf, i)
    if major in (2, 3):
        if i + arg > len(buf):
            raise _CborError("truncated CBOR")
        return i + arg
    for _ in range(arg * (2 if major == 5 else 1)):
        i = _skip(buf, i)
    return i


def _encode_head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes([major << 5 | n])
    for info, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n < 1 << (8 * size):
            return bytes([major << 5 | info]) + n.to_bytes(size, "big")
    raise _CborError("length too large")


def _text(value: str) -> bytes:
    raw = value.encode("utf-8")
    return _encode_head(3, len(raw)) + raw


class _Envelope:
    """The top-level map of a CBOR RPC message: its entries as byte spans, keys decoded."""

    def __init__(self, buf: bytes) -> None:
        major, i, count = _head(buf, 0)
        if major != 5 or count is None:
            raise _CborError("an RPC message is a CBOR map of definite length")
        self.buf = buf
        self.entries: list[tuple[str, int, int, int]] = []  # key, entry start, value start, end
        for _ in range(count):
            start = i
            kmajor, kstart, klen = _head(buf, i)
            if kmajor != 3 or klen is None:
                raise _CborError("RPC message keys are text strings")
            value_start = kstart + klen
            key = buf[kstart:value_start].decode("utf-8")
            i = _skip(buf, value_start)
            self.entries.append((key, start, value_start, i))
        if i != len(buf):
            raise _CborError("trailing bytes after the RPC message")

    def __contains__(self, key: str) -> bool:
        return any(k == key for k, *_ in self.entries)

    def value(self, key: str) -> Any:
        """The decoded value of ``key`` (meant for small values: id, method, session)."""
        for k, _, value_start, end in self.entries:
            if k == key:
                return decode(self.buf[value_start:end])
        return None

    def rebuild(self, drop: Sequence[str] = (), add: Mapping[str, bytes] | None = None
                ) -> bytes:
        """The message without the ``drop`` keys and with ``add`` (key → encoded value)."""
        kept = [self.buf[start:end] for k, start, _, end in self.entries if k not in drop]
        added = [_text(k) + v for k, v in (add or {}).items()]
        return _encode_head(5, len(kept) + len(added)) + b"".join(kept + added)


def _error_envelope(code: int, message: str, request_id: Any = None, kind: str = "Internal"
                    ) -> bytes:
    body: dict[str, Any] = {"error": {"code": code, "message": message, "kind": kind}}
    if request_id is not None:
        body["id"] = request_id
    return bytes(encode(body))


class _EngineError(RuntimeError):
    def __init__(self, method: str, error: Any) -> None:
        super().__init__(f"{method} failed in the engine: {error}")
        self.error = error


# --- the fixture ------------------------------------------------------------------------------

class RemoteEngine:
    """SurrealDB's RPC protocol on ``127.0.0.1:<port>`` in front of an embedded engine.

    A test fixture, not a server (see the module docstring). ``start()``/``stop()`` or a
    ``with`` block; once started, ``ws_url``/``http_url``/``url(transport)`` and
    ``settings(transport, **overrides)`` say how to reach it as ``user``/``password`` (a root
    user). ``engine_url`` is ``mem://`` or a ``surrealkv://`` path; ``port`` 0 lets the OS
    choose, a fixed one restarts a server in place.

    For tests: ``methods`` counts the RPC methods received, ``connections`` the WebSocket
    connections accepted, ``http_peers`` holds the client addresses HTTP requests came
    from (one per TCP connection); ``root_query()`` reads or changes the engine directly,
    ``sessions()`` lists the sessions clients hold, ``drop_connections()`` cuts every
    WebSocket as a crashed server or a broken network does, ``delays`` holds chosen
    requests back, and ``token_duration`` (e.g. ``"1s"``) makes the tokens ``signin`` hands
    out expire soon.
    """

    def __init__(self, engine_url: str = "mem://", *, user: str = DEFAULT_USER,
                 password: str = DEFAULT_PASSWORD, host: str = "127.0.0.1", port: int = 0,
                 token_duration: str | None = None) -> None:
        if not _IDENTIFIER.match(user):
            raise ValueError(f"user must be a plain identifier, got {user!r}")
        if token_duration is not None and not re.match(r"^[0-9]+[a-z]+$", token_duration):
            raise ValueError(f"token_duration is a SurrealQL duration, got {token_duration!r}")
        self.engine_url = engine_url
        self.token_duration = token_duration
        self.user = user
        self.password = password
        self.host = host
        self.port: int | None = None
        self._requested_port = port  # 0: the OS picks; a fixed one to restart a server in place
        self.methods: collections.Counter[str] = collections.Counter()
        self.connections = 0
        self.http_peers: set[Any] = set()  # client addresses of HTTP requests: TCP connections
        # Fault injection: a request whose bytes contain a key (e.g. b"REBUILD INDEX") is held
        # that many seconds before the engine sees it, as a slow statement on a server is.
        self.delays: dict[bytes, float] = {}
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._stopping: asyncio.Event | None = None
        self._db: AsyncEmbeddedDB | None = None
        self._runner: web.AppRunner | None = None
        self._sockets: dict[web.WebSocketResponse, asyncio.BaseTransport | None] = {}

    # -- life cycle (called from the test's thread) --

    def start(self) -> RemoteEngine:
        if self._thread is not None:
            raise RuntimeError("this RemoteEngine was already started")
        self._thread = threading.Thread(target=self._thread_main, name="remote-engine",
                                        daemon=True)
        self._thread.start()
        if not self._ready.wait(_START_TIMEOUT):
            raise RuntimeError("the remote engine fixture did not start in time")
        if self._startup_error is not None:
            self._thread.join(_STOP_TIMEOUT)
            raise RuntimeError("the remote engine fixture failed to start"
                               ) from self._startup_error
        return self

    def stop(self) -> None:
        """Close every connection, the listening socket and the engine; join the thread."""
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is None or not thread.is_alive():
            return
        if loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stopping.set)
        thread.join(_STOP_TIMEOUT)
        if thread.is_alive():
            raise RuntimeError("the remote engine fixture did not stop in time")

    def __enter__(self) -> RemoteEngine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self._port()}"

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self._port()}"

    def url(self, transport: str = "ws") -> str:
        if transport not in ("ws", "http"):
            raise ValueError(f"transport is 'ws' or 'http', not {transport!r}")
        return self.ws_url if transport == "ws" else self.http_url

    def settings(self, transport: str = "ws", **overrides: Any) -> Settings:
        """surrealdocs settings for this server: its URL, the root user, ``hashing-64``."""
        values: dict[str, Any] = {"db": self.url(transport), "user": self.user,
                                  "password": self.password, "model": "hashing-64"}
        values.update(overrides)
        return Settings(**values)

    def _port(self) -> int:
        if self.port is None:
            raise RuntimeError("the remote engine fixture is not started")
        return self.port

    # -- inspection and fault injection (called from the test's thread) --

    def root_query(self, sql: str, params: Mapping[str, Any] | None = None, *,
                   namespace: str | None = None, database: str | None = None) -> list[Any]:
        """Run SurrealQL as root on the engine's own session, bypassing the transport.
        Returns each statement's result; raises ``RuntimeError`` on an error."""
        async def run() -> list[Any]:
            if namespace is not None or database is not None:
                await self._call("use", [namespace, database])
            answer = await self._call("query", [sql, dict(params or {})])
            out = []
            for stmt in answer:
                if stmt.get("status") != "OK":
                    raise RuntimeError(f"{sql!r} failed: {stmt.get('result')}")
                out.append(stmt.get("result"))
            return out
        return self._run(run())

    def sessions(self) -> list[str]:
        """The ids of the sessions clients hold in the engine (its own one excluded)."""
        async def run() -> list[str]:
            own = str((await self._call("query", ["RETURN session::id();", {}]))[0]["result"])
            return sorted(str(s) for s in await self._call("sessions") if str(s) != own)
        return self._run(run())

    def drop_connections(self) -> int:
        """Cut every open WebSocket's TCP connection, as a crashed or restarted server or a
        broken network does (no closing handshake, so a client's event loop need not run
        for this to return). Their sessions go. Returns how many were open."""
        async def run() -> int:
            sockets = list(self._sockets.items())
            for _, transport in sockets:
                if transport is not None:
                    transport.abort()
            return len(sockets)
        return self._run(run())

    def _run(self, coro: Any) -> Any:
        if self._loop is None or self._thread is None or not self._thread.is_alive():
            coro.close()
            raise RuntimeError("the remote engine fixture is not running")
        future: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(
            coro, self._loop)
        return future.result(_STOP_TIMEOUT)

    # -- the server thread --

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        try:
            await self._open()
        except BaseException as exc:
            self._startup_error = exc
            await self._close()
            self._ready.set()
            return
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            await self._close()

    async def _open(self) -> None:
        self._db = AsyncEmbeddedDB(self.engine_url)
        await self._db.connect()
        duration = (f" DURATION FOR TOKEN {self.token_duration}"
                    if self.token_duration else "")
        await self._call("query", [
            f"DEFINE USER OVERWRITE {self.user} ON ROOT PASSWORD {json.dumps(self.password)}"
            f" ROLES OWNER{duration};", {}])
        app = web.Application(client_max_size=1 << 30)
        app.router.add_get("/rpc", self._websocket)
        app.router.add_post("/rpc", self._http)
        app.router.add_get("/health", self._health)
        app.router.add_get("/status", self._health)
        app.router.add_get("/version", self._version)
        app.on_shutdown.append(self._close_sockets)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None,
                                     shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self._requested_port, reuse_address=True)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def _close(self) -> None:
        if self._runner is not None:
            with contextlib.suppress(Exception):
                await self._runner.cleanup()
            self._runner = None
        if self._db is not None:
            with contextlib.suppress(Exception):
                await self._db.close()
            self._db = None

    async def _close_sockets(self, app: web.Application) -> None:
        for ws in list(self._sockets):
            with contextlib.suppress(Exception):
                await ws.close(code=WSCloseCode.GOING_AWAY, message=b"fixture shutdown")

    # -- talking to the engine --

    async def _call(self, method: str, params: list[Any] | None = None,
                    session: str | None = None) -> Any:
        """One RPC on the engine (its own root session unless ``session``); the result."""
        request: dict[str, Any] = {"id": str(uuid.uuid4()), "method": method}
        if params is not None:
            request["params"] = params
        if session is not None:
            request["session"] = session
        assert self._db is not None
        answer = decode(await self._db.execute(bytes(encode(request))))
        if answer.get("error") is not None:
            raise _EngineError(method, answer["error"])
        return answer.get("result")

    async def _forward(self, frame: bytes, session: str) -> tuple[bytes, bool]:
        """Run one client request in ``session`` (unless it names a session of its own) and
        return the engine's answer as a server sends it, and whether it is an error."""
        try:
            request = _Envelope(frame)
            request_id = request.value("id")
            method = request.value("method")
        except Exception as exc:  # what a server answers to bytes it cannot read
            return _error_envelope(-32700, f"Parse error: {exc}", kind="Validation"), True
        self.methods[str(method)] += 1
        for pattern, seconds in list(self.delays.items()):
            if pattern in frame:
                await asyncio.sleep(seconds)
        own_session = "session" in request
        if not own_session:
            frame = request.rebuild(add={"session": _text(session)})
        assert self._db is not None
        answer = bytes(await self._db.execute(frame))
        try:
            response = _Envelope(answer)
            is_error = "error" in response
            if not own_session:  # the client named no session: its answer names none
                answer = response.rebuild(drop=("session",))
        except _CborError:
            return _error_envelope(-32000, "the fixture could not read the engine's answer",
                                   request_id), True
        return answer, is_error

    async def _attach(self) -> str:
        session = str(uuid.uuid4())
        await self._call("attach", session=session)
        return session

    async def _detach(self, sessions: Sequence[str]) -> None:
        if self._db is None:
            return
        for session in sessions:
            with contextlib.suppress(Exception):
                await self._call("detach", session=session)

    # -- WebSocket: /rpc with the cbor subprotocol --

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(protocols=("cbor",), max_msg_size=0, autoping=True)
        if not ws.can_prepare(request).ok:
            return web.Response(status=400, text="expected a WebSocket upgrade")
        await ws.prepare(request)
        if ws.ws_protocol != "cbor":
            await ws.close(code=WSCloseCode.UNSUPPORTED_DATA,
                           message=b"this fixture speaks the cbor subprotocol only")
            return ws
        self.connections += 1
        self._sockets[ws] = request.transport
        session = await self._attach()
        extra_sessions: set[str] = set()  # sessions the client attached itself
        send_lock = asyncio.Lock()
        tasks: set[asyncio.Task[None]] = set()

        async def answer(frame: bytes) -> None:
            reply, is_error = await self._forward(frame, session)
            self._track_sessions(frame, is_error, extra_sessions)
            async with send_lock:
                if not ws.closed:
                    with contextlib.suppress(ConnectionError, RuntimeError):
                        await ws.send_bytes(reply)

        try:
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    task = asyncio.create_task(answer(bytes(msg.data)))  # concurrent, as a
                    tasks.add(task)                                      # server serves them
                    task.add_done_callback(tasks.discard)
                elif msg.type == WSMsgType.TEXT:
                    await ws.close(code=WSCloseCode.UNSUPPORTED_DATA,
                                   message=b"text frames: this fixture speaks cbor only")
                    break
        finally:
            self._sockets.pop(ws, None)
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._detach([session, *extra_sessions])
        return ws

    @staticmethod
    def _track_sessions(frame: bytes, is_error: bool, extra: set[str]) -> None:
        if is_error:
            return
        with contextlib.suppress(Exception):
            request = _Envelope(frame)
            method, session = request.value("method"), request.value("session")
            if session is None:
                return
            if method == "attach":
                extra.add(str(session))
            elif method == "detach":
                extra.discard(str(session))

    # -- HTTP: POST /rpc, one session per request --

    async def _http(self, request: web.Request) -> web.StreamResponse:
        if request.transport is not None:
            self.http_peers.add(request.transport.get_extra_info("peername"))
        body = await request.read()
        session = await self._attach()
        try:
            refused = await self._http_session(request, session)
            if refused is not None:
                return refused
            reply, _ = await self._forward(body, session)
            return web.Response(body=reply, content_type="application/cbor")
        finally:
            await self._detach([session])

    async def _http_session(self, request: web.Request, session: str) -> web.Response | None:
        """Set up a request's session from its headers; a 401 response if auth is refused."""
        headers = request.headers
        namespace = headers.get("Surreal-NS") or headers.get("NS")
        database = headers.get("Surreal-DB") or headers.get("DB")
        if namespace or database:
            await self._call("use", [namespace, database], session=session)
        authorization = headers.get("Authorization", "")
        scheme, _, credentials = authorization.partition(" ")
        try:
            if scheme.lower() == "bearer" and credentials:
                await self._call("authenticate", [credentials.strip()], session=session)
            elif scheme.lower() == "basic" and credentials:
                try:
                    user, _, password = base64.b64decode(credentials).decode().partition(":")
                except (binascii.Error, UnicodeDecodeError):
                    user, password = "", ""
                await self._call("signin", [{"user": user, "pass": password}], session=session)
        except _EngineError as exc:  # the engine's own reason (expired token, bad password)
            return web.Response(status=401, content_type="application/cbor",
                                body=bytes(encode({"error": exc.error})))
        return None

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="")

    async def _version(self, request: web.Request) -> web.Response:
        return web.Response(text=str(await self._call("version")))


# --- pytest fixtures --------------------------------------------------------------------------

@pytest.fixture
def remote_engine() -> Iterator[RemoteEngine]:
    """A started :class:`RemoteEngine` over a fresh ``mem://`` engine, stopped afterwards."""
    with RemoteEngine() as engine:
        yield engine


@pytest.fixture
def remote_url(remote_engine: RemoteEngine) -> tuple[str, str, str]:
    """``(ws_url, user, password)`` of a fresh fixture server (root user)."""
    return remote_engine.ws_url, remote_engine.user, remote_engine.password


@pytest.fixture
def remote_http_url(remote_engine: RemoteEngine) -> tuple[str, str, str]:
    """``(http_url, user, password)`` of a fresh fixture server (root user)."""
    return remote_engine.http_url, remote_engine.user, remote_engine.password


@pytest.fixture
def remote_settings(remote_engine: RemoteEngine) -> Settings:
    """``Settings(db="ws://127.0.0.1:PORT", user, password, model="hashing-64")``."""
    return remote_engine.settings("ws")


@pytest.fixture
def remote_http_settings(remote_engine: RemoteEngine) -> Settings:
    """``Settings(db="http://127.0.0.1:PORT", user, password, model="hashing-64")``."""
    return remote_engine.settings("http")
