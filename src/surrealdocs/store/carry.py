"""A store's rows as they are, for export and import (core/archive.py): every table a
knowledge base cannot recompute cheaply, read in pages and written back with their ids and
times. Like the migrations, this module reads and writes the other owners' tables whole;
the chunks are written through their owner (:meth:`ChunkStorage.insert_statements`), which
builds their text segment and puts their vectors where the layout keeps them.

Tables are named by role (``documents``, ``chunks``, ``notebook`` …), so an archive made
with other table names imports under the target's. The indexes (the text index, the HNSW
graphs) and the notebooks' vector copies are rebuilt, never carried.

Fields with ``VALUE time::now()`` (``ingested_at``, ``created`` …) keep a carried value
when a write binds ``$sd_keep_times`` (schema 15); no other write does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from surrealdb import RecordID

from ..errors import ArchiveError
from .api_keys import key_table
from .connection import Statement
from .names import Names
from .storage import Storage

# The roles, in the order an import writes them: what a row links to comes first.
ROLES = ("notebook", "documents", "chunks", "files", "reference", "note", "artifact",
         "chat_session", "chat_turn", "api_key")
RELATIONS = frozenset({"reference", "artifact"})
# computed again by the target: the text index's stamp, the engine's text hash
_NOT_CARRIED = {"chunks": ("text_seg", "text_hash", "embedding")}
# the rows a page holds; a page of documents is cut short at this many chunks
PAGE_ROWS = 500
PAGE_CHUNKS = 2000


def carried_tables(names: Names) -> dict[str, str]:
    """The table of each role under these names."""
    return {"documents": names.documents, "files": names.files, "chunks": names.chunks,
            "notebook": names.notebook, "reference": names.reference, "note": names.note,
            "artifact": names.artifact, "chat_session": names.chat_session,
            "chat_turn": names.chat_turn, "api_key": key_table(names)}


class CarriedRows:
    """Reads and writes one store's rows for an archive."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.store = storage.store
        self.tables = carried_tables(self.store.names)
        self._roles = {table: role for role, table in self.tables.items()}
        chunks = storage.chunks
        self.vector_table = chunks.vector_table if chunks.settings.vectors else None

    def role_of(self, table: str) -> str:
        role = self._roles.get(table)
        if role is None:
            raise ArchiveError(f"a link to the table {table!r}, which an archive does not carry")
        return role

    def table_of(self, role: str) -> str:
        table = self.tables.get(role)
        if table is None:
            raise ArchiveError(f"a link to the part {role[:40]!r}, which this store lacks")
        return table

    # ----- reading ----------------------------------------------------------------------
    async def ids(self, role: str) -> list[RecordID]:
        """Every row id of a role (documents: complete ones). Pages are then read by id:
        ``WHERE id > $last ORDER BY id LIMIT n`` costs time in proportion to the rows
        before ``$last`` (1.6 s a page at 100,000 documents), a read by ids does not."""
        where = " WHERE complete = true" if role == "documents" else ""
        (ids,) = await self.store.query(f"SELECT VALUE id FROM {self.tables[role]}{where};")
        return list(ids or [])

    async def rows_of(self, ids: Sequence[RecordID]) -> list[dict[str, Any]]:
        """These rows as they are now (any role but chunks)."""
        (rows,) = await self.store.query("SELECT * FROM $ids;", {"ids": list(ids)})
        return list(rows or [])

    async def documents_of(self, ids: Sequence[RecordID]) -> list[dict[str, Any]]:
        """These documents as they are now (complete ones)."""
        (rows,) = await self.store.query("SELECT * FROM $ids WHERE complete = true;",
                                         {"ids": list(ids)})
        return list(rows or [])

    async def chunks_of(self, documents: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The chunks of these documents (their current generation), each with its
        ``embedding`` when it has one, in document then chunk order."""
        if not documents:
            return []
        omit = ", ".join(_NOT_CARRIED["chunks"])
        (rows,) = await self.store.query(
            f"SELECT * OMIT {omit} FROM {self.tables['chunks']} WHERE document IN $docs;",
            {"docs": [d["id"] for d in documents]})
        generation = {str(d["id"]): int(d.get("generation") or 0) for d in documents}
        order = {str(d["id"]): n for n, d in enumerate(documents)}
        rows = [r for r in rows or []
                if int(r.get("generation") or 0) == generation.get(str(r["document"]), -1)]
        rows.sort(key=lambda r: (order[str(r["document"])], r.get("chunk_index") or 0))
        if self.vector_table is not None and rows:
            (found,) = await self.store.query(
                "SELECT VALUE [record::id(id), embedding] FROM $vector_ids;",
                {"vector_ids": [RecordID(self.vector_table, r["id"].id) for r in rows]})
            by_key = {str(k): v for k, v in found or []}
            for row in rows:
                vector = by_key.get(str(row["id"].id))
                if vector is not None:
                    row["embedding"] = vector
        return rows

    async def counts(self) -> dict[str, int]:
        """Rows per role (documents: complete ones)."""
        sql = []
        for role, table in self.tables.items():
            where = " WHERE complete = true" if role == "documents" else ""
            sql.append(f"SELECT count() AS n FROM {table}{where} GROUP ALL;")
        results = await self.store.query(" ".join(sql))
        return {role: int(r[0]["n"]) if r else 0 for role, r in zip(self.tables, results)}

    # ----- writing ----------------------------------------------------------------------
    async def existing(self, ids: Sequence[RecordID]) -> set[str]:
        """Which of these rows exist already (an import run again skips them)."""
        if not ids:
            return set()
        (taken,) = await self.store.query("RETURN $ids.filter(|$i| record::exists($i));",
                                          {"ids": list(ids)})
        return {str(t) for t in taken or []}

    def insert_statement(self, role: str, rows: Sequence[dict[str, Any]], *,
                         ignore: bool = False) -> Statement:
        """Insert carried rows of any role but chunks, ids and times as they are;
        ``ignore`` skips rows whose UNIQUE field the store holds already (a merge)."""
        if not rows:
            return Statement("")
        relation = " RELATION" if role in RELATIONS else ""
        skip = " IGNORE" if ignore else ""
        name = f"carried_{role}"
        return Statement(
            f"INSERT{relation}{skip} INTO {self.tables[role]} ${name} RETURN NONE;",
            {name: list(rows), "sd_keep_times": True}, rows=len(rows))

    def chunk_statements(self, rows: Sequence[dict[str, Any]]) -> list[Statement]:
        """Insert carried chunks (with ``embedding`` where they have one) through their
        owner: their text segment and their vectors where the layout keeps them. (The
        vectors waiting outside the shared graph are counted once, at the end:
        :meth:`count_pending_vectors`.)"""
        return self.storage.chunks.insert_statements(rows) if rows else []

    async def merge_text_segments(self) -> None:
        """Merge the text index's segments (an import writes one a batch) as far as its
        levels call for, as ingest does in the background."""
        text = self.storage.chunks.text
        if text is not None:
            while await text.merge_once():
                pass

    async def count_pending_vectors(self) -> None:
        await self.store.run(self.storage.chunks.graphs.all_pending_statement())

    # ----- the import's mark ------------------------------------------------------------
    async def import_mark(self) -> dict[str, Any] | None:
        (row,) = await self.store.query("SELECT * FROM ONLY $k;",
                                        {"k": self.store.names.import_key})
        return row if isinstance(row, dict) else None

    async def set_import_mark(self, archive_id: str) -> None:
        await self.store.query("UPSERT $k CONTENT { archive: $archive, started: time::now() };",
                               {"k": self.store.names.import_key, "archive": archive_id})

    async def finish_import_mark(self) -> None:
        await self.store.query("UPDATE $k SET done = true, finished = time::now();",
                               {"k": self.store.names.import_key})
