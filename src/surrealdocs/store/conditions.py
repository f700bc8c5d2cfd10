"""Filters as SurrealQL conditions with bound parameters (never values in the text)."""

from __future__ import annotations

from typing import Any

from surrealdb import RecordID

from ..parts.filters import Filters, aware, glob_to_regex


def filter_conditions(filters: Filters, *, through: str = "", document: str = "document.",
                      notebook_scoped: bool = False, documents_applied: bool = False
                      ) -> tuple[list[str], dict[str, Any]]:
    """Conditions on a chunk (or document) row and their parameters.

    ``through`` is the path from the queried table to the chunk (``"chunk."`` when querying
    a notebook's vector table). ``document`` is the path from the chunk to its document's
    fields (``""`` when querying the documents table itself). ``notebook_scoped`` says the
    queried table holds the notebook's rows only, so the notebook condition is left out.
    ``documents_applied`` says the caller applies the metadata filter's documents itself
    (the text index's legs, from their own maps).
    """
    if filters.where is not None and filters.documents is None:
        raise AssertionError("a metadata filter must be resolved (DocumentStorage.resolved)")
    doc = through + document
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if filters.notebook is not None and not notebook_scoped:
        # chunks and documents keep their notebooks in a field of their own (in step with
        # the reference edges), so the engine checks it without following a link
        clauses.append(f"{through}notebooks CONTAINS $f_notebook")
        params["f_notebook"] = filters.notebook
    if filters.created_after is not None:
        clauses.append(f"{doc}ingested_at >= $f_after")
        params["f_after"] = aware(filters.created_after)
    if filters.created_before is not None:
        clauses.append(f"{doc}ingested_at < $f_before")
        params["f_before"] = aware(filters.created_before)
    if filters.topics:
        clauses.append(f"{doc}topics CONTAINSANY $f_topics")
        params["f_topics"] = list(filters.topics)
    if filters.mime_types:
        clauses.append(f"{doc}mime_type IN $f_mimes")
        params["f_mimes"] = filters.mime_types
    if filters.documents is not None and not documents_applied:
        own = f"{through}{document[:-1]}" if document else "id"
        clauses.append(f"{own} {'NOTINSIDE' if filters.documents.exclude else 'INSIDE'}"
                       " $f_documents")
        params["f_documents"] = [RecordID(filters.documents.table, k)
                                   for k in filters.documents.keys]
    if filters.source:
        clauses.append(f"{doc}sources.any(|$s| string::matches($s, $f_source))")
        params["f_source"] = glob_to_regex(filters.source)
    return clauses, params
