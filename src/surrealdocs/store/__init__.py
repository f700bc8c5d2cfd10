"""Connection, schema and migrations of the SurrealDB store."""

from .connection import Store, connect, resolve_url, validate_identifier

__all__ = ["Store", "connect", "resolve_url", "validate_identifier"]
