"""What the framework retrievers share: their search options, a hit's citation metadata, and
a runner that makes a knowledge base's calls on the event loop it lives on.

A knowledge base belongs to the event loop it was opened on (a remote store's connection
and the store's write lock are bound to it). A retriever is called from plain scripts
(``invoke``/``retrieve``, no loop), from async code (``ainvoke``/``aretrieve``, on some
loop) and from sync code inside a running loop (a notebook cell, a sync callback of an
async app). :class:`KnowledgeBaseRunner` sends every call to the knowledge base's own loop:

- a :class:`~surrealdocs.SyncKnowledgeBase`, or one opened lazily from a store URL or
  settings (as a ``SyncKnowledgeBase``), runs on a private loop in its own thread, so both
  paths work from anywhere;
- a :class:`~surrealdocs.KnowledgeBase` runs on the loop it was opened on: async calls on
  that loop await it directly, calls from other threads are handed to it; a blocking call
  from that very loop would deadlock it and is refused with a clear error.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from pathlib import PurePosixPath
from typing import Any, TypeVar

from ..config import Settings
from ..core.kb import KnowledgeBase, SyncKnowledgeBase
from ..core.search_request import SEARCH_FIELDS, SearchRequest
from ..errors import ConfigurationError
from ..parts.results import Hit

T = TypeVar("T")
log = logging.getLogger("surrealdocs.integrations")
Work = Callable[[KnowledgeBase], Coroutine[Any, Any, T]]


# A retriever holds every search option but the query (given in each call) and a query
# vector (retrievers are asked by text; a framework's own query embedding is in another
# model's space than the store's).
RETRIEVER_OPTIONS: tuple[str, ...] = tuple(
    name for name in SEARCH_FIELDS if name not in ("query", "query_vector"))


def search_request(options: dict[str, Any],
                   base: SearchRequest | None = None) -> SearchRequest:
    """The search options of a retriever (``base`` changed by ``options``), checked."""
    unknown = set(options) - set(RETRIEVER_OPTIONS)
    if unknown:
        raise ConfigurationError(
            f"unknown search option(s) {', '.join(sorted(unknown))}; the options are "
            f"{', '.join(RETRIEVER_OPTIONS)}")
    return (base or SearchRequest()).replace(**options)


def filter_alias(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the frameworks' ``filter`` (a JSON filter object on the documents'
    metadata) read as ``where``; both at once is an error."""
    if "filter" not in options:
        return options
    if "where" in options:
        raise ConfigurationError("give filter or where, not both")
    renamed = {name: value for name, value in options.items() if name != "filter"}
    renamed["where"] = options["filter"]
    return renamed


def limit_alias(options: dict[str, Any], alias: str) -> dict[str, Any]:
    """``options`` with a framework's own name for ``limit`` (``k``, ``similarity_top_k``)
    read as ``limit``; both at once is an error."""
    if alias not in options:
        return options
    if "limit" in options:
        raise ConfigurationError(f"give {alias} or limit, not both")
    renamed = {name: value for name, value in options.items() if name != alias}
    renamed["limit"] = options[alias]
    return renamed


def search_notice_of(hits: Any) -> str | None:
    """What the search said beside its hits (a reranker that failed): logged as a warning,
    and put in each hit's metadata as ``notice`` by the retrievers."""
    notice = getattr(hits, "notice", None)
    if notice:
        log.warning("surrealdocs: %s", notice)
    return notice if isinstance(notice, str) else None


def hit_metadata(hit: Hit, mode: str, notice: str | None = None) -> dict[str, Any]:
    """What a citation needs, from a hit: everything but its text, plus the search mode
    (and the search's ``notice``, when it has one). A document without a title of its own
    is called by its file name."""
    metadata = hit.to_dict()
    metadata.pop("content", None)
    own = metadata.pop("metadata", None) or {}
    # the document's own keys sit beside the hit's, as the frameworks' filters name them
    # (the hit's fields win a clash)
    metadata = {**{k: v for k, v in own.items() if k not in metadata}, **metadata}
    if not metadata.get("title"):
        metadata["title"] = PurePosixPath(hit.source.split("://", 1)[-1]).name or hit.source
    metadata["mode"] = mode
    if notice:
        metadata["notice"] = notice
    return metadata


