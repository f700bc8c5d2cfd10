"""The command line's way to a store that ``surrealdocs serve`` holds (an embedded store is
locked by the process that opened it): with ``--server URL`` (``SURREALDOCS_SERVER``) and
a key (``--key``, ``SURREALDOCS_KEY``) the commands that read, ask and delete go to the
server's HTTP API and print what they print on a store of their own: reading, searching,
asking, deleting, ingesting (files uploaded), the notebook commands and ``add``. Commands
that need the store itself (sync, keys, reembed…) say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import IO, Any
from urllib.parse import quote

import httpx

from ..core.answer import Answer, Citation
from ..core.archive import ArchiveReport
from ..core.notebook_service import Note, Notebook, Source
from ..core.search_request import SearchRequest
from ..errors import ConfigurationError, NotFoundError, StoreError
from ..parts.digest import sha256
from ..parts.discover import discover_paths
from ..parts.metadata import AllOf, AnyOf, Condition
from ..parts.results import (
    Document,
    FileResult,
    Forgotten,
    Hit,
    IngestReport,
    PlannedChange,
    Stats,
    SyncReport,
    jsonable,
)

TIMEOUT = httpx.Timeout(60.0, connect=10.0)  # a search, a page of documents, a delete
UPLOAD_TIMEOUT = httpx.Timeout(600.0, connect=10.0)  # a batch of files on its way
JOB_POLL_SECONDS = 0.25
BATCH_FILES = 100  # files per upload request (the server's default limit is 1,000)
BATCH_BYTES = 200 * 1000**2  # bytes per upload request (its default limit is 500 MB)
ANSWER_TIMEOUT = httpx.Timeout(300.0, connect=10.0)  # between two pieces of a streamed answer
EXPORT_TIMEOUT = httpx.Timeout(3600.0, connect=10.0)  # the server writes the archive first
HELLO_TIMEOUT = httpx.Timeout(10.0)  # /v1/info answers at once, or this is not a server


class ServedKnowledgeBase:
    """The calls of :class:`~surrealdocs.core.kb.KnowledgeBase` the command line makes, over
    a running server's ``/v1`` API."""

    def __init__(self, url: str, key: str | None) -> None:
        url = url.strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"--server takes the server's http(s):// URL, got {url!r}")
        self.url = url
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.AsyncClient(base_url=url, headers=headers, timeout=TIMEOUT)
        self.notebooks = ServedNotebooks(self)
        self.metadata = ServedMetadata(self)

    async def __aenter__(self) -> ServedKnowledgeBase:
        try:
            await self._check()
        except BaseException:
            await self._client.aclose()
            raise
        return self

    async def _check(self) -> None:
        """That the URL is a surrealdocs server's (its ``/v1/info`` says so)."""
        not_ours = (f"{self.url} is not a surrealdocs server (its /v1/info does not answer"
                    " as `surrealdocs serve` does): check --server / SURREALDOCS_SERVER")
        try:
            response = await self._client.get("/v1/info", timeout=HELLO_TIMEOUT)
        except httpx.TimeoutException as exc:
            raise StoreError(f"the server at {self.url} did not answer within"
                             f" {HELLO_TIMEOUT.read:g} s ({type(exc).__name__})") from exc
        except httpx.HTTPError as exc:
            raise StoreError(f"cannot reach the server at {self.url}: {exc}") from exc
        try:
            info = response.json()
        except ValueError:
            raise ConfigurationError(not_ours) from None
        if response.status_code != 200 or not isinstance(info, dict) \
                or info.get("service") != "surrealdocs":
            raise ConfigurationError(not_ours)

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    def __getattr__(self, name: str) -> Any:
        raise ConfigurationError(
            f"this command needs the store itself ({name}), not its server at {self.url}:"
            " stop `surrealdocs serve` to run it, or use the server's HTTP API")

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise StoreError(f"cannot reach the server at {self.url}: {exc}") from exc
        if response.status_code >= 400:
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:300] or response.reason_phrase
            if response.status_code == 404:
                raise NotFoundError(message)
            if response.status_code in (400, 401, 403, 409, 413, 422):
                hint = " (give a key: --key or SURREALDOCS_KEY)" \
                    if response.status_code == 401 else ""
                raise ConfigurationError(f"{message}{hint}")
            raise StoreError(f"the server at {self.url} answered {response.status_code}:"
                             f" {message}")
        if response.status_code == 204:
            return None
        try:
            return response.json()
        except ValueError:
            raise StoreError(f"the server at {self.url} answered {method} {path} with"
                             " something that is not JSON") from None

    async def search(self, request: SearchRequest) -> list[Hit]:
        body = {k: v for k, v in jsonable(_wired(request).__dict__).items() if v is not None}
        out = await self._call("POST", "/v1/search", json=body)
        return [_hit(h) for h in out["hits"]]

    async def documents(self, *, offset: int = 0, limit: int = 50,
                        **filters: Any) -> list[Document]:
        out = await self._call("GET", "/v1/documents", params=_params(
            {"offset": offset, "limit": limit, **filters}))
        return [_document(d) for d in out["documents"]]

    async def failures(self, *, offset: int = 0, limit: int = 50,
                       source: str | None = None) -> tuple[list[FileResult], int]:
        out = await self._call("GET", "/v1/failures", params=_params(
            {"offset": offset, "limit": limit, "source": source}))
        return [FileResult(**r) for r in out["failures"]], int(out["total"])

    async def failure(self, ref: str) -> FileResult | None:
        literal = "".join(f"[{c}]" if c in "*?[]" else c for c in ref)  # the glob of ref
        found, _ = await self.failures(limit=1, source=literal)
        return found[0] if found and found[0].source == ref else None

    async def count_documents(self, **filters: Any) -> int:
        out = await self._call("GET", "/v1/documents", params=_params({"limit": 1, **filters}))
        return int(out["total"])

    async def document(self, ref: Any, *, text: bool = True) -> Document:
        out = await self._call("GET", f"/v1/documents/{httpx.URL(str(ref))}",
                               params={"text": str(text).lower()})
        return _document(out)

    async def stats(self) -> Stats:
        return Stats(**(await self._call("GET", "/v1/stats")))

    async def forget(self, refs: Sequence[str] = (), *, glob: str | None = None,
                     where: Any = None, dry_run: bool = False) -> list[Forgotten]:
        if glob or where:
            raise ConfigurationError("--glob and --where need the store itself, not its"
                                     " server")
        out = []
        for ref in refs:
            try:
                if dry_run:
                    await self.document(ref, text=False)
                else:
                    await self._call("DELETE", f"/v1/documents/{ref}")
                out.append(Forgotten(ref, "would delete" if dry_run else "deleted"))
            except NotFoundError:
                out.append(Forgotten(ref, "not found"))
        return out

    async def ingest(self, paths: Sequence[str | Path], *, glob: str = "**/*",
                     force: bool = False, retry_failed: bool = False,
                     on_result: Callable[[FileResult], Any] | None = None,
                     on_discovered: Callable[[int], None] | None = None,
                     notebook: str | None = None,
                     topics: Sequence[str] = (),
                     metadata: dict[str, Any] | None = None) -> IngestReport:
        """Upload the files of ``paths`` (directories expanded with ``glob``) to the
        server, each as ``upload://`` + its path relative to this directory (a file that
        was uploaded before under that name is replaced, the same bytes are unchanged),
        in batches that the server ingests as jobs; report as a local ingest does. A file
        that failed before is tried again (an upload is asked for anew)."""
        started = time.monotonic()
        found = discover_paths(paths, glob)
        results = [FileResult(p.source, p.status, reason=p.reason) for p in found.problems]
        if on_discovered:
            on_discovered(len(found.files) + len(results))
        for result in results:
            if on_result:
                on_result(result)
        filed: dict[str, Any] = {"notebook": notebook} if notebook else {}
        if topics:
            filed["topic"] = list(topics)
        if metadata:
            filed["metadata"] = json.dumps(jsonable(metadata))
        for batch in _batches(found.files):
            results += await self._upload(batch, force, on_result, filed)
        return IngestReport(results=results, seconds=time.monotonic() - started)

    async def _upload(self, files: list[Path], force: bool,
                      on_result: Callable[[FileResult], Any] | None,
                      filed: dict[str, Any] | None = None) -> list[FileResult]:
        with contextlib.ExitStack() as stack:
            parts = [("files", (upload_name(path), stack.enter_context(open(path, "rb"))))
                     for path in files]
            answer = await self._call("POST", "/v1/uploads", files=parts, timeout=UPLOAD_TIMEOUT,
                                      data={"replace": "true", "force": str(force).lower(),
                                            **(filed or {})})
        return await self._followed(str(answer["job"]["id"]), on_result)

    async def ingest_urls(self, urls: Sequence[str] = (), *, sitemaps: Sequence[str] = (),
                          follow: int = 0, max_pages: int = 1000, force: bool = False,
                          metadata: dict[str, Any] | None = None,
                          on_result: Callable[[FileResult], Any] | None = None,
                          on_discovered: Callable[[int], None] | None = None,
                          **_: Any) -> IngestReport:
        """Have the server fetch and ingest web pages (``POST /v1/urls``, a job); it fetches
        public addresses only unless it was started with --allow-private-urls, and obeys
        robots.txt."""
        started = time.monotonic()
        answer = await self._call("POST", "/v1/urls", json={
            "urls": list(urls), "sitemaps": list(sitemaps), "follow": follow,
            "max_pages": min(max_pages, 10_000), "force": force,
            "metadata": jsonable(metadata) if metadata else None})
        results = await self._followed(str(answer["job"]["id"]), on_result)
        return IngestReport(results=results, seconds=time.monotonic() - started)

    async def refresh(self, *, older_than: float | None = None, prune: bool = False,
                      on_result: Callable[[FileResult], Any] | None = None,
                      on_discovered: Callable[[int], None] | None = None,
                      **_: Any) -> IngestReport:
        """Have the server re-check its web page sources (``POST /v1/refresh``, a job)."""
        started = time.monotonic()
        answer = await self._call("POST", "/v1/refresh",
                                  json={"older_than": older_than, "prune": prune})
        results = await self._followed(str(answer["job"]["id"]), on_result)
        return IngestReport(results=results, seconds=time.monotonic() - started)

    async def sync(self, paths: Sequence[str | Path] | str | Path, *, glob: str = "**/*",
                   dry_run: bool = False, notebook: Notebook | None = None,
                   metadata: dict[str, Any] | None = None,
                   on_result: Callable[[FileResult], Any] | None = None,
                   on_discovered: Callable[[int], None] | None = None) -> SyncReport:
        """Make the server's ``upload://`` sources under the folders mirror them: a file whose
        bytes the server holds already is left alone (compared by SHA-256, nothing sent), a
        new or changed one uploaded (replacing its earlier version), a source whose file is
        gone forgotten (``DELETE /v1/sources``; its document stays while another source holds
        it). ``glob`` picks the files, and the sources the sync answers for."""
        started = time.monotonic()
        roots = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
        if not roots:
            raise ConfigurationError("give at least one folder to sync")
        found = discover_paths(roots, glob)
        local = {UPLOAD + upload_name(p): p for p in found.files}
        prefixes = [UPLOAD + upload_name(r) for r in roots]
        held = await self._call("GET", "/v1/sources", params=[("under", p) for p in prefixes])
        records = {r["path"]: r for r in held["sources"]
                   if _answers_for(r["path"], prefixes, glob)}
        if on_discovered:
            on_discovered(len(local) + len(found.problems))
        plan: list[PlannedChange] = []
        unchanged: list[FileResult] = []
        uploads: list[Path] = []
        for name, path in local.items():
            record = records.get(name)
            digest = await asyncio.to_thread(_digest, path)
            if record is not None and record.get("file_hash") == digest \
                    and record.get("status") in ("ingested", "duplicate"):
                plan.append(PlannedChange("unchanged", name))
                unchanged.append(FileResult(name, "unchanged", last_status=record["status"]))
            else:
                plan.append(PlannedChange("add" if record is None else "update", name))
                uploads.append(path)
        gone = sorted(set(records) - set(local))
        plan += [PlannedChange("delete", name) for name in gone]
        report = SyncReport(roots=[str(r) for r in roots], dry_run=dry_run, plan=plan)
        report.results = [FileResult(p.source, p.status, reason=p.reason)
                          for p in found.problems]
        if dry_run:
            report.seconds = time.monotonic() - started
            return report
        for result in [*report.results, *unchanged]:
            if on_result:
                on_result(result)
        report.results += unchanged
        filed: dict[str, Any] = {"notebook": str(notebook.id)} if notebook is not None else {}
        if metadata:
            filed["metadata"] = json.dumps(jsonable(metadata))
        for batch in _batches(uploads):
            report.results += await self._upload(batch, False, on_result, filed)
        for name in gone:
            try:
                await self._call("DELETE", f"/v1/sources/{quote(name, safe=':/')}")
                result = FileResult(name, "deleted")
            except NotFoundError:
                continue  # forgotten meanwhile
            report.results.append(result)
            if on_result:
                on_result(result)
        report.seconds = time.monotonic() - started
        return report

    async def _followed(self, job: str,
                        on_result: Callable[[FileResult], Any] | None) -> list[FileResult]:
        """The results of an ingest job, reported as they come, once it is done."""
        seen = 0
        while True:
            state = await self._call("GET", f"/v1/jobs/{quote(job, safe=':')}")
            done = [FileResult(**r) for r in (state.get("result") or {}).get("results") or []]
            for result in done[seen:]:
                if on_result:
                    on_result(result)
            seen = max(seen, len(done))
            if state.get("status") == "done":
                return done
            if state.get("status") == "failed":
                raise StoreError(f"the server's ingest job {job} failed:"
                                 f" {state.get('error') or 'no reason given'}")
            await asyncio.sleep(JOB_POLL_SECONDS)

    async def ask(self, request: SearchRequest, *, llm: str | None = None,
                  on_event: Callable[[str, Any], Any] | None = None) -> Answer:
        body = {k: v for k, v in jsonable(_wired(request).__dict__).items() if v is not None
                and k in ("mode", "source", "mime_type", "notebook", "topics",
                          "created_after", "created_before", "where")}
        body.update(question=request.query or "", passages=request.limit, stream=True,
                    llm=llm)
        try:
            async with self._client.stream("POST", "/v1/ask", json=body,
                                           timeout=ANSWER_TIMEOUT) as response:
                if response.status_code >= 400:
                    await response.aread()
                    await self._raise(response)
                kind = None
                async for line in response.aiter_lines():
                    if line.startswith("event: "):
                        kind = line[7:]
                    elif line.startswith("data: ") and kind:
                        try:
                            value = json.loads(line[6:])
                        except ValueError:
                            raise StoreError(f"the server at {self.url} sent an answer that is"
                                             " not JSON") from None
                        if kind == "answer":
                            return _answer(value)
                        if kind == "error":
                            raise StoreError(value.get("message", "the answer failed"))
                        if on_event and kind == "text":
                            on_event(kind, value)
        except httpx.HTTPError as exc:
            raise StoreError(f"cannot reach the server at {self.url}: {exc}") from exc
        raise StoreError(f"the server at {self.url} ended the answer early")

    async def export(self, out: IO[bytes], *, with_keys: bool = False,
                     progress: Callable[[str, int, int], None] | None = None) -> ArchiveReport:
        """The server's ``GET /v1/export``, written into ``out`` as it arrives."""
        try:
            async with self._client.stream("GET", "/v1/export",
                                           params={"with_keys": str(with_keys).lower()},
                                           timeout=EXPORT_TIMEOUT) as response:
                if response.status_code >= 400:
                    await response.aread()
                    await self._raise(response)
                received = 0
                async for block in response.aiter_bytes():
                    await asyncio.to_thread(out.write, block)
                    received += len(block)
                    if progress is not None:
                        progress("bytes", received, 0)
                header = response.headers.get("surrealdocs-export", "{}")
        except httpx.HTTPError as exc:
            raise StoreError(f"cannot reach the server at {self.url}: {exc}") from exc
        try:
            told = json.loads(header)
            return ArchiveReport(rows=dict(told.get("rows") or {}),
                                 vectors=int(told.get("vectors") or 0),
                                 seconds=float(told.get("seconds") or 0.0))
        except (ValueError, TypeError, AttributeError):
            raise StoreError(f"the server at {self.url} sent an export without its "
                             "report") from None

    async def _raise(self, response: httpx.Response) -> None:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:300]
        if response.status_code in (400, 401, 403, 422):
            raise ConfigurationError(message)
        raise StoreError(f"the server at {self.url} answered {response.status_code}: {message}")


