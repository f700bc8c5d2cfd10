"""surrealdocs: documents in, a searchable knowledge base inside SurrealDB out."""

from .config import Settings
from .core.job_runner import Job, JobService
from .core.kb import KnowledgeBase, SyncKnowledgeBase
from .core.notebook_service import (
    Note,
    Notebook,
    NotebookService,
    Source,
    SourceEmbedding,
    SourceMatch,
)
from .core.search_request import SearchRequest
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
from .parts.filters import Filters
from .parts.results import (
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
from .version import __version__ as __version__

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
    "SearchRequest",
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
