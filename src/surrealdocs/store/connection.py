"""Opening a SurrealDB store from a URL, and running SurrealQL with clear errors."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import ctypes.util
import functools
import os
import shutil
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from surrealdb import AsyncSurreal, SurrealError
from surrealdb.errors import HttpStatusError, NotAllowedError

from ..config import DEFAULT_DIR, Settings
from ..errors import ConfigurationError, StoreError
from .names import Names, validate_identifier

EMBEDDED_SCHEMES = {"mem", "memory", "surrealkv", "surrealkv+versioned", "file"}
FILE_SCHEMES = {"surrealkv", "surrealkv+versioned", "file"}
REMOTE_SCHEMES = {"ws", "wss", "http", "https"}


# What a transaction THROWs when the state it was planned on changed before it ran (another
# writer got there first): the caller plans again.
STALE_MARK = "surrealdocs: the previous version changed meanwhile"


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> bool:
    """Hand the memory the process has freed back to the system, where glibc allows it.

    Why: glibc keeps freed heap pages for reuse, so an embedded engine that has just been
    closed (its memtables written out and freed) leaves the process's RSS where it was. With
    a trim after each reopen, six ingest steps in one process ended at 200-700 MB of RSS
    instead of 700-1,600 MB, at the same speed (bench/ingest_steps.py; BENCHMARKS.md).
    Returns False where there is no ``malloc_trim``.
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@dataclass(frozen=True)
class Statement:
    """SurrealQL and its parameters, built by the module that owns the tables it touches.

    Owners hand statements out instead of running them when a write must be atomic with
    other tables' writes: the caller runs them together with :meth:`Store.transaction`.
    """

    sql: str
    params: Mapping[str, Any] = field(default_factory=dict)
    rows: int = 0  # rows it writes, when it writes many (see Store.reopen_after)


def resolve_url(db: str | None) -> str:
    """Turn the user's ``db`` setting into a URL the SDK understands.

    ``None`` is the default embedded file store under ``./.surrealdocs/``; a bare path is a
    ``surrealkv://`` file store at that path; URLs pass through once their scheme and shape
    are checked.
    """
    if db is None or db == "":
        return f"surrealkv://{(DEFAULT_DIR / 'db').resolve()}"
    if not isinstance(db, str) or "\x00" in db:
        raise ConfigurationError(f"invalid database URL {db!r}")
    try:
        parsed = urlparse(db) if "://" in db else None
        if parsed is not None and parsed.scheme in REMOTE_SCHEMES:
            parsed.port  # noqa: B018 - raises on a malformed port
    except ValueError as exc:
        raise ConfigurationError(f"invalid database URL {db!r}: {exc}") from exc
    scheme = parsed.scheme if parsed is not None else ""
    if not scheme:
        if db in ("mem", "memory"):
            return "mem://"
        return f"surrealkv://{_store_path(db)}"
    if scheme in ("surrealkv", "surrealkv+versioned", "file"):
        path = db.split("://", 1)[1]
        if not path:
            raise ConfigurationError(f"{db!r} names no path for the database file")
        return f"{scheme}://{_store_path(path)}"
    if scheme in REMOTE_SCHEMES:
        if not (parsed and parsed.hostname):
            raise ConfigurationError(f"invalid database URL {db!r}: it names no host")
        return db
    if scheme in EMBEDDED_SCHEMES:
        return db
    raise ConfigurationError(
        f"unsupported database URL {db!r}: use a path, surrealkv://PATH, mem://, "
        "ws(s)://HOST:PORT or http(s)://HOST:PORT"
    )


#: File stores this process opened with connect() and has not closed: the engine locks a
#: store's folder, so a second open of one of these fails, and the error should say why.
_OPEN_HERE: collections.Counter[str] = collections.Counter()

# What SurrealKV keeps in its folder; a folder holding anything else is not a store.
_STORE_ENTRIES = {"LOCK", "manifest", "sstables", "vlog", "wal", "clog"}


