"""Importing an archive into a store that holds documents already (``import --merge``).

A document is its text (its id is the text's SHA-256), so a document both hold is kept
once: the target's row stays, and the archive's sources of it are added to it. A source
(a path) both hold keeps the target's document: the target is the newer truth about its
own files, and an archive document left without a source is not imported. Notebooks of
the same name are one notebook (the archive's edges, notes and conversations go to the
target's), the others are added; API keys of a name the target has stay the target's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from surrealdb import RecordID

from ..store.carry import CarriedRows
from ..store.connection import Statement
from ..store.storage import Storage


class Merge:
    """What a merging import changes in the archive's rows, and the writes it adds."""

    def __init__(self, storage: Storage, carried: CarriedRows) -> None:
        self.storage = storage
        self.carried = carried
        self.notebooks: dict[str, RecordID] = {}  # an archive notebook's id -> the target's
        self.files: dict[str, dict[str, Any]] = {}  # the archive's files rows, by path
        self.left_out = 0  # archive documents whose every source the target holds
        self.joined = 0  # archive documents the target held: their sources added

    async def prepare(self, notebooks: Iterator[dict[str, Any]],
                      files: Iterator[dict[str, Any]]) -> None:
        """Map notebooks by name; read the archive's files rows (one a source)."""
        for notebook in notebooks:
            found = await self.storage.notebooks.find(str(notebook.get("name")))
            if found is not None and str(found["id"]) != str(notebook["id"]):
                self.notebooks[str(notebook["id"])] = found["id"]
        self.files = {str(row.get("path")): row for row in files}

    def remap(self, value: Any) -> Any:
        """A row with the archive's notebooks replaced by the target's of the same name."""
        if isinstance(value, RecordID):
            return self.notebooks.get(str(value), value)
        if isinstance(value, dict):
            return {k: self.remap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.remap(v) for v in value]
        return value

    def skip_row(self, role: str, row: dict[str, Any]) -> bool:
        """A notebook the target has under the same name is not written again."""
        return role == "notebook" and str(row["id"]) in {str(v) for v in self.notebooks.values()}

    async def documents(self, documents: list[dict[str, Any]], chunks: list[dict[str, Any]],
                        taken: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Which of a batch's documents (and chunks) are written: those the target lacks,
        with the sources it does not hold; the sources of those it has are added to them
        now."""
        paths = sorted({str(s) for d in documents for s in d.get("sources") or []})
        held = await self.storage.files.of(paths)
        fresh, keep = [], set()
        for document in documents:
            key = str(document["id"])
            own = [str(s) for s in document.get("sources") or []
                   if str(s) not in held or str(held[str(s)].get("document")) == key]
            if key in taken:
                self.joined += 1
                await self._add_sources(document["id"], [s for s in own if s not in held])
                continue
            if not own:
                self.left_out += 1
                continue
            if document.get("source") not in own:
                document = {**document, "source": own[0]}
            fresh.append({**document, "sources": own})
            keep.add(key)
        return fresh, [c for c in chunks if str(c["document"]) in keep]

    async def _add_sources(self, doc: RecordID, sources: list[str]) -> None:
        for source in sources:
            row = self.files.get(source) or {}
            await self.storage.documents.add_source(
                source, str(row.get("file_hash") or ""), int(row.get("size") or 0),
                str(row.get("mime_type") or "application/octet-stream"), doc,
                row.get("mtime_ns"))

    async def references(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Edges of documents the target had go through the membership writes (the edge,
        the document's and its chunks' notebook lists, the vector copies); the others are
        written as they are (or not at all when their document was left out)."""
        docs = [r["in"] for r in rows]
        there = await self.carried.existing(docs)
        plain = []
        for row in rows:
            if str(row["in"]) not in there:
                continue  # its document was left out
            if await self._member(row["in"], row["out"]):
                continue
            plain.append(row)
        return plain

    async def _member(self, doc: RecordID, notebook: RecordID) -> bool:
        """Put a document the target had before this import in a notebook; False for a
        document this import wrote (its rows carry their notebooks already)."""
        if any(str(n) == str(notebook) for n in await self.storage.documents.notebooks_of(doc)):
            return False  # written by this import with its notebooks, or linked already
        storage = self.storage
        await storage.store.transaction(
            storage.notebooks.link_statement(doc, notebook),
            storage.documents.membership_statement(doc, notebook, add=True),
            *storage.chunks.membership_statements(doc, notebook, add=True))
        return True

    def unique_clash_statement(self, role: str, rows: list[dict[str, Any]]) -> Statement:
        """Rows of a role with a UNIQUE field (an edge's pair, a key's name) that the
        target may hold already: the target's stay."""
        return self.carried.insert_statement(role, rows, ignore=True)
