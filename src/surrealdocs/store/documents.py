"""The ``documents`` and ``files`` tables: every statement that reads or writes them.

A document's id is the SHA-256 of its extracted text, so identical text from several
sources is stored once; ``sources`` lists them and ``source`` is the primary one (UNIQUE).
A ``files`` row per source remembers the raw bytes' hash, size, modification time and the
outcome of its last ingest, so an unchanged source is skipped before extraction (a sync skips
it without reading it) and a failure is not retried blindly; a sync re-points a renamed
source's row (:meth:`DocumentStorage.rename_source`).

A new document is written in steps (see :mod:`surrealdocs.core.ingest`): created with
``complete = false``, filled with chunks, then completed in one small transaction that also
points its source at it. Searches never show incomplete documents, and :meth:`recover`
deletes the ones a crash left behind.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from surrealdb import RecordID

from ..errors import StoreError
from ..parts.filters import DocumentSet, Filters, glob_to_regex
from ..parts.metadata import MAX_FILTER_CHARS, AllOf, AnyOf, MetaFilter, kind, matches
from .conditions import filter_conditions
from .connection import STALE_MARK, Statement, Store
from .names import Names

# Detaching a source from the document it pointed at ($old): drop it from the document's
# sources (and from its primary `source`), and delete the document (its chunks cascade) once
# no source is left. Expects $old, $path and, when re-pointing, the new document in $doc.
_DETACH_OLD = """
IF $old != NONE AND $old != $doc {
    UPDATE $old SET sources = array::complement(sources, [$path]) RETURN NONE;
    UPDATE $old SET source = sources[0] WHERE source = $path AND array::len(sources) > 0
        RETURN NONE;
    IF array::len((SELECT VALUE sources FROM ONLY $old) OR []) = 0 { DELETE $old; };
};
"""


_FILE_FIELDS = "path, file_hash, size, mtime_ns, status, error, mime_type, document"

_SUMMARY_FIELDS = (
    "id, source, sources, title, mime_type, chunk_count, page_count, ingested_at, updated_at,"
    " notebooks, topics, authors, detected_languages, string::len(content) AS characters,"
    " complete, embedding_model"
)


# A facet row per filterable value of a document's metadata (parts.metadata.filterable_values:
# scalars and lists' scalars, strings of at most MAX_FILTER_CHARS), numbers as floats so that
# 1 and 1.0 are one index key. The engine keeps them in step with every write of the
# metadata, whichever path writes it (ingest, import, merge, the facade, `meta`), in the
# transaction of that write; a document's rows go with it (the reference cascades).
def facets_sql(names: Names) -> str:
    F, D = names.facets, names.documents
    return f"""
DEFINE FIELD IF NOT EXISTS user_metadata ON {D} TYPE option<object> FLEXIBLE;
DEFINE FIELD IF NOT EXISTS etag ON {names.files} TYPE option<string>;
DEFINE FIELD IF NOT EXISTS last_modified ON {names.files} TYPE option<string>;
DEFINE FIELD IF NOT EXISTS fetched_at ON {names.files} TYPE option<datetime>;
DEFINE TABLE IF NOT EXISTS {F} SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS document ON {F} TYPE record<{D}> REFERENCE ON DELETE CASCADE;
DEFINE FIELD IF NOT EXISTS key ON {F} TYPE string;
DEFINE FIELD IF NOT EXISTS value ON {F} TYPE bool | number | string | datetime;
DEFINE INDEX IF NOT EXISTS {F}_key_value ON {F} FIELDS key, value;
DEFINE INDEX IF NOT EXISTS {F}_document ON {F} FIELDS document;
DEFINE EVENT OVERWRITE {F}_of_metadata ON {D}
    WHEN $event != "DELETE" AND $before.metadata != $after.metadata THEN {{
        IF $event = "UPDATE" {{ DELETE {F} WHERE document = $after.id; }};
        INSERT INTO {F} {_facet_rows("$after")} RETURN NONE;
    }};
INSERT INTO {F} array::flatten(
    SELECT VALUE {_facet_rows("$this")} FROM {D} WHERE metadata != NONE) RETURN NONE;
