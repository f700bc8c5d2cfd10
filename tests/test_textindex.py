"""The text index (store/textindex.py) against a brute-force BM25 of the same formula over
the chunks the store holds: the same top 20 and scores within 1e-6, after writes, deletes,
new versions, merges and rebuilds."""

from __future__ import annotations

import asyncio
import math
import os
import random
import signal
import subprocess
import sys
import textwrap
from collections import Counter

import pytest

from conftest import PATIENCE, assert_hits_name_their_documents, assert_text_index_matches_chunks
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.errors import StoreError
from surrealdocs.store.segments.index import TextIndex


def _word(i: int) -> str:
    letters = "bcdfghjklmnpqrstvwxz"
    out = "qu"
    while True:
        out += letters[i % 20]
        i //= 20
        if not i:
            return out


WORDS = [_word(i) for i in range(300)] + ["apple", "pear", "running", "runner", "café", "2024"]


def _text(rng: random.Random, words: int) -> str:
    # Zipf-like: low ranks are common, as in real text
    return " ".join(WORDS[min(int(rng.paretovariate(1.1)) - 1, len(WORDS) - 1)]
                    if rng.random() < 0.8 else rng.choice(WORDS) for _ in range(words))


def _corpus(seed: int, documents: int) -> dict[str, str]:
    rng = random.Random(seed)
    return {f"doc{seed}_{i}.txt": ". ".join(_text(rng, rng.randint(5, 40))
                                            for _ in range(rng.randint(1, 12)))
            for i in range(documents)}


async def _brute(kb: KnowledgeBase, terms: list[str]) -> list[tuple[str, float]]:
    """BM25 (Lucene's IDF, the settings' k1 and b, query terms counted) over every chunk
    row, as a share of the query's ceiling (every term saturated), best first."""
    text = _index(kb)
    (rows,) = await kb.store.query("SELECT id, content FROM chunks;")
    docs = {str(r["id"].id): Counter(text.analyzer.terms(r["content"])) for r in rows}
    n = len(docs)
    lengths = {k: sum(c.values()) for k, c in docs.items()}
    average = sum(lengths.values()) / n
    k1, b = kb.settings.bm25_k1, kb.settings.bm25_b
    scores: dict[str, float] = {}
    ceiling = 0.0  # what a chunk holding every term, saturated, would score
    for term, repeats in Counter(terms).items():  # a repeated query term weighs more
        df = sum(1 for c in docs.values() if term in c)
        idf = repeats * math.log(1 + (n - df + 0.5) / (df + 0.5))
        ceiling += idf * (k1 + 1)  # a term no chunk holds counts too
        for key, counts in docs.items():
            tf = counts.get(term, 0)
            if tf:
                norm = k1 * (1 - b + b * lengths[key] / average)
                scores[key] = scores.get(key, 0.0) + idf * tf * (k1 + 1) / (tf + norm)
    return sorted(((k, v / ceiling) for k, v in scores.items()), key=lambda kv: (-kv[1], kv[0]))


def _index(kb: KnowledgeBase) -> TextIndex:
    text = kb.storage.chunks.text
    assert text is not None
    return text


QUERIES = [f"{_word(1)} {_word(2)}", f"apple {_word(3)} apples", f"apple pear {_word(7)}",
           "runs", "cafe 2024", " ".join(_word(i) for i in (30, 31, 32, 33)), _word(0),
           f"{_word(150)} apple", "zzz"]


async def _agrees(kb: KnowledgeBase) -> None:
    text = _index(kb)
    for query in QUERIES:
        terms = text.analyzer.terms(query)
        expected = (await _brute(kb, terms))[:20]
        ranked = await text.rank(terms)
        got = list(zip(ranked.keys, ranked.scores))[:20]
        assert len(got) == len(expected), query
        for (key, score), (want_key, want) in zip(got, expected):
            assert score == pytest.approx(want, abs=1e-6), query
            if key != want_key:  # a tie: both orders are right
                assert dict(expected).get(key, dict(got)[key]) == pytest.approx(want,
                                                                                 abs=1e-9)
        # and the search the user runs gives the same chunks
        hits = await kb.search(query, mode="text", limit=20, cutoff=False)
        assert [h.text_score for h in hits] == pytest.approx([s for _, s in expected],
                                                             abs=1e-6)
        await assert_hits_name_their_documents(kb, hits)


