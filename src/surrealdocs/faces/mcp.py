"""The knowledge base as an MCP server (Model Context Protocol), for assistants and agents.

A thin face over :class:`surrealdocs.KnowledgeBase`, built with the official ``mcp`` SDK
(``pip install 'surrealdocs[mcp]'``). :func:`build_mcp_server` makes the server once;
``surrealdocs mcp`` serves it over stdio (:func:`serve_stdio`), and :func:`mcp_http_app`
gives the same server as an ASGI app over streamable HTTP, to run alone or mount in another
app.

Tools: ``search``, ``read``, ``list_notebooks``, ``list_sources``, ``stats``; with writes
allowed also ``add_text`` and ``ingest_path``. Each answers with one JSON object (as text, and
as structured content) of at most ``max_chars`` characters: a longer answer is cut (fewer
hits or documents, a shorter passage) and says so with ``"truncated": true`` and
``"limit_chars"``, and where to go on. A surrealdocs error (an unknown notebook, an empty
query, a bad option, writes disabled) is a tool error with its message, never a traceback.
"""

import contextlib
import datetime as dt
import json
import sys
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field
from starlette.applications import Starlette

from ..config import Settings
from ..core.kb import KnowledgeBase
from ..core.notebook_service import Notebook
from ..core.search import search_notice
from ..core.search_request import SearchRequest
from ..errors import ConfigurationError, NotFoundError, SurrealDocsError
from ..parts.results import Document, Hit, IngestReport, Passage, id_text, jsonable
from ..version import __version__

DEFAULT_MAX_CHARS = 8_000
MIN_MAX_CHARS = 1_000
WRITE_TOOLS = ("add_text", "ingest_path", "add_url")
_SNIPPET_CHARS = 300

INSTRUCTIONS = """\
A searchable knowledge base of documents (surrealdocs). Find passages with `search`, then
read more of a document around a hit with `read` (its `chunk_id`), or a page range, or from
a character offset. Cite a hit by its `source`, `title` and `page`. `list_sources` and
`list_notebooks` show what the knowledge base holds; `stats` sums it up. Every result is at
most a fixed number of characters: a cut result says `"truncated": true` and how to go on.
"""

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                             open_world_hint=False)


