"""The exceptions surrealdocs raises. All derive from :class:`SurrealDocsError`."""

from __future__ import annotations


class SurrealDocsError(Exception):
    """Base class of every error raised by surrealdocs."""


class ConfigurationError(SurrealDocsError, ValueError):
    """A setting, URL or argument is invalid."""


class InvalidIdentifierError(ConfigurationError):
    """A table, index or analyzer name is not a safe SurrealQL identifier."""


class StoreError(SurrealDocsError):
    """The database refused a query or could not be reached."""


class SchemaVersionError(StoreError):
    """The database's schema was written by a newer surrealdocs than this one."""


class SchemaMismatchError(StoreError):
    """The tables exist with another layout or analyzer, or were not made by surrealdocs."""


class EmbeddingModelMismatchError(StoreError):
    """The store was embedded with another model than the one asked for."""


class SchemaNotInitializedError(StoreError):
    """The tables have not been created yet."""


class DimensionMismatchError(SurrealDocsError, ValueError):
    """A vector's length does not match the index dimension."""


class ModelUnavailableError(SurrealDocsError):
    """An embedding model cannot be loaded offline on this machine."""


class ExtractionError(SurrealDocsError):
    """A document could not be turned into text."""


class EmbeddingProviderError(SurrealDocsError):
    """A hosted embedding provider (OpenAI-compatible, Ollama) failed: unreachable, the key
    or model refused, retries exhausted, or an answer of the wrong shape.

    ``status`` is the HTTP status of the last answer, ``None`` when there was none (the
    server could not be reached or did not answer in time) or it was not the failure.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
