from __future__ import annotations

from pathlib import Path

import pytest

from surrealdocs import ConfigurationError, KnowledgeBase, Settings
from surrealdocs.parts.fusion import fuse
from surrealdocs.parts.results import Hit


def hit(chunk: str, doc: str, *, text: int | None = None, vector: int | None = None,
        score: float = 0.0) -> Hit:
    h = Hit(chunk_id=chunk, document_id=doc, source=doc, title=None, mime_type="text/plain",
            content="", chunk_index=0, char_start=0, char_end=0, page=None, last_page=None,
            score=score)
    if text is not None:
        h.text_rank, h.text_score = text, score
    if vector is not None:
        h.vector_rank, h.vector_score = vector, score
    return h


def legs() -> tuple[list[Hit], list[Hit]]:
    text = [hit("a1", "A", text=1, score=9.0), hit("b1", "B", text=2, score=5.0),
            hit("c1", "C", text=3, score=1.0)]
    vector = [hit("c1", "C", vector=1, score=0.9), hit("a2", "A", vector=2, score=0.8),
              hit("d1", "D", vector=3, score=0.2)]
    return text, vector


def test_rrf_by_chunk() -> None:
    text, vector = legs()
    fused = fuse(text, vector, limit=10, method="rrf", k=60)
    assert fused[0].chunk_id == "c1"  # the only chunk both legs found
    # shown as a share of the most RRF can give (first in both legs)
    assert fused[0].score == pytest.approx((1 / 63 + 1 / 61) / (2 / 61))
    assert (fused[0].text_rank, fused[0].vector_rank) == (3, 1)
    assert [h.chunk_id for h in fused[1:]] == ["a1", "a2", "b1", "d1"]  # ties: best rank, id


def test_rrf_by_document_credits_both_legs() -> None:
    text, vector = legs()
    fused = fuse(text, vector, limit=10, method="rrf", k=60, per_document=True)
    assert [h.document_id for h in fused] == ["A", "C", "B", "D"]
    a = fused[0]
    assert a.score == pytest.approx((1 / 61 + 1 / 62) / (2 / 61))
    assert (a.text_rank, a.vector_rank) == (1, 2)
    assert a.chunk_id == "a1"  # its better leg (text, rank 1) found chunk a1
    c = fused[1]
    assert c.chunk_id == "c1" and (c.text_rank, c.vector_rank) == (3, 1)


def test_weights_and_k() -> None:
    text, vector = legs()
    fused = fuse(text, vector, limit=2, method="rrf", k=0, weights=(0.0, 1.0))
    assert [h.chunk_id for h in fused] == ["c1", "a2"]
    assert fused[0].score == pytest.approx(1.0) and fused[1].score == pytest.approx(0.5)


def test_minmax() -> None:
    text, vector = legs()
    fused = fuse(text, vector, limit=10, method="minmax", per_document=True)
    scores = {h.document_id: h.score for h in fused}
    # text 9,5,1 -> 1, .5, 0 ; vector .9,.8,.2 -> 1, 6/7, 0; shown as their weighted mean
    assert scores["A"] == pytest.approx((1.0 + 6 / 7) / 2)
    assert scores["B"] == pytest.approx(0.5 / 2)
    assert scores["C"] == pytest.approx((0.0 + 1.0) / 2)
    assert scores["D"] == pytest.approx(0.0)
    assert [h.document_id for h in fused] == ["A", "C", "B", "D"]


def test_zscore() -> None:
    text, vector = legs()
    fused = fuse(text, vector, limit=10, method="zscore", weights=(1.0, 2.0))
    import numpy as np
    t, v = np.array([9.0, 5.0, 1.0]), np.array([0.9, 0.8, 0.2])
    tz, vz = (t - t.mean()) / t.std(), (v - v.mean()) / v.std()
    expected = {"a1": tz[0] + 2 * vz.min(), "c1": tz[2] + 2 * vz[0], "a2": tz.min() + 2 * vz[1]}
    got = {h.chunk_id: h.score for h in fused}
    for chunk, value in expected.items():  # shown as the logistic of the sum over |w|
        assert got[chunk] == pytest.approx(1 / (1 + np.exp(-1.7 * value / np.hypot(1, 2))))
    assert all(0 < v < 1 for v in got.values())
    assert [h.score for h in fused] == sorted(got.values(), reverse=True)


def test_unknown_fusion() -> None:
    with pytest.raises(ConfigurationError):
        fuse([], [], limit=1, method="borda")
    with pytest.raises(ConfigurationError):
        Settings(hybrid_fusion="borda")
    with pytest.raises(ConfigurationError):
        Settings(text_weight=0, vector_weight=0)
    assert Settings.from_env({"SURREALDOCS_HYBRID_FUSION": "ZScore",
                              "SURREALDOCS_TEXT_WEIGHT": "0.3"}).hybrid_fusion == "zscore"


LONG = " ".join(f"Sentence {i} talks about walruses and their tusks." for i in range(60))


FILLER = {f"t://filler{i}": f"Unrelated note {i} on gardening, tomatoes and compost."
          for i in range(12)}  # so that the query words are rare (BM25 IDF > 0)


