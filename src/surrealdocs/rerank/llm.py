"""``rerank=llm``: the chat model ``ask`` uses scores the passages.

One request per batch of :data:`BATCH` passages: the question and the numbered passages
(each cut to :data:`PASSAGE_CHARS`), and the instruction to answer with one line per
passage, ``N: SCORE`` with a score from 0 (unrelated) to 10 (answers the question). The
cost is one chat completion per batch: about 50 passages of 1,000 characters are some
15,000 input tokens and 500 output tokens at the default depth. A batch whose answer does
not score every passage is a failure (the first stage's order is kept).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..chat import chat_model
from ..config import Settings
from .base import RerankError, in_batches

BATCH = 25
PASSAGE_CHARS = 1200
_LINE = re.compile(r"^\s*\[?(\d+)\]?\s*[:=\-]\s*(\d+(?:\.\d+)?)", re.MULTILINE)

INSTRUCTION = (
    "You judge how well passages answer a question. For every passage, give one line"
    " 'N: SCORE', N its number and SCORE from 0 (unrelated) to 10 (answers the question"
    " fully). Nothing else: no explanation.")


class LlmReranker:
    def __init__(self, settings: Settings) -> None:
        self.model = chat_model(None, settings)
        self.name = "llm"

    async def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        return await in_batches(texts, BATCH, lambda batch: self._batch(query, batch))

    async def _batch(self, query: str, texts: list[str]) -> list[float]:
        passages = "\n\n".join(f"[{n}] {' '.join(t.split())[:PASSAGE_CHARS]}"
                               for n, t in enumerate(texts, 1))
        messages = [{"role": "system", "content": INSTRUCTION},
                    {"role": "user", "content": f"Question: {query}\n\nPassages:\n\n{passages}"}]
        try:
            answer = "".join([piece async for piece in self.model.stream(messages)])
        except Exception as exc:  # the chat model's own error, said as the notice
            raise RerankError(str(exc)) from None
        found: dict[int, float] = {}
        for match in _LINE.finditer(answer):
            n, score = int(match.group(1)), float(match.group(2))
            if 1 <= n <= len(texts) and 0 <= score <= 10:
                found.setdefault(n, score / 10)
        if len(found) != len(texts):
            raise RerankError(f"the chat model scored {len(found)} of {len(texts)} passages")
        return [found[n] for n in range(1, len(texts) + 1)]

    async def close(self) -> None:
        """Nothing held: each request has its own client."""
