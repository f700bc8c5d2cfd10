"""The schema's versioned migrations, in order: each brings a store from the version before
it to its own (:func:`~.schema.ensure_schema` applies those a store lacks). The current DDL
of a table is its owner's (the HNSW index and the vector table: :mod:`.vectorgraphs`; the
engine's FULLTEXT index: :mod:`.chunks`; the text index: :mod:`.segments`); a migration
runs what the owner hands it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from surrealdb import RecordID

from ..config import Settings
from ..parts.chunk import CONTEXT_SEPARATOR
from .api_keys import key_table
from .chunks import ft_index_sql
from .connection import Store
from .documents import facets_sql
from .names import META, Names
from .segments.index import TextIndex
from .vectorgraphs import VECTOR_TYPE, hnsw_index_sql, vector_table_sql


def _v1(names: Names, settings: Settings, dimension: int) -> str:
    analyzer = f"""
DEFINE ANALYZER IF NOT EXISTS {names.analyzer} TOKENIZERS blank,class
    FILTERS {names.analyzer_filters};
"""
    return (analyzer + _v1_documents(names) + _v1_chunks(names, settings, dimension)
            + _v1_files(names))


def _v1_documents(names: Names) -> str:
    DOCUMENTS = names.documents
    return f"""
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
"""


def _v1_chunks(names: Names, settings: Settings, dimension: int) -> str:
    DOCUMENTS, CHUNKS = names.documents, names.chunks
    ANALYZER, FT_INDEX = names.analyzer, names.ft_index
    if not settings.chunked:  # whole documents only: the full-text index is on them
        chunks = f"""
DEFINE INDEX IF NOT EXISTS {names.documents_ft_index} ON {DOCUMENTS} FIELDS content
    FULLTEXT ANALYZER {ANALYZER} BM25({settings.bm25_k1},{settings.bm25_b}) HIGHLIGHTS;
"""
    else:
        chunks = f"""
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
"""
        if settings.vectors:
            chunks += hnsw_index_sql(names, settings, dimension) + "\n"
    return chunks


def _v1_files(names: Names) -> str:
    DOCUMENTS, FILES = names.documents, names.files
    return f"""
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


def _v3_prepare(names: Names, settings: Settings, dimension: int) -> str:
    # Incomplete documents (a crash's debris, or a write in progress) give up their source
    # before the index is made UNIQUE. Idempotent; the index build does not see changes made
    # in its own transaction, hence a separate step.
    DOCUMENTS = names.documents
    return f"""
DEFINE FIELD OVERWRITE source ON {DOCUMENTS} TYPE option<string>;
UPDATE {DOCUMENTS} SET source = NONE WHERE complete = false RETURN NONE;
"""


def _v3(names: Names, settings: Settings, dimension: int) -> str:
    """Keywords, and one document per source: ``source`` becomes UNIQUE.

    A source points at one document at a time, so the primary ``source`` of the complete
    documents is unique already. A document being written has no ``source`` until the
    transaction that completes it has detached the source from its previous document.
    """
    DOCUMENTS = names.documents
    return f"""
DEFINE FIELD IF NOT EXISTS keywords ON {DOCUMENTS} TYPE option<array<object>> FLEXIBLE;
DEFINE FIELD OVERWRITE source ON {DOCUMENTS} TYPE option<string>;
DEFINE INDEX OVERWRITE {DOCUMENTS}_source ON {DOCUMENTS} FIELDS source UNIQUE;
"""


