"""The HTTP API against a real embedded store: every endpoint, the keys, and bad input
answered with the right status and the one error shape (never a 500)."""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from surrealdb import RecordID

from conftest import PATIENCE, SAMPLES
from server_helpers import BASE_URL, Server, TestClient, assert_error, serve, settings_for
from surrealdocs import KnowledgeBase
from surrealdocs.faces.http import ServeConfig, create_app
from surrealdocs.faces.http.state import ServerState
from surrealdocs.parts.results import id_text
from surrealdocs.store.connection import Statement
from surrealdocs.store.schema import SCHEMA_VERSION

HERONS = b"# Herons\n\nHerons are long-legged wading birds. The grey heron stands still in " \
         b"shallow water and waits for fish.\n"
EGRETS = b"Egrets are white herons. The little egret has yellow feet and black legs; it " \
         b"stirs the mud to flush out its prey.\n"


def upload(server: Server, *files: tuple[str, bytes], headers: dict[str, str] | None = None,
           **params: Any) -> Any:
    return server.client.post("/v1/uploads", params=params or None, headers=headers,
                              files=[("files", (name, data)) for name, data in files])


def ingest_birds(server: Server, **params: Any) -> dict[str, Any]:
    r = upload(server, ("birds/herons.md", HERONS), ("egrets.txt", EGRETS), **params)
    assert r.status_code == 202, r.text
    job = server.wait_job(r.json()["job"]["id"])
    assert job["status"] == "done", job
    return job


# ----- service ----------------------------------------------------------------------------
def test_a_query_of_common_words_says_why_it_finds_nothing(tmp_path: Path) -> None:
    with serve(tmp_path) as server:
        ingest_birds(server)
        c = server.client
        for mode in ("text", "vector", "hybrid"):
            answer = c.get("/v1/search", params={"query": "the of", "mode": mode}).json()
            assert answer["count"] == 0 and "common word (the, of)" in answer["notice"]
        found = c.get("/v1/search", params={"query": "the herons"}).json()
        assert found["count"] > 0 and "notice" not in found


def test_health_ready_info_stats(tmp_path: Path) -> None:
    with serve(tmp_path) as server:
        c = server.client
        assert c.get("/v1/health").json()["status"] == "ok"
        ready = c.get("/v1/ready").json()
        assert ready == {"ready": True, "state": "ready", "index_builds": 0, "reasons": []}
        info = c.get("/v1/info").json()
        assert info["auth_required"] is False and info["authenticated"] is True
        assert info["can_write"] is True and info["model"] == "hashing-64"
        assert info["limits"]["max_file_bytes"] == 100 * 1000**2
        stats = c.get("/v1/stats").json()
        assert stats["documents"] == 0 and stats["model"] == "hashing-64"
        assert stats["schema_version"] == SCHEMA_VERSION


@pytest.mark.slow
def test_readiness_false_while_a_graph_is_built(tmp_path: Path) -> None:
    with serve(tmp_path) as server:
        kb = server.kb
        portal = server.client.portal
        assert portal is not None
        # a "build" that takes a while: readiness says so meanwhile, and after it is ready
        future = portal.start_task_soon(kb.store.build_index, Statement("SLEEP 3s;"))
        deadline = int(PATIENCE / 0.01)
        while kb.store.index_builds == 0 and deadline:
            deadline -= 1
            portal.call(_sleep)
        r = server.client.get("/v1/ready")
        assert r.status_code == 503
        assert r.json()["index_builds"] == 1
        assert r.json()["reasons"] == ["building a vector graph"]
        future.result(timeout=PATIENCE)
        assert server.client.get("/v1/ready").status_code == 200


async def _sleep() -> None:
    await asyncio.sleep(0.01)


def test_not_ready_until_open_and_failed_open(tmp_path: Path) -> None:
    state = ServerState(ServeConfig())
    assert state.readiness()["ready"] is False and state.readiness()["state"] == "opening"

    db = str(tmp_path / "db")
    with serve(tmp_path, db=db):
        pass  # makes the store, bound to hashing-64
    fatal: list[str] = []
    settings = settings_for(tmp_path, db).replace(model="hashing-32")
    with TestClient(create_app(ServeConfig(settings=settings), on_fatal=fatal.append),
                    base_url=BASE_URL) as client:
        for _ in range(int(PATIENCE / 0.02)):
            ready = client.get("/v1/ready")
            if ready.json()["state"] == "failed":
                break
            time.sleep(0.02)
        assert ready.status_code == 503 and ready.json()["state"] == "failed"
        assert "hashing-64" in ready.json()["reasons"][0]
        assert fatal and "hashing-64" in fatal[0]
        error = assert_error(client.get("/v1/stats"), 503, "not_ready")
        assert "could not be opened" in error["message"]
        assert client.get("/v1/health").status_code == 200


