"""A LlamaIndex retriever over a surrealdocs knowledge base (``pip install
'surrealdocs[llamaindex]'``).

>>> from surrealdocs.integrations.llamaindex import SurrealDocsRetriever
>>> retriever = SurrealDocsRetriever(db="./.surrealdocs/db", mode="hybrid", limit=5)
>>> nodes = retriever.retrieve("how are vectors indexed?")      # or: await retriever.aretrieve
>>> nodes[0].score, nodes[0].node.metadata["source"], nodes[0].node.metadata["page"]
>>> retriever.close()                                            # it opened the store

Each hit is a ``NodeWithScore``: its ``score`` is the hit's score and its ``node`` a
``TextNode`` whose ``text`` is the chunk's text, ``id_`` the chunk id,
``start_char_idx``/``end_char_idx`` where the chunk lies in its document's text, whose
``SOURCE`` relationship is the document id, and whose ``metadata`` holds what a citation
needs: ``source``, ``title``, ``mime_type``, ``page``/``last_page``,
``char_start``/``char_end``, ``chunk_id``, ``chunk_index``, ``document_id``, ``score``, for
hybrid search each leg's ``text_rank``/``vector_rank`` and ``text_score``/``vector_score``,
and the ``mode``. Only ``source``, ``title`` and ``page`` are shown to the LLM with the text
(LlamaIndex's ``MetadataMode.LLM``); none of it is embedded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import (
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilters,
)

from ..config import Settings
from ..core.kb import KnowledgeBase, SyncKnowledgeBase
from ..errors import ConfigurationError
from ..parts.results import Hit
from .common import (
    KnowledgeBaseRunner,
    hit_metadata,
    limit_alias,
    search_notice_of,
    search_request,
)

__all__ = ["SurrealDocsRetriever", "metadata_filters_json"]

# LlamaIndex's operators as the JSON filter's (CONTAINS and ANY test a list's items, which
# is what equality and $in do on a list here)
_OPERATORS = {FilterOperator.EQ: "$eq", FilterOperator.NE: "$ne", FilterOperator.GT: "$gt",
              FilterOperator.GTE: "$gte", FilterOperator.LT: "$lt", FilterOperator.LTE: "$lte",
              FilterOperator.IN: "$in", FilterOperator.NIN: "$nin",
              FilterOperator.CONTAINS: "$eq", FilterOperator.ANY: "$in"}


def metadata_filters_json(filters: MetadataFilters) -> dict[str, Any]:
    """LlamaIndex's ``MetadataFilters`` as the JSON filter object ``where`` takes."""
    parts: list[dict[str, Any]] = []
    for item in filters.filters:
        if isinstance(item, MetadataFilters):
            parts.append(metadata_filters_json(item))
            continue
        if item.operator == FilterOperator.IS_EMPTY:
            parts.append({item.key: {"$exists": False}})
            continue
        operator = _OPERATORS.get(item.operator)
        if operator is None:
            raise ConfigurationError(
                f"the filter operator {item.operator.name} is not supported; these are:"
                f" {', '.join(o.name for o in (*_OPERATORS, FilterOperator.IS_EMPTY))}")
        parts.append({item.key: {operator: item.value}})
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.NOT:
        raise ConfigurationError("the filter condition NOT is not supported: use NE or NIN")
    if not parts:
        raise ConfigurationError("MetadataFilters holds no filter")
    if len(parts) == 1:
        return parts[0]
    return {"$and" if condition == FilterCondition.AND else "$or": parts}

_SHOWN_TO_LLM = ("source", "title", "context", "page")


class SurrealDocsRetriever(BaseRetriever):
    """Retrieves chunks from a surrealdocs knowledge base with
    :meth:`surrealdocs.KnowledgeBase.search`.

    Give ``kb`` (a :class:`~surrealdocs.KnowledgeBase` or
    :class:`~surrealdocs.SyncKnowledgeBase` you opened and will close), or ``db`` and/or
    ``settings`` to have the retriever open one on first use (:meth:`close` closes it).
    The keyword arguments ``search_options`` are those of ``KnowledgeBase.search`` (``mode``,
    ``limit``, ``min_score``, ``source``, ``mime_type``, ``notebook``, ``topics``,
    ``created_after``, ``created_before``, ``candidates``, ``fusion``, ``rrf_k``,
    ``text_weight``, ``vector_weight``, ``per_document``), with the same defaults;
    ``similarity_top_k``, LlamaIndex's usual name, is ``limit``. ``filters`` takes
    LlamaIndex's ``MetadataFilters`` on the documents' metadata (EQ, NE, GT, GTE, LT, LTE,
    IN, NIN, ANY, CONTAINS, IS_EMPTY, under AND and OR), translated to ``where``
    (docs/filters.md).

    ``retrieve`` works from plain scripts and from sync code inside a running event loop;
    ``aretrieve`` from any loop. A ``KnowledgeBase`` opened on the loop that calls
    ``retrieve`` cannot be waited for on that loop: use ``aretrieve`` there (or a
    ``SyncKnowledgeBase``). A ``QueryBundle``'s ``query_str`` is searched (its embedding, if
    any, is not used: the store embeds the query with its own model).
    """

    def __init__(self, kb: KnowledgeBase | SyncKnowledgeBase | None = None, *,
                 db: str | None = None, settings: Settings | None = None,
                 callback_manager: CallbackManager | None = None, verbose: bool = False,
                 filters: MetadataFilters | None = None,
                 **search_options: Any) -> None:
        if filters is not None:
            if "where" in search_options:
                raise ConfigurationError("give filters or where, not both")
            search_options["where"] = metadata_filters_json(filters)
        self.options = search_request(limit_alias(search_options, "similarity_top_k"))
        self._runner = KnowledgeBaseRunner(kb, db=db, settings=settings)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _nodes(self, hits: Sequence[Hit]) -> list[NodeWithScore]:
        nodes = []
        notice = search_notice_of(hits)
        for hit in hits:
            metadata = hit_metadata(hit, self.options.mode, notice)
            node = TextNode(
                id_=hit.chunk_id, text=hit.content, metadata=metadata,
                start_char_idx=hit.char_start, end_char_idx=hit.char_end,
                relationships={NodeRelationship.SOURCE: RelatedNodeInfo(
                    node_id=hit.document_id, metadata={"source": hit.source,
                                                       "title": hit.title})},
                # (an empty one would put "context: None" in the text the LLM reads)
                excluded_llm_metadata_keys=[k for k in metadata if k not in _SHOWN_TO_LLM
                                            or metadata[k] is None],
                excluded_embed_metadata_keys=list(metadata))
            nodes.append(NodeWithScore(node=node, score=hit.score))
        return nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        request = self.options.replace(query=query_bundle.query_str)
        return self._nodes(self._runner.call(lambda kb: kb.search(request)))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        request = self.options.replace(query=query_bundle.query_str)
        return self._nodes(await self._runner.acall(lambda kb: kb.search(request)))

    def close(self) -> None:
        """Close the knowledge base the retriever opened (one you gave it stays open)."""
        self._runner.close()
