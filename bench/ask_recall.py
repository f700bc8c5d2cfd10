"""Citation recall of ``ask``'s retrieval step: for each SciFact claim whose supporting
abstract is known, is a passage of that abstract among the passages ``kb.ask`` would give
the model (the default count and mode)? Then the answer step with a scripted model (no
generation is measured) that cites the supporting passages it was given and one number it
was not: does every citation left resolve to a chunk of a supporting document?

    python bench/ask_recall.py --db STORE --dataset DIR --split dev|test [--passages 8]

STORE holds the dataset's corpus (``surrealdocs eval DIR --db STORE`` leaves one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from surrealdocs import KnowledgeBase, SearchRequest, Settings
from surrealdocs.chat import ChatModel, ChatOptions
from surrealdocs.core.answer import answer
from surrealdocs.core.evaluate import SOURCE_PREFIX, load_beir


class Scripted(ChatModel):
    """A chat model that answers what it was told to, in one piece."""

    provider = "scripted"

    def __init__(self, reply: str) -> None:
        super().__init__("script", ChatOptions("http://127.0.0.1"))
        self.reply = reply

    def endpoint(self, base: Any) -> Any:
        return base

    async def stream(self, messages: list[dict[str, str]]) -> AsyncIterator[str]:
        yield self.reply


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--split", default="test")
    parser.add_argument("--passages", type=int, default=None)
    parser.add_argument("--mode", default="hybrid")
    args = parser.parse_args()
    data = load_beir(args.dataset, args.split)
    settings = Settings.from_env(db=args.db)
    count = args.passages or settings.ask_passages
    found = resolved = cited = invented = 0
    async with await KnowledgeBase.open(settings=settings, create=False) as kb:
        for qid, question in data.queries.items():
            relevant = {d for d, grade in data.qrels.get(qid, {}).items() if grade > 0}
            if not relevant:
                continue
            hits = await kb.search(SearchRequest(question, mode=args.mode, limit=count))
            docs = [h.source.removeprefix(SOURCE_PREFIX) for h in hits]
            found += bool(relevant & set(docs))
            supporting = [n for n, d in enumerate(docs, 1) if d in relevant]
            model = Scripted(" ".join(f"Supported [{n}]." for n in supporting)
                             + f" Invented [{len(hits) + 3}].")
            result = await answer(question, hits, model, settings.ask_context_chars)
            cited += len(result.citations)
            resolved += sum(1 for c in result.citations
                            if c.source.removeprefix(SOURCE_PREFIX) in relevant)
            invented += result.removed_citations
    total = sum(1 for q in data.queries if any(g > 0 for g in data.qrels.get(q, {}).values()))
    print(json.dumps({"dataset": str(args.dataset), "split": args.split, "claims": total,
                      "passages": count, "mode": args.mode,
                      "supporting_passage_given": round(found / total, 4),
                      "citations_to_a_supporting_document": f"{resolved}/{cited}",
                      "invented_citations_removed": f"{invented}/{total}"}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
