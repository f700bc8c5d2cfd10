"""Export and import a whole knowledge base (issue 41): the round trip is exact, bad
archives change nothing, an interrupted import finishes when run again."""

from __future__ import annotations

import asyncio
import gzip
import io
import itertools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from surrealdb import RecordID
from typer.testing import CliRunner

from conftest import PATIENCE, SAMPLES, StoreFactory, assert_text_index_matches_chunks
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.errors import ArchiveError
from surrealdocs.faces.cli import app
from surrealdocs.parts.archive import MANIFEST
from surrealdocs.store.carry import carried_tables

if TYPE_CHECKING:  # imported by pytest as a plugin (below), so that its asserts are rewritten
    from remote_engine import RemoteEngine

TEXTS = {
    "note://egrets": "Little egrets have bright yellow feet and wade in shallow water.",
    "note://herons": "Grey herons stand still for a long time before they strike at fish.",
    "note://storks": "White storks nest on chimneys and church towers in spring.",
    "note://cranes": "Common cranes dance in pairs; their calls carry for kilometres.",
    "note://ibis": "The sacred ibis probes mud with its long curved bill for insects.",
}


async def _rich_store(kb: KnowledgeBase) -> None:
    """A store with what an archive must carry: files, several documents per source and
    sources per document, notebooks with their vector copies, notes, a conversation, an
    API key, a deleted document whose chunks the text index has not merged away, and a
    source updated to a new version."""
    await kb.ingest([SAMPLES])
    await kb.ingest_texts(TEXTS)
    await kb.ingest_texts({"note://egrets-again": TEXTS["note://egrets"]})  # two sources
    await kb.ingest_texts({"note://herons": TEXTS["note://herons"] + " They also eat frogs."})
    await kb.ingest_texts({"note://doomed": "A document about moths, deleted later."})
    assert await kb.delete("note://doomed")
    notebooks = kb.notebooks
    birds = await notebooks.create_notebook("Birds", "waders and such")
    await notebooks.file_documents(
        [d.id for d in await kb.documents() if "note://" in str(d.source)], birds)
    await notebooks.add_text(birds, text="Egrets follow cattle to catch insects they stir.",
                             title="Cattle egrets")
    await notebooks.create_notebook("Empty")
    from surrealdocs.core.notebook_service import Note
    await notebooks.add_note(birds, Note(title="Field trip", content="Bring binoculars."))
    store = kb.storage.conversations
    session = await store.create("About egrets", birds.id)
    chunk = (await kb.search("egrets yellow feet", limit=1))[0]
    await kb.store.transaction(*store.add_turn_statements(session["id"], {
        "question": "What colour are egret feet?", "standalone": "egret feet colour",
        "answer": "Yellow [1].", "grounded": True, "model": "openai:tiny",
        "citations": [{"n": 1, "chunk": chunk.chunk_id}],
        "chunks": [RecordID(kb.store.names.chunks, chunk.chunk_id.split(":", 1)[1])]}))
    await kb.keys.create("reader", read_only=True)


async def _tables(kb: KnowledgeBase) -> dict[str, list[dict[str, Any]]]:
    names = kb.store.names
    tables = dict(carried_tables(names))
    tables["vectors"] = names.vectors
    for nb in await kb.notebooks.list_notebooks():
        tables[f"notebook vectors {nb.name}"] = names.notebook_vectors(nb.id)
    out = {}
    for role, table in tables.items():
        omit = " OMIT text_seg" if role == "chunks" else ""
        (rows,) = await kb.store.query(f"SELECT *{omit} FROM {table} ORDER BY id;")
        out[role] = rows
    (model,) = await kb.store.query("SELECT model, dimension, distance FROM ONLY $k;",
                                    {"k": names.embedding_key})
    out["model"] = [model]
    return out


def _queries(texts: list[str], n: int) -> list[str]:
    words = list(dict.fromkeys(w.lower() for t in texts for w in re.findall(r"[A-Za-z]{5,}", t)))
    pairs = [f"{a} {b}" for a, b in itertools.pairwise(words)]
    return (words + pairs)[:n]


async def _searches(kb: KnowledgeBase, queries: list[str]) -> list[list[tuple[str, float]]]:
    out = []
    for query in queries:
        for mode in ("text", "vector", "hybrid"):
            hits = await kb.search(query, mode=mode, limit=10)
            out.append([(h.chunk_id, h.score) for h in hits])
    return out


