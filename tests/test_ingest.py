from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import surrealdocs.core.ingest as ingest_module
import surrealdocs.parts.extract as extract_module
from conftest import PATIENCE, SAMPLES, StoreFactory
from surrealdocs import ConfigurationError, KnowledgeBase, Settings, StoreError
from surrealdocs.embed.hashing import HashingEmbedder
from surrealdocs.store.chunks import ChunkStorage
from surrealdocs.store.connection import connect


async def counts(kb: KnowledgeBase) -> tuple[int, int, int]:
    docs, chunks, files = await kb.store.query(
        "SELECT count() AS n FROM documents GROUP ALL;"
        " SELECT count() AS n FROM chunks GROUP ALL;"
        " SELECT count() AS n FROM files GROUP ALL;")
    return tuple(int(r[0]["n"]) if r else 0 for r in (docs, chunks, files))  # type: ignore[return-value]


async def orphan_chunks(kb: KnowledgeBase) -> int:
    """Chunks whose document is gone (a dangling link reads back as NONE)."""
    (rows,) = await kb.store.query("SELECT VALUE id FROM chunks WHERE document.source = NONE;")
    return len(rows)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


async def test_ingest_one_file(kb: KnowledgeBase) -> None:
    report = await kb.ingest([SAMPLES / "quarterly-report.pdf"])
    assert report.counts["ingested"] == 1
    (result,) = report.results
    assert result.chunks >= 1
    (doc,) = (await kb.store.query("SELECT * FROM documents;"))[0]
    assert doc["source"] == str((SAMPLES / "quarterly-report.pdf").resolve())
    assert doc["mime_type"] == "application/pdf" and doc["page_count"] == 2
    assert doc["complete"] is True and doc["chunk_count"] == result.chunks
    (chunks,) = await kb.store.query(
        "SELECT * FROM chunks WHERE document = $d ORDER BY chunk_index;", {"d": doc["id"]})
    assert [c["chunk_index"] for c in chunks] == list(range(result.chunks))
    (vectors,) = await kb.store.query(
        "SELECT chunk, embedding FROM chunks_vectors WHERE document = $d;", {"d": doc["id"]})
    lengths = {str(v["chunk"]): len(v["embedding"]) for v in vectors}
    for c in chunks:
        assert doc["content"][c["char_start"]:c["char_end"]] == c["content"]
        assert "embedding" not in c  # vectors live apart from the text
        assert lengths[str(c["id"])] == kb.embedder.dimension
        assert c["page_number"] in (1, 2)


async def test_ingest_many_files_and_directory_glob(kb: KnowledgeBase, tmp_path: Path) -> None:
    root = tmp_path / "docs"
    shutil.copytree(SAMPLES, root)
    write(root / "sub" / "deep.md", "# Deep\n\nA nested markdown file about walruses.")
    write(root / ".hidden" / "secret.md", "# Hidden\n\nNot to be ingested by default.")
    report = await kb.ingest([root], glob="**/*.md")
    assert sorted(Path(r.source).name for r in report.results) == \
        ["deep.md", "ingestion-faq.md", "vector-indexes.md"]
    report = await kb.ingest([root / "bm25.txt", root / "surrealdb.html"])
    assert report.counts["ingested"] == 2
    docs, _, files = await counts(kb)
    assert docs == files == 5


async def test_ingest_bytes(kb: KnowledgeBase) -> None:
    data = (SAMPLES / "quarterly-report.pdf").read_bytes()
    result = await kb.ingest_bytes(data, mime_type="application/pdf", source="upload://q.pdf")
    assert result.status == "ingested"
    again = await kb.ingest_bytes(data, mime_type="application/pdf", source="upload://q.pdf")
    assert again.status == "unchanged"
    hits = await kb.search("quarterly report", mode="text")
    assert hits and hits[0].source == "upload://q.pdf"


