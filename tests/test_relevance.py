"""The default cut-off: a hit that no leg found relevant is not shown.

A hit the BM25 leg did not find must be nearer to the query, by the real model, than the
query's mean similarity to the store's chunks plus ``relevance_sigmas`` standard deviations.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from surrealdocs import KnowledgeBase, Settings
from surrealdocs.embed import get_embedder

PLACES = ["Lisbon", "Oslo", "Nairobi", "Lima", "Osaka", "Tunis", "Quebec", "Perth"]
SUBJECTS = [
    "council approved the budget for new tram lines",
    "harbour authority reported record container traffic",
    "university opened a laboratory for soil chemistry",
    "football club signed a young goalkeeper",
    "central bank raised interest rates by a quarter point",
    "orchestra performed a programme of baroque concertos",
    "weather service warned of heavy coastal storms",
    "museum restored a collection of medieval manuscripts",
    "hospital trained nurses in emergency triage",
    "airport extended its runway for long-haul flights",
    "farmers harvested an early crop of barley",
    "court ruled on a dispute over fishing rights",
    "library digitised newspapers from the last century",
    "power company finished a wind farm offshore",
    "school district hired teachers of mathematics",
    "police department bought electric patrol cars",
    "zoo welcomed a pair of snow leopards",
    "railway operator cut fares for commuters",
    "chamber of commerce hosted a trade fair for textiles",
    "film festival awarded a prize to a documentary",
]
KITTEN = "kitten://naps"
KITTEN_TEXT = "My kitten naps on the couch for hours every afternoon."
SOFA_FACTORY = "sofa://factory"
SOFA_TEXT = "The sofa factory in Tampere reported higher quarterly earnings than expected."
QUERY = "a cat sleeping on a sofa"


def corpus() -> dict[str, str]:
    texts = {f"news://{i}": f"In {place}, the {subject}."
             for i, (place, subject) in enumerate(itertools.product(PLACES, SUBJECTS))}
    texts[KITTEN] = KITTEN_TEXT
    texts[SOFA_FACTORY] = SOFA_TEXT
    return texts


@pytest.fixture(scope="module")
def minilm():  # type: ignore[no-untyped-def]
    return get_embedder("all-minilm-l6-v2")


async def test_hits_no_leg_found_relevant_are_cut(minilm) -> None:  # type: ignore[no-untyped-def]
    texts = corpus()
    assert len(texts) > 100
    async with await KnowledgeBase.open(settings=Settings(db="mem://"), embedder=minilm) as kb:
        await kb.ingest_texts(texts.items())
        vector = await kb.search(QUERY, mode="vector", limit=20, per_document=True)
        hybrid = await kb.search(QUERY, mode="hybrid", limit=20, per_document=True)
        text = await kb.search(QUERY, mode="text", limit=20, per_document=True)
        # a notebook's scope (its own HNSW graph) is cut by the same rule
        nb = await kb.notebooks.create_notebook("all")
        await kb.notebooks.link_documents(nb, [d.id for d in await kb.documents(limit=500)])
        scoped = await kb.search(QUERY, mode="vector", limit=20, notebook=nb)
        floor = await kb._searcher._vector_floor(await kb.embedding.query(QUERY))
        sigmas = kb.settings.relevance_sigmas

    # what the cut-off should be, by brute force over every chunk with the same model
    query = np.asarray(minilm.embed_query(QUERY), dtype=np.float64).reshape(-1)
    chunks = np.asarray(minilm.embed_documents(list(texts.values())), dtype=np.float64)
    cosine = chunks @ query / (np.linalg.norm(chunks, axis=1) * np.linalg.norm(query))
    expected = float(np.maximum(cosine, 0).mean() + sigmas * np.maximum(cosine, 0).std())
    assert floor == pytest.approx(expected, abs=0.01)
    above = {s for s, c in zip(texts, cosine, strict=True) if c >= expected + 0.01}
    below = {s for s, c in zip(texts, cosine, strict=True) if c < expected - 0.01}
    assert KITTEN in above and len(below) > len(texts) - 10

    # the vector leg shows what is nearer than unrelated chunks are, and nothing else
    shown = {h.source for h in vector}
    assert above <= shown and not shown & below
    assert vector[0].source == KITTEN and len(vector) < 20
    assert {h.source for h in scoped} == shown
    # hybrid keeps every hit BM25 found (the sofa factory holds "sofa") and the kitten
    assert [h.source for h in text] == [SOFA_FACTORY]
    assert {h.source for h in hybrid} == shown | {SOFA_FACTORY}
    assert all(h.text_rank is not None or h.vector_score >= floor for h in hybrid)


async def test_the_cut_off_can_be_turned_off_and_small_stores_are_not_cut(  # type: ignore[no-untyped-def]
        minilm) -> None:
    texts = corpus()
    settings = Settings(db="mem://", relevance_sigmas=0)
    async with await KnowledgeBase.open(settings=settings, embedder=minilm) as kb:
        await kb.ingest_texts(texts.items())
        assert len(await kb.search(QUERY, mode="vector", limit=20)) == 20
        assert len(await kb.search(QUERY, mode="hybrid", limit=20)) == 20
    few = dict(list(texts.items())[:40])
    async with await KnowledgeBase.open(settings=Settings(db="mem://"), embedder=minilm) as kb:
        await kb.ingest_texts(few.items())  # too few chunks to say what unrelated ones score
        assert len(await kb.search(QUERY, mode="vector", limit=20)) == 20
        # once the store has grown, the cut-off applies (the view of the small store, read by
        # that search, is not what the sample is drawn from)
        await kb.ingest_texts(list(texts.items())[40:])
        vector = await kb.embedding.query(QUERY)
        assert await kb._searcher._vector_floor(vector) is not None
        assert len(await kb.search(QUERY, mode="vector", limit=20)) < 20


def test_the_setting_is_checked() -> None:
    from surrealdocs.errors import ConfigurationError
    for bad in (-1, float("nan"), "many", True):
        with pytest.raises(ConfigurationError, match="relevance_sigmas"):
            Settings(db="mem://", relevance_sigmas=bad)  # type: ignore[arg-type]
    assert Settings.from_env({"SURREALDOCS_RELEVANCE_SIGMAS": "3"}).relevance_sigmas == 3.0
