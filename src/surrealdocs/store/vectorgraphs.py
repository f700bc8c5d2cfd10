"""The vectors' HNSW graphs: the shared index over every chunk's vector, the notebooks'
vector tables (``<chunks>_nbv_<notebook>``, a copy of one notebook's vectors with an index of
its own, so that a scoped search walks that notebook's graph only), and the pending counters
that decide when a graph is built again (``rebuild_threshold`` new vectors, and
``rebuild_fraction`` of the graph). Part of the chunks' owner (:mod:`.chunks`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from surrealdb import RecordID

from ..config import Settings
from ..errors import StoreError
from .connection import Statement, Store
from .names import Names

# The vector tables' field is an array, each value checked by the HNSW index over it (which
# refuses anything but a vector of its dimension): `array<float>` made the engine coerce
# every element, which more than doubled the cost of writing a 384-dimensional vector
# (0.68 ms against 0.29 ms on surrealkv; BENCHMARKS.md, "Take it with you").
VECTOR_TYPE = "array"
REMOTE_BUILD_POLL_SECONDS = 0.5
READY_CHECK_SECONDS = 5.0


def hnsw_index_sql(names: Names, settings: Settings, dimension: int,
                   table: str | None = None) -> str:
    return (f"DEFINE INDEX IF NOT EXISTS {names.hnsw_index} ON {table or names.chunks}"
            f" FIELDS embedding HNSW DIMENSION {int(dimension)} DIST {settings.hnsw_distance}"
            f" TYPE F32 EFC {int(settings.hnsw_efc)} M {int(settings.hnsw_m)};")


def vector_table_sql(names: Names) -> str:
    """The table of the chunks' vectors (without its HNSW index, defined apart)."""
    V = names.vectors
    return (f"DEFINE TABLE IF NOT EXISTS {V} SCHEMAFULL;"
            f" DEFINE FIELD IF NOT EXISTS chunk ON {V} TYPE record<{names.chunks}>"
            "   REFERENCE ON DELETE CASCADE;"
            f" DEFINE FIELD IF NOT EXISTS document ON {V} TYPE record<{names.documents}>;"
            f" DEFINE FIELD IF NOT EXISTS embedding ON {V} TYPE {VECTOR_TYPE};"
            f" DEFINE INDEX IF NOT EXISTS {V}_document ON {V} FIELDS document;")