class _Server(MCPServer[Any]):
    """An MCP server that tells a caller of a write tool that writes are disabled (instead of
    calling the tool unknown)."""

    def __init__(self, *args: Any, allow_writes: bool, writes_hint: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.allow_writes = allow_writes
        self.writes_hint = writes_hint

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> Any:
        if name in WRITE_TOOLS and not self.allow_writes:
            raise ToolError(f"{name}: writes are disabled here: {self.writes_hint}")
        return await super().call_tool(name, arguments, context)


@contextlib.contextmanager
def _tool_errors() -> Iterator[None]:
    """A surrealdocs error becomes a tool error carrying its message."""
    try:
        yield
    except SurrealDocsError as exc:
        raise ToolError(str(exc)) from exc


def _dumps(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, default=str)


def _answer(payload: dict[str, Any]) -> CallToolResult:
    payload = jsonable(payload)
    return CallToolResult(content=[TextContent(type="text", text=_dumps(payload))],
                          structured_content=payload)


def _fit_list(payload: dict[str, Any], key: str, limit: int, omitted_key: str,
              shrink: Callable[[dict[str, Any], int], None] | None = None) -> dict[str, Any]:
    """Drop items of ``payload[key]`` from the end until the JSON fits in ``limit``
    characters, stating it; ``shrink`` may then cut the last item's text further."""
    items: list[Any] = payload[key]
    if len(_dumps(payload)) <= limit:
        return payload
    payload.update(truncated=True, limit_chars=limit)
    payload[omitted_key] = 0
    while len(items) > 1 and len(_dumps(payload)) > limit:
        items.pop()
        payload[omitted_key] += 1
    excess = len(_dumps(payload)) - limit
    if excess > 0 and items and shrink is not None:
        shrink(items[-1], excess)
    return payload


def _shrink_snippet(hit: dict[str, Any], excess: int) -> None:
    snippet = hit.get("snippet") or ""
    hit["snippet"] = snippet[:max(len(snippet) - excess - 1, 0)] + "…"


def _snippet(text: str, chars: int) -> str:
    flat = " ".join(text.split())
    if len(flat) <= chars:
        return flat
    return flat[:chars - 1].rstrip() + "…" if chars > 0 else ""


def _hit(rank: int, hit: Hit, snippet_chars: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "rank": rank, "score": round(hit.score, 6), "source": hit.source, "title": hit.title,
        "page": hit.page, "last_page": hit.last_page, "char_start": hit.char_start,
        "char_end": hit.char_end, "chunk_id": hit.chunk_id, "document_id": hit.document_id,
        "mime_type": hit.mime_type}
    if hit.context:
        out["section"] = hit.context
    if hit.metadata:
        out["metadata"] = jsonable(hit.metadata)
    if hit.rerank_score is not None:
        out.update(rerank_score=hit.rerank_score, first_rank=hit.first_rank)
    if hit.text_rank is not None or hit.vector_rank is not None:
        out.update(text_rank=hit.text_rank, vector_rank=hit.vector_rank)
    out["snippet"] = _snippet(hit.content, snippet_chars)
    return out


def _document(doc: Document, names: dict[str, str]) -> dict[str, Any]:
    return {"document_id": doc.id, "source": doc.source, "title": doc.title,
            "mime_type": doc.mime_type, "pages": doc.page_count, "chunks": doc.chunk_count,
            "characters": doc.characters, "ingested_at": doc.ingested_at,
            "notebooks": [names.get(n, n) for n in doc.notebooks], "topics": doc.topics}


def _notebook(nb: Notebook) -> dict[str, Any]:
    return {"name": nb.name, "id": nb.id, "description": nb.description,
            "sources": nb.source_count or 0, "archived": nb.archived}


def _passage(p: Passage) -> dict[str, Any]:
    return {"document_id": p.document_id, "source": p.source, "title": p.title,
            "first_page": p.first_page, "last_page": p.last_page, "char_start": p.char_start,
            "char_end": p.char_end, "text": p.text}


def _text_that_fits(payload: dict[str, Any], limit: int) -> int:
    """How many characters of ``payload["text"]`` fit with the rest in ``limit`` characters
    of JSON (escapes such as ``\\n`` count twice)."""
    text: str = payload["text"]
    keep = len(text)
    while keep > 0:
        size = len(_dumps({**payload, "text": text[:keep]}))
        if size <= limit:
            break
        keep = max(keep - (size - limit), 0)
    return keep


def _report(report: IngestReport) -> dict[str, Any]:
    results = sorted(report.results, key=lambda r: r.status not in ("failed", "empty"))
    return {"counts": report.counts, "chunks_written": report.chunks_written,
            "seconds": round(report.seconds, 3),
            "results": [{"source": r.source, "status": r.status, "document_id": r.document_id,
                         "chunks": r.chunks, **({"reason": r.reason} if r.reason else {})}
                        for r in results]}


def _check_max_chars(max_chars: int) -> int:
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or \
            max_chars < MIN_MAX_CHARS:
        raise ConfigurationError(
            f"max_chars must be an integer >= {MIN_MAX_CHARS}, got {max_chars!r}")
    return max_chars


STDIO_WRITES_HINT = "start the server with `surrealdocs mcp --allow-writes` to allow them"
HTTP_WRITES_HINT = ("start the server with `surrealdocs serve --mcp-allow-writes`, and use a"
                    " key that may write")
# the server offers them, to keys that may write: this one may not
KEY_WRITES_HINT = ("this key is read-only: use a key that may write (the server offers"
                   " writes to those)")


def build_mcp_server(kb: KnowledgeBase, *, allow_writes: bool = False,
                     max_chars: int = DEFAULT_MAX_CHARS,
                     writes_hint: str = STDIO_WRITES_HINT,
                     allow_private_urls: bool = False) -> MCPServer[Any]:
    """The MCP server of a knowledge base (open, on the event loop the server will run on).

    Args:
        kb: the knowledge base the tools search and read (and, with writes, ingest into).
        allow_writes: also offer ``add_text``, ``ingest_path`` and ``add_url``. Off,
            calling them is a tool error saying that writes are disabled.
        allow_private_urls: let ``add_url`` fetch loopback, private and link-local
            addresses (off: an agent's URL must not reach the machine's own network).
        max_chars: the most characters of one tool result (its JSON text); at least 1000.
    """
    budget = _check_max_chars(max_chars)
    server = _Server("surrealdocs", title="surrealdocs knowledge base", version=__version__,
                     instructions=INSTRUCTIONS, log_level="WARNING",
                     allow_writes=bool(allow_writes), writes_hint=writes_hint)
    for add in (_add_search, _add_read, _add_list_notebooks, _add_list_sources, _add_stats):
        add(server, kb, budget)
    if kb.settings.llm:  # a cited answer needs the server's chat model
        _add_ask(server, kb, budget)
    if allow_writes:
        for add in (_add_add_text, _add_ingest_path):
            add(server, kb, budget)
        _add_add_url(server, kb, budget, allow_private_urls)
    return server



_SEARCH_TOOL = """\
Search the knowledge base for passages (chunks of documents) relevant to a query.

Modes: `hybrid` (default; keywords and meaning, fused), `text` (BM25 keywords: names, codes,
exact terms) or `vector` (meaning: paraphrases, questions). Filters narrow the search before
ranking: `notebook` (a notebook's name or id), `source` (a glob over source paths or names,
e.g. `*.pdf`, `reports/*`), `mime_type`, `topics`, and when the source was ingested
(`created_after`, `created_before`, ISO 8601; without a time zone, UTC), and `where`, a
filter on the documents' own metadata: `{{"team": "a"}}`, `{{"year": {{"$gte": 2020}}}}`,
`{{"tags": {{"$in": ["x", "y"]}}}}`, `{{"$or": [...]}}` (operators `$eq $ne $lt $lte $gt $gte
$in $nin $exists`; a hit's `metadata` shows its document's). Ranking knobs, rarely needed:
`candidates`, `fusion`, `rrf_k`, `text_weight`, `vector_weight`.

Returns `hits`, best first, each with `source`, `title`, `page`/`last_page` (for paged
formats), `char_start`/`char_end` (where the passage lies in its document's text),
`chunk_id` (give it to `read` for the passage with its context), `document_id`, `score`
(the probability that the passage is relevant to the query, 0-1, the same for a passage
whatever the filters; for hybrid search each leg's rank too) and a `snippet` (the start of
the passage, at most `snippet_chars` characters). Passages that are probably not relevant
are left out: no hits and a `notice` mean the documents hold nothing on the query (say so
rather than guess); `cutoff: false` lists the weaker matches anyway. The whole result is at
most {budget} characters: when hits had to be left out it says `"truncated": true` and how
many (`omitted_hits`)."""


_READ_TOOL = """\
Read a stretch of a document's text. Three ways, give one:

- `chunk_id` (from a `search` hit): that passage with `before` and `after` neighbouring
  passages (1 each by default), as one continuous stretch of text;
- `document` (a `document_id`, or a source path or name) with `first_page` (and optionally
  `last_page`): the text of those pages (documents with pages: PDF, slides, ...);
- `document` alone, with `offset`: the document's text from that character on.

Returns `text` with `document_id`, `source`, `title`, `first_page`/`last_page` and
`char_start`/`char_end` (where the text lies in the document's text). The whole result is at
most {budget} characters: a longer text is cut and the result says `"truncated": true` and
`next_offset`; call `read` with `document` = its `document_id` and `offset` = `next_offset`
to go on."""


_LIST_NOTEBOOKS_TOOL = """\
List the notebooks: named collections of sources that `search` can be limited to (its
`notebook` argument). Each with `name`, `id`, `description`, number of `sources` and whether
it is `archived`. At most {budget} characters (`"truncated": true` and `omitted_notebooks`
when some were left out)."""


_LIST_SOURCES_TOOL = """\
List the documents (sources) in the knowledge base, oldest first, a page at a time;
optionally only those in a `notebook`. Each with `document_id`, `source`, `title`,
`mime_type`, number of `pages`, `chunks` and `characters`, `ingested_at`, its `notebooks`
and `topics`. `total` is how many there are; `next_offset` (when present) is the `offset`
of the next page. At most {budget} characters (`"truncated": true` when the page was cut
short; `next_offset` then goes on from there)."""


_STATS_TOOL = """\
What the knowledge base holds: numbers of documents, chunks and notebooks, sources by
status and documents by MIME type, the embedding model and its dimension, and the store."""


_ASK_TOOL = """\
Answer a question from the knowledge base with the server's chat model, citing the
passages it used as [n]. Returns `answer`, `grounded` (false when it cites no passage),
`citations` (number, `source`, `title`, `page`, `chunk_id` for `read`, character span)
and how many invented citations were removed. Prefer `search` and `read` when you can
answer yourself; `ask` is for a cited answer in one call. At most {budget} characters."""


_ADD_TEXT_TOOL = """\
Add a text to the knowledge base under a source name (e.g. `note://meeting-2024-05-02`),
optionally into a notebook: it is chunked, embedded and searchable at once. The same text
under the same name again is `unchanged`; a new text under a name replaces the old one.
Returns the outcome (`status`: ingested, updated, unchanged or duplicate) with the
`document_id`."""


_INGEST_PATH_TOOL = """\
Ingest files and folders from the disk of the machine the server runs on (paths absolute,
or relative to the server's working directory), optionally into a notebook. Folders are
expanded with `glob`. Text is extracted (PDF, Office, HTML, Markdown, e-mail, images by
OCR, ...), chunked and embedded; files whose bytes did not change are skipped. Returns the
`counts` by outcome and a result per file (failures first, with their reasons); at most
{budget} characters (`"truncated": true` and `omitted_results` when some were left out)."""


_WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                          open_world_hint=False)


