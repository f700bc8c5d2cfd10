"""`surrealdocs search` is one call of `KnowledgeBase.search`: with a notebook scope, every
option gives the hits the library gives for the same arguments (none is silently dropped)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import shutil
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import SAMPLES
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.embed import get_embedder
from surrealdocs.faces.cli import app

runner = CliRunner()
QUERY = "vector index ranking of documents"
PASSAGES = {
    "one.md": "# Ranking\n\nBM25 ranks documents by term frequency and document length.",
    "two.md": "# Vectors\n\nAn HNSW index finds similar vectors in a graph of neighbours.",
    "three.md": "# Fusion\n\nHybrid ranking fuses the BM25 list and the vector list.",
    "outside.md": "# Outside\n\nVector index ranking of documents, but not in the notebook.",
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("cli_search")
    docs = root / "docs"
    shutil.copytree(SAMPLES, docs)
    for name, text in PASSAGES.items():
        (docs / name).write_text(text)
    db = str(root / "kb")
    common = ["--db", db, "--model", "hashing-64"]
    inside = [str(p) for p in sorted(docs.iterdir()) if p.name != "outside.md"]
    assert runner.invoke(app, ["add", "Papers", *inside[:4], "--topic", "early", *common]
                         ).exit_code == 0
    middle = dt.datetime.now(dt.timezone.utc)
    assert runner.invoke(app, ["add", "Papers", *inside[4:], "--topic", "late", *common]
                         ).exit_code == 0
    assert runner.invoke(app, ["ingest", str(docs / "outside.md"), *common]).exit_code == 0
    return {"db": db, "common": common, "middle": middle}


def cli_hits(store: dict[str, Any], *args: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["search", QUERY, "--notebook", "Papers", "--json", *args,
                                 *store["common"]])
    assert result.exit_code == 0, result.output
    hits: list[dict[str, Any]] = json.loads(result.output)
    return hits


def library_hits(store: dict[str, Any], **kwargs: Any) -> list[dict[str, Any]]:
    async def main() -> list[dict[str, Any]]:
        settings = Settings(db=store["db"], model="hashing-64")
        async with await KnowledgeBase.open(settings=settings) as kb:
            return [h.to_dict() for h in await kb.search(QUERY, notebook="Papers", **kwargs)]

    return asyncio.run(main())


def same(cli: list[dict[str, Any]], lib: list[dict[str, Any]]) -> None:
    assert [(h["chunk_id"], round(h["score"], 9)) for h in cli] == \
        [(h["chunk_id"], round(h["score"], 9)) for h in lib]


MIDDLE = "MIDDLE"  # replaced by the time between the two `add` calls
VECTOR = "VECTOR"  # replaced by the vector of another text, by the store's model

OPTIONS: list[tuple[list[str], dict[str, Any]]] = [
    (["--mode", "text"], {"mode": "text"}),
    (["--mode", "vector"], {"mode": "vector"}),
    (["--mode", "hybrid"], {"mode": "hybrid"}),
    (["--limit", "2"], {"limit": 2}),
    (["--min-score", "0.5"], {"min_score": 0.5}),
    (["--source", "*.md"], {"source": "*.md"}),
    (["--mime-type", "text/plain", "--mime-type", "application/pdf"],
     {"mime_type": ["text/plain", "application/pdf"]}),
    (["--topic", "late"], {"topics": ["late"]}),
    (["--created-after", MIDDLE], {"created_after": MIDDLE}),
    (["--created-before", MIDDLE], {"created_before": MIDDLE}),
    (["--per-document"], {"per_document": True}),
    (["--fusion", "rrf"], {"fusion": "rrf"}),
    (["--fusion", "minmax"], {"fusion": "minmax"}),
    (["--fusion", "rrf", "--rrf-k", "2"], {"fusion": "rrf", "rrf_k": 2}),
    (["--mode", "vector", "--query-vector", VECTOR], {"mode": "vector", "query_vector": VECTOR}),
    (["--candidates", "3"], {"candidates": 3}),
    (["--text-weight", "0.1"], {"text_weight": 0.1}),
    (["--vector-weight", "0.1"], {"vector_weight": 0.1}),
]


@pytest.mark.parametrize("args,kwargs", OPTIONS, ids=[" ".join(a) for a, _ in OPTIONS])
def test_notebook_search_honours_every_option(store: dict[str, Any], args: list[str],
                                              kwargs: dict[str, Any]) -> None:
    middle = store["middle"]
    vector = get_embedder("hashing-64").embed_query("a graph of neighbours").tolist()
    args = [middle.isoformat().replace("+00:00", "") if a == MIDDLE
            else json.dumps(vector) if a == VECTOR else a for a in args]
    kwargs = {k: (middle if v == MIDDLE else vector if v == VECTOR else v)
              for k, v in kwargs.items()}
    with_option = cli_hits(store, *args)
    same(with_option, library_hits(store, **kwargs))
    assert with_option, "the option should leave some hits to compare"
    assert all(not h["source"].endswith("outside.md") for h in with_option)
    if kwargs != {"mode": "hybrid"}:  # hybrid is the default: the rest change the result
        assert with_option != cli_hits(store), f"{args} made no difference"


def test_a_query_of_common_words_finds_nothing_and_says_why(store: dict[str, Any]) -> None:
    for mode in ("text", "vector", "hybrid"):
        result = runner.invoke(app, ["search", "The of and", "--mode", mode, *store["common"]])
        assert result.exit_code == 0, result.output
        assert "no hits: every word of the query is a common word (the, of, and)" in \
            " ".join(result.output.split())
    result = runner.invoke(app, ["search", "the ranking", "--mode", "text", *store["common"]])
    assert "no hits" not in result.output and "common word" not in result.output
