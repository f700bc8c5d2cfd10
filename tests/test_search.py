from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from conftest import SAMPLES, StoreFactory
from surrealdocs import ConfigurationError, DimensionMismatchError, KnowledgeBase, Settings
from surrealdocs.core.search import Filters, glob_to_regex, query_terms
from surrealdocs.store.conditions import filter_conditions
from surrealdocs.store.legs import GraphLeg

PASSAGES = {
    "cats.md": "# Cats\n\nDomestic cats sleep for most of the day and hunt small rodents at night.",
    "stocks.md": "# Markets\n\nThe stock exchange closed higher as investors bought bank shares.",
    "error.md": "# Error codes\n\nThe service fails with error XYZ-123 when the disk is full.",
    "volcano.md": "# Geology\n\nMagma rising through the crust erupts from a volcano as lava.",
    "bread.md": "# Baking\n\nKnead the dough, let it rise for an hour, then bake the loaf.",
}


@pytest.fixture
async def corpus(kb_minilm: KnowledgeBase, tmp_path: Path) -> KnowledgeBase:
    for name, text in PASSAGES.items():
        (tmp_path / name).write_text(text)
    report = await kb_minilm.ingest([tmp_path, SAMPLES])
    assert report.counts["ingested"] == len(PASSAGES) + 5
    return kb_minilm


async def test_text_mode_finds_exact_terms(corpus: KnowledgeBase) -> None:
    hits = await corpus.search("error XYZ-123?", mode="text", limit=3)
    assert Path(hits[0].source).name == "error.md"
    assert hits[0].text_rank == 1 and hits[0].vector_rank is None
    assert hits[0].score > 0


async def test_vector_mode_finds_paraphrases(corpus: KnowledgeBase) -> None:
    hits = await corpus.search("feline pets napping", mode="vector", limit=3)
    assert Path(hits[0].source).name == "cats.md"
    assert 0 < hits[0].score <= 1
    assert [h.vector_rank for h in hits] == [1, 2, 3]
    assert hits[0].vector_score >= hits[1].vector_score >= hits[2].vector_score
    # no word of the query occurs in the passage: text search cannot find it
    assert all(Path(h.source).name != "cats.md"
               for h in await corpus.search("feline pets napping", mode="text"))


async def test_hybrid_fuses_both_legs(corpus: KnowledgeBase) -> None:
    hits = await corpus.search("volcano lava eruption", mode="hybrid", limit=5, cutoff=False)
    top = hits[0]
    assert Path(top.source).name == "volcano.md"
    assert top.text_rank == 1 and top.vector_rank == 1
    # the default fusion orders by the sum of each leg's z-score over its 100 candidates
    text = {h.chunk_id: h.text_score for h in await corpus.search(
        "volcano lava eruption", mode="text", limit=100, cutoff=False)}
    vector = {h.chunk_id: h.vector_score for h in await corpus.search(
        "volcano lava eruption", mode="vector", limit=100, cutoff=False)}
    assert len(text) >= 1 and len(vector) > 2

    def z(leg: dict[str, float], chunk: str) -> float:
        values = list(leg.values())
        spread = statistics.pstdev(values) if len(values) > 1 else 0.0
        score = leg.get(chunk, min(values))
        return (score - statistics.mean(values)) / spread if spread else 0.0

    fused = [z(text, h.chunk_id) + z(vector, h.chunk_id) for h in hits]
    assert fused == sorted(fused, reverse=True)
    assert fused[0] == pytest.approx(z(text, top.chunk_id) + z(vector, top.chunk_id))
    assert all(0 < h.score < 1 for h in hits)  # shown: the probability of relevance
    assert top.score > 0.5 and top.similarity is not None and top.coverage == 1.0
    rrf = await corpus.search("volcano lava eruption", mode="hybrid", limit=5, fusion="rrf")
    assert rrf[0].chunk_id == top.chunk_id and rrf[0].score == pytest.approx(top.score)