def _add_search(server: _Server, kb: KnowledgeBase, budget: int) -> None:
    @server.tool(annotations=_READ_ONLY, description=_SEARCH_TOOL.format(budget=budget))
    async def search(
        query: Annotated[str, Field(description="What to look for: words, a question or a "
                                                "phrase. Must not be empty.")],
        mode: Annotated[Literal["hybrid", "vector", "text"], Field(
            description="hybrid (default), vector (meaning) or text (BM25 keywords)")
        ] = "hybrid",
        limit: Annotated[int, Field(ge=1, le=50, description=(
            "Most hits to return, at most 50 here (an agent's context is small; the"
            " HTTP API takes 1,000)"))] = 10,
        notebook: Annotated[str | None, Field(
            description="Only sources in this notebook (its name or id)")] = None,
        source: Annotated[str | None, Field(
            description="Only sources matching this glob (`*.pdf`, `*/reports/*`)")] = None,
        mime_type: Annotated[list[str] | None, Field(
            description="Only documents of these MIME types (`application/pdf`, "
                        "`text/markdown`, ...)")] = None,
        topics: Annotated[list[str] | None, Field(
            description="Only sources tagged with at least one of these topics")] = None,
        created_after: Annotated[dt.datetime | None, Field(
            description="Only sources ingested at or after this time (ISO 8601)")] = None,
        created_before: Annotated[dt.datetime | None, Field(
            description="Only sources ingested before this time (ISO 8601)")] = None,
        per_document: Annotated[bool, Field(
            description="One hit per document (its best passage)")] = False,
        min_score: Annotated[float | None, Field(
            ge=0, le=1, description="Drop hits scoring below this: a score is the probability"
                                    " that the hit is relevant (0-1)")] = None,
        cutoff: Annotated[bool, Field(
            description="Leave out hits that are probably not relevant (default); false"
                        " shows weaker matches too")] = True,
        candidates: Annotated[int | None, Field(
            ge=1, le=1000, description="Hybrid: hits of each leg fused (default 100)")] = None,
        fusion: Annotated[Literal["zscore", "minmax", "rrf"] | None, Field(
            description="Hybrid: how the legs are fused (default zscore)")] = None,
        rrf_k: Annotated[int | None, Field(
            ge=1, description="Hybrid with rrf: its k (default 60)")] = None,
        text_weight: Annotated[float | None, Field(
            ge=0, description="Hybrid: weight of the keyword (BM25) leg")] = None,
        vector_weight: Annotated[float | None, Field(
            ge=0, description="Hybrid: weight of the meaning (vector) leg")] = None,
        where: Annotated[dict[str, Any] | None, Field(
            description="Only documents whose metadata passes this filter (a JSON filter"
                        " object, see above)")] = None,
        rerank: Annotated[bool | None, Field(
            description="The server's reranker reorders the first passages (default: on when"
                        " it has one; a failure keeps the first order, with a notice)")
        ] = None,
        snippet_chars: Annotated[int, Field(
            ge=0, le=2000, description="Most characters of each hit's snippet")
        ] = _SNIPPET_CHARS,
    ) -> CallToolResult:
        return await _searched(kb, SearchRequest(
            query, mode=mode, limit=limit, notebook=notebook, source=source,
            mime_type=mime_type or None, topics=topics or None, created_after=created_after,
            created_before=created_before, per_document=per_document, min_score=min_score,
            candidates=candidates, fusion=fusion, rrf_k=rrf_k, text_weight=text_weight,
            vector_weight=vector_weight, cutoff=cutoff, where=where, rerank=rerank),
            snippet_chars, budget)


