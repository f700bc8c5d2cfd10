"""kreuzberg-surrealdb's API on surrealdocs: ``DocumentConnector`` and ``DocumentPipeline``.

Switch by changing one import::

    from kreuzberg_surrealdb import DocumentPipeline               # before
    from surrealdocs.kreuzberg_surrealdb import DocumentPipeline   # after

The classes keep kreuzberg-surrealdb 0.1.1's constructor keywords and defaults, properties,
methods, table layout and README queries. Underneath they are thin: extraction, chunking,
embedding, deduplication and the all-or-nothing writes are surrealdocs' core
(:mod:`surrealdocs.parts.extract`, :mod:`surrealdocs.embed`, :mod:`surrealdocs.core.ingest`,
:mod:`surrealdocs.store.schema`). Where the original was wrong (a changed file at the same
path, a mutated config, unvalidated table names) these classes do the right thing; every
difference is listed in ``docs/compat-kreuzberg.md``.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from ..config import Settings
from ..core.kb import KnowledgeBase
from ..embed import Embedder, available_models, get_embedder
from ..errors import ConfigurationError, EmbeddingModelMismatchError, StoreError, SurrealDocsError
from ..errors import DimensionMismatchError as _CoreDimensionMismatchError
from ..errors import ModelUnavailableError as _CoreModelUnavailableError
from ..errors import SchemaNotInitializedError as _CoreSchemaNotInitializedError
from ..parts.extract import copy_extraction_config
from ..parts.results import FileResult, IngestReport
from ..store.names import Names

__all__ = [
    "PRESETS",
    "AsyncSurrealQueryable",
    "DimensionMismatchError",
    "DocumentConnector",
    "DocumentPipeline",
    "ExtractionFailedError",
    "IngestionError",
    "LegacyQueryClient",
    "ModelUnavailableError",
    "SchemaNotInitializedError",
]

#: kreuzberg's embedding presets: (model, dimensions, surrealdocs model that runs it offline).
PRESETS: dict[str, tuple[str, int, str | None]] = {
    "fast": ("all-MiniLM-L6-v2", 384, "all-minilm-l6-v2"),
    "balanced": ("bge-base-en-v1.5", 768, None),
    "quality": ("bge-large-en-v1.5", 1024, None),
    "multilingual": ("multilingual-e5-base", 768, None),
}
#: kreuzberg's ChunkingConfig defaults, which kreuzberg-surrealdb documents.
DEFAULT_MAX_CHARS = 1000
DEFAULT_MAX_OVERLAP = 200


# --------------------------------------------------------------------------- errors


class IngestionError(StoreError, RuntimeError):
    """Writing documents or chunks failed (kreuzberg-surrealdb's ``IngestionError``)."""


class DimensionMismatchError(_CoreDimensionMismatchError, IngestionError):
    """Vectors of one dimension meet an index or store of another."""


class SchemaNotInitializedError(_CoreSchemaNotInitializedError, RuntimeError):
    """Ingestion was attempted before ``setup_schema()``."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or "Schema not initialized. "
                         "Call setup_schema() before ingesting documents.")


class ModelUnavailableError(_CoreModelUnavailableError, ValueError):
    """An embedding model or preset cannot be run offline here (never downloaded)."""


class ExtractionFailedError(SurrealDocsError, RuntimeError):
    """Some sources could not be extracted. Every other source was ingested; ``results``
    holds what happened to each one."""

    def __init__(self, message: str, results: Sequence[FileResult]) -> None:
        super().__init__(message)
        self.results = list(results)


# --------------------------------------------------------------------------- client


@runtime_checkable
class AsyncSurrealQueryable(Protocol):
    """Any async SurrealDB object that can run a query (kreuzberg-surrealdb's protocol)."""

    async def query(self, query: str, vars: dict[str, Any] | None = None) -> Any: ...


def _per_statement_builder(result: Any) -> bool:
    """Whether ``result`` is SDK 3's query builder, which resolves to one result per
    statement."""
    try:
        from surrealdb.connections.builders import AsyncQueryBuilder
    except ImportError:  # pragma: no cover - another SDK layout
        return False
    return isinstance(result, AsyncQueryBuilder)


class LegacyQueryClient:
    """The caller's connection, with ``query()`` returning what SDK 1.x/2.x returned.

    kreuzberg-surrealdb was written for SDKs whose ``query()`` gave the rows of a single
    statement, and its README reads rows straight from it (``for r in results:``). SDK 3
    returns one list per statement. This wrapper's ``query()`` returns the result of the
    last (or only) statement; errors are the SDK's own. Every other attribute is the
    connection's; ``wrapped`` is the connection itself.
    """

    __slots__ = ("_db",)

    def __init__(self, db: Any) -> None:
        object.__setattr__(self, "_db", db)

    @property
    def wrapped(self) -> Any:
        return self._db

    async def query(self, query: str, vars: dict[str, Any] | None = None,
                    *args: Any, **kwargs: Any) -> Any:
        result = self._db.query(query, vars, *args, **kwargs)
        per_statement = _per_statement_builder(result)
        if inspect.isawaitable(result):
            result = await result
        if per_statement and isinstance(result, list):
            return result[-1] if result else []
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._db, name, value)

    async def __aenter__(self) -> LegacyQueryClient:
        await self._db.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._db.__aexit__(*exc)

    def __repr__(self) -> str:
        return f"LegacyQueryClient({self._db!r})"


# --------------------------------------------------------------------------- embedding models


_KZ_PRESET = re.compile(r"^EmbeddingModelType\.preset\(['\"]([^'\"]+)['\"]\)\Z")


def _kreuzberg_model_type(model: Any) -> str | None:
    """``repr`` of a kreuzberg ``EmbeddingModelType``, or ``None`` for anything else."""
    try:
        from kreuzberg import EmbeddingModelType
    except ImportError:  # pragma: no cover - kreuzberg is a dependency
        return None
    return repr(model) if isinstance(model, EmbeddingModelType) else None


def _unavailable(what: str, why: str) -> ModelUnavailableError:
    return ModelUnavailableError(
        f"{what} {why}; surrealdocs never downloads models. Use embedding_model='fast' "
        "(all-MiniLM-L6-v2, 384 dimensions, bundled with surrealdocs), or pass an object "
        "implementing surrealdocs.Embedder (name, dimension, embed_documents, embed_query) "
        "that runs your model locally, or embed=False for BM25 only."
    )


def _preset_embedder(name: str) -> Embedder:
    model, dims, offline = PRESETS[name]
    if offline is None:
        raise _unavailable(
            f"the {name!r} preset ({model}, {dims} dimensions)",
            "has no model that can run offline here (no PyPI package ships it, and kreuzberg "
            "would download it from a model hub at run time)")
    return _load(offline)


def _load(name: str) -> Embedder:
    try:
        return get_embedder(name)
    except _CoreModelUnavailableError as exc:  # e.g. the model's wheel is not installed
        raise ModelUnavailableError(str(exc)) from exc


def _is_model_name(name: str) -> bool:
    return any(name == p or name.startswith(p + "-") for p in available_models())


def resolve_embedder(model: Any, dimensions: int | None) -> Embedder:
    """The embedder for kreuzberg-surrealdb's ``embedding_model`` argument.

    Accepts a preset name, a surrealdocs model name (``all-minilm-l6-v2``, ``hashing-N``),
    an object implementing :class:`surrealdocs.Embedder`, or kreuzberg's
    ``EmbeddingModelType.preset(...)``. Raises :class:`ModelUnavailableError` for models that
    cannot run offline and :class:`DimensionMismatchError` when ``dimensions`` disagrees
    with the model.
    """
    if isinstance(model, Embedder):
        embedder: Embedder = model
    elif isinstance(model, str):
        key = model.strip().lower()
        if key in PRESETS:
            embedder = _preset_embedder(key)
        elif _is_model_name(key):
            embedder = _load(key)
        else:
            raise ConfigurationError(
                f"Unknown embedding preset: {model!r} (presets: {', '.join(PRESETS)}; "
                f"surrealdocs models: {', '.join(available_models())})")
    else:
        described = _kreuzberg_model_type(model)
        if described is None:
            raise ConfigurationError(
                "embedding_model must be a preset name, a kreuzberg EmbeddingModelType or a "
                f"surrealdocs Embedder, got {type(model).__name__}")
        match = _KZ_PRESET.match(described)
        if match and match.group(1).lower() in PRESETS:
            embedder = _preset_embedder(match.group(1).lower())
        else:
            raise _unavailable(
                described, "is a model that kreuzberg loads from a model hub at run time")
    if dimensions is not None and dimensions != embedder.dimension:
        raise DimensionMismatchError(
            f"embedding_dimensions={dimensions}, but the embedding model {embedder.name!r} "
            f"produces {embedder.dimension}-dimensional vectors: leave embedding_dimensions "
            f"out, or set it to {embedder.dimension}")
    return embedder


def _nominal_dimensions(model: Any, dimensions: int | None) -> int:
    """``embedding_dimensions`` when nothing is embedded (``embed=False``): validated like
    kreuzberg-surrealdb does, but no model is loaded."""
    if dimensions is not None:
        return dimensions
    if isinstance(model, Embedder):
        return int(model.dimension)
    if isinstance(model, str):
        key = model.strip().lower()
        if key in PRESETS:
            return PRESETS[key][1]
        if _is_model_name(key):
            return int(get_embedder(key).dimension)
        raise ConfigurationError(
            f"Unknown embedding preset: {model!r} (presets: {', '.join(PRESETS)})")
    described = _kreuzberg_model_type(model)
    match = _KZ_PRESET.match(described or "")
    if match and match.group(1).lower() in PRESETS:
        return PRESETS[match.group(1).lower()][1]
    if described is not None:
        raise ConfigurationError(
            "embedding_dimensions is required when passing an EmbeddingModelType directly")
    raise ConfigurationError(
        "embedding_model must be a preset name, a kreuzberg EmbeddingModelType or a "
        f"surrealdocs Embedder, got {type(model).__name__}")


# --------------------------------------------------------------------------- the classes


class _Ingester:
    """What both classes share: the connection, the tables, the four ``ingest_*`` calls."""

    _chunked: ClassVar[bool]

    def __init__(self, *, db: AsyncSurrealQueryable, table: str, insert_batch_size: int,
                 config: Any, chunk_table: str, embed: bool,
                 embedder: Embedder | None, chunk_sizes: tuple[int, int] | None) -> None:
        # Everything is validated here, before the database sees a single query.
        self._names = Names(table, chunk_table)
        if isinstance(insert_batch_size, bool) or not isinstance(insert_batch_size, int) \
                or insert_batch_size < 1:
            raise ConfigurationError(
                f"insert_batch_size must be a positive integer, got {insert_batch_size!r}")
        if not isinstance(db, AsyncSurrealQueryable):
            raise ConfigurationError(
                f"db must be an async SurrealDB connection, got {type(db).__name__}")
        own_config = copy_extraction_config(config) if config is not None else None
        extra: dict[str, Any] = {}
        if chunk_sizes is not None:
            extra.update(chunk_size=chunk_sizes[0], chunk_overlap=chunk_sizes[1])
        if embedder is not None:
            extra.update(model=embedder.name)
        # the original's layout: vectors in the chunks, where its users' queries find them
        # the original's "max records per INSERT batch": never more, and fewer when the
        # engine writes smaller statements faster (surrealdocs' own default)
        self._settings = Settings(
            documents_table=table, chunks_table=chunk_table,
            insert_batch_size=min(insert_batch_size, Settings.insert_batch_size),
            chunked=self._chunked, embed=embed,
            separate_vectors=False, fit_chunks=False, kreuzberg_config=own_config,
            derive_titles=False,  # the original stores kreuzberg's metadata title
            text_index="engine", **extra)  # its users write `@@` queries
        self._db = db
        self._client = LegacyQueryClient(db)
        self._embedder = embedder
        self._kb: KnowledgeBase | None = None
        self._lock: asyncio.Lock | None = None

    @property
    def client(self) -> LegacyQueryClient:
        """The caller's SurrealDB connection; its ``query()`` returns the rows of the last
        statement, as SDK 1.x/2.x did (see :class:`LegacyQueryClient`)."""
        return self._client

    @property
    def table(self) -> str:
        """The documents table name."""
        return self._names.documents

    @property
    def analyzer_name(self) -> str:
        """The full-text analyzer of the BM25 index (for ``search::analyze`` and custom
        SurQL). Named after its language: ``sd_english`` unless ``setup_schema`` chose
        another ``analyzer_language``."""
        return self._names.analyzer

    async def _setup(self, **params: Any) -> None:
        settings = self._settings.replace(**params)  # validates before any query
        async with self._guard():
            self._kb = await self._open(settings, create=True)

    async def _ready(self) -> KnowledgeBase:
        """The knowledge base; tables set up earlier (by another object or process) are
        adopted without a new ``setup_schema()``, absent ones raise
        SchemaNotInitializedError."""
        if self._kb is not None:
            return self._kb
        async with self._guard():
            if self._kb is None:
                self._kb = await self._open(self._settings, create=False)
            return self._kb

    async def _open(self, settings: Settings, *, create: bool) -> KnowledgeBase:
        try:
            kb = await KnowledgeBase.around(self._db, settings=settings,
                                            embedder=self._embedder, create=create)
        except _CoreSchemaNotInitializedError as exc:
            raise SchemaNotInitializedError() from exc
        except EmbeddingModelMismatchError as exc:
            stored, requested = exc.stored, exc.requested
            if stored and requested and stored[1] != requested[1]:
                raise DimensionMismatchError(
                    f"the tables {settings.documents_table}/{settings.chunks_table} hold "
                    f"{stored[1]}-dimensional vectors of model {stored[0]!r}, but this "
                    f"pipeline embeds with {requested[0]!r} ({requested[1]} dimensions). Use "
                    "the same model, other table names, or re-embed the tables: surrealdocs "
                    f"reembed --model {requested[0]}") from exc
            raise
        self._names = kb.store.names
        self._settings = kb.settings
        return kb

    def _guard(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    # -- ingestion ---------------------------------------------------------------------

    async def ingest_file(self, path: str | Path) -> FileResult:
        """Extract and store a single file. Returns what happened to it."""
        if Path(path).is_dir():
            raise ConfigurationError(f"{path} is a directory: use ingest_directory()")
        (result,) = (await self._ingest([path], "**/*")).results
        return result

    async def ingest_files(self, paths: Sequence[str | Path]) -> IngestReport:
        """Extract and store multiple files."""
        if isinstance(paths, (str, Path)):
            paths = [paths]
        return await self._ingest(list(paths), "**/*")

    async def ingest_directory(self, directory: str | Path, *, glob: str = "**/*"
                               ) -> IngestReport:
        """Extract and store every file of ``directory`` that matches ``glob``."""
        return await self._ingest([directory], glob)

    async def ingest_bytes(self, *, data: bytes, mime_type: str, source: str) -> FileResult:
        """Extract and store raw bytes of a MIME type under the name ``source``."""
        kb = await self._ready()
        try:
            result = await kb.ingest_bytes(data, mime_type=mime_type, source=source)
        except Exception as exc:
            raise _ingestion_error(exc) from exc
        _raise_failures([result])
        return result

    async def _ingest(self, paths: list[str | Path], glob: str) -> IngestReport:
        kb = await self._ready()
        try:
            # A file that failed before and has not changed is not extracted again, but it is
            # reported (and raised) as failed again, as the original would.
            report = await kb.ingest(paths, glob=glob)
        except Exception as exc:
            raise _ingestion_error(exc) from exc
        _raise_failures(report.results)
        return report


def _ingestion_error(exc: Exception) -> Exception:
    """The core's write errors as kreuzberg-surrealdb's types (which still are the core's)."""
    if isinstance(exc, (IngestionError, SchemaNotInitializedError)):
        return exc
    if isinstance(exc, _CoreDimensionMismatchError):
        return DimensionMismatchError(str(exc))
    if isinstance(exc, StoreError) and "dimension" in str(exc).lower():
        return DimensionMismatchError(f"vector dimension mismatch: {exc}")
    if isinstance(exc, StoreError):
        return IngestionError(str(exc))
    return exc


def _raise_failures(results: Sequence[FileResult]) -> None:
    failed = [r for r in results if r.status == "failed"]
    if failed:
        detail = "; ".join(f"{r.source}: {r.reason}" for r in failed[:5])
        more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
        raise ExtractionFailedError(
            f"{len(failed)} of {len(results)} sources failed: {detail}{more}", results)


class DocumentConnector(_Ingester):
    """Whole documents with a BM25 index on their content: no chunks, no embeddings."""

    _chunked = False

    def __init__(self, *, db: AsyncSurrealQueryable, table: str = "documents",
                 insert_batch_size: int = 100, config: Any = None) -> None:
        # The chunks table name is never used (documents only), only kept distinct.
        super().__init__(db=db, table=table, insert_batch_size=insert_batch_size,
                         config=config, chunk_table="chunks" if table != "chunks" else "chunks_",
                         embed=False, embedder=None, chunk_sizes=None)

    async def setup_schema(self, *, analyzer_language: str = "english", bm25_k1: float = 1.2,
                           bm25_b: float = 0.75) -> None:
        """Create the documents table with its BM25 index (idempotent)."""
        await self._setup(analyzer_language=analyzer_language, bm25_k1=bm25_k1,
                          bm25_b=bm25_b)


class DocumentPipeline(_Ingester):
    """Documents split into chunks, with embeddings (unless ``embed=False``), a BM25 index on
    the chunks and an HNSW index on their embeddings."""

    _chunked = True

    def __init__(self, *, db: AsyncSurrealQueryable, table: str = "documents",
                 insert_batch_size: int = 100, chunk_table: str = "chunks",
                 config: Any = None, embed: bool = True,
                 embedding_model: Any = "balanced",
                 embedding_dimensions: int | None = None) -> None:
        Names(table, chunk_table)  # names first: nothing else happens with bad ones
        if embedding_dimensions is not None and (
                isinstance(embedding_dimensions, bool)
                or not isinstance(embedding_dimensions, int) or embedding_dimensions < 1):
            raise ConfigurationError(
                f"embedding_dimensions must be a positive integer, got {embedding_dimensions!r}")
        embedder: Embedder | None = None
        if embed:
            embedder = resolve_embedder(embedding_model, embedding_dimensions)
            self._dimensions = embedder.dimension
        else:
            self._dimensions = _nominal_dimensions(embedding_model, embedding_dimensions)
        chunking = getattr(config, "chunking", None)
        sizes = ((int(chunking.max_chars), int(chunking.max_overlap)) if chunking is not None
                 else (DEFAULT_MAX_CHARS, DEFAULT_MAX_OVERLAP))
        super().__init__(db=db, table=table, insert_batch_size=insert_batch_size,
                         config=config, chunk_table=chunk_table, embed=embed,
                         embedder=embedder, chunk_sizes=sizes)

    @property
    def chunk_table(self) -> str:
        """The chunks table name."""
        return self._names.chunks

    @property
    def embedding_dimensions(self) -> int:
        """The vector dimensions (of the model in use; nominal when ``embed=False``)."""
        return self._dimensions

    async def setup_schema(self, *, analyzer_language: str = "english", bm25_k1: float = 1.2,
                           bm25_b: float = 0.75, distance_metric: str = "COSINE",
                           hnsw_efc: int = 150, hnsw_m: int = 12) -> None:
        """Create the documents and chunks tables, the BM25 index on the chunks and (unless
        ``embed=False``) the HNSW index on their embeddings (idempotent)."""
        await self._setup(analyzer_language=analyzer_language, bm25_k1=bm25_k1,
                          bm25_b=bm25_b, hnsw_distance=distance_metric, hnsw_efc=hnsw_efc,
                          hnsw_m=hnsw_m)

    async def embed_query(self, query: str) -> list[float]:
        """The query's embedding vector (only with ``embed=True``)."""
        if self._embedder is None:
            raise ConfigurationError("embed_query needs embed=True: this pipeline stores no "
                                     "embeddings")
        vector = await asyncio.to_thread(self._embedder.embed_query, query)
        return [float(x) for x in vector]

