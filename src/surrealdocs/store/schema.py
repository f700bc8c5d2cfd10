"""Tables, indexes and their versions (the migrations are in :mod:`.migrations`).

The schema version lives in ``surrealdocs_meta:schema``. Opening a store applies every
migration it lacks, in order; a store whose version is newer than this code is refused.
The embedding model's name and dimension live in ``surrealdocs_meta:embedding``: a store is
bound to one model, because vectors of two models cannot be compared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..config import Settings
from ..errors import (
    EmbeddingModelMismatchError,
    SchemaMismatchError,
    SchemaVersionError,
    StoreError,
)
from .chunks import ft_index_sql
from .connection import Statement, Store
from .migrations import MIGRATIONS, SCHEMA_VERSION, migrate
from .names import META, Names
from .segments.index import TextIndex

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "ensure_schema", "layout_of", "read_schema",
           "stored_model", "vectors_apart"]

TEXT_SEGMENTS_FORMAT = 2  # segments hold their chunks' documents and vectors (schema 13)


async def ensure_schema(store: Store, settings: Settings, model: str | None,
                        dimension: int, *, provenance: Mapping[str, str] | None = None,
                        text_index_progress: Callable[[int, int], None] | None = None) -> int:
    """Create or upgrade the schema, and bind the store to ``model``. Returns the version.

    ``model`` is ``None`` (and ``dimension`` ignored) for stores without vectors
    (``settings.chunked`` or ``settings.embed`` false). ``provenance`` (a hosted provider
    and its endpoint) is recorded with the model when the store is bound; it is information,
    not checked on later opens. Idempotent. Raises
    :class:`SchemaVersionError` when the database is newer than this code,
    :class:`SchemaMismatchError` when the tables exist with another layout or analyzer, or
    were not created by surrealdocs, and :class:`EmbeddingModelMismatchError` when the store
    was embedded with another model.
    """
    await store.query(f"DEFINE TABLE IF NOT EXISTS {META} SCHEMALESS;")
    names = store.names
    schema, embedding = await store.query(
        "SELECT * FROM ONLY $schema; SELECT * FROM ONLY $embedding;",
        {"schema": names.schema_key, "embedding": names.embedding_key},
    )
    try:
        current = int(schema["version"]) if schema else 0
    except (KeyError, TypeError, ValueError) as exc:
        raise SchemaMismatchError(
            f"the schema record of {store.url} is damaged (version "
            f"{(schema or {}).get('version')!r}): it was not written by surrealdocs") from exc
    if current > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"the database at {store.url} has schema version {current}, but this surrealdocs "
            f"only knows up to version {SCHEMA_VERSION}: upgrade surrealdocs to open it"
        )
    if schema:
        check_layout(schema, settings, names, store.url)
    else:
        await _refuse_foreign_tables(store, settings)
    if embedding and settings.vectors:
        check_embedding_model(embedding, model or "", dimension, store.url)
    await migrate(store, settings, dimension, current, fresh=not schema)
    await reconcile_text_index(store, settings, text_index_progress)
    if not embedding and settings.vectors:
        await store.query(
            "UPSERT $embedding MERGE { model: $model, dimension: $dimension,"
            " distance: $distance, provenance: $provenance, created_at: time::now() };",
            {"embedding": names.embedding_key, "model": model, "dimension": dimension,
             "distance": settings.hnsw_distance, "provenance": dict(provenance or {}) or None},
        )
    return SCHEMA_VERSION


async def reconcile_text_index(store: Store, settings: Settings,
                               progress: Callable[[int, int], None] | None = None) -> None:
    """Give the store the text index its settings ask for: convert a store that ranks with
    the engine's FULLTEXT index to segments (the engine index goes: it is most of the cost
    of writing a chunk), or back. ``progress(done, total)`` follows a conversion. An
    interrupted conversion is finished on the next open."""
    if not settings.chunked:
        return
    names = store.names
    schema = await read_schema(store) or {}
    have = str(schema.get("text_index") or "engine")
    want = settings.text_index
    # segments written before they carried their chunks' documents and vectors (schema 12)
    # are rebuilt, once
    outdated = want == "segments" and schema.get("text_segments") != TEXT_SEGMENTS_FORMAT
    if have == want and not outdated:
        return
    vector_table = (names.vectors if await vectors_apart(store) else names.chunks) \
        if settings.vectors else None
    index = TextIndex(store, settings, names.chunks, vector_table)
    if want == "segments":
        await store.query(
            f"REMOVE INDEX IF EXISTS {names.ft_index} ON {names.chunks};"
            " UPSERT $schema MERGE { text_index: 'converting' };",
            {"schema": names.schema_key})
        await index.rebuild(progress)
    else:
        await index.drop()
        await store.query(ft_index_sql(names, settings))
    await store.query("UPSERT $schema MERGE { text_index: $want, text_segments: $format };",
                      {"schema": names.schema_key, "want": want,
                       "format": TEXT_SEGMENTS_FORMAT if want == "segments" else None})


async def vectors_apart(store: Store) -> bool:
    """Whether the store keeps the chunks' vectors in their own table (schema 8 and later,
    except the kreuzberg-surrealdb facade's stores)."""
    schema = await read_schema(store)
    return bool((schema or {}).get("vector_table"))


