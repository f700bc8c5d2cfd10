"""Property-based tests of the HTTP API, generated from its own OpenAPI schema (schemathesis,
on hypothesis): over every endpoint and parameter, a bad request is never answered with a
5xx, every error has the one shape, and no error message carries the engine's text.

The server is a real ``surrealdocs serve`` process on loopback (an embedded store in memory,
a few documents and a notebook in it); the generated requests are sent over HTTP. Examples
are derandomized: the suite sees the same requests on every run."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402

from server_helpers import served, wait_ready_process  # noqa: E402

pytestmark = pytest.mark.slow  # subprocesses, servers or real corpora: -m 'not slow' skips

# what the engine's messages look like (a statement quoted back, a parse error's caret line)
ENGINE_TEXT = re.compile(r"(?i)\b(select|create|update|delete|upsert|relate|define)\b.*"
                         r"\b(from|content|set|table|where)\b|\^\^\^|parse error|-->|"
                         r"\bsurrealql\b|\$[a-z_]+\b.*=|\bthrown\b|Traceback")


@pytest.fixture(scope="module")
def api_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("api")
    with served(tmp, "--db", "mem://") as (proc, url):
        wait_ready_process(proc, url)
        r = httpx.post(url + "/v1/texts", json={"notebook": "Birds", "texts": [
            {"source": "note://herons", "text": "Herons wade in shallow water."},
            {"source": "note://egrets", "text": "Egrets are white herons."}]}, timeout=30)
        assert r.status_code in (200, 404), r.text
        httpx.post(url + "/v1/notebooks", json={"name": "Birds"}, timeout=30)
        yield url


def check_response(response: Any) -> None:
    status = response.status_code
    assert status < 500, (status, response.text[:2000])
    if status >= 400:
        body = response.json()
        assert set(body) == {"error"}, body
        message = body["error"]["message"]
        assert isinstance(message, str) and isinstance(body["error"]["code"], str)
        assert not ENGINE_TEXT.search(message), message


def test_every_endpoint_and_parameter(api_url: str) -> None:
    schema = schemathesis.openapi.from_url(api_url + "/openapi.json")
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path.endswith("/events"):  # streams until the job ends
            continue
        strategy = operation.as_strategy()

        @settings(max_examples=40, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=strategy)
        def run(case: Any) -> None:
            response = case.call(base_url=api_url, timeout=30)
            check_response(response)

        try:
            run()
        except AssertionError as exc:
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}"[:3000])
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("method,path,body", [
    ("POST", "/v1/search", b'{"query": "\\ud800"}'),
    ("POST", "/v1/search", b'{"query": "x", "limit": 100000000000000000000}'),
    ("POST", "/v1/search", b'{"query": "x", "rrf_k": 100000000000000000000}'),
    ("POST", "/v1/texts", b'{"texts": [{"source": "a", "text": "\\ud800 hi"}]}'),
    ("POST", "/v1/texts", b'{"texts": [{"source": "a", "text": "hi"}], "topics": ["\\udfff"]}'),
    ("POST", "/v1/notebooks", b'{"name": "x", "description": "\\ud800"}'),
    ("GET", "/v1/documents?offset=99999999999999999999999", None),
    ("GET", "/v1/search?query=x&limit=99999999999999999999", None),
    ("GET", "/v1/documents/a%00b", None),
    ("GET", "/v1/documents/~%2F.bashrc", None),
    ("DELETE", "/v1/documents/~%2F.bashrc", None),
    ("GET", "/v1/documents/~nosuchuser%2Fx", None),
    ("GET", "/v1/notebooks/a%00b", None),
    ("GET", "/v1/chunks/%00/passage", None),
    ("GET", "/v1/jobs/job:1%00", None),
])
def test_bad_requests_found_by_a_hostile_probe(api_url: str, method: str, path: str,
                                               body: bytes | None) -> None:
    r = httpx.request(method, api_url + path, content=body, timeout=30,
                      headers={"content-type": "application/json"} if body else {})
    check_response(r)
    assert r.status_code in (404, 422), r.text


def test_a_notebook_named_with_a_slash_is_addressable(api_url: str) -> None:
    r = httpx.post(api_url + "/v1/notebooks", json={"name": "2024/Q3 notes"}, timeout=30)
    assert r.status_code == 201, r.text
    nb = r.json()
    key = nb["id"].split(":", 1)[1]  # escaped as ⟨key⟩ when the key starts with a digit
    for ref in ("2024%2FQ3%20notes", "2024/Q3%20notes", nb["id"], key, key.strip("⟨⟩")):
        got = httpx.get(f"{api_url}/v1/notebooks/{ref}", timeout=30)
        assert got.status_code == 200 and got.json()["name"] == "2024/Q3 notes", (ref, got.text)
    assert httpx.delete(f"{api_url}/v1/notebooks/2024%2FQ3%20notes", timeout=30
                        ).status_code == 200
    assert httpx.get(f"{api_url}/v1/notebooks/{key}", timeout=30).status_code == 404