async def test_hits_carry_positions_titles_and_pages(corpus: KnowledgeBase) -> None:
    (hit,) = await corpus.search("page two costs embedding CPU", mode="hybrid", limit=1,
                                 cutoff=False)
    assert hit.title == "Quarterly report"
    assert (hit.page, hit.last_page) == (1, 2)  # the short report fits one chunk
    assert hit.mime_type == "application/pdf"
    (doc,) = (await corpus.store.query("SELECT content FROM ONLY $d;",
                                       {"d": _record(hit.document_id)}))
    assert doc["content"][hit.char_start:hit.char_end] == hit.content


def _record(text: str):  # type: ignore[no-untyped-def]
    from surrealdb import RecordID
    table, key = text.split(":", 1)
    return RecordID(table, key.strip("⟨⟩`"))


async def test_filters_apply_inside_the_query(corpus: KnowledgeBase) -> None:
    hits = await corpus.search("search index", mode="vector", limit=10, mime_type="text/html",
                               cutoff=False)
    assert hits and {h.mime_type for h in hits} == {"text/html"}
    hits = await corpus.search("search index", mode="vector", limit=3, source="*.pdf",
                               cutoff=False)
    assert hits and all(h.source.endswith(".pdf") for h in hits)
    hits = await corpus.search("cats", mode="text", source="samples/*", cutoff=False)
    assert hits == []
    hits = await corpus.search("ranking", mode="hybrid", source="samples/*", limit=20,
                               cutoff=False)
    assert hits and all("/samples/" in h.source for h in hits)
    assert "document.sources.any" in filter_conditions(Filters(source="*.md"))[0][0]


async def test_the_graph_leg_walks_the_hnsw_index(open_kb: StoreFactory) -> None:
    """A store ranked by the engine has the HNSW graph as its vector leg: the statement a
    vector search runs is planned by the engine as a scan of that index (a search that
    scanned the table, or ran no k-NN operator, fails here), and finds what an exact
    comparison finds."""
    kb = await open_kb(text_index="engine")
    await kb.ingest_texts({f"t{i}": f"Note {i} about {word} and {i % 7} more {word}s."
                           for i, word in enumerate(["herons", "owls", "bread", "rivers",
                                                     "stocks", "maps"] * 5)})
    assert isinstance(kb.storage.legs.vector, GraphLeg)
    await kb.rebuild_index()
    statements: list[tuple[str, dict[str, object]]] = []
    query = kb.store.query

    async def recorded(sql: str, params: dict[str, object] | None = None,
                       **kwargs: object) -> list[object]:
        statements.append((sql, dict(params or {})))
        return await query(sql, params, **kwargs)  # type: ignore[arg-type]

    kb.store.query = recorded  # type: ignore[method-assign]
    hits = await kb.search("owls at night", mode="vector", limit=5, cutoff=False)
    kb.store.query = query  # type: ignore[method-assign]
    knn = [(sql, params) for sql, params in statements if "<|" in sql]
    assert len(knn) == 1, statements
    sql, params = knn[0]
    (plan,) = await kb.store.query(sql.rstrip(";") + " EXPLAIN;", params)
    assert '"KnnScan"' in json.dumps(plan) and kb.store.names.hnsw_index in json.dumps(plan)
    vector = params["v"]
    (exact,) = await kb.store.query(
        "SELECT vector::similarity::cosine(embedding, $v) AS s"
        f" FROM {kb.storage.chunks.vector_table} ORDER BY s DESC LIMIT 5;", {"v": vector})
    # the same similarities, nearest first (which of two equally near chunks comes first
    # is the graph's to choose)
    assert [round(h.vector_score or 0.0, 5) for h in hits] == \
        [round(max(0.0, r["s"]), 5) for r in exact]


async def test_vector_search_after_rebuild_matches_exact(corpus: KnowledgeBase) -> None:
    before = await corpus.search("bread baking", mode="vector", limit=5)
    await corpus.rebuild_index()
    after = await corpus.search("bread baking", mode="vector", limit=5)
    assert [h.chunk_id for h in after] == [h.chunk_id for h in before]


