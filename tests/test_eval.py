from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from surrealdocs import ConfigurationError, Settings
from surrealdocs.core.evaluate import (
    document_text,
    evaluate,
    load_beir,
    mean_scores,
    score_run,
)
from surrealdocs.faces.cli import app

pytest.importorskip("pytrec_eval")

# --- metrics against values computed by hand ---------------------------------------------


def _log2(x: float) -> float:
    return math.log(x, 2)


def test_ndcg_mrr_recall_by_hand() -> None:
    qrels = {"q1": {"d1": 1, "d2": 1}}
    per_query = score_run(qrels, {"q1": ["d3", "d1", "d4", "d2"]})
    dcg = 1 / _log2(3) + 1 / _log2(5)
    idcg = 1 + 1 / _log2(3)
    assert per_query["q1"]["ndcg@10"] == pytest.approx(dcg / idcg)  # 0.6509
    assert per_query["q1"]["mrr@10"] == pytest.approx(0.5)
    assert per_query["q1"]["recall@100"] == pytest.approx(1.0)


def test_graded_relevance_uses_the_grade_as_gain() -> None:
    per_query = score_run({"q": {"a": 2, "b": 1, "z": 0}}, {"q": ["b", "z", "a"]})
    dcg = 1 + 2 / _log2(4)
    idcg = 2 + 1 / _log2(3)
    assert per_query["q"]["ndcg@10"] == pytest.approx(dcg / idcg)
    assert per_query["q"]["mrr@10"] == pytest.approx(1.0)


def test_cutoffs() -> None:
    filler = [f"x{i}" for i in range(200)]
    qrels = {"late": {"r": 1}, "very_late": {"r": 1}}
    per_query = score_run(qrels, {"late": [*filler[:10], "r"], "very_late": [*filler[:100], "r"]})
    # rank 11: outside nDCG@10 and MRR@10, inside Recall@100
    assert per_query["late"] == {"ndcg@10": 0.0, "recall@100": 1.0, "mrr@10": 0.0}
    # rank 101: outside Recall@100 too
    assert per_query["very_late"]["recall@100"] == 0.0


def test_order_is_the_runs_not_trec_evals_tie_breaking() -> None:
    # trec_eval breaks score ties by document id; the run's own order must win
    per_query = score_run({"q": {"a": 1}}, {"q": ["z", "a"]})
    assert per_query["q"]["mrr@10"] == pytest.approx(0.5)


def test_missing_and_empty_queries_count_as_zero() -> None:
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}}
    per_query = score_run(qrels, {"q1": ["d1"], "q2": []})
    assert per_query["q2"] == per_query["q3"] == {"ndcg@10": 0.0, "recall@100": 0.0,
                                                  "mrr@10": 0.0}
    means = mean_scores(per_query)
    assert means["ndcg@10"] == pytest.approx(1 / 3)
    assert means["recall@100"] == pytest.approx(1 / 3)


def test_duplicate_documents_in_a_run_count_once() -> None:
    per_query = score_run({"q": {"a": 1, "b": 1}}, {"q": ["a", "a", "b"]})
    assert per_query["q"]["ndcg@10"] == pytest.approx(1.0)


# --- loading ---------------------------------------------------------------------------------

CORPUS = {
    "d1": ("Cats", "Domestic cats sleep for most of the day and hunt rodents at night."),
    "d2": ("Markets", "The stock exchange closed higher as investors bought bank shares."),
    "d3": ("Geology", "Magma rising through the crust erupts from a volcano as lava."),
    "d4": ("", "Knead the dough, let it rise for an hour, then bake the loaf of bread."),
    "d5": ("Geology", "Magma rising through the crust erupts from a volcano as lava."),  # = d3
    "d6": ("Error codes", "The service fails with error XYZ-123 when the disk is full."),
}
QUERIES = {"q1": "volcano lava", "q2": "bank shares stock exchange", "q3": "error XYZ-123",
           "q4": "bread dough", "q9": "unjudged query"}
QRELS = "query-id\tcorpus-id\tscore\nq1\td3\t1\nq1\td5\t1\nq2\td2\t2\nq3\td6\t1\nq4\td4\t1\n"


