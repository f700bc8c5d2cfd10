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


def _v1(names: Names, settings: Settings, dimension: int) -> str:
    DOCUMENTS, CHUNKS, FILES = names.documents, names.chunks, names.files
    ANALYZER, FT_INDEX = names.analyzer, names.ft_index
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
DEFINE INDEX IF NOT EXISTS {FT_INDEX} ON {CHUNKS} FIELDS content
    FULLTEXT ANALYZER {ANALYZER} BM25({settings.bm25_k1},{settings.bm25_b}) HIGHLIGHTS;
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


def _v2(names: Names, settings: Settings, dimension: int) -> str:
    D, C, NB = names.documents, names.chunks, names.notebook
    REF, NOTE, ART, JOB = names.reference, names.note, names.artifact, names.job
    return f"""
DEFINE FIELD IF NOT EXISTS generation ON {D} TYPE int DEFAULT 0;
DEFINE FIELD IF NOT EXISTS topics ON {D} TYPE array<string> DEFAULT [];
DEFINE FIELD IF NOT EXISTS notebooks ON {D} TYPE array<record<{NB}>> DEFAULT [];
DEFINE FIELD IF NOT EXISTS asset ON {D} TYPE option<object> FLEXIBLE;
DEFINE INDEX IF NOT EXISTS {D}_ingested_at ON {D} FIELDS ingested_at;
DEFINE FIELD IF NOT EXISTS generation ON {C} TYPE int DEFAULT 0;
DEFINE FIELD IF NOT EXISTS notebooks ON {C} TYPE array<record<{NB}>> DEFAULT [];
DEFINE INDEX IF NOT EXISTS {C}_notebooks ON {C} FIELDS notebooks;

DEFINE TABLE IF NOT EXISTS {NB} SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS name ON {NB} TYPE string;
DEFINE FIELD IF NOT EXISTS description ON {NB} TYPE string DEFAULT '';
DEFINE FIELD IF NOT EXISTS archived ON {NB} TYPE bool DEFAULT false;
DEFINE FIELD IF NOT EXISTS pending_vectors ON {NB} TYPE int DEFAULT 0;
DEFINE FIELD IF NOT EXISTS created ON {NB} TYPE datetime VALUE time::now() READONLY;
DEFINE FIELD IF NOT EXISTS updated ON {NB} TYPE datetime VALUE time::now();
DEFINE INDEX IF NOT EXISTS {NB}_name ON {NB} FIELDS name UNIQUE;

DEFINE TABLE IF NOT EXISTS {REF} TYPE RELATION IN {D} OUT {NB} ENFORCED SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS created ON {REF} TYPE datetime VALUE time::now() READONLY;
DEFINE INDEX IF NOT EXISTS {REF}_pair ON {REF} FIELDS in, out UNIQUE;

DEFINE TABLE IF NOT EXISTS {NOTE} SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS title ON {NOTE} TYPE string DEFAULT '';
DEFINE FIELD IF NOT EXISTS content ON {NOTE} TYPE string DEFAULT '';
DEFINE FIELD IF NOT EXISTS embedding ON {NOTE} TYPE option<array<float>>;
DEFINE FIELD IF NOT EXISTS created ON {NOTE} TYPE datetime VALUE time::now() READONLY;
DEFINE FIELD IF NOT EXISTS updated ON {NOTE} TYPE datetime VALUE time::now();

DEFINE TABLE IF NOT EXISTS {ART} TYPE RELATION IN {NOTE} OUT {NB} ENFORCED SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS created ON {ART} TYPE datetime VALUE time::now() READONLY;
DEFINE INDEX IF NOT EXISTS {ART}_pair ON {ART} FIELDS in, out UNIQUE;

DEFINE TABLE IF NOT EXISTS {JOB} SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS kind ON {JOB} TYPE string;
DEFINE FIELD IF NOT EXISTS target ON {JOB} TYPE record<{D}>;
DEFINE FIELD IF NOT EXISTS status ON {JOB} TYPE string
    ASSERT $value IN ['queued', 'running', 'done', 'failed'];
DEFINE FIELD IF NOT EXISTS progress ON {JOB} TYPE float DEFAULT 0.0;
DEFINE FIELD IF NOT EXISTS error ON {JOB} TYPE option<string>;
DEFINE FIELD IF NOT EXISTS attempts ON {JOB} TYPE int DEFAULT 0;
DEFINE FIELD IF NOT EXISTS created ON {JOB} TYPE datetime VALUE time::now() READONLY;
DEFINE FIELD IF NOT EXISTS updated ON {JOB} TYPE datetime VALUE time::now();
DEFINE INDEX IF NOT EXISTS {JOB}_status ON {JOB} FIELDS status;
"""


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    sql: Callable[[Names, Settings, int], str]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "documents, chunks (BM25 + HNSW), files", _v1),
    Migration(2, "notebooks, sources' references, notes, jobs; chunk generations", _v2),
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