async def _subscribe(kb: Any) -> Any:
    return kb.jobs.subscribe()


async def _drain(kb: Any, queue: Any) -> list[Any]:
    out = []
    while not queue.empty():
        job = queue.get_nowait()
        out.append(type(job)(**{**job.__dict__}))
    kb.jobs.unsubscribe(queue)
    return out


def test_a_documents_only_store_is_not_served(tmp_path: Path) -> None:
    fatal: list[str] = []
    settings = settings_for(tmp_path).replace(chunked=False)
    with TestClient(create_app(ServeConfig(settings=settings), on_fatal=fatal.append),
                    base_url=BASE_URL) as c:
        for _ in range(int(PATIENCE / 0.02)):
            if c.get("/v1/ready").json()["state"] == "failed":
                break
            time.sleep(0.02)
        assert fatal and "need chunks" in fatal[0]
        assert_error(c.get("/v1/documents"), 503, "not_ready")


# ----- uploads, jobs, documents -------------------------------------------------------------
def test_upload_runs_a_job_that_reports_each_file(tmp_path: Path) -> None:
    with serve(tmp_path) as server:
        c = server.client
        changes = server.call(_subscribe, server.kb)
        r = upload(server, ("birds/herons.md", HERONS), ("egrets.txt", EGRETS),
                   ("broken.pdf", b"%PDF-1.7 this is not a PDF at all"),
                   ("empty.txt", b""))
        assert r.status_code == 202, r.text
        body = r.json()
        job_id = body["job"]["id"]
        assert r.headers["location"] == f"/v1/jobs/{quote(job_id, safe=':')}"
        assert body["job"]["kind"] == "ingest" and body["job"]["status"] in ("queued", "running")
        assert [f["source"] for f in body["files"]] == [
            "upload://birds/herons.md", "upload://egrets.txt", "upload://broken.pdf",
            "upload://empty.txt"]
        assert body["files"][0]["size"] == len(HERONS)
        # clients see what the job works on, not where its files wait
        assert body["job"]["payload"]["files"] == [{"source": f["source"]} for f in body["files"]]
        assert "folder" not in body["job"]["payload"]

        events = server.events(job_id)
        assert [e for e, _ in events][-1] == "end" and events[-2][0] == "job"
        progress = [d["progress"] for e, d in events if e == "job"]
        assert progress == sorted(progress) and progress[-1] == 1.0
        # the job reported each file as it was done, with its result so far
        seen = server.call(_drain, server.kb, changes)
        # (files done while a report is being written are reported together)
        partial = [j.result for j in seen if j.result and id_text(j.id) == job_id]
        done = [p["done"] for p in partial]
        assert done[0] == 0 and done[-1] == 4 and done == sorted(done), done
        assert all(len(p.get("results", [])) == p["done"] for p in partial[:-1])
        fractions = [j.progress for j in seen if id_text(j.id) == job_id]
        assert fractions == sorted(fractions) and fractions[-1] == 1
        job = events[-2][1]
        assert job["status"] == "done" and job["error"] is None
        result = job["result"]
        assert result["counts"]["ingested"] == 2 and result["files"] == 4
        outcome = {r["source"]: r for r in result["results"]}
        assert outcome["upload://broken.pdf"]["status"] == "failed"
        assert outcome["upload://broken.pdf"]["reason"]
        assert outcome["upload://empty.txt"]["status"] in ("empty", "failed")
        assert outcome["upload://birds/herons.md"]["chunks"] >= 1
        # the files are gone once the job is done
        assert list(server.uploads.iterdir()) == []

        assert c.get(f"/v1/jobs/{job_id}").json()["status"] == "done"
        listed = c.get("/v1/jobs", params={"kind": "ingest", "status": "done"}).json()["jobs"]
        assert [j["id"] for j in listed] == [job_id]
        assert c.get("/v1/jobs", params={"status": "queued"}).json()["jobs"] == []
        # a finished job's stream is its state and the end
        assert [e for e, _ in server.events(job_id)] == ["job", "end"]

        # the same bytes again: unchanged, not stored twice
        again = server.wait_job(upload(server, ("egrets.txt", EGRETS)).json()["job"]["id"])
        assert again["result"]["counts"]["unchanged"] == 1
        assert c.get("/v1/stats").json()["documents"] == 2