def _v2(names: Names, settings: Settings, dimension: int) -> str:
    D, C, NB = names.documents, names.chunks, names.notebook
    REF, NOTE, ART, JOB = names.reference, names.note, names.artifact, names.job
    if not settings.chunked:  # notebooks hold chunked sources: nothing to add here
        return ""
    chunk_fields = f"""
DEFINE FIELD IF NOT EXISTS generation ON {C} TYPE int DEFAULT 0;
DEFINE FIELD IF NOT EXISTS notebooks ON {C} TYPE array<record<{NB}>> DEFAULT [];
DEFINE INDEX IF NOT EXISTS {C}_notebooks ON {C} FIELDS notebooks;
"""
    return chunk_fields + f"""
DEFINE FIELD IF NOT EXISTS generation ON {D} TYPE int DEFAULT 0;
DEFINE FIELD IF NOT EXISTS topics ON {D} TYPE array<string> DEFAULT [];
DEFINE FIELD IF NOT EXISTS notebooks ON {D} TYPE array<record<{NB}>> DEFAULT [];
DEFINE FIELD IF NOT EXISTS asset ON {D} TYPE option<object> FLEXIBLE;
DEFINE INDEX IF NOT EXISTS {D}_ingested_at ON {D} FIELDS ingested_at;

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
    """``sql`` runs in one transaction with the version update; ``prepare`` (idempotent)
    runs before it, outside that transaction."""

    version: int
    description: str
    sql: Callable[[Names, Settings, int], str]
    prepare: Callable[[Names, Settings, int], str] | None = None
    params: Callable[[Names, Settings], dict[str, Any]] | None = None
    # a data move (idempotent, in batches) run before ``sql`` on an existing store
    move: Callable[[Store, Settings, int], Awaitable[None]] | None = None


def _v4(names: Names, settings: Settings, dimension: int) -> str:
    # The BM25 defaults moved from (1.2, 0.75) to Lucene/Anserini's (0.9, 0.4), which rank
    # chunks better (see BENCHMARKS.md). Redefining the index rebuilds it with the parameters
    # of the settings the store is opened with: once, for stores made before version 4.
    return ft_index_sql(names, settings, overwrite=True) if settings.chunked else ""


def _v5(names: Names, settings: Settings, dimension: int) -> str:
    # where each page starts in the text, so a re-chunked document keeps its page numbers
    return (f"DEFINE FIELD IF NOT EXISTS page_starts ON {names.documents}"
            " TYPE option<array<array<int>>>;")


def _v6(names: Names, settings: Settings, dimension: int) -> str:
    # Jobs of any kind (the server's ingest jobs besides vectorize), with what to do and
    # what came of it. The notebooks' pending-vector counters move to the meta table,
    # beside the shared index's, so that chunk storage owns every counter. (The engine
    # refuses `FOR $x IN (SELECT ...)` with "Cannot execute statement using value"; a LET
    # first works.)
    if not settings.chunked:  # no notebooks, no jobs
        return ""
    J, NB = names.job, names.notebook
    return f"""
DEFINE FIELD OVERWRITE target ON {J} TYPE option<record<{names.documents}>>;
DEFINE FIELD IF NOT EXISTS payload ON {J} TYPE option<object> FLEXIBLE;
DEFINE FIELD IF NOT EXISTS result ON {J} TYPE option<object> FLEXIBLE;
DEFINE INDEX IF NOT EXISTS {J}_target ON {J} FIELDS target;
LET $counted = (SELECT id, pending_vectors FROM {NB} WHERE pending_vectors > 0);
FOR $nb IN $counted {{
    UPSERT type::record('{META}', $pending_prefix + record::id($nb.id))
        SET pending_vectors = $nb.pending_vectors;
}};
REMOVE FIELD IF EXISTS pending_vectors ON {NB};
"""


def _v6_params(names: Names, settings: Settings) -> dict[str, Any]:
    # the key of a notebook table's counter is this prefix + the notebook's id
    key = names.index_state_key_of(names.notebook_vectors(RecordID(names.notebook, "x")))
    return {"pending_prefix": str(key.id)[:-1]}


def _v7(names: Names, settings: Settings, dimension: int) -> str:
    # The server's API keys (store/api_keys.py): the SHA-256 of each token, never the token.
    # The server needs jobs, so stores with chunks only (documents-only stores, like the
    # kreuzberg facade's, keep their tables as they are).
    if not settings.chunked:
        return ""
    K = key_table(names)
    return f"""
