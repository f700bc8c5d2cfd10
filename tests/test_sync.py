"""Sync: a folder and its knowledge base stay identical, and only what changed costs work.

Edits embed only their changed chunks (a counting embedder says so), renames extract and
embed nothing, vanished files take their text with them (unless another file holds it),
dry runs change nothing, sources outside the folders are never touched, and ``watch``
follows a folder live."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import pytest_asyncio

import surrealdocs.core.ingest as ingest_module
import surrealdocs.core.sync as sync_module
from conftest import PATIENCE
from surrealdocs import ConfigurationError, KnowledgeBase, Settings
from surrealdocs.embed.hashing import HashingEmbedder
from surrealdocs.parts.results import id_text
from surrealdocs.store.schema import SCHEMA_VERSION

pytest_plugins = ["remote_engine"]


class CountingEmbedder(HashingEmbedder):
    """The hashing model, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__(64)
        self.texts: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> Any:
        self.texts += list(texts)
        return super().embed_documents(texts)


@pytest_asyncio.fixture
async def counting() -> AsyncIterator[tuple[KnowledgeBase, CountingEmbedder]]:
    embedder = CountingEmbedder()
    settings = Settings(db="mem://", model="hashing-64", chunk_size=300, chunk_overlap=30)
    kb = await KnowledgeBase.open(settings=settings, embedder=embedder)
    try:
        yield kb, embedder
    finally:
        await kb.close()