def test_search_document_passage_delete(tmp_path: Path) -> None:
    with serve(tmp_path) as server:
        c = server.client
        ingest_birds(server)
        for mode in ("hybrid", "text", "vector"):
            r = c.get("/v1/search", params={"query": "little egret feet", "mode": mode})
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["mode"] == mode and body["count"] == len(body["hits"]) >= 1
        hits = c.get("/v1/search", params={"query": "little egret feet", "mode": "text"}
                     ).json()["hits"]
        top = hits[0]
        assert top["source"] == "upload://egrets.txt" and top["text_rank"] == 1
        post = c.post("/v1/search", json={"query": "little egret feet", "mode": "text"})
        assert post.json()["hits"][0]["chunk_id"] == top["chunk_id"]

        # the document, by id and by source, with the chunk's span in its text
        doc = c.get(f"/v1/documents/{top['document_id']}").json()
        assert doc["content"][top["char_start"]:top["char_end"]] == top["content"]
        assert any(s["chunk_id"] == top["chunk_id"] for s in doc["chunks"])
        by_source = c.get("/v1/documents/" + quote("upload://egrets.txt", safe="")).json()
        assert by_source["id"] == doc["id"]
        bare = c.get(f"/v1/documents/{top['document_id'].split(':', 1)[1]}")
        assert bare.json()["id"] == doc["id"]
        light = c.get(f"/v1/documents/{doc['id']}", params={"text": "false"}).json()
        assert light["content"] is None and light["chunks"] is None

        passage = c.get(f"/v1/chunks/{quote(top['chunk_id'], safe=':')}/passage",
                        params={"before": 0, "after": 0}).json()
        assert passage["text"] == top["content"] and passage["document_id"] == doc["id"]

        page = c.get("/v1/documents", params={"limit": 1}).json()
        assert page["total"] == 2 and len(page["documents"]) == 1
        assert "content" not in page["documents"][0] or page["documents"][0]["content"] is None
        second = c.get("/v1/documents", params={"limit": 1, "offset": 1}).json()
        assert second["documents"][0]["id"] != page["documents"][0]["id"]

        r = c.delete(f"/v1/documents/{doc['id']}")
        assert r.status_code == 200 and r.json()["deleted"] == doc["id"]
        assert_error(c.get(f"/v1/documents/{doc['id']}"), 404, "not_found")
        assert_error(c.delete(f"/v1/documents/{doc['id']}"), 404, "not_found")
        assert c.get("/v1/stats").json()["documents"] == 1


def test_pages_of_a_pdf(tmp_path: Path) -> None:
    with serve(tmp_path) as server:
        c = server.client
        r = upload(server, ("report.pdf", (SAMPLES / "quarterly-report.pdf").read_bytes()))
        job = server.wait_job(r.json()["job"]["id"])
        assert job["result"]["counts"]["ingested"] == 1, job
        doc = c.get("/v1/documents/" + quote("upload://report.pdf", safe="")).json()
        assert doc["page_count"] and doc["page_count"] >= 1
        first = c.get(f"/v1/documents/{doc['id']}/pages", params={"first": 1}).json()
        assert first["first_page"] == 1 and first["text"]
        assert_error(c.get(f"/v1/documents/{doc['id']}/pages", params={"first": 0}), 422)
        assert_error(c.get(f"/v1/documents/{doc['id']}/pages", params={"first": 999}), 404)
        assert_error(c.get(f"/v1/documents/{doc['id']}/pages"), 422)


