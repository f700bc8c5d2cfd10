"""The vector leg's scan of the text index's segments (store/segments/codes.py) against a
brute-force nearest-neighbour search over the vectors the index holds (int8 codes times
their row's scale): the same top 20 and scores within 1e-5, through writes, deletes, new
versions, merges, rebuilds, filters, both scanned distances and a store whose segments
predate their vectors; and every coded score within its quantization bound of the score of
the vector the store holds."""

from __future__ import annotations

import numpy as np
import pytest
from surrealdb import RecordID

from conftest import assert_hits_name_their_documents, assert_text_index_matches_chunks
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.store.names import Names
from surrealdocs.store.schema import SCHEMA_VERSION
from surrealdocs.store.segments.index import TextIndex
from test_textindex import _corpus, _word

QUERIES = [f"{_word(1)} {_word(2)}", "apple pear", _word(40), "running café 2024"]


def _index(kb: KnowledgeBase) -> TextIndex:
    text = kb.storage.chunks.text
    assert text is not None
    return text


async def _brute(kb: KnowledgeBase, query: str, source: str | None = None, *,
                 coded: bool = True) -> list[tuple[str, float]]:
    """Every chunk's similarity to the query's vector (cosine, or 1/(1+distance) for
    Euclidean, as searches score), best first: from the vectors the text index holds
    (int8 codes times their scale) when ``coded``, else from the vector rows themselves.
    Where both are known, each coded score is within the bound of its quantization."""
    text = _index(kb)
    assert text.vector_table is not None
    where = " WHERE chunk.document.source = $source" if source else ""
    (rows,) = await kb.store.query(
        f"SELECT VALUE [record::id(chunk), embedding] FROM {text.vector_table}{where};",
        {"source": source})
    held = await text.live_vectors() if coded else {}
    q = np.asarray(await kb.embedding.query(query), dtype=np.float64)
    out = []
    for key, vector in rows:
        true = _score(kb, np.asarray(vector, dtype=np.float64), q)
        if not coded:
            out.append((str(key), true))
            continue
        v = np.asarray(held[str(key)], dtype=np.float64)
        score = _score(kb, v, q)
        # each component is off by at most half a step (the row's peak / 127)
        error = np.sqrt(len(v)) * np.abs(np.asarray(vector)).max() / 254
        bound = 2 * error / np.linalg.norm(vector) if kb.settings.hnsw_distance == "COSINE" \
            else error
        assert abs(score - true) <= bound + 1e-9, (key, score, true, bound)
        out.append((str(key), score))
    return sorted(out, key=lambda kv: (-kv[1], kv[0]))


def _score(kb: KnowledgeBase, v: np.ndarray, q: np.ndarray) -> float:
    if kb.settings.hnsw_distance == "COSINE":
        return float(v @ q / (np.linalg.norm(v) * np.linalg.norm(q)))
    return 1.0 / (1.0 + float(np.linalg.norm(v - q)))


async def _distinct(kb: KnowledgeBase, ranked: list[tuple[str, float]]
                    ) -> list[tuple[str, float]]:
    """``ranked`` without the chunks whose text a better one has."""
    table = kb.storage.chunks.table
    (rows,) = await kb.store.query("SELECT VALUE [record::id(id), content] FROM $ids;", {
        "ids": [RecordID(table, key) for key, _ in ranked]})
    text_of = {str(key): " ".join(str(content).split()) for key, content in rows}
    seen: set[str] = set()
    out = []
    for key, score in ranked:
        if text_of[key] not in seen:
            seen.add(text_of[key])
            out.append((key, score))
    return out


async def _agrees(kb: KnowledgeBase, *, scanned: bool = True) -> None:
    for query in QUERIES:
        q = await kb.embedding.query(query)
        assert (await _index(kb).nearest(q) is not None) == scanned
        # a search shows a passage once, by its best chunk (the corpus repeats some)
        expected = (await _distinct(kb, await _brute(kb, query, coded=scanned)))[:20]
        hits = await kb.search(query, mode="vector", limit=20, cutoff=False)
        assert len(hits) == len(expected), query
        await assert_hits_name_their_documents(kb, hits)
        assert [h.vector_score for h in hits] == pytest.approx([s for _, s in expected], abs=1e-5)
        for hit, (key, score) in zip(hits, expected):
            if hit.chunk_id.split(":")[-1] != key:  # a tie: both orders are right
                assert hit.vector_score == pytest.approx(score, abs=1e-5)


@pytest.fixture
def small_settings() -> Settings:
    # the whole ranking is compared with a brute force: no default cut-off
    return Settings(db="mem://", model="hashing-64", chunk_size=60, chunk_overlap=0,
                    insert_batch_size=5, relevance_cutoff=0)


@pytest.mark.slow
@pytest.mark.parametrize("distance", ["COSINE", "EUCLIDEAN"])
async def test_scan_equals_brute_force_through_writes_deletes_merges(small_settings, distance):
    async with await KnowledgeBase.open(
            settings=small_settings.replace(hnsw_distance=distance)) as kb:
        await kb.ingest_texts(_corpus(11, 25))
        await kb.ingest_texts(_corpus(12, 3))
        text = _index(kb)
        assert (await text.stats())["segments"] > 1
        await _agrees(kb)
        for doc in (await kb.documents(limit=5))[:4]:
            await kb.delete_document(doc.id)
        assert (await text.stats())["dead"] > 0
        await _agrees(kb)
        changed = {k: v + ". apple pear more words" for k, v in
                   list(_corpus(11, 25).items())[8:14]}
        await kb.ingest_texts(changed)  # unchanged chunks move, the rest are new
        await _agrees(kb)
        while await text.merge_once():
            pass
        assert await text.merge_once(force=True)
        assert (await text.stats())["segments"] == 1
        await _agrees(kb)
        await assert_text_index_matches_chunks(kb)
        await text.rebuild()
        await _agrees(kb)
        await assert_text_index_matches_chunks(kb)