async def _searched(kb: KnowledgeBase, request: SearchRequest, snippet_chars: int,
                    budget: int) -> CallToolResult:
    """The search tool's answer: the hits (snippets shortened to fit the budget) and a
    notice when none was found."""
    with _tool_errors():
        hits = await kb.search(request)
    payload: dict[str, Any] = {
        "query": request.query, "mode": request.mode, "count": len(hits),
        "hits": [_hit(n, hit, snippet_chars) for n, hit in enumerate(hits, 1)]}
    notice = search_notice(request.query, hits, cutoff=request.cutoff,
                           show_weaker="cutoff: false")
    if notice:
        payload["notice"] = notice
    payload = _fit_list(payload, "hits", budget, "omitted_hits", _shrink_snippet)
    payload["count"] = len(payload["hits"])
    return _answer(payload)


def _add_read(server: _Server, kb: KnowledgeBase, budget: int) -> None:
    @server.tool(annotations=_READ_ONLY, description=_READ_TOOL.format(budget=budget))
    async def read(
        chunk_id: Annotated[str | None, Field(
            description="A hit's chunk_id: read that passage with its neighbours")] = None,
        before: Annotated[int, Field(ge=0, le=20, description="With chunk_id: passages "
                                                              "before it")] = 1,
        after: Annotated[int, Field(ge=0, le=20, description="With chunk_id: passages "
                                                             "after it")] = 1,
        document: Annotated[str | None, Field(
            description="A document_id, or a document's source (path or name)")] = None,
        first_page: Annotated[int | None, Field(
            ge=1, description="With document: the first page to read (from 1)")] = None,
        last_page: Annotated[int | None, Field(
            ge=1, description="With document and first_page: the last page (inclusive; "
                              "default first_page)")] = None,
        offset: Annotated[int, Field(
            ge=0, description="With document and no pages: the character to start at")] = 0,
    ) -> CallToolResult:
        if (chunk_id is None) == (document is None):
            raise ToolError("give either chunk_id (from a search hit) or document")
        if chunk_id is not None and (first_page is not None or last_page is not None
                                     or offset):
            raise ToolError("first_page, last_page and offset go with document, not chunk_id")
        if last_page is not None and first_page is None:
            raise ToolError("last_page needs first_page")
        if first_page is not None and offset:
            raise ToolError("give either pages or an offset, not both")
        with _tool_errors():
            if chunk_id is not None:
                passage = await kb.passage(chunk_id, before=before, after=after)
                known_end = None
            elif first_page is not None:
                passage = await kb.pages(document, first_page, last_page)
                known_end = None
            else:
                # Enough text for the limit, and the document's length to tell if more is left.
                passage = await kb.excerpt(document, offset, offset + budget)
                known_end = (await kb.document(document, text=False)).characters
            payload = _passage(passage)
            end = passage.char_end
            if len(_dumps(payload)) > budget or (known_end is not None and end < known_end):
                probe = {**payload, "truncated": True, "limit_chars": budget,
                         "next_offset": passage.char_end}
                keep = _text_that_fits(probe, budget)
                if keep < len(passage.text):
                    passage = await kb.excerpt(passage.document_id, passage.char_start,
                                               passage.char_start + keep)
                payload = {**_passage(passage), "truncated": True, "limit_chars": budget,
                           "next_offset": passage.char_end}
        return _answer(payload)