@pytest.fixture
def small_settings() -> Settings:
    # the whole ranking is compared with a brute force: no default cut-off
    return Settings(db="mem://", embed=False, chunk_size=60, chunk_overlap=0,
                    insert_batch_size=5, relevance_cutoff=0)


async def test_stop_words_count_in_lengths_but_have_no_postings(small_settings):
    rng = random.Random(5)
    texts = {f"stop{i}.txt": " ".join(rng.choice(["the", "of", "and", "is"])
                                      if rng.random() < 0.4 else rng.choice(WORDS[:40])
                                      for _ in range(rng.randint(5, 40)))
             for i in range(30)}
    texts["owned.txt"] = "They owned the quhouse for years."
    texts["own.txt"] = "It was their own quhouse."
    async with await KnowledgeBase.open(settings=small_settings) as kb:
        await kb.ingest_texts(texts)
        text = _index(kb)
        live = await text.live_postings()
        assert not any(term in ("the", "of", "and", "is") for counts in live.values()
                       for term in counts)
        assert live == await text.expected_postings()
        await _agrees(kb)  # the brute force counts stop words in every chunk's length
        # a query cannot hold a stop word, so "owning" finds "owned" but not "own"
        assert [h.source for h in await kb.search("owning", mode="text")] == ["owned.txt"]


async def test_scores_equal_brute_force_through_writes_deletes_merges(small_settings):
    async with await KnowledgeBase.open(settings=small_settings) as kb:
        await kb.ingest_texts(_corpus(1, 30))
        await kb.ingest_texts(_corpus(2, 3))
        text = _index(kb)
        await _agrees(kb)
        before = await text.stats()
        assert before["segments"] > 1
        # delete some documents (their chunks cascade; the event records each)
        docs = await kb.documents(limit=10)
        for doc in docs[:5]:
            await kb.delete_document(doc.id)
        assert (await text.stats())["dead"] > 0
        await _agrees(kb)
        # new versions of sources: unchanged chunks move, the rest are new
        changed = {k: v + ". apple pear extra words" for k, v in
                   list(_corpus(1, 30).items())[10:15]}
        await kb.ingest_texts(changed)
        await _agrees(kb)
        # merges drop the dead postings and keep the scores
        while await text.merge_once():
            pass
        await _agrees(kb)
        assert await text.merge_once(force=True)
        after = await text.stats()
        assert after["segments"] == 1 and after["dead"] == 0
        assert after["deletions_recorded"] == 0
        (count,) = await kb.store.query("SELECT count() AS n FROM chunks GROUP ALL;")
        assert after["chunks"] == count[0]["n"]
        await _agrees(kb)
        # deletes after a merge land in the merged segment
        docs = await kb.documents(limit=3)
        await kb.delete_document(docs[0].id)
        await _agrees(kb)


async def test_levels_merge_in_the_background(small_settings):
    async with await KnowledgeBase.open(settings=small_settings) as kb:
        corpus = _corpus(3, 40)
        for name, body in corpus.items():  # one small document at a time
            await kb.ingest_texts({name: body})
        text = _index(kb)
        await text.stop()  # waits for the running merge
        text.maintenance.resume()
        while await text.merge_once():
            pass
        stats = await text.stats()
        assert stats["segments"] < 20  # 40 writes, merged ten at a time
        await _agrees(kb)


async def test_rebuild_gives_the_same_scores(small_settings):
    async with await KnowledgeBase.open(settings=small_settings) as kb:
        await kb.ingest_texts(_corpus(4, 12))
        docs = await kb.documents(limit=2)
        await kb.delete_document(docs[0].id)
        text = _index(kb)
        indexed = await text.rebuild()
        (count,) = await kb.store.query("SELECT count() AS n FROM chunks GROUP ALL;")
        assert indexed == count[0]["n"]
        stats = await text.stats()
        assert stats["dead"] == 0 and stats["deletions_recorded"] == 0
        await _agrees(kb)


