"""Metadata of the user's own, and filters on it: parsed alike in every face, answered by the
store's facets index exactly as :func:`surrealdocs.parts.metadata.matches` says, over every
document (brute force), in every face."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import StoreFactory
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.errors import ConfigurationError
from surrealdocs.faces.cli import app
from surrealdocs.parts.metadata import (
    AllOf,
    AnyOf,
    Condition,
    MetaFilter,
    matches,
    parse_filter,
    parse_meta,
    parse_where,
    typed,
)
from surrealdocs.parts.results import id_text

UTC = dt.timezone.utc
WORDS = ("heron egret crane stork ibis wader marsh reed water fish mud nest wing "
         "flight river shore tide").split()
runner = CliRunner()


# ----- parsing ----------------------------------------------------------------------------
def test_values_are_typed_alike_in_every_form() -> None:
    assert typed("42") == 42 and isinstance(typed("42"), int)
    assert typed("-3.5") == -3.5 and typed("1e3") == 1000.0
    assert typed("true") is True and typed("False") is False
    assert typed("2024-05-01") == dt.datetime(2024, 5, 1, tzinfo=UTC)
    assert typed("2024-05-01T10:30:00+02:00") == dt.datetime(
        2024, 5, 1, 8, 30, tzinfo=UTC)
    assert typed('"42"') == "42" and typed("acme corp") == "acme corp"
    assert typed("nan") == "nan" and typed("2024-13-45") == "2024-13-45"
    assert parse_meta(["team=a", "tag=x", "tag=y", "year=2024", "ok=true"]) == {
        "team": "a", "tag": ["x", "y"], "year": 2024, "ok": True}
    # the JSON filter reads ISO text as a time too, so every face compares times with times
    assert parse_filter({"d": {"$gte": "2024-01-01"}}) == Condition(
        "d", "gte", dt.datetime(2024, 1, 1, tzinfo=UTC))


def test_where_texts_and_json_objects_make_the_same_filters() -> None:
    assert parse_where(["team=a", "year>=2020", "tags in x,y", "team exists",
                        "owner not exists", "n!=3", "n<5", "d<=2024-02-01",
                        "tags not in z"]) == AllOf((
        Condition("team", "eq", "a"), Condition("year", "gte", 2020),
        Condition("tags", "in", ["x", "y"]), Condition("team", "exists", True),
        Condition("owner", "exists", False), Condition("n", "ne", 3),
        Condition("n", "lt", 5), Condition("d", "lte", dt.datetime(2024, 2, 1, tzinfo=UTC)),
        Condition("tags", "nin", ["z"])))
    json_form = {"$or": [{"team": "a", "year": {"$gte": 2020}},
                         {"tags": {"$in": ["x", "y"]}}]}
    parsed = parse_filter(json_form)
    assert parsed == AnyOf((AllOf((Condition("team", "eq", "a"),
                                   Condition("year", "gte", 2020))),
                            Condition("tags", "in", ["x", "y"])))
    assert parse_filter(parsed.to_json()) == parsed  # the wire form round-trips


@pytest.mark.parametrize("bad", ["team", "=a", "team=", "year>", "tags in", "tags in a,,b",
                                 "x exists y", "a b=c"])
def test_a_bad_where_text_is_named(bad: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_where([bad])


@pytest.mark.parametrize("bad", [[], "x", {"$nor": []}, {"a": {"$regex": "x"}},
                                 {"a": {"$in": "x"}}, {"a": {}}, {"$and": []},
                                 {"a": {"$exists": "yes"}}, {"a": {"b": 1}}, {"a": None}])
def test_a_bad_json_filter_is_named(bad: Any) -> None:
    with pytest.raises(ConfigurationError):
        parse_filter(bad)


def test_bad_metadata_is_refused() -> None:
    for bad in (["novalue"], ["$key=1"], ["a b=1"]):
        with pytest.raises(ConfigurationError):
            parse_meta(bad)


# ----- the store's answer against brute force ------------------------------------------------
def _metadata(rng: random.Random, n: int) -> dict[str, Any]:
    """A document's metadata: some keys missing, numbers as ints and floats, lists, times,
    booleans, a long string (kept, never matched) and a nested object (kept, never
    matched)."""
    out: dict[str, Any] = {}
    if rng.random() < 0.85:
        out["team"] = rng.choice(["red", "blue", "green", "Red"])
    if rng.random() < 0.8:
        out["year"] = rng.choice([2019, 2020, 2021, 2022, 2020.0, 2021.5])
    if rng.random() < 0.7:
        out["tags"] = rng.sample(["a", "b", "c", "d"], rng.randint(0, 3))
    if rng.random() < 0.7:
        out["when"] = dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(days=rng.randint(0, 60))
    if rng.random() < 0.6:
        out["public"] = rng.random() < 0.5
    if rng.random() < 0.3:
        out["year_text"] = str(rng.choice([2020, 2021]))  # a string: never equal to 2020
    if n % 7 == 0:
        out["long"] = "z" * 600
        out["nested"] = {"team": "red"}
    return out


def _filters(rng: random.Random, count: int) -> list[MetaFilter]:
    values = {"team": ["red", "blue", "green", "Red", "purple"],
              "year": [2019, 2020, 2020.0, 2021, 2021.5, 2023, "2020"],
              "tags": ["a", "b", "c", "d", "e"],
              "when": [dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(days=d)
                       for d in (0, 10, 30, 59, 90)],
              "public": [True, False], "year_text": ["2020", 2020],
              "long": ["z" * 10], "nested": ["red"]}

    def leaf() -> MetaFilter:
        key = rng.choice(list(values))
        op = rng.choice(["eq", "ne", "lt", "lte", "gt", "gte", "in", "nin", "exists"])
        if op in ("in", "nin"):
            return Condition(key, op, rng.sample(values[key], min(len(values[key]),
                                                                  rng.randint(1, 2))))
        if op == "exists":
            return Condition(key, op, rng.random() < 0.7)
        return Condition(key, op, rng.choice(values[key]))

    def node(depth: int) -> MetaFilter:
        if depth > 1 or rng.random() < 0.5:
            return leaf()
        items = tuple(node(depth + 1) for _ in range(rng.randint(2, 3)))
        return AllOf(items) if rng.random() < 0.5 else AnyOf(items)

    return [node(0) for _ in range(count)]


async def _corpus(kb: KnowledgeBase, documents: int = 60, seed: int = 7) -> dict[str, Any]:
    """Documents with metadata; their metadata as stored, by document id."""
    rng = random.Random(seed)
    for n in range(documents):
        text = " ".join(rng.choice(WORDS) for _ in range(40)) + f" item{n}"
        report = await kb.ingest_texts({f"note://{n}": text},
                                       metadata=_metadata(rng, n) or None)
        assert report.results[0].status == "ingested", report.results[0]
    rows = await kb.storage.documents.select(filters=None)
    return {id_text(r["id"]): r.get("metadata") or {} for r in rows}


async def _brute(kb: KnowledgeBase, where: MetaFilter) -> set[str]:
    stored = {id_text(r["id"]): r.get("metadata") or {}
              for r in await kb.storage.documents.select(filters=None)}
    return {doc for doc, metadata in stored.items() if matches(metadata, where)}


async def test_filters_find_what_brute_force_finds(open_kb: StoreFactory) -> None:
    kb = await open_kb()
    await _corpus(kb)
    rng = random.Random(11)
    chosen = 0
    for where in _filters(rng, 120):
        expected = await _brute(kb, where)
        listed = {d.id for d in await kb.documents(where=where, limit=1000)}
        assert listed == expected, where
        assert await kb.count_documents(where=where) == len(expected)
        chosen += 0 < len(expected) < 60
    assert chosen > 40  # the filters choose, not all or nothing


async def test_a_filtered_search_is_the_unfiltered_one_with_others_left_out(
        open_kb: StoreFactory) -> None:
    kb = await open_kb()
    await _corpus(kb)
    rng = random.Random(5)
    for where in _filters(rng, 25):
        allowed = await _brute(kb, where)
        for mode in ("text", "vector"):
            everything = await kb.search("heron marsh fish", mode=mode, limit=1000,
                                         cutoff=False)
            want = [h.chunk_id for h in everything if h.document_id in allowed][:15]
            got = await kb.search("heron marsh fish", mode=mode, limit=15, cutoff=False,
                                  where=where)
            assert [h.chunk_id for h in got] == want, (mode, where)
        hybrid = await kb.search("heron marsh fish", limit=15, cutoff=False, where=where)
        assert {h.document_id for h in hybrid} <= allowed
        assert len(hybrid) == min(15, len(allowed))


async def test_metadata_round_trips_and_changes_without_re_embedding(
        tmp_path: Path, open_kb: StoreFactory) -> None:
    kb = await open_kb()
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# Herons\n\nHerons wade in the marsh.\n")
    (folder / "b.md").write_text("# Egrets\n\nEgrets are white herons.\n")
    report = await kb.ingest([folder], metadata={"team": "red", "year": 2024})
    assert report.counts["ingested"] == 2
    doc = await kb.document(str(folder / "a.md"), text=False)
    assert doc.metadata is not None and doc.metadata["team"] == "red"
    chunks_before = (await kb.stats()).chunks
    metadata = await kb.metadata.set(str(folder / "a.md"), {"team": "blue", "tags": ["x"]},
                                     unset=["year"])
    assert metadata["team"] == "blue" and "year" not in metadata
    assert (await kb.stats()).chunks == chunks_before
    blue = await kb.search("herons", mode="text", where={"team": "blue"})
    assert {h.source for h in blue} == {str(folder / "a.md")}
    assert blue[0].metadata == {"team": "blue", "tags": ["x"]}  # the user's own, in hits
    # a new version of the file keeps the user's metadata
    (folder / "a.md").write_text("# Herons\n\nHerons wade in the marsh at dawn.\n")
    await kb.ingest([folder])
    doc = await kb.document(str(folder / "a.md"), text=False)
    assert doc.metadata is not None
    assert doc.metadata["team"] == "blue" and doc.metadata["tags"] == ["x"]
    assert [h.source for h in await kb.search("dawn", mode="text", where="team=blue")] == [
        str(folder / "a.md")]
    # unchanged files take metadata given again
    await kb.ingest([folder], metadata={"reviewed": True})
    assert await kb.count_documents(where="reviewed=true") == 2
    # a deleted document leaves no facet behind
    gone = (await kb.document(str(folder / "b.md"), text=False)).id
    await kb.delete(str(folder / "b.md"))
    facets, docs = await kb.store.query("SELECT VALUE document FROM documents_facets;"
                                        " SELECT VALUE id FROM documents;")
    assert facets and {id_text(d) for d in facets} == {id_text(d) for d in docs}
    assert gone not in {id_text(d) for d in facets}
    with pytest.raises(Exception, match="no document"):
        await kb.metadata.set("note://missing", {"a": 1})


async def test_a_store_of_the_last_schema_gets_its_facets(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        await kb.ingest_texts({"n://1": "herons", "n://2": "egrets"})
        await kb.metadata.set("n://1", {"team": "red"})
        # back to schema 16: no facets table, no event, the metadata in the documents
        await kb.store.query("REMOVE TABLE documents_facets;"
                             " REMOVE EVENT documents_facets_of_metadata ON documents;"
                             " UPSERT surrealdocs_meta:schema SET version = 16;")
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        assert [d.source for d in await kb.documents(where="team=red")] == ["n://1"]


async def test_the_facade_layout_filters_by_reading_its_documents(
        open_kb: StoreFactory) -> None:
    kb = await open_kb(separate_vectors=False)
    stored = await _corpus(kb, documents=20)
    (info,) = await kb.store.query("INFO FOR DB;")
    assert "documents_facets" not in info["tables"]
    for where in _filters(random.Random(3), 30):
        listed = {d.id for d in await kb.documents(where=where, limit=1000)}
        assert listed == {d for d, m in stored.items() if matches(m, where)}, where


# ----- every face -------------------------------------------------------------------------
def _cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_the_command_line_sets_and_filters_metadata(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    store = ("--db", db, "--model", "hashing-64")
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(6):
        (docs / f"n{n}.txt").write_text(f"herons and egrets number {n}\n")
    code, out = _cli("ingest", str(docs), "--meta", "team=red", "--meta", "year=2023", *store)
    assert code == 0, out
    code, out = _cli("meta", str(docs / "n1.txt"), "team=blue", "tag=x", "tag=y",
                     "--unset", "year", *store)
    assert code == 0 and "team: blue" in out, out
    code, out = _cli("show", str(docs / "n1.txt"), *store)
    assert code == 0 and "team: blue" in out and 'tag: ["x", "y"]' in out, out
    code, out = _cli("search", "herons", "--mode", "text", "--where", "team=blue",
                     "--json", *store)
    assert code == 0, out
    hits = json.loads(out)
    assert [h["source"] for h in hits] == [str(docs / "n1.txt")]
    assert hits[0]["metadata"] == {"team": "blue", "tag": ["x", "y"]}
    code, out = _cli("list", "--where", "team=red", "--where", "year>=2023", "--json", *store)
    assert code == 0 and json.loads(out)["total"] == 5, out
    code, out = _cli("delete", "--where", "team=blue", "--dry-run", *store)
    assert code == 0 and "would delete" in out, out
    code, out = _cli("delete", "--where", "team=blue", *store)
    assert code == 0 and "deleted" in out, out
    code, out = _cli("list", "--json", *store)
    assert json.loads(out)["total"] == 5
    for bad in (("search", "herons", "--where", "team"), ("ingest", str(docs), "--meta", "x"),
                ("meta", str(docs / "n2.txt"))):
        code, out = _cli(*bad, *store)
        assert code == 2 and "Traceback" not in out, (bad, out)
    code, out = _cli("meta", "note://none", "a=1", *store)
    assert code == 2 and "no document" in out, out


def test_the_http_api_takes_metadata_and_filters(tmp_path: Path) -> None:
    from server_helpers import serve

    with serve(tmp_path) as server:
        c = server.client
        r = c.post("/v1/texts", json={"texts": [
            {"source": f"note://{n}", "text": f"herons and egrets {n}"} for n in range(4)],
            "metadata": {"team": "red", "when": "2024-03-01"}})
        assert r.status_code == 200, r.text
        r = c.post("/v1/uploads", data={"metadata": json.dumps({"team": "blue"})},
                   files=[("files", ("up.txt", b"herons upload"))])
        assert r.status_code == 202, r.text
        assert server.wait_job(r.json()["job"]["id"])["status"] == "done"
        r = c.patch("/v1/documents/note://0", json={"metadata": {"team": "green"},
                                                    "unset": ["when"]})
        assert r.status_code == 200 and r.json()["metadata"]["team"] == "green", r.text
        found = c.post("/v1/search", json={"query": "herons", "mode": "text",
                                           "where": {"team": {"$in": ["blue", "green"]}}})
        assert found.status_code == 200, found.text
        assert sorted(h["source"] for h in found.json()["hits"]) == [
            "note://0", "upload://up.txt"]
        got = c.get("/v1/search", params=[("query", "herons"), ("mode", "text"),
                                          ("where", "team=red"), ("where", "when>=2024-01-01")])
        assert got.status_code == 200, got.text
        assert sorted(h["source"] for h in got.json()["hits"]) == [
            "note://1", "note://2", "note://3"]
        listed = c.get("/v1/documents", params={"where": "team=blue"}).json()
        assert [d["source"] for d in listed["documents"]] == ["upload://up.txt"]
        bad = c.post("/v1/search", json={"query": "herons", "where": {"team": {"$re": "x"}}})
        assert bad.status_code == 422 and "$re" in bad.text, bad.text
        bad = c.post("/v1/uploads", data={"metadata": "[1]"},
                     files=[("files", ("x.txt", b"x"))])
        assert bad.status_code == 422, bad.text


async def test_the_mcp_tools_take_metadata_and_filters() -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from surrealdocs.faces.mcp import build_mcp_server

    settings = Settings(db="mem://", model="hashing-64")
    async with await KnowledgeBase.open(settings=settings) as kb, \
            Client(build_mcp_server(kb, allow_writes=True)) as client:
            for n, team in enumerate(["red", "blue", "red"]):
                result = await client.call_tool("add_text", {
                    "source": f"note://{n}", "text": f"herons wading {n}",
                    "metadata": {"team": team, "n": n}})
                assert not result.is_error, result.content
            result = await client.call_tool("search", {
                "query": "herons", "mode": "text", "where": {"$and": [
                    {"team": "red"}, {"n": {"$gt": 0}}]}})
            found = result.structured_content
            assert found is not None
            assert [h["source"] for h in found["hits"]] == ["note://2"]
            assert found["hits"][0]["metadata"] == {"team": "red", "n": 2}
            bad = await client.call_tool("search", {"query": "herons",
                                                    "where": {"n": {"$bad": 1}}})
            assert bad.is_error


async def test_the_retrievers_translate_their_frameworks_filters(
        open_kb: StoreFactory) -> None:
    kb = await open_kb()
    await _corpus(kb, documents=30)
    pytest.importorskip("langchain_core")
    from surrealdocs.integrations.langchain import SurrealDocsRetriever as LangChainRetriever

    where = {"$or": [{"team": "red"}, {"year": {"$gte": 2021}}]}
    allowed = await _brute(kb, parse_filter(where))
    retriever = LangChainRetriever(kb=kb, mode="text", k=50, cutoff=False, filter=where)
    docs = await retriever.ainvoke("heron marsh")
    assert docs and {d.metadata["document_id"] for d in docs} <= allowed
    assert all(d.metadata.get("team") == "red" or d.metadata.get("year", 0) >= 2021
               for d in docs)
    per_call = await retriever.ainvoke("heron marsh", filter={"team": "blue"})
    assert {d.metadata["team"] for d in per_call} == {"blue"}

    pytest.importorskip("llama_index.core")
    from llama_index.core.vector_stores.types import (
        FilterCondition,
        FilterOperator,
        MetadataFilter,
        MetadataFilters,
    )

    from surrealdocs.integrations.llamaindex import SurrealDocsRetriever as LlamaRetriever
    filters = MetadataFilters(filters=[
        MetadataFilter(key="team", value="red", operator=FilterOperator.EQ),
        MetadataFilters(filters=[
            MetadataFilter(key="year", value=2021, operator=FilterOperator.GTE),
            MetadataFilter(key="tags", value="a", operator=FilterOperator.CONTAINS),
            MetadataFilter(key="public", operator=FilterOperator.IS_EMPTY, value=None)],
            condition=FilterCondition.OR)], condition=FilterCondition.AND)
    nodes = await LlamaRetriever(kb, mode="text", similarity_top_k=50, cutoff=False,
                                 filters=filters).aretrieve("heron marsh")
    expected = await _brute(kb, AllOf((Condition("team", "eq", "red"), AnyOf((
        Condition("year", "gte", 2021), Condition("tags", "eq", "a"),
        Condition("public", "exists", False))))))
    assert nodes and {n.node.ref_doc_id for n in nodes} <= expected
    with pytest.raises(ConfigurationError, match="TEXT_MATCH"):
        LlamaRetriever(kb, filters=MetadataFilters(filters=[MetadataFilter(
            key="team", value="r", operator=FilterOperator.TEXT_MATCH)]))


def test_sync_sets_metadata_on_the_folders_documents(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Notes\n\nherons\n")
    code, out = _cli("sync", str(docs), "--meta", "project=birds", "--db", db, "--model",
                     "hashing-64")
    assert code == 0, out
    code, out = _cli("list", "--where", "project=birds", "--json", "--db", db, "--model",
                     "hashing-64")
    assert code == 0 and json.loads(out)["total"] == 1, out


# ----- Markdown front matter --------------------------------------------------------------
def test_front_matter_is_read_safely() -> None:
    from surrealdocs.parts.front_matter import split_front_matter

    found = split_front_matter(b"---\ntitle: Notes\nyear: 2024\ntags: [a, b]\n"
                               b"day: 2024-05-01\n---\n# Heading\n\nText.\n")
    assert found is not None
    front, rest = found
    assert front == {"title": "Notes", "year": 2024, "tags": ["a", "b"],
                     "day": dt.datetime(2024, 5, 1, tzinfo=UTC)}
    assert rest == b"# Heading\n\nText.\n"
    bomb = b"---\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a]\n" \
           b"c: [*b, *b, *b, *b, *b, *b, *b, *b]\n---\nText.\n"
    for unread in (bomb, b"---\n- a list\n---\nText.\n", b"---\ntitle: [unclosed\n---\nx\n",
                   b"---\ntitle: no end\n\nText.\n", b"Text first\n---\na: 1\n---\n",
                   b"---\n!!python/object:os.system ls\n---\nx\n"):
        assert split_front_matter(unread) is None, unread


async def test_front_matter_becomes_metadata_not_text(tmp_path: Path,
                                                      open_kb: StoreFactory) -> None:
    kb = await open_kb()
    note = tmp_path / "note.md"
    note.write_text("---\ntitle: Heron notes\nteam: red\nyear: 2024\n---\n\n# Herons\n\n"
                    "Herons wade.\n")
    await kb.ingest([note])
    doc = await kb.document(str(note))
    assert doc.title == "Heron notes"
    assert "team" not in (doc.content or "") and "Number(" not in (doc.content or "")
    assert doc.metadata is not None and doc.metadata["team"] == "red"
    assert [d.source for d in await kb.documents(where=["team=red", "year>=2024"])] == [
        str(note)]


async def test_an_archive_carries_metadata_and_its_filters(tmp_path: Path) -> None:
    source = str(tmp_path / "a")
    async with await KnowledgeBase.open(source, model="hashing-64") as kb:
        stored = await _corpus(kb, documents=25)
        with (tmp_path / "kb.tar").open("wb") as out:
            await kb.export(out)
    target = str(tmp_path / "b")
    with (tmp_path / "kb.tar").open("rb") as src:
        await KnowledgeBase.import_archive(src, target)
    async with await KnowledgeBase.open(target) as kb:
        for where in _filters(random.Random(9), 20):
            listed = {d.id for d in await kb.documents(where=where, limit=1000)}
            assert listed == {d for d, m in stored.items() if matches(m, where)}, where


def test_every_face_filters_as_brute_force_does(tmp_path: Path) -> None:
    """Random filters through the HTTP API (JSON), MCP's search tool and the command line
    (--where, conjunctions) find the documents brute force finds."""
    import asyncio

    from server_helpers import serve

    db = str(tmp_path / "kb")

    async def build() -> dict[str, Any]:
        async with await KnowledgeBase.open(db, model="hashing-64") as kb:
            return await _corpus(kb, documents=40, seed=21)

    stored = asyncio.run(build())
    filters = _filters(random.Random(17), 30)

    def allowed(where: MetaFilter) -> set[str]:
        return {d for d, m in stored.items() if matches(m, where)}

    def where_texts(where: MetaFilter) -> list[str] | None:
        """The filter as --where texts, when it is a conjunction of conditions."""
        items = where.items if isinstance(where, AllOf) else (where,)
        if not all(isinstance(i, Condition) for i in items):
            return None
        out = []
        for c in items:
            assert isinstance(c, Condition)
            value = c.value
            if isinstance(value, str) and (value != value.strip() or "," in value
                                           or typed(value) != value):
                return None
            shown = {True: "true", False: "false"}.get(value, value) \
                if isinstance(value, bool) else value
            if isinstance(shown, dt.datetime):
                shown = shown.isoformat()
            if c.op in ("in", "nin"):
                if any(not isinstance(v, (int, float, str)) or isinstance(v, bool)
                       or (isinstance(v, str) and typed(v) != v) for v in value):
                    return None
                word = "in" if c.op == "in" else "not in"
                out.append(f"{c.key} {word} {','.join(str(v) for v in value)}")
            elif c.op == "exists":
                out.append(f"{c.key} {'exists' if value else 'not exists'}")
            else:
                symbol = {"eq": "=", "ne": "!=", "lt": "<", "lte": "<=", "gt": ">",
                          "gte": ">="}[c.op]
                out.append(f"{c.key}{symbol}{shown}")
        return out

    texts_checked = 0
    for where in filters:
        texts = where_texts(where)
        if texts is None:
            continue
        result = runner.invoke(app, ["list", "--json", "--limit", "1000", "--db", db,
                                     "--model", "hashing-64",
                                     *[a for t in texts for a in ("--where", t)]])
        assert result.exit_code == 0, result.output
        listed = {d["id"] for d in json.loads(result.stdout)["documents"]}
        assert listed == allowed(where), (texts, where)
        texts_checked += 1
    assert texts_checked >= 8

    with serve(tmp_path, db=db) as server:
        for where in filters:
            found = server.client.post("/v1/search", json={
                "query": "heron marsh fish", "mode": "text", "limit": 1000, "cutoff": False,
                "where": where.to_json()})
            assert found.status_code == 200, found.text
            docs = {h["document_id"] for h in found.json()["hits"]}
            assert docs <= allowed(where), where
            unfiltered = server.client.post("/v1/search", json={
                "query": "heron marsh fish", "mode": "text", "limit": 1000, "cutoff": False})
            everyone = {h["document_id"] for h in unfiltered.json()["hits"]}
            assert docs == everyone & allowed(where), where


async def test_the_mcp_search_filters_as_brute_force_does(open_kb: StoreFactory) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from surrealdocs.faces.mcp import build_mcp_server

    kb = await open_kb()
    stored = await _corpus(kb, documents=30, seed=4)
    async with Client(build_mcp_server(kb, max_chars=200_000)) as client:
        unfiltered = (await client.call_tool("search", {
            "query": "heron marsh fish", "mode": "text", "limit": 50, "snippet_chars": 0,
            "cutoff": False})).structured_content
        assert "truncated" not in unfiltered  # every hit is there
        everyone = {h["document_id"] for h in unfiltered["hits"]}
        for where in _filters(random.Random(8), 25):
            result = await client.call_tool("search", {
                "query": "heron marsh fish", "mode": "text", "limit": 50, "cutoff": False,
                "snippet_chars": 0, "where": where.to_json()})
            assert not result.is_error, result.content
            docs = {h["document_id"] for h in result.structured_content["hits"]}
            expected = {d for d, m in stored.items() if matches(m, where)}
            assert docs == everyone & expected, where