class KnowledgeBaseRunner:
    """Runs calls on a knowledge base from sync and async code alike (see the module).

    Give a :class:`KnowledgeBase` or a :class:`SyncKnowledgeBase` (yours: :meth:`close`
    leaves it open), or a store URL and/or :class:`Settings` to open one lazily on first
    use (closed by :meth:`close`).
    """

    def __init__(self, kb: KnowledgeBase | SyncKnowledgeBase | None = None, *,
                 db: str | None = None, settings: Settings | None = None) -> None:
        if kb is not None and (db is not None or settings is not None):
            raise ConfigurationError("give a knowledge base, or a store URL/settings to open "
                                     "one, not both")
        if kb is not None and not isinstance(kb, (KnowledgeBase, SyncKnowledgeBase)):
            raise ConfigurationError(
                f"expected a KnowledgeBase or SyncKnowledgeBase, got {type(kb).__name__}")
        self._given = kb
        self._key: Settings | None = None
        if kb is None:
            resolved = settings or Settings.from_env()
            self._key = resolved.replace(db=db) if db is not None else resolved
        self._opened: SyncKnowledgeBase | None = None
        self._lock = threading.Lock()

    def _target(self) -> tuple[KnowledgeBase, asyncio.AbstractEventLoop | None]:
        given = self._given
        if isinstance(given, SyncKnowledgeBase):
            return given.kb, given.loop
        if isinstance(given, KnowledgeBase):
            return given, given.loop
        with self._lock:
            if self._opened is None:
                assert self._key is not None
                self._opened = _SHARED.acquire(self._key)
            return self._opened.kb, self._opened.loop

    def call(self, work: Work[T]) -> T:
        """Run ``work(kb)`` and wait for it (from code that is not a coroutine)."""
        kb, loop = self._target()
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None:
            raise ConfigurationError(
                "this knowledge base was not opened on an event loop: open it with "
                "`await KnowledgeBase.open(...)`, or give a SyncKnowledgeBase or a store URL")
        if loop.is_closed():
            raise ConfigurationError(_CLOSED)
        if loop.is_running():
            if loop is running:
                raise ConfigurationError(
                    "a blocking call on the event loop this knowledge base runs on would wait "
                    "for itself: await the async call (ainvoke / aretrieve) instead, or give "
                    "the retriever a SyncKnowledgeBase or a store URL")
            return asyncio.run_coroutine_threadsafe(work(kb), loop).result()
        if running is None:
            return loop.run_until_complete(work(kb))
        raise ConfigurationError(_STOPPED)

    async def acall(self, work: Work[T]) -> T:
        """Run ``work(kb)`` on the knowledge base's loop and await it from this one."""
        if self._given is None and self._opened is None:
            await asyncio.to_thread(self._target)  # opening blocks: not on this loop
        kb, loop = self._target()
        running = asyncio.get_running_loop()
        if loop is None or loop is running:
            return await work(kb)
        if loop.is_closed():
            raise ConfigurationError(_CLOSED)
        if not loop.is_running():
            raise ConfigurationError(_STOPPED)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work(kb), loop))

    def close(self) -> None:
        """Close the knowledge base this runner opened (one it was given stays open)."""
        with self._lock:
            opened, self._opened = self._opened, None
        if opened is not None:
            assert self._key is not None
            _SHARED.release(self._key)


class _SharedKnowledgeBases:
    """The knowledge bases that runners open from a store URL or settings: one per settings
    in a process, shared by every runner that asks for it, closed when the last one closes.

    An embedded file store can be open once per process (the engine locks its directory),
    and frameworks make retrievers freely: LangChain's own tests build two over one store
    and close neither. Retrievers with other settings for the same store still conflict,
    and the store's error says so.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[Settings, tuple[SyncKnowledgeBase, int]] = {}

    def acquire(self, settings: Settings) -> SyncKnowledgeBase:
        with self._lock:  # opening under the lock: two first users must not both open it
            kb, users = self._open.get(settings) or (None, 0)
            if kb is None:
                kb = SyncKnowledgeBase(settings=settings)
            self._open[settings] = (kb, users + 1)
            return kb

    def release(self, settings: Settings) -> None:
        with self._lock:
            kb, users = self._open[settings]
            if users > 1:
                self._open[settings] = (kb, users - 1)
                return
            del self._open[settings]
        kb.close()


_SHARED = _SharedKnowledgeBases()


_CLOSED = ("the event loop this knowledge base was opened on is closed (did an asyncio.run() "
           "end?): open it where you use it, or give a SyncKnowledgeBase or a store URL")
_STOPPED = ("the event loop this knowledge base was opened on is not running: call from that "
            "loop, or give a SyncKnowledgeBase or a store URL")
