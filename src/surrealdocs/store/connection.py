"""Opening a SurrealDB store from a URL, and running SurrealQL with clear errors."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from surrealdb import AsyncSurreal, SurrealError

from ..config import DEFAULT_DIR, Settings
from ..errors import ConfigurationError, StoreError
from .names import Names, validate_identifier

EMBEDDED_SCHEMES = {"mem", "memory", "surrealkv", "surrealkv+versioned", "file"}
FILE_SCHEMES = {"surrealkv", "surrealkv+versioned", "file"}
REMOTE_SCHEMES = {"ws", "wss", "http", "https"}


@dataclass(frozen=True)
class Statement:
    """SurrealQL and its parameters, built by the module that owns the tables it touches.

    Owners hand statements out instead of running them when a write must be atomic with
    other tables' writes: the caller runs them together with :meth:`Store.transaction`.
    """

    sql: str
    params: Mapping[str, Any] = field(default_factory=dict)


def resolve_url(db: str | None) -> str:
    """Turn the user's ``db`` setting into a URL the SDK understands.

    ``None`` is the default embedded file store under ``./.surrealdocs/``; a bare path is a
    ``surrealkv://`` file store at that path; URLs pass through once their scheme is checked.
    """
    if db is None or db == "":
        return f"surrealkv://{(DEFAULT_DIR / 'db').resolve()}"
    scheme = urlparse(db).scheme if "://" in db else ""
    if not scheme:
        if db in ("mem", "memory"):
            return "mem://"
        return f"surrealkv://{Path(db).expanduser().resolve()}"
    if scheme in ("surrealkv", "surrealkv+versioned", "file"):
        path = db.split("://", 1)[1]
        if not path:
            raise ConfigurationError(f"{db!r} names no path for the database file")
        return f"{scheme}://{Path(path).expanduser().resolve()}"
    if scheme in EMBEDDED_SCHEMES or scheme in REMOTE_SCHEMES:
        return db
    raise ConfigurationError(
        f"unsupported database URL {db!r}: use a path, surrealkv://PATH, mem://, "
        "ws(s)://HOST:PORT or http(s)://HOST:PORT"
    )


@dataclass
class Store:
    """An open connection plus the namespace and database it uses.

    One ``Store`` per database file per process: the embedded engine locks its files.
    """

    client: Any
    url: str
    namespace: str
    database: str
    names: Names = field(default_factory=Names)
    owned: bool = False  # opened by connect(), not a connection the caller lent us
    _in_flight: int = field(default=0, repr=False, compare=False)
    _idle: asyncio.Event | None = field(default=None, repr=False, compare=False)
    _open: asyncio.Event | None = field(default=None, repr=False, compare=False)
    _write_lock: asyncio.Lock | None = field(default=None, repr=False, compare=False)

    @property
    def write_lock(self) -> asyncio.Lock:
        """Held while one document is written, and while a graph is built: writes of this
        process to the store take turns (readers never wait for it)."""
        if self._write_lock is None:
            self._write_lock = asyncio.Lock()
        return self._write_lock

    @property
    def embedded(self) -> bool:
        return urlparse(self.url).scheme in EMBEDDED_SCHEMES

    @property
    def file_backed(self) -> bool:
        """An embedded store whose data lives in files (so closing and reopening keeps it)."""
        return urlparse(self.url).scheme in FILE_SCHEMES

    def _events(self) -> tuple[asyncio.Event, asyncio.Event]:
        if self._idle is None or self._open is None:
            self._idle, self._open = asyncio.Event(), asyncio.Event()
            self._idle.set()
            self._open.set()
        return self._idle, self._open

    async def refresh_engine(self) -> bool:
        """Close and reopen the embedded engine of a file store this ``Store`` opened.

        Why: in the embedded engine (core 3.2.4 on SurrealKV), building an HNSW graph over
        ~100,000 vectors in the same engine session that wrote them never returns (all
        threads parked, no CPU), while the same statement on a freshly opened engine
        finishes (bench/notebook_scope.py; BENCHMARKS.md). Queries started meanwhile wait
        for the engine to be back. Returns False, doing nothing, for ``mem://`` (closing it
        would lose the data), servers, and connections lent by the caller.
        """
        if not (self.owned and self.file_backed):
            return False
        idle, is_open = self._events()
        is_open.clear()
        try:
            await idle.wait()
            await self.client.close()
            await self.client.connect()
            await self.client.use(self.namespace, self.database)
        finally:
            is_open.set()
        return True

    async def build_index(self, *statements: Statement) -> list[Any]:
        """Run statements that build an HNSW graph (REBUILD or DEFINE INDEX), on a freshly
        reopened engine where that is possible (see :meth:`refresh_engine`)."""
        await self.refresh_engine()
        return await self.run(*statements)

    async def query(
        self, sql: str, params: Mapping[str, Any] | None = None, *, retries: int = 3
    ) -> list[Any]:
        """Run SurrealQL and return one result per statement.

        Raises :class:`StoreError` naming the statement's own error (not the "not executed
        due to a failed transaction" that follows it). Write conflicts are retried.
        """
        idle, is_open = self._events()
        for attempt in range(retries + 1):
            await is_open.wait()
            self._in_flight += 1
            idle.clear()
            try:
                raw = await self.client.query_raw(sql, dict(params or {}))
            except SurrealError as exc:
                raise StoreError(f"{exc}") from exc
            finally:
                self._in_flight -= 1
                if self._in_flight == 0:
                    idle.set()
            error = _first_error(raw)
            if error is None:
                return [stmt.get("result") for stmt in raw.get("result", [])]
            if "conflict" in error.lower() and "retr" in error.lower() and attempt < retries:
                await asyncio.sleep(0.02 * (attempt + 1))
                continue
            raise StoreError(error)
        raise AssertionError("unreachable")

    async def run(self, *statements: Statement) -> list[Any]:
        """Run statements in one round trip (each its own transaction); one result per
        SurrealQL statement."""
        sql, params = _join(statements)
        return await self.query(sql, params)

    async def transaction(self, *statements: Statement) -> None:
        """Run statements in one transaction: all of them take effect, or none."""
        sql, params = _join(statements)
        if sql.strip():
            await self.query(f"BEGIN;\n{sql}\nCOMMIT;", params)

    async def close(self) -> None:
        await self.client.close()

    @classmethod
    async def around(cls, client: Any, names: Names | None = None) -> Store:
        """A store on a connection the caller opened, authenticated and ``use()``d.

        The namespace and database come from the connection's session. The URL is the
        connection's own when it tells it; an unknown one counts as remote (so crash
        recovery leaves recent incomplete writes alone), unless the connection is the SDK's
        embedded class. Closing the store is the caller's business, not ours.
        """
        if not callable(getattr(client, "query_raw", None)):
            raise ConfigurationError(
                f"{type(client).__name__} is not a SurrealDB SDK 3 connection (it has no "
                "query_raw); pass an AsyncSurreal(...) connection")
        url = connection_url(client)
        probe = cls(client=client, url=url, namespace="", database="", names=names or Names())
        (session,) = await probe.query("RETURN [session::ns(), session::db()];")
        namespace, database = session if isinstance(session, list) else (None, None)
        if not namespace or not database:
            raise ConfigurationError(
                "the connection has no namespace or database selected: "
                "call `await db.use(namespace, database)` first")
        probe.namespace, probe.database = str(namespace), str(database)
        return probe


def _join(statements: tuple[Statement, ...]) -> tuple[str, dict[str, Any]]:
    params: dict[str, Any] = {}
    for statement in statements:
        for name, value in statement.params.items():
            if name in params and params[name] is not value and params[name] != value:
                raise ValueError(f"two statements bind ${name} to different values")
            params[name] = value
    return "\n".join(s.sql for s in statements if s.sql.strip()), params


def connection_url(client: Any) -> str:
    """The URL an SDK connection was opened with, as far as it tells it."""
    raw = getattr(client, "raw_url", None)
    url = raw if isinstance(raw, str) else ""
    scheme = urlparse(url).scheme if "://" in url else ""
    try:
        from surrealdb.connections.async_embedded import AsyncEmbeddedSurrealConnection
    except ImportError:  # pragma: no cover - another SDK layout
        embedded_class = False
    else:
        embedded_class = isinstance(client, AsyncEmbeddedSurrealConnection)
    if embedded_class:
        return url if scheme in EMBEDDED_SCHEMES else "mem://"
    if scheme in REMOTE_SCHEMES:
        return url.removesuffix("/rpc")
    return "unknown://"


def _first_error(raw: Mapping[str, Any]) -> str | None:
    if raw.get("error"):
        err = raw["error"]
        return str(err.get("message", err) if isinstance(err, Mapping) else err)
    errors = [s for s in raw.get("result", []) if s.get("status") == "ERR"]
    if not errors:
        return None
    meaningful = [
        s for s in errors if (s.get("details") or {}).get("kind") != "NotExecuted"
        and "not executed due to a failed transaction" not in str(s.get("result"))
    ]
    return str((meaningful or errors)[0].get("result"))


async def connect(settings: Settings | None = None) -> Store:
    """Open the store described by ``settings`` (an embedded file store by default)."""
    settings = settings or Settings.from_env()
    url = resolve_url(settings.db)
    scheme = urlparse(url).scheme
    validate_identifier(settings.namespace, "namespace")
    validate_identifier(settings.database, "database")
    names = Names(settings.documents_table, settings.chunks_table, settings.analyzer_language)
    if scheme in ("surrealkv", "surrealkv+versioned", "file"):
        Path(url.split("://", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
    try:
        client = AsyncSurreal(url)
        await client.connect()
        if scheme in REMOTE_SCHEMES and settings.user:
            await client.signin({"username": settings.user, "password": settings.password or ""})
        await client.use(settings.namespace, settings.database)
    except SurrealError as exc:
        hint = ""
        if "lock" in str(exc).lower():
            hint = " (another process has this database open; close it or use a server URL)"
        raise StoreError(f"cannot open {url}: {exc}{hint}") from exc
    except OSError as exc:
        raise StoreError(f"cannot reach {url}: {exc}") from exc
    return Store(client=client, url=url, namespace=settings.namespace, database=settings.database,
                 names=names, owned=True)
