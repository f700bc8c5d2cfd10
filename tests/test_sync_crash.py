"""SIGKILL at random moments of a sync: the store stays consistent, and the next sync
converges to what one clean run builds.

A folder of a few hundred files is synced by a subprocess that is killed with SIGKILL at a
random delay after it opened the store, over and over; between runs that finished before
their kill the folder changes again (edits, renames, copies, deletions, new files), so every
kind of step gets interrupted. Each killed run is followed by a check of the store's
invariants; at the end a last run completes, and the store must equal one built by a
single sync of the final folder: same sources, same document ids, same chunks (index, span,
text hash) per document, a vector for every chunk, no orphan, nothing incomplete.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import assert_text_index_matches_chunks
from surrealdocs import KnowledgeBase, Settings

pytestmark = pytest.mark.slow  # subprocesses, servers or real corpora: -m 'not slow' skips

FILES = 240
KILLS = 10
CHUNKING = {"chunk_size": 300, "chunk_overlap": 30}

RUNNER = textwrap.dedent("""
    import asyncio, os, sys
    from surrealdocs import KnowledgeBase, Settings

    async def main():
        settings = Settings(db=sys.argv[1], model="hashing-64", chunk_size=300,
                            chunk_overlap=30)
        async with await KnowledgeBase.open(settings=settings) as kb:
            print("open", flush=True)
            report = await kb.sync([sys.argv[2]])
            print("done", report.counts["failed"], flush=True)
        os._exit(0)

    asyncio.run(main())
