"""Contextual chunks: each chunk carries the path of headings it lies under, stored apart
from its text; the model embeds both, and hits show it."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import shared_docs
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.embed import get_embedder
from surrealdocs.embed.hashing import HashingEmbedder
from surrealdocs.parts.chunk import CONTEXT_MAX_CHARS, Chunk, assign_context, embedding_input
from surrealdocs.parts.extract import Extracted, extract_bytes, extract_file
from surrealdocs.store.names import Names
from surrealdocs.store.schema import SCHEMA_VERSION

GUIDE = """# Installation Guide

This guide explains how to install the herring counter on Linux and Windows machines.

## Linux

On Linux you install the package with apt and then configure the daemon carefully.

### Debian

Users of this distribution run apt-get install herring-counter and restart the
service afterwards.

## Windows

On Windows you run the installer and accept the licence of the herring counter.
"""


def chunks_at(*starts: int) -> list[Chunk]:
    return [Chunk(i, "x", s, s + 1) for i, s in enumerate(starts)]


def test_a_chunk_lies_under_the_last_heading_of_each_level_before_it() -> None:
    text = "A\n\nintro\n\nB\n\nbody b\n\nC\n\nbody c\n\nD\n\nbody d"
    headings = [(1, "A"), (2, "B"), (3, "C"), (2, "D")]
    chunks = chunks_at(0, text.index("body b"), text.index("body c"), text.index("body d"))
    assign_context(text, chunks, headings)
    assert [c.context for c in chunks] == ["A", "A › B", "A › B › C", "A › D"]


def test_a_heading_is_found_on_its_own_line_not_in_the_text_before_it() -> None:
    text = "Setup\n\nRead the Windows notes first.\n\nWindows\n\nRun the installer."
    chunks = chunks_at(text.index("Read"), text.index("Run"))
    assign_context(text, chunks, [(1, "Setup"), (2, "Windows")])
    assert [c.context for c in chunks] == ["Setup", "Setup › Windows"]


def test_headings_not_in_the_text_are_skipped_and_spacing_may_differ() -> None:
    text = "WINTER SPORTS\n IN\x01 SWITZERLAND\n\nThe rinks open in December."
    chunks = chunks_at(text.index("The rinks"))
    assign_context(text, chunks, [(1, "Nowhere to be found"),
                                  (1, "WINTER SPORTS\x01\nIN SWITZERLAND")])
    assert chunks[0].context == "WINTER SPORTS IN SWITZERLAND"


def test_a_long_path_keeps_its_deepest_headings() -> None:
    headings = [(level, f"heading {level} " + "w" * 60) for level in range(1, 6)]
    text = "\n\n".join(t for _, t in headings) + "\n\nbody"
    chunks = chunks_at(text.index("body"))
    assign_context(text, chunks, headings)
    context = chunks[0].context
    assert context is not None and len(context) <= CONTEXT_MAX_CHARS
    assert context.endswith(headings[-1][1]) and headings[0][1] not in context


def test_text_without_headings_has_no_context() -> None:
    chunks = chunks_at(0)
    assign_context("plain text", chunks, [])
    assert chunks[0].context is None
    assert embedding_input("plain text", None) == "plain text"


async def test_markdown_chunks_get_their_heading_paths_and_exact_spans(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text(GUIDE)
    doc = await extract_file(path, Settings(chunk_size=120, chunk_overlap=0))
    assert isinstance(doc, Extracted)
    assert doc.headings == [(1, "Installation Guide"), (2, "Linux"), (3, "Debian"),
                            (2, "Windows")]
    by_text = {c.content: c.context for c in doc.chunks}
    assert by_text[next(t for t in by_text if t.startswith("Users of this"))] == \
        "Installation Guide › Linux › Debian"
    assert by_text[next(t for t in by_text if t.startswith("On Windows"))] == \
        "Installation Guide › Windows"
    for chunk in doc.chunks:  # the context is not in the text: spans stay exact
        assert doc.content[chunk.char_start:chunk.char_end] == chunk.content

    plain = await extract_file(path, Settings(chunk_size=120, chunk_overlap=0,
                                              chunk_context="none"))
    assert isinstance(plain, Extracted)
    assert plain.headings == [] and all(c.context is None for c in plain.chunks)
    assert [c.content for c in plain.chunks] == [c.content for c in doc.chunks]


async def test_html_headings_give_context() -> None:
    html = ("<html><head><title>Birds</title></head><body><h1>Birds of the coast</h1>"
            "<p>Gulls and terns nest on the cliffs.</p><h2>Waders</h2>"
            "<p>Oystercatchers probe the mud for worms at low tide.</p></body></html>")
    doc = await extract_bytes(html.encode(), "text/html", "n://birds", Settings())
    assert isinstance(doc, Extracted)
    assert [c.context for c in doc.chunks] == ["Birds of the coast"]  # one short chunk
    doc = await extract_bytes(html.encode(), "text/html", "n://birds",
                              Settings(chunk_size=50, chunk_overlap=0))
    assert isinstance(doc, Extracted)
    waders = [c for c in doc.chunks if "Oystercatchers" in c.content]
    assert waders and all(c.context == "Birds of the coast › Waders" for c in waders)


async def test_docx_headings_give_context() -> None:
    path = shared_docs() / "docx" / "handbook-872p.docx"
    doc = await extract_file(path, Settings())
    assert isinstance(doc, Extracted)
    with_context = [c for c in doc.chunks if c.context]
    assert len(doc.headings) > 200 and len(with_context) > 0.9 * len(doc.chunks)
    purpose = next(c for c in doc.chunks if "The United States Trustee appoints" in c.content)
    assert purpose.context == "CHAPTER 1 – INTRODUCTION › A.PURPOSE"


class RecordingEmbedder(HashingEmbedder):
    """The hashing model, keeping the texts it embeds."""

    def __init__(self, dimension: int = 64) -> None:
        super().__init__(dimension)
        self.texts: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> Any:
        self.texts += list(texts)
        return super().embed_documents(texts)


async def stored_chunks(kb: KnowledgeBase) -> list[dict[str, Any]]:
    (rows,) = await kb.store.query(
        "SELECT id, document, chunk_index, content, context, char_start, char_end, text_hash,"
        " document.content AS text FROM chunks ORDER BY chunk_index;")
    for row in rows:
        (vector,) = await kb.store.query(
            f"SELECT VALUE embedding FROM ONLY {Names().vectors}:{row['id'].id};")
        row["vector"] = vector
    return list(rows)


async def test_the_store_keeps_the_context_apart_and_embeds_it(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text(GUIDE)
    embedder = RecordingEmbedder()
    settings = Settings(db="mem://", model="hashing-64", chunk_size=120, chunk_overlap=0)
    async with await KnowledgeBase.open(settings=settings, embedder=embedder) as kb:
        await kb.ingest([path])
        rows = await stored_chunks(kb)
        assert len(rows) >= 4 and all(r["context"] for r in rows)
        for row in rows:
            wanted = embedding_input(row["content"], row["context"])
            assert row["text"][row["char_start"]:row["char_end"]] == row["content"]
            assert row["text_hash"] == hashlib.sha256(wanted.encode()).hexdigest()
            assert wanted in embedder.texts
            assert np.allclose(row["vector"], embedder.embed_documents([wanted])[0],
                               atol=1e-6)

        hits = await kb.search("apt-get install restart the service", mode="text", limit=1)
        assert hits[0].context == "Installation Guide › Linux › Debian"
        assert hits[0].content.startswith("Users of this")  # the text alone

        # a renamed section: the same text under another heading is embedded again
        embedder.texts.clear()
        path.write_text(GUIDE.replace("### Debian", "### Ubuntu"))
        report = await kb.ingest([path])
        assert report.counts["updated"] == 1
        rows = await stored_chunks(kb)
        debian = next(r for r in rows if r["content"].startswith("Users of this"))
        assert debian["context"] == "Installation Guide › Linux › Ubuntu"
        assert embedding_input(debian["content"], debian["context"]) in embedder.texts
        assert all("Ubuntu" in t for t in embedder.texts)
        # the chunks outside the renamed section kept their vectors
        assert not any(t.startswith("Installation Guide › Windows") for t in embedder.texts)


async def test_the_heading_brings_its_section_closer_to_a_query(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text(GUIDE)
    scores = {}
    for context in ("none", "headings"):
        settings = Settings(db="mem://", model="hashing-1024", chunk_size=120,
                            chunk_overlap=0, chunk_context=context)
        async with await KnowledgeBase.open(settings=settings) as kb:
            await kb.ingest([path])
            hits = await kb.search("Debian", mode="vector", limit=10, per_document=False,
                                   cutoff=False)
            (hit,) = [h for h in hits if h.content.startswith("Users of this")]
            assert "Debian" not in hit.content  # only the context names it
            scores[context] = hit.vector_score
    assert scores["headings"] > scores["none"] + 0.1


async def test_no_context_embeds_the_text_alone(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text(GUIDE)
    embedder = RecordingEmbedder()
    settings = Settings(db="mem://", model="hashing-64", chunk_size=120, chunk_overlap=0,
                        chunk_context="none")
    async with await KnowledgeBase.open(settings=settings, embedder=embedder) as kb:
        await kb.ingest([path])
        rows = await stored_chunks(kb)
        assert rows and all(r["context"] is None for r in rows)
        assert sorted(embedder.texts) == sorted(r["content"] for r in rows)
        assert all(r["text_hash"] == hashlib.sha256(r["content"].encode()).hexdigest()
                   for r in rows)


async def test_reembed_reads_the_context(tmp_path: Path) -> None:
    from surrealdocs.core.reembed import reembed

    path = tmp_path / "guide.md"
    path.write_text(GUIDE)
    db = str(tmp_path / "kb")
    settings = Settings(db=db, model="hashing-64", chunk_size=120, chunk_overlap=0)
    async with await KnowledgeBase.open(settings=settings) as kb:
        await kb.ingest([path])
    new_model = RecordingEmbedder(32)
    await reembed(settings.replace(model="hashing-32"), new_model)
    async with await KnowledgeBase.open(settings=settings.replace(model="hashing-32"),
                                        embedder=get_embedder("hashing-32")) as kb:
        rows = await stored_chunks(kb)
    assert sorted(new_model.texts) == sorted(embedding_input(r["content"], r["context"])
                                             for r in rows)
    assert any(r["context"] for r in rows)


async def test_a_version_9_store_is_upgraded_and_keeps_its_hashes(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    path = tmp_path / "notes.txt"
    path.write_text("Plain notes about herring counts in the Baltic sea, no headings.")
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        await kb.ingest([path])
        (before,) = await kb.store.query("SELECT VALUE text_hash FROM chunks;")
        await kb.store.query(  # back to what version 9 made
            "REMOVE FIELD context ON chunks;"
            " DEFINE FIELD OVERWRITE text_hash ON chunks TYPE string"
            "   VALUE crypto::sha256(content);"
            " UPSERT $k SET version = 9;", {"k": Names().schema_key})
    guide = tmp_path / "guide.md"
    guide.write_text(GUIDE)
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        (version, info, after) = await kb.store.query(
            "SELECT VALUE version FROM ONLY $k; INFO FOR TABLE chunks;"
            " SELECT VALUE text_hash FROM chunks;", {"k": Names().schema_key})
        assert version == SCHEMA_VERSION and "context" in info["fields"]
        assert after == before
        await kb.ingest([guide])
        hits = await kb.search("distribution apt-get", mode="text", limit=1)
        assert hits[0].context == "Installation Guide"  # the guide is one chunk here
        (hashed,) = await kb.store.query(
            "SELECT VALUE text_hash FROM ONLY type::record($c);", {"c": hits[0].chunk_id})
        wanted = embedding_input(hits[0].content, hits[0].context)
        assert hashed == hashlib.sha256(wanted.encode()).hexdigest()


@pytest.mark.parametrize("value", ["title", ""])
def test_chunk_context_is_checked(value: str) -> None:
    from surrealdocs.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="chunk_context must be one of"):
        Settings(chunk_context=value)


def test_chunk_context_from_the_environment() -> None:
    assert Settings().chunk_context == "headings"
    assert Settings.from_env({"SURREALDOCS_CHUNK_CONTEXT": " None "}).chunk_context == "none"