async def test_filters_walk_the_scan(small_settings):
    async with await KnowledgeBase.open(settings=small_settings) as kb:
        corpus = _corpus(13, 15)
        await kb.ingest_texts(corpus)
        source = sorted(corpus)[3]
        hits = await kb.search("apple pear", mode="vector", source=source, limit=50)
        expected = await _brute(kb, "apple pear", source)
        assert hits and {h.source for h in hits} == {source}
        assert [h.vector_score for h in hits] == pytest.approx([s for _, s in expected], abs=1e-5)
        # a notebook's scope walks its own HNSW graph, and keeps to the notebook
        nb = await kb.notebooks.create_notebook("picked")
        chosen = (await kb.documents(limit=100))[:2]
        await kb.notebooks.link_documents(nb, [d.id for d in chosen])
        hits = await kb.search("apple pear", mode="vector", notebook=nb, limit=50)
        assert hits and {h.document_id for h in hits} <= {d.id for d in chosen}


async def test_hybrid_uses_the_scan(small_settings):
    async with await KnowledgeBase.open(settings=small_settings) as kb:
        await kb.ingest_texts(_corpus(14, 10))
        hits = await kb.search("apple pear", mode="hybrid", limit=10)
        nearest = (await _brute(kb, "apple pear"))[0][0]
        assert any(h.chunk_id.split(":")[-1] == nearest and h.vector_rank == 1 for h in hits)


async def test_segments_without_vectors_use_the_graph_until_rebuilt(tmp_path):
    """A store whose segments were written before they carried documents and vectors
    (schema 12) is searched through the HNSW graph and the chunks' rows, and its segments
    are rebuilt with both on open."""
    settings = Settings(db=str(tmp_path / "kb"), model="hashing-64", chunk_size=60,
                        chunk_overlap=0, insert_batch_size=5)
    async with await KnowledgeBase.open(settings=settings) as kb:
        await kb.ingest_texts(_corpus(15, 12))
        text = _index(kb)
        await kb.store.query(
            f"DELETE {text.vector_part_table};"
            f" UPDATE {text.segment_table} SET vectors = NONE, vparts = 0;"
            f" UPDATE {text.map_table} SET docs = NONE;"
            " UPSERT $k MERGE { text_segments: NONE, version: 12 };",
            {"k": Names().schema_key})
        await text.stop()
        text.reader.forget()  # as a fresh process sees the store
        await _agrees(kb, scanned=False)
        # chunks moved into new versions: their documents are read from their rows
        await kb.ingest_texts({k: v + ". apple pear" for k, v in
                               list(_corpus(15, 12).items())[:4]})
        await _agrees(kb, scanned=False)
        ranked = await text.rank(text.analyzer.terms("apple"))
        assert ranked.best(0, 5) and ranked.documents(0, 5) is None
    async with await KnowledgeBase.open(settings=settings) as kb:
        (schema,) = await kb.store.query("SELECT * FROM ONLY $k;", {"k": Names().schema_key})
        assert schema["version"] == SCHEMA_VERSION and schema["text_segments"] == 2
        ranked = await _index(kb).rank(["appl"])
        assert ranked.best(0, 5) and ranked.documents(0, 5)
        await _agrees(kb)
        await assert_text_index_matches_chunks(kb)


async def test_parts_written_as_float32_rows_are_read(small_settings):
    """Stores written before the codes hold float32 rows in their parts: a search
    quantizes them as it reads them, and merges write them as codes."""
    async with await KnowledgeBase.open(settings=small_settings) as kb:
        await kb.ingest_texts(_corpus(16, 12))
        text = _index(kb)
        (parts,) = await kb.store.query(f"SELECT * FROM {text.vector_part_table};")
        (rows,) = await kb.store.query(
            f"SELECT VALUE [record::id(chunk), embedding] FROM {text.vector_table};")
        true = {str(k): v for k, v in rows}
        view = await text.reader.view()
        for part in parts:
            segment, number = part["id"].id
            keys = view.maps[segment].keys[number * 4096:(number + 1) * 4096]
            matrix = np.array([true.get(k, [0.0] * part["dim"]) for k in keys], "<f4")
            await kb.store.query(
                "UPDATE $id CONTENT { n: $n, dim: $dim, data: $data, has: $has };",
                {"id": part["id"], "n": part["n"], "dim": part["dim"],
                 "data": matrix.tobytes(), "has": part["has"]})
        text.vectors.sets.clear()
        await _agrees(kb)
        assert await text.merge_once(force=True)
        (parts,) = await kb.store.query(f"SELECT * FROM {text.vector_part_table};")
        assert parts and all("codes" in p and "data" not in p for p in parts)
        await _agrees(kb)
        await assert_text_index_matches_chunks(kb)