def _add_list_notebooks(server: _Server, kb: KnowledgeBase, budget: int) -> None:
    @server.tool(annotations=_READ_ONLY, description=_LIST_NOTEBOOKS_TOOL.format(budget=budget))
    async def list_notebooks() -> CallToolResult:
        with _tool_errors():
            notebooks = await kb.notebooks.list_notebooks()
        payload = {"count": len(notebooks), "notebooks": [_notebook(nb) for nb in notebooks]}
        return _answer(_fit_list(payload, "notebooks", budget, "omitted_notebooks"))


def _add_list_sources(server: _Server, kb: KnowledgeBase, budget: int) -> None:
    @server.tool(annotations=_READ_ONLY, description=_LIST_SOURCES_TOOL.format(budget=budget))
    async def list_sources(
        notebook: Annotated[str | None, Field(
            description="Only sources in this notebook (its name or id)")] = None,
        offset: Annotated[int, Field(ge=0, description="How many documents to skip")] = 0,
        limit: Annotated[int, Field(ge=1, le=200, description="Most documents to list")
                         ] = 20,
    ) -> CallToolResult:
        with _tool_errors():
            documents = await kb.documents(offset=offset, limit=limit, notebook=notebook)
            total = await kb.count_documents(notebook=notebook)
            names = {id_text(nb.id): nb.name for nb in await kb.notebooks.list_notebooks()} \
                if any(d.notebooks for d in documents) else {}
        payload: dict[str, Any] = {
            "total": total, "offset": offset, "count": len(documents),
            "documents": [_document(d, names) for d in documents]}
        payload = _fit_list(payload, "documents", budget, "omitted_documents")
        payload["count"] = len(payload["documents"])
        if offset + payload["count"] < total:
            payload["next_offset"] = offset + payload["count"]
        return _answer(payload)


