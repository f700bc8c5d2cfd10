"""kreuzberg-surrealdb's API on surrealdocs: change ``from kreuzberg_surrealdb import ...`` to
``from surrealdocs.kreuzberg_surrealdb import ...``. See
:mod:`surrealdocs.faces.kreuzberg_surrealdb`."""

from .faces.kreuzberg_surrealdb import (
    AsyncSurrealQueryable,
    DimensionMismatchError,
    DocumentConnector,
    DocumentPipeline,
    ExtractionFailedError,
    IngestionError,
    LegacyQueryClient,
    ModelUnavailableError,
    SchemaNotInitializedError,
)

__all__ = [
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