def write_beir(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    with (root / "corpus.jsonl").open("w") as f:
        for did, (title, text) in CORPUS.items():
            f.write(json.dumps({"_id": did, "title": title, "text": text}) + "\n")
    with (root / "queries.jsonl").open("w") as f:
        for qid, text in QUERIES.items():
            f.write(json.dumps({"_id": qid, "text": text}) + "\n")
    (root / "qrels" / "test.tsv").write_text(QRELS)
    (root / "qrels" / "dev.tsv").write_text("q4\td4\t1\n")  # no header
    return root


def test_load_beir(tmp_path: Path) -> None:
    data = load_beir(write_beir(tmp_path / "tiny"))
    assert data.name == "tiny" and data.split == "test"
    assert len(data.corpus) == 6 and data.corpus["d4"][0] == ""
    assert set(data.queries) == {"q1", "q2", "q3", "q4"}  # only judged queries
    assert data.qrels["q1"] == {"d3": 1, "d5": 1} and data.qrels["q2"] == {"d2": 2}
    dev = load_beir(tmp_path / "tiny", split="dev")
    assert dev.qrels == {"q4": {"d4": 1}} and list(dev.queries) == ["q4"]
    with pytest.raises(ConfigurationError, match=r"splits here: dev, test"):
        load_beir(tmp_path / "tiny", split="train")
    with pytest.raises(ConfigurationError, match="not a BEIR dataset"):
        load_beir(tmp_path)


def test_document_text() -> None:
    assert document_text(" Title ", "Body.") == "Title\n\nBody."
    assert document_text("", "Body.") == "Body."
    assert document_text("Only title", "") == "Only title"


# --- end to end ------------------------------------------------------------------------------


async def test_evaluate_end_to_end(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "tiny")
    report = await evaluate(root, settings=Settings(db="mem://", model="hashing-64"))
    assert (report.documents, report.queries) == (6, 4)
    assert report.chunks == 5  # d3 and d5 have the same text: stored once
    assert [r.mode for r in report.results] == ["text", "vector", "hybrid"]
    text = report.result("text")
    # lexical queries on a lexical corpus: every relevant document first
    assert text.metrics == {"ndcg@10": 1.0, "recall@100": 1.0, "mrr@10": 1.0}
    # the stored duplicate stands for both corpus ids
    assert set(report.runs["text"]["q1"][:2]) == {"d3", "d5"}
    for r in report.results:
        assert set(r.metrics) == {"ndcg@10", "recall@100", "mrr@10"}
        assert all(0.0 <= v <= 1.0 for v in r.metrics.values())
        assert r.seconds >= 0 and r.queries == 4
    assert report.settings["model"] == "hashing-64"
    # what the vector leg used: the text index's codes; the graph with the engine's index
    assert report.settings["vector_index"] == "exact scan of int8 codes"
    assert report.settings["relevance_cutoff"] == 0.2  # the ranking is measured without it
    engine = await evaluate(root, settings=Settings(db="mem://", model="hashing-64",
                                                    text_index="engine"), modes=["vector"])
    assert engine.settings["vector_index"] == "graph + 5 pending (exact scan)"


async def test_evaluate_reuses_a_store_of_the_dataset_only(tmp_path: Path) -> None:
    from surrealdocs import KnowledgeBase

    db = str(tmp_path / "kb")
    root = write_beir(tmp_path / "tiny")
    settings = Settings(db=db, model="hashing-64")
    first = await evaluate(root, settings=settings, modes=["text"])
    again = await evaluate(root, settings=settings, modes=["text", "hybrid"])
    assert (first.reused, again.reused) == (0, 6)  # nothing ingested the second time
    assert again.result("text").metrics == first.result("text").metrics
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        await kb.ingest_bytes(b"not in the dataset", mime_type="text/plain", source="n://1")
    with pytest.raises(ConfigurationError, match="not in"):
        await evaluate(root, settings=settings)


def test_eval_command(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "tiny")
    runner = CliRunner()
    out_file = tmp_path / "figures.json"
    result = runner.invoke(app, ["eval", str(root), "--model", "hashing-64", "--json",
                                 "--mode", "text", "--mode", "hybrid", "-o", str(out_file)])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    assert figures == json.loads(out_file.read_text())
    assert [r["mode"] for r in figures["results"]] == ["text", "hybrid"]
    assert figures["results"][0]["ndcg@10"] == 1.0
    assert {"recall@100", "mrr@10", "seconds", "ms_per_query"} <= set(figures["results"][1])
    assert figures["queries"] == 4 and figures["settings"]["hybrid_fusion"] == "zscore"

    result = runner.invoke(app, ["eval", str(root), "--model", "hashing-64",
                                 "--fusion", "zscore", "--candidates", "20"])
    assert result.exit_code == 0, result.output
    assert "nDCG@10" in result.output and "hybrid" in result.output and "zscore" in result.output

    result = runner.invoke(app, ["eval", str(tmp_path), "--model", "hashing-64"])
    assert result.exit_code == 2 and "not a BEIR dataset" in result.output


# --- many datasets, comparisons ------------------------------------------------------------


def test_each_of_several_datasets_gets_its_own_store() -> None:
    from surrealdocs.core.evaluate import settings_for_dataset

    assert settings_for_dataset(Settings(db="mem://"), "med").db == "mem://"
    own = settings_for_dataset(Settings(db="/tmp/stores"), "med")
    assert own.db == "surrealkv:///tmp/stores/med"
    remote = settings_for_dataset(Settings(db="ws://db:8000", database="eval"), "npl")
    assert (remote.db, remote.database) == ("ws://db:8000", "eval_npl")


def test_eval_command_on_several_datasets_and_compare(tmp_path: Path) -> None:
    first, second = write_beir(tmp_path / "one"), write_beir(tmp_path / "two")
    runner = CliRunner()
    stores, before = tmp_path / "stores", tmp_path / "before.json"
    result = runner.invoke(app, ["eval", str(first), str(second), "--model", "hashing-64",
                                 "--db", str(stores), "--mode", "text", "--mode", "vector",
                                 "-o", str(before)])
    assert result.exit_code == 0, result.output
    assert "mean" in result.output and "one" in result.output and "two" in result.output
    assert sorted(p.name for p in stores.iterdir()) == ["one", "two"]  # a store each
    figures = json.loads(before.read_text())
    assert [d["dataset"] for d in figures["datasets"]] == ["one", "two"]
    vector = [next(r for r in d["results"] if r["mode"] == "vector")
              for d in figures["datasets"]]
    assert figures["mean"]["vector"]["ndcg@10"] == pytest.approx(
        (vector[0]["ndcg@10"] + vector[1]["ndcg@10"]) / 2, abs=1e-4)
    assert set(vector[0]["per_query"]) == {"q1", "q2", "q3", "q4"}

    # the stores are reused; other options change the hybrid figures only
    after = tmp_path / "after.json"
    result = runner.invoke(app, ["eval", str(first), str(second), "--model", "hashing-64",
                                 "--db", str(stores), "--json", "-o", str(after)])
    assert result.exit_code == 0, result.output
    assert all(d["reused"] == 6 for d in json.loads(result.output)["datasets"])

    # doctor one query's figure in the "after" file: compare must find exactly that change
    doctored = json.loads(after.read_text())
    text = doctored["datasets"][1]["results"][0]
    assert text["mode"] == "text" and text["per_query"]["q2"]["ndcg@10"] == 1.0
    text["per_query"]["q2"]["ndcg@10"] = 0.5
    text["ndcg@10"] = 0.875
    after.write_text(json.dumps(doctored))
    result = runner.invoke(app, ["eval", "--compare", str(before), str(after), "--json"])
    assert result.exit_code == 0, result.output
    differences = json.loads(result.output)["differences"]
    assert [(d["dataset"], d["mode"]) for d in differences] == [
        ("one", "text"), ("one", "vector"), ("two", "text"), ("two", "vector")]  # shared
    changed = differences[2]
    assert changed["delta"]["ndcg@10"] == pytest.approx(-0.125)
    assert changed["queries"] == [{"query": "q2", "before": 1.0, "after": 0.5}]
    assert (changed["improved"], changed["worsened"]) == (0, 1)
    assert all(d["queries"] == [] for i, d in enumerate(differences) if i != 2)
    result = runner.invoke(app, ["eval", "--compare", str(before), str(after)])
    assert result.exit_code == 0 and "-0.1250" in result.output and "q2 1.00→0.50" in result.output

    for bad in (["eval"], ["eval", str(first), "--compare", str(before), str(after)],
                ["eval", "--compare", str(before), str(tmp_path / "missing.json")],
                ["eval", str(first), str(first), "--model", "hashing-64"]):
        result = runner.invoke(app, bad)
        assert result.exit_code == 2, (bad, result.output)