def test_texts_notebooks_and_scoped_search(tmp_path: Path) -> None:
    with serve(tmp_path) as server:
        c = server.client
        r = c.post("/v1/notebooks", json={"name": "Birds", "description": "waders"})
        assert r.status_code == 201, r.text
        nb = r.json()
        assert nb["name"] == "Birds" and r.headers["location"].startswith("/v1/notebooks/")
        assert_error(c.post("/v1/notebooks", json={"name": "Birds"}), 409, "conflict")
        assert_error(c.post("/v1/notebooks", json={"name": ""}), 422, "invalid_parameter")
        assert_error(c.post("/v1/notebooks", json={"title": "x"}), 422)

        r = c.post("/v1/texts", json={
            "texts": [{"source": "note://heron", "text": HERONS.decode()},
                      {"source": "note://egret", "text": EGRETS.decode()}],
            "notebook": "Birds", "topics": ["waders"]})
        assert r.status_code == 200, r.text
        assert r.json()["counts"]["ingested"] == 2
        c.post("/v1/texts", json={"texts": [
            {"source": "note://other", "text": "Kingfishers dive for fish from a perch."}]})

        listed = c.get("/v1/notebooks").json()["notebooks"]
        assert [(n["name"], n["source_count"]) for n in listed] == [("Birds", 2)]
        shown = c.get("/v1/notebooks/Birds").json()
        assert shown["id"] == nb["id"] and shown["source_count"] == 2
        assert sorted(s["source"] for s in shown["sources"]) == ["note://egret", "note://heron"]
        assert all(s["topics"] == ["waders"] for s in shown["sources"])
        assert c.get(f"/v1/notebooks/{quote(nb['id'], safe=':')}").json()["name"] == "Birds"

        scoped = c.get("/v1/search", params={"query": "fish", "mode": "text",
                                             "notebook": "Birds"}).json()["hits"]
        assert scoped and {h["source"] for h in scoped} <= {"note://heron", "note://egret"}
        everywhere = c.get("/v1/search", params={"query": "fish", "mode": "text"}).json()
        assert "note://other" in {h["source"] for h in everywhere["hits"]}
        for mode in ("vector", "hybrid"):
            hits = c.get("/v1/search", params={"query": "fish", "mode": mode,
                                               "notebook": nb["id"]}).json()["hits"]
            assert {h["source"] for h in hits} <= {"note://heron", "note://egret"}, mode
        topics = c.post("/v1/search", json={"query": "fish", "mode": "text",
                                            "topics": ["waders"]}).json()["hits"]
        assert {h["source"] for h in topics} <= {"note://heron", "note://egret"}

        # a source in and out of a notebook (by source name or id)
        other = c.get("/v1/documents/note:%2F%2Fother").json()
        r = c.put(f"/v1/notebooks/Birds/sources/{other['id']}")
        assert r.status_code == 200 and r.json()["member"] is True
        assert c.get("/v1/notebooks/Birds").json()["source_count"] == 3
        r = c.delete("/v1/notebooks/Birds/sources/" + quote("note://other", safe=""))
        assert r.json()["member"] is False
        assert c.get("/v1/notebooks/Birds").json()["source_count"] == 2
        assert_error(c.put("/v1/notebooks/Birds/sources/documents:nope"), 404, "not_found")
        assert_error(c.put(f"/v1/notebooks/Nope/sources/{other['id']}"), 404, "not_found")

        # uploads into the notebook, with topics as form fields
        r = server.client.post("/v1/uploads", data={"notebook": "Birds", "topic": "upload"},
                               files=[("files", ("crane.txt", b"Cranes dance in spring."))])
        assert r.status_code == 202, r.text
        assert server.wait_job(r.json()["job"]["id"])["status"] == "done"
        shown = c.get("/v1/notebooks/Birds").json()
        crane = [s for s in shown["sources"] if s["source"] == "upload://crane.txt"]
        assert crane and crane[0]["topics"] == ["upload"]

        r = c.delete("/v1/notebooks/Birds", params={"delete_sources": "true"})
        assert r.status_code == 200 and r.json()["name"] == "Birds"
        assert_error(c.get("/v1/notebooks/Birds"), 404, "not_found")
        assert c.get("/v1/stats").json()["documents"] == 1  # only note://other stayed
        assert_error(c.delete("/v1/notebooks/Birds"), 404, "not_found")


def test_every_search_option(tmp_path: Path) -> None:
    with serve(tmp_path) as server:
        c = server.client
        ingest_birds(server)
        c.post("/v1/texts", json={"texts": [
            {"source": "note://x.html", "text": "<p>herons in html</p>",
             "mime_type": "text/html"}]})
        base = {"query": "herons", "limit": 5}
        for options in ({"fusion": "rrf", "rrf_k": 10}, {"fusion": "minmax"},
                        {"candidates": 20, "text_weight": 2.0, "vector_weight": 0.5},
                        {"per_document": True}, {"min_score": 0.0}, {"cutoff": False},
                        {"source": "upload://birds/*"}, {"mime_type": ["text/html"]},
                        {"created_after": "2000-01-01T00:00:00Z"},
                        {"created_before": (dt.datetime.now(dt.timezone.utc)
                                            + dt.timedelta(days=1)).isoformat()}):
            r = c.post("/v1/search", json={**base, **options})
            assert r.status_code == 200, (options, r.text)
            assert r.json()["count"] >= 1, options
        hits = c.post("/v1/search", json={**base, "source": "upload://birds/*"}).json()["hits"]
        assert {h["source"] for h in hits} == {"upload://birds/herons.md"}
        hits = c.get("/v1/search", params={**base, "mime_type": "text/html"}).json()["hits"]
        assert {h["mime_type"] for h in hits} == {"text/html"}
        future = c.post("/v1/search", json={**base, "created_after": "2999-01-01T00:00:00Z"})
        assert future.json()["count"] == 0
        per_doc = c.post("/v1/search", json={**base, "per_document": True}).json()["hits"]
        assert len({h["document_id"] for h in per_doc}) == len(per_doc)
        vector = [0.0] * 64
        vector[3] = 1.0
        r = c.post("/v1/search", json={"query_vector": vector, "mode": "vector",
                                       "cutoff": False})
        assert r.status_code == 200 and r.json()["count"] >= 1