async def test_a_damaged_index_says_how_to_rebuild(small_settings):
    async with await KnowledgeBase.open(settings=small_settings) as kb:
        await kb.ingest_texts(_corpus(5, 4))
        text = _index(kb)
        await kb.store.query(f"DELETE {text.map_table};")
        await text.stop()  # no background merge reads the index meanwhile
        text.reader.forget()  # as a fresh process sees the store
        with pytest.raises(StoreError, match="rebuild-index"):
            await kb.search(_word(1), mode="text")
        await text.rebuild()
        await _agrees(kb)


async def test_stores_convert_between_engine_and_segments(tmp_path):
    db = f"surrealkv://{tmp_path / 'db'}"
    corpus = _corpus(6, 10)
    engine = Settings(db=db, embed=False, text_index="engine", relevance_cutoff=0)
    async with await KnowledgeBase.open(settings=engine) as kb:
        assert kb.storage.chunks.text is None
        await kb.ingest_texts(corpus)
        engine_hits = await kb.search(f"{_word(3)} apple", mode="text", limit=5)
    assert engine_hits
    async with await KnowledgeBase.open(settings=engine.replace(text_index="segments")) as kb:
        stats = await _index(kb).stats()
        (count,) = await kb.store.query("SELECT count() AS n FROM chunks GROUP ALL;")
        assert stats["chunks"] == count[0]["n"] > 0
        (info,) = await kb.store.query("INFO FOR TABLE chunks;")
        assert not any("ft" in name for name in info["indexes"])  # the engine index went
        await _agrees(kb)
        hits = await kb.search(f"{_word(3)} apple", mode="text", limit=5)
        assert {h.chunk_id for h in hits} & {h.chunk_id for h in engine_hits}
    async with await KnowledgeBase.open(settings=engine) as kb:
        again = await kb.search(f"{_word(3)} apple", mode="text", limit=5)
        assert [h.chunk_id for h in again] == [h.chunk_id for h in engine_hits]


async def test_filters_keep_their_meaning(small_settings):
    async with await KnowledgeBase.open(settings=small_settings) as kb:
        corpus = _corpus(7, 20)
        await kb.ingest_texts(corpus)
        nb = await kb.notebooks.create_notebook("picked")
        docs = await kb.documents(limit=100)
        chosen = docs[:3]
        await kb.notebooks.link_documents(nb, [d.id for d in chosen])
        query = " ".join(_word(i) for i in (1, 2, 3))
        hits = await kb.search(query, mode="text", notebook=nb, limit=50)
        assert hits and {h.document_id for h in hits} <= {d.id for d in chosen}
        one = chosen[0].source
        hits = await kb.search(query, mode="text", source=one, limit=50)
        assert hits and {h.source for h in hits} == {one}


MAINTAINER = textwrap.dedent("""
    import asyncio, os, sys
    from surrealdocs import KnowledgeBase, Settings

    async def main():
        settings = Settings(db=sys.argv[1], model="hashing-64", chunk_size=60,
                            chunk_overlap=0, insert_batch_size=5)
        async with await KnowledgeBase.open(settings=settings) as kb:
            text = kb.storage.chunks.text
            print("open", flush=True)
            n = 0
            while True:  # merges, rebuilds, deletes and writes until killed
                n += 1
                await kb.ingest_texts({f"more{os.getpid()}_{n}_{i}.txt":
                                       f"fresh words number {n} item {i} apple" for i in range(12)})
                docs = await kb.documents(limit=2)
                if docs:
                    await kb.delete_document(docs[0].id)
                await text.merge_once(force=n % 2 == 0)
                if n % 3 == 0:
                    await text.rebuild()

    asyncio.run(main())
""")


@pytest.mark.slow
def test_sigkill_during_merges_rebuilds_and_writes(tmp_path):
    """kill -9 at random moments of merges, rebuilds, deletes and writes: after each, the
    text index equals one rebuilt from the chunks (postings and vectors), and searches agree
    with brute force."""
    db = str(tmp_path / "kb")
    settings = Settings(db=db, model="hashing-64", chunk_size=60, chunk_overlap=0,
                        insert_batch_size=5)

    async def seed() -> None:
        async with await KnowledgeBase.open(settings=settings) as kb:
            await kb.ingest_texts(_corpus(8, 60))

    async def check() -> None:
        async with await KnowledgeBase.open(settings=settings) as kb:
            await assert_text_index_matches_chunks(kb)
            await _agrees(kb)

    asyncio.run(seed())
    rng = random.Random(int(os.environ.get("SURREALDOCS_TEST_SEED", "28")))
    for _ in range(10):
        proc = subprocess.Popen([sys.executable, "-c", MAINTAINER, db],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("open"), line + (proc.stderr.read() if proc.stderr else "")
            try:
                proc.wait(timeout=rng.uniform(0.1, 2.5))
                raise AssertionError("the maintainer stopped: " + (proc.stderr.read()
                                                                     if proc.stderr else ""))
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=PATIENCE)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        asyncio.run(check())


