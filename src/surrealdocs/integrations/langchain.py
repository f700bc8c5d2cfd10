"""A LangChain retriever over a surrealdocs knowledge base (``pip install
'surrealdocs[langchain]'``).

>>> from surrealdocs.integrations.langchain import SurrealDocsRetriever
>>> retriever = SurrealDocsRetriever(db="./.surrealdocs/db", mode="hybrid", limit=5)
>>> docs = retriever.invoke("how are vectors indexed?")        # or: await retriever.ainvoke
>>> docs[0].metadata["source"], docs[0].metadata["page"], docs[0].metadata["score"]
>>> retriever.close()                                            # it opened the store

Each hit is a ``Document`` whose ``page_content`` is the chunk's text, whose ``id`` is the
chunk id, and whose ``metadata`` holds what a citation needs: ``source``, ``title``,
``mime_type``, ``page``/``last_page``, ``char_start``/``char_end`` (where the chunk lies in
its document's text), ``chunk_id``, ``chunk_index``, ``document_id``, ``score``, for hybrid
search each leg's ``text_rank``/``vector_rank`` and ``text_score``/``vector_score``, and
the ``mode``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import AliasChoices, Field, PrivateAttr

from ..config import Settings
from ..core.kb import KnowledgeBase, SyncKnowledgeBase
from ..core.search_request import SearchRequest
from ..parts.results import Hit
from .common import (
    RETRIEVER_OPTIONS,
    KnowledgeBaseRunner,
    filter_alias,
    hit_metadata,
    limit_alias,
    search_notice_of,
    search_request,
)

__all__ = ["SurrealDocsRetriever"]


class SurrealDocsRetriever(BaseRetriever):
    """Retrieves chunks from a surrealdocs knowledge base with
    :meth:`surrealdocs.KnowledgeBase.search`.

    Give ``kb`` (a :class:`~surrealdocs.KnowledgeBase` or
    :class:`~surrealdocs.SyncKnowledgeBase` you opened and will close), or ``db`` and/or
    ``settings`` to have the retriever open one on first use (:meth:`close` closes it).
    Every other field is a search option, with the meaning and default it has in
    ``KnowledgeBase.search``; ``k``, LangChain's usual name, is ``limit``. A call can change
    any of them for itself: ``invoke(query, k=3, mode="text")``. ``filter`` (LangChain's
    usual name; ``where`` here) takes a JSON filter object on the documents' metadata:
    ``{"team": "a", "year": {"$gte": 2020}}`` (docs/filters.md); a document's own keys are
    in each Document's ``metadata``.

    Retrievers that open the same store with the same settings share one knowledge base in
    a process (an embedded store can be open once per process); it closes with the last.

    ``invoke`` works from plain scripts and from sync code inside a running event loop;
    ``ainvoke`` from any loop. A ``KnowledgeBase`` opened on the loop that calls ``invoke``
    cannot be waited for on that loop: use ``ainvoke`` there (or a ``SyncKnowledgeBase``).
    """

    kb: KnowledgeBase | SyncKnowledgeBase | None = Field(default=None, exclude=True,
                                                         repr=False)
    db: str | None = None
    settings: Settings | None = Field(default=None, exclude=True, repr=False)

    mode: str = "hybrid"
    limit: int = Field(default=10, validation_alias=AliasChoices("limit", "k"))
    min_score: float | None = None
    source: str | None = None
    mime_type: str | list[str] | None = None
    notebook: Any = None
    topics: list[str] | None = None
    created_after: dt.datetime | None = None
    created_before: dt.datetime | None = None
    candidates: int | None = None
    fusion: str | None = None
    rrf_k: int | None = None
    text_weight: float | None = None
    vector_weight: float | None = None
    per_document: bool = False
    cutoff: bool = True
    where: Any = Field(default=None, validation_alias=AliasChoices("where", "filter"))
    rerank: str | bool | None = None

    _runner: KnowledgeBaseRunner = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        self._runner = KnowledgeBaseRunner(self.kb, db=self.db, settings=self.settings)

    @property
    def search_options(self) -> SearchRequest:
        return search_request({name: getattr(self, name) for name in RETRIEVER_OPTIONS})

    def _documents(self, hits: Sequence[Hit], mode: str) -> list[Document]:
        notice = search_notice_of(hits)
        return [Document(id=hit.chunk_id, page_content=hit.content,
                         metadata=hit_metadata(hit, mode, notice)) for hit in hits]

    def _request(self, query: str, overrides: dict[str, Any]) -> SearchRequest:
        """This retriever's search with a call's own options (``invoke(q, k=3)``)."""
        overrides = filter_alias(limit_alias(
            {name: value for name, value in overrides.items() if name != "verbose"}, "k"))
        return search_request(overrides, self.search_options).replace(query=query)

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun,
                                **overrides: Any) -> list[Document]:
        request = self._request(query, overrides)
        return self._documents(self._runner.call(lambda kb: kb.search(request)),
                               request.mode)

    async def _aget_relevant_documents(
            self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
            **overrides: Any) -> list[Document]:
        request = self._request(query, overrides)
        hits = await self._runner.acall(lambda kb: kb.search(request))
        return self._documents(hits, request.mode)

    def close(self) -> None:
        """Close the knowledge base the retriever opened (one you gave it stays open)."""
        self._runner.close()
