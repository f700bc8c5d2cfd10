"""Tables, indexes and their versioned migrations.

The schema version lives in ``surrealdocs_meta:schema``. Opening a store applies every
migration it lacks, in order; a store whose version is newer than this code is refused.
The embedding model's name and dimension live in ``surrealdocs_meta:embedding``: a store is
bound to one model, because vectors of two models cannot be compared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config import Settings
from ..errors import EmbeddingModelMismatchError, SchemaVersionError, StoreError
from .connection import Store
from .names import META, Names


def hnsw_index_sql(names: Names, settings: Settings, dimension: int) -> str:
    return (f"DEFINE INDEX IF NOT EXISTS {names.hnsw_index} ON {names.chunks} FIELDS embedding"
            f" HNSW DIMENSION {int(dimension)} DIST {settings.hnsw_distance} TYPE F32"
            f" EFC {int(settings.hnsw_efc)} M {int(settings.hnsw_m)};")


def ft_index_sql(names: Names, settings: Settings, *, overwrite: bool = False) -> str:
    clause = "OVERWRITE" if overwrite else "IF NOT EXISTS"
    return (f"DEFINE INDEX {clause} {names.ft_index} ON {names.chunks} FIELDS content"
            f" FULLTEXT ANALYZER {names.analyzer}"
            f" BM25({float(settings.bm25_k1)},{float(settings.bm25_b)}) HIGHLIGHTS;")


def _v1(names: Names, settings: Settings, dimension: int) -> str:
    DOCUMENTS, CHUNKS, FILES = names.documents, names.chunks, names.files
    ANALYZER = names.analyzer
    return f"""
DEFINE ANALYZER IF NOT EXISTS {ANALYZER} TOKENIZERS blank,class
    FILTERS lowercase,ascii,snowball(english);

DEFINE TABLE IF NOT EXISTS {DOCUMENTS} SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS source ON {DOCUMENTS} TYPE string;
DEFINE FIELD IF NOT EXISTS sources ON {DOCUMENTS} TYPE array<string> DEFAULT [];
DEFINE FIELD IF NOT EXISTS content ON {DOCUMENTS} TYPE string;
DEFINE FIELD IF NOT EXISTS mime_type ON {DOCUMENTS} TYPE string;
DEFINE FIELD IF NOT EXISTS content_hash ON {DOCUMENTS} TYPE string;
DEFINE FIELD IF NOT EXISTS title ON {DOCUMENTS} TYPE option<string>;
DEFINE FIELD IF NOT EXISTS authors ON {DOCUMENTS} TYPE option<array<string>>;
DEFINE FIELD IF NOT EXISTS created_at ON {DOCUMENTS} TYPE option<datetime>;
DEFINE FIELD IF NOT EXISTS metadata ON {DOCUMENTS} TYPE option<object> FLEXIBLE;
DEFINE FIELD IF NOT EXISTS detected_languages ON {DOCUMENTS} TYPE option<array<string>>;
DEFINE FIELD IF NOT EXISTS quality_score ON {DOCUMENTS} TYPE option<float>;
DEFINE FIELD IF NOT EXISTS page_count ON {DOCUMENTS} TYPE option<int>;
DEFINE FIELD IF NOT EXISTS chunk_count ON {DOCUMENTS} TYPE int DEFAULT 0;
DEFINE FIELD IF NOT EXISTS embedding_model ON {DOCUMENTS} TYPE option<string>;
DEFINE FIELD IF NOT EXISTS complete ON {DOCUMENTS} TYPE bool DEFAULT false;
DEFINE FIELD IF NOT EXISTS ingested_at ON {DOCUMENTS} TYPE datetime VALUE time::now() READONLY;
DEFINE FIELD IF NOT EXISTS updated_at ON {DOCUMENTS} TYPE datetime VALUE time::now();
DEFINE INDEX IF NOT EXISTS {DOCUMENTS}_content_hash ON {DOCUMENTS} FIELDS content_hash UNIQUE;
DEFINE INDEX IF NOT EXISTS {DOCUMENTS}_source ON {DOCUMENTS} FIELDS source;
DEFINE INDEX IF NOT EXISTS {DOCUMENTS}_mime ON {DOCUMENTS} FIELDS mime_type;
DEFINE INDEX IF NOT EXISTS {DOCUMENTS}_complete ON {DOCUMENTS} FIELDS complete;

DEFINE TABLE IF NOT EXISTS {CHUNKS} SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS document ON {CHUNKS} TYPE record<{DOCUMENTS}> REFERENCE ON DELETE CASCADE;
DEFINE FIELD IF NOT EXISTS content ON {CHUNKS} TYPE string;
DEFINE FIELD IF NOT EXISTS chunk_index ON {CHUNKS} TYPE int;
DEFINE FIELD IF NOT EXISTS char_start ON {CHUNKS} TYPE int;
DEFINE FIELD IF NOT EXISTS char_end ON {CHUNKS} TYPE int;
DEFINE FIELD IF NOT EXISTS page_number ON {CHUNKS} TYPE option<int>;
DEFINE FIELD IF NOT EXISTS first_page ON {CHUNKS} TYPE option<int>;
DEFINE FIELD IF NOT EXISTS last_page ON {CHUNKS} TYPE option<int>;
DEFINE FIELD IF NOT EXISTS word_count ON {CHUNKS} TYPE int;
DEFINE FIELD IF NOT EXISTS embedding ON {CHUNKS} TYPE option<array<float>>;
DEFINE INDEX IF NOT EXISTS {CHUNKS}_document ON {CHUNKS} FIELDS document;
{ft_index_sql(names, settings)}
{hnsw_index_sql(names, settings, dimension)}