async def test_ingest_texts_and_per_document_search(kb: KnowledgeBase) -> None:
    report = await kb.ingest_texts({
        **FILLER,
        "t://walrus": LONG,
        "t://seal": "Seals and walruses are pinnipeds that rest on ice floes.",
        "t://bread": "Knead the dough and bake the loaf.",
        "t://copy": "Knead the dough and bake the loaf.",
        "t://empty": "   ",
    })
    assert report.counts["ingested"] == 15 and report.counts["duplicate"] == 1
    assert report.counts["empty"] == 1
    assert {r.source for r in report.results} >= {"t://walrus", "t://copy"}
    assert (await kb.stats()).documents == 15
    assert next(r.chunks for r in report.results if r.source == "t://walrus") > 1

    chunks = await kb.search("walruses tusks", mode="text", limit=10)
    assert len({h.document_id for h in chunks}) < len(chunks)  # several chunks of one doc
    for mode in ("text", "vector", "hybrid"):
        docs = await kb.search("walruses tusks", mode=mode, limit=10, per_document=True)
        ids = [h.document_id for h in docs]
        assert len(ids) == len(set(ids)), mode
        if mode != "vector":  # the hashing embedder is too crude to rely on its ranking
            assert docs[0].source == "t://walrus"
        if mode == "text":
            assert docs[1].source == "t://seal"
    # with two text hits, z-scores are +1 / -1 and the crude vector leg decides the rest;
    # rank fusion keeps the second text hit second
    docs = await kb.search("walruses tusks", mode="hybrid", limit=10, per_document=True,
                           fusion="rrf")
    assert [h.source for h in docs[:2]] == ["t://walrus", "t://seal"]
    docs = await kb.search("walruses", mode="hybrid", limit=2, per_document=True,
                           fusion="minmax", candidates=5, text_weight=2.0, cutoff=False)
    assert len(docs) == 2 and docs[0].text_rank == 1

    # a re-run changes nothing, and a source may not appear twice in one batch
    again = await kb.ingest_texts([("t://seal", "Seals and walruses are pinnipeds that rest"
                                                " on ice floes.")])
    assert again.counts["unchanged"] == 1
    with pytest.raises(ConfigurationError, match="twice"):
        await kb.ingest_texts([("t://x", "a"), ("t://x", "b")])


async def test_ingest_many_bytes_rebuilds_the_index_once() -> None:
    settings = Settings(db="mem://", model="hashing-32", rebuild_threshold=20)
    async with await KnowledgeBase.open(settings=settings) as kb:
        items = [(f"n://{i}", f"note number {i} about topic {i % 7}".encode(), "text/plain")
                 for i in range(30)]
        report = await kb.ingest_many_bytes(items)
        assert report.counts["ingested"] == 30 and report.index_rebuilt
        assert (await kb.stats()).vectors_outside_graph == 0
        hits = await kb.search("note number 17", mode="text", limit=1)
        assert hits[0].source == "n://17"


def test_search_command_fusion_options(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from surrealdocs.faces.cli import app

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "walrus.txt").write_text(LONG)
    for name, text in FILLER.items():
        (docs / f"{name.rsplit('/', 1)[1]}.txt").write_text(text)
    db = str(tmp_path / "kb")
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(docs), "--db", db, "--model", "hashing-64"]) \
        .exit_code == 0
    result = runner.invoke(app, ["search", "walruses tusks", "--db", db, "--model",
                                 "hashing-64", "--json", "--per-document", "--fusion", "zscore",
                                 "--candidates", "5", "--text-weight", "2"])
    assert result.exit_code == 0, result.output
    hits = json.loads(result.output)
    assert len({h["document_id"] for h in hits}) == len(hits)
    assert hits[0]["source"].endswith("walrus.txt")
    result = runner.invoke(app, ["search", "x", "--db", db, "--model", "hashing-64",
                                 "--fusion", "borda"])
    assert result.exit_code == 2 and "fusion must be one of" in result.output


def chunk_leg() -> list[Hit]:
    """A text leg's chunks, best first: B's one chunk beats A's best, A matches four times."""
    return [hit("b1", "B", text=1, score=1.05), hit("a1", "A", text=2, score=1.0),
            hit("a2", "A", text=3, score=0.9), hit("a3", "A", text=4, score=0.8),
            hit("a4", "A", text=5, score=0.7), hit("c1", "C", text=6, score=0.1)]


@pytest.mark.parametrize("bonus,order,a_score", [
    (0.0, ["B", "A", "C"], 1.0),
    # only A's next two chunks count; over what the bonus can add at most (0-1 stays 0-1)
    (0.1, ["A", "B", "C"], (1.0 + 0.1 * (0.9 + 0.8)) / 1.2),
])
async def test_a_document_scores_its_best_chunk_plus_a_bonus_for_more(
        bonus: float, order: list[str], a_score: float) -> None:
    from surrealdocs.core.search import _distinct_documents

    async def fetch(n: int) -> list[Hit]:
        return chunk_leg()[:n]

    docs = await _distinct_documents(fetch, 3, "text", bonus)
    assert [h.document_id for h in docs] == order
    assert [h.text_rank for h in docs] == [1, 2, 3]
    (a,) = [h for h in docs if h.document_id == "A"]
    assert a.chunk_id == "a1" and a.score == pytest.approx(a_score) == a.text_score


def test_bm25_document_bonus_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="bm25_document_bonus"):
        Settings(bm25_document_bonus=-0.1)
    assert Settings.from_env({"SURREALDOCS_BM25_DOCUMENT_BONUS": "0.2"}).bm25_document_bonus \
        == 0.2
