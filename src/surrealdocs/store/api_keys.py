"""The ``api_key`` table: the server's API keys, every statement on it.

A key is stored as the SHA-256 of its token (never the token itself), with a name (unique),
the token's first characters (to tell keys apart in a list), whether it may only read, when
it was made and when it was last used. The table is defined by migration 7
(:mod:`surrealdocs.store.schema`).
"""

from __future__ import annotations

from typing import Any

from surrealdb import RecordID

from .connection import Store
from .names import Names, validate_identifier


def key_table(names: Names) -> str:
    """The key table of a knowledge base's tables (``api_key``, or ``<documents>_api_key``
    for other table names, like the notebooks' tables)."""
    return validate_identifier("api_key" if names.default else f"{names.documents}_api_key",
                               "key table name")


class KeyStorage:
    """API keys, by name and by the hash of their token."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.table = key_table(store.names)

    async def create(self, name: str, token_hash: str, prefix: str,
                     read_only: bool) -> dict[str, Any] | None:
        """Add a key; ``None`` when a key of that name exists already."""
        (rows,) = await self.store.query(
            f"IF (SELECT VALUE id FROM {self.table} WHERE name = $name) = [] {{"
            f" RETURN (CREATE ONLY {self.table} CONTENT {{ name: $name, hash: $hash,"
            " prefix: $prefix, read_only: $read_only });"
            " } ELSE { RETURN NONE; };",
            {"name": name, "hash": token_hash, "prefix": prefix, "read_only": read_only})
        return rows if isinstance(rows, dict) else None

    async def select(self) -> list[dict[str, Any]]:
        (rows,) = await self.store.query(
            f"SELECT id, name, prefix, read_only, created, last_used FROM {self.table}"
            " ORDER BY created, name;")
        return list(rows or [])

    async def find_hash(self, token_hash: str) -> dict[str, Any] | None:
        (rows,) = await self.store.query(
            f"SELECT * FROM {self.table} WHERE hash = $hash LIMIT 1;", {"hash": token_hash})
        return rows[0] if rows else None

    async def count(self) -> int:
        (rows,) = await self.store.query(f"SELECT count() AS n FROM {self.table} GROUP ALL;")
        return int(rows[0]["n"]) if rows else 0

    async def delete(self, name: str) -> bool:
        """Delete the key called ``name``; whether there was one."""
        (rows,) = await self.store.query(
            f"DELETE {self.table} WHERE name = $name RETURN BEFORE;", {"name": name})
        return bool(rows)

    async def touch(self, key: RecordID) -> None:
        await self.store.query("UPDATE $key SET last_used = time::now() RETURN NONE;",
                               {"key": key})
