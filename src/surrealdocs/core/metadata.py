"""``kb.metadata``: the metadata of the user's own on documents, set at ingest or later,
without re-embedding (docs/filters.md). A document's ``metadata`` is what its extractor
found with the user's keys over it; the user's keys are also kept apart
(``user_metadata``), so that a new version of a source keeps them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import ConfigurationError, NotFoundError
from ..parts.metadata import check_key, user_metadata
from ..parts.results import IngestReport
from ..store.storage import Storage
from .reader import DocumentReader


class MetadataService:
    """Set and remove keys of documents' metadata."""

    def __init__(self, storage: Storage, reader: DocumentReader) -> None:
        self.storage = storage
        self.reader = reader

    async def set(self, ref: Any, metadata: Mapping[str, Any] | None = None, *,
                  unset: Sequence[str] = ()) -> dict[str, Any]:
        """Set ``metadata``'s keys on a document (by id, key or one of its sources) and
        remove the keys ``unset``; its metadata as it is now. Nothing is re-embedded."""
        changes = user_metadata(metadata)
        gone = [check_key(k) for k in unset]
        if not changes and not gone:
            raise ConfigurationError("give KEY=VALUE pairs to set, or keys to unset")
        both = sorted(set(changes) & set(gone))
        if both:
            raise ConfigurationError(f"{', '.join(both)}: both set and unset")
        doc = await self.reader.document_id(ref)
        found = await self.storage.documents.set_metadata(doc, changes, gone)
        if found is None:
            raise NotFoundError(f"no document {ref!r}")
        return found

    async def file_documents(self, documents: IngestReport | Iterable[Any],
                             metadata: Mapping[str, Any] | None) -> int:
        """Set ``metadata`` on the documents of an ingest (or ids): how many."""
        return await file_metadata(self.storage, documents, metadata)


async def file_metadata(storage: Storage, documents: IngestReport | Iterable[Any],
                        metadata: Mapping[str, Any] | None) -> int:
    """Set ``metadata`` on the documents of an ingest (or ids), as every face files what it
    wrote: how many documents."""
    changes = user_metadata(metadata)
    if not changes:
        return 0
    ids = (r.document_id for r in documents.results if r.document_id) \
        if isinstance(documents, IngestReport) else documents
    docs = list(dict.fromkeys(storage.documents.document_id(d) for d in ids))
    for doc in docs:
        await storage.documents.set_metadata(doc, changes, [])
    return len(docs)