async def test_a_round_trip_keeps_every_row_and_every_search(open_kb: StoreFactory,
                                                             tmp_path: Any) -> None:
    source = await open_kb()
    await _rich_store(source)
    out = io.BytesIO()
    exported = await source.export(out, with_keys=True)
    assert exported.rows["documents"] >= 10 and exported.vectors == exported.rows["chunks"]
    target_db = f"surrealkv://{tmp_path / 'copy'}"
    out.seek(0)
    imported = await KnowledgeBase.import_archive(
        out, target_db, settings=Settings(model="hashing-64"))
    assert imported.rows == exported.rows and imported.vectors == exported.vectors
    target = await open_kb(db=target_db)
    before, after = await _tables(source), await _tables(target)
    assert set(before) == set(after)
    for role in before:
        assert after[role] == before[role], role
    assert len(before["notebook vectors Birds"]) > 0 and len(before["api_key"]) == 1
    assert len(before["chat_turn"]) == 1 and len(before["note"]) == 1
    contents = [r["content"] for r in before["documents"]]
    queries = _queries(contents, 50)
    assert len(queries) == 50
    old, new = await _searches(source, queries), await _searches(target, queries)
    assert sum(1 for hits in old if hits) > 100
    for a, b in zip(old, new):
        assert [c for c, _ in a] == [c for c, _ in b]
        assert all(abs(x - y) <= 1e-6 for (_, x), (_, y) in zip(a, b))


async def test_keys_travel_only_when_asked(open_kb: StoreFactory, tmp_path: Any) -> None:
    source = await open_kb()
    await source.ingest_texts(TEXTS)
    await source.keys.create("writer")
    out = io.BytesIO()
    report = await source.export(out)
    assert "api_key" not in report.rows
    out.seek(0)
    db = f"surrealkv://{tmp_path / 'copy'}"
    await KnowledgeBase.import_archive(out, db, settings=Settings(model="hashing-64"))
    target = await open_kb(db=db)
    assert await target.keys.list() == []
    assert len(await target.documents()) == len(TEXTS)


