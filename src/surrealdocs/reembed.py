"""Re-embedding a store with another model.

Vectors of two models cannot be compared, so a store is bound to one model. Switching means
computing every chunk's vector again and redefining the HNSW index for the new dimension.
While that runs the store is marked, and any open with either model is refused until a
re-embed completes; running it again after an interruption starts over and converges.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .config import Settings
from .embed import Embedder, provenance
from .errors import StoreError
from .store.connection import Store, connect
from .store.schema import SCHEMA_VERSION, hnsw_index_sql, layout_of

PAGE = 500


async def reembed(settings: Settings, embedder: Embedder,
                  on_progress: Callable[[int, int], None] | None = None) -> int:
    """Re-embed every chunk of the store described by ``settings`` with ``embedder``.

    Returns the number of chunks embedded.
    """
    store = await connect(settings)
    try:
        return await _reembed(store, settings, embedder, on_progress)
    finally:
        await store.close()


async def _reembed(store: Store, settings: Settings, embedder: Embedder,
                   on_progress: Callable[[int, int], None] | None) -> int:
    names = store.names
    (schema,) = await store.query("SELECT * FROM ONLY $k;", {"k": names.schema_key})
    if not schema or int(schema.get("version", 0)) != SCHEMA_VERSION:
        raise StoreError(
            f"{store.url} is not a surrealdocs store of schema version {SCHEMA_VERSION}; "
            "open it once with its own model first")
    if not layout_of(schema)[0]:
        raise StoreError(f"the tables at {store.url} hold whole documents only: "
                         "there are no chunks to embed")
    (total,) = await store.query(f"SELECT count() AS n FROM {names.chunks} GROUP ALL;")
    n_total = int(total[0]["n"]) if total else 0
    await store.query(
        f"UPSERT $e MERGE {{ reembedding: $model }}; REMOVE INDEX IF EXISTS {names.hnsw_index} ON"
        f" {names.chunks};", {"e": names.embedding_key, "model": embedder.name})
    done = 0
    last = None
    while True:
        (rows,) = await store.query(
            f"SELECT id, content FROM {names.chunks}"
            + (" WHERE id > $last" if last is not None else "")
            + f" ORDER BY id LIMIT {PAGE};", {"last": last})
        if not rows:
            break
        vectors = await asyncio.to_thread(embedder.embed_documents,
                                          [r["content"] for r in rows])
        updates = [{"id": r["id"], "v": [float(x) for x in v]} for r, v in zip(rows, vectors)]
        for start in range(0, len(updates), settings.insert_batch_size):
            await store.query(
                "FOR $u IN $batch { UPDATE $u.id SET embedding = $u.v RETURN NONE; };",
                {"batch": updates[start:start + settings.insert_batch_size]})
        done += len(rows)
        last = rows[-1]["id"]
        if on_progress:
            on_progress(done, n_total)
    await store.build_index(
        hnsw_index_sql(names, settings, embedder.dimension)
        + f" UPDATE {names.documents} SET embedding_model = $model RETURN NONE;"
        " UPSERT $e CONTENT { model: $model, dimension: $dim, distance: $dist,"
        "   provenance: $provenance, created_at: time::now() };"
        " UPSERT $s SET pending_vectors = 0, rebuilt_at = time::now();"
        " UPSERT $schema MERGE { vectors: true };",  # a store made with embed=False has them now
        {"e": names.embedding_key, "model": embedder.name, "dim": embedder.dimension,
         "dist": settings.hnsw_distance, "provenance": provenance(embedder) or None,
         "s": names.index_state_key,
         "schema": names.schema_key},
    )
    return done
