"""Sync: keep folders and the knowledge base identical, doing only the work that changed.

One pass compares what the folders hold now (``discover``, with its rules: hidden files
and links leading outside are left out, unreadable paths fail alone) with the ``files``
records of the sources inside them, and makes a plan:

- **unchanged**: the size and modification time are the recorded ones (nothing is read),
  or the bytes hash to the recorded hash (the new time is remembered);
- **rename**: a file that appeared has the bytes (and extension) of one that vanished:
  its record and its place among its document's sources move to the new path, nothing is
  extracted or embedded;
- **add**: a new file; one with the bytes of a stored source (a copy) joins that
  document without extraction;
- **update**: the bytes changed: the file goes through the ingest pipeline, where the new
  version takes over the old one's unchanged chunks and vectors (see
  :meth:`surrealdocs.core.document_writer.DocumentWriter._plan`);
- **delete**: a source inside the folders that is no longer there (its document goes once
  no other source shares it).

Sources outside the folders (other paths, ``upload://`` names) are never looked at, and
nothing inside an unreadable directory or a missing folder counts as vanished.

Crash safety: every step is its own transaction (a rename, a copy, a deletion; a document
write is all-or-nothing, see :mod:`surrealdocs.core.ingest`), and no plan is stored: the next
pass computes what is left from the disk and the store, so a pass killed at any moment
leaves a consistent store, and the next one converges. Renames run first (before the
vanished path is forgotten), deletions last (so an edited and moved file can still take its
vectors from the old copy).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import ConfigurationError
from ..parts.discover import Problem, discover_paths, glob_regex, open_found
from ..parts.results import FileResult, PlannedChange, SyncReport, id_text
from ..store.folders import own_folders
from ..store.storage import Storage
from .ingest import Ingestor, ProgressCallback, recorded_mtime

HASH_CONCURRENCY = 4
WATCH_START_MS = 200  # how often the watcher wakes up when nothing happens
READ_BLOCK = 1 << 20


@dataclass
class _Seen:
    """A file the folders hold now."""

    path: str
    size: int
    mtime_ns: int | None  # None when too recent to trust (see recorded_mtime)
    file_hash: str | None = None  # read only when the size or time differ from the record


@dataclass
class SyncPlan:
    """What a pass will do (see the module's docstring); ``problems`` are the paths that
    gave no file."""

    roots: list[str]
    unchanged: list[tuple[_Seen, dict[str, Any]]] = field(default_factory=list)
    touch: list[tuple[_Seen, dict[str, Any]]] = field(default_factory=list)
    renames: list[tuple[_Seen, dict[str, Any]]] = field(default_factory=list)
    copies: list[tuple[_Seen, dict[str, Any]]] = field(default_factory=list)
    adds: list[_Seen] = field(default_factory=list)
    updates: list[tuple[_Seen, dict[str, Any]]] = field(default_factory=list)
    deletes: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    present: list[str] = field(default_factory=list)  # every file the folders hold

    def changes(self) -> list[PlannedChange]:
        out = [PlannedChange("rename", s.path, previous=r["path"]) for s, r in self.renames]
        out += [PlannedChange("add", s.path, reason=f"same bytes as {r['path']}")
                for s, r in self.copies]
        out += [PlannedChange("add", s.path) for s in self.adds]
        out += [PlannedChange("update", s.path) for s, _ in self.updates]
        out += [PlannedChange("delete", r["path"]) for r in self.deletes]
        out += [PlannedChange("unchanged", s.path) for s, _ in self.unchanged + self.touch]
        return out


class Syncer:
    """Sync passes for one knowledge base's storage and ingest pipeline."""

    def __init__(self, storage: Storage, ingestor: Ingestor, settings: Settings) -> None:
        self.storage = storage
        self.ingestor = ingestor
        self.settings = settings
        self.store = storage.store

    # ----- planning -----------------------------------------------------------------
    async def plan(self, paths: Sequence[str | Path], glob: str = "**/*") -> SyncPlan:
        """Compare the folders with the store; reads only files whose size or time moved."""
        found = await asyncio.to_thread(discover_paths, paths, glob, False,
                                        own_folders(self.settings))
        roots, scope_problems = _roots(paths)
        plan = SyncPlan(roots=[str(r) for r, _ in roots], problems=list(found.problems))
        pattern = glob_regex(glob)
        stored = {r["path"]: r for r in await self.storage.files.under(
            [str(r) for r, _ in roots])
            if _in_scope(r["path"], roots, pattern)}
        seen = await asyncio.to_thread(_stat_all, found.files)
        plan.problems += [Problem(path, reason) for path, reason in seen if isinstance(reason, str)]
        files = [s for _, s in seen if isinstance(s, _Seen)]
        # what could not be read is not gone: nothing under it is deleted (if it really
        # vanished, a later pass finds it so)
        protected = [p.source for p in plan.problems if p.status == "failed"] + scope_problems

        # what the records say, and the bytes of whatever they cannot vouch for
        to_hash = [s for s in files if not _same_stat(s, stored.get(s.path))
                   and s.size <= self.settings.max_file_bytes]
        await _hash_all(to_hash)
        fresh = self._classified(plan, files, stored)
        plan.present = [s.path for s in files]
        present = set(plan.present)
        vanished = [r for path, r in stored.items() if path not in present
                    and not _under_any(path, protected)]
        left = _renames(plan, fresh, vanished)
        await self._copies(plan, left)
        return plan

    @staticmethod
    def _classified(plan: SyncPlan, files: list[_Seen],
                    stored: dict[str, dict[str, Any]]) -> list[_Seen]:
        """Sort files with a record into unchanged, touched (same bytes, new time) and
        updated; the files without one are returned."""
        fresh: list[_Seen] = []
        for s in files:
            record = stored.get(s.path)
            if record is None:
                fresh.append(s)
            elif _same_stat(s, record):
                plan.unchanged.append((s, record))
            elif s.file_hash is not None and s.file_hash == record.get("file_hash"):
                plan.touch.append((s, record))
            else:
                plan.updates.append((s, record))
        return fresh

    async def _copies(self, plan: SyncPlan, left: list[_Seen]) -> None:
        """A new file with the bytes of a stored document's source is a copy of it; the
        others are added."""
        going = {r["path"] for r in plan.deletes} | {r["path"] for _, r in plan.updates}
        hashes = sorted({s.file_hash for s in left if s.file_hash})
        known: dict[tuple[str, str], dict[str, Any]] = {}
        for r in await self.storage.files.with_hashes(hashes) if hashes else []:
            if r.get("status") in ("ingested", "duplicate") and r.get("document") is not None \
                    and r["path"] not in going:
                known.setdefault((r["file_hash"], _suffix(r["path"])), r)
        for s in left:
            record = known.get((s.file_hash or "", _suffix(s.path)))
            if record is not None and record["path"] != s.path:
                plan.copies.append((s, record))
            else:
                plan.adds.append(s)


    # ----- applying -----------------------------------------------------------------
    async def apply(self, plan: SyncPlan, *,
                    on_result: ProgressCallback | None = None) -> list[FileResult]:
        """Carry a plan out, step by step (each step atomic; see the module docstring)."""
        documents = self.storage.documents
        results: list[FileResult] = []

        def done(result: FileResult) -> None:
            results.append(result)
            if on_result:
                on_result(result)

        for p in plan.problems:
            done(FileResult(p.source, p.status, reason=p.reason))
        for s, r in plan.unchanged:
            done(_unchanged(s, r))
        for s, r in plan.touch:
            await self.storage.files.touch(s.path, r["file_hash"], s.size, s.mtime_ns)
            done(_unchanged(s, r))
        ingest: list[str] = []
        forget = list(plan.deletes)
        for s, r in plan.renames:
            async with self.store.write_lock:
                moved = await documents.rename_source(r["path"], s.path, r["file_hash"],
                                                      s.size, s.mtime_ns)
            if moved:
                doc = r.get("document")
                done(FileResult(s.path, "renamed", document_id=id_text(doc) if doc else None,
                                previous=r["path"], last_status=r.get("status"),
                                reason=r.get("error")))
            else:  # changed meanwhile: the long way
                ingest.append(s.path)
                forget.append(r)
        for s, r in plan.copies:
            async with self.store.write_lock:
                added = await documents.add_source(s.path, r["file_hash"], s.size,
                                                   r.get("mime_type") or "", r["document"],
                                                   s.mtime_ns)
            if added:
                done(FileResult(s.path, "duplicate", document_id=id_text(r["document"])))
            else:
                ingest.append(s.path)
        ingest += [s.path for s in plan.adds] + [s.path for s, _ in plan.updates]
        if ingest:
            await self.ingestor.ingest_found([Path(p) for p in ingest], on_result=done)
        for r in forget:
            async with self.store.write_lock:
                gone = await documents.forget_source(r["path"])
            if gone:
                done(FileResult(r["path"], "deleted",
                                document_id=id_text(r["document"]) if r.get("document") else None))
        return results

    async def sync(self, paths: Sequence[str | Path], glob: str = "**/*", *,
                   dry_run: bool = False, on_result: ProgressCallback | None = None,
                   on_plan: Callable[[SyncPlan], None] | None = None
                   ) -> tuple[SyncReport, SyncPlan]:
        """One pass: plan, then (unless ``dry_run``) apply and build the HNSW graph if
        enough new vectors wait. Returns the report and the plan it followed."""
        started = time.perf_counter()
        plan = await self.plan(paths, glob)
        if on_plan:
            on_plan(plan)
        report = SyncReport(roots=plan.roots, dry_run=dry_run, plan=plan.changes())
        if dry_run:
            report.results = [FileResult(p.source, p.status, reason=p.reason)
                              for p in plan.problems]
        else:
            report.results = await self.apply(plan, on_result=on_result)
            report.index_rebuilt = await self.ingestor.rebuild_if_due()
        report.seconds = time.perf_counter() - started
        return report, plan

    async def documents_of(self, plan: SyncPlan) -> list[Any]:
        """The documents the files of a plan point at now."""
        records = await self.storage.files.of(plan.present)
        return [r["document"] for r in records.values() if r.get("document") is not None]

    async def watch(self, paths: Sequence[str | Path], pass_once: Callable[[], Any], *,
                    settle: float = 0.5, ignore: Sequence[Path] = (),
                    stop: asyncio.Event | None = None,
                    on_changes: Callable[[int], None] | None = None) -> None:
        """``await pass_once()``, then again after each settled batch of changes in the
        folders. The watcher starts before the first pass, so a change made during it is
        not missed. Returns when ``stop`` is set (or the task is cancelled)."""
        import watchfiles

        if isinstance(settle, bool) or not isinstance(settle, (int, float)) \
                or not 0 < settle <= 60:
            raise ConfigurationError(f"settle must be from 0 to 60 seconds, got {settle!r}")
        settle = float(settle)

        folders = [Path(p).expanduser().resolve() for p in paths]
        folders = [f for f in folders if f.exists()]
        if not folders:
            raise ConfigurationError("none of the folders to watch exists")
        ignored = [i.resolve() for i in ignore]

        def wanted(change: Any, raw: str) -> bool:
            path = Path(raw)
            if any(path == i or path.is_relative_to(i) for i in ignored):
                return False
            for folder in folders:
                if path.is_relative_to(folder):
                    rel = path.relative_to(folder)
                    return not any(part.startswith(".") for part in rel.parts)
            return True

        quiet_ms = max(int(settle * 1000), 50)
        first = True
        # The first (empty) batch comes once the watcher runs, after WATCH_START_MS.
        async for changes in watchfiles.awatch(
                *folders, watch_filter=wanted, step=quiet_ms,
                debounce=max(1600, quiet_ms * 4), stop_event=stop,
                rust_timeout=WATCH_START_MS, yield_on_timeout=True):
            if not (first or changes):
                continue
            if changes and on_changes:
                on_changes(len(changes))
            first = False
            await pass_once()


# ----- the pieces ---------------------------------------------------------------------
def _roots(paths: Iterable[str | Path]) -> tuple[list[tuple[Path, bool]], list[str]]:
    """Each usable root, resolved, and whether it is a directory; and the paths of roots
    that are missing or unusable (nothing under them counts as vanished)."""
    roots: list[tuple[Path, bool]] = []
    missing: list[str] = []
    for raw in paths:
        path = Path(raw).expanduser()
        try:
            resolved = path.resolve(strict=True)
            is_dir = resolved.is_dir()
        except (OSError, RuntimeError):
            missing.append(str(Path(os.path.abspath(path))))
            continue
        roots.append((resolved, is_dir))
    return roots, missing


def _in_scope(path: str, roots: Sequence[tuple[Path, bool]], pattern: re.Pattern[str]) -> bool:
    """Whether a stored source is one a pass over ``roots`` would find if it were there:
    a file root itself, or a path inside a folder root that matches the glob and has no
    hidden part."""
    p = Path(path)
    for root, is_dir in roots:
        if not is_dir:
            if p == root:
                return True
            continue
        if not p.is_relative_to(root):
            continue
        rel = p.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if pattern.fullmatch(rel.as_posix()):
            return True
    return False


def _under_any(path: str, prefixes: Iterable[str]) -> bool:
    for prefix in prefixes:
        for form in {prefix, str(Path(prefix).resolve())}:
            if path == form or path.startswith(form.rstrip("/") + "/"):
                return True
    return False


def _suffix(path: str) -> str:
    return Path(path).suffix.lower()


def _stat_all(files: Sequence[Path]) -> list[tuple[str, _Seen | str]]:
    out: list[tuple[str, _Seen | str]] = []
    for f in files:
        try:
            info = f.stat()
        except OSError as exc:
            out.append((str(f), f"cannot read: {exc.strerror or exc}"))
            continue
        out.append((str(f), _Seen(str(f), int(info.st_size), recorded_mtime(info))))
    return out


def _same_stat(seen: _Seen, record: dict[str, Any] | None) -> bool:
    """The record vouches for the file without reading it: same size, same (trusted)
    modification time, and bytes recorded."""
    return (record is not None and bool(record.get("file_hash"))
            and seen.mtime_ns is not None and record.get("mtime_ns") == seen.mtime_ns
            and record.get("size") == seen.size)


async def _hash_all(files: Sequence[_Seen]) -> None:
    slots = asyncio.Semaphore(HASH_CONCURRENCY)

    async def one(s: _Seen) -> None:
        async with slots:
            s.file_hash = await asyncio.to_thread(_hash_file, s.path)

    await asyncio.gather(*(one(s) for s in files))


def _hash_file(path: str) -> str | None:
    """The SHA-256 of a file's bytes (``None`` when it cannot be read: the ingest that
    follows reports why)."""
    digest = hashlib.sha256()
    try:
        with os.fdopen(open_found(Path(path)), "rb") as f:
            while block := f.read(READ_BLOCK):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _unchanged(seen: _Seen, record: dict[str, Any]) -> FileResult:
    doc = record.get("document")
    failed_before = record.get("status") in ("failed", "empty")
    return FileResult(seen.path, "unchanged", document_id=id_text(doc) if doc else None,
                      reason=record.get("error") if failed_before else None,
                      last_status=record.get("status"))


def check_glob(glob: str) -> None:
    """Refuse a glob that is empty, absolute or climbs out of the folders."""
    if not isinstance(glob, str) or not glob.strip():
        raise ConfigurationError("the glob is empty: use '**/*' for every file")
    if glob.startswith(("/", "~")) or ".." in Path(glob).parts or "\x00" in glob:
        raise ConfigurationError(
            f"the glob {glob!r} must be relative to the folders given, without '..'"
            " (e.g. '**/*.pdf')")


def _renames(plan: SyncPlan, fresh: list[_Seen], vanished: list[dict[str, Any]]) -> list[_Seen]:
    """A new file with the bytes of a vanished one is that file, moved (a renamed one of the
    same name first); the vanished files left are deleted. Returns the new files left."""
    by_hash: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in vanished:
        if r.get("file_hash"):
            by_hash.setdefault((r["file_hash"], _suffix(r["path"])), []).append(r)
    renamed: set[str] = set()
    left: list[_Seen] = []
    for s in fresh:
        candidates = by_hash.get((s.file_hash or "", _suffix(s.path))) or []
        if s.file_hash and candidates:
            same_name = [r for r in candidates if Path(r["path"]).name == Path(s.path).name]
            record = (same_name or candidates)[0]
            candidates.remove(record)
            renamed.add(record["path"])
            plan.renames.append((s, record))
        else:
            left.append(s)
    plan.deletes = [r for r in vanished if r["path"] not in renamed]
    return left
