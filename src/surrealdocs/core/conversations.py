"""Conversations with the knowledge base (``kb.conversations``), kept in the store as Open
Notebook keeps its chats: a conversation belongs to a notebook (its questions search that
notebook) or to the whole store, and holds its turns with their citations. A follow-up
question is first rewritten into a standalone one with the conversation's last turns, so
that its search finds what "it" and "that" mean; the answer is then made as ``kb.ask``
makes every answer.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from surrealdb import RecordID

from ..chat import chat_model
from ..config import Settings
from ..errors import ConfigurationError, NotFoundError
from ..parts.results import id_text
from ..store.conversations import ConversationStorage
from .answer import Answer
from .search_request import SearchRequest

HISTORY_TURNS = 3  # the turns a follow-up is rewritten with
HISTORY_ANSWER_CHARS = 600
REWRITE = (
    "Rewrite the user's follow-up question as one standalone question that can be"
    " understood without the conversation: replace pronouns and references with what they"
    " refer to. Answer with the question only.")


@dataclass
class Turn:
    question: str
    standalone: str
    answer: str
    grounded: bool
    model: str | None
    citations: list[dict[str, Any]]
    created: dt.datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Conversation:
    id: str
    title: str
    notebook: str | None
    created: dt.datetime | None = None
    updated: dt.datetime | None = None
    turn_count: int = 0
    turns: list[Turn] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["turns"] = [t.to_dict() for t in self.turns]
        return out


class ConversationService:
    """Sessions and their turns; :meth:`ask` answers within one."""

    def __init__(self, storage: ConversationStorage, settings: Settings,
                 ask: Callable[..., Awaitable[Answer]],
                 resolve_notebook: Callable[[Any], Awaitable[RecordID]]) -> None:
        self.storage = storage
        self.settings = settings
        self._ask = ask
        self._resolve_notebook = resolve_notebook

    async def create(self, title: str | None = None, notebook: Any = None) -> Conversation:
        nb = None if notebook is None else await self._resolve_notebook(notebook)
        title = (title or "").strip() or "Conversation"
        if len(title) > 200:
            raise ConfigurationError("a conversation's title is at most 200 characters")
        return _session(await self.storage.create(title, nb))

    async def list_conversations(self, notebook: Any = None) -> list[Conversation]:
        nb = None if notebook is None else await self._resolve_notebook(notebook)
        return [_session(r) for r in await self.storage.select(nb)]

    sessions = list_conversations  # its name until 2026-12

    async def get(self, ref: Any) -> Conversation:
        """A conversation with its turns, oldest first."""
        sid = self.storage.session_id(ref)
        row = await self.storage.get(sid)
        if row is None:
            raise NotFoundError(f"no conversation {ref!r}")
        session = _session(row)
        session.turns = [_turn(t) for t in await self.storage.turns_of(sid)]
        session.turn_count = len(session.turns)
        return session

    async def delete(self, ref: Any) -> None:
        if not await self.storage.delete(self.storage.session_id(ref)):
            raise NotFoundError(f"no conversation {ref!r}")

    async def ask(self, ref: Any, question: str, *, llm: str | None = None,
                  on_event: Callable[[str, Any], Any] | None = None) -> Answer:
        """Answer ``question`` in the session ``ref`` (rewritten with its last turns when it
        follows others), and keep the turn."""
        session = await self.get(ref)
        standalone = question
        if session.turns:
            standalone = await self._standalone(session.turns[-HISTORY_TURNS:], question, llm)
            if on_event:
                on_event("standalone", standalone)
        request = SearchRequest(standalone, limit=self.settings.ask_passages,
                                notebook=session.notebook)
        answer = await self._ask(request, llm=llm, on_event=on_event)
        turn = {"question": question, "standalone": standalone, "answer": answer.text,
                "grounded": answer.grounded, "model": answer.model,
                "citations": [c.to_dict() for c in answer.citations],
                "chunks": [RecordID(self.storage.store.names.chunks, c.chunk_id.split(":", 1)[-1])
                           for c in answer.citations]}
        await self.storage.store.transaction(
            *self.storage.add_turn_statements(self.storage.session_id(ref), turn))
        return answer

    async def _standalone(self, turns: list[Turn], question: str, llm: str | None) -> str:
        history = "\n".join(
            f"Q: {t.question}\nA: {t.answer[:HISTORY_ANSWER_CHARS]}" for t in turns)
        messages = [{"role": "system", "content": REWRITE},
                    {"role": "user", "content": f"Conversation:\n{history}\n\nFollow-up:"
                                                f" {question}"}]
        model = chat_model(llm, self.settings)
        text = "".join([piece async for piece in model.stream(messages)]).strip()
        return text.splitlines()[0].strip() if text else question


def _session(row: dict[str, Any]) -> Conversation:
    nb = row.get("notebook")
    return Conversation(id=id_text(row["id"]), title=str(row.get("title") or ""),
                       notebook=id_text(nb) if nb else None, created=row.get("created"),
                       updated=row.get("updated"), turn_count=int(row.get("turns") or 0))


def _turn(row: dict[str, Any]) -> Turn:
    return Turn(question=row["question"], standalone=row["standalone"],
                    answer=row["answer"], grounded=bool(row.get("grounded")),
                    model=row.get("model"), citations=list(row.get("citations") or []),
                    created=row.get("created"))


ChatSession = Conversation  # the names until 2026-12
ChatTurn = Turn
