"""Background jobs: work recorded in the database and run by a task of this process.

One job system for everything that runs in the background: the notebooks' ``vectorize``
(chunk and embed a source's text) and the server's ``ingest`` (uploaded files). A job is
queued in the ``job`` table and survives a restart: one that was running when its process
died is queued again when the store is reopened (at once on an embedded store, which only
one process can open; after an hour without progress on a shared server).

Kinds are registered with a handler, ``async handler(job, report) -> result``, where
``report(fraction, result=None)`` records progress (and, optionally, a partial result).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from surrealdb import RecordID

from ..errors import ConfigurationError, NotFoundError
from ..parts.results import jsonable
from ..store.documents import record_id
from ..store.jobs import JobStorage

JOB_STATUSES = ("queued", "running", "done", "failed")
# how long a job marked running may sit without progress on a shared server before another
# process takes it over
REMOTE_TAKEOVER_SECONDS = 3600

Report = Callable[..., Awaitable[None]]
Handler = Callable[["Job", Report], Awaitable[dict[str, Any] | None]]


@dataclass
class Job:
    """A background job: ``status`` is one of :data:`JOB_STATUSES`."""

    id: RecordID
    kind: str
    status: str
    target: RecordID | None = None
    progress: float = 0.0
    error: str | None = None
    attempts: int = 0
    payload: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    created: Any = None
    updated: Any = None
    _service: JobService | None = field(default=None, repr=False, compare=False)

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed")

    @property
    def outcome(self) -> str:
        """The status in words, with the files that gave nothing when a job that ingested
        files is done ("done: 2 of 5 files failed, 1 without text")."""
        counts = (self.result or {}).get("counts") if self.status == "done" else None
        if not isinstance(counts, dict):
            return self.status
        total = sum(int(v) for v in counts.values() if isinstance(v, int))
        parts = [f"{counts[k]} {label}" for k, label in (
            ("failed", "failed"), ("empty", "without text"), ("skipped", "skipped"))
            if counts.get(k)]
        if not parts:
            return self.status
        return f"done: {parts[0].split(' ', 1)[0]} of {total} files " \
            f"{parts[0].split(' ', 1)[1]}" + "".join(f", {p}" for p in parts[1:])

    async def refresh(self) -> Job:
        fresh = await self._jobs.get(self.id)
        self.__dict__.update({k: v for k, v in fresh.__dict__.items() if k != "_service"})
        return self

    async def wait(self, timeout: float | None = None, poll: float = 0.05) -> Job:
        """Wait until the job is done or failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            await self.refresh()
            if self.finished:
                return self
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {self.id} still {self.status} after {timeout} s")
            await asyncio.sleep(poll)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonable(self)
        out["outcome"] = self.outcome
        return out

    @property
    def _jobs(self) -> JobService:
        if self._service is None:
            raise ConfigurationError("this job is not attached to a store")
        return self._service


class JobService:
    """The job queue of one knowledge base and the task that works through it."""

    def __init__(self, storage: JobStorage, *, exclusive: bool) -> None:
        self.storage = storage
        self._exclusive = exclusive  # only this process can run jobs of this store
        self._handlers: dict[str, Handler] = {}
        self._wake = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._listeners: set[asyncio.Queue[Job]] = set()

    def register(self, kind: str, handler: Handler) -> None:
        self._handlers[kind] = handler

    async def submit(self, kind: str, *, target: RecordID | None = None,
                     payload: dict[str, Any] | None = None, start: bool = True) -> Job:
        """Queue a job; with ``start``, make sure this process runs the queue."""
        if kind not in self._handlers:
            raise ConfigurationError(f"no handler for jobs of kind {kind!r}")
        job = self._job(await self.storage.create(kind, target=target, payload=payload))
        self._publish(job)
        if start:
            self.start()
        self._wake.set()
        return job

    async def get(self, ref: Any) -> Job:
        row = await self.storage.get(record_id(ref, self.storage.table))
        if not row:
            raise NotFoundError(f"no job {ref!r}")
        return self._job(row)

    async def list(self, status: str | None = None, kind: str | None = None,
                   limit: int | None = None) -> list[Job]:
        if status is not None and status not in JOB_STATUSES:
            raise ConfigurationError(
                f"status must be one of {', '.join(JOB_STATUSES)}, got {status!r}")
        return [self._job(r) for r in await self.storage.select(status=status, kind=kind,
                                                               limit=limit)]

    def subscribe(self) -> asyncio.Queue[Job]:
        """A queue receiving every change of every job run or queued by this process
        (for live progress); :meth:`unsubscribe` it when done."""
        queue: asyncio.Queue[Job] = asyncio.Queue(maxsize=1000)
        self._listeners.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Job]) -> None:
        self._listeners.discard(queue)

    async def requeue_interrupted(self) -> int:
        """Queue again the jobs whose runner died (see the module docstring)."""
        return await self.storage.requeue_interrupted(
            0 if self._exclusive else REMOTE_TAKEOVER_SECONDS)

    async def run_pending(self) -> int:
        """Run queued jobs in this task until none is left; returns how many ran."""
        ran = 0
        while await self._run_one():
            ran += 1
        return ran

    @property
    def running(self) -> bool:
        return self._runner is not None and not self._runner.done()

    def start(self) -> None:
        """Start the background runner in the current event loop (idempotent)."""
        if not self.running:
            self._runner = asyncio.get_running_loop().create_task(self._run_forever())

    async def stop(self) -> None:
        """Stop the runner; a job it was running is queued again at the next open."""
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
            self._runner = None

    async def _run_forever(self) -> None:
        while True:
            try:
                if await self._run_one():
                    continue
            except asyncio.CancelledError:
                raise
            except Exception:  # the store went away; a later open requeues the job
                await asyncio.sleep(1.0)
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=1.0)

    async def _run_one(self) -> bool:
        row = await self.storage.claim(sorted(self._handlers))
        if row is None:
            return False
        job = self._job(row)
        self._publish(job)

        async def report(fraction: float, result: dict[str, Any] | None = None) -> None:
            await self.storage.progress(job.id, fraction, result)
            job.progress = fraction
            if result is not None:
                job.result = result
            self._publish(job)

        try:
            result = await self._handlers[job.kind](job, report)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self.storage.fail(job.id, f"{type(exc).__name__}: {exc}")
        else:
            await self.storage.finish(job.id, jsonable(result) if result is not None else None)
        self._publish(await self.get(job.id))
        return True

    def _publish(self, job: Job) -> None:
        if not self._listeners:
            return
        snapshot = dataclasses.replace(job)  # the runner goes on changing its own
        for queue in list(self._listeners):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(snapshot)

    def _job(self, row: dict[str, Any]) -> Job:
        return Job(id=row["id"], kind=row["kind"], status=row["status"],
                   target=row.get("target"), progress=float(row.get("progress") or 0.0),
                   error=row.get("error"), attempts=int(row.get("attempts") or 0),
                   payload=row.get("payload"), result=row.get("result"),
                   created=row.get("created"), updated=row.get("updated"), _service=self)
