"""LangChain's own standard test suite for retrievers (``langchain-tests``), run on
:class:`surrealdocs.integrations.langchain.SurrealDocsRetriever` over a real embedded store."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import SAMPLES

pytest.importorskip("langchain_core")
standard = pytest.importorskip("langchain_tests.integration_tests")
from surrealdocs.integrations.langchain import SurrealDocsRetriever  # noqa: E402
from test_retrievers import prepare, settings  # noqa: E402


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("standard")
    db, docs = root / "kb", root / "docs"
    shutil.copytree(SAMPLES, docs)
    asyncio.run(prepare(db, docs))
    return db


class TestSurrealDocsRetrieverStandard(standard.RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def _store(self, store: Path) -> None:
        self._db = store

    @property
    def retriever_constructor(self) -> type[SurrealDocsRetriever]:
        return SurrealDocsRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"settings": settings(self._db)}

    @property
    def retriever_query_example(self) -> str:
        return "how are vectors indexed for search?"
