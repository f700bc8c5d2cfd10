"""Connection, schema and migrations of the SurrealDB store."""

from .connection import Store, connect, resolve_url
from .names import Names, validate_identifier

__all__ = ["Names", "Store", "connect", "resolve_url", "validate_identifier"]