def _archive(kb_rows: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(kb_rows)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar}  # type: ignore[union-attr]


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _damaged_archives(good: bytes) -> dict[str, bytes]:
    parts = _archive(good)
    manifest = json.loads(parts[MANIFEST])
    names = [p["name"] for p in manifest["parts"]]
    ordered = [(MANIFEST, parts[MANIFEST])] + [(n, parts[n]) for n in names]

    def with_manifest(change: Any, members: list[tuple[str, bytes]] | None = None) -> bytes:
        m = json.loads(parts[MANIFEST])
        change(m)
        return _tar([(MANIFEST, json.dumps(m).encode())] + (members or ordered[1:]))

    flipped = bytearray(parts["documents.jsonl.gz"])
    flipped[len(flipped) // 2] ^= 0xFF
    bomb_rows = gzip.compress(b"{}\n" * 2_000_000)
    hostile_line = gzip.compress(b'{"id": {"$record": ["documents", "x"]}, "a/b": 1}\n')
    return {
        "truncated": good[: len(good) // 2],
        "not a tar": b"hello, this is not an archive" * 100,
        "empty": b"",
        "checksum": _tar([(n, bytes(flipped) if n == "documents.jsonl.gz" else d)
                          for n, d in ordered]),
        "newer format": with_manifest(lambda m: m.update(version=99)),
        "newer schema": with_manifest(lambda m: m.update(schema=999)),
        "path in a name": _tar([*ordered, ("../evil.jsonl.gz", b"x")]),
        "unlisted member": _tar([*ordered, ("extra.jsonl.gz", b"x")]),
        "missing part": _tar(ordered[:-1]),
        "absurd count": with_manifest(lambda m: _part_of(m, "chunks_vectors.f32").update(
            rows=10**15)),
        "absurd rows": with_manifest(lambda m: _part_of(m, "documents.jsonl.gz").update(
            rows=10**15)),
        "bomb": with_manifest(lambda m: _part_of(m, "documents.jsonl.gz").update(
            raw_bytes=10**12)),
        "bomb rows": _hostile_part(parts, ordered, "files", bomb_rows, raw=6_000_000),
        "hostile field": _hostile_part(parts, ordered, "files", hostile_line),
        "control characters": _tar([(MANIFEST, parts[MANIFEST]), ("docu\x1bments.jsonl.gz",
                                                                  b"x")]),
    }


def _part_of(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in manifest["parts"] if p["name"] == name)


def _hostile_part(parts: dict[str, bytes], ordered: list[tuple[str, bytes]], role: str,
                  data: bytes, raw: int | None = None) -> bytes:
    import hashlib
    manifest = json.loads(parts[MANIFEST])
    name = f"{role}.jsonl.gz"
    for part in manifest["parts"]:
        if part["name"] == name:
            part.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest(),
                        rows=1, raw_bytes=raw if raw is not None else len(gzip.decompress(data)))
    members = [(n, data if n == name else d) for n, d in ordered[1:]]
    return _tar([(MANIFEST, json.dumps(manifest).encode()), *members])


async def test_bad_archives_are_refused_and_change_nothing(open_kb: StoreFactory,
                                                           tmp_path: Any) -> None:
    source = await open_kb()
    await source.ingest_texts(TEXTS)
    out = io.BytesIO()
    await source.export(out)
    for case, data in _damaged_archives(out.getvalue()).items():
        target = tmp_path / re.sub(r"\W", "_", case)
        with pytest.raises(ArchiveError) as refused:
            await KnowledgeBase.import_archive(io.BytesIO(data), f"surrealkv://{target}",
                                               settings=Settings(model="hashing-64"))
            pytest.fail(f"{case}: imported")
        assert str(refused.value), case
        assert not target.exists(), case  # nothing was made, let alone written


async def test_an_import_into_a_store_that_holds_something_is_refused(
        open_kb: StoreFactory, tmp_path: Any) -> None:
    source = await open_kb()
    await source.ingest_texts(TEXTS)
    out = io.BytesIO()
    await source.export(out)
    db = f"surrealkv://{tmp_path / 'busy'}"
    busy = await KnowledgeBase.open(db, model="hashing-64")
    await busy.ingest_texts({"note://mine": "Something of my own."})
    await busy.close()
    out.seek(0)
    with pytest.raises(ArchiveError, match="not empty"):
        await KnowledgeBase.import_archive(out, db, settings=Settings(model="hashing-64"))
    other = f"surrealkv://{tmp_path / 'other-model'}"
    await (await KnowledgeBase.open(other, model="hashing-128")).close()
    out.seek(0)
    with pytest.raises(ArchiveError, match="hashing-128"):
        await KnowledgeBase.import_archive(out, other, settings=Settings(model="hashing-64"))


RUNNER = """
import asyncio, sys
from surrealdocs import KnowledgeBase, Settings

def progress(what, done, total):
    print(what, done, flush=True)

async def main():
    with open(sys.argv[1], "rb") as source:
        report = await KnowledgeBase.import_archive(
            source, sys.argv[2], settings=Settings(model="hashing-64"), progress=progress)
    print("done", report.resumed, flush=True)

asyncio.run(main())
"""
KILLS = 10


def _import_process(archive: Path, db: str, kill_after: float | None) -> bool | None:
    """One import in a subprocess, killed (SIGKILL) ``kill_after`` seconds after it began
    writing: whether it was killed (``None``: it finished, and resumed an earlier one)."""
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(archive), db],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("chunks"), line + (proc.stderr.read() if proc.stderr else "")
        if kill_after is not None:
            try:
                proc.wait(timeout=kill_after)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=PATIENCE)
                return True
        out, err = proc.communicate(timeout=PATIENCE)
        assert proc.returncode == 0 and "done" in out, err[-3000:]
        return False
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def _whole_documents_only(db: str) -> None:
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        docs, chunks, orphans = await kb.store.query(
            "SELECT id, chunk_count FROM documents;"
            " SELECT document, count() AS n FROM chunks GROUP BY document;"
            " SELECT VALUE id FROM chunks WHERE document.id = NONE;")
        counted = {str(c["document"]): c["n"] for c in chunks}
        assert orphans == []
        for doc in docs:
            assert counted.get(str(doc["id"]), 0) == doc["chunk_count"], doc["id"]
        await assert_text_index_matches_chunks(kb)


