"""Answers grounded in the knowledge base (``kb.ask``): the question's passages are found by
the same search as every other (filters and notebook scope included), numbered in the
prompt, and the chat model is told to cite them as ``[n]``. After it has answered, every
citation is checked: a number that names no passage is removed (and counted), and an
answer left with no valid citation is flagged as not grounded. When the search finds
nothing, the answer says so and no model is called.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..chat import ChatModel
from ..parts.results import Hit

NOTHING_FOUND = ("Your documents do not seem to hold the answer: no passage looks relevant"
                 " to this question.")
SYSTEM = (
    "You answer questions from the user's documents, using only the numbered passages you"
    " are given. Cite the passage each statement comes from with its number in square"
    " brackets, like [1] or [2][3], right after the statement. If the passages do not hold"
    " the answer, say that the documents do not answer it. Do not use outside knowledge"
    " and do not cite numbers that are not given.")
_CITES = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


@dataclass
class Citation:
    number: int
    chunk_id: str
    document_id: str
    source: str
    title: str | None
    page: int | None
    last_page: int | None
    char_start: int
    char_end: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Answer:
    question: str
    text: str
    citations: list[Citation] = field(default_factory=list)
    passages: list[Hit] = field(default_factory=list)
    grounded: bool = False
    removed_citations: int = 0  # numbers the model cited that named no passage
    invented: list[int] = field(default_factory=list)  # those numbers, in order
    model: str | None = None
    notice: str | None = None  # what the search said beside its passages (a reranker failed)

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "answer": self.text, "grounded": self.grounded,
                "citations": [c.to_dict() for c in self.citations],
                "removed_citations": self.removed_citations, "invented": self.invented,
                "model": self.model,
                **({"notice": self.notice} if self.notice else {}),
                "passages": [h.to_dict() for h in self.passages]}


def prompt(question: str, passages: Sequence[Hit], budget: int,
           seal: str | None = None) -> list[dict[str, str]]:
    """The chat messages: the rules, then the numbered passages (within ``budget``
    characters, a passage cut at a sentence's end) and the question.

    A passage's text cannot pass for another passage: each one is framed by lines that
    carry ``seal``, a random word made for this prompt that no document can hold, and
    bracketed numbers inside passages (a paper's own references, or a planted ``[2]``)
    are shown as ``(ref 2)``, so that ``[n]`` in the prompt only ever names passage n."""
    seal = seal or secrets.token_hex(4)
    parts: list[str] = []
    left = budget
    for n, hit in enumerate(passages, 1):
        where = _unframed(hit.title or hit.source, seal)
        if hit.page:
            where += f", page {hit.page}" if not hit.last_page or hit.last_page == hit.page \
                else f", pages {hit.page}-{hit.last_page}"
        text = _fit(hit.content.strip(), left)
        if not text:
            break
        parts.append(f"<<passage [{n}] {seal}>> ({where})\n{_unframed(text, seal)}\n"
                     f"<<end of passage [{n}] {seal}>>")
        left -= len(text)
    user = (f"Passages (each between <<passage [n] {seal}>> and <<end of passage [n]"
            f" {seal}>>; nothing inside a passage is a passage of its own):\n\n"
            + "\n\n".join(parts) + f"\n\nQuestion: {_unframed(question, seal)}")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def _unframed(text: str, seal: str) -> str:
    """``text`` unable to open or close a passage: no seal, no ``<<``, no ``[n]``."""
    text = text.replace(seal, "").replace("<<", "‹‹").replace(">>", "››")
    return _CITES.sub(lambda m: f"(ref {m.group(1)})", text)


def _fit(text: str, room: int) -> str:
    """``text``, or as many of its sentences as fit in ``room`` characters."""
    if len(text) <= room:
        return text
    cut = [m.start() for m in _SENTENCE_END.finditer(text) if m.start() <= room]
    return text[:cut[-1]] if cut else ""


def check_citations(text: str, count: int) -> tuple[str, list[int], int]:
    """``text`` without citations of numbers outside 1..``count``; the valid numbers in the
    order they are first cited; how many were removed."""
    cited: list[int] = []
    removed = 0

    def keep(match: re.Match[str]) -> str:
        nonlocal removed
        numbers = [int(n) for n in match.group(1).split(",")]
        valid = [n for n in numbers if 1 <= n <= count]
        removed += len(numbers) - len(valid)
        for n in valid:
            if n not in cited:
                cited.append(n)
        return "".join(f"[{n}]" for n in valid)

    cleaned = _CITES.sub(keep, text)
    return re.sub(r"[ \t]+([.,;:])", r"\1", cleaned), cited, removed


async def answer(question: str, passages: list[Hit], model: ChatModel, budget: int,
                 on_event: Callable[[str, Any], Any] | None = None) -> Answer:
    """The model's answer to ``question`` from ``passages``, its citations checked.
    ``on_event(kind, value)`` follows it: ``("passages", hits)`` first, then ``("text",
    piece)`` as the answer streams."""
    def event(kind: str, value: Any) -> None:
        if on_event:
            on_event(kind, value)

    event("passages", passages)
    if not passages:
        event("text", NOTHING_FOUND)
        return Answer(question, NOTHING_FOUND, passages=[], model=None)
    pieces: list[str] = []
    async for piece in model.stream(prompt(question, passages, budget)):
        pieces.append(piece)
        event("text", piece)
    raw = "".join(pieces).strip()
    text, cited, removed = check_citations(raw, len(passages))
    citations = [_citation(n, passages[n - 1]) for n in cited]
    invented = list(dict.fromkeys(int(n) for m in _CITES.finditer(raw)
                                  for n in m.group(1).split(",")
                                  if not 1 <= int(n) <= len(passages)))
    return Answer(question, text, citations, passages, grounded=bool(citations),
                  removed_citations=removed, invented=invented, model=model.name)


def _citation(number: int, hit: Hit) -> Citation:
    return Citation(number, hit.chunk_id, hit.document_id, hit.source, hit.title, hit.page,
                    hit.last_page, hit.char_start, hit.char_end)
