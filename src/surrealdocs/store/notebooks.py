"""The ``notebook``, ``reference``, ``note`` and ``artifact`` tables: every statement on them.

Edges say what belongs where: ``document ->reference-> notebook`` (a source in a notebook;
ENFORCED, one edge per pair) and ``note ->artifact-> notebook``. Deleting a record removes
its edges.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from surrealdb import RecordID

from .connection import Statement, Store


class NotebookStorage:
    """Notebooks, the edges of their sources, and their notes."""

    def __init__(self, store: Store) -> None:
        self.store = store
        names = store.names
        self.table, self.reference = names.notebook, names.reference
        self.note, self.artifact = names.note, names.artifact

    # ----- notebooks ------------------------------------------------------------------
    async def create(self, fields: dict[str, Any]) -> dict[str, Any]:
        (row,) = await self.store.query(f"CREATE ONLY {self.table} CONTENT $data;",
                                        {"data": fields})
        return dict(row)

    async def update(self, notebook: RecordID, fields: dict[str, Any]) -> dict[str, Any] | None:
        (row,) = await self.store.query("UPDATE ONLY $nb MERGE $data;",
                                        {"nb": notebook, "data": fields})
        return row if isinstance(row, dict) else None

    async def get(self, notebook: RecordID) -> dict[str, Any] | None:
        (row,) = await self.store.query("SELECT * FROM ONLY $nb;", {"nb": notebook})
        return row if isinstance(row, dict) else None

    async def find(self, name: str) -> dict[str, Any] | None:
        (rows,) = await self.store.query(f"SELECT * FROM {self.table} WHERE name = $name;",
                                         {"name": name})
        return rows[0] if rows else None

    async def select(self, archived: bool | None = None) -> list[dict[str, Any]]:
        where = "" if archived is None else " WHERE archived = $archived"
        (rows,) = await self.store.query(
            f"SELECT *, count(<-{self.reference}) AS source_count FROM {self.table}{where}"
            " ORDER BY created;", {"archived": archived})
        return list(rows or [])

    async def count(self) -> int:
        (rows,) = await self.store.query(f"SELECT count() AS n FROM {self.table} GROUP ALL;")
        return int(rows[0]["n"]) if rows else 0

    def delete_statement(self, notebook: RecordID) -> Statement:
        """Delete a notebook, its notes and every edge to it."""
        return Statement(
            f"DELETE {self.note} WHERE id IN (SELECT VALUE in FROM {self.artifact}"
            " WHERE out = $nb); DELETE $nb;", {"nb": notebook})

    # ----- sources (documents) in notebooks --------------------------------------------
    def link_statement(self, doc: RecordID, notebook: RecordID) -> Statement:
        # the UNIQUE index on (in, out) makes a second RELATE fail: skip it instead
        return Statement(
            f"IF (SELECT VALUE id FROM {self.reference} WHERE in = $doc AND out = $nb) = []"
            f" {{ RELATE $doc->{self.reference}->$nb; }};", {"doc": doc, "nb": notebook})

    def unlink_statement(self, doc: RecordID, notebook: RecordID) -> Statement:
        return Statement(f"DELETE {self.reference} WHERE in = $doc AND out = $nb;",
                         {"doc": doc, "nb": notebook})

    def unlink_all_statement(self, doc: RecordID) -> Statement:
        return Statement(f"DELETE {self.reference} WHERE in = $doc;", {"doc": doc})

    def inherit_statement(self, doc: RecordID, notebooks: Sequence[RecordID]) -> Statement:
        """Edges of a new version of a source to the old version's notebooks."""
        return Statement(f"FOR $nb IN $inherit_nbs {{ RELATE $doc->{self.reference}->$nb; }};",
                         {"doc": doc, "inherit_nbs": list(notebooks)})

    async def of_document(self, doc: RecordID) -> list[dict[str, Any]]:
        (rows,) = await self.store.query(
            f"SELECT * FROM {self.table} WHERE id IN"
            f" (SELECT VALUE out FROM {self.reference} WHERE in = $doc) ORDER BY created;",
            {"doc": doc})
        return list(rows or [])

    # ----- notes ----------------------------------------------------------------------
    async def add_note(self, note: RecordID, notebook: RecordID,
                       fields: dict[str, Any]) -> dict[str, Any]:
        await self.store.query(
            f"BEGIN; CREATE $note CONTENT $data RETURN NONE; RELATE $note->{self.artifact}->$nb"
            " RETURN NONE; COMMIT;", {"note": note, "data": fields, "nb": notebook})
        (row,) = await self.store.query("SELECT * FROM ONLY $note;", {"note": note})
        return dict(row)

    async def notes(self, notebook: RecordID) -> list[dict[str, Any]]:
        (rows,) = await self.store.query(
            f"SELECT * FROM {self.note} WHERE id IN"
            f" (SELECT VALUE in FROM {self.artifact} WHERE out = $nb) ORDER BY created;",
            {"nb": notebook})
        return list(rows or [])