def _add_stats(server: _Server, kb: KnowledgeBase, budget: int) -> None:
    @server.tool(annotations=_READ_ONLY, description=_STATS_TOOL)
    async def stats() -> CallToolResult:
        with _tool_errors():
            result = await kb.stats()
        return _answer(result.to_dict())


def _add_ask(server: _Server, kb: KnowledgeBase, budget: int) -> None:
    @server.tool(annotations=_READ_ONLY, description=_ASK_TOOL.format(budget=budget))
    async def ask(
        question: Annotated[str, Field(min_length=1, description="The question")],
        notebook: Annotated[str | None, Field(
            description="Only passages of this notebook (its name or id)")] = None,
        passages: Annotated[int | None, Field(
            ge=1, le=20, description="Passages given to the model (default 8)")] = None,
        where: Annotated[dict[str, Any] | None, Field(
            description="Only passages of documents whose metadata passes this filter (as"
                        " search's `where`)")] = None,
        rerank: Annotated[bool | None, Field(
            description="The server's reranker picks the passages (as in search)")] = None,
    ) -> CallToolResult:
        with _tool_errors():
            result = await kb.ask(SearchRequest(
                question, notebook=notebook, where=where, rerank=rerank,
                limit=passages or kb.settings.ask_passages))
        payload = result.to_dict()
        payload.pop("passages")  # the citations say where; `read` gives the text
        return _answer(payload)