BAD_SEARCHES: list[dict[str, Any]] = [
    {"query": "x", "mode": "fuzzy"}, {"query": "x", "fusion": "max"}, {"query": "x", "limit": 0},
    {"query": "x", "limit": -3}, {"query": "x", "limit": "ten"}, {"query": "x", "limit": 10**9},
    {"query": "x", "candidates": 0}, {"query": "x", "text_weight": -1},
    {"query": "x", "text_weight": 0, "vector_weight": 0}, {"query": "x", "rrf_k": -1},
    {"query": "x", "created_after": "yesterday"}, {"query": "x", "unknown": 1},
    {"query": "x" * 20_000}, {}, {"query": ""}, {"query": "x", "mime_type": "text/plain"},
    {"query_vector": [1.0, 2.0], "mode": "vector"}, {"query": "x", "per_document": "maybe"},
    {"query": "x", "min_score": "high"}, {"query": "x", "min_score": 1.5},
    {"query": "x", "min_score": -0.1}, {"query": None}, {"query": "x", "topics": "birds"},
    {"query": "x", "source": 5}, {"query": ["x"]},
]


@pytest.mark.parametrize("body", BAD_SEARCHES)
def test_bad_search_is_422(birds_server: Server, body: dict[str, Any]) -> None:
    error = assert_error(birds_server.client.post("/v1/search", json=body), 422)
    assert error["code"] in ("invalid_parameter", "invalid_vector") and error["message"]


@pytest.fixture(scope="module")
def birds_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with serve(tmp_path_factory.mktemp("birds")) as server:
        ingest_birds(server)
        yield server


def test_bad_search_queries(birds_server: Server) -> None:
    c = birds_server.client
    assert_error(c.get("/v1/search", params={"query": "x", "mode": "bogus"}), 422)
    assert_error(c.get("/v1/search", params={"query": "x", "limit": "many"}), 422)
    assert_error(c.get("/v1/search", params={"query": "x", "min_score": "nan"}), 422)
    assert_error(c.get("/v1/search", params={"query": "x", "nope": "1"}), 422)
    assert_error(c.get("/v1/search", params={"query": "x", "notebook": "Nope"}), 404)
    assert_error(c.post("/v1/search", content=b"{not json",
                        headers={"content-type": "application/json"}), 422)
    assert_error(c.post("/v1/search", content=b"[1, 2]",
                        headers={"content-type": "application/json"}), 422)
    # NaN is not JSON, and not a score
    assert_error(c.post("/v1/search", content=b'{"query": "x", "min_score": NaN}',
                        headers={"content-type": "application/json"}), 422)
    assert math.isnan(float("nan"))


def test_bad_input_everywhere_is_4xx(birds_server: Server) -> None:
    c = birds_server.client
    checks = [
        (c.get("/v1/documents", params={"limit": 0}), 422),
        (c.get("/v1/documents", params={"offset": -1}), 422),
        (c.get("/v1/documents", params={"limit": "all"}), 422),
        (c.get("/v1/documents", params={"notebook": "Nope"}), 404),
        (c.get("/v1/documents/documents:nope"), 404),
        (c.get("/v1/documents/" + quote("⟨weird⟩`id'\"", safe="")), 404),
        (c.get("/v1/documents/notebook:x"), 404),
        (c.get("/v1/chunks/chunks:nope/passage"), 404),
        (c.get("/v1/chunks/x/passage", params={"before": 99}), 422),
        (c.get("/v1/jobs/job:nope"), 404),
        (c.get("/v1/jobs/documents:x"), 404),
        (c.get("/v1/jobs/nope/events"), 404),
        (c.get("/v1/jobs", params={"status": "sleeping"}), 422),
        (c.get("/v1/jobs", params={"limit": 0}), 422),
        (c.get("/v1/notebooks/nope"), 404),
        (c.delete("/v1/notebooks/nope"), 404),
        (c.post("/v1/texts", json={"texts": []}), 422),
        (c.post("/v1/texts", json={"texts": [{"source": "", "text": "x"}]}), 422),
        # (a name no notebook has makes one; an id that is not there is not found)
        (c.post("/v1/texts", json={"texts": [{"source": "a", "text": "x"}],
                                   "notebook": "notebook:nope"}), 404),
        (c.post("/v1/texts", json={"texts": [{"source": "a", "text": "x"},
                                             {"source": "a", "text": "y"}]}), 422),
        (c.post("/v1/texts", json={"texts": [{"source": "a", "text": "x"}],
                                   "topics": [""]}), 422),
        (c.post("/v1/notebooks", content=b"x", headers={"content-type": "text/plain"}), 422),
        (c.patch("/v1/notebooks"), 405),
        (c.get("/v1/nothing-here"), 404),
    ]
    for response, status in checks:
        assert_error(response, status)