""")


def text(rng: random.Random, n: int, tag: str) -> str:
    return "\n\n".join(f"Paragraph {k} of {tag}. " + " ".join(
        f"w{rng.randrange(2000)}" for _ in range(rng.randrange(20, 60))) for k in range(n))


def populate(root: Path, rng: random.Random) -> None:
    for i in range(FILES):
        f = root / f"d{i % 6}" / f"file{i}.txt"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text(rng, rng.choice([1, 1, 2, 3, 6]), f"file {i}"))


def mutate(root: Path, rng: random.Random, round_: int) -> None:
    """Edit some files (one paragraph), move some, copy some, delete some, add some."""
    files = sorted(p for p in root.rglob("*.txt"))
    rng.shuffle(files)
    edits, moves, copies, deletes = files[:15], files[15:27], files[27:31], files[31:40]
    for f in edits:
        paragraphs = f.read_text().split("\n\n")
        k = rng.randrange(len(paragraphs))
        paragraphs[k] = f"Paragraph {k} rewritten in round {round_}: " + " ".join(
            f"e{rng.randrange(500)}" for _ in range(30))
        f.write_text("\n\n".join(paragraphs))
    for n, f in enumerate(moves):
        target = root / f"d{rng.randrange(6)}" / f"moved{round_}_{n}.txt"
        f.rename(target)
    for n, f in enumerate(copies):
        shutil.copy(f, root / f"d{rng.randrange(6)}" / f"copy{round_}_{n}.txt")
    for f in deletes:
        f.unlink()
    for n in range(10):
        (root / f"d{n % 6}" / f"new{round_}_{n}.txt").write_text(
            text(rng, rng.choice([1, 3]), f"new {round_} {n}"))


async def shape(kb: KnowledgeBase) -> dict[str, Any]:
    """What the store holds, in a form that does not depend on how it got there."""
    files, docs, chunks, checks = await kb.store.query(
        "SELECT path, file_hash, status, document FROM files ORDER BY path;"
        " SELECT id, array::sort(sources) AS sources, chunk_count, complete, generation"
        " FROM documents ORDER BY id;"
        " SELECT document, chunk_index, char_start, char_end, text_hash,"
        " record::exists(type::record('chunks_vectors', record::id(id))) AS has_vector"
        " FROM chunks ORDER BY document, chunk_index;"
        " RETURN {"
        "  orphans: (SELECT VALUE id FROM chunks WHERE document.id = NONE),"
        "  incomplete: (SELECT VALUE id FROM documents WHERE complete = false),"
        "  dangling: (SELECT VALUE id FROM files WHERE document != NONE"
        "    AND document.id = NONE),"
        "  unsourced: (SELECT VALUE id FROM documents WHERE array::len(sources) = 0"
        "    OR source = NONE)"
        " };")
    for f in files:  # which of two identical files came first is not the store's shape
        if f["status"] in ("ingested", "duplicate"):
            f["status"] = "stored"
    return {"files": files, "documents": docs, "chunks": chunks, "checks": checks}


def consistent(shape_: dict[str, Any]) -> None:
    assert shape_["checks"] == {"orphans": [], "incomplete": [], "dangling": [],
                                "unsourced": []}, shape_["checks"]
    per_doc: dict[str, list[int]] = {}
    for c in shape_["chunks"]:
        per_doc.setdefault(str(c["document"]), []).append(c["chunk_index"])
        assert c["has_vector"]
    for doc in shape_["documents"]:
        assert per_doc.get(str(doc["id"]), []) == list(range(doc["chunk_count"])), doc["id"]
    stored = {str(d["id"]) for d in shape_["documents"]}
    pointed = {str(f["document"]) for f in shape_["files"] if f["document"] is not None}
    assert pointed == stored  # every document has a source, every source a document


def test_sigkill_at_random_moments_then_the_next_sync_converges(tmp_path: Path) -> None:
    rng = random.Random(20260101)
    root = tmp_path / "folder"
    db = str(tmp_path / "kb")
    populate(root, rng)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    kills = runs = rounds = 0
    started = time.monotonic()

    def run(kill_after: float | None) -> bool:
        """One sync in a subprocess, killed ``kill_after`` seconds after it opened the
        store; whether it was killed."""
        proc = subprocess.Popen([sys.executable, "-c", RUNNER, db, str(root)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("open"), line + (proc.stderr.read() if proc.stderr else "")
            if kill_after is not None:
                try:
                    proc.wait(timeout=kill_after)
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(timeout=30)
                    return True
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0 and "done 0" in out, err[-3000:]
            return False
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    async def check_consistent() -> None:
        async with await KnowledgeBase.open(settings=Settings(db=db, model="hashing-64",
                                                              **CHUNKING)) as kb:
            consistent(await shape(kb))
            await assert_text_index_matches_chunks(kb)

    window = 1.5  # seconds after the open within which the kill falls
    while kills < KILLS:
        runs += 1
        if run(rng.uniform(0.05, window)):
            kills += 1
            asyncio.run(check_consistent())  # opening recovers; nothing half-done is left
        else:  # it finished first: give the next runs more to do, and kill sooner (a fast
            rounds += 1  # machine syncs the changed files in well under a second)
            mutate(root, rng, rounds)
            window = max(0.2, window * 0.8)
        assert runs < 60, "the sync keeps finishing before its kill"
    run(None)  # the next sync converges

    async def compare() -> None:
        settings = Settings(db=db, model="hashing-64", **CHUNKING)
        async with await KnowledgeBase.open(settings=settings) as kb:
            got = await shape(kb)
            await assert_text_index_matches_chunks(kb)
            again = await kb.sync([root])  # and a further pass has nothing to do
            assert again.changes == [] and again.counts["unchanged"] == len(again.results)
        async with await KnowledgeBase.open(settings=settings.replace(db="mem://")) as clean:
            report = await clean.sync([root])
            assert report.counts["failed"] == 0
            want = await shape(clean)
        consistent(got)
        assert got == want

    asyncio.run(compare())
    assert kills >= KILLS
    print(f"{kills} kills in {runs} runs, {rounds} rounds of changes,"
          f" {time.monotonic() - started:.1f} s")


def test_crash_before_the_moving_transaction_leaves_the_old_version_whole(
        tmp_path: Path) -> None:
    """The process dies when the new version's chunks are inserted and the transaction that
    would move the unchanged ones over is about to run: the old version is intact and
    searchable, the new one's debris goes at the next open, and the next sync converges."""
    root = tmp_path / "folder"
    book = root / "book.txt"
    root.mkdir()
    def word(n: int) -> str:  # letters only: the analyzer splits letters from digits
        return "zq" + "".join(chr(ord("a") + int(d)) for d in str(n))

    paragraphs = [f"Paragraph {k} of the book. " + " ".join(
        word(k * 100 + j) for j in range(50)) for k in range(30)]
    book.write_text("\n\n".join(paragraphs))
    db = str(tmp_path / "kb")
    settings = Settings(db=db, model="hashing-64", **CHUNKING)

    async def first() -> int:
        async with await KnowledgeBase.open(settings=settings) as kb:
            report = await kb.sync([root])
            return report.chunks_written

    chunks = asyncio.run(first())
    paragraphs[12] = "Paragraph 12 now tells of a quokka."
    book.write_text("\n\n".join(paragraphs))
    script = textwrap.dedent(f"""
        import asyncio, os
        from surrealdocs import KnowledgeBase, Settings
        from surrealdocs.store.connection import Store

        real = Store.transaction

        async def crash(self, *statements):
            if any("FOR $m IN $mv_items" in s.sql for s in statements):
                os._exit(9)  # the new chunks are written; the moves never commit
            return await real(self, *statements)

        Store.transaction = crash

        async def main():
            settings = Settings(db={db!r}, model="hashing-64", chunk_size=300,
                                chunk_overlap=30)
            async with await KnowledgeBase.open(settings=settings) as kb:
                await kb.sync([{str(root)!r}])

        asyncio.run(main())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == 9, proc.stderr.decode()[-2000:]

    async def after() -> None:
        async with await KnowledgeBase.open(settings=settings) as kb:
            state = await shape(kb)
            consistent(state)
            (doc,) = state["documents"]
            assert doc["chunk_count"] == chunks and len(state["chunks"]) == chunks
            assert await kb.search("quokka", mode="text") == []
            assert await kb.search(word(1210), mode="text")  # paragraph 12's old words
            report = await kb.sync([root])
            assert report.counts["updated"] == 1 and 1 <= report.chunks_embedded <= 3
            consistent(await shape(kb))
            assert await kb.search("quokka", mode="text")
            assert await kb.search(word(1210), mode="text") == []

    asyncio.run(after())