"""


def _facet_rows(doc: str) -> str:
    return f"""array::flatten(object::entries({doc}.metadata ?? {{}}).map(|$e|
            (IF type::is_array($e[1]) {{ $e[1] }} ELSE {{ [$e[1]] }}).filter(|$v|
                (type::is_string($v) AND string::len($v) <= {MAX_FILTER_CHARS})
                OR type::is_number($v) OR type::is_bool($v) OR type::is_datetime($v)
            ).map(|$v| {{ document: {doc}.id, key: $e[0],
                          value: IF type::is_number($v) {{ <float>$v }} ELSE {{ $v }} }})))"""


_KIND_CHECK = {"bool": "type::is_bool(value)", "number": "type::is_number(value)",
               "string": "type::is_string(value)", "time": "type::is_datetime(value)"}
_COMPARE = {"eq": "=", "lt": "<", "lte": "<=", "gt": ">", "gte": ">="}


class DocumentExistsError(Exception):
    """Another writer created the document first (an internal signal of a lost race)."""


@dataclass(frozen=True)
class DocumentState:
    complete: bool
    idle_seconds: int  # since the document was last written (a writer touches it)


class DocumentStorage:
    """Documents (text, metadata, sources, notebooks, topics) and their source files."""

    def __init__(self, store: Store, *, facets: bool = True) -> None:
        self.store = store
        self.table = store.names.documents
        self.files = store.names.files
        self.facets = facets  # the facets table is kept (not in the facade's layout)

    def document_id(self, key: Any) -> RecordID:
        """A document's record id from its key (the text's SHA-256) or any spelling of its
        id (``documents:abc``, ``documents:⟨abc⟩``, a RecordID)."""
        return record_id(key, self.table)

    def file_id(self, source: str) -> RecordID:
        return RecordID(self.files, source)

    # ----- reading --------------------------------------------------------------------
    async def exists(self, doc: RecordID) -> bool:
        (row,) = await self.store.query("SELECT VALUE id FROM ONLY $doc;", {"doc": doc})
        return row is not None

    async def state(self, doc: RecordID) -> DocumentState | None:
        """Whether the document exists, is complete, and how long ago it was last written."""
        (row,) = await self.store.query(
            "SELECT complete, time::unix(time::now()) - time::unix(updated_at) AS idle"
            " FROM ONLY $doc;", {"doc": doc})
        if not isinstance(row, dict):
            return None
        return DocumentState(bool(row.get("complete")), int(row.get("idle") or 0))

    async def get(self, doc: RecordID) -> dict[str, Any] | None:
        (row,) = await self.store.query("SELECT * FROM ONLY $doc;", {"doc": doc})
        return row if isinstance(row, dict) else None

    async def notebooks_of(self, doc: RecordID) -> list[Any]:
        """The notebooks a document is in (its own list, in step with the edges)."""
        (row,) = await self.store.query("SELECT VALUE notebooks FROM ONLY $doc;", {"doc": doc})
        return list(row) if isinstance(row, list) else []

    async def text_of(self, doc: RecordID) -> dict[str, Any] | None:
        """What re-chunking needs: content, generation, notebooks, page starts, headings
        (``(level, text)`` pairs)."""
        (row,) = await self.store.query(
            "SELECT id, content, generation, notebooks, page_starts, headings"
            " FROM ONLY $doc;",
            {"doc": doc})
        if not isinstance(row, dict):
            return None
        row["headings"] = [(int(level), str(text)) for level, text in row.get("headings") or []]
        return row

    async def sole_source_document(self, source: str) -> tuple[RecordID, int] | None:
        """The complete document ``source`` points at, with its chunk generation, when
        ``source`` is its only source (so a new version of the source replaces it)."""
        (row,) = await self.store.query(
            "SELECT VALUE document.{ id, sources, complete, generation } FROM ONLY $file;",
            {"file": self.file_id(source)})
        if not isinstance(row, dict) or not isinstance(row.get("id"), RecordID) \
                or row.get("complete") is not True or row.get("sources") != [source]:
            return None
        return row["id"], int(row.get("generation") or 0)

    def sole_source_check_statement(self, source: str, doc: RecordID) -> Statement:
        """Refuse (THROW) unless ``source`` still points at ``doc`` and is its only source:
        the condition under which chunks may be moved out of ``doc``."""
        return Statement(
            "IF (SELECT VALUE document FROM ONLY $sole_file) != $sole_doc"
            " OR (SELECT VALUE sources FROM ONLY $sole_doc) != [$sole_path]"
            f" {{ THROW '{STALE_MARK}' }};",
            {"sole_file": self.file_id(source), "sole_doc": doc, "sole_path": source})

    async def has_source(self, source: str) -> bool:
        (found,) = await self.store.query("SELECT VALUE id FROM ONLY $file;",
                                          {"file": self.file_id(source)})
        return found is not None

    async def membership_of_source(self, source: str) -> tuple[list[Any], list[str]]:
        """Notebooks and topics of the document ``source`` points at now."""
        (row,) = await self.store.query(
            "SELECT VALUE document.{ notebooks, topics } FROM ONLY $file;",
            {"file": self.file_id(source)})
        row = row if isinstance(row, dict) else {}
        return list(row.get("notebooks") or []), list(row.get("topics") or [])

    async def select(self, *, filters: Filters | None = None, offset: int = 0,
                     limit: int | None = None, text: bool = True) -> list[dict[str, Any]]:
        """Complete documents that pass ``filters`` (a notebook, a source glob, MIME types,
        topics, when ingested), oldest first; without ``text``, everything but the content
        and metadata."""
        where, params = await self._where(filters)
        page = f" LIMIT {int(limit)} START {int(offset)}" if limit is not None else ""
        fields = "*" if text else _SUMMARY_FIELDS
        (rows,) = await self.store.query(
            f"SELECT {fields} FROM {self.table} WHERE {where} ORDER BY ingested_at, id{page};",
            params)
        return list(rows or [])

    async def count(self, *, filters: Filters | None = None) -> int:
        where, params = await self._where(filters)
        (rows,) = await self.store.query(
            f"SELECT count() AS n FROM {self.table} WHERE {where} GROUP ALL;", params)
        return int(rows[0]["n"]) if rows else 0

    async def _where(self, filters: Filters | None) -> tuple[str, dict[str, Any]]:
        filters = await self.resolved(filters or Filters())
        clauses, params = filter_conditions(filters, document="")
        return " AND ".join(["complete = true", *clauses]), params

    # ----- metadata filters -------------------------------------------------------------
    async def resolved(self, filters: Filters) -> Filters:
        """``filters`` with its metadata filter (``where``) answered: the documents that
        pass it, found by the facets' index (no document is read)."""
        if filters.where is None or filters.documents is not None:
            return filters
        return filters.resolved(await self.matching(filters.where))

    async def matching(self, where: MetaFilter) -> DocumentSet:
        """The documents whose metadata passes ``where`` (:func:`parts.metadata.matches`),
        as keys: those in, or (for negations) those out."""
        if not self.facets:  # read every document's metadata and judge it here
            (rows,) = await self.store.query(
                f"SELECT VALUE [record::id(id), metadata] FROM {self.table};", read_only=True)
            return DocumentSet(frozenset(key for key, metadata in rows or []
                                         if matches(metadata, where)), table=self.table)
        leaves: dict[tuple[str, str, Any], int] = {}
        statements: list[str] = []
        params: dict[str, Any] = {}

        def lookup(key: str, op: str, value: Any) -> int:
            """The statement finding the documents with a value of ``key`` that is ``op``
            ``value`` (``exists``: any value), added once."""
            ident = (key, op, (kind(value), value) if op != "exists" else None)
            found = leaves.get(ident)  # type: ignore[arg-type]
            if found is not None:
                return found
            n = len(statements)
            params[f"k{n}"] = key
            condition = "key = $k" + str(n)
            if op != "exists":
                params[f"v{n}"] = float(value) if kind(value) == "number" else value
                condition += f" AND value {_COMPARE[op]} $v{n} AND {_KIND_CHECK[kind(value)]}"
            statements.append(f"SELECT VALUE record::id(document) FROM {self.store.names.facets}"
                              f" WHERE {condition};")
            leaves[ident] = n  # type: ignore[index]
            return n

        def plan(node: MetaFilter) -> Any:
            if isinstance(node, (AllOf, AnyOf)):
                return (type(node), [plan(i) for i in node.items])
            if node.op in ("eq", "ne"):
                return (node.op == "ne", [lookup(node.key, "eq", node.value)])
            if node.op in ("in", "nin"):
                return (node.op == "nin", [lookup(node.key, "eq", v) for v in node.value])
            if node.op == "exists":
                return (not node.value, [lookup(node.key, "exists", True)])
            return (False, [lookup(node.key, node.op, node.value)])

        planned = plan(where)
        results = await self.store.query("\n".join(statements), params, read_only=True)
        found = [frozenset(r or ()) for r in results]

        def answer(step: Any) -> DocumentSet:
            head, parts = step
            if head is AllOf:
                return DocumentSet.all_of([answer(p) for p in parts])
            if head is AnyOf:
                return DocumentSet.any_of([answer(p) for p in parts])
            keys = frozenset().union(*(found[i] for i in parts))
            return DocumentSet(keys, exclude=head, table=self.table)

        return answer(planned)

    async def of_source(self, source: str) -> RecordID | None:
        """The document a source points at now."""
        (doc,) = await self.store.query("SELECT VALUE document FROM ONLY $file;",
                                        {"file": self.file_id(source)})
        return doc if isinstance(doc, RecordID) else None

    async def not_in_notebook(self, docs: Sequence[RecordID],
                              notebook: RecordID) -> list[RecordID]:
        """Those of ``docs`` that are complete and not in ``notebook``."""
        (ids,) = await self.store.query(
            "SELECT VALUE id FROM $docs WHERE complete = true AND notebooks CONTAINSNOT $nb;",
            {"docs": list(docs), "nb": notebook})
        return list(ids or [])

    async def exclusive_to(self, notebook: RecordID) -> list[RecordID]:
        """Documents in ``notebook`` and in no other notebook."""
        (ids,) = await self.store.query(
            f"SELECT VALUE id FROM {self.table} WHERE notebooks CONTAINS $nb"
            " AND array::len(notebooks) = 1;", {"nb": notebook})
        return list(ids or [])

    async def counts(self) -> tuple[int, dict[str, int], dict[str, int]]:
        """(documents, documents per MIME type, sources per outcome)."""
        docs, mimes, files = await self.store.query(
            f"SELECT count() AS n FROM {self.table} GROUP ALL;"
            f" SELECT mime_type, count() AS n FROM {self.table} GROUP BY mime_type;"
            f" SELECT status, count() AS n FROM {self.files} GROUP BY status;")
        return (int(docs[0]["n"]) if docs else 0,
                {r["mime_type"]: int(r["n"]) for r in mimes or []},
                {r["status"]: int(r["n"]) for r in files or []})

    async def text_rows(self, terms: str, limit: int, filters: Filters) -> list[dict[str, Any]]:
        """BM25 over whole documents (documents-only stores): each row is a document shaped
        like a chunk row (offsets 0 to the end of the text)."""
        clauses, params = filter_conditions(filters, document="")
        where = " AND ".join([*clauses, "content @1,OR@ $q"])
        (rows,) = await self.store.query(
            "SELECT id, id AS document, content, 0 AS chunk_index, 0 AS char_start,"
            " string::len(content) AS char_end, source, title, mime_type, complete,"
            f" search::score(1) AS score FROM {self.table}"
            f" WHERE {where} ORDER BY score DESC, id LIMIT {int(limit)};",
            {**params, "q": terms},
        )
        return list(rows or [])

    # ----- writing a document from a source ---------------------------------------------
    async def create_incomplete(self, doc: RecordID, fields: dict[str, Any]) -> None:
        """Create a document marked incomplete (invisible to search). It has no ``source``
        yet: that is UNIQUE, and the source may still point at its previous document until
        :meth:`complete_statement` detaches it in the same transaction. Raises
        :class:`DocumentExistsError` when another writer created it first."""
        try:
            await self.store.query(
                "CREATE $doc CONTENT $document RETURN NONE;",
                {"doc": doc, "document": {**{k: v for k, v in fields.items() if v is not None},
                                          "complete": False}})
        except StoreError as exc:
            if "already exists" in str(exc):
                raise DocumentExistsError(str(doc)) from exc
            raise

    async def write_whole(self, doc: RecordID, fields: dict[str, Any],
                          then: Sequence[Statement]) -> None:
        """Create a document and run ``then`` (its chunks, its completion) in one
        transaction: for small documents, which need no incomplete state. Raises
        :class:`DocumentExistsError` when another writer created it first."""
        create = Statement(
            "CREATE $doc CONTENT $document RETURN NONE;",
            {"doc": doc, "document": {**{k: v for k, v in fields.items() if v is not None},
                                      "complete": False}})
        try:
            await self.store.transaction(create, *then)
        except StoreError as exc:
            if "already exists" in str(exc) and str(doc.id) in str(exc):
                raise DocumentExistsError(str(doc)) from exc
            raise

    def touch_statement(self, doc: RecordID) -> Statement:
        """Mark an incomplete document as still being written (its writer's heartbeat)."""
        return Statement("UPDATE $doc SET chunk_count = chunk_count WHERE complete = false"
                         " RETURN NONE;", {"doc": doc})

    async def discard_incomplete(self, doc: RecordID, idle_seconds: int = 0) -> bool:
        """Delete ``doc`` if it is still incomplete and idle for at least ``idle_seconds``
        (its writer failed or died); the sources that pointed at it are extracted again at
        their next ingest. Returns whether it was deleted."""
        result = await self.store.query(
            "LET $gone = (DELETE $doc WHERE complete = false"
            " AND time::unix(time::now()) - time::unix(updated_at) >= $idle RETURN BEFORE);"
            f" IF array::len($gone) > 0 {{ UPDATE {self.files} SET file_hash = ''"
            " WHERE document = $doc RETURN NONE; }; RETURN array::len($gone) > 0;",
            {"doc": doc, "idle": int(idle_seconds)})
        return bool(result[-1])

    def complete_statement(self, source: str, file_hash: str, size: int, mime_type: str,
                           doc: RecordID, mtime_ns: int | None = None) -> Statement:
        """Mark ``doc`` complete and point ``source`` at it, detaching the source from its
        previous document (deleted when no source is left). Refuses (THROW) a document that
        is no longer there or was completed already, so a lost race can never leave a
        source pointing at nothing."""
        return Statement(
            "IF (SELECT VALUE complete FROM ONLY $doc) != false"
            " { THROW 'the document being written is gone or already complete' };"
            " LET $old = (SELECT VALUE document FROM ONLY $file);"
            " UPSERT $file CONTENT { path: $path, file_hash: $hash, size: $size,"
            "   mtime_ns: $mtime, status: 'ingested', document: $doc, mime_type: $mime }"
            " RETURN NONE;"
            + _DETACH_OLD +  # frees the source (UNIQUE) before the new document takes it
            " UPDATE $doc SET complete = true, source = $path RETURN NONE;",
            {"file": self.file_id(source), "doc": doc, "path": source, "hash": file_hash,
             "size": size, "mime": mime_type, "mtime": mtime_ns})

    def inherit_statement(self, doc: RecordID, notebooks: list[Any],
                          topics: list[str]) -> Statement:
        """A new version of a source keeps the old version's notebooks and topics."""
        return Statement("UPDATE $doc SET notebooks = $inherit_nbs, topics = $inherit_topics"
                         " RETURN NONE;",
                         {"doc": doc, "inherit_nbs": notebooks, "inherit_topics": topics})

    async def add_source(self, source: str, file_hash: str, size: int, mime_type: str,
                         doc: RecordID, mtime_ns: int | None = None) -> bool:
        """Point ``source`` at an existing complete document with the same text (a
        duplicate). Returns False, changing nothing, when that document is gone or
        incomplete."""
        result = await self.store.query(
            "BEGIN;"
            " IF (SELECT VALUE complete FROM ONLY $doc) != true { RETURN false; };"
            " LET $old = (SELECT VALUE document FROM ONLY $file);"
            " UPDATE $doc SET sources = array::union(sources, [$path]) RETURN NONE;"
            " UPSERT $file CONTENT { path: $path, file_hash: $hash, size: $size,"
            "   mtime_ns: $mtime, status: 'duplicate', document: $doc, mime_type: $mime }"
            " RETURN NONE;"
            + _DETACH_OLD + " RETURN true; COMMIT;",
            {"file": self.file_id(source), "doc": doc, "path": source, "hash": file_hash,
             "size": size, "mime": mime_type, "mtime": mtime_ns},
        )
        return _returned(result)

    async def record_failure(self, source: str, file_hash: str, size: int, status: str,
                             reason: str, mtime_ns: int | None = None) -> None:
        """Remember that ``source`` (these bytes) gave no document, and why; the document it
        pointed at before loses it."""
        await self.store.query(
            "BEGIN;"
            " LET $old = (SELECT VALUE document FROM ONLY $file);"
            " UPSERT $file CONTENT { path: $path, file_hash: $hash, size: $size,"
            "   mtime_ns: $mtime, status: $status, error: $error, document: NONE };"
            + _DETACH_OLD + " COMMIT;",
            {"file": self.file_id(source), "path": source, "hash": file_hash, "size": size,
             "status": status, "error": reason, "doc": None, "mtime": mtime_ns},
        )

    async def rename_source(self, old: str, new: str, file_hash: str, size: int,
                            mtime_ns: int | None) -> bool:
        """A file moved: its record and its place among its document's sources go from
        ``old`` to ``new``, in one transaction, nothing extracted or embedded. Returns False,
        changing nothing, unless ``old`` still holds these bytes and ``new`` is unknown."""
        result = await self.store.query(
            "BEGIN;"
            " LET $rec = (SELECT * FROM ONLY $from);"
            " IF $rec = NONE OR $rec.file_hash != $hash"
            "   OR (SELECT VALUE id FROM ONLY $to) != NONE { RETURN false; };"
            " CREATE $to CONTENT { path: $new, file_hash: $hash, size: $size, mtime_ns: $mtime,"
            "   status: $rec.status, error: $rec.error, mime_type: $rec.mime_type,"
            "   document: $rec.document } RETURN NONE;"
            " DELETE $from;"
            " IF $rec.document != NONE {"
            "   UPDATE $rec.document SET sources = sources.map(|$s| IF $s = $old { $new }"
            "     ELSE { $s }) RETURN NONE;"
            "   UPDATE $rec.document SET source = $new WHERE source = $old RETURN NONE;"
            " };"
            " RETURN true; COMMIT;",
            {"from": self.file_id(old), "to": self.file_id(new), "old": old, "new": new,
             "hash": file_hash, "size": size, "mtime": mtime_ns})
        return _returned(result)

    async def forget_source(self, source: str) -> bool:
        """Forget a source; its document goes when no other source shares it."""
        if not await self.has_source(source):
            return False
        await self.store.query(
            "BEGIN; LET $old = (SELECT VALUE document FROM ONLY $file); DELETE $file;"
            + _DETACH_OLD + " COMMIT;",
            {"file": self.file_id(source), "path": source, "doc": None},
        )
        return True

    async def delete(self, doc: RecordID) -> None:
        """Delete a document; its chunks and notebook vector copies cascade."""
        await self.store.query("DELETE $doc;", {"doc": doc})

    def delete_statement(self, doc: RecordID) -> Statement:
        """Delete a document and the source records pointing at it."""
        return Statement(f"DELETE {self.files} WHERE document = $doc; DELETE $doc;",
                         {"doc": doc})

    async def recover(self, older_than_seconds: int = 0) -> int:
        """Delete documents left incomplete by a crash (their chunks cascade); how many.

        Only documents idle for ``older_than_seconds`` go: on a shared server another
        writer may be working on a recent one (writers touch their document as they go).
        The sources that pointed at them are extracted again at their next ingest.
        """
        result = await self.store.query(
            f"LET $gone = (DELETE {self.table} WHERE complete = false"
            " AND updated_at < time::now() - type::duration($age) RETURN BEFORE);"
            f" UPDATE {self.files} SET file_hash = '' WHERE document IN $gone.id RETURN NONE;"
            " RETURN array::len($gone);",
            {"age": f"{int(older_than_seconds)}s"},
        )
        return int(result[-1] or 0)

    # ----- documents written as notebook sources ----------------------------------------
    async def create_text(self, doc: RecordID, fields: dict[str, Any]) -> None:
        """Create a complete document from text given directly (a notebook source that is
        chunked later, by a vectorize job)."""
        await self.store.query(
            "CREATE $doc CONTENT $document RETURN NONE;",
            {"doc": doc, "document": {**{k: v for k, v in fields.items() if v is not None},
                                      "complete": True}})

    async def update(self, doc: RecordID, fields: dict[str, Any]) -> None:
        await self.store.query("UPDATE $doc MERGE $data RETURN NONE;",
                               {"doc": doc, "data": fields})

    async def set_metadata(self, doc: RecordID, changes: dict[str, Any],
                           removed: Sequence[str]) -> dict[str, Any] | None:
        """Set keys of a complete document's metadata (and of the user's own) and remove
        others; its metadata after, or ``None`` when there is no such document. The facets
        follow in the same write (the engine's event)."""
        patch = {**changes, **dict.fromkeys(removed)}
        # (the facade's documents keep that library's fields only: no user_metadata)
        own = ", user_metadata: $patch" if self.facets else ""
        (rows,) = await self.store.query(
            f"UPDATE $doc MERGE {{ metadata: $patch{own} }}"
            " WHERE complete = true RETURN VALUE metadata;", {"doc": doc, "patch": patch})
        if not rows:
            return None
        return dict(rows[0] or {})

    async def add_topics(self, doc: RecordID, topics: Sequence[str]) -> None:
        await self.store.query(
            "UPDATE $doc SET topics = array::union(topics, $topics) RETURN NONE;",
            {"doc": doc, "topics": list(topics)})

    def membership_statement(self, doc: RecordID, notebook: RecordID, *, add: bool) -> Statement:
        change = "array::union" if add else "array::complement"
        return Statement(f"UPDATE $doc SET notebooks = {change}(notebooks, [$nb]) RETURN NONE;",
                         {"doc": doc, "nb": notebook})

    def model_of_documents_statement(self, model: str) -> Statement:
        """Every document's vectors are now the model's (after a re-embed)."""
        return Statement(f"UPDATE {self.table} SET embedding_model = $model RETURN NONE;",
                         {"model": model})

    def generation_statement(self, doc: RecordID, generation: int, chunks: int) -> Statement:
        """Switch a document to a new generation of chunks (see ChunkStorage)."""
        return Statement("UPDATE $doc SET generation = $generation, chunk_count = $n_chunks"
                         " RETURN NONE;",
                         {"doc": doc, "generation": generation, "n_chunks": chunks})