def test_upload_limits_and_bad_uploads(tmp_path: Path) -> None:
    with serve(tmp_path, max_file_bytes=1000, max_request_bytes=5000, max_files=3) as server:
        c = server.client
        error = assert_error(upload(server, ("big.txt", b"x" * 1001)), 413, "payload_too_large")
        assert "big.txt" in error["message"] and "1000" in error["message"]
        assert_error(upload(server, *[(f"f{i}.txt", b"x" * 900) for i in range(3)],
                            ("f3.txt", b"y")), 413, "payload_too_large")  # 4 files
        big_request = [(f"g{i}.txt", b"x" * 990) for i in range(3)]
        assert_error(c.post("/v1/uploads", files=[("files", f) for f in big_request],
                            data={"topic": "t" * 3000}), 413)
        assert_error(c.post("/v1/uploads", content=b"x" * 6000,
                            headers={"content-type": "multipart/form-data; boundary=b"}),
                     413, "payload_too_large")
        assert_error(c.post("/v1/uploads", json={"files": []}), 415, "unsupported_media_type")
        assert_error(c.post("/v1/uploads", data={"notebook": "x"}), 415)
        assert_error(c.post("/v1/uploads", files=[("note", (None, "hello"))]), 422)
        assert_error(upload(server, ("a.txt", b"1"), ("a.txt", b"2")), 422)
        assert_error(upload(server, ("../..", b"1")), 422)
        assert_error(upload(server, ("a.txt", b"1"), notebook="notebook:nope"), 404, "not_found")
        assert_error(c.post("/v1/uploads", data={"notebook": "notebook:nope"},
                            files=[("files", ("a.txt", b"1"))]), 404, "not_found")
        assert_error(c.post("/v1/uploads", data={"force": "perhaps"},
                            files=[("files", ("a.txt", b"1"))]), 422)
        assert_error(c.post("/v1/uploads", content=b"--b\r\nContent-Disposition: form-data;"
                            b' name="files"; filename="a.txt"\r\n\r\nabc',
                            headers={"content-type": "multipart/form-data; boundary=b"}), 422)
        assert_error(c.post("/v1/uploads", content=b"--b\r\ngarbage\r\n\r\n",
                            headers={"content-type": "multipart/form-data; boundary=b"}), 422)
        assert_error(c.post("/v1/texts", json={"texts": [{"source": "a", "text": "x" * 6000}]}),
                     413, "payload_too_large")
        # nothing was left behind by the refused uploads
        assert list(server.uploads.iterdir()) == []
        # names are cleaned up: no way out of the folder, the directories kept in the name
        r = upload(server, ("../../etc/passwd", b"root"), ("a\\b.txt", b"ab"))
        assert r.status_code == 202, r.text
        assert [f["source"] for f in r.json()["files"]] == ["upload://etc/passwd",
                                                            "upload://a/b.txt"]
        assert server.wait_job(r.json()["job"]["id"])["status"] == "done"
        # force as a query parameter or a form field
        r = upload(server, ("a.txt", b"ab"), force="true")
        assert r.json()["job"]["payload"]["force"] is True


def test_upload_names() -> None:
    from surrealdocs.faces.http.uploads import disk_name, source_name

    assert source_name("report.pdf") == "upload://report.pdf"
    assert source_name("../a/./b\\c\x00\x1f.md") == "upload://a/b/c.md"
    assert source_name(" dir / x.txt ") == "upload://dir/x.txt"
    assert disk_name(3, "upload://a/Q3 report (final).PDF") == "0003-Q3_report_final_.PDF"
    assert disk_name(0, "upload://.bashrc") == "0000-file.bashrc"
    assert disk_name(12, "upload://README") == "0012-README"


