"""The exceptions surrealdocs raises. All derive from :class:`SurrealDocsError`.

Faces map them to their own conventions: the CLI prints the message and exits with code 2,
the HTTP server answers with a status and a stable error code
(``faces/http/error_responses.py``), the compatibility facades re-raise them as their
original library's types.
"""

from __future__ import annotations


class SurrealDocsError(Exception):
    """Base class of every error raised by surrealdocs."""


class ConfigurationError(SurrealDocsError, ValueError):
    """A setting, URL or argument is invalid."""


class AlreadyExistsError(ConfigurationError):
    """A notebook or API key of that name exists already."""


class InvalidIdentifierError(ConfigurationError):
    """A table, index or analyzer name is not a safe SurrealQL identifier."""


class ForbiddenError(SurrealDocsError, PermissionError):
    """What the caller may not do or choose (a server's client choosing its chat model)."""


class NotFoundError(SurrealDocsError, LookupError):
    """No notebook, source, document, note or job with that id or name."""


class StoreError(SurrealDocsError):
    """The database refused a query or could not be reached."""


class SchemaVersionError(StoreError):
    """The database's schema was written by a newer surrealdocs than this one."""


class SchemaMismatchError(StoreError):
    """The tables exist with another layout or analyzer, or were not made by surrealdocs."""


class SchemaNotInitializedError(StoreError):
    """The tables have not been created yet (a knowledge base opened with ``create=False``)."""


class EmbeddingModelMismatchError(StoreError):
    """The store was embedded with another model than the one asked for.

    ``stored`` and ``requested`` are ``(model, dimension)`` pairs.
    """

    def __init__(self, message: str, *, stored: tuple[str, int] | None = None,
                 requested: tuple[str, int] | None = None) -> None:
        super().__init__(message)
        self.stored = stored
        self.requested = requested


class DimensionMismatchError(SurrealDocsError, ValueError):
    """A vector's length does not match the index dimension."""


class ModelUnavailableError(SurrealDocsError):
    """An embedding model cannot be loaded offline on this machine."""


class EmbeddingProviderError(SurrealDocsError):
    """A hosted embedding provider (OpenAI-compatible, Ollama) failed: unreachable, the key
    or model refused, retries exhausted, or an answer of the wrong shape.

    ``status`` is the HTTP status of the last answer, ``None`` when there was none (the
    server could not be reached or did not answer in time) or it was not the failure.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ChatModelError(SurrealDocsError):
    """The chat model an answer needs failed: unreachable, the model or key refused, or
    retries exhausted before its first token."""


class ArchiveError(SurrealDocsError, ValueError):
    """An archive to import is not one, is damaged, hostile, or of a newer format; or a
    store cannot take it (not empty, another model). Nothing was written."""
