"""The JSON bodies and query parameters the API takes (types only: the knowledge base
checks the values and says what is wrong, answered as 422)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

# the most hits (and hybrid candidates per leg) one request may ask for
MAX_LIMIT = 1000
Mode = Literal["hybrid", "vector", "text"]
Fusion = Literal["zscore", "minmax", "rrf"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _encodable(cls, value: Any) -> Any:
        """JSON can spell a lone surrogate (``"\\ud800"``), which is no text: refuse it
        here rather than fail when it is stored or sent back."""
        if not is_encodable(value):
            raise ValueError("text must be valid Unicode (a lone surrogate is not)")
        return value


def is_encodable(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, (list, tuple)):
        return all(is_encodable(v) for v in value)
    if isinstance(value, dict):
        return all(is_encodable(k) and is_encodable(v) for k, v in value.items())
    return True  # numbers, dates, and models (checked by their own validator)


class SearchBody(_Strict):
    """A search as the HTTP API takes it: every field of the core's
    :class:`~surrealdocs.core.search_request.SearchRequest` (see its documentation)."""

    query: str | None = Field(None, description="What to look for")
    mode: Mode = "hybrid"
    limit: int = Field(10, ge=1, le=MAX_LIMIT, description=(
        f"Number of hits, at most {MAX_LIMIT:,} over HTTP (the library and the CLI take"
        " 10,000, the MCP tool 50)"))
    min_score: float | None = Field(None, ge=0, le=1, description=(
        "Drop hits scoring below this: a score is the probability that the hit is relevant"
        " (0-1; see the README)"))
    source: str | None = Field(None, description="Only sources matching this glob")
    mime_type: list[str] | None = Field(None, description="Only these MIME types")
    notebook: str | None = Field(None, description="Only sources in this notebook (name or id)")
    topics: list[str] | None = Field(None, description="Only sources with one of these topics")
    created_after: dt.datetime | None = Field(None, description="Ingested at or after (ISO 8601)")
    created_before: dt.datetime | None = Field(None, description="Ingested before (ISO 8601)")
    candidates: int | None = Field(None, ge=1, le=MAX_LIMIT,
                                   description="Hits per leg before hybrid fusion")
    fusion: Fusion | None = None
    rrf_k: int | None = None
    text_weight: float | None = None
    vector_weight: float | None = None
    per_document: bool = Field(False, description="One hit per document: its best chunk")
    query_vector: list[float] | None = Field(
        None, description="Search by this vector (the store's model) instead of, or besides,"
                          " the query text")
    cutoff: bool = Field(True, description="Leave out hits that are probably not relevant"
                                           " (false: show weaker matches too)")
    where: dict[str, Any] | list[str] | None = Field(None, description=(
        "Only documents whose metadata passes this filter: a JSON filter object (POST; e.g."
        ' {"team": "a", "year": {"$gte": 2020}}; docs/filters.md), or --where texts'
        " (GET: where=team=a, repeatable)"))
    rerank: bool | None = Field(None, description=(
        "The server's reranker (GET /v1/info says which): true to use it, false not to;"
        " unset: on when the server has one. A reranker that fails keeps the first stage's"
        " order and the answer's notice says so"))


class TextItem(_Strict):
    source: str = Field(..., min_length=1, max_length=1000,
                        description="A name for it, e.g. note://meeting-2024-05-01")
    text: str
    mime_type: str = "text/plain"


class TextsRequest(_Strict):
    texts: list[TextItem] = Field(..., min_length=1, max_length=1000)
    notebook: str | None = Field(None, description="Put the documents in this notebook")
    topics: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] | None = Field(
        None, description="Metadata of your own, set on every document (docs/filters.md)")
    force: bool = Field(False, description="Store again even if unchanged")


class UrlsRequest(_Strict):
    """Web pages to fetch and ingest, as a job."""

    urls: list[str] = Field(default_factory=list, max_length=10_000,
                            description="http(s) URLs of pages (PDFs and other files too)")
    sitemaps: list[str] = Field(default_factory=list, max_length=100,
                                description="Sitemaps whose pages to ingest")
    follow: int = Field(0, ge=0, le=10, description=(
        "Also ingest the pages they link to, this many links deep, within the same host"
        " and path"))
    max_pages: int = Field(100, ge=1, le=10_000, description="The most pages the job fetches")
    notebook: str | None = Field(None, description="Put the documents in this notebook")
    topics: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] | None = Field(
        None, description="Metadata of your own, set on every document (docs/filters.md)")
    force: bool = Field(False, description="Fetch and store again even if unchanged")


class RefreshRequest(_Strict):
    """Re-check the web page sources, as a job."""

    older_than: float | None = Field(None, ge=0, description=(
        "Only pages fetched longer ago than this many seconds"))
    prune: bool = Field(False, description="Remove the pages that are gone (404, 410)")


class MetadataPatch(_Strict):
    metadata: dict[str, Any] = Field(default_factory=dict,
                                     description="Keys to set, with their values")
    unset: list[str] = Field(default_factory=list, description="Keys to remove")


class NotebookRequest(_Strict):
    name: str = Field(..., min_length=1, max_length=200)
    description: str = Field("", max_length=10_000)


class AskBody(_Strict):
    """A question for ``kb.ask``: the passages are found as a search with these filters."""

    question: str = Field(..., min_length=1, max_length=4000, description="The question")
    llm: str | None = Field(None, max_length=200, description=(
        "A chat model the server allows (its SURREALDOCS_LLM, or one of serve --llm-allow),"
        " by name; default: the server's own. Its provider, address and key stay the"
        " server's"))
    passages: int | None = Field(None, ge=1, le=50, description="Passages given to the model")
    mode: Mode = "hybrid"
    source: str | None = None
    mime_type: list[str] | None = None
    notebook: str | None = None
    topics: list[str] | None = None
    created_after: dt.datetime | None = None
    created_before: dt.datetime | None = None
    where: dict[str, Any] | list[str] | None = Field(
        None, description="Only documents whose metadata passes this filter (as in a search)")
    rerank: bool | None = Field(
        None, description="The server's reranker picks the passages (as in a search)")
    stream: bool = Field(False, description="Answer as server-sent events: passages, then"
                                            " the text as it comes, then the answer")
    conversation: str | None = Field(
        None, validation_alias=AliasChoices("conversation", "session"),  # session: until 2026-12
        description="Ask within this conversation (its notebook scopes the search; the turn is"
                    " kept)")


class ConversationRequest(_Strict):
    title: str | None = Field(None, max_length=200)
    notebook: str | None = Field(None, description="The notebook its questions search")