async def test_min_score(corpus: KnowledgeBase) -> None:
    every = await corpus.search("stock market investors", mode="vector", limit=20,
                                cutoff=False)
    cut = (max(h.score for h in every) + min(h.score for h in every)) / 2
    kept = await corpus.search("stock market investors", mode="vector", limit=20,
                               min_score=cut, cutoff=False)
    assert kept and len(kept) < len(every)
    assert all(h.score >= cut for h in kept)


async def test_bad_arguments(corpus: KnowledgeBase) -> None:
    with pytest.raises(ConfigurationError):
        await corpus.search("x", mode="fuzzy")
    with pytest.raises(ConfigurationError):
        await corpus.search("x", limit=0)
    with pytest.raises(DimensionMismatchError):
        await corpus.search(mode="vector", query_vector=[0.1, 0.2])
    for empty in ("", "   "):  # an empty query is refused, not answered with arbitrary hits
        for mode in ("text", "vector", "hybrid"):
            with pytest.raises(ConfigurationError, match="empty"):
                await corpus.search(empty, mode=mode)
    assert await corpus.search("?!", mode="text") == []  # no word to look for
    for bad in ({"candidates": -1}, {"candidates": 0}, {"text_weight": float("nan")},
                {"vector_weight": float("inf")}, {"min_score": float("nan")},
                {"text_weight": 0, "vector_weight": 0}, {"limit": True}):
        with pytest.raises(ConfigurationError):
            await corpus.search("market", **bad)


def test_query_terms_strip_punctuation_and_stop_words() -> None:
    assert query_terms('What is "error" XYZ-123?') == "error xyz 123"
    assert query_terms("the of") == "the of"  # nothing but stop words: keep them


@pytest.mark.parametrize("pattern,path,match", [
    ("*.pdf", "/a/b/report.pdf", True),
    ("*.pdf", "/a/b/report.pdf.txt", False),
    ("reports/*.pdf", "/x/reports/q1.pdf", True),
    ("reports/*.pdf", "/x/myreports/q1.pdf", False),
    ("/abs/**", "/abs/x/y.md", True),
    ("upload://*", "upload://q.pdf", True),
    ("q?.pdf", "/r/q1.pdf", True),
    ("[!a]*.md", "/r/b.md", True),
])
def test_glob_to_regex(pattern: str, path: str, match: bool) -> None:
    import re
    assert bool(re.match(glob_to_regex(pattern), path)) is match


async def test_chunks_being_written_or_replaced_are_never_shown(kb: KnowledgeBase) -> None:
    from surrealdocs.parts.chunk import Chunk

    await kb.ingest_texts({f"n://{i}": f"Otters number {i} float on rivers." for i in range(6)})
    storage = kb.storage
    # a document half written (incomplete), whose chunks match the query best...
    doc = storage.documents.document_id("beingwritten")
    await storage.documents.create_incomplete(doc, {
        "sources": ["n://half"], "content": "otters otters otters", "mime_type": "text/plain",
        "content_hash": "beingwritten", "chunk_count": 1})
    vector = kb.embedder.embed_documents(["otters otters otters"])
    await storage.chunks.insert(storage.chunks.rows(
        doc, [Chunk(0, "otters otters otters", 0, 20)], vector))
    # ...and a generation of a complete document that is not switched to yet
    (first,) = await kb.search("Otters number 0", mode="text", limit=1)
    current = storage.documents.document_id(first.document_id)
    await storage.chunks.insert(storage.chunks.rows(
        current, [Chunk(0, "otters otters otters rivers", 0, 26)],
        kb.embedder.embed_documents(["otters otters otters rivers"]), generation=5))
    for mode in ("text", "vector", "hybrid"):
        for per_document in (False, True):
            hits = await kb.search("otters otters", mode=mode, limit=6,
                                   per_document=per_document)
            assert len(hits) == 6, (mode, per_document)
            assert all(h.document_id != str(doc) and "_g5_" not in h.chunk_id for h in hits)


