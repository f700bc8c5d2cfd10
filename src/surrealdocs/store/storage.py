"""Every table's owner, for one store: documents, chunks, notebooks, jobs, API keys,
conversations."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import Settings
from .api_keys import KeyStorage
from .chunks import ChunkStorage
from .connection import Store
from .conversations import ConversationStorage
from .documents import DocumentStorage, FileRecords
from .jobs import JobStorage
from .legs import Legs, choose_legs
from .notebooks import NotebookStorage


@dataclass(frozen=True)
class Storage:
    """The owners of a store's tables. Each holds all the SurrealQL of its tables; writes
    that must be atomic across tables are composed from their statements with
    :meth:`Store.transaction`."""

    store: Store
    documents: DocumentStorage
    files: FileRecords  # what each source last held, and what came of it
    chunks: ChunkStorage
    notebooks: NotebookStorage
    jobs: JobStorage
    keys: KeyStorage
    conversations: ConversationStorage
    legs: Legs  # the search legs this store's layout calls for

    @classmethod
    def of(cls, store: Store, settings: Settings, dimension: int, *,
           vectors_apart: bool = False) -> Storage:
        chunks = ChunkStorage(store, settings, dimension, vectors_apart=vectors_apart)
        documents = DocumentStorage(store, facets=settings.separate_vectors)
        return cls(store, documents, FileRecords(store), chunks, NotebookStorage(store),
                   JobStorage(store),
                   KeyStorage(store), ConversationStorage(store),
                   choose_legs(settings, chunks, documents))