def upload_name(path: Path) -> str:
    """The name a file is uploaded under: its path relative to the working directory
    (``papers/q3.pdf``), or its absolute path without the leading ``/`` when it lies
    elsewhere."""
    relative = os.path.relpath(path)
    if relative.startswith(".."):
        return str(path.resolve()).lstrip("/")
    return relative


UPLOAD = "upload://"


def _digest(path: Path) -> str:
    return sha256(path.read_bytes())


def _answers_for(source: str, prefixes: Sequence[str], glob: str) -> bool:
    """Whether a sync of the folders ``prefixes`` with ``glob`` answers for ``source``."""
    for prefix in prefixes:
        if source == prefix:
            return True
        if source.startswith(prefix.rstrip("/") + "/"):
            relative = PurePosixPath(source[len(prefix.rstrip("/")) + 1:])
            return glob in ("**/*", "**", "*") or relative.match(glob) or (
                glob.startswith("**/") and relative.match(glob[3:]))
    return False


def _batches(files: list[Path]) -> list[list[Path]]:
    """``files`` in upload requests of at most :data:`BATCH_FILES` files and about
    :data:`BATCH_BYTES` bytes (a larger file goes alone)."""
    out: list[list[Path]] = []
    size = 0
    for path in files:
        try:
            bytes_ = path.stat().st_size
        except OSError:
            bytes_ = 0
        if not out or len(out[-1]) >= BATCH_FILES or (out[-1] and size + bytes_ > BATCH_BYTES):
            out.append([])
            size = 0
        out[-1].append(path)
        size += bytes_
    return out