async def test_unchanged_files_skip_extraction(kb: KnowledgeBase, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(SAMPLES, tmp_path / "s")
    first = await kb.ingest([tmp_path / "s"])
    assert first.counts["ingested"] == 5

    calls: list[Any] = []
    original = extract_module.extract_file

    async def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return await original(*args, **kwargs)

    monkeypatch.setattr(ingest_module, "extract_file", counting)
    second = await kb.ingest([tmp_path / "s"])
    assert second.counts["unchanged"] == 5 and calls == []
    forced = await kb.ingest([tmp_path / "s"], force=True)
    assert len(calls) == 5 and forced.counts["unchanged"] == 5
    assert await counts(kb) == (5, first.chunks_written, 5)


async def test_same_text_from_two_paths_is_stored_once(kb: KnowledgeBase,
                                                       tmp_path: Path) -> None:
    a = write(tmp_path / "a.md", "# Same\n\nIdentical content about lighthouses.")
    b = write(tmp_path / "copy" / "b.md", "# Same\n\nIdentical content about lighthouses.")
    report = await kb.ingest([a, b])
    assert sorted(r.status for r in report.results) == ["duplicate", "ingested"]
    docs, chunks, files = await counts(kb)
    assert (docs, files) == (1, 2)
    (doc,) = (await kb.store.query("SELECT sources FROM documents;"))[0]
    assert sorted(doc["sources"]) == sorted([str(a.resolve()), str(b.resolve())])
    # a search filtered to the copy's folder still finds the shared document
    hits = await kb.search("lighthouses", mode="text", source="copy/*")
    assert len(hits) == chunks


async def test_changed_file_replaces_its_document(kb: KnowledgeBase, tmp_path: Path) -> None:
    f = write(tmp_path / "notes.md", "# Notes\n\nThe first version talks about penguins.")
    await kb.ingest([f])
    write(f, "# Notes\n\nThe second version talks about giraffes instead.")
    report = await kb.ingest([f])
    assert report.counts["updated"] == 1
    docs, _chunks, files = await counts(kb)
    assert (docs, files) == (1, 1)
    assert await kb.search("penguins", mode="text") == []
    assert [h.source for h in await kb.search("giraffes", mode="text")] == [str(f.resolve())]
    assert await orphan_chunks(kb) == 0


async def test_changed_file_keeps_document_shared_with_another_source(
        kb: KnowledgeBase, tmp_path: Path) -> None:
    a = write(tmp_path / "a.md", "# Shared\n\nText about otters.")
    b = write(tmp_path / "b.md", "# Shared\n\nText about otters.")
    await kb.ingest([a, b])
    write(a, "# Changed\n\nNow about beavers.")
    await kb.ingest([a])
    assert [h.source for h in await kb.search("otters", mode="text")] == [str(b.resolve())]
    assert len(await kb.search("beavers", mode="text")) == 1


async def test_failure_between_document_and_chunks_leaves_nothing(
        kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    long_text = "\n\n".join(f"Paragraph {n} about rivers and bridges. " * 8 for n in range(400))
    f = write(tmp_path / "long.md", long_text)
    original = ChunkStorage.rows

    def poisoned(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        rows = original(*args, **kwargs)
        assert len(rows) > 150  # several INSERT statements: the failure is in a later one
        rows[-1]["embedding"] = [0.5, 0.5]  # wrong dimension: the engine rejects the row
        return rows

    monkeypatch.setattr(ChunkStorage, "rows", poisoned)
    with pytest.raises(StoreError, match="dimension"):
        await kb.ingest([f])
    assert await counts(kb) == (0, 0, 0)
    monkeypatch.setattr(ChunkStorage, "rows", original)
    report = await kb.ingest([f])  # a re-run converges
    assert report.counts["ingested"] == 1
    docs, chunks, files = await counts(kb)
    assert (docs, files) == (1, 1) and chunks == report.chunks_written


@pytest.mark.slow
def test_crash_mid_ingest_leaves_nothing_after_reopen(tmp_path: Path) -> None:
    db = tmp_path / "kb"
    long_text = "\n\n".join(f"Paragraph {n} about canals and locks. " * 8 for n in range(400))
    f = write(tmp_path / "long.md", long_text)
    script = textwrap.dedent(f"""
        import asyncio, os
        from surrealdocs import KnowledgeBase
        from surrealdocs.store.connection import Store

        original = Store.transaction

        async def crash(self, *statements):
            if any("complete FROM ONLY" in s.sql for s in statements):
                os._exit(9)  # the process dies after the chunks, before the final commit
            return await original(self, *statements)

        Store.transaction = crash

        async def main():
            kb = await KnowledgeBase.open({str(db)!r}, model="hashing-64")
            await kb.ingest([{str(f)!r}])

        asyncio.run(main())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == 9, proc.stderr.decode()[-2000:]

    import asyncio

    async def check() -> None:
        store = await connect(Settings(db=str(db)))  # the debris of the crash is there...
        try:
            (debris,) = await store.query("SELECT count() AS n FROM chunks GROUP ALL;")
            assert debris[0]["n"] > 100
        finally:
            await store.close()
        async with await KnowledgeBase.open(str(db), model="hashing-64") as kb:
            assert await counts(kb) == (0, 0, 0)  # ...and opening the store cleans it up
            assert await kb.search("canals", mode="text") == []
            report = await kb.ingest([f])  # and a re-run converges
            assert report.counts["ingested"] == 1
            docs, chunks, files = await counts(kb)
            assert (docs, files) == (1, 1) and chunks == report.chunks_written
            assert (await kb.search("canals", mode="text"))

    asyncio.run(check())


async def test_bad_input_is_reported_and_the_rest_lands(kb: KnowledgeBase, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    good = write(tmp_path / "good.md", "# Good\n\nA perfectly fine file about kites.")
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 truncated garbage")
    unreadable = write(tmp_path / "locked.md", "# Locked\n\nYou cannot read me.")
    empty = write(tmp_path / "empty.txt", "")
    if os.geteuid() == 0:  # root reads anything: make this one path fail as EACCES would
        real_open = os.open

        def os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if Path(path) == unreadable.resolve():
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", os_open)
    else:
        unreadable.chmod(0)
    missing = tmp_path / "missing.pdf"
    report = await kb.ingest([good, broken, unreadable, empty, missing])
    by_name = {Path(r.source).name: r for r in report.results}
    assert by_name["good.md"].status == "ingested"
    assert by_name["broken.pdf"].status == "failed" and "PDF" in (by_name["broken.pdf"].reason
                                                                  or "")
    assert by_name["locked.md"].status == "failed"
    assert "Permission denied" in (by_name["locked.md"].reason or "")
    assert by_name["empty.txt"].status == "empty"
    assert by_name["missing.pdf"].status == "failed"
    assert by_name["missing.pdf"].reason == "no such file or directory"
    docs, _, _ = await counts(kb)
    assert docs == 1
    # failures are remembered: an unchanged broken file is not extracted again, and is
    # reported as failed with its reason on every run (a nightly job stays red)...
    again = await kb.ingest([broken])
    assert again.results[0].status == "failed" and "PDF" in (again.results[0].reason or "")
    assert again.results[0].last_status == "failed" and again.counts["failed"] == 1
    # ...unless asked
    retried = await kb.ingest([broken], retry_failed=True)
    assert retried.results[0].status == "failed"


async def test_delete_source(kb: KnowledgeBase, tmp_path: Path) -> None:
    a = write(tmp_path / "a.md", "# A\n\nAbout zebras.")
    b = write(tmp_path / "b.md", "# A\n\nAbout zebras.")
    await kb.ingest([a, b])
    assert await kb.delete(str(a)) is True
    assert await counts(kb) == (1, 1, 1)
    assert await kb.delete(str(b)) is True
    assert await counts(kb) == (0, 0, 0)
    assert await orphan_chunks(kb) == 0
    assert await kb.delete(str(b)) is False


async def test_big_ingest_rebuilds_the_vector_index(tmp_path: Path) -> None:
    settings = Settings(db="mem://", model="hashing-64", rebuild_threshold=20, chunk_size=200,
                        chunk_overlap=0)
    text = "\n\n".join(f"Section {n}: facts about topic{n} and more words here." * 3
                       for n in range(40))
    f = write(tmp_path / "big.md", text)
    async with await KnowledgeBase.open(settings=settings) as kb:
        report = await kb.ingest([f])
        assert report.index_rebuilt
        assert (await kb.stats()).vectors_outside_graph == 0
        hits = await kb.search("topic7", mode="vector", limit=3)
        assert len(hits) == 3


async def test_a_large_graph_waits_for_a_share_of_its_size_before_a_rebuild() -> None:
    # threshold 5, fraction 0.5: 20 vectors are built at once; then 6 new ones are past the
    # threshold but not half of the graph, so they wait (searched exactly); 12 are.
    settings = Settings(db="mem://", model="hashing-64", rebuild_threshold=5,
                        rebuild_fraction=0.5)
    async with await KnowledgeBase.open(settings=settings) as kb:
        def notes(start: int, n: int) -> list[tuple[str, str]]:
            return [(f"note://{i}", f"note {i} about heron{i}") for i in range(start, start + n)]

        assert (await kb.ingest_texts(notes(0, 20))).index_rebuilt
        assert (await kb.stats()).vectors_outside_graph == 0
        assert not (await kb.ingest_texts(notes(20, 6))).index_rebuilt
        assert (await kb.stats()).vectors_outside_graph == 6
        hits = await kb.search("heron23", mode="vector", limit=1)
        assert hits[0].source == "note://23"  # a waiting vector is found by the exact scan
        assert (await kb.ingest_texts(notes(26, 6))).index_rebuilt
        assert (await kb.stats()).vectors_outside_graph == 0
    with pytest.raises(ConfigurationError, match="rebuild_fraction"):
        Settings(rebuild_fraction=-0.1)


def test_blocking_wrapper(tmp_path: Path) -> None:
    from surrealdocs import SyncKnowledgeBase

    with SyncKnowledgeBase(str(tmp_path / "kb"), model="hashing-64") as kb:
        report = kb.ingest([SAMPLES / "bm25.txt"])
        assert report.counts["ingested"] == 1
        result = kb.ingest_bytes(b"plain words about herons", mime_type="text/plain",
                                 source="note://heron")
        assert result.status == "ingested"
        assert [h.source for h in kb.search("herons", mode="text")] == ["note://heron"]
        assert kb.stats().documents == 2
        assert kb.delete("note://heron") is True
        assert kb.stats().documents == 1


async def test_limits_on_file_size_and_chunks(tmp_path: Path) -> None:
    settings = Settings(db="mem://", model="hashing-64", chunk_size=100, chunk_overlap=10,
                        max_file_bytes=2_000, max_chunks_per_document=5)
    async with await KnowledgeBase.open(settings=settings) as kb:
        big = write(tmp_path / "big.txt", "word " * 1_000)
        many = write(tmp_path / "many.txt", "Short sentence number one here. " * 40)
        fine = write(tmp_path / "fine.txt", "A short note about cranes.")
        report = await kb.ingest([big, many, fine])
        by_name = {Path(r.source).name: r for r in report.results}
        assert by_name["big.txt"].status == "failed"
        assert "the file has 5.0 kB; the limit is 2.0 kB" in (by_name["big.txt"].reason or "")
        assert by_name["many.txt"].status == "failed"
        assert "chunks; the limit is 5" in (by_name["many.txt"].reason or "")
        assert by_name["fine.txt"].status == "ingested"
        result = await kb.ingest_bytes(b"x" * 3_000, mime_type="text/plain", source="b://1")
        assert result.status == "failed" and "SURREALDOCS_MAX_FILE_BYTES" in (result.reason
                                                                              or "")
    with pytest.raises(ConfigurationError):
        Settings(max_file_bytes=0)


class _WindowedHashing(HashingEmbedder):
    """The hashing model, said to read 40 word pieces (a word is one here)."""

    max_tokens = 40

    def count_tokens(self, texts: Any) -> list[int]:
        return [len(t.split()) + 2 for t in texts]


async def test_chunks_are_fitted_to_the_models_window() -> None:
    short = " ".join(f"s{i}." for i in range(30))  # 32 word pieces: fits
    long = " ".join(f"l{i}" for i in range(200))  # one line, 202 word pieces
    for fit in (True, False):
        settings = Settings(db="mem://", chunk_size=60, chunk_overlap=10, fit_chunks=fit)
        async with await KnowledgeBase.open(settings=settings,
                                            embedder=_WindowedHashing(64)) as kb:
            await kb.ingest_texts({"t://short": short, "t://long": long})
            one = await kb.document("t://short")
            assert one.chunks is not None
            if fit:  # one vector for the whole text
                assert one.chunk_count == 1 and one.chunks[0].char_end == len(short)
            else:  # kreuzberg's chunks of 60 characters
                assert one.chunk_count >= 3
            hits = await kb.search("s17", mode="text")
            assert hits and hits[0].document_id == one.id
        settings = Settings(db="mem://", chunk_size=4000, chunk_overlap=100, fit_chunks=fit)
        async with await KnowledgeBase.open(settings=settings,
                                            embedder=_WindowedHashing(64)) as kb:
            await kb.ingest_texts({"t://long": long})
            doc = await kb.document("t://long")
            assert doc.content is not None and doc.chunks is not None
            texts = [doc.content[c.char_start:c.char_end] for c in doc.chunks]
            if fit:  # cut so that the model reads every word
                assert len(texts) >= 5 and all(len(t.split()) <= 38 for t in texts)
                assert {w for t in texts for w in t.split()} == set(long.split())
            else:
                assert len(texts) == 1


async def test_vectors_outside_the_graph_are_never_more_than_the_chunks(
        kb: KnowledgeBase) -> None:
    """Replacing a source's text many times writes many vectors, most of them deleted
    since: the store holds its chunks' vectors only, and says no more wait for the graph."""
    for version in range(6):
        await kb.ingest_texts({"note://x": f"Version {version} of a short note about herons."})
    stats = await kb.stats()
    assert stats.chunks == 1
    assert stats.vectors_outside_graph == 1


async def test_progress_is_told_each_long_step_as_it_begins(open_kb: StoreFactory,
                                                             tmp_path: Path) -> None:
    """Issue 43: a progress display learns what each file is doing (extracting, embedding
    its chunks, writing) and when the vector graph is built, not only when a file ends."""
    kb = await open_kb(rebuild_threshold=1, rebuild_fraction=0.0)
    for name in ("a.md", "b.md"):
        (tmp_path / name).write_text(f"# {name}\n\nHerons wade in {name} water.")
    steps: list[tuple[str, str]] = []

    def on_result(result: Any) -> None:
        steps.append((result.source, "done"))

    on_result.started = lambda source: steps.append((source, "started"))  # type: ignore
    on_result.step = lambda source, name: steps.append((source, name))  # type: ignore
    report = await kb.ingest([tmp_path], on_result=on_result)
    assert report.counts["ingested"] == 2 and report.index_rebuilt
    for name in ("a.md", "b.md"):
        source = str(tmp_path / name)
        assert [s for src, s in steps if src == source] == [
            "started", "extracting", "embedding 1 chunk", "writing", "done"]
    assert steps[-1] == ("", "building the vector graph")


async def test_a_running_ingest_job_says_what_each_file_is_doing(open_kb: StoreFactory,
                                                                  tmp_path: Path) -> None:
    """Issue 43: an ingest job's progress (the API's job stream, the page) names the step
    of each file in flight, as the command line's bar does, not only the files done."""
    import threading

    kb = await open_kb()
    (tmp_path / "herons.md").write_text("Grey herons wade in shallow water.")
    release = threading.Event()
    embed = kb.embedder.embed_documents  # type: ignore[union-attr]

    def held(texts: Any) -> Any:  # the model waits until the test has seen the step
        release.wait(PATIENCE)
        return embed(texts)

    kb.embedder.embed_documents = held  # type: ignore[union-attr,method-assign]
    job = await kb.ingest_jobs.submit([("upload://herons.md", tmp_path / "herons.md")])
    seen: list[dict[str, str]] = []
    deadline = asyncio.get_running_loop().time() + PATIENCE
    while asyncio.get_running_loop().time() < deadline:
        doing = ((await kb.jobs.get(job.id)).result or {}).get("doing") or {}
        if doing and doing not in seen:
            seen.append(doing)
        if doing.get("upload://herons.md") == "embedding 1 chunk":
            break
        await asyncio.sleep(0.05)
    release.set()
    assert seen[-1] == {"upload://herons.md": "embedding 1 chunk"}, seen
    assert {step for d in seen for step in d.values()} <= {
        "reading", "extracting", "embedding 1 chunk"}
    finished = await job.wait(timeout=PATIENCE)
    assert finished.status == "done", finished.error
    assert finished.result["counts"]["ingested"] == 1