@pytest.mark.slow
async def test_an_import_killed_at_random_moments_finishes_when_run_again(
        open_kb: StoreFactory, tmp_path: Path) -> None:
    rng = random.Random(41)
    source = await open_kb()
    words = [w.lower() for t in TEXTS.values() for w in re.findall(r"[A-Za-z]+", t)]
    await source.ingest_texts({f"note://{i}": " ".join(rng.choice(words) for _ in range(60))
                               for i in range(1500)})
    birds = await source.notebooks.create_notebook("Birds")
    await source.notebooks.file_documents([d.id for d in await source.documents(limit=200)],
                                          birds)
    archive = tmp_path / "kb.tar"
    with archive.open("wb") as out:
        await source.export(out)
    reference = f"surrealkv://{tmp_path / 'reference'}"
    started = time.monotonic()
    assert _import_process(archive, reference, None) is False
    window = time.monotonic() - started  # the kills fall within one whole import's time
    target = f"surrealkv://{tmp_path / 'target'}"
    kills = 0
    while kills < KILLS:
        if _import_process(archive, target, rng.uniform(0.0, window)):
            kills += 1
            await _whole_documents_only(target)
        else:  # it finished first: start again from nothing, and kill sooner
            shutil.rmtree(tmp_path / "target")
            window *= 0.7
    assert _import_process(archive, target, None) is False
    expected = await _tables(await open_kb(db=reference))
    got = await _tables(await open_kb(db=target))
    for role in expected:
        assert got[role] == expected[role], role


pytest_plugins = ["remote_engine"]


@pytest.mark.slow
def test_copy_to_a_server_and_back_keeps_every_row_and_every_search(
        remote_engine: RemoteEngine, tmp_path: Path) -> None:
    laptop, back = f"surrealkv://{tmp_path / 'laptop'}", f"surrealkv://{tmp_path / 'back'}"
    server = remote_engine.settings("ws")

    async def tables_and_searches(settings: Settings) -> tuple[Any, Any]:
        async with await KnowledgeBase.open(settings=settings) as kb:
            tables = await _tables(kb)
            queries = _queries([r["content"] for r in tables["documents"]], 50)
            return tables, await _searches(kb, queries)

    async def make() -> None:
        async with await KnowledgeBase.open(laptop, model="hashing-64") as kb:
            await _rich_store(kb)

    asyncio.run(make())
    before = asyncio.run(tables_and_searches(Settings(db=laptop, model="hashing-64")))
    runner = CliRunner()
    to_server = ["--to", str(server.db), "--to-user", str(server.user),
                 "--to-password", str(server.password), "--with-keys"]
    result = runner.invoke(app, ["copy", "--from", laptop, *to_server])
    assert result.exit_code == 0, result.output
    assert "copied" in result.output
    on_server = asyncio.run(tables_and_searches(server))
    result = runner.invoke(app, ["copy", "--from", str(server.db), "--user", str(server.user),
                                 "--password", str(server.password), "--to", back,
                                 "--with-keys"])
    assert result.exit_code == 0, result.output
    again = asyncio.run(tables_and_searches(Settings(db=back, model="hashing-64")))
    for name, (tables, searches) in (("server", on_server), ("back", again)):
        for role in before[0]:
            assert tables[role] == before[0][role], (name, role)
        for a, b in zip(before[1], searches):
            assert [c for c, _ in a] == [c for c, _ in b], name
            assert all(abs(x - y) <= 1e-6 for (_, x), (_, y) in zip(a, b))
    # a copy into a store that holds something is refused, and says why
    result = runner.invoke(app, ["copy", "--from", laptop, *to_server])
    assert result.exit_code == 2 and "not empty" in result.output