def layout_of(schema: dict[str, Any]) -> tuple[bool, bool, str]:
    """(chunked, vectors, analyzer) of a stored schema record (version 1 stores: the
    defaults, which were the only layout then)."""
    return (bool(schema.get("chunked", True)), bool(schema.get("vectors", True)),
            str(schema.get("analyzer") or "sd_english"))


def check_layout(schema: dict[str, Any], settings: Settings, names: Names, url: str) -> None:
    chunked, vectors, analyzer = layout_of(schema)
    where = f"the tables {names.documents}/{names.chunks} at {url}"
    if chunked != settings.chunked:
        raise SchemaMismatchError(
            f"{where} hold " + ("documents with chunks" if chunked else "whole documents only")
            + ", but they were opened " + ("with chunks" if settings.chunked else
                                           "as documents only")
            + ": use other table names for the other layout")
    if vectors and not settings.vectors:
        raise SchemaMismatchError(
            f"{where} hold embedding vectors; open them with their embedding model "
            "(embed=True), or use other table names for chunks without vectors")
    if settings.vectors and not vectors:
        raise SchemaMismatchError(
            f"{where} were created without embedding vectors; open them with embed=False, or "
            "add vectors to every chunk first: surrealdocs reembed --model MODEL")
    if analyzer != names.analyzer:
        raise SchemaMismatchError(
            f"{where} use the full-text analyzer {analyzer} "
            f"(language {analyzer.removeprefix('sd_')}), not {names.analyzer}: open them with "
            f"analyzer_language={analyzer.removeprefix('sd_')!r}")


async def _refuse_foreign_tables(store: Store, settings: Settings) -> None:
    """Tables of our names that exist without a surrealdocs schema record were made by
    something else (for example kreuzberg-surrealdb): adopting them would mix schemas."""
    names = store.names
    (info,) = await store.query("INFO FOR DB;")
    tables = set(((info or {}).get("tables") or {}).keys())
    ours = [names.documents, names.files] + ([names.chunks] if settings.chunked else [])
    clash = [t for t in ours if t in tables]
    if clash:
        raise SchemaMismatchError(
            f"table {clash[0]!r} already exists in {store.namespace}/{store.database} at "
            f"{store.url}, but was not created by surrealdocs (no schema record): use other "
            "table names or a fresh database, and ingest the files again")


async def stored_model(store: Store) -> dict[str, Any] | None:
    """The model an existing store's vectors come from: its record (``model``,
    ``dimension``, ``provenance``), or ``None`` for a new store, one without vectors, or
    one being re-embedded (that refusal is :func:`ensure_schema`'s)."""
    try:
        (row,) = await store.query("SELECT * FROM ONLY $k;", {"k": store.names.embedding_key})
    except StoreError:  # the meta table does not exist yet
        return None
    if not isinstance(row, dict) or row.get("reembedding") or not row.get("model"):
        return None
    return row


async def read_schema(store: Store) -> dict[str, Any] | None:
    """The stored schema record of ``store.names``, or ``None`` when there is none."""
    try:
        (row,) = await store.query("SELECT * FROM ONLY $k;", {"k": store.names.schema_key})
    except StoreError:  # the meta table does not exist yet
        return None
    return row if isinstance(row, dict) else None


def check_embedding_model(stored: dict[str, Any], model: str, dimension: int, url: str) -> None:
    if stored.get("reembedding"):
        raise EmbeddingModelMismatchError(
            f"re-embedding the store at {url} with {stored['reembedding']!r} was interrupted; "
            f"finish it first: surrealdocs reembed --model {stored['reembedding']}"
        )
    if stored.get("model") == model and int(stored.get("dimension", -1)) == dimension:
        return
    stored_pair = (str(stored.get("model")), int(stored.get("dimension") or 0))
    raise EmbeddingModelMismatchError(
        f"the store at {url} holds vectors of model {stored.get('model')!r} "
        f"({stored.get('dimension')} dimensions), not {model!r} ({dimension} dimensions). "
        f"Open it with --model {stored.get('model')} (SURREALDOCS_MODEL), or re-embed every "
        f"chunk with the new model: surrealdocs reembed --model {model}",
        stored=stored_pair, requested=(model, dimension),
    )


async def mark_reembedding(store: Store, model: str) -> None:
    """Record that the store is being re-embedded with ``model``: until
    :func:`store_model_statement` runs, every open is refused."""
    await store.query("UPSERT $e MERGE { reembedding: $model };",
                      {"e": store.names.embedding_key, "model": model})


def store_model_statement(store: Store, settings: Settings, model: str, dimension: int,
                              provenance: Mapping[str, str] | None = None) -> Statement:
    """Bind the store to ``model`` (a store made without vectors has them from now on)."""
    return Statement(
        "UPSERT $e CONTENT { model: $model, dimension: $dim, distance: $dist,"
        " provenance: $provenance, created_at: time::now() };"
        " UPSERT $schema MERGE { vectors: true };",
        {"e": store.names.embedding_key, "model": model, "dim": dimension,
         "dist": settings.hnsw_distance, "provenance": dict(provenance or {}) or None,
         "schema": store.names.schema_key})