def test_the_analyzer_follows_the_engines():
    from surrealdocs.parts.analyzer import Analyzer

    english = Analyzer("english")
    assert english.terms("Running runners ran: R2D2, café!") == \
        ["run", "runner", "ran", "r", "2", "d", "2", "cafe"]
    assert english.terms("Crème brûlée") == english.terms("creme brulee")
    assert Analyzer("none").terms("Running runners") == ["running", "runners"]
    assert Analyzer("german").terms("Häuser") == Analyzer("german").terms("Haus")
    assert len(english.terms("x" * 500)[0]) == 64  # a run that long is cut, not dropped


async def test_the_view_is_read_again_only_after_something_may_have_written(small_settings):
    """Where every write goes through this process's store, searches reuse the last view
    of the segments until a statement that may write has run; every such statement counts,
    whatever wrote it (an ingest, a delete, a raw query). A store others write to (a
    server, a lent connection) reads the view for every search."""
    async with await KnowledgeBase.open(settings=small_settings) as kb:
        await kb.ingest_texts({"a.txt": "apple orchards in spring", "b.txt": "pear trees"})
        text = _index(kb)
        await text.stop()  # no background merge reads or writes meanwhile
        views = 0
        query = kb.store.query

        async def counting(sql, *args, **kwargs):
            nonlocal views
            views += f"FROM {text.segment_table}" in sql and "live = true" in sql
            return await query(sql, *args, **kwargs)

        kb.store.query = counting  # type: ignore[method-assign]
        assert kb.store.exclusive
        assert await kb.search("apple", mode="text")
        first = views
        for _ in range(3):  # nothing written: the view stands
            assert await kb.search("apple", mode="text")
        assert views == first
        await kb.store.query("DELETE chunks WHERE content CONTAINS 'apple';")
        assert await kb.search("apple", mode="text") == []  # seen at once
        assert views == first + 1
        await kb.ingest_texts({"c.txt": "apple pie"})
        assert [h.source for h in await kb.search("apple", mode="text")] == ["c.txt"]
        kb.store.owned = False  # as a connection the caller lent: others may write
        before = views
        await kb.search("apple", mode="text")
        await kb.search("apple", mode="text")
        assert views == before + 2


async def test_a_lease_held_by_a_gone_process_is_taken_over_at_once(small_settings):
    """A merge lease left by a killed process (300 s) no longer locks merges out: in a
    store only this process can open any other holder is gone; on a shared store, a holder
    of this machine whose process ended."""
    import socket

    from surrealdocs.store.segments.postings import holder_gone, lease_owner

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    host = socket.gethostname()
    assert holder_gone(f"{host}:{dead.stdout.strip()}-abcd1234")
    assert not holder_gone(f"{host}:{os.getpid()}-abcd1234")
    assert not holder_gone(f"elsewhere.example:{dead.stdout.strip()}-abcd1234")
    assert not holder_gone("12345-abcd1234")  # an old holder: its machine is not known
    assert lease_owner().startswith(f"{host}:{os.getpid()}-")
    async with await KnowledgeBase.open(settings=small_settings) as kb:
        text = kb.storage.chunks.text
        assert text is not None
        await kb.store.query("UPSERT $lease SET owner = $owner, until = time::now() + 300s;",
                             {"lease": text.lease_key, "owner": "elsewhere:1-dead0000"})
        for i in range(3):  # three segments, no level full
            await kb.ingest_texts({f"t{i}": _text(random.Random(i), 40)})
        assert (await text.stats())["segments"] == 3
        assert await text.merge_once(force=True)  # no 300 s wait
        assert (await text.stats())["segments"] == 1