def _add_add_text(server: _Server, kb: KnowledgeBase, budget: int) -> None:
    @server.tool(annotations=_WRITES, description=_ADD_TEXT_TOOL)
    async def add_text(
        source: Annotated[str, Field(min_length=1, description=(
            "The source name the text is stored and cited under (e.g. note://x)"))],
        text: Annotated[str, Field(min_length=1, description="The text to add")],
        notebook: Annotated[str | None, Field(
            description="Put the text in this notebook (name or id)")] = None,
        create_notebook: Annotated[bool, Field(
            description="Create the notebook when there is none of that name")] = False,
        mime_type: Annotated[Literal["text/plain", "text/markdown"], Field(
            description="How the text is written")] = "text/plain",
        metadata: Annotated[dict[str, Any] | None, Field(
            description="Metadata of your own for the document (keys and values: text,"
                        " numbers, true/false, ISO dates, or lists of them)")] = None,
    ) -> CallToolResult:
        with _tool_errors():
            nb = await _notebook_for_writing(kb, notebook, create_notebook)
            report = await kb.ingest_texts({source: text}, mime_type=mime_type,
                                           metadata=metadata)
            (result,) = report.results
            if result.status in ("failed", "empty"):
                raise ToolError(f"{source}: {result.status}: {result.reason or 'no text'}")
            if nb is not None and result.document_id:
                await kb.notebooks.file_documents([result.document_id], nb)
        payload = {"source": result.source, "status": result.status,
                   "document_id": result.document_id, "chunks": result.chunks,
                   "notebook": nb.name if nb else None}
        return _answer(payload)


def _add_ingest_path(server: _Server, kb: KnowledgeBase, budget: int) -> None:
    @server.tool(annotations=_WRITES, description=_INGEST_PATH_TOOL.format(budget=budget))
    async def ingest_path(
        paths: Annotated[list[str], Field(min_length=1, description=(
            "Files and folders on the server's disk"))],
        glob: Annotated[str, Field(description="Pattern for files inside folders")
                        ] = "**/*",
        notebook: Annotated[str | None, Field(
            description="Put the ingested sources in this notebook (name or id)")] = None,
        create_notebook: Annotated[bool, Field(
            description="Create the notebook when there is none of that name")] = False,
        force: Annotated[bool, Field(description="Re-extract unchanged files too")
                         ] = False,
    ) -> CallToolResult:
        with _tool_errors():
            nb = await _notebook_for_writing(kb, notebook, create_notebook)
            if nb is not None:
                report = await kb.notebooks.add_paths(nb, paths, glob=glob, force=force)
            else:
                report = await kb.ingest(paths, glob=glob, force=force)
        payload = {**_report(report), "notebook": nb.name if nb else None}
        return _answer(_fit_list(payload, "results", budget, "omitted_results"))


_ADD_URL_TOOL = """\
Fetch web pages and add them to the knowledge base: a page's main content (not its menus,
headers and footers) with its title, site, author and date as metadata; PDFs and other files
by URL too. `follow` also adds the pages it links to within the same site and folder (that
many links deep, at most `max_pages`). A page added before is asked whether it changed and
is skipped when it did not. Loopback and private addresses are refused unless the server
allows them. Returns the `counts` by outcome and a result per page (failures first, with
their reasons); at most {budget} characters."""