class FileRecords:
    """The ``files`` records: what each source (a path or a name) last held (raw hash,
    size, modification time) and what came of it (a document, a duplicate, a failure)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.table = store.names.files

    def id_of(self, source: str) -> RecordID:
        return RecordID(self.table, source)

    async def of(self, sources: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The last ingest of each source (raw hash, size, modification time, status, error,
        MIME type, document, and that document's notebooks and topics), by source."""
        out: dict[str, dict[str, Any]] = {}
        for start in range(0, len(sources), 500):
            ids = [self.id_of(k) for k in sources[start:start + 500]]
            (rows,) = await self.store.query(
                f"SELECT {_FILE_FIELDS}, etag, last_modified,"
                f" document.{{ notebooks, topics, user_metadata }}"
                f" AS document_membership FROM {self.table} WHERE id IN $ids;", {"ids": ids})
            for row in rows or []:
                out[row["path"]] = row
        return out

    async def failed(self, offset: int = 0, limit: int = 50,
                           source: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """A page of the sources whose last ingest failed (path, error, size, MIME type,
        when), by path, optionally those matching a source glob; and how many there are."""
        where = "status = 'failed'" + (" AND string::matches(path, $pattern)" if source else "")
        params = {"pattern": glob_to_regex(source)} if source else {}
        rows, total = await self.store.query(
            f"SELECT path, error, size, mime_type, seen_at FROM {self.table} WHERE {where}"
            f" ORDER BY path LIMIT {int(limit)} START {int(offset)};"
            f" SELECT count() AS n FROM {self.table} WHERE {where} GROUP ALL;", params)
        return list(rows or []), int(total[0]["n"]) if total else 0

    async def under(self, folders: Sequence[str]) -> list[dict[str, Any]]:
        """The records of every source whose path lies inside one of ``folders`` (absolute
        paths; a source equal to one of them counts too), by path."""
        if not folders:
            return []
        prefixes = [f.rstrip("/") + "/" for f in folders]
        (rows,) = await self.store.query(
            f"SELECT {_FILE_FIELDS} FROM {self.table}"
            " WHERE path IN $exact OR $prefixes.any(|$p| string::starts_with(path, $p))"
            " ORDER BY path;", {"exact": list(folders), "prefixes": prefixes})
        return list(rows or [])

    async def with_hashes(self, hashes: Sequence[str]) -> list[dict[str, Any]]:
        """The records of every source whose last raw bytes had one of these hashes."""
        out: list[dict[str, Any]] = []
        for start in range(0, len(hashes), 500):
            (rows,) = await self.store.query(
                f"SELECT {_FILE_FIELDS} FROM {self.table} WHERE file_hash IN $hashes;",
                {"hashes": list(hashes[start:start + 500])})
            out += rows or []
        return out

    # ----- web pages ------------------------------------------------------------------
    async def remember_fetches(self, fetches: Sequence[dict[str, Any]]) -> None:
        """After web pages were fetched (``source``, ``etag``, ``last_modified``): what to
        ask each with next time, and when it was fetched."""
        if fetches:
            await self.store.query(
                "FOR $f IN $fetches { UPDATE type::record($table, $f.source) SET"
                " etag = $f.etag, last_modified = $f.last_modified, fetched_at = time::now()"
                " RETURN NONE; };", {"fetches": list(fetches), "table": self.table})

    async def web_sources(self, older_than_seconds: float | None = None
                          ) -> list[dict[str, Any]]:
        """The records of every web page (``http(s)://`` source), those fetched longer ago
        than ``older_than_seconds`` when given, by path."""
        where = "(string::starts_with(path, 'http://') OR string::starts_with(path, 'https://'))"
        params: dict[str, Any] = {}
        if older_than_seconds is not None:
            where += " AND (fetched_at = NONE OR fetched_at < $before)"
            params["before"] = (dt.datetime.now(dt.timezone.utc)
                                - dt.timedelta(seconds=older_than_seconds))
        (rows,) = await self.store.query(
            f"SELECT {_FILE_FIELDS}, etag, last_modified, fetched_at FROM {self.table}"
            f" WHERE {where} ORDER BY path;", params)
        return list(rows or [])

    async def touch(self, source: str, file_hash: str, size: int,
                         mtime_ns: int | None) -> None:
        """Remember a source's new size and modification time when its bytes did not
        change (nothing happens if its record is gone or holds other bytes meanwhile)."""
        await self.store.query(
            "UPDATE $file SET size = $size, mtime_ns = $mtime WHERE file_hash = $hash"
            " RETURN NONE;",
            {"file": self.id_of(source), "hash": file_hash, "size": size,
             "mtime": mtime_ns})


def _returned(results: list[Any]) -> bool:
    """Whether a transaction that ends in ``RETURN true`` (or returns ``false`` early) got
    to its end: the engine reports the returned value among the statements' results."""
    return any(r is True for r in results)


def record_id(value: Any, table: str) -> RecordID:
    """``value`` as a record id of ``table``: a RecordID, ``table:key``, ``table:⟨key⟩`` or
    a bare key."""
    if isinstance(value, RecordID):
        return value
    text = str(value)
    if text.startswith(table + ":"):
        text = text[len(table) + 1:]
    return RecordID(table, text.strip("⟨⟩`"))