DEFINE TABLE IF NOT EXISTS {K} SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS name ON {K} TYPE string;
DEFINE FIELD IF NOT EXISTS hash ON {K} TYPE string;
DEFINE FIELD IF NOT EXISTS prefix ON {K} TYPE string;
DEFINE FIELD IF NOT EXISTS read_only ON {K} TYPE bool DEFAULT false;
DEFINE FIELD IF NOT EXISTS created ON {K} TYPE datetime VALUE time::now() READONLY;
DEFINE FIELD IF NOT EXISTS last_used ON {K} TYPE option<datetime>;
DEFINE INDEX IF NOT EXISTS {K}_name ON {K} FIELDS name UNIQUE;
DEFINE INDEX IF NOT EXISTS {K}_hash ON {K} FIELDS hash UNIQUE;
"""


def _v8(names: Names, settings: Settings, dimension: int) -> str:
    # The chunks' vectors move to a table of their own, with the HNSW index: the engine reads
    # whole rows while it scores BM25, and a 384-dimension vector is most of a chunk's row
    # (BM25 on SciFact: 2.7x faster without it). Stores of the kreuzberg-surrealdb facade
    # keep their vectors in the chunks, where its users' queries look for them.
    if not settings.chunked or not settings.separate_vectors:
        return "UPSERT $schema MERGE { vector_table: false };"
    sql = vector_table_sql(names)
    if settings.vectors:  # the graph itself is built on a refreshed engine: see _v8_graph
        sql += f" REMOVE INDEX IF EXISTS {names.hnsw_index} ON {names.chunks};"
    return sql + " UPSERT $schema MERGE { vector_table: true };"


async def _v8_move(store: Store, settings: Settings, dimension: int) -> None:
    """Move the vectors of an existing store's chunks into the vector table, 500 at a time;
    each batch copies and clears in one transaction, so an interrupted move resumes."""
    if not (settings.chunked and settings.separate_vectors):
        return
    names = store.names
    await store.query(vector_table_sql(names))
    while True:
        (rows,) = await store.query(
            f"SELECT id, document, embedding FROM {names.chunks} WHERE embedding != NONE"
            " LIMIT 500;")
        if not rows:
            return
        await store.query(
            f"BEGIN; INSERT INTO {names.vectors} $vectors ON DUPLICATE KEY UPDATE"
            " embedding = $input.embedding RETURN NONE;"
            " UPDATE $ids SET embedding = NONE RETURN NONE; COMMIT;",
            {"vectors": [{"id": RecordID(names.vectors, r["id"].id), "chunk": r["id"],
                          "document": r["document"], "embedding": r["embedding"]}
                         for r in rows],
             "ids": [r["id"] for r in rows]})


def _v9_prepare(names: Names, settings: Settings, dimension: int) -> str:
    # The chunks a store already holds get their text hash before the index is made over it
    # (idempotent: only rows without one are written, each statement its own transaction).
    if not settings.chunked:
        return ""
    C = names.chunks
    return f"""
DEFINE FIELD IF NOT EXISTS text_hash ON {C} TYPE string VALUE crypto::sha256(content);
UPDATE {C} SET text_hash = crypto::sha256(content) WHERE text_hash = NONE RETURN NONE;
"""


def _v9(names: Names, settings: Settings, dimension: int) -> str:
    # Sync: a source's file size is there already; its modification time lets an unchanged
    # file be skipped without reading it, and the raw hash's index finds a renamed or copied
    # file. Chunks carry the SHA-256 of their text (computed by the engine, so it cannot
    # disagree with the text): a chunk whose text is stored already reuses that vector.
    F = names.files
    out = f"""
DEFINE FIELD IF NOT EXISTS mtime_ns ON {F} TYPE option<int>;
DEFINE INDEX IF NOT EXISTS {F}_file_hash ON {F} FIELDS file_hash;
"""
    if settings.chunked:
        C = names.chunks
        out += f"""
DEFINE FIELD IF NOT EXISTS text_hash ON {C} TYPE string VALUE crypto::sha256(content);
DEFINE INDEX IF NOT EXISTS {C}_text_hash ON {C} FIELDS text_hash;
"""
    return out


def _v10(names: Names, settings: Settings, dimension: int) -> str:
    # A chunk's context (its heading path) is stored apart from its text. The model reads
    # both (chunk.embedding_input), so the text hash that decides vector reuse covers both;
    # rows without a context keep the hash they have.
    # The document keeps its headings ([level, text]) so that a re-chunked text (a
    # notebook's vectorize) gets its contexts again.
    out = (f"DEFINE FIELD IF NOT EXISTS headings ON {names.documents}"
           " TYPE option<array<array>>;")
    if not settings.chunked:
        return out
    C = names.chunks
    return out + f"""