def _store_path(text: str) -> Path:
    """The absolute path of a file store (``~`` expanded, links resolved)."""
    try:
        return Path(text).expanduser().resolve()
    except (OSError, RuntimeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigurationError(f"cannot use {text} for the database: {reason}") from None


def store_missing(url: str) -> Path | None:
    """The folder of a file store that does not exist yet (``None`` when it exists, or the
    store is not a file store)."""
    folder = store_path(url)
    if folder is None:
        return None
    try:
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            return None  # a store, or something else there: opening says what
        existing = next((p for p in folder.parents if p.exists()), None)
        if existing is not None and not existing.is_dir():
            return None  # under a file: opening says so
    except OSError:
        return None  # opening says why
    return folder


def check_store_folder(path: Path) -> None:
    """Refuse to make a store in a file, or in a folder of other files (``--db ./papers``
    would otherwise write the engine's files among the user's documents)."""
    try:
        is_dir = path.is_dir()
        if not is_dir and path.exists():
            raise ConfigurationError(f"{path} is a file, not a database folder")
        entries = {p.name for p in path.iterdir()} if is_dir else set()
    except OSError as exc:
        raise ConfigurationError(
            f"cannot use {path} for the database: {_os_reason(exc)}") from None
    if is_dir and entries and not entries & _STORE_ENTRIES:
        raise ConfigurationError(
            f"{path} is a folder of other files, not a surrealdocs store: give a new or "
            "empty folder for the database (e.g. --db ./kb), or the folder of an existing "
            "store")


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
    # Signs in and use()s again when a server has forgotten the session (see _renew).
    renew: Callable[[Any], Awaitable[None]] | None = field(default=None, repr=False,
                                                           compare=False)
    _renewals: int = field(default=0, repr=False, compare=False)
    _renew_lock: asyncio.Lock | None = field(default=None, repr=False, compare=False)
    _in_flight: int = field(default=0, repr=False, compare=False)
    _idle: asyncio.Event | None = field(default=None, repr=False, compare=False)
    _open: asyncio.Event | None = field(default=None, repr=False, compare=False)
    _write_lock: asyncio.Lock | None = field(default=None, repr=False, compare=False)
    _builds: int = field(default=0, repr=False, compare=False)
    # Rows written after which the next query first reopens the engine (0: never); see
    # _reopen_if_worn. Set by connect() for file stores it opens.
    reopen_after: int = 0
    _written: int = field(default=0, repr=False, compare=False)
    _reopen_lock: asyncio.Lock | None = field(default=None, repr=False, compare=False)
    reopens: int = field(default=0, repr=False, compare=False)
    # statements run that may have written (see query's read_only and exclusive)
    changes: int = field(default=0, repr=False, compare=False)

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
            try:
                await self.client.close()
                await self.client.connect()
                await self.client.use(self.namespace, self.database)
            except (SurrealError, OSError) as exc:
                raise StoreError(reopen_failure(self.url, exc)) from exc
            release_freed_memory()  # the old engine's memtables, the opening's buffers
        finally:
            is_open.set()
        self._written = 0
        self.reopens += 1
        return True

    async def _reopen_if_worn(self) -> None:
        """Reopen the engine once ``reopen_after`` rows were written since it was opened.

        Why: the embedded engine (core 3.2.4 on SurrealKV) stops for good during a long
        series of writes in one session: after 57,000 to 89,000 chunks written (fewer with
        vectors), a write never returns, every thread parked and no CPU used, while a
        freshly opened engine goes on from there. Reopening every 16,000 chunks carried the
        same writes past 150,000 (bench/engine/engine_write_hang.py; BENCHMARKS.md). Each hang
        came as the engine set aside its second memtable of the session, the first never
        having been flushed; closing the engine writes its memtables out.
        """
        if self._reopen_lock is None:
            self._reopen_lock = asyncio.Lock()
        async with self._reopen_lock:
            if self._written >= self.reopen_after:
                await self.refresh_engine()

    @property
    def index_builds(self) -> int:
        """HNSW graph builds this process is running now (a server is not ready meanwhile:
        its queries wait for the engine)."""
        return self._builds

    async def build_index(self, *statements: Statement) -> list[Any]:
        """Run statements that build an HNSW graph (REBUILD or DEFINE INDEX), on a freshly
        reopened engine where that is possible (see :meth:`refresh_engine`)."""
        self._builds += 1
        try:
            await self.refresh_engine()
            return await self.run(*statements)
        finally:
            self._builds -= 1

    @property
    def exclusive(self) -> bool:
        """Whether every write to the database goes through this ``Store``: an embedded
        engine it opened (the engine locks its files; ``mem://`` is this connection's own),
        not a server other processes write to too. Then :attr:`changes` tells whether
        anything may have changed since a reader last looked."""
        return self.owned and self.embedded

    async def query(
        self, sql: str, params: Mapping[str, Any] | None = None, *, retries: int = 3,
        rows: int = 0, read_only: bool = False,
    ) -> list[Any]:
        """Run SurrealQL and return one result per statement; ``rows`` is how many rows it
        writes, when it writes many. ``read_only``: the caller knows it writes nothing (it
        does not count in :attr:`changes`; a statement that may write must never say so).

        Raises :class:`StoreError` naming the statement's own error (not the "not executed
        due to a failed transaction" that follows it). Write conflicts are retried, and so,
        once, is a request a server refused whole because it forgot the session (see
        :meth:`_renew`).
        """
        try:
            return await self._query(sql, params, retries, rows)
        finally:  # counted once it is over (committed, or failed), never before
            if not read_only:
                self.changes += 1

    async def _query(self, sql: str, params: Mapping[str, Any] | None, retries: int,
                     rows: int) -> list[Any]:
        if self.reopen_after and self._written >= self.reopen_after:
            await self._reopen_if_worn()
        idle, is_open = self._events()
        attempt, renewed = 0, False
        while True:
            await is_open.wait()
            renewals = self._renewals
            self._in_flight += 1
            idle.clear()
            try:
                raw = await self.client.query_raw(sql, dict(params or {}))
            except UnicodeEncodeError as exc:  # a lone surrogate in a value: not text
                raise ConfigurationError(
                    "a value is not valid Unicode text (it holds a lone surrogate,"
                    f" {exc.object[exc.start:exc.end]!r})") from None
            except SurrealError as exc:
                if not renewed and _session_lost(exc) and await self._renew(renewals):
                    renewed = True
                    continue
                raise StoreError(f"{exc}") from exc
            finally:
                self._in_flight -= 1
                if self._in_flight == 0:
                    idle.set()
            error = _first_error(raw)
            if error is None:
                self._written += rows
                return [stmt.get("result") for stmt in raw.get("result", [])]
            if not renewed and _session_lost(raw) and await self._renew(renewals):
                renewed = True
                continue
            if "conflict" in error.lower() and "retr" in error.lower() and attempt < retries:
                attempt += 1
                await asyncio.sleep(0.02 * attempt)
                continue
            raise StoreError(error)

    async def _renew(self, renewals: int) -> bool:
        """Sign in and ``use()`` again on a server that no longer knows this connection's
        session: the SDK reopens a dropped WebSocket (a server restart, a network blip) as a
        new, anonymous session, and over HTTP the token from ``signin`` expires (after an
        hour by default). Done once however many queries noticed; ``renewals`` is the count
        the caller saw before its query. False for stores that cannot (embedded, or a
        connection the caller lent us)."""
        if self.renew is None:
            return False
        if self._renew_lock is None:
            self._renew_lock = asyncio.Lock()
        async with self._renew_lock:
            if self._renewals == renewals:
                try:
                    await self.renew(self.client)
                except SurrealError as exc:
                    raise StoreError(f"{self.url} no longer knows this connection's session, "
                                     f"and signing in again failed: {exc}") from exc
                self._renewals += 1
        return True

    async def run(self, *statements: Statement) -> list[Any]:
        """Run statements in one round trip (each its own transaction); one result per
        SurrealQL statement."""
        joined = _join(statements)
        return await self.query(joined.sql, joined.params, rows=joined.rows)

    async def transaction(self, *statements: Statement) -> None:
        """Run statements in one transaction: all of them take effect, or none."""
        joined = _join(statements)
        if joined.sql.strip():
            await self.query(f"BEGIN;\n{joined.sql}\nCOMMIT;", joined.params,
                             rows=joined.rows)

    async def close(self) -> None:
        if isinstance(self.client, _Closed):
            return
        if self.owned and _OPEN_HERE[self.url] > 0:
            _OPEN_HERE[self.url] -= 1
        await self.client.close()
        if self.owned:
            # Let the engine go now, while the interpreter is whole. A KnowledgeBase sits in
            # reference cycles, so the SDK's engine object would otherwise be freed by the
            # cycle collector during interpreter shutdown, and the engine's threads ending
            # then aborted the process (SIGABRT) in a few runs in a hundred.
            self.client = _Closed(self.url)

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


def _join(statements: tuple[Statement, ...]) -> Statement:
    params: dict[str, Any] = {}
    for statement in statements:
        for name, value in statement.params.items():
            if name in params and params[name] is not value and params[name] != value:
                raise ValueError(f"two statements bind ${name} to different values")
            params[name] = value
    return Statement("\n".join(s.sql for s in statements if s.sql.strip()), params,
                     sum(s.rows for s in statements))


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


def _detail_kind(error: Any) -> Any:
    details = error.get("details") if isinstance(error, Mapping) else None
    return details.get("kind") if isinstance(details, Mapping) else None


def _session_lost(failure: Any) -> bool:
    """Whether a server refused a whole request, running none of it, because the session is
    not signed in (any more) or has no namespace or database selected."""
    if isinstance(failure, HttpStatusError):
        return bool(failure.status == 401)
    if isinstance(failure, NotAllowedError):
        return bool(_detail_kind({"details": failure.details}) == "Auth")
    if not isinstance(failure, Mapping):
        return False
    if isinstance(failure.get("error"), Mapping):
        error = failure["error"]
        return bool(error.get("kind") == "NotAllowed" and _detail_kind(error) == "Auth")
    statements = failure.get("result")
    if not isinstance(statements, list) or not statements:
        return False
    # every failed statement refused for want of a namespace/database, or not run because of
    # one that was (a transaction's others are cancelled, its COMMIT not executed); what
    # succeeded touched no data (BEGIN, RETURN): nothing can without a database selected
    kinds = [_detail_kind(s) for s in statements
             if not isinstance(s, Mapping) or s.get("status") != "OK"]
    return (all(k in ("NamespaceEmpty", "DatabaseEmpty", "NotExecuted", "Cancelled")
                for k in kinds)
            and any(k in ("NamespaceEmpty", "DatabaseEmpty") for k in kinds))


async def _signin(client: Any, settings: Settings) -> None:
    """Sign in as ``settings.user``: a root user, else a user of the settings' database, else
    one of its namespace (a server keeps the three levels apart; the first to accept wins)."""
    credentials = {"username": settings.user, "password": settings.password or ""}
    levels: list[dict[str, str]] = [
        {}, {"namespace": settings.namespace, "database": settings.database},
        {"namespace": settings.namespace}]
    for level in levels[:-1]:
        try:
            await client.signin({**level, **credentials})
            return
        except NotAllowedError:
            continue
    await client.signin({**levels[-1], **credentials})


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


# below this much free space, a failed reopen is put down to the disk being full
LOW_DISK_BYTES = 64 * 1024**2


def reopen_failure(url: str, exc: BaseException) -> str:
    """Why this process could not reopen its own store's engine. The engine says "locked"
    when the closing one could not write its files out (a full disk): that is no other
    process, so the free space is what is reported when it is low."""
    folder = store_path(url)
    free = None
    if folder is not None:
        with contextlib.suppress(OSError):
            free = shutil.disk_usage(folder if folder.exists() else folder.parent).free
    if free is not None and free < LOW_DISK_BYTES:
        return (f"cannot reopen the store {url}: the disk that holds it is full ({free:,}"
                " bytes free); free some space and run the command again (what was"
                " committed is kept)")
    return f"cannot reopen the store {url} in this process: {exc}"


def store_path(url: str) -> Path | None:
    """The folder of a file store's URL (as :func:`resolve_url` gives it); ``None`` for
    memory and remote stores."""
    if urlparse(url).scheme not in FILE_SCHEMES:
        return None
    return Path(url.split("://", 1)[1])


def serving_marker(url: str) -> Path | None:
    """Where ``surrealdocs serve`` notes that it serves a file store (next to its folder)."""
    folder = store_path(url)
    return None if folder is None else folder.with_name(folder.name + ".serving")


def served_by(url: str) -> str | None:
    """The address of the ``surrealdocs serve`` process serving this file store, if one
    says so and is still running."""
    marker = serving_marker(url)
    try:
        pid_text, address = marker.read_text(encoding="utf-8").split("\n", 1) \
            if marker else ("", "")
        os.kill(int(pid_text), 0)  # raises when that process is gone
    except (OSError, ValueError):
        return None
    return address.strip() or None


async def connect(settings: Settings | None = None) -> Store:
    """Open the store described by ``settings`` (an embedded file store by default)."""
    settings = settings or Settings.from_env()
    url = resolve_url(settings.db)
    scheme = urlparse(url).scheme
    validate_identifier(settings.namespace, "namespace")
    validate_identifier(settings.database, "database")
    names = Names(settings.documents_table, settings.chunks_table, settings.analyzer_language)
    folder = store_path(url)
    if folder is not None:
        check_store_folder(folder)
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the database folder {folder}: "
                             f"{_os_reason(exc)}") from None

    async def sign_in(client: Any) -> None:
        if scheme in REMOTE_SCHEMES and settings.user:
            # An expired token still rides on every HTTP request, the signin included, and a
            # server answers that with 401 before it reads the credentials.
            if getattr(client, "token", None):
                client.token = None
            await _signin(client, settings)
        await client.use(settings.namespace, settings.database)

    client: Any = None
    try:
        client = AsyncSurreal(url)
        if scheme in ("http", "https"):
            # One pooled HTTP session: without it the SDK opens a TCP (and TLS) connection
            # per query.
            await client.__aenter__()
        await client.connect()
        await sign_in(client)
    except (SurrealError, OSError) as exc:
        if client is not None:  # a refused signin leaves an open socket or HTTP session
            with contextlib.suppress(Exception):
                await client.close()
        if isinstance(exc, OSError):
            raise StoreError(f"cannot reach {url}: {exc}") from exc
        hint = ""
        if "lock" in str(exc).lower():
            served = served_by(url)
            if _OPEN_HERE[url]:
                hint = (" (this process has it open already: a KnowledgeBase, retriever or"
                        " connection that was not closed; use that one, or close it first)")
            elif served:
                hint = (f" (it is served by `surrealdocs serve` at {served}: add --server"
                        f" {served} to the command, use its HTTP API, or stop it)")
            else:
                hint = " (another process has this database open; close it or use a server URL)"
        raise StoreError(f"cannot open {url}: {exc}{hint}") from exc
    if scheme in FILE_SCHEMES:
        _OPEN_HERE[url] += 1
    return Store(client=client, url=url, namespace=settings.namespace, database=settings.database,
                 names=names, owned=True, renew=sign_in if scheme in REMOTE_SCHEMES else None,
                 reopen_after=settings.engine_reopen_rows if scheme in FILE_SCHEMES else 0)


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, (FileExistsError, NotADirectoryError)):
        return "a part of the path is a file, not a folder"
    return exc.strerror or str(exc)


class _Closed:
    """What a closed store's connection is: every use says so."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __getattr__(self, name: str) -> Any:
        raise StoreError(f"the store {self.url} is closed")
