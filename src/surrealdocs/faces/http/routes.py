"""The ``/v1`` endpoints: each one checks who asks, makes one knowledge-base call (or a few,
for a page of results) and answers with the result's ``to_dict()``."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import StreamingResponse

from ...chat import allowed_model, chat_model
from ...core.job_runner import JOB_STATUSES, Job
from ...core.kb import KnowledgeBase
from ...core.reader import MAX_OFFSET
from ...core.search import search_notice
from ...core.search_request import MODES, SearchRequest
from ...errors import SurrealDocsError
from ...parts.results import Hit, id_text, jsonable
from ...parts.snippet import snippet, stems
from ...version import __version__
from .auth import Access, presented_token, reader, server_state, writer
from .error_responses import ApiError
from .models import (
    AskBody,
    ConversationRequest,
    MetadataPatch,
    NotebookRequest,
    RefreshRequest,
    SearchBody,
    TextsRequest,
    UrlsRequest,
)
from .state import ServerState
from .uploads import receive

router = APIRouter(prefix="/v1")
Reader = Annotated[Access, Depends(reader)]
Writer = Annotated[Access, Depends(writer)]
State = Annotated[ServerState, Depends(server_state)]
SSE_HEARTBEAT_SECONDS = 15.0
EXPORT_BLOCK = 1 << 20


def job_view(job: Job) -> dict[str, Any]:
    """A job as clients see it: what it works on, not where its files wait on disk."""
    out = job.to_dict()
    payload = out.get("payload")
    if isinstance(payload, dict):
        payload.pop("folder", None)
        files = payload.get("files")
        if isinstance(files, list):
            payload["files"] = [{"source": f.get("source")} for f in files
                                if isinstance(f, dict)]
    return out


# ----- service ------------------------------------------------------------------------
@router.get("/health", tags=["service"], summary="Liveness: the process answers")
async def health() -> dict[str, Any]:
    return {"status": "ok", "version": __version__}


@router.get("/ready", tags=["service"],
            summary="Readiness: false while the store opens (migrations) or a vector graph is"
                    " built",
            responses={503: {"description": "not ready"}})
async def ready(state: State, response: Response) -> dict[str, Any]:
    out = state.readiness()
    if not out["ready"]:
        response.status_code = 503
    return out


@router.get("/info", tags=["service"],
            summary="What this server is, and whether the key sent (if any) is accepted")
async def info(request: Request, state: State) -> dict[str, Any]:
    config = state.config
    out: dict[str, Any] = {
        "service": "surrealdocs", "version": __version__, "state": state.state,
        "limits": {"max_file_bytes": config.max_file_bytes,
                   "max_request_bytes": config.max_request_bytes,
                   "max_files": config.max_files},
        "modes": list(MODES), "auth_required": None, "authenticated": False,
        "key": None, "can_write": False}
    if state.kb is None:
        return out
    required = await state.keys_required()
    out["auth_required"] = required
    token = None
    with contextlib.suppress(ApiError):
        token = presented_token(request)
    key = await state.key_of(token) if (required and token) else None
    out["authenticated"] = (not required) or key is not None
    out["can_write"] = (not required) or (key is not None and not key.read_only)
    out["key"] = {"name": key.name, "read_only": key.read_only} if key else None
    if out["authenticated"]:
        out["model"] = state.kb.embedder.name if state.kb.embedder else None
        out["llm"] = state.kb.settings.llm or None  # the chat model of ask, if one is set
        out["llm_allowed"] = list(state.config.llm_allow) if out["llm"] else []
        out["rerank"] = state.kb.settings.rerank or None  # the second stage, if one is set
    return out


@router.get("/stats", tags=["service"], summary="What the store holds")
async def stats(who: Reader, state: State) -> dict[str, Any]:
    return (await state.require().stats()).to_dict()


@router.get("/export", tags=["service"], response_class=StreamingResponse,
            summary="The whole knowledge base as one archive (docs/archive.md)")
async def export(who: Writer, state: State, with_keys: bool = False) -> StreamingResponse:
    """Written to a temporary file first, then sent: a failure is an error answer, never a
    cut archive. The ``Surrealdocs-Export`` header holds what it carries (JSON)."""
    spool = tempfile.TemporaryFile()  # noqa: SIM115 (closed by the body, or below)
    try:
        report = await state.require().export(spool, with_keys=with_keys)
        spool.seek(0)
    except BaseException:
        spool.close()
        raise

    async def body() -> AsyncIterator[bytes]:
        try:
            while block := await asyncio.to_thread(spool.read, EXPORT_BLOCK):
                yield block
        finally:
            spool.close()

    return StreamingResponse(body(), media_type="application/x-tar", headers={
        "Content-Disposition": 'attachment; filename="surrealdocs.tar"',
        "Surrealdocs-Export": json.dumps(report.to_dict())})


# ----- ingest -------------------------------------------------------------------------
_UPLOAD_BODY = {
    "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
        "type": "object", "required": ["files"],
        "properties": {
            "files": {"type": "array", "items": {"type": "string", "format": "binary"},
                      "description": "Files (any part with a filename is a file)"},
            "notebook": {"type": "string", "description": "Put the documents in this notebook"},
            "topic": {"type": "array", "items": {"type": "string"}},
            "force": {"type": "boolean"},
            "replace": {"type": "boolean",
                        "description": "A file may replace the document of the same name"}}}}}}}


@router.post("/uploads", tags=["ingest"], status_code=202, openapi_extra=_UPLOAD_BODY,
             summary="Upload files; they are ingested by a background job",
             responses={413: {"description": "a file or the request is over the limit"},
                        415: {"description": "not multipart/form-data"}})
async def upload(request: Request, response: Response, who: Writer, state: State,
                 notebook: Annotated[str | None, Query()] = None,
                 topic: Annotated[list[str] | None, Query()] = None,
                 force: Annotated[bool, Query()] = False,
                 replace: Annotated[bool, Query()] = False) -> dict[str, Any]:
    """Files are streamed to the server's uploads folder and named ``upload://NAME``; the
    answer (202) carries the ingest job, whose progress is at ``/v1/jobs/{id}`` and
    ``/v1/jobs/{id}/events``. A file whose name an earlier upload holds with other bytes
    is stored as ``NAME (2).ext`` (``renamed_from`` says so), unless ``replace`` asks for
    it to become the new version of that document; the same bytes again are unchanged."""
    kb = state.require()
    if notebook is not None and notebook.startswith("notebook:"):
        await kb.notebooks.resolve(notebook)  # an unknown id fails before the bytes are sent
    config = state.config
    folder = kb.ingest_jobs.new_folder()
    try:
        received = await receive(request, folder, max_file_bytes=config.max_file_bytes,
                                 max_request_bytes=config.max_request_bytes,
                                 max_files=config.max_files)
        fields = received.fields
        notebook = _one(fields, "notebook", notebook)
        topics = [*(topic or []), *fields.get("topic", []), *fields.get("topics", [])]
        force = force or _flag(_one(fields, "force", None))
        if notebook is not None:  # a name no notebook has makes one, as in every face
            notebook = id_text((await kb.notebooks.for_writing(notebook)).id)
        replace = replace or _flag(_one(fields, "replace", None), "replace")
        metadata = _json_object(_one(fields, "metadata", None), "metadata")
        job, names = await kb.ingest_jobs.submit_named(
            [(f.source, f.sha256, f.path) for f in received.files], folder=folder,
            replace=replace, notebook=notebook, topics=topics, force=force,
            metadata=metadata)
        for f, name in zip(received.files, names):
            if name != f.source:
                f.renamed_from, f.source = f.source, name
    except BaseException:  # (not awaited: this may be a cancellation)
        _remove(folder)
        raise
    response.headers["Location"] = f"/v1/jobs/{quote(id_text(job.id), safe=':')}"
    return {"job": job_view(job), "files": [f.to_dict() for f in received.files]}


def _one(fields: dict[str, list[str]], name: str, default: str | None) -> str | None:
    values = fields.get(name) or []
    if len(values) > 1:
        raise ApiError(422, "invalid_parameter", f"form field {name!r} given twice")
    return values[0] if values else default


def _flag(value: str | None, name: str = "force") -> bool:
    if value is None:
        return False
    text = value.strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ApiError(422, "invalid_parameter", f"{name} must be true or false, got {value!r}")


def _json_object(value: str | None, name: str) -> dict[str, Any] | None:
    """A form field holding a JSON object."""
    if value is None or not value.strip():
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ApiError(422, "invalid_parameter", f"{name} must be a JSON object")
    return parsed


def _remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


@router.post("/texts", tags=["ingest"], summary="Ingest texts (now, not as a job)")
async def texts(body: TextsRequest, who: Writer, state: State) -> dict[str, Any]:
    kb = state.require()
    nb = None if body.notebook is None else (await kb.notebooks.for_writing(body.notebook)).id
    report = await kb.ingest_many_bytes(
        [(t.source, t.text.encode("utf-8"), t.mime_type) for t in body.texts],
        force=body.force, metadata=body.metadata)
    if nb is not None or body.topics:
        await kb.notebooks.file_documents(report, nb, body.topics)
    return report.to_dict()


@router.post("/urls", tags=["ingest"], status_code=202,
             summary="Fetch and ingest web pages (a job, like uploads)")
async def urls(body: UrlsRequest, who: Writer, state: State) -> dict[str, Any]:
    kb = state.require()
    notebook = None if body.notebook is None else \
        id_text((await kb.notebooks.for_writing(body.notebook)).id)
    job = await kb.ingest_jobs.submit_urls(
        body.urls, sitemaps=body.sitemaps, follow=body.follow, max_pages=body.max_pages,
        notebook=notebook, topics=body.topics, metadata=body.metadata, force=body.force,
        allow_private=state.config.allow_private_urls)
    return {"job": job_view(job)}


@router.post("/refresh", tags=["ingest"], status_code=202,
             summary="Re-check every web page source (a job): 304s unchanged, gone ones"
                     " reported (removed with prune)")
async def refresh(body: RefreshRequest, who: Writer, state: State) -> dict[str, Any]:
    job = await state.require().ingest_jobs.submit_refresh(
        older_than=body.older_than, prune=body.prune,
        allow_private=state.config.allow_private_urls)
    return {"job": job_view(job)}


# ----- search -------------------------------------------------------------------------
SNIPPET_CHARS = 340  # what a page shows of a hit


async def _search(kb: KnowledgeBase, q: SearchBody) -> dict[str, Any]:
    started = time.perf_counter()
    hits = await kb.search(SearchRequest(**q.model_dump()))
    answer = {"query": q.query, "mode": q.mode, "count": len(hits),
              "reranked": any(h.rerank_score is not None for h in hits),
              "took_ms": round((time.perf_counter() - started) * 1000, 2),
              "terms": stems(q.query or ""),
              "hits": [_with_snippet(h, q.query or "") for h in hits]}
    notice = search_notice(q.query, hits, cutoff=q.cutoff)
    if notice:
        answer["notice"] = notice
    return answer


def _with_snippet(hit: Hit, query: str) -> dict[str, Any]:
    """A hit with the window of its text to show and the query's words in it, marked
    (``snippet.marks``: [start, end] character spans of ``snippet.text``)."""
    shown = snippet(hit.content, query, SNIPPET_CHARS)
    return {**hit.to_dict(), "snippet": {"text": shown.text,
                                         "marks": [list(m) for m in shown.marks]}}


@router.get("/search", tags=["search"], summary="Search (options as query parameters)")
async def search_get(q: Annotated[SearchBody, Query()], who: Reader,
                     state: State) -> dict[str, Any]:
    return await _search(state.require(), q)


@router.post("/search", tags=["search"], summary="Search (options as a JSON body)")
async def search_post(q: SearchBody, who: Reader, state: State) -> dict[str, Any]:
    return await _search(state.require(), q)


@router.post("/ask", tags=["search"], summary="Answer a question from the documents, cited",
             responses={200: {"content": {"text/event-stream": {}},
                              "description": "With stream: events passages, text, answer"}})
async def ask(body: AskBody, request: Request, who: Reader, state: State) -> Any:
    kb = state.require()
    # the model is the operator's: a request picks among the allowed ones, never a provider
    body = body.model_copy(update={
        "llm": allowed_model(body.llm, kb.settings, state.config.llm_allow)})
    search = SearchRequest(
        body.question, mode=body.mode, limit=body.passages or kb.settings.ask_passages,
        source=body.source, mime_type=body.mime_type, notebook=body.notebook,
        topics=body.topics, created_after=body.created_after,
        created_before=body.created_before, where=body.where, rerank=body.rerank)
    if body.conversation is not None:  # the conversation's notebook scopes it; the turn is kept
        await writer(who)  # a read-only key cannot add a turn
        await kb.conversations.get(body.conversation)  # 404 before any work
    if not body.stream:
        return {**(await _asked(kb, search, body, None)).to_dict(),
                "terms": stems(body.question)}
    chat_model(body.llm, kb.settings)  # no model: a 422 before the stream starts
    return StreamingResponse(_ask_stream(kb, search, body, request),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _asked(kb: KnowledgeBase, search: SearchRequest, body: AskBody,
           on_event: Any) -> Any:
    """The coroutine of one answer: in a conversation when the body names one."""
    if body.conversation is not None:
        return kb.conversations.ask(body.conversation, body.question, llm=body.llm,
                                    on_event=on_event)
    return kb.ask(search, llm=body.llm, on_event=on_event)


async def _ask_stream(kb: KnowledgeBase, search: SearchRequest, body: AskBody,
                      request: Request) -> AsyncIterator[str]:
    """``terms`` (the question's words a page marks), ``passages``, then ``text`` pieces as
    the model writes, then ``answer`` (or ``error``); a client that leaves stops the
    model."""
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    yield _event("terms", stems(body.question))  # the words a page marks
    task = asyncio.get_running_loop().create_task(_asked(
        kb, search, body, lambda kind, value: events.put_nowait((kind, value))))
    try:
        while not (task.done() and events.empty()):
            try:
                kind, value = await asyncio.wait_for(events.get(), timeout=1.0)
            except asyncio.TimeoutError:
                if await request.is_disconnected():
                    return
                continue
            yield _event(kind, [h.to_dict() for h in value] if kind == "passages" else value)
        try:
            yield _event("answer", task.result().to_dict())
        except SurrealDocsError as exc:
            yield _event("error", {"code": "chat_model_error", "message": str(exc)})
    finally:
        task.cancel()


# "/sessions": the conversations' path until 2026-12, kept out of the API's description
@router.get("/conversations", tags=["ask"], summary="Conversations, the latest first")
@router.get("/sessions", include_in_schema=False)
async def conversations(request: Request, who: Reader, state: State,
                        notebook: str | None = None) -> dict[str, Any]:
    found = await state.require().conversations.list_conversations(notebook)
    key = "sessions" if request.url.path.endswith("/sessions") else "conversations"
    return {key: [s.to_dict() for s in found]}


@router.post("/conversations", tags=["ask"], summary="Start a conversation", status_code=201)
@router.post("/sessions", include_in_schema=False, status_code=201)
async def create_conversation(body: ConversationRequest, who: Writer,
                              state: State) -> dict[str, Any]:
    return (await state.require().conversations.create(body.title, body.notebook)).to_dict()


@router.get("/conversations/{ref}", tags=["ask"], summary="A conversation with its turns")
@router.get("/sessions/{ref}", include_in_schema=False)
async def conversation(ref: str, who: Reader, state: State) -> dict[str, Any]:
    return (await state.require().conversations.get(ref)).to_dict()


@router.delete("/conversations/{ref}", tags=["ask"], summary="Delete a conversation",
               status_code=204)
@router.delete("/sessions/{ref}", include_in_schema=False, status_code=204)
async def delete_conversation(ref: str, who: Writer, state: State) -> None:
    await state.require().conversations.delete(ref)


# ----- documents ----------------------------------------------------------------------
@router.get("/failures", tags=["documents"],
            summary="Sources whose last ingest failed, with the reason, a page at a time")
async def failures(who: Reader, state: State,
                   offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
                   limit: Annotated[int, Query(ge=1, le=1000)] = 50,
                   source: str | None = None) -> dict[str, Any]:
    found, total = await state.require().failures(offset=offset, limit=limit, source=source)
    return {"failures": [f.to_dict() for f in found], "offset": offset, "limit": limit,
            "total": total}


@router.get("/documents", tags=["documents"],
            summary="Stored documents, a page at a time, with the filters a search takes")
async def documents(who: Reader, state: State,
                    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
                    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
                    notebook: str | None = None,
                    source: Annotated[str | None, Query(
                        description="Only sources matching this glob")] = None,
                    mime_type: Annotated[list[str] | None, Query()] = None,
                    topics: Annotated[list[str] | None, Query()] = None,
                    created_after: dt.datetime | None = None,
                    created_before: dt.datetime | None = None,
                    where: Annotated[list[str] | None, Query(description=(
                        "Only documents whose metadata passes: --where texts, e.g."
                        " team=a (repeatable)"))] = None) -> dict[str, Any]:
    kb = state.require()
    filters: dict[str, Any] = {
        "notebook": notebook, "source": source, "mime_type": mime_type or None,
        "topics": topics or None, "created_after": created_after,
        "created_before": created_before, "where": where or None}
    docs = await kb.documents(offset=offset, limit=limit, **filters)
    return {"documents": [d.to_dict() for d in docs], "offset": offset, "limit": limit,
            "total": await kb.count_documents(**filters)}


@router.get("/sources", tags=["documents"],
            summary="What each source under these prefixes last held (hash, size, outcome)")
async def sources(who: Reader, state: State,
                  under: Annotated[list[str], Query(
                      description="Source prefixes: upload://notes holds"
                                  " upload://notes/a.md (repeatable)")]) -> dict[str, Any]:
    return {"sources": await state.require().sources_under(under)}


@router.delete("/sources/{source:path}", tags=["documents"],
               summary="Forget a source; its document goes when no other source holds it")
async def forget_source(source: str, who: Writer, state: State) -> dict[str, Any]:
    if not await state.require().delete(source):
        raise ApiError(404, "not_found", f"no source {source!r}")
    return {"forgotten": source}


@router.get("/documents/{ref:path}/pages", tags=["documents"],
            summary="The text of a range of pages of a document")
async def pages(ref: str, who: Reader, state: State, first: Annotated[int, Query(ge=1)],
                last: Annotated[int | None, Query(ge=1)] = None) -> dict[str, Any]:
    return (await state.require().pages(ref, first, last)).to_dict()


@router.get("/documents/{ref:path}", tags=["documents"],
            summary="A document (by id or source) with its text and chunk spans")
async def document(ref: str, who: Reader, state: State, text: bool = True) -> dict[str, Any]:
    return (await state.require().document(ref, text=text)).to_dict()


@router.patch("/documents/{ref:path}", tags=["documents"],
              summary="Set or remove keys of a document's metadata (nothing re-embedded)")
async def patch_document(ref: str, body: MetadataPatch, who: Writer,
                         state: State) -> dict[str, Any]:
    kb = state.require()
    doc = await kb.document(ref, text=False)
    metadata = await kb.metadata.set(doc.id, body.metadata, unset=body.unset)
    return {"id": doc.id, "metadata": jsonable(metadata)}


@router.delete("/documents/{ref:path}", tags=["documents"],
               summary="Delete a document, its chunks and its notebook edges")
async def delete_document(ref: str, who: Writer, state: State) -> dict[str, Any]:
    kb = state.require()
    doc = await kb.document(ref, text=False)
    await kb.delete_document(doc.id)
    return {"deleted": doc.id, "sources": doc.sources}


@router.get("/chunks/{chunk_id}/passage", tags=["documents"],
            summary="A chunk (a hit's chunk_id) with its neighbours, as one stretch of text")
async def passage(chunk_id: str, who: Reader, state: State,
                  before: Annotated[int, Query(ge=0, le=50)] = 1,
                  after: Annotated[int, Query(ge=0, le=50)] = 1) -> dict[str, Any]:
    return (await state.require().passage(chunk_id, before=before, after=after)).to_dict()


# ----- notebooks ----------------------------------------------------------------------
@router.get("/notebooks", tags=["notebooks"], summary="Notebooks with their number of sources")
async def notebooks(who: Reader, state: State) -> dict[str, Any]:
    nbs = await state.require().notebooks.list_notebooks()
    return {"notebooks": [nb.to_dict() for nb in nbs]}


@router.post("/notebooks", tags=["notebooks"], status_code=201, summary="Create a notebook",
             responses={409: {"description": "a notebook of that name exists"}})
async def create_notebook(body: NotebookRequest, who: Writer, state: State,
                          response: Response) -> dict[str, Any]:
    nb = await state.require().notebooks.create_notebook(body.name, body.description)
    response.headers["Location"] = f"/v1/notebooks/{quote(id_text(nb.id), safe=':')}"
    return nb.to_dict()


# (before the {ref:path} routes, which would take a name with /sources/ in it)
@router.put("/notebooks/{ref}/sources/{doc:path}", tags=["notebooks"],
            summary="Put a document (by id or source) in a notebook")
async def add_source(ref: str, doc: str, who: Writer, state: State) -> dict[str, Any]:
    return await _membership(state.require(), ref, doc, member=True)


@router.delete("/notebooks/{ref}/sources/{doc:path}", tags=["notebooks"],
               summary="Take a document out of a notebook (the document stays)")
async def remove_source(ref: str, doc: str, who: Writer, state: State) -> dict[str, Any]:
    return await _membership(state.require(), ref, doc, member=False)


async def _membership(kb: KnowledgeBase, ref: str, doc: str, *, member: bool
                      ) -> dict[str, Any]:
    nb = await kb.notebooks.get_notebook(ref)
    document = await kb.document(doc, text=False)
    await (kb.notebooks.link if member else kb.notebooks.unlink)(document.id, nb)
    return {"notebook": id_text(nb.id), "document": document.id, "member": member}


@router.get("/notebooks/{ref:path}", tags=["notebooks"],
            summary="A notebook (by id or name), a page of its sources, and its notes")
async def notebook(ref: str, who: Reader, state: State,
                   offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
                   limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> dict[str, Any]:
    kb = state.require()
    nb = await kb.notebooks.get_notebook(ref)
    sources = await kb.documents(notebook=nb.id, offset=offset, limit=limit)
    notes = await kb.notebooks.notes(nb)
    return {**nb.to_dict(), "source_count": await kb.count_documents(notebook=nb.id),
            "sources": [s.to_dict() for s in sources], "offset": offset, "limit": limit,
            "notes": [n.to_dict() for n in notes]}


@router.delete("/notebooks/{ref:path}", tags=["notebooks"],
               summary="Delete a notebook (and, on request, the sources only it holds)")
async def delete_notebook(ref: str, who: Writer, state: State,
                          delete_sources: bool = False) -> dict[str, Any]:
    kb = state.require()
    nb = await kb.notebooks.get_notebook(ref)
    await kb.notebooks.delete_notebook(nb, delete_exclusive_sources=delete_sources)
    return {"deleted": id_text(nb.id), "name": nb.name}


# ----- jobs ---------------------------------------------------------------------------
@router.get("/jobs", tags=["jobs"], summary="Background jobs, newest first")
async def jobs(who: Reader, state: State, status: str | None = None,
               kind: str | None = None,
               limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> dict[str, Any]:
    if status is not None and status not in JOB_STATUSES:
        raise ApiError(422, "invalid_parameter",
                       f"status must be one of {', '.join(JOB_STATUSES)}, got {status!r}")
    rows = await state.require().jobs.list(status=status, kind=kind)
    return {"jobs": [job_view(j) for j in reversed(rows[-limit:])]}


@router.get("/jobs/{job_id}", tags=["jobs"], summary="A job: status, progress, result")
async def job(job_id: str, who: Reader, state: State) -> dict[str, Any]:
    return job_view(await state.require().jobs.get(job_id))


@router.get("/jobs/{job_id}/events", tags=["jobs"],
            summary="A job's progress as Server-Sent Events, until it is done or failed",
            response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}},
                             "description": "`event: job` with the job as JSON at each "
                                            "change; `event: end` when it finished"}})
async def job_events(job_id: str, request: Request, who: Reader,
                     state: State) -> StreamingResponse:
    kb = state.require()
    first = await kb.jobs.get(job_id)  # 404 before the stream starts
    return StreamingResponse(_job_stream(kb, state, request, first),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _event(name: str, data: Any) -> str:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


async def _job_stream(kb: KnowledgeBase, state: ServerState, request: Request,
                      first: Job) -> AsyncIterator[str]:
    queue = kb.jobs.subscribe()
    try:
        current, last, quiet_since = first, None, time.monotonic()
        # the job may have moved between the first read and the subscription
        current = await kb.jobs.get(first.id)
        while True:
            view = job_view(current)
            if view != last:
                yield _event("job", view)
                last, quiet_since = view, time.monotonic()
            if current.finished:
                yield _event("end", {"id": view["id"], "status": view["status"]})
                return
            try:
                changed = await asyncio.wait_for(queue.get(), timeout=1.0)
                if changed.id == first.id:
                    current = changed
                continue
            except asyncio.TimeoutError:
                pass
            if state.closing.is_set() or await request.is_disconnected():
                return
            current = await kb.jobs.get(first.id)  # run by another process, perhaps
            if time.monotonic() - quiet_since > SSE_HEARTBEAT_SECONDS:
                quiet_since = time.monotonic()
                yield ": keep-alive\n\n"
    finally:
        kb.jobs.unsubscribe(queue)