# ----- keys -------------------------------------------------------------------------------
def test_keys(tmp_path: Path) -> None:
    with serve(tmp_path) as server:
        c = server.client
        # no key in the store: loopback is open
        assert c.get("/v1/stats").status_code == 200
        assert c.get("/v1/stats", headers={"X-API-Key": "anything"}).status_code == 200
        _, rw = server.call(server.kb.keys.create, "writer")
        ro_key, ro = server.call(server.kb.keys.create, "reader", read_only=True)
        assert ro_key.read_only and rw.startswith("sd_") and len(rw) > 40
        bearer = {"Authorization": f"Bearer {rw}"}
        read_only = {"X-API-Key": ro}

        error = assert_error(c.get("/v1/stats"), 401, "unauthorized")
        assert "API key" in error["message"]
        assert c.get("/v1/stats").headers["www-authenticate"] == "Bearer"
        assert_error(c.get("/v1/stats", headers={"Authorization": f"Bearer {rw}x"}), 401)
        assert_error(c.get("/v1/stats", headers={"Authorization": f"Basic {rw}"}), 401)
        assert_error(c.get("/v1/stats", headers={"Authorization": "Bearer "}), 401)
        assert_error(c.get("/v1/stats", headers={"X-API-Key": "sd_" + "A" * 43}), 401)
        assert_error(c.post("/v1/search", json={"query": "x"}), 401)
        assert_error(c.post("/v1/notebooks", json={"name": "x"}), 401)
        assert_error(upload(server, ("a.txt", b"a")), 401)
        assert c.get("/v1/stats", headers=bearer).status_code == 200
        assert c.get("/v1/stats", headers=read_only).status_code == 200
        assert c.get("/v1/search", params={"query": "x"}, headers=read_only).status_code == 200

        # a read-only key reads, and cannot write
        for response in (upload(server, ("a.txt", b"a"), headers=read_only),
                         c.post("/v1/texts", headers=read_only,
                                json={"texts": [{"source": "a", "text": "b"}]}),
                         c.post("/v1/notebooks", json={"name": "x"}, headers=read_only),
                         c.delete("/v1/documents/documents:x", headers=read_only),
                         c.delete("/v1/notebooks/x", headers=read_only),
                         c.put("/v1/notebooks/x/sources/y", headers=read_only)):
            error = assert_error(response, 403, "forbidden")
            assert "read-only" in error["message"]
        assert not server.uploads.exists() or not list(server.uploads.iterdir())

        r = upload(server, ("a.txt", HERONS), headers=bearer)
        assert r.status_code == 202
        job = r.json()["job"]["id"]
        assert [e for e, _ in server.events(job, headers=read_only)][-1] == "end"
        assert_error(c.get(f"/v1/jobs/{job}/events"), 401)

        # the public endpoints and the page need no key
        for path in ("/v1/health", "/v1/ready", "/v1/info", "/", "/static/app.js",
                     "/openapi.json"):
            assert c.get(path).status_code == 200, path
        info = c.get("/v1/info", headers=read_only).json()
        assert info["auth_required"] and info["authenticated"] and not info["can_write"]
        assert info["key"] == {"name": "reader", "read_only": True}
        assert c.get("/v1/info").json()["authenticated"] is False

        # revoked: refused from then on
        server.call(server.kb.keys.revoke, "writer")
        assert_error(c.get("/v1/stats", headers=bearer), 401)
        assert c.get("/v1/stats", headers=read_only).status_code == 200
        # the table holds hashes, not keys
        (rows,) = server.call(server.kb.store.query, "SELECT * FROM api_key;")
        assert rows and all(rw not in str(r) and ro not in str(r) for r in rows)
        assert all(len(r["hash"]) == 64 for r in rows)


