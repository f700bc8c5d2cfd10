"""Every face offers every option of a search under the core's name for it: the fields of
:class:`~surrealdocs.core.search_request.SearchRequest`. A new option fails here until each
face has it, or is named below with the reason it leaves the option out."""

from __future__ import annotations

import inspect
import typing

import pytest
import typer

from conftest import StoreFactory
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.core.search_request import MODES, SEARCH_FIELDS, SearchRequest
from surrealdocs.errors import ConfigurationError

# (face, field) a face leaves out, and why
LEFT_OUT = {
    ("mcp", "query_vector"): "an agent has no way to compute a vector in the store's model,"
                             " and hundreds of numbers in a tool call fill its context",
    ("retrievers", "query"): "given in each call (invoke / retrieve), not held",
    ("retrievers", "query_vector"): "retrievers are asked by text; a framework's query"
                                    " embedding is in another model's space",
}
# the command line's flag for a field, where it is not the field's name with dashes
CLI_FLAGS = {"topics": "--topic"}  # repeatable, one topic per flag


def _offered(face: str) -> list[str]:
    return [f for f in SEARCH_FIELDS if (face, f) not in LEFT_OUT]


def test_kb_search_declares_no_option_of_its_own() -> None:
    """The library's search takes the request's fields by name (SearchRequest.of): no second
    list of the options to keep in step."""
    params = [p for p in inspect.signature(KnowledgeBase.search).parameters.values()
              if p.name != "self"]
    assert [(p.name, p.kind) for p in params] == [
        ("query", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ("options", inspect.Parameter.VAR_KEYWORD)]
    assert SearchRequest.of("x", limit=3, per_document=True) == SearchRequest(
        "x", limit=3, per_document=True)
    with pytest.raises(ConfigurationError, match="unknown search option colour"):
        SearchRequest.of("x", colour="red")


async def test_a_request_and_the_same_options_search_alike(open_kb: StoreFactory) -> None:
    kb = await open_kb()
    await kb.ingest_texts({"a": "Herons wade in water.", "b": "Owls hunt at night."})
    request = SearchRequest("herons", mode="text", limit=1)
    assert [h.chunk_id for h in await kb.search(request)] == \
        [h.chunk_id for h in await kb.search("herons", mode="text", limit=1)]
    with pytest.raises(Exception, match="not both"):
        await kb.search(request, limit=3)


def test_the_http_body_is_the_request() -> None:
    from surrealdocs.faces.http.models import SearchBody

    assert list(SearchBody.model_fields) == _offered("http")
    defaults = SearchRequest()
    for name, info in SearchBody.model_fields.items():
        assert info.default == getattr(defaults, name), name
    assert typing.get_args(SearchBody.model_fields["mode"].annotation) == MODES


def test_the_command_line_offers_every_field() -> None:
    from surrealdocs.faces.cli import app

    command = typer.main.get_command(app).commands["search"]  # type: ignore[attr-defined]
    params = {p.name: p for p in command.params}
    for name in _offered("cli"):
        assert name in params, name
        if name != "query":
            flag = CLI_FLAGS.get(name, "--" + name.replace("_", "-"))
            assert flag in params[name].opts, (name, params[name].opts)
    assert params["mode"].default == "hybrid" and params["limit"].default == 10


async def test_the_mcp_search_tool_offers_every_field_it_can() -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from surrealdocs.faces.mcp import build_mcp_server

    settings = Settings(db="mem://", model="hashing-64")
    async with await KnowledgeBase.open(settings=settings) as kb, \
            Client(build_mcp_server(kb)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    props = tools["search"].input_schema["properties"]
    assert set(_offered("mcp")) <= set(props)
    assert set(props) - set(SEARCH_FIELDS) == {"snippet_chars"}  # how much text, not what
    assert tuple(props["mode"]["enum"]) == MODES


def test_the_retrievers_hold_every_option_but_the_query() -> None:
    from surrealdocs.integrations.common import RETRIEVER_OPTIONS

    assert list(RETRIEVER_OPTIONS) == _offered("retrievers")
    pytest.importorskip("langchain_core")
    from surrealdocs.integrations.langchain import SurrealDocsRetriever

    fields = set(SurrealDocsRetriever.model_fields)
    assert set(RETRIEVER_OPTIONS) <= fields
