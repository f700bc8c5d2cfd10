"""Ingest as a background job (``kb.ingest_jobs``): files waiting on disk, ingested by the
knowledge base's job runner (:mod:`surrealdocs.core.job_runner`, kind ``ingest``).

The server's uploads use it: the files are streamed into a folder of their own under the
uploads directory (:func:`uploads_dir`), the job is queued with their source names, and the
request returns. Any face can submit the same job (files already on disk are ingested where
they are and left alone).

- The job is a row of the ``job`` table: it survives a restart (a job that was running when
  its process died is queued again when the store is reopened), and so do its files, which
  stay on disk until the job is done or failed; then their folder is removed.
- Progress is reported per file: ``job.progress`` is the fraction of files done and
  ``job.result`` holds ``{"files": N, "done": k, "results": [FileResult, ...], "doing":
  {source: step}}`` (the files in flight and their step: reading, extracting, embedding N
  chunks, writing; ``""``: building the vector graph); the
  finished job's result is the ingest report (``IngestReport.to_dict()``) plus the notebook
  and topics the documents were filed under.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
import shutil
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import ConfigurationError
from ..parts.metadata import user_metadata
from ..parts.results import FileResult, IngestReport
from ..store.folders import check_uploads_dir, uploads_dir
from ..store.storage import Storage
from ..web.urls import normalise
from .ingest import Ingestor
from .job_runner import Job, JobService, Report
from .metadata import file_metadata
from .notebook_service import NotebookService, check_topics
from .web_sources import WebSources

log = logging.getLogger("surrealdocs.uploads")

INGEST = "ingest"
INGEST_URLS = "ingest_urls"  # web pages: fetched by the job (core/web_sources.py)
REFRESH = "refresh"  # every web page source re-checked
# how long an upload folder no queued job refers to is kept on a shared store (another
# process may be about to queue its job); on an embedded store nobody else can
ORPHAN_SECONDS = 3600
# An upload folder is one that this module made: a name of this shape *and* this marker file
# inside. Nothing else under the uploads directory is ever removed (it may be a user's folder).
FOLDER_NAME = re.compile(r"^\d{9,12}-[0-9a-f]{16}\Z")
MARKER = ".surrealdocs-upload"


def is_upload_folder(folder: Path) -> bool:
    """Whether ``folder`` is one that :meth:`IngestJobs.new_folder` made (name and marker;
    never a link)."""
    return (FOLDER_NAME.match(folder.name) is not None and not folder.is_symlink()
            and folder.is_dir() and (folder / MARKER).is_file())

REPORT_EVERY = 0.2  # seconds between two progress writes of a running job


class IngestJobs:
    """Queues ``ingest`` jobs and runs them (registered on ``kb.jobs``)."""

    def __init__(self, storage: Storage, settings: Settings, jobs: JobService,
                 ingestor: Ingestor, notebooks: NotebookService, web: WebSources) -> None:
        self.storage = storage
        self.settings = settings
        self.jobs = jobs
        self.ingestor = ingestor
        self.notebooks = notebooks
        self.web = web
        self.root = uploads_dir(settings)
        # a name is chosen and its job queued as one step: two uploads of the same name at
        # once must not both find it free
        self._naming = asyncio.Lock()
        jobs.register(INGEST, self._run)
        jobs.register(INGEST_URLS, self._run_urls)
        jobs.register(REFRESH, self._run_refresh)

    def new_folder(self) -> Path:
        """A fresh folder under the uploads directory for the files of one job, marked as
        the server's own (:func:`is_upload_folder`)."""
        check_uploads_dir(self.settings)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        folder = self.root / f"{int(time.time())}-{secrets.token_hex(8)}"
        folder.mkdir(mode=0o700)
        (folder / MARKER).write_bytes(b"")
        return folder

    async def submit(self, files: Sequence[tuple[str, str | Path]], *,
                     folder: Path | None = None, notebook: Any = None,
                     topics: Sequence[str] = (), force: bool = False,
                     retry_failed: bool = True, start: bool = True,
                     metadata: Mapping[str, Any] | None = None) -> Job:
        """Queue the ingest of ``files``, given as ``(source, path)``.

        With ``folder`` (from :meth:`new_folder`), the files are in it and it is removed once
        the job is done or failed; without, the files are ingested where they are. The
        ``notebook`` (name or id), ``topics`` and ``metadata`` are checked now and applied
        to the documents when they are stored. ``retry_failed``: a file with the same bytes as one
        that failed before is tried again (someone uploaded it again).
        """
        if not files:
            raise ConfigurationError("an ingest job needs at least one file")
        sources = [source for source, _ in files]
        if len(set(sources)) != len(sources):
            raise ConfigurationError("two files of one ingest job have the same source name")
        for source in sources:
            if not isinstance(source, str) or not source.strip():
                raise ConfigurationError("every file needs a source name")
        if folder is not None:
            folder = self._own_folder(folder.name)
        entries = []
        for source, path in files:
            p = Path(path)
            if folder is not None:
                if p.parent.resolve() != folder:
                    raise ConfigurationError(f"{p} is not in the job's folder {folder}")
                entries.append({"source": source, "file": p.name})
            else:
                entries.append({"source": source, "path": str(p.expanduser().resolve())})
        topic_list = check_topics(topics)
        nb = None if notebook is None else str(await self.notebooks.resolve(notebook))
        payload: dict[str, Any] = {"files": entries, "folder": folder.name if folder else None,
                                   "notebook": nb, "topics": topic_list, "force": bool(force),
                                   "retry_failed": bool(retry_failed),
                                   "metadata": user_metadata(metadata) or None}
        return await self.jobs.submit(INGEST, payload=payload, start=start)

    async def submit_named(self, files: Sequence[tuple[str, str, Path]], *, folder: Path,
                           replace: bool = False, notebook: Any = None,
                           topics: Sequence[str] = (), force: bool = False,
                           metadata: Mapping[str, Any] | None = None
                           ) -> tuple[Job, list[str]]:
        """Queue uploaded files, given as ``(wanted name, SHA-256, path)``, each under the
        name :meth:`free_sources` gives it; the names are chosen and the job queued as one
        step, whatever the concurrency. Returns the job and the names, in order."""
        async with self._naming:
            names = await self.free_sources([(name, digest) for name, digest, _ in files],
                                            replace=replace)
            job = await self.submit([(name, path) for name, (_, _, path) in zip(names, files)],
                                    folder=folder, notebook=notebook, topics=topics,
                                    force=force, metadata=metadata)
        return job, names

    async def free_sources(self, files: Sequence[tuple[str, str]], *,
                           replace: bool = False) -> list[str]:
        """The source name each new file is stored under, given as ``(wanted name, SHA-256
        of its bytes)``: the wanted name when nothing holds it yet, when what holds it has the
        same bytes (the same file again: unchanged), or with ``replace``; otherwise the first
        free ``NAME (2).ext``, ``NAME (3).ext``... so that a different file that happens to
        have the same name never replaces another document. Names held by queued or running
        ingest jobs count as taken."""
        wanted = [name for name, _ in files]
        records = await self.storage.files.of(wanted)
        queued = {str(f.get("source")) for status in ("queued", "running")
                  for j in await self.jobs.list(status=status, kind=INGEST)
                  for f in (j.payload or {}).get("files") or [] if isinstance(f, dict)}
        out: list[str] = []
        for name, digest in files:
            record = records.get(name)
            held = record is not None or name in queued or name in out
            same = record is not None and record.get("file_hash") == digest
            if replace or not held or (same and name not in out):
                out.append(name)
                continue
            out.append(await self._free_variant(name, queued | set(out)))
        return out

    async def _free_variant(self, name: str, taken: set[str]) -> str:
        stem, dot, ext = name.rpartition(".")
        if not dot or "/" in ext:
            stem, dot, ext = name, "", ""
        for first in range(2, 10_002, 50):
            candidates = [f"{stem} ({n}){dot}{ext}" for n in range(first, first + 50)]
            stored = await self.storage.files.of(candidates)
            for candidate in candidates:
                if candidate not in stored and candidate not in taken:
                    return candidate
        raise ConfigurationError(f"too many files are named {name!r}")

    async def sweep(self) -> int:
        """Remove the upload folders that no queued or running ingest job refers to (an
        upload that was cut off, a job that was deleted). Returns how many. Only folders
        that :meth:`new_folder` made are candidates: anything else is left alone."""
        check_uploads_dir(self.settings)
        if not self.root.is_dir():
            return 0
        waiting = {str((j.payload or {}).get("folder"))
                   for status in ("queued", "running")
                   for j in await self.jobs.list(status=status, kind=INGEST)}
        exclusive = self.storage.store.owned and self.storage.store.embedded
        oldest = time.time() - (0 if exclusive else ORPHAN_SECONDS)
        removed = 0
        for folder in self.root.iterdir():
            if is_upload_folder(folder) and folder.name not in waiting and \
                    folder.stat().st_mtime <= oldest:
                await asyncio.to_thread(shutil.rmtree, folder, True)
                log.info("removed the upload folder %s: no job waits for its files", folder)
                removed += 1
        return removed

    # ----- the job ---------------------------------------------------------------------
    def _own_folder(self, name: Any) -> Path:
        """A folder of this uploads directory, by name (never anything outside it)."""
        if not isinstance(name, str) or not name or name in (".", "..") or "/" in name \
                or "\\" in name:
            raise ConfigurationError(f"not an upload folder: {name!r}")
        return (self.root / name).resolve()

    def _files(self, payload: dict[str, Any], folder: Path | None) -> list[tuple[str, Path]]:
        files = []
        for entry in payload.get("files") or []:
            if folder is not None:
                name = str(entry.get("file", ""))
                if not name or "/" in name or "\\" in name or name in (".", ".."):
                    raise ConfigurationError(f"not a file of the job's folder: {name!r}")
                files.append((str(entry["source"]), folder / name))
            else:
                files.append((str(entry["source"]), Path(str(entry["path"]))))
        return files

    async def _run(self, job: Job, report: Report) -> dict[str, Any]:
        payload = job.payload or {}
        folder = self._own_folder(payload["folder"]) if payload.get("folder") else None
        try:
            result = await self._ingest(payload, folder, report)
        except asyncio.CancelledError:  # the process stops: the job runs again at next open
            raise
        except BaseException:
            await asyncio.to_thread(self._remove, folder)
            raise
        await asyncio.to_thread(self._remove, folder)
        return result

    async def _ingest(self, payload: dict[str, Any], folder: Path | None,
                      report: Report) -> dict[str, Any]:
        files = self._files(payload, folder)
        notebook = payload.get("notebook")
        if notebook:  # fail before the work when the notebook was deleted meanwhile
            await self.notebooks.resolve(notebook)
        total = len(files)
        done: list[FileResult] = []
        doing: dict[str, str] = {}  # source in flight -> its step ("": the store's own)
        changed = asyncio.Event()

        async def reporter() -> None:
            while True:
                await changed.wait()
                changed.clear()
                await report(min(len(done) / max(total, 1), 0.99),
                             _partial(total, done, doing))
                await asyncio.sleep(REPORT_EVERY)  # changes meanwhile go in the next

        def on_result(result: FileResult) -> None:
            done.append(result)
            doing.pop(result.source, None)
            changed.set()

        def started(source: str) -> None:
            doing[source] = "reading"
            changed.set()

        def step(source: str, name: str) -> None:
            if not source:
                doing.clear()
            doing[source] = name
            changed.set()

        on_result.started = started  # type: ignore[attr-defined]
        on_result.step = step  # type: ignore[attr-defined]
        await report(0.0, _partial(total, done, doing))
        task = asyncio.get_running_loop().create_task(reporter())
        try:
            ingest_report = await self.ingestor.ingest_files(
                files, force=bool(payload.get("force")),
                retry_failed=bool(payload.get("retry_failed", True)), on_result=on_result)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return {"files": total, "done": total, **ingest_report.to_dict(),
                **await self._filed(ingest_report, payload)}

    # ----- web pages ------------------------------------------------------------------
    async def submit_urls(self, urls: Sequence[str], *, sitemaps: Sequence[str] = (),
                          follow: int = 0, max_pages: int = 100, notebook: Any = None,
                          topics: Sequence[str] = (), metadata: Mapping[str, Any] | None = None,
                          force: bool = False, allow_private: bool = False) -> Job:
        """Queue the fetch and ingest of web pages (as :meth:`WebSources.ingest` takes
        them); the notebook, topics and metadata are checked now and applied to the
        documents when they are stored. ``allow_private`` is the server's to give."""
        if not urls and not sitemaps:
            raise ConfigurationError("give at least one URL or sitemap")
        for url in [*urls, *sitemaps]:
            normalise(url)  # a text that is no http(s) URL fails now, not in the job
        if follow < 0 or max_pages < 1:
            raise ConfigurationError("follow must be 0 or more and max_pages 1 or more")
        nb = None if notebook is None else str(await self.notebooks.resolve(notebook))
        payload = {"urls": list(urls), "sitemaps": list(sitemaps), "follow": int(follow),
                   "max_pages": int(max_pages), "notebook": nb,
                   "topics": check_topics(topics), "metadata": user_metadata(metadata) or None,
                   "force": bool(force), "allow_private": bool(allow_private)}
        return await self.jobs.submit(INGEST_URLS, payload=payload)

    async def _run_urls(self, job: Job, report: Report) -> dict[str, Any]:
        payload = job.payload or {}
        if payload.get("notebook"):  # fail before the work when it was deleted meanwhile
            await self.notebooks.resolve(payload["notebook"])
        done: list[FileResult] = []
        total = [0]

        def discovered(n: int) -> None:
            total[0] = n

        async with self._reporting(report, done, total):
            ingest_report = await self.web.ingest(
                payload.get("urls") or [], sitemaps=payload.get("sitemaps") or [],
                follow=int(payload.get("follow") or 0),
                max_pages=int(payload.get("max_pages") or 100),
                force=bool(payload.get("force")), retry_failed=True,
                allow_private=bool(payload.get("allow_private")), on_result=done.append,
                on_discovered=discovered)
        return {"pages": len(ingest_report.results), **ingest_report.to_dict(),
                **await self._filed(ingest_report, payload)}

    async def _filed(self, ingest_report: IngestReport,
                     payload: dict[str, Any]) -> dict[str, Any]:
        """Put a job's documents in its notebook, with its topics and metadata; what the
        job's result says of it."""
        notebook, topics = payload.get("notebook"), list(payload.get("topics") or [])
        if notebook or topics:
            await self.notebooks.file_documents(ingest_report, notebook, topics)
        metadata = payload.get("metadata")
        await file_metadata(self.storage, ingest_report, metadata)
        return {"notebook": notebook, "topics": topics,
                **({"metadata": metadata} if metadata else {})}

    async def submit_refresh(self, *, older_than: float | None = None, prune: bool = False,
                             allow_private: bool = False) -> Job:
        """Queue a re-check of every web page source (:meth:`WebSources.refresh`)."""
        if older_than is not None and (isinstance(older_than, bool) or older_than < 0):
            raise ConfigurationError("older_than must be a number of seconds, 0 or more")
        return await self.jobs.submit(REFRESH, payload={
            "older_than": older_than, "prune": bool(prune),
            "allow_private": bool(allow_private)})

    async def _run_refresh(self, job: Job, report: Report) -> dict[str, Any]:
        payload = job.payload or {}
        done: list[FileResult] = []
        total = [0]

        def discovered(n: int) -> None:
            total[0] = n

        async with self._reporting(report, done, total):
            refreshed = await self.web.refresh(
                older_than=payload.get("older_than"), prune=bool(payload.get("prune")),
                allow_private=bool(payload.get("allow_private")), on_result=done.append,
                on_discovered=discovered)
        return {"pages": len(refreshed.results), **refreshed.to_dict()}

    @staticmethod
    @contextlib.asynccontextmanager
    async def _reporting(report: Report, done: list[FileResult],
                         total: list[int]) -> AsyncIterator[None]:
        """While a web job runs, its progress: pages done of all, the last results."""
        async def reporter() -> None:
            while True:
                await report(min(len(done) / max(total[0], 1), 0.99),
                             {"pages": total[0], "done": len(done),
                              "results": [r.to_dict() for r in done[-20:]]})
                await asyncio.sleep(REPORT_EVERY * 5)

        task = asyncio.get_running_loop().create_task(reporter())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _remove(self, folder: Path | None) -> None:
        if folder is not None and folder.parent == self.root and is_upload_folder(folder):
            shutil.rmtree(folder, ignore_errors=True)


def _partial(total: int, done: list[FileResult], doing: dict[str, str]) -> dict[str, Any]:
    """A running job's result: the files done, and what each file in flight is doing
    (``doing``: source -> step, as the command line's progress shows it)."""
    return {"files": total, "done": len(done), "results": [r.to_dict() for r in done],
            "doing": dict(doing)}