async def test_an_export_while_four_writers_ingest_holds_whole_documents(
        open_kb: StoreFactory) -> None:
    kb = await open_kb()
    await kb.ingest_texts({f"note://seed{i}": f"seed text {i} " * 300 for i in range(40)})
    stop = asyncio.Event()

    paragraphs = [f"Paragraph {p} of the writers' shared text. " * 20 for p in range(12)]

    async def writer(n: int) -> None:
        round_ = 0
        while not stop.is_set():  # new versions of the same sources: chunks move between
            round_ += 1           # versions, old versions go
            kept = [p for i, p in enumerate(paragraphs) if (i + round_) % 3]
            await kb.ingest_texts({f"note://w{n}-{round_ % 3}":
                                   f"writer {n} round {round_}\n\n" + "\n\n".join(kept)})

    writers = [asyncio.create_task(writer(n)) for n in range(4)]
    try:
        archives = []
        for _ in range(12):
            out = io.BytesIO()
            await kb.export(out)
            archives.append(out.getvalue())
            await asyncio.sleep(0)
    finally:
        stop.set()
        await asyncio.gather(*writers)
    for data in archives:
        parts = _archive(data)
        documents = [json.loads(line) for line in
                     gzip.decompress(parts["documents.jsonl.gz"]).splitlines()]
        chunks = [json.loads(line) for line in
                  gzip.decompress(parts["chunks.jsonl.gz"]).splitlines()]
        per_document: dict[str, list[int]] = {}
        for chunk in chunks:
            per_document.setdefault(chunk["document"]["$record"][1], []).append(
                chunk["chunk_index"])
        assert len(documents) >= 40
        for document in documents:
            key = document["id"]["$record"][1]
            assert sorted(per_document.pop(key, [])) == list(range(document["chunk_count"]))
        assert per_document == {}  # no chunk of a document the archive lacks


async def test_a_merge_keeps_each_document_once_and_joins_notebooks_by_name(
        open_kb: StoreFactory, tmp_path: Path) -> None:
    from surrealdocs.core.notebook_service import Note
    db = f"surrealkv://{tmp_path / 'mine'}"
    mine = await KnowledgeBase.open(db, model="hashing-64")
    await mine.ingest_texts({"note://egrets": TEXTS["note://egrets"],
                             "note://storks": TEXTS["note://storks"],
                             "note://clash": "Kingfishers dive for small fish."})
    birds = await mine.notebooks.create_notebook("Birds")
    await mine.notebooks.file_documents([mine.storage.documents.document_id(
        (await mine.document("note://egrets")).id)], birds)
    await mine.close()

    theirs = await open_kb()
    await theirs.ingest_texts({"note://herons": TEXTS["note://herons"],
                               "note://storks-copy": TEXTS["note://storks"],
                               "note://clash": "Puffins carry fish crosswise in their bills."})
    their_birds = await theirs.notebooks.create_notebook("Birds")
    await theirs.notebooks.create_notebook("Fish")
    await theirs.notebooks.file_documents(
        [(await theirs.document(s)).id for s in ("note://herons", "note://storks-copy")],
        their_birds)
    await theirs.notebooks.add_note(their_birds, Note(title="Trip", content="Bring boots."))
    out = io.BytesIO()
    await theirs.export(out)
    out.seek(0)
    report = await KnowledgeBase.import_archive(out, db, settings=Settings(model="hashing-64"),
                                                merge=True)
    assert (report.joined, report.left_out) == (1, 1)

    kb = await open_kb(db=db)
    sources = {str(d.source): d for d in await kb.documents()}
    assert set(sources) == {"note://egrets", "note://storks", "note://clash", "note://herons"}
    storks = await kb.document("note://storks")
    assert set(storks.sources) == {"note://storks", "note://storks-copy"}
    assert (await kb.document("note://clash")).content.startswith("Kingfishers")  # ours
    notebooks = {nb.name: nb for nb in await kb.notebooks.list_notebooks()}
    assert set(notebooks) == {"Birds", "Fish"} and notebooks["Birds"].id == birds.id
    in_birds = {str(s.source) for s in await kb.notebooks.sources(birds)}
    assert in_birds == {"note://egrets", "note://herons", "note://storks"}
    assert [n.title for n in await kb.notebooks.notes(birds)] == ["Trip"]
    for mode in ("text", "vector", "hybrid"):  # the scope holds the joined document too
        hits = await kb.search("white storks nest on chimneys", mode=mode, notebook="Birds")
        assert hits and hits[0].source in ("note://storks", "note://storks-copy"), mode
    await assert_text_index_matches_chunks(kb)
    await kb.close()
    out.seek(0)
    again = await KnowledgeBase.import_archive(out, db, settings=Settings(model="hashing-64"),
                                               merge=True)
    assert again.already
