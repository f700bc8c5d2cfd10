"""Re-embedding a store with another model.

Vectors of two models cannot be compared, so a store is bound to one model. Switching means
computing every chunk's vector again and redefining the HNSW indexes (the shared one and
every notebook's) for the new dimension. While that runs the store is marked, and any open
with either model is refused until a re-embed completes; running it again after an
interruption starts over and converges.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..config import Settings
from ..embed import Embedder, EmbeddingRunner, provenance
from ..errors import SchemaNotInitializedError, StoreError
from ..parts.chunk import embedding_input
from ..store.connection import connect, resolve_url, store_missing
from ..store.schema import (
    SCHEMA_VERSION,
    layout_of,
    mark_reembedding,
    read_schema,
    store_model_statement,
    vectors_apart,
)
from ..store.storage import Storage

PAGE = 500


async def reembed(settings: Settings, embedder: Embedder,
                  on_progress: Callable[[int, int], None] | None = None) -> int:
    """Re-embed every chunk of the store described by ``settings`` with ``embedder``.

    Returns the number of chunks embedded.
    """
    missing = store_missing(resolve_url(settings.db))
    if missing is not None:
        raise SchemaNotInitializedError(f"there is no store at {missing}: nothing to re-embed")
    store = await connect(settings)
    try:
        schema = await read_schema(store)
        if not schema or int(schema.get("version", 0)) != SCHEMA_VERSION:
            raise StoreError(
                f"{store.url} is not a surrealdocs store of schema version {SCHEMA_VERSION}; "
                "open it once with its own model first")
        if not layout_of(schema)[0]:
            raise StoreError(f"the tables at {store.url} hold whole documents only: "
                             "there are no chunks to embed")
        storage = Storage.of(store, settings.replace(embed=True), embedder.dimension,
                             vectors_apart=await vectors_apart(store))
        runner = EmbeddingRunner(embedder, settings.embed_batch_size * 2)
        chunks = storage.chunks
        total = await chunks.count()
        await mark_reembedding(store, embedder.name)
        await chunks.graphs.drop_vector_indexes()
        done = 0
        last: Any = None
        while rows := await chunks.page_after(last, PAGE):
            vectors = await runner.documents([embedding_input(r["content"], r.get("context"))
                                              for r in rows])
            await chunks.set_vectors(rows, vectors)
            done += len(rows)
            last = rows[-1]["id"]
            if on_progress:
                on_progress(done, total)
        if chunks.text is not None:  # its segments carry the vectors: new ones now
            await chunks.text.rebuild()
        await chunks.graphs.define_vector_index(
            storage.documents.model_of_documents_statement(embedder.name))
        for notebook in await storage.notebooks.select():
            await chunks.graphs.recopy_notebook(notebook["id"])
            await chunks.graphs.rebuild_notebook_if_due(notebook["id"], force=True)
        # the store is bound to the new model only once everything above is done
        await store.run(store_model_statement(store, settings, embedder.name,
                                                  embedder.dimension, provenance(embedder)))
        return done
    finally:
        await store.close()