def test_off_loopback_every_request_needs_a_key(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    with serve(tmp_path, db=db):
        pass
    fatal: list[str] = []
    config = ServeConfig(settings=settings_for(tmp_path, db), host="0.0.0.0",
                         key_cache_seconds=0)
    with TestClient(create_app(config, on_fatal=fatal.append), base_url=BASE_URL) as client:
        for _ in range(int(PATIENCE / 0.02)):
            if client.get("/v1/ready").json()["state"] == "failed":
                break
            time.sleep(0.02)
        assert fatal and "without API keys" in fatal[0]
        assert_error(client.get("/v1/stats"), 503, "not_ready")


def test_cors(tmp_path: Path) -> None:
    preflight = {"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization,content-type"}
    with serve(tmp_path) as server:
        r = server.client.options("/v1/search", headers=preflight)
        assert "access-control-allow-origin" not in r.headers
        r = server.client.get("/v1/health", headers={"Origin": "https://app.example.com"})
        assert "access-control-allow-origin" not in r.headers
    with serve(tmp_path, cors_origins=("https://app.example.com",)) as server:
        r = server.client.options("/v1/search", headers=preflight)
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "https://app.example.com"
        assert "authorization" in r.headers["access-control-allow-headers"].lower()
        r = server.client.get("/v1/health", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in r.headers


def test_page_openapi_and_static(tmp_path: Path) -> None:
    with serve(tmp_path) as server:
        c = server.client
        page = c.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert 'id="q"' in page.text and "/static/app.js" in page.text
        for name in ("app.js", "app.css", "favicon.svg"):
            r = c.get(f"/static/{name}")
            assert r.status_code == 200 and r.headers["x-content-type-options"] == "nosniff"
        assert_error(c.get("/static/nope.js"), 404)
        assert c.get("/docs").status_code == 200
        spec = c.get("/openapi.json").json()
        paths = spec["paths"]
        for path in ("/v1/uploads", "/v1/texts", "/v1/search", "/v1/documents",
                     "/v1/documents/{ref}", "/v1/notebooks", "/v1/notebooks/{ref}/sources/{doc}",
                     "/v1/jobs", "/v1/jobs/{job_id}/events", "/v1/stats", "/v1/health",
                     "/v1/ready", "/v1/chunks/{chunk_id}/passage"):
            assert path in paths, path
        assert "multipart/form-data" in paths["/v1/uploads"]["post"]["requestBody"]["content"]
        assert "query_vector" in spec["components"]["schemas"]["SearchBody"]["properties"]


# ----- restarts ---------------------------------------------------------------------------
async def test_queued_upload_survives_a_restart(tmp_path: Path) -> None:
    """A job queued (its files on disk) when the process stopped runs at the next start,
    and its files go once it is done; folders no job waits for are swept."""
    settings = settings_for(tmp_path, str(tmp_path / "db"))
    kb = await KnowledgeBase.open(settings=settings)
    try:
        folder = kb.ingest_jobs.new_folder()
        (folder / "0000-herons.md").write_bytes(HERONS)
        job = await kb.ingest_jobs.submit([("upload://herons.md", folder / "0000-herons.md")],
                                          folder=folder, start=False)
        orphan = kb.ingest_jobs.new_folder()  # an upload cut off before its job was queued
        (orphan / "0000-x.txt").write_bytes(b"x")
    finally:
        await kb.close()
    assert (folder / "0000-herons.md").exists()

    def run_server() -> dict[str, Any]:
        with serve(tmp_path, settings=settings) as server:
            done = server.wait_job(id_text(job.id))
            assert not orphan.exists()
            hits = server.client.get("/v1/search", params={"query": "heron", "mode": "text"})
            assert hits.json()["hits"][0]["source"] == "upload://herons.md"
            return done

    done = await asyncio.to_thread(run_server)
    assert done["status"] == "done" and done["result"]["counts"]["ingested"] == 1
    assert done["outcome"] == "done"
    assert not folder.exists()


def test_a_done_job_says_which_files_gave_nothing() -> None:
    from surrealdocs.core.job_runner import Job

    counts = {"ingested": 3, "updated": 0, "unchanged": 0, "duplicate": 0, "empty": 1,
              "failed": 2, "skipped": 0}
    job = Job(id=RecordID("job", "x"), kind="ingest", status="done", result={"counts": counts})
    assert job.outcome == "done: 2 of 6 files failed, 1 without text"
    assert job.to_dict()["outcome"] == job.outcome
    counts.update(failed=0, empty=0)
    assert job.outcome == "done"
    assert Job(id=RecordID("job", "y"), kind="vectorize", status="running").outcome == "running"


def test_documents_list_takes_the_search_filters(tmp_path: Path) -> None:
    with serve(tmp_path) as server:
        c = server.client
        r = c.post("/v1/texts", json={"notebook": "Birds", "topics": ["wading"], "texts": [
            {"source": "note://herons.md", "text": "# Herons\n\nThey wade.",
             "mime_type": "text/markdown"},
            {"source": "note://egrets.txt", "text": "Egrets are white."}]})
        assert r.status_code == 200, r.text
        c.post("/v1/texts", json={"texts": [{"source": "note://owls.txt", "text": "Owls."}]})

        def sources(**params: Any) -> list[str]:
            body = c.get("/v1/documents", params=params).json()
            assert body["total"] == len(body["documents"]), body
            return sorted(d["source"] for d in body["documents"])

        assert sources() == ["note://egrets.txt", "note://herons.md", "note://owls.txt"]
        assert sources(source="*.md") == ["note://herons.md"]
        assert sources(mime_type="text/plain") == ["note://egrets.txt", "note://owls.txt"]
        assert sources(notebook="Birds") == ["note://egrets.txt", "note://herons.md"]
        assert sources(topics="wading") == ["note://egrets.txt", "note://herons.md"]
        assert sources(created_after="2999-01-01T00:00:00Z") == []
        assert sources(created_before="2999-01-01T00:00:00Z", source="*owls*") == [
            "note://owls.txt"]
        assert_error(c.get("/v1/documents", params={"source": ""}), 422)