DEFINE TABLE IF NOT EXISTS {FILES} SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS path ON {FILES} TYPE string;
DEFINE FIELD IF NOT EXISTS file_hash ON {FILES} TYPE string;
DEFINE FIELD IF NOT EXISTS size ON {FILES} TYPE int;
DEFINE FIELD IF NOT EXISTS status ON {FILES} TYPE string
    ASSERT $value IN ['ingested', 'duplicate', 'failed', 'empty'];
DEFINE FIELD IF NOT EXISTS error ON {FILES} TYPE option<string>;
DEFINE FIELD IF NOT EXISTS mime_type ON {FILES} TYPE option<string>;
DEFINE FIELD IF NOT EXISTS document ON {FILES} TYPE option<record<{DOCUMENTS}>>;
DEFINE FIELD IF NOT EXISTS seen_at ON {FILES} TYPE datetime VALUE time::now();
DEFINE INDEX IF NOT EXISTS {FILES}_document ON {FILES} FIELDS document;
"""


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    sql: Callable[[Names, Settings, int], str]


def _v2(names: Names, settings: Settings, dimension: int) -> str:
    # The BM25 defaults moved from (1.2, 0.75) to Lucene/Anserini's (0.9, 0.4), which rank
    # chunks better (see BENCHMARKS.md). Redefining the index rebuilds it with the parameters
    # of the settings the store is opened with: once, for stores made before version 2.
    return ft_index_sql(names, settings, overwrite=True)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "documents, chunks (BM25 + HNSW), files", _v1),
    Migration(2, "full-text index with the BM25 parameters of the settings", _v2),
)
SCHEMA_VERSION = MIGRATIONS[-1].version


async def ensure_schema(store: Store, settings: Settings, model: str, dimension: int) -> int:
    """Create or upgrade the schema, and bind the store to ``model``. Returns the version.

    Idempotent. Raises :class:`SchemaVersionError` when the database is newer than this code
    and :class:`EmbeddingModelMismatchError` when it was embedded with another model.
    """
    await store.query(f"DEFINE TABLE IF NOT EXISTS {META} SCHEMALESS;")
    names = store.names
    schema, embedding = await store.query(
        "SELECT * FROM ONLY $schema; SELECT * FROM ONLY $embedding;",
        {"schema": names.schema_key, "embedding": names.embedding_key},
    )
    current = int(schema["version"]) if schema else 0
    if current > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"the database at {store.url} has schema version {current}, but this surrealdocs "
            f"only knows up to version {SCHEMA_VERSION}: upgrade surrealdocs to open it"
        )
    if embedding:
        check_embedding_model(embedding, model, dimension, store.url)
    for migration in MIGRATIONS:
        if migration.version <= current:
            continue
        await store.query(
            "BEGIN;\n" + migration.sql(names, settings, dimension)
            + "\nUPSERT $schema MERGE { version: $version, description: $description,"
            " applied_at: time::now() };\nCOMMIT;",
            {"schema": names.schema_key, "version": migration.version,
             "description": migration.description},
        )
    if not embedding:
        await store.query(
            "UPSERT $embedding MERGE { model: $model, dimension: $dimension,"
            " distance: $distance, created_at: time::now() };",
            {"embedding": names.embedding_key, "model": model, "dimension": dimension,
             "distance": settings.hnsw_distance},
        )
    return SCHEMA_VERSION


def check_embedding_model(stored: dict[str, Any], model: str, dimension: int, url: str) -> None:
    if stored.get("reembedding"):
        raise EmbeddingModelMismatchError(
            f"re-embedding the store at {url} with {stored['reembedding']!r} was interrupted; "
            f"finish it first: surrealdocs reembed --model {stored['reembedding']}"
        )
    if stored.get("model") == model and int(stored.get("dimension", -1)) == dimension:
        return
    raise EmbeddingModelMismatchError(
        f"the store at {url} holds vectors of model {stored.get('model')!r} "
        f"({stored.get('dimension')} dimensions), not {model!r} ({dimension} dimensions). "
        f"Open it with --model {stored.get('model')} (SURREALDOCS_MODEL), or re-embed every "
        f"chunk with the new model: surrealdocs reembed --model {model}"
    )


async def stored_embedding_model(store: Store) -> dict[str, Any] | None:
    try:
        (row,) = await store.query("SELECT * FROM ONLY $k;", {"k": store.names.embedding_key})
    except StoreError:
        return None
    return row if isinstance(row, dict) else None


async def index_status(store: Store, index: str, table: str) -> str:
    (info,) = await store.query(f"INFO FOR INDEX {index} ON {table};")
    building = (info or {}).get("building") or {}
    return str(building.get("status", "ready"))