def _add_add_url(server: _Server, kb: KnowledgeBase, budget: int,
                 allow_private: bool) -> None:
    @server.tool(annotations=_FETCHES, description=_ADD_URL_TOOL.format(budget=budget))
    async def add_url(
        url: Annotated[str, Field(min_length=1, description="The page's http(s) URL")],
        follow: Annotated[int, Field(ge=0, le=3, description=(
            "Also add the pages it links to, this many links deep (same site and folder)"))
        ] = 0,
        max_pages: Annotated[int, Field(ge=1, le=50, description="The most pages to add")
                             ] = 20,
        notebook: Annotated[str | None, Field(
            description="Put the pages in this notebook (name or id)")] = None,
        create_notebook: Annotated[bool, Field(
            description="Create the notebook when there is none of that name")] = False,
        metadata: Annotated[dict[str, Any] | None, Field(
            description="Metadata of your own for the pages' documents")] = None,
    ) -> CallToolResult:
        with _tool_errors():
            nb = await _notebook_for_writing(kb, notebook, create_notebook)
            report = await kb.ingest_urls([url], follow=follow, max_pages=max_pages,
                                          allow_private=allow_private, metadata=metadata)
            if nb is not None:
                await kb.notebooks.file_documents(report, nb)
        payload = {**_report(report), "notebook": nb.name if nb else None}
        return _answer(_fit_list(payload, "results", budget, "omitted_results"))


_FETCHES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                           open_world_hint=True)


async def _notebook_for_writing(kb: KnowledgeBase, ref: str | None,
                                create: bool) -> Notebook | None:
    if ref is None:
        return None
    try:
        return await kb.notebooks.for_writing(ref, create=create)
    except NotFoundError:
        raise NotFoundError(f"no notebook {ref!r} (set create_notebook to create it)"
                            ) from None


def mcp_http_app(kb: KnowledgeBase, *, allow_writes: bool = False,
                 max_chars: int = DEFAULT_MAX_CHARS, path: str = "/mcp",
                 stateless: bool = False, json_response: bool = False,
                 transport_security: Any = None, host: str = "127.0.0.1",
                 writes_hint: str = HTTP_WRITES_HINT,
                 allow_private_urls: bool = False) -> Starlette:
    """The MCP server of ``kb`` over streamable HTTP, as an ASGI (Starlette) app.

    The app answers at ``path`` and its lifespan runs the MCP session manager: serve it as
    it is (``uvicorn.Server(uvicorn.Config(app, ...))`` on the loop ``kb`` was opened on),
    or mount it in another Starlette/FastAPI app and enter its lifespan from that app's
    (``async with mcp_app.router.lifespan_context(mcp_app): ...``), behind that app's
    authentication. ``host`` is where it is served: for a loopback host, requests whose
    ``Host``/``Origin`` is not loopback are refused (DNS rebinding protection); elsewhere
    give ``transport_security`` (``mcp.server.transport_security.TransportSecuritySettings``).
    ``stateless`` serves each request without a session; ``json_response`` answers with JSON
    instead of an event stream.
    """
    server = build_mcp_server(kb, allow_writes=allow_writes, max_chars=max_chars,
                              writes_hint=writes_hint, allow_private_urls=allow_private_urls)
    return server.streamable_http_app(
        streamable_http_path=path, stateless_http=stateless, json_response=json_response,
        transport_security=transport_security, host=host)


async def serve_stdio(settings: Settings, *, allow_writes: bool = False,
                      max_chars: int = DEFAULT_MAX_CHARS) -> None:
    """Open the knowledge base, serve it over stdin/stdout until the client hangs up, close
    it. Nothing but the protocol goes to stdout: anything printed while opening goes to
    stderr."""
    _check_max_chars(max_chars)
    with contextlib.redirect_stdout(sys.stderr):
        kb = await KnowledgeBase.open(settings=settings)
    try:
        server = build_mcp_server(kb, allow_writes=allow_writes, max_chars=max_chars)
        await server.run_stdio_async()
    finally:
        await kb.close()
