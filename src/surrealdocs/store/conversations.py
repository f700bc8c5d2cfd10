"""The ``chat_session`` and ``chat_turn`` tables: every statement on them.

A session belongs to a notebook or to the whole store; its turns hold the question, the
standalone question it was rewritten into (with the conversation's history), the answer, and
its citations, each a plain object beside a link to its chunk (``chunks``). Deleting a
session deletes its turns (an event); a deleted chunk leaves its citation's text in place.
"""

from __future__ import annotations

from typing import Any

from surrealdb import RecordID

from .connection import Statement, Store


class ConversationStorage:
    """Sessions and turns of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.sessions = store.names.chat_session
        self.turns = store.names.chat_turn

    def session_id(self, ref: Any) -> RecordID:
        if isinstance(ref, RecordID):
            return ref
        key = str(ref)
        if key.startswith(self.sessions + ":"):
            key = key.split(":", 1)[1]
        return RecordID(self.sessions, key)

    async def create(self, title: str, notebook: RecordID | None) -> dict[str, Any]:
        (row,) = await self.store.query(
            f"CREATE ONLY {self.sessions} CONTENT {{ title: $title, notebook: $notebook }};",
            {"title": title, "notebook": notebook})
        return dict(row)

    async def get(self, session: RecordID) -> dict[str, Any] | None:
        (row,) = await self.store.query("SELECT * FROM ONLY $s;", {"s": session})
        return dict(row) if row else None

    async def select(self, notebook: RecordID | None = None) -> list[dict[str, Any]]:
        where = " WHERE notebook = $notebook" if notebook is not None else ""
        (rows,) = await self.store.query(
            f"SELECT *, count((SELECT id FROM {self.turns} WHERE session = $parent.id)) AS turns"
            f" FROM {self.sessions}{where} ORDER BY updated DESC;", {"notebook": notebook})
        return [dict(r) for r in rows or []]

    async def turns_of(self, session: RecordID) -> list[dict[str, Any]]:
        (rows,) = await self.store.query(
            f"SELECT * FROM {self.turns} WHERE session = $s ORDER BY created;", {"s": session})
        return [dict(r) for r in rows or []]

    def add_turn_statements(self, session: RecordID, turn: dict[str, Any]) -> list[Statement]:
        return [Statement(f"CREATE {self.turns} CONTENT $chat_turn RETURN NONE;"
                          " UPDATE $chat_session SET updated = time::now() RETURN NONE;",
                          {"chat_turn": {**turn, "session": session}, "chat_session": session})]

    async def delete(self, session: RecordID) -> bool:
        (gone,) = await self.store.query("DELETE $s RETURN BEFORE;", {"s": session})
        return bool(gone)
