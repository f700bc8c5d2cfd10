"""The ``job`` table: background work recorded in the database, so it survives a restart.

A job is ``queued`` → ``running`` → ``done`` or ``failed``, with progress, an error, a count
of attempts, an optional target record, and free-form ``payload`` (what to do) and
``result`` (what came of it). Taking a job is a conditional update, so two runners never run
the same job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from surrealdb import RecordID

from .connection import Statement, Store


class JobStorage:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.table = store.names.job

    async def create(self, kind: str, *, target: RecordID | None = None,
                     payload: dict[str, Any] | None = None) -> dict[str, Any]:
        fields: dict[str, Any] = {"kind": kind, "status": "queued"}
        if target is not None:
            fields["target"] = target
        if payload is not None:
            fields["payload"] = payload
        (row,) = await self.store.query(f"CREATE ONLY {self.table} CONTENT $data;",
                                        {"data": fields})
        return dict(row)

    async def get(self, job: RecordID) -> dict[str, Any] | None:
        (row,) = await self.store.query("SELECT * FROM ONLY $job;", {"job": job})
        return row if isinstance(row, dict) else None

    async def select(self, *, status: str | None = None, kind: str | None = None,
                   limit: int | None = None) -> list[dict[str, Any]]:
        clauses = [c for c, v in (("status = $status", status), ("kind = $kind", kind))
                   if v is not None]
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        page = f" LIMIT {int(limit)}" if limit is not None else ""
        (rows,) = await self.store.query(
            f"SELECT * FROM {self.table}{where} ORDER BY created, id{page};",
            {"status": status, "kind": kind})
        return list(rows or [])

    async def claim(self, kinds: Sequence[str]) -> dict[str, Any] | None:
        """Take the oldest queued job of one of ``kinds``: it becomes ``running``. ``None``
        when there is none (or another runner took it first)."""
        (rows,) = await self.store.query(
            f"SELECT VALUE id FROM {self.table} WHERE status = 'queued' AND kind IN $kinds"
            " ORDER BY created, id LIMIT 1;", {"kinds": list(kinds)})
        if not rows:
            return None
        (taken,) = await self.store.query(
            "UPDATE $job SET status = 'running', attempts += 1, progress = 0.0,"
            " error = NONE WHERE status = 'queued' RETURN AFTER;", {"job": rows[0]})
        return taken[0] if taken else None

    async def progress(self, job: RecordID, fraction: float,
                       result: dict[str, Any] | None = None) -> None:
        await self.store.query(
            "UPDATE $job SET progress = $p" + (", result = $result" if result is not None else "")
            + " RETURN NONE;", {"job": job, "p": float(fraction), "result": result})

    async def finish(self, job: RecordID, result: dict[str, Any] | None = None) -> None:
        await self.store.query(
            "UPDATE $job SET status = 'done', progress = 1.0"
            + (", result = $result" if result is not None else "") + " RETURN NONE;",
            {"job": job, "result": result})

    async def fail(self, job: RecordID, error: str) -> None:
        await self.store.query("UPDATE $job SET status = 'failed', error = $e RETURN NONE;",
                               {"job": job, "e": error})

    async def requeue_interrupted(self, idle_seconds: int) -> int:
        """Queue again the jobs marked running that have not moved for ``idle_seconds``
        (their runner died)."""
        (rows,) = await self.store.query(
            f"UPDATE {self.table} SET status = 'queued' WHERE status = 'running'"
            " AND updated <= time::now() - type::duration($age) RETURN BEFORE;",
            {"age": f"{int(idle_seconds)}s"})
        return len(rows or [])

    def delete_for_target_statement(self, target: RecordID) -> Statement:
        return Statement(f"DELETE {self.table} WHERE target = $doc;", {"doc": target})