async def test_terms_in_most_chunks_are_left_out_once_counted(settings: Settings) -> None:
    texts = {f"n://{i}": f"Common words fill note {i} about everyday matters." for i in range(10)}
    texts["n://rare"] = "Common words, and one narwhal."
    texts["n://other"] = "Common words, and one axolotl."
    query = "common narwhal axolotl"
    settings = settings.replace(text_index="engine")  # the engine's index only: the text
    # index scores every term at the cost of its postings
    async with await KnowledgeBase.open(
            settings=settings.replace(bm25_max_df_floor=5)) as kb:
        await kb.ingest_texts(texts)
        every = await kb.search(query, mode="text", limit=20)  # "common" not counted yet: kept
        assert len(every) == 12
        await kb.warm_up([query])  # now it is known to be in every chunk
        informative = await kb.search(query, mode="text", limit=20)
        assert {h.source for h in informative} == {"n://rare", "n://other"}
    # every term is kept: with the pruning off, or when the common term is in fewer chunks
    # than the floor (the default floor, in a small collection)
    for changed in ({"bm25_max_df": 1.0, "bm25_max_df_floor": 5},
                    {"bm25_max_df_floor": 12}, {}):
        async with await KnowledgeBase.open(settings=settings.replace(**changed)) as all_terms:
            await all_terms.ingest_texts(texts)
            await all_terms.warm_up([query])
            assert len(await all_terms.search(query, mode="text", limit=20)) == 12, changed


async def test_stemming_is_english_by_default_and_can_be_turned_off() -> None:
    texts = {"t://1": "The runners were running through the parks.",
             "t://2": "A quiet library with old books."}
    for language, finds_stems in (("english", True), ("none", False)):
        async with await KnowledgeBase.open("mem://", model="hashing-64",
                                            analyzer_language=language) as kb:
            await kb.ingest_texts(texts)
            assert [h.source for h in await kb.search("running", mode="text")] == ["t://1"]
            stemmed = await kb.search("runs park", mode="text")
            assert bool(stemmed) is finds_stems
    with pytest.raises(ConfigurationError, match="or none"):
        await KnowledgeBase.open("mem://", model="hashing-64", analyzer_language="klingon")


async def test_scores_are_0_to_1_in_every_mode(corpus: KnowledgeBase) -> None:
    """Every mode's score is the probability of relevance (0-1), and min_score is on that
    scale. The text leg's own score is BM25 over the query's ceiling (a chunk saturated
    with every query term would score 1)."""
    for mode in ("text", "vector", "hybrid"):
        hits = await corpus.search("volcano lava eruption", mode=mode, limit=20, cutoff=False)
        assert hits and all(0.0 <= h.score <= 1.0 for h in hits), mode
        floor = sorted(h.score for h in hits)[len(hits) // 2]
        kept = await corpus.search("volcano lava eruption", mode=mode, limit=20,
                                   min_score=floor, cutoff=False)
        assert [h.chunk_id for h in kept] == [h.chunk_id for h in hits if h.score >= floor]
    await corpus.ingest_texts({"note://saturated": " ".join(["volcano lava eruption"] * 40)})
    (top, *_) = await corpus.search("volcano lava eruption", mode="text", limit=1)
    assert top.source == "note://saturated" and 0.8 < top.text_score <= 1.0


async def test_a_passage_two_files_share_is_one_hit(open_kb: StoreFactory) -> None:
    """The same paragraph in two files comes back once, by its best hit; the search still
    gives as many distinct passages as asked for, and per document both files count."""
    kb = await open_kb(chunk_size=60, chunk_overlap=0)
    shared = "Grey herons nest in tall colonies near lakes."
    await kb.ingest_texts({
        "a.md": f"{shared}\n\nThe first file tells of reed beds and frogs.",
        "b.md": f"{shared}\n\nThe second file tells of herons fishing at dawn.",
        "c.md": "Herons stand still in shallow water for a long time."})
    for mode in ("text", "vector", "hybrid"):
        hits = await kb.search("grey herons nest in colonies", mode=mode, limit=3,
                               cutoff=False)
        texts = [" ".join(h.content.split()) for h in hits]
        assert texts.count(shared) == 1, (mode, texts)
        assert len(set(texts)) == len(texts) == 3, (mode, texts)
    per_document = await kb.search("grey herons nest in colonies", mode="text", limit=3,
                                   per_document=True, cutoff=False)
    assert {h.source for h in per_document if shared in h.content} == {"a.md", "b.md"}