def _wired(request: SearchRequest) -> SearchRequest:
    """A request whose metadata filter is as the API takes it (text or a JSON object)."""
    where = request.where
    if isinstance(where, (Condition, AllOf, AnyOf)):
        request = request.replace(where=where.to_json())
    if isinstance(request.rerank, str):  # a server reranks with its own reranker, or not
        request = request.replace(rerank=request.rerank.strip().lower() not in ("off", "none",
                                                                                 ""))
    return request


def _params(values: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for name, value in jsonable(values).items():
        if value is None:
            continue
        for one in value if isinstance(value, list) else [value]:
            out.append((name, str(one)))
    return out


def _document(data: dict[str, Any]) -> Document:
    known = Document.__dataclass_fields__
    return Document(**{k: v for k, v in data.items() if k in known})


def _hit(data: dict[str, Any]) -> Hit:
    """A hit as the server answered it (fields a newer server adds, such as its snippet,
    are not the library's)."""
    known = Hit.__dataclass_fields__
    return Hit(**{k: v for k, v in data.items() if k in known})


def _answer(data: dict[str, Any]) -> Answer:
    return Answer(question=data["question"], text=data["answer"],
                  citations=[Citation(**c) for c in data["citations"]],
                  passages=[_hit(h) for h in data["passages"]], grounded=data["grounded"],
                  removed_citations=data["removed_citations"],
                  invented=[int(n) for n in data.get("invented") or []], model=data["model"])


class ServedMetadata:
    """``kb.metadata`` over a server: ``PATCH /v1/documents/{ref}``."""

    def __init__(self, served: ServedKnowledgeBase) -> None:
        self._served = served

    async def set(self, ref: Any, metadata: dict[str, Any] | None = None, *,
                  unset: Sequence[str] = ()) -> dict[str, Any]:
        out = await self._served._call(
            "PATCH", f"/v1/documents/{httpx.URL(str(ref))}",
            json={"metadata": jsonable(metadata or {}), "unset": list(unset)})
        return dict(out["metadata"])

    async def file_documents(self, documents: IngestReport,
                             metadata: dict[str, Any] | None) -> int:
        """Set ``metadata`` on the documents an upload gave."""
        if not metadata:
            return 0
        ids = list(dict.fromkeys(r.document_id for r in documents.results if r.document_id))
        for doc in ids:
            await self.set(doc, metadata)
        return len(ids)


class ServedNotebooks:
    """The calls of ``kb.notebooks`` the command line makes (create, list, show, delete,
    ``add``), over a server's ``/v1/notebooks`` and uploads."""

    def __init__(self, served: ServedKnowledgeBase) -> None:
        self._served = served

    async def create_notebook(self, name: str, description: str = "") -> Notebook:
        return _notebook(await self._served._call(
            "POST", "/v1/notebooks", json={"name": name, "description": description}))

    async def list_notebooks(self) -> list[Notebook]:
        data = await self._served._call("GET", "/v1/notebooks")
        return [_notebook(nb) for nb in data["notebooks"]]

    async def get_notebook(self, ref: Any) -> Notebook:
        return _notebook(await self._shown(ref))

    async def for_writing(self, ref: Any) -> Notebook:
        """The notebook ``ref``, made when there is none of that name."""
        try:
            return await self.get_notebook(ref)
        except NotFoundError:
            return await self.create_notebook(str(ref))

    async def sources(self, notebook: Notebook | Any) -> list[Source]:
        data = await self._shown(_ref(notebook), limit=1000)
        return [Source(title=d.get("title"), topics=list(d.get("topics") or []), id=d["id"],
                       created=d.get("ingested_at"), updated=d.get("updated_at"),
                       chunk_count=int(d.get("chunk_count") or 0), source=d.get("source"),
                       mime_type=d.get("mime_type")) for d in data["sources"]]

    async def notes(self, notebook: Notebook | Any) -> list[Note]:
        data = await self._shown(_ref(notebook))
        return [Note(title=n.get("title") or "", content=n.get("content") or "",
                     embedded=bool(n.get("embedded")), id=n.get("id"),
                     created=n.get("created"), updated=n.get("updated"))
                for n in data.get("notes") or []]

    async def delete_notebook(self, notebook: Notebook | Any, *,
                              delete_exclusive_sources: bool = False) -> None:
        await self._served._call(
            "DELETE", f"/v1/notebooks/{_path(_ref(notebook))}",
            params={"delete_sources": str(delete_exclusive_sources).lower()})

    async def add_paths(self, notebook: Notebook | Any, paths: Sequence[str | Path], *,
                        topics: Sequence[str] = (), glob: str = "**/*") -> IngestReport:
        """Upload files into the notebook, as ``ingest`` uploads them."""
        return await self._served.ingest(list(paths), glob=glob, notebook=_ref(notebook),
                                         topics=topics)

    async def _shown(self, ref: Any, limit: int = 1) -> dict[str, Any]:
        data: dict[str, Any] = await self._served._call(
            "GET", f"/v1/notebooks/{_path(str(ref))}", params={"limit": limit})
        return data


def _ref(notebook: Notebook | Any) -> str:
    return str(notebook.id) if isinstance(notebook, Notebook) else str(notebook)


def _path(ref: str) -> str:
    return quote(ref, safe=":")


def _notebook(data: dict[str, Any]) -> Notebook:
    count = data.get("source_count")
    return Notebook(name=data["name"], description=data.get("description") or "",
                    archived=bool(data.get("archived")), id=data["id"],
                    created=data.get("created"), updated=data.get("updated"),
                    source_count=int(count) if count is not None else None)