DEFINE FIELD IF NOT EXISTS context ON {C} TYPE option<string>;
DEFINE FIELD OVERWRITE text_hash ON {C} TYPE string
    VALUE crypto::sha256(IF context THEN context + {_surql_string(CONTEXT_SEPARATOR)} + content
                         ELSE content END);
"""


def _v11(names: Names, settings: Settings, dimension: int) -> str:
    # kreuzberg-surrealdb's development versions (and their integration tests) name a chunk's
    # whitespace word count ``token_count``; 0.1.1 and 0.2.0 call it ``word_count``. The
    # facade's chunks answer to both: a computed alias, nothing stored twice.
    if not settings.chunked or settings.separate_vectors:
        return ""
    return f"DEFINE FIELD IF NOT EXISTS token_count ON {names.chunks} COMPUTED word_count;"


def _v12(names: Names, settings: Settings, dimension: int) -> str:
    # The text index's tables, the chunks' origin segment, and the event that records a
    # deleted chunk (store/segments/index.py). Whether the store ranks with them or with the
    # engine's FULLTEXT index is settled after the migrations (reconcile_text_index).
    if not settings.chunked:
        return ""
    return TextIndex.schema_sql_for(names.chunks)


def _v13(names: Names, settings: Settings, dimension: int) -> str:
    # The text index's segments carry their chunks' documents and vectors (the vector leg
    # scans them); segments written before are rebuilt on open (reconcile_text_index).
    if not settings.chunked:
        return ""
    return TextIndex.schema_sql_for(names.chunks)  # its owner's DDL: the new tables


def _surql_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _v14(names: Names, settings: Settings, dimension: int) -> str:
    # Conversations (store/conversations.py): sessions and their turns, each turn with its
    # citations as links to the chunks. Stores with chunks only.
    if not settings.chunked:
        return ""
    S, T = names.chat_session, names.chat_turn
    return f"""
DEFINE TABLE IF NOT EXISTS {S} SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS title ON {S} TYPE string;
DEFINE FIELD IF NOT EXISTS notebook ON {S} TYPE option<record<{names.notebook}>>;
DEFINE FIELD IF NOT EXISTS created ON {S} TYPE datetime VALUE time::now() READONLY;
DEFINE FIELD IF NOT EXISTS updated ON {S} TYPE datetime DEFAULT time::now();
DEFINE INDEX IF NOT EXISTS {S}_updated ON {S} FIELDS updated;
DEFINE TABLE IF NOT EXISTS {T} SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS session ON {T} TYPE record<{S}>;
DEFINE FIELD IF NOT EXISTS question ON {T} TYPE string;
DEFINE FIELD IF NOT EXISTS standalone ON {T} TYPE string;
DEFINE FIELD IF NOT EXISTS answer ON {T} TYPE string;
DEFINE FIELD IF NOT EXISTS grounded ON {T} TYPE bool;
DEFINE FIELD IF NOT EXISTS model ON {T} TYPE option<string>;
DEFINE FIELD IF NOT EXISTS citations ON {T} TYPE array<object> FLEXIBLE;
DEFINE FIELD IF NOT EXISTS chunks ON {T} TYPE array<record<{names.chunks}>>;
DEFINE FIELD IF NOT EXISTS created ON {T} TYPE datetime VALUE time::now() READONLY;
DEFINE INDEX IF NOT EXISTS {T}_session ON {T} FIELDS session, created;
DEFINE EVENT IF NOT EXISTS {S}_turns ON {S} WHEN $event = 'DELETE' THEN
    (DELETE {T} WHERE session = $before.id);