@pytest.fixture
def extractions(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every call of the extractor, by path."""
    calls: list[Any] = []
    original = ingest_module.extract_file

    async def counting(path: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(path)
        return await original(path, *args, **kwargs)

    monkeypatch.setattr(ingest_module, "extract_file", counting)
    return calls


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def age(path: Path, seconds: float = 60.0) -> None:
    """Make a file look written a while ago (a just-written file's time is not trusted)."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def word(k: int, j: int) -> str:
    """A word of letters only (the analyzer splits letters from digits), one per (k, j)."""
    def letters(n: int) -> str:
        return "".join(chr(ord("a") + int(d)) for d in str(n))
    return f"zq{letters(k)}y{letters(j)}"


def paragraphs(n: int, tag: str = "") -> list[str]:
    return [f"Paragraph {k}{tag}. " + " ".join(word(k, j) for j in range(40))
            for k in range(n)]


async def sources(kb: KnowledgeBase) -> dict[str, str]:
    (rows,) = await kb.store.query("SELECT path, document FROM files;")
    return {r["path"]: str(r["document"]) for r in rows}


async def snapshot(kb: KnowledgeBase) -> list[Any]:
    """Everything a sync could change, in a comparable form."""
    return await kb.store.query(
        "SELECT * FROM files ORDER BY path;"
        " SELECT * OMIT updated_at FROM documents ORDER BY id;"
        " SELECT id, document, chunk_index, char_start, char_end, text_hash, generation"
        " FROM chunks ORDER BY id;")


async def healthy(kb: KnowledgeBase) -> None:
    """No orphan chunk, no incomplete document, no source pointing at nothing, and each
    document's chunks are its text, in order."""
    orphans, incomplete, dangling = await kb.store.query(
        "SELECT VALUE id FROM chunks WHERE document.id = NONE;"
        " SELECT VALUE id FROM documents WHERE complete = false;"
        " SELECT VALUE id FROM files WHERE document != NONE AND document.id = NONE;")
    assert orphans == [] and incomplete == [] and dangling == []
    (docs,) = await kb.store.query("SELECT id, content, chunk_count FROM documents;")
    for doc in docs:
        (chunks,) = await kb.store.query(
            "SELECT chunk_index, char_start, char_end, content FROM chunks"
            " WHERE document = $d ORDER BY chunk_index;", {"d": doc["id"]})
        assert [c["chunk_index"] for c in chunks] == list(range(doc["chunk_count"]))
        for c in chunks:
            assert doc["content"][c["char_start"]:c["char_end"]] == c["content"]


async def test_edit_one_paragraph_embeds_only_the_changed_chunks(
        counting: tuple[KnowledgeBase, CountingEmbedder], tmp_path: Path) -> None:
    kb, embedder = counting
    root = tmp_path / "docs"
    texts = paragraphs(40)
    book = write(root / "book.md", "\n\n".join(texts))
    first = await kb.sync([root])
    assert first.counts["ingested"] == 1
    total = first.chunks_written
    assert total >= 30 and len(embedder.texts) == total
    await kb.rebuild_index()  # the vectors are in the HNSW graph: moved ones must stay found
    (before, old_texts) = await kb.store.query("SELECT VALUE id FROM chunks;"
                                               " SELECT VALUE content FROM chunks;")

    embedder.texts.clear()
    texts[20] = "Paragraph 20 now speaks of lighthouses and their keepers instead."
    write(book, "\n\n".join(texts))
    report = await kb.sync([root])
    assert report.counts["updated"] == 1
    assert report.results[0].chunks == total or report.chunks_written > 0
    # only the chunks that hold the edited paragraph were embedded
    assert 1 <= len(embedder.texts) <= 3, embedder.texts
    assert all("lighthouses" in t for t in embedder.texts)
    assert report.chunks_embedded == len(embedder.texts)
    (new_texts,) = await kb.store.query("SELECT VALUE content FROM chunks;")
    assert sorted(embedder.texts) == sorted(set(new_texts) - set(old_texts))
    # and the other chunks kept their rows (moved to the new version, not rewritten)
    (after,) = await kb.store.query("SELECT VALUE id FROM chunks;")
    assert len(set(map(str, before)) & set(map(str, after))) >= len(after) - 3
    hits = await kb.search("lighthouses keepers", mode="text")
    assert hits and hits[0].source == str(book.resolve())
    assert await kb.search(word(20, 7), mode="text") == []
    assert await kb.search(word(21, 7), mode="text")
    # a moved chunk's vector is its own: its text finds it first
    (kept,) = await kb.store.query("SELECT id, content FROM chunks WHERE id IN $ids LIMIT 1;",
                                   {"ids": before})
    vector_hits = await kb.search(kept[0]["content"], mode="vector", limit=1)
    assert vector_hits[0].chunk_id == id_text(kept[0]["id"])
    await healthy(kb)
    assert (await kb.stats()).documents == 1


async def test_reverting_an_edit_reuses_vectors_and_ids_stay_unique(
        counting: tuple[KnowledgeBase, CountingEmbedder], tmp_path: Path) -> None:
    kb, embedder = counting
    texts = paragraphs(30)
    book = write(tmp_path / "d" / "book.md", "\n\n".join(texts))
    await kb.sync([tmp_path / "d"])
    original = list(texts)
    for n in range(3):  # edit, revert, edit again: chunk ids moved back and forth never clash
        texts = list(original)
        if n != 1:
            texts[10] = f"An edit number {n} about puffins."
        write(book, "\n\n".join(texts))
        embedder.texts.clear()
        report = await kb.sync([tmp_path / "d"])
        assert report.counts["updated"] == 1 and len(embedder.texts) <= 3
        await healthy(kb)
    (ids,) = await kb.store.query("SELECT VALUE id FROM chunks;")
    assert len(ids) == len(set(map(str, ids)))


async def test_a_text_stored_again_takes_fresh_ids_where_moved_chunks_hold_its_own(
        counting: tuple[KnowledgeBase, CountingEmbedder], tmp_path: Path) -> None:
    kb, _ = counting
    texts = paragraphs(40)
    book = write(tmp_path / "d" / "book.md", "\n\n".join(texts))
    await kb.sync([tmp_path / "d"])
    edited = list(texts)
    edited[5] = "An edit about puffins."
    write(book, "\n\n".join(edited))
    await kb.sync([tmp_path / "d"])  # the unchanged chunks move over, keeping their ids
    copy = write(tmp_path / "e" / "copy.md", "\n\n".join(texts))  # the first text again
    report = await kb.ingest([copy])
    assert report.counts["ingested"] == 1
    (doc,) = await kb.store.query("SELECT VALUE document FROM ONLY files WHERE path = $p"
                                  " LIMIT 1;", {"p": str(copy.resolve())})
    (rows,) = await kb.store.query("SELECT id, chunk_index FROM chunks WHERE document = $d;",
                                   {"d": doc})
    assert len(rows) > 10  # written in batches, not as one small transaction
    fresh = [r for r in rows if r["id"].id != f"{doc.id}_{r['chunk_index']}"]
    assert fresh and len(fresh) < len(rows)  # the ids held by moved chunks, and only those
    (ids,) = await kb.store.query("SELECT VALUE id FROM chunks;")
    assert len(ids) == len(set(map(str, ids)))
    await healthy(kb)
    hits = await kb.search(word(5, 3), mode="text")
    assert [h.source for h in hits] == [str(copy.resolve())]


async def test_deleted_file_is_no_longer_found(kb: KnowledgeBase, tmp_path: Path) -> None:
    root = tmp_path / "docs"
    gone = write(root / "walrus.md", "# Walrus\n\nWalruses live on ice floes.")
    write(root / "keep.md", "# Keep\n\nPenguins stay.")
    await kb.sync([root])
    assert await kb.search("walruses", mode="text")
    gone.unlink()
    report = await kb.sync([root])
    assert report.counts["deleted"] == 1 and report.counts["unchanged"] == 1
    assert await kb.search("walruses", mode="text") == []
    assert await kb.search("walruses", mode="vector", min_score=0.5) == []
    assert list(await sources(kb)) == [str((root / "keep.md").resolve())]
    await healthy(kb)


async def test_renamed_file_is_neither_extracted_nor_embedded(
        counting: tuple[KnowledgeBase, CountingEmbedder], tmp_path: Path,
        extractions: list[Any]) -> None:
    kb, embedder = counting
    root = tmp_path / "docs"
    old = write(root / "a" / "otters.md", "\n\n".join(paragraphs(12, " otters")))
    await kb.sync([root])
    (doc,) = (await sources(kb)).values()
    extractions.clear()
    embedder.texts.clear()
    new = root / "b" / "sea-otters.md"
    new.parent.mkdir()
    old.rename(new)
    report = await kb.sync([root])
    assert report.counts["renamed"] == 1 and report.counts["deleted"] == 0
    (result,) = [r for r in report.results if r.status == "renamed"]
    assert (result.previous, result.source) == (str(old.resolve()), str(new.resolve()))
    assert extractions == [] and embedder.texts == []
    assert await sources(kb) == {str(new.resolve()): doc}
    (row,) = (await kb.store.query("SELECT source, sources FROM documents;"))[0]
    assert row == {"source": str(new.resolve()), "sources": [str(new.resolve())]}
    hits = await kb.search("otters", mode="text")
    assert hits and {h.source for h in hits} == {str(new.resolve())}
    await healthy(kb)


async def test_copy_of_a_stored_file_is_not_extracted(
        counting: tuple[KnowledgeBase, CountingEmbedder], tmp_path: Path,
        extractions: list[Any]) -> None:
    kb, embedder = counting
    root = tmp_path / "docs"
    a = write(root / "a.md", "# Herons\n\nHerons wade in shallow water.")
    await kb.sync([root])
    extractions.clear()
    embedder.texts.clear()
    shutil.copy(a, root / "copy.md")
    report = await kb.sync([root])
    assert report.counts["duplicate"] == 1 and extractions == [] and embedder.texts == []
    (row,) = (await kb.store.query("SELECT sources FROM documents;"))[0]
    assert sorted(row["sources"]) == sorted([str(a.resolve()), str((root / "copy.md").resolve())])


async def test_dry_run_changes_nothing(kb: KnowledgeBase, tmp_path: Path) -> None:
    root = tmp_path / "docs"
    for n in range(4):
        write(root / f"f{n}.md", f"# File {n}\n\n" + "\n\n".join(paragraphs(3, f" f{n}")))
    await kb.sync([root])
    write(root / "f0.md", "# File 0\n\nRewritten.")
    (root / "f1.md").rename(root / "renamed.md")
    (root / "f2.md").unlink()
    write(root / "new.md", "# New\n\nBrand new.")
    before = await snapshot(kb)
    plan = await kb.sync([root], dry_run=True)
    assert plan.dry_run and plan.planned == {"add": 1, "update": 1, "rename": 1, "delete": 1,
                                             "unchanged": 1}
    assert {(c.action, Path(c.source).name, c.previous and Path(c.previous).name)
            for c in plan.changes} == {("add", "new.md", None), ("update", "f0.md", None),
                                       ("rename", "renamed.md", "f1.md"),
                                       ("delete", "f2.md", None)}
    assert plan.counts["ingested"] == 0 and plan.to_dict()["dry_run"] is True
    assert await snapshot(kb) == before
    applied = await kb.sync([root])
    assert applied.planned == plan.planned


async def test_file_shared_by_two_paths_survives_deleting_one(kb: KnowledgeBase,
                                                              tmp_path: Path) -> None:
    root = tmp_path / "docs"
    a = write(root / "a.md", "# Same\n\nIdentical text about kingfishers.")
    b = write(root / "sub" / "b.md", "# Same\n\nIdentical text about kingfishers.")
    await kb.sync([root])
    assert (await kb.stats()).documents == 1
    a.unlink()
    report = await kb.sync([root])
    assert report.counts["deleted"] == 1
    hits = await kb.search("kingfishers", mode="text")
    assert hits and {h.source for h in hits} == {str(b.resolve())}
    (row,) = (await kb.store.query("SELECT source, sources FROM documents;"))[0]
    assert row == {"source": str(b.resolve()), "sources": [str(b.resolve())]}
    await healthy(kb)


async def test_sources_outside_the_folders_are_never_touched(kb: KnowledgeBase,
                                                             tmp_path: Path) -> None:
    root = tmp_path / "docs"
    sibling = tmp_path / "docs2"  # shares the folder's name as a prefix
    write(root / "in.md", "# In\n\nInside the folder.")
    outside = write(sibling / "out.md", "# Out\n\nOutside the folder, about lynxes.")
    await kb.ingest([outside])
    await kb.ingest_texts({"note://x": "a note about badgers"})
    await kb.sync([root])
    outside.unlink()  # even gone from disk: it is not in the synced folder
    (root / "in.md").unlink()
    report = await kb.sync([root])
    assert report.counts["deleted"] == 1
    assert set(await sources(kb)) == {str(outside.resolve()), "note://x"}
    assert await kb.search("lynxes", mode="text") and await kb.search("badgers", mode="text")


async def test_glob_and_hidden_files_limit_what_is_mirrored(kb: KnowledgeBase,
                                                            tmp_path: Path) -> None:
    root = tmp_path / "docs"
    md = write(root / "a.md", "# A\n\nMarkdown about cranes.")
    txt = write(root / "b.txt", "Plain text about storks.")
    hidden = write(root / ".hidden" / "c.md", "# Hidden\n\nAbout ibises.")
    await kb.ingest([txt, hidden])  # ingested by name: not the sync's business
    report = await kb.sync([root], glob="**/*.md")
    assert [Path(r.source).name for r in report.results] == ["a.md"]
    md.unlink()
    txt.unlink()
    hidden.unlink()
    report = await kb.sync([root], glob="**/*.md")
    assert report.counts["deleted"] == 1
    assert set(await sources(kb)) == {str(txt.resolve()), str(hidden.resolve())}


async def test_unchanged_files_are_not_read(kb: KnowledgeBase, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "docs"
    files = [write(root / f"f{n}.md", f"# F{n}\n\nText number {n}.") for n in range(5)]
    fresh = write(root / "fresh.md", "# Fresh\n\nJust written.")
    for f in files:
        age(f)
    await kb.sync([root])
    (rows,) = await kb.store.query("SELECT path, mtime_ns FROM files;")
    recorded = {Path(r["path"]).name: r["mtime_ns"] for r in rows}
    assert recorded["fresh.md"] is None  # too recent to vouch for the bytes
    assert all(recorded[f.name] == f.stat().st_mtime_ns for f in files)
    age(fresh)
    hashed: list[str] = []
    original = sync_module._hash_file

    def counting(path: str) -> str | None:
        hashed.append(path)
        return original(path)

    monkeypatch.setattr(sync_module, "_hash_file", counting)
    report = await kb.sync([root])
    assert report.counts["unchanged"] == 6 and hashed == [str(fresh.resolve())]
    hashed.clear()
    report = await kb.sync([root])
    assert report.counts["unchanged"] == 6 and hashed == []
    age(files[0], 30)  # touched, same bytes: read, found unchanged, new time remembered
    report = await kb.sync([root])
    assert report.counts["unchanged"] == 6 and hashed == [str(files[0].resolve())]
    hashed.clear()
    await kb.sync([root])
    assert hashed == []


async def test_unreadable_and_missing_paths_fail_alone(kb: KnowledgeBase, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "docs"
    locked = tmp_path / "docs" / "locked"
    write(locked / "secret.md", "# Secret\n\nAbout moles.")
    write(root / "open.md", "# Open\n\nAbout voles.")
    other = tmp_path / "other"
    write(other / "x.md", "# X\n\nAbout shrews.")
    await kb.sync([root, other])
    assert len(await sources(kb)) == 3
    # a directory that cannot be read: its files are not "vanished"
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        if isinstance(path, (str, os.PathLike)) and Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    shutil.rmtree(other)  # a folder that is gone: nothing in it counts as vanished either
    report = await kb.sync([root, other])
    failed = {r.source: r.reason for r in report.results if r.status == "failed"}
    assert any("Permission denied" in (why or "") for why in failed.values()), failed
    assert str(other) in failed or any(str(other) in s for s in failed)
    assert report.counts["deleted"] == 0 and len(await sources(kb)) == 3
    assert await kb.search("moles", mode="text") and await kb.search("shrews", mode="text")


async def test_links_leading_outside_are_not_followed(kb: KnowledgeBase, tmp_path: Path) -> None:
    root = tmp_path / "docs"
    outside = write(tmp_path / "elsewhere" / "far.md", "# Far\n\nAbout yaks.")
    write(root / "near.md", "# Near\n\nAbout llamas.")
    (root / "link.md").symlink_to(outside)
    report = await kb.sync([root])
    assert report.counts["skipped"] == 1 and report.counts["ingested"] == 1
    assert await kb.search("yaks", mode="text") == []


async def test_sync_into_a_notebook_keeps_vector_copies_right(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    settings = Settings(db="mem://", model="hashing-64", chunk_size=300, chunk_overlap=30)
    async with await KnowledgeBase.open(settings=settings, embedder=embedder) as kb:
        root = tmp_path / "docs"
        texts = paragraphs(20, " nb")
        book = write(root / "book.md", "\n\n".join(texts))
        write(root / "other.md", "# Other\n\nAbout geckos.")
        nb = await kb.notebooks.create_notebook("Reptiles")
        report = await kb.sync([root], notebook=nb)
        assert report.linked == 2
        assert (await kb.sync([root], notebook=nb)).linked == 0
        texts[5] = "Paragraph 5 is now about iguanas basking."
        write(book, "\n\n".join(texts))
        embedder.texts.clear()
        report = await kb.sync([root], notebook="Reptiles")
        assert report.counts["updated"] == 1 and len(embedder.texts) <= 3
        table = kb.store.names.notebook_vectors(nb.id)
        (copies, chunks, stale) = await kb.store.query(
            f"SELECT VALUE chunk FROM {table};"
            " SELECT VALUE id FROM chunks WHERE notebooks CONTAINS $nb;"
            f" SELECT VALUE id FROM {table} WHERE document != chunk.document;", {"nb": nb.id})
        assert sorted(map(str, copies)) == sorted(map(str, chunks)) and stale == []
        hits = await kb.search("iguanas basking", notebook=nb, mode="vector", limit=1)
        assert "iguanas" in hits[0].content
        assert (await kb.notebooks.get_source(hits[0].document_id)).source == \
            str(book.resolve())
        await healthy(kb)


async def test_revectorizing_a_notebook_source_reuses_its_vectors() -> None:
    embedder = CountingEmbedder()
    settings = Settings(db="mem://", model="hashing-64", chunk_size=300, chunk_overlap=30)
    async with await KnowledgeBase.open(settings=settings, embedder=embedder) as kb:
        nb = await kb.notebooks.create_notebook("N")
        source = await kb.notebooks.add_text(nb, text="\n\n".join(paragraphs(15)), title="t")
        job = await source.vectorize()
        assert (await job.wait(timeout=PATIENCE)).status == "done"
        first = len(embedder.texts)
        assert first > 5
        embedder.texts.clear()
        job = await source.vectorize()  # a new generation of the same chunks
        assert (await job.wait(timeout=PATIENCE)).status == "done"
        assert embedder.texts == []
        assert len(await source.get_embeddings()) == first


async def test_migration_9_hashes_the_chunks_of_an_older_store(tmp_path: Path) -> None:
    from surrealdocs.store.names import Names

    db = str(tmp_path / "kb")
    texts = paragraphs(20)
    book = write(tmp_path / "d" / "book.md", "\n\n".join(texts))
    async with await KnowledgeBase.open(db, model="hashing-64", chunk_size=300,
                                        chunk_overlap=30) as kb:
        await kb.ingest([book])
        # back to version 8: no text hashes, no modification times
        await kb.store.query(
            "REMOVE INDEX chunks_text_hash ON chunks; REMOVE FIELD text_hash ON chunks;"
            " REMOVE INDEX files_file_hash ON files; REMOVE FIELD mtime_ns ON files;"
            " UPDATE chunks UNSET text_hash; UPSERT $k SET version = 8;",
            {"k": Names().schema_key})
        (unhashed,) = await kb.store.query("SELECT VALUE text_hash FROM chunks;")
        assert set(unhashed) == {None}
    embedder = CountingEmbedder()
    async with await KnowledgeBase.open(db, model="hashing-64", embedder=embedder,
                                        chunk_size=300, chunk_overlap=30) as kb:
        (schema, hashes) = await kb.store.query(
            "SELECT VALUE version FROM ONLY $k; SELECT content, text_hash FROM chunks;",
            {"k": Names().schema_key})
        assert schema == SCHEMA_VERSION and hashes
        assert all(ingest_module.sha256(r["content"]) == r["text_hash"] for r in hashes)
        texts[3] = "A new third paragraph about voles."
        write(book, "\n\n".join(texts))
        report = await kb.ingest([book])
        assert report.counts["updated"] == 1 and 1 <= len(embedder.texts) <= 3


@pytest.mark.slow
async def test_watch_follows_creates_edits_and_deletes(kb: KnowledgeBase,
                                                      tmp_path: Path) -> None:
    root = tmp_path / "docs"
    write(root / "first.md", "# First\n\nAbout beavers.")
    stop = asyncio.Event()
    passes: list[Any] = []
    task = asyncio.create_task(kb.watch([root], settle=0.1, stop=stop, on_pass=passes.append))

    async def until(check: Any, what: str, timeout: float = PATIENCE) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if task.done():
                task.result()  # raises what stopped it
            if await check():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"watch did not pick up {what} in {timeout} s")

    async def found(word: str) -> bool:
        return bool(await kb.search(word, mode="text"))

    try:
        await until(lambda: found("beavers"), "the first pass")
        new = write(root / "sub" / "new.md", "# New\n\nAbout muskrats.")
        await until(lambda: found("muskrats"), "a created file")
        write(new, "# New\n\nNow about minks.")
        await until(lambda: found("minks"), "an edited file")
        assert not await found("muskrats")
        new.unlink()

        async def gone() -> bool:
            return not await found("minks")

        await until(gone, "a deleted file")
        assert await found("beavers")
    finally:
        stop.set()
        await asyncio.wait_for(task, PATIENCE)
    assert len(passes) >= 4
    await healthy(kb)


@pytest.mark.parametrize("transport", ["ws", "http"])
async def test_sync_on_a_server(remote_engine: Any, transport: str, tmp_path: Path) -> None:
    """The same passes over SurrealDB's RPC (the moves run in the server's transaction)."""
    embedder = CountingEmbedder()
    settings = remote_engine.settings(transport, chunk_size=300, chunk_overlap=30)
    async with await KnowledgeBase.open(settings=settings, embedder=embedder) as kb:
        root = tmp_path / "docs"
        texts = paragraphs(12)
        book = write(root / "book.md", "\n\n".join(texts))
        other = write(root / "other.md", "# Other\n\nAbout hedgehogs.")
        await kb.sync([root])
        texts[6] = "Paragraph 6 is about porcupines now."
        write(book, "\n\n".join(texts))
        other.rename(root / "renamed.md")
        embedder.texts.clear()
        report = await kb.sync([root])
        assert (report.counts["updated"], report.counts["renamed"]) == (1, 1)
        assert 1 <= len(embedder.texts) <= 3
        book.unlink()
        assert (await kb.sync([root])).counts["deleted"] == 1
        assert await kb.search("porcupines", mode="text") == []
        assert await kb.search("hedgehogs", mode="text")
        await healthy(kb)


async def test_bad_arguments(kb: KnowledgeBase, tmp_path: Path) -> None:
    for glob in ("", "/etc/*", "../*"):
        with pytest.raises(ConfigurationError, match="glob"):
            await kb.sync([tmp_path], glob=glob)
    with pytest.raises(ConfigurationError, match="at least one"):
        await kb.sync([])
    with pytest.raises(ConfigurationError, match="settle"):
        await kb.watch([tmp_path], settle=0)


async def test_sync_counts_match_an_ingest_of_the_same_files(tmp_path: Path) -> None:
    """A folder synced after it changed holds what a fresh ingest of it would hold."""
    root = tmp_path / "docs"
    rng = np.random.default_rng(3)
    for n in range(12):
        write(root / f"d{n % 3}" / f"f{n}.md",
              "\n\n".join(paragraphs(int(rng.integers(1, 8)), f" f{n}")))
    settings = Settings(db="mem://", model="hashing-64", chunk_size=300, chunk_overlap=30)
    async with await KnowledgeBase.open(settings=settings) as kb:
        await kb.sync([root])
        write(root / "d0" / "f0.md", "\n\n".join(paragraphs(6, " f0 edited")))
        (root / "d1" / "f1.md").rename(root / "d2" / "moved.md")
        (root / "d2" / "f2.md").unlink()
        shutil.copy(root / "d0" / "f3.md", root / "d1" / "copy.md")
        await kb.sync([root])
        synced = await _shape(kb)
        await healthy(kb)
    async with await KnowledgeBase.open(settings=settings) as fresh:
        await fresh.ingest([root])
        assert await _shape(fresh) == synced


async def _shape(kb: KnowledgeBase) -> Any:
    files, docs, chunks = await kb.store.query(
        "SELECT path, status, file_hash, document FROM files ORDER BY path;"
        " SELECT id, array::sort(sources) AS sources, chunk_count FROM documents ORDER BY id;"
        " SELECT document, chunk_index, char_start, char_end, text_hash FROM chunks"
        " ORDER BY document, chunk_index;")
    for f in files:  # "duplicate" or "ingested" depends on which copy came first
        f["status"] = "stored" if f["status"] in ("ingested", "duplicate") else f["status"]
    return files, docs, chunks


# ----- the command line -----------------------------------------------------------------
def cli(*args: str) -> tuple[int, str]:
    from typer.testing import CliRunner

    from surrealdocs.faces.cli import app

    # wide enough that a temporary path is not wrapped inside a table cell
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def test_cli_sync_dry_run_json_and_exit_codes(tmp_path: Path) -> None:
    import json

    db = str(tmp_path / "kb")
    root = tmp_path / "docs"
    write(root / "a.md", "# A\n\nAbout newts.")
    write(root / "b.md", "# B\n\nAbout toads.")
    opts = ("--db", db, "--model", "hashing-64")
    code, out = cli("sync", str(root), *opts)
    assert code == 0 and "Sync summary" in out and "2 files in 1 folder" in out, out
    (root / "a.md").rename(root / "c.md")
    (root / "b.md").unlink()
    code, out = cli("sync", str(root), "--dry-run", *opts)
    assert code == 0 and "Sync plan (dry run)" in out and "nothing was changed" in out
    assert f"rename  {root / 'a.md'} -> {root / 'c.md'}" in out.replace("\n", ""), out
    code, out = cli("sync", str(root), "--json", *opts)
    report = json.loads(out)
    assert code == 0 and report["counts"]["renamed"] == 1 and report["counts"]["deleted"] == 1
    assert report["planned"]["rename"] == 1 and report["changes"][0]["previous"].endswith("a.md")
    broken = root / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 truncated")
    code, out = cli("sync", str(root), *opts)
    assert code == 1 and "broken.pdf" in out
    code, out = cli("sync", str(root), "--notebook", "Amphibians", "--json", *opts)
    # the broken file is unchanged now (its failure is remembered): exit 0
    assert code == 0 and json.loads(out)["linked"] == 1  # c.md's document; broken has none
    for bad, expected in ((["--glob", "/etc/*"], "glob"), (["--glob", ""], "glob"),
                          (["--watch", "--dry-run"], "do not go together"),
                          (["--watch", "--settle", "0"], "settle")):
        code, out = cli("sync", str(root), *bad, *opts)
        assert code == 2 and expected in out, (bad, out)


@pytest.mark.slow
def test_cli_sync_watch_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import threading

    root = tmp_path / "docs"
    write(root / "a.md", "# A\n\nAbout salamanders.")
    cmd = [str(Path(sys.executable).with_name("surrealdocs")), "sync", str(root), "--watch",
           "--settle", "0.1", "--db", str(tmp_path / "kb"), "--model", "hashing-64"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: list[str] = []
    err: list[str] = []
    readers = [threading.Thread(target=lambda f=f, into=into: into.extend(f), daemon=True)
               for f, into in ((proc.stdout, out), (proc.stderr, err))]
    for reader in readers:
        reader.start()

    def wait_for(text: str, lines: list[str]) -> None:
        deadline = time.monotonic() + PATIENCE
        while not any(text in line for line in lines):
            assert time.monotonic() < deadline and proc.poll() is None, \
                f"no {text!r}:\n{''.join(out)}\n{''.join(err)}"
            time.sleep(0.05)

    try:
        wait_for("watching 1 folder", err)  # the first pass is done
        write(root / "b.md", "# B\n\nAbout axolotls.")
        wait_for("b.md", out)
        assert any("ingested" in line and "b.md" in line for line in out)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=PATIENCE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for reader in readers:
        reader.join(timeout=5)
    assert proc.returncode == 0, "".join(err)
    assert "Traceback" not in "".join(out + err) and any("stopped" in e for e in err)
