"""Property-based tests (hypothesis) of what users type: queries, source globs, names, and
bytes of any MIME type. Whatever the input, the answer is a result or a clear surrealdocs
error, never a crash, never something else than asked for."""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from surrealdb import AsyncSurreal

from surrealdocs import ConfigurationError, InvalidIdentifierError, KnowledgeBase, Settings
from surrealdocs.parts.filters import glob_to_regex
from surrealdocs.store.names import validate_identifier

FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def kb(loop: asyncio.AbstractEventLoop) -> Iterator[KnowledgeBase]:
    async def open_kb() -> KnowledgeBase:
        base = await KnowledgeBase.open(settings=Settings(db="mem://", model="hashing-64"))
        await base.ingest_texts({
            "/docs/a b/report[1].pdf": "Quarterly revenue grew in the north region.",
            "/docs/notes/x-y.md": "Notes about herons, egrets and storks.",
            "upload://q?.txt": "An upload with a question mark in its name.",
        })
        return base

    base = loop.run_until_complete(open_kb())
    yield base
    loop.run_until_complete(base.close())


# ----- queries ---------------------------------------------------------------------------
@FAST
@given(query=st.text(max_size=300), mode=st.sampled_from(["text", "vector", "hybrid"]))
def test_any_query_gives_hits_or_a_clear_error(kb: KnowledgeBase,
                                                loop: asyncio.AbstractEventLoop,
                                                query: str, mode: str) -> None:
    try:
        hits = loop.run_until_complete(kb.search(query, mode=mode, limit=5))
    except ConfigurationError as exc:
        assert not query.strip() and "empty" in str(exc)
        return
    assert query.strip()
    assert len(hits) <= 5 and len({h.chunk_id for h in hits}) == len(hits)
    assert all(h.source for h in hits)


# ----- source globs: the engine's regular expression matches what fnmatch would ----------
PATH_CHARS = st.sampled_from(list("ab/.-_ ?*[]!^\\"))
PATTERN_CHARS = st.sampled_from(list("ab/.-_ ?*[]!^\\"))


def reference(pattern: str, path: str) -> bool:
    """fnmatch's rules (``*`` crosses ``/``); a relative pattern matches at the end of the
    path or the whole of it."""
    if "://" in pattern or pattern.startswith(("/", "*")):
        return fnmatch.fnmatchcase(path, pattern)
    return fnmatch.fnmatchcase(path, "*/" + pattern) or fnmatch.fnmatchcase(path, pattern)


@pytest.fixture(scope="module")
def engine(loop: asyncio.AbstractEventLoop) -> Iterator[AsyncSurreal]:
    db = AsyncSurreal("mem://")
    loop.run_until_complete(db.connect())
    loop.run_until_complete(db.use("t", "t"))
    yield db
    loop.run_until_complete(db.close())


@FAST
@given(pattern=st.text(PATTERN_CHARS, min_size=1, max_size=12),
       paths=st.lists(st.text(PATH_CHARS, max_size=12), min_size=1, max_size=8))
def test_globs_match_as_fnmatch_does(engine: AsyncSurreal, loop: asyncio.AbstractEventLoop,
                                     pattern: str, paths: list[str]) -> None:
    regex = glob_to_regex(pattern)
    (got,) = loop.run_until_complete(engine.query(
        "RETURN $paths.map(|$p| string::matches($p, $re));", {"paths": paths, "re": regex}))
    assert got == [reference(pattern, p) for p in paths], (pattern, regex)


@FAST
@given(glob=st.text(max_size=20))
def test_any_source_filter_gives_hits_or_a_clear_error(kb: KnowledgeBase,
                                                        loop: asyncio.AbstractEventLoop,
                                                        glob: str) -> None:
    try:
        hits = loop.run_until_complete(kb.search("revenue herons upload", mode="text",
                                                 source=glob, limit=10))
    except ConfigurationError:
        assert not glob.strip() or "\x00" in glob
        return
    assert all(reference(glob, h.source) for h in hits)


# ----- names -----------------------------------------------------------------------------
@FAST
@example(name="A\n")  # Hypothesis found it: `$` matched before a trailing newline
@given(name=st.text(max_size=80))
def test_identifiers_are_safe_or_refused(name: str) -> None:
    try:
        ok = validate_identifier(name)
    except InvalidIdentifierError:
        return
    assert ok == name and ok.replace("_", "a").isascii() and ok.replace("_", "a").isalnum()
    assert not ok[0].isdigit() and len(ok) <= 64


@FAST
@given(name=st.text(min_size=1, max_size=60))
def test_any_notebook_name_round_trips(kb: KnowledgeBase, loop: asyncio.AbstractEventLoop,
                                       name: str) -> None:
    async def check() -> None:
        try:
            nb = await kb.notebooks.create_notebook(name)
        except ConfigurationError:
            assert not name.strip() or await kb.notebooks.storage.notebooks.find(name)
            return
        found = await kb.notebooks.get_notebook(name)
        assert found.id == nb.id and found.name == name
        await kb.notebooks.delete_notebook(nb)

    loop.run_until_complete(check())


# ----- bytes of any declared type --------------------------------------------------------
MIMES = st.sampled_from(["text/plain", "text/html", "text/markdown", "application/pdf",
                         "image/png", "application/json", "application/octet-stream",
                         "application/x-nonsense", "", "text/plain; charset=utf-8"])


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=2000) | st.text(max_size=2000).map(str.encode), mime=MIMES)
def test_any_bytes_give_a_result_with_a_reason(kb: KnowledgeBase,
                                               loop: asyncio.AbstractEventLoop,
                                               data: bytes, mime: str) -> None:
    result = loop.run_until_complete(
        kb.ingest_bytes(data, mime_type=mime, source=f"prop://{hash((data, mime))}"))
    assert result.status in ("ingested", "duplicate", "unchanged", "empty", "failed")
    if result.status in ("failed", "empty"):
        assert result.reason
    if result.document_id:
        doc = loop.run_until_complete(kb.document(result.document_id))
        assert doc.content and "\x00" not in doc.content


def test_names_checked_by_patterns_refuse_a_trailing_newline(tmp_path) -> None:
    """Every name checked by a pattern refuses "name\n" (a pattern's `$` accepts it)."""
    from surrealdocs.faces.http import ServeConfig

    with pytest.raises(InvalidIdentifierError):
        validate_identifier("chunks\n")
    settings = Settings(db=str(tmp_path / "kb"), model="hashing-64")
    with pytest.raises(ConfigurationError, match="CORS origin"):
        ServeConfig(settings=settings, cors_origins=("https://app.example.com\n",))
    with pytest.raises(ConfigurationError, match="allowed host"):
        ServeConfig(settings=settings, allowed_hosts=("proxy.example.com\n",))

    async def key() -> None:
        async with await KnowledgeBase.open(settings=settings) as kb:
            with pytest.raises(ConfigurationError, match="invalid key name"):
                await kb.keys.create("laptop\n")
    asyncio.run(key())