"""


KEEP_TIMES = "IF $sd_keep_times AND $value != NONE THEN $value ELSE time::now() END"


def _v15(names: Names, settings: Settings, dimension: int) -> str:
    # An import carries the times rows were made (store/carry.py): a write that binds
    # $sd_keep_times keeps the value it gives; every other write is timed as before. The
    # kreuzberg-surrealdb facade's tables keep that library's definitions to the letter
    # (an import into them times the rows anew).
    if not settings.separate_vectors:
        return ""
    fields = [(names.documents, "ingested_at", True), (names.documents, "updated_at", False),
              (names.files, "seen_at", False)]
    if settings.chunked:
        fields += [(names.notebook, "created", True), (names.notebook, "updated", False),
                   (names.note, "created", True), (names.note, "updated", False),
                   (names.reference, "created", True), (names.artifact, "created", True),
                   (names.job, "created", True), (names.job, "updated", False),
                   (key_table(names), "created", True),
                   (names.chat_session, "created", True), (names.chat_turn, "created", True)]
    return "\n".join(
        f"DEFINE FIELD OVERWRITE {field} ON {table} TYPE datetime VALUE {KEEP_TIMES}"
        + (" READONLY;" if readonly else ";") for table, field, readonly in fields)


def _v16(names: Names, settings: Settings, dimension: int) -> str:
    # The vector table's values are checked by its HNSW index, not element by element
    # (vectorgraphs.VECTOR_TYPE). Notebook tables made from now on get the same.
    if not settings.chunked or not settings.separate_vectors:
        return ""
    return f"DEFINE FIELD OVERWRITE embedding ON {names.vectors} TYPE {VECTOR_TYPE};"


def _v17(names: Names, settings: Settings, dimension: int) -> str:
    # the kreuzberg-surrealdb facade's tables keep that library's definitions to the letter:
    # its metadata filters read the documents (DocumentStorage.matching)
    if not settings.separate_vectors:
        return ""
    return facets_sql(names)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "documents, chunks (BM25 + HNSW), files", _v1),
    Migration(2, "notebooks, sources' references, notes, jobs; chunk generations", _v2),
    Migration(3, "documents.keywords; documents.source UNIQUE", _v3, _v3_prepare),
    Migration(4, "full-text index with the BM25 parameters of the settings", _v4),
    Migration(5, "documents.page_starts", _v5),
    Migration(6, "jobs of any kind with payload and result; notebook counters in meta",
              _v6, params=_v6_params),
    Migration(7, "API keys of the server (hashed)", _v7),
    Migration(8, "the chunks' vectors in a table of their own", _v8, move=_v8_move),
    Migration(9, "files.mtime_ns and an index on files.file_hash (sync); chunks.text_hash"
              " (vectors reused for unchanged text)", _v9, _v9_prepare),
    Migration(10, "chunks.context (heading path), in the text hash; documents.headings",
              _v10),
    Migration(11, "chunks.token_count, an alias of word_count (kreuzberg-surrealdb layout)",
              _v11),
    Migration(12, "the text index: segments, maps, blocks, deletions, lease; chunks.text_seg",
              _v12),
    Migration(13, "the text index's segments carry their chunks' documents and vectors",
              _v13),
    Migration(14, "conversations: chat sessions and their turns, citations linked to chunks",
              _v14),
    Migration(15, "times carried by an import ($sd_keep_times)", _v15),
    Migration(16, "the vector table's values checked by its HNSW index", _v16),
    Migration(17, "documents' metadata facets (key, value) for metadata filters", _v17),
)
SCHEMA_VERSION = MIGRATIONS[-1].version


async def migrate(store: Store, settings: Settings, dimension: int, current: int, *,
                  fresh: bool) -> None:
    """Apply every migration after version ``current``, each in one transaction with the
    version record (a ``fresh`` store's first also records its layout)."""
    names = store.names
    layout = ", chunked: $chunked, vectors: $vectors, analyzer: $analyzer" if fresh else ""
    for migration in MIGRATIONS:
        if migration.version <= current:
            continue
        if migration.prepare is not None and not fresh:
            await store.query(migration.prepare(names, settings, dimension))
        if migration.move is not None and not fresh:
            await migration.move(store, settings, dimension)
        await store.query(
            "BEGIN;\n" + migration.sql(names, settings, dimension)
            + "\nUPSERT $schema MERGE { version: $version, description: $description,"
            " applied_at: time::now()" + layout + " };\nCOMMIT;",
            {"schema": names.schema_key, "version": migration.version,
             "description": migration.description, "chunked": settings.chunked,
             "vectors": settings.vectors, "analyzer": names.analyzer,
             **(migration.params(names, settings) if migration.params else {})},
        )
