"""Know when nothing matches: a hit's score is the probability that it is relevant, from
the query and the chunk alone, and the default cut-off on it leaves out what is probably
not relevant, in every face (with a way to see the weaker matches)."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import pytest
from typer.testing import CliRunner

from surrealdocs import KnowledgeBase, Settings
from surrealdocs.core.answer import NOTHING_FOUND
from surrealdocs.embed import get_embedder
from surrealdocs.errors import ConfigurationError
from surrealdocs.faces.cli import app
from surrealdocs.parts.relevance import BUNDLED, calibration_for, coverage

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
OFF_TOPIC = ["recipe for banana bread", "how to repair a bicycle chain",
             "symptoms of feline kidney disease"]


def corpus() -> dict[str, str]:
    texts = {f"news://{i}": f"In {place}, the {subject}."
             for i, (place, subject) in enumerate(itertools.product(PLACES, SUBJECTS))}
    texts[KITTEN] = KITTEN_TEXT
    return texts


@pytest.fixture(scope="module")
def minilm():  # type: ignore[no-untyped-def]
    return get_embedder("all-minilm-l6-v2")


def test_coverage_is_the_share_of_the_querys_idf_the_chunk_holds() -> None:
    weights = {"heron": 1, "fish": 1, "banana": 1}
    idf = {"heron": 3.0, "fish": 1.0, "banana": 6.0}  # banana: in no chunk, the most
    assert coverage(weights, idf, ["heron", "fish", "water"]) == pytest.approx(4 / 10)
    assert coverage(weights, idf, ["water"]) == 0.0
    assert coverage({}, idf, ["heron"]) == 0.0
    # the bundled model's calibration: more evidence, more likely relevant
    assert BUNDLED.probability(0.7, 1.0) > BUNDLED.probability(0.4, 1.0) > \
        BUNDLED.probability(0.1, 0.0)
    assert BUNDLED.probability(None, 1.0) > BUNDLED.probability(None, 0.3)
    assert calibration_for("all-MiniLM-L6-v2") is BUNDLED
    assert calibration_for("openai:text-embedding-3-small").against_background


@pytest.mark.slow
async def test_off_topic_questions_find_nothing_and_on_topic_ones_their_passage(
        minilm) -> None:  # type: ignore[no-untyped-def]
    async with await KnowledgeBase.open(settings=Settings(db="mem://"),
                                        embedder=minilm) as kb:
        await kb.ingest_texts(corpus().items())
        for question in OFF_TOPIC:
            for mode in ("hybrid", "vector", "text"):
                assert await kb.search(question, mode=mode) == [], (question, mode)
            weaker = await kb.search(question, cutoff=False)  # still there when asked for
            assert len(weaker) == 10
            assert all(h.score < kb.settings.relevance_cutoff for h in weaker)
        for question, source in (("my cat sleeps on the sofa all afternoon", KITTEN),
                                 ("which central bank raised interest rates", None)):
            hits = await kb.search(question)
            assert hits and hits[0].score >= kb.settings.relevance_cutoff, question
            if source:
                assert hits[0].source == source
            assert all(h.similarity is not None and h.coverage is not None for h in hits)
        # min_score is the same probability, and nothing else
        best = (await kb.search("which central bank raised interest rates"))[0].score
        assert await kb.search("which central bank raised interest rates",
                               min_score=min(1.0, best + 1e-9)) == []
        for bad in (-0.1, 1.5, float("nan")):
            with pytest.raises(ConfigurationError, match="min_score"):
                await kb.search("bank", min_score=bad)


@pytest.mark.slow
async def test_the_same_chunk_scores_the_same_under_every_filter_and_grouping(
        minilm) -> None:  # type: ignore[no-untyped-def]
    """A property over random searches: each hit's score is the one the chunk has in the
    unfiltered search of the same query and mode, whatever the filters, limit, grouping
    or notebook scope."""
    texts = corpus()
    rng = random.Random(39)
    async with await KnowledgeBase.open(settings=Settings(db="mem://"),
                                        embedder=minilm) as kb:
        await kb.ingest_texts(list(texts.items())[:80])
        await kb.ingest_texts(list(texts.items())[80:], mime_type="text/markdown")
        nb = await kb.notebooks.create_notebook("some")
        docs = await kb.documents(limit=500)
        await kb.notebooks.link_documents(nb, [d.id for d in docs[::3]])
        queries = ["interest rates of the central bank", "a cat on the couch",
                   "Oslo harbour traffic", "storms on the coast of Perth"]
        reference: dict[tuple[str, str], dict[str, float]] = {}
        for query, mode in itertools.product(queries, ("hybrid", "vector", "text")):
            hits = await kb.search(query, mode=mode, limit=500, cutoff=False,
                                   candidates=500)
            reference[(query, mode)] = {h.chunk_id: h.score for h in hits}
        checked = 0
        for _ in range(40):
            query, mode = rng.choice(queries), rng.choice(("hybrid", "vector", "text"))
            options: dict[str, Any] = {"limit": rng.choice((1, 3, 10, 50)),
                                       "per_document": rng.random() < 0.5,
                                       "cutoff": rng.random() < 0.5}
            if rng.random() < 0.5:
                options["source"] = rng.choice(("news://1*", "news://*", "kitten://*", "*"))
            if rng.random() < 0.3:
                options["mime_type"] = rng.choice(("text/plain", "text/markdown"))
            if rng.random() < 0.3:
                options["notebook"] = nb
            if mode == "hybrid" and rng.random() < 0.5:
                options["candidates"] = rng.choice((5, 20, 100))
            for hit in await kb.search(query, mode=mode, **options):
                assert hit.score == pytest.approx(reference[(query, mode)][hit.chunk_id],
                                                  abs=1e-9), (query, mode, options)
                checked += 1
        assert checked > 100


@pytest.mark.slow
async def test_ask_answers_off_topic_questions_without_a_model(minilm) -> None:  # type: ignore[no-untyped-def]
    from chat_server import chat_server

    with chat_server() as server:
        settings = Settings(db="mem://", llm="openai:tiny", llm_base_url=server.url + "/v1")
        async with await KnowledgeBase.open(settings=settings, embedder=minilm) as kb:
            await kb.ingest_texts(corpus().items())
            for question in OFF_TOPIC:
                answer = await kb.ask(question)
                assert answer.text == NOTHING_FOUND and answer.model is None
            assert server.requests == []
            server.reply = "The central bank raised rates [1]."
            answer = await kb.ask("Which central bank raised interest rates?")
            assert answer.grounded and len(server.requests) == 1


@pytest.mark.slow
def test_the_command_line_says_when_nothing_looks_relevant(tmp_path: Any) -> None:
    db = str(tmp_path / "db")
    runner = CliRunner()
    notes = tmp_path / "notes"
    notes.mkdir()
    for i, text in enumerate(corpus().values()):
        (notes / f"{i:03d}.txt").write_text(text)
    assert runner.invoke(app, ["ingest", str(notes), "--db", db]).exit_code == 0
    found = runner.invoke(app, ["search", "recipe for banana bread", "--db", db])
    assert found.exit_code == 0, found.output
    assert "no passage looks relevant" in found.output and "--all" in found.output
    weaker = runner.invoke(app, ["search", "recipe for banana bread", "--all", "--json",
                                 "--db", db])
    assert weaker.exit_code == 0 and len(json.loads(weaker.output)) == 10
    bad = runner.invoke(app, ["search", "bank", "--min-score", "2", "--db", db])
    assert bad.exit_code == 2 and "min_score" in bad.output


def test_the_setting_is_checked() -> None:
    for bad in (-1, 1, float("nan"), "many", True):
        with pytest.raises(ConfigurationError, match="relevance_cutoff"):
            Settings(db="mem://", relevance_cutoff=bad)  # type: ignore[arg-type]
    assert Settings.from_env({"SURREALDOCS_RELEVANCE_CUTOFF": "0.2"}).relevance_cutoff == 0.2


def test_search_json_says_why_it_is_empty_on_stderr(tmp_path: Any) -> None:
    runner = CliRunner()  # stdout and stderr apart
    db = ["--db", str(tmp_path / "db"), "--model", "hashing-64"]
    note = tmp_path / "n.txt"
    note.write_text("Herons wade in shallow water.")
    assert runner.invoke(app, ["ingest", str(note), *db]).exit_code == 0
    out = runner.invoke(app, ["search", "the of and", "--json", *db])
    assert out.exit_code == 0 and json.loads(out.stdout) == []
    assert "common word" in out.stderr
    assert "--server" not in runner.invoke(app, ["serve", "--help"]).stdout