class VectorGraphs:
    """The HNSW graphs of one store's chunk vectors and notebook vector tables."""

    def __init__(self, store: Store, settings: Settings, dimension: int, table: str,
                 vector_table: str, apart: bool, count: Callable[..., Awaitable[int]]) -> None:
        self.store = store
        self.settings = settings
        self.dimension = dimension
        self.names = store.names
        self.table = table
        self.vector_table = vector_table
        self.apart = apart
        self._count = count  # rows of the chunks table, or of a vector table
        self._building: set[str] = set()  # indexes this process is building now
        self._ready_until: dict[str, float] = {}  # indexes seen ready, until when to trust it

    # ----- notebooks ------------------------------------------------------------------
    def notebook_table(self, notebook: RecordID) -> str:
        return self.names.notebook_vectors(notebook)

    async def define_notebook_table(self, notebook: RecordID) -> None:
        """Create a notebook's vector table and its HNSW index (idempotent)."""
        if not self.settings.vectors:
            return
        t, s = self.notebook_table(notebook), self.settings
        await self.store.query(
            f"DEFINE TABLE IF NOT EXISTS {t} SCHEMAFULL;"
            f" DEFINE FIELD IF NOT EXISTS chunk ON {t} TYPE record<{self.table}>"
            "   REFERENCE ON DELETE CASCADE;"
            f" DEFINE FIELD IF NOT EXISTS document ON {t} TYPE record<{self.names.documents}>;"
            f" DEFINE FIELD IF NOT EXISTS embedding ON {t} TYPE {VECTOR_TYPE};"
            f" DEFINE INDEX IF NOT EXISTS {t}_document ON {t} FIELDS document;"
            f" DEFINE INDEX IF NOT EXISTS {t}_hnsw ON {t} FIELDS embedding HNSW"
            f" DIMENSION {int(self.dimension)} DIST {s.hnsw_distance}"
            f" TYPE F32 EFC {int(s.hnsw_efc)} M {int(s.hnsw_m)};")

    def drop_notebook_table_statement(self, notebook: RecordID) -> Statement:
        t = self.notebook_table(notebook)
        return Statement(f"REMOVE TABLE IF EXISTS {t};"
                         " DELETE $pending_key;", {"pending_key": self.pending_key(t)})

    # ----- HNSW graphs ----------------------------------------------------------------
    def pending_key(self, table: str | None = None) -> RecordID:
        return self.names.index_state_key if table is None else \
            self.names.index_state_key_of(table)

    def pending_statement(self, count: int, table: str | None = None) -> Statement:
        """Count ``count`` new vectors as waiting outside an index's graph."""
        if not self.settings.vectors or count <= 0:
            return Statement("")
        return Statement("UPSERT $index_state SET pending_vectors ="
                         " (pending_vectors OR 0) + $pending_n RETURN NONE;",
                         {"index_state": self.pending_key(table), "pending_n": int(count)})

    def all_pending_statement(self) -> Statement:
        """Count every stored vector as waiting outside the shared graph (a store filled
        without one: an import)."""
        if not self.settings.vectors:
            return Statement("")
        return Statement(f"UPSERT $index_state SET pending_vectors = (SELECT VALUE count()"
                         f" FROM {self.vector_table} GROUP ALL)[0] OR 0 RETURN NONE;",
                         {"index_state": self.pending_key()})

    async def pending(self, table: str | None = None) -> int:
        """Vectors written since the index's graph was last built."""
        (state,) = await self.store.query("SELECT * FROM ONLY $k;",
                                          {"k": self.pending_key(table)})
        return int((state or {}).get("pending_vectors") or 0)

    async def rebuild_if_due(self, *, force: bool = False,
                             on_build: Callable[[], None] | None = None) -> bool:
        """Build the shared HNSW graph when enough vectors wait in the engine's exact-scan
        queue (or with ``force``); ``on_build`` is told when a build begins. Returns whether
        it was built."""
        if not self.settings.vectors:
            return False
        return await self._rebuild(self.names.hnsw_index, self.vector_table, None, force,
                                   on_build)

    async def rebuild_notebook_if_due(self, notebook: RecordID, *, force: bool = False) -> bool:
        """The same for one notebook's vector table."""
        if not self.settings.vectors:
            return False
        t = self.notebook_table(notebook)
        return await self._rebuild(f"{t}_hnsw", t, t, force)

    async def _due(self, table: str, pending: int) -> bool:
        """Whether ``pending`` vectors waiting outside ``table``'s graph call for a build:
        at least ``rebuild_threshold`` of them, and at least ``rebuild_fraction`` of the
        vectors in the graph (a build costs time in proportion to the whole table)."""
        if pending < self.settings.rebuild_threshold:
            return False
        if self.settings.rebuild_fraction <= 0:
            return True
        in_graph = await self._count(table) - pending
        return pending >= self.settings.rebuild_fraction * in_graph

    async def _rebuild(self, index: str, table: str, pending_of: str | None,
                       force: bool, on_build: Callable[[], None] | None = None) -> bool:
        if not force and not await self._due(table, await self.pending(pending_of)):
            return False
        async with self.store.write_lock:
            seen = await self.pending(pending_of)  # again: another task may have built it
            if not force and not await self._due(table, seen):
                return False
            # vectors counted while the graph was built stay counted
            counted = Statement(
                "UPSERT $k SET pending_vectors = math::max([(pending_vectors OR 0) - $seen,"
                " 0]), rebuilt_at = time::now() RETURN NONE;",
                {"k": self.pending_key(pending_of), "seen": seen})
            if on_build is not None:
                on_build()
            self._building.add(index)
            try:
                if self.store.embedded:
                    await self.store.build_index(
                        Statement(f"REBUILD INDEX {index} ON {table};"), counted)
                    return True
                # A server builds a large graph for longer than the SDK waits for any reply
                # (30 s): build it in the background and wait for it here. Searches
                # meanwhile scan exactly (see vector_rows).
                try:
                    await self.store.query(f"REBUILD INDEX {index} ON {table} CONCURRENTLY;")
                except StoreError as exc:
                    if "currently building" not in str(exc):
                        raise
                    await self._wait_built(index, table)  # another process is building it
                    return False
                await self._wait_built(index, table)
                await self.store.run(counted)
                return True
            finally:
                self._building.discard(index)

    async def vector_index_ready(self, index: str, table: str) -> bool:
        """False while the engine builds the index: its k-NN operator then returns every row.

        A store this process opened on an embedded engine builds only when this process
        does, so that is all there is to know; elsewhere (a server, a lent connection) the
        engine is asked, at most every few seconds per index.
        """
        if index in self._building:
            return False
        if self.store.owned and self.store.embedded:
            return True
        now = asyncio.get_running_loop().time()
        known = self._ready_until.get(index)
        if known is not None and known > now:
            return True
        (info,) = await self.store.query(f"INFO FOR INDEX {index} ON {table};")
        building = (info or {}).get("building") or {}
        ready = str(building.get("status", "ready")) == "ready"
        if ready:
            self._ready_until[index] = now + READY_CHECK_SECONDS
        else:
            self._ready_until.pop(index, None)
        return ready

    # ----- re-embedding with another model --------------------------------------------
    async def drop_vector_indexes(self) -> None:
        """Remove the shared HNSW index and every notebook's vector table (they hold the
        old model's vectors; :meth:`recopy_notebook` makes them again)."""
        tables = await self.notebook_tables()
        await self.store.query(
            f"REMOVE INDEX IF EXISTS {self.names.hnsw_index} ON {self.vector_table};"
            + "".join(f" REMOVE TABLE IF EXISTS {t};" for t in tables))

    async def notebook_tables(self) -> list[str]:
        (info,) = await self.store.query("INFO FOR DB;")
        prefix = f"{self.table}_nbv_"
        return sorted(t for t in ((info or {}).get("tables") or {}) if t.startswith(prefix))

    async def ensure_vector_index(self) -> None:
        """Define the shared HNSW index if it is missing (a new store, or one whose vectors
        just moved to their own table)."""
        if not self.settings.vectors:
            return
        (info,) = await self.store.query(f"INFO FOR TABLE {self.vector_table};")
        if self.names.hnsw_index not in ((info or {}).get("indexes") or {}):
            await self.define_vector_index()

    async def define_vector_index(self, *also: Statement) -> None:
        """Define the shared HNSW index for this storage's dimension and build its graph
        from the stored vectors (nothing waits outside it then); ``also`` runs with it."""
        counted = Statement("UPSERT $index_state SET pending_vectors = 0,"
                            " rebuilt_at = time::now();",
                            {"index_state": self.pending_key()})
        define = hnsw_index_sql(self.names, self.settings, self.dimension, self.vector_table)
        if self.apart:
            define = vector_table_sql(self.names) + " " + define
        index = self.names.hnsw_index
        self._building.add(index)
        try:
            if self.store.embedded:
                await self.store.build_index(Statement(define), counted, *also)
                return
            # on a server, in the background (see _rebuild)
            await self.store.query(define.rstrip(";") + " CONCURRENTLY;")
            await self._wait_built(index, self.vector_table)
            await self.store.run(counted, *also)
        finally:
            self._building.discard(index)

    async def _wait_built(self, index: str, table: str) -> None:
        while True:
            (info,) = await self.store.query(f"INFO FOR INDEX {index} ON {table};")
            if str(((info or {}).get("building") or {}).get("status", "ready")) == "ready":
                return
            await asyncio.sleep(REMOTE_BUILD_POLL_SECONDS)

    async def recopy_notebook(self, notebook: RecordID) -> None:
        """Fill a (re)defined notebook table from its notebook's current chunks."""
        await self.define_notebook_table(notebook)
        t = self.notebook_table(notebook)
        if self.apart:
            source = (f"SELECT type::record('{t}', record::id(id)) AS id, chunk, document,"
                      f" embedding FROM {self.vector_table} WHERE chunk.notebooks CONTAINS $nb"
                      " AND chunk.generation = document.generation")
        else:
            source = (f"SELECT type::record('{t}', record::id(id)) AS id, id AS chunk,"
                      f" document, embedding FROM {self.table} WHERE notebooks CONTAINS $nb"
                      " AND embedding != NONE AND generation = document.generation")
        await self.store.query(
            f"INSERT INTO {t} ({source}) RETURN NONE;"
            f" UPSERT $k SET pending_vectors = (SELECT VALUE count() FROM {t}"
            " GROUP ALL)[0] OR 0 RETURN NONE;",
            {"nb": notebook, "k": self.pending_key(t)})

    def copy_statements(self, doc: RecordID, notebook: RecordID, generation: str | None,
                         params: dict[str, Any] | None = None, *,
                         ids: Sequence[RecordID] | None = None) -> list[Statement]:
        """Copy a document's vectors (of the chunks of ``generation``, a SurrealQL
        expression, when given; or those of the chunks ``ids``) into a notebook's table
        (ids mirror the chunks') and count them as pending in that table's index."""
        if not self.settings.vectors:
            return []
        t = self.notebook_table(notebook)
        if ids is not None:
            if self.apart:  # the vector rows of these chunks (ids mirror the chunks')
                rows, fields = "$inherit_vids", "chunk, document, embedding"
                params = {"inherit_vids": [self._vector_id(i) for i in ids]}
                where = ""
            else:
                rows, fields = "$inherit_ids", "id AS chunk, document, embedding"
                params = {"inherit_ids": list(ids)}
                where = " WHERE embedding != NONE"
            return [Statement(
                f"INSERT INTO {t} (SELECT type::record('{t}', record::id(id)) AS id, {fields}"
                f" FROM {rows}{where}) RETURN NONE; UPSERT ${t}_pending SET pending_vectors ="
                f" (pending_vectors OR 0) + array::len((SELECT VALUE id FROM {rows}{where}))"
                " RETURN NONE;", {**params, f"{t}_pending": self.pending_key(t)},
                rows=len(ids))]
        if self.apart:
            source = (f"SELECT type::record('{t}', record::id(id)) AS id, chunk, document,"
                      f" embedding FROM {self.vector_table} WHERE document = $doc"
                      + (f" AND chunk.generation = {generation}" if generation else ""))
        else:
            source = (f"SELECT type::record('{t}', record::id(id)) AS id, id AS chunk,"
                      f" document, embedding FROM {self.table}"
                      " WHERE document = $doc AND embedding != NONE"
                      + (f" AND generation = {generation}" if generation else ""))
        return [Statement(
            f"INSERT INTO {t} ({source}) RETURN NONE;"
            f" UPSERT ${t}_pending SET pending_vectors = (pending_vectors OR 0)"
            f" + ((SELECT VALUE count() FROM {t} WHERE document = $doc GROUP ALL)[0] OR 0)"
            " RETURN NONE;",
            {"doc": doc, f"{t}_pending": self.pending_key(t), **(params or {})})]

    def _vector_id(self, chunk: Any) -> RecordID:
        """The id of a chunk's vector row (it mirrors the chunk's)."""
        return RecordID(self.vector_table, chunk.id)
