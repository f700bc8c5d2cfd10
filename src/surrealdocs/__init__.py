"""surrealdocs: documents in, a searchable knowledge base inside SurrealDB out."""

from .config import Settings
from .embed import Embedder, get_embedder
from .errors import (
    ConfigurationError,
    DimensionMismatchError,
    EmbeddingModelMismatchError,
    EmbeddingProviderError,
    ExtractionError,
    InvalidIdentifierError,
    ModelUnavailableError,
    SchemaMismatchError,
    SchemaNotInitializedError,
    SchemaVersionError,
    StoreError,
    SurrealDocsError,
)
from .ingest import FileResult, IngestReport
from .kb import KnowledgeBase, Stats, SyncKnowledgeBase
from .search import Filters, Hit
from .store.connection import Store, connect

__version__ = "0.1.0"

__all__ = [
    "ConfigurationError",
    "DimensionMismatchError",
    "Embedder",
    "EmbeddingModelMismatchError",
    "EmbeddingProviderError",
    "ExtractionError",
    "FileResult",
    "Filters",
    "Hit",
    "IngestReport",
    "InvalidIdentifierError",
    "KnowledgeBase",
    "ModelUnavailableError",
    "SchemaMismatchError",
    "SchemaNotInitializedError",
    "SchemaVersionError",
    "Settings",
    "Stats",
    "Store",
    "StoreError",
    "SurrealDocsError",
    "SyncKnowledgeBase",
    "connect",
    "get_embedder",
]
