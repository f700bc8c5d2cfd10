"""One id format everywhere: ``table:key`` as the engine holds the key, never SurrealQL's
escaped ``table:⟨key⟩`` (which about 40% of ids came back as, the others bare), and every
face takes both back."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from server_helpers import serve
from surrealdocs import KnowledgeBase
from surrealdocs.parts.results import id_text


def text_whose_id_needs_escaping() -> str:
    """A text whose document id (its SHA-256) starts with a digit: the engine escapes it."""
    for n in range(100):
        text = f"Herons and egrets, note {n}."
        if hashlib.sha256(text.encode()).hexdigest()[0].isdigit():
            return text
    raise AssertionError("no such text")


def test_id_text() -> None:
    from surrealdb import RecordID

    assert id_text(RecordID("documents", "9abc")) == "documents:9abc"
    assert id_text(RecordID("documents", "abc")) == "documents:abc"
    assert id_text("documents:⟨9abc⟩") == "documents:9abc"
    assert id_text("documents:abc") == "documents:abc"


async def test_every_id_the_library_gives_is_unescaped(kb: KnowledgeBase) -> None:
    text = text_whose_id_needs_escaping()
    report = await kb.ingest_texts({"note://herons": text})
    doc_id = report.results[0].document_id
    assert doc_id and "⟨" not in doc_id and doc_id[len("documents:")].isdigit()
    (hit,) = await kb.search("herons", mode="text", limit=1)
    assert hit.document_id == doc_id and "⟨" not in hit.chunk_id
    assert "⟨" not in json.dumps(hit.to_dict(), ensure_ascii=False)
    document = await kb.document(doc_id)  # taken back, bare
    assert document.id == doc_id and all("⟨" not in c.chunk_id for c in document.chunks)
    assert (await kb.document(f"documents:⟨{doc_id.split(':', 1)[1]}⟩")).id == doc_id
    passage = await kb.passage(hit.chunk_id)
    assert passage.document_id == doc_id
    nb = await kb.notebooks.create_notebook("Birds")
    assert "⟨" not in json.dumps(nb.to_dict(), ensure_ascii=False)


def test_every_id_the_api_gives_is_unescaped(tmp_path: Path) -> None:
    text = text_whose_id_needs_escaping()
    with serve(tmp_path) as server:
        c = server.client
        r = c.post("/v1/texts", json={"texts": [{"source": "note://herons", "text": text}]})
        doc_id = r.json()["results"][0]["document_id"]
        assert "⟨" not in doc_id
        hits = c.get("/v1/search", params={"query": "herons", "mode": "text"}).json()["hits"]
        assert hits and all("⟨" not in json.dumps(h, ensure_ascii=False) for h in hits)
        assert c.get(f"/v1/documents/{doc_id}").json()["id"] == doc_id
        chunk = hits[0]["chunk_id"]
        assert c.get(f"/v1/chunks/{chunk}/passage").status_code == 200
        listed = c.get("/v1/documents").json()["documents"]
        assert [d["id"] for d in listed] == [doc_id]


async def test_delete_takes_any_text(kb: KnowledgeBase) -> None:
    """A reference that cannot be a path (NUL, an unknown user's ~) is simply not found."""
    assert await kb.delete("a\x00b") is False
    assert await kb.delete("~nosuchuser/notes.md") is False
    assert [f.status for f in await kb.forget(["a\x00b"], dry_run=True)] == ["not found"]
