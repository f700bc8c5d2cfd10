"""The second stage of a search (docs/rerank.md): a reranker scores a search's first
passages against the query, 0-1, and the passages are put in its order.

``rerank:MODEL`` is any server that speaks the shared rerank request (Cohere, Jina, Voyage,
Mixedbread, Hugging Face TEI, vLLM, Infinity): ``POST {base}/rerank`` with ``model``,
``query``, ``documents`` and ``top_n``, answered with ``results`` of ``index`` and
``relevance_score`` (:class:`.service.RerankService`). ``llm`` has the configured chat model
score the passages (:class:`.llm.LlmReranker`).
"""

from __future__ import annotations

from ..config import Settings
from ..errors import ConfigurationError
from .base import Reranker, RerankError

__all__ = ["RerankError", "Reranker", "reranker_for"]


def reranker_for(name: str, settings: Settings) -> Reranker:
    """The reranker ``name`` (``rerank:MODEL`` or ``llm``), reached as the settings say."""
    if name == "llm":
        from .llm import LlmReranker

        return LlmReranker(settings)
    if name.startswith("rerank:") and name.split(":", 1)[1].strip():
        from .service import RerankService

        return RerankService(name.split(":", 1)[1].strip(), settings)
    raise ConfigurationError(f"rerank must be rerank:MODEL or llm, got {name!r}")
