"""surrealdocs: documents in, a searchable knowledge base inside SurrealDB out."""

from .config import Settings
from .embed import Embedder, get_embedder
from .errors import (
    ConfigurationError,
    DimensionMismatchError,
    EmbeddingModelMismatchError,
    EmbeddingProviderError,
    InvalidIdentifierError,
    ModelUnavailableError,
    NotFoundError,
    SchemaMismatchError,
    SchemaNotInitializedError,
    SchemaVersionError,
    StoreError,
    SurrealDocsError,
)
from .filters import Filters
from .jobs import Job, JobService
from .kb import KnowledgeBase, SyncKnowledgeBase
from .notebook import Note, Notebook, NotebookService, Source, SourceEmbedding, SourceMatch
from .results import (
    ChunkSpan,
    Document,
    FileResult,
    Hit,
    IngestReport,
    Passage,
    PlannedChange,
    Stats,
    SyncReport,
)
from .store.connection import Store, connect

__version__ = "0.1.0"

__all__ = [
    "ChunkSpan",
    "ConfigurationError",
    "DimensionMismatchError",
    "Document",
    "Embedder",
    "EmbeddingModelMismatchError",
    "EmbeddingProviderError",
    "FileResult",
    "Filters",
    "Hit",
    "IngestReport",
    "InvalidIdentifierError",
    "Job",
    "JobService",
    "KnowledgeBase",
    "ModelUnavailableError",
    "NotFoundError",
    "Note",
    "Notebook",
    "NotebookService",
    "Passage",
    "PlannedChange",
    "SchemaMismatchError",
    "SchemaNotInitializedError",
    "SchemaVersionError",
    "Settings",
    "Source",
    "SourceEmbedding",
    "SourceMatch",
    "Stats",
    "Store",
    "StoreError",
    "SurrealDocsError",
    "SyncKnowledgeBase",
    "SyncReport",
    "connect",
    "get_embedder",
]
