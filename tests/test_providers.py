"""Hosted embedding providers (``openai:MODEL``, ``ollama:MODEL``) against a local fake server.

The fake speaks OpenAI's ``POST /v1/embeddings`` and Ollama's ``POST /api/embed`` with their
documented shapes, on 127.0.0.1, and answers with deterministic (hashing) vectors, scaled so
that normalisation shows. It records every request and can be told to fail the next ones.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import SAMPLES
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.embed import get_embedder
from surrealdocs.embed.hashing import HashingEmbedder
from surrealdocs.embed.http import PROBE_TEXT, HTTPEmbedder, ProviderOptions
from surrealdocs.embed.ollama import OllamaEmbedder
from surrealdocs.embed.openai import OpenAIEmbedder
from surrealdocs.errors import (
    ConfigurationError,
    EmbeddingModelMismatchError,
    EmbeddingProviderError,
)

KEY = "sk-test-0123456789"


class FakeProvider:
    """An embeddings server on 127.0.0.1 speaking OpenAI's and Ollama's APIs."""

    def __init__(self) -> None:
        self.models: dict[str, int] = {"embed-small": 48, "embed-large": 96,
                                       "nomic-embed-text:latest": 32}
        self.key: str | None = KEY
        self.delay = 0.0
        self.requests: list[dict[str, Any]] = []
        # Answers for the next requests, in order (None: the normal answer).
        self.failures: list[tuple[int, dict[str, str], bytes] | None] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake._lock:
                    fake.requests.append({"path": self.path, "body": body,
                                          "auth": self.headers.get("Authorization")})
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                    failure = fake.failures.pop(0) if fake.failures else None
                try:
                    if fake.delay:
                        time.sleep(fake.delay)
                    status, headers, payload = failure or fake.answer(self.path, body,
                                                                      self.headers)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, address: None  # type: ignore[method-assign]
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,),
                                        daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def vectors(texts: list[str], dimension: int) -> np.ndarray:
        """What the fake answers, before the 3x scaling (unit vectors)."""
        return HashingEmbedder(dimension).embed_documents(texts)

    def answer(self, path: str, body: dict[str, Any],
               headers: Any) -> tuple[int, dict[str, str], bytes]:
        model, texts = body["model"], body["input"]
        if path == "/v1/embeddings":
            if self.key and headers.get("Authorization") != f"Bearer {self.key}":
                sent = str(headers.get("Authorization", "")).removeprefix("Bearer ")
                # Echoes the key it got, as careless servers do: the client must scrub it.
                return _json(401, {"error": {"message": f"Incorrect API key provided: {sent}",
                                             "type": "invalid_request_error",
                                             "code": "invalid_api_key"}})
            if model not in self.models:
                return _json(404, {"error": {"message": f"The model `{model}` does not exist",
                                             "type": "invalid_request_error",
                                             "code": "model_not_found"}})
            vectors = 3 * self.vectors(texts, self.models[model])
            data = [{"object": "embedding", "index": i, "embedding": v.tolist()}
                    for i, v in enumerate(vectors)]
            # The API promises an index per item, not an order.
            return _json(200, {"object": "list", "model": model, "data": data[::-1]})
        if path == "/api/embed":
            if model not in self.models:
                return _json(404, {"error": f'model "{model}" not found, try pulling it first'})
            vectors = 3 * self.vectors(texts, self.models[model])
            return _json(200, {"model": model, "embeddings": vectors.tolist()})
        return _json(404, {"error": f"no route {path}"})

    def fail_next(self, status: int, *, times: int = 1, headers: dict[str, str] | None = None,
                  body: Any = None, raw: bytes | None = None) -> None:
        payload = raw if raw is not None else json.dumps(
            body if body is not None else {"error": {"message": f"fake failure {status}"}}
        ).encode()
        self.failures.extend([(status, headers or {}, payload)] * times)

    def batch_sizes(self) -> list[int]:
        return [len(r["body"]["input"]) for r in self.requests]


def _json(status: int, body: Any) -> tuple[int, dict[str, str], bytes]:
    return status, {}, json.dumps(body).encode()


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    server = FakeProvider()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(autouse=True)
def _forget_shared_embedders() -> Iterator[None]:
    yield
    HTTPEmbedder.close_shared()


class Sleeps:
    """Stands in for the backoff sleep: records the delays, sleeps not."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def options(url: str, **changes: Any) -> ProviderOptions:
    values: dict[str, Any] = {"base_url": url, "api_key": KEY, "batch_size": 32,
                              "concurrency": 4, "timeout": 5.0, "retries": 2, "backoff": 0.0}
    values.update(changes)
    return ProviderOptions(**values)


def openai(fake: FakeProvider, model: str = "embed-small", **changes: Any) -> OpenAIEmbedder:
    return OpenAIEmbedder(model, options(fake.url, **changes))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Batching, order, normalisation, dimension detection.


def test_openai_probes_the_dimension_batches_and_normalises(fake: FakeProvider) -> None:
    embedder = openai(fake, batch_size=3, concurrency=2)
    try:
        assert embedder.name == "openai:embed-small"
        assert embedder.dimension == 48
        assert fake.requests[0]["body"] == {"model": "embed-small", "input": [PROBE_TEXT]}
        assert fake.requests[0]["path"] == "/v1/embeddings"
        assert fake.requests[0]["auth"] == f"Bearer {KEY}"
        texts = [f"text number {i} about topic {i % 3}" for i in range(7)]
        vectors = embedder.embed_documents(texts)
        assert vectors.dtype == np.float32 and vectors.shape == (7, 48)
        assert sorted(fake.batch_sizes()[1:]) == [1, 3, 3]
        np.testing.assert_allclose(vectors, FakeProvider.vectors(texts, 48), atol=1e-6)
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
        query = embedder.embed_query(texts[4])
        assert query.shape == (48,)
        np.testing.assert_allclose(query, vectors[4], atol=1e-6)
        assert embedder.embed_documents([]).shape == (0, 48)
    finally:
        embedder.close()


def test_requests_in_flight_are_bounded(fake: FakeProvider) -> None:
    embedder = openai(fake, batch_size=1, concurrency=2, dimension=48)
    fake.delay = 0.1
    try:
        started = time.perf_counter()
        vectors = embedder.embed_documents([f"t{i}" for i in range(6)])
        elapsed = time.perf_counter() - started
    finally:
        embedder.close()
    assert vectors.shape == (6, 48)
    assert fake.batch_sizes() == [1] * 6  # no probe: the dimension was given
    assert fake.max_in_flight == 2
    assert elapsed >= 0.29  # three rounds of two


def test_callers_in_several_threads_share_the_bound(fake: FakeProvider) -> None:
    """``asyncio.to_thread`` callers each embed one batch in their own thread: the bound on
    requests in flight holds across them too."""
    embedder = openai(fake, concurrency=2, dimension=48)
    fake.delay = 0.1
    try:
        threads = [threading.Thread(target=embedder.embed_query, args=(f"t{i}",))
                   for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        embedder.close()
    assert len(fake.requests) == 6
    assert fake.max_in_flight == 2


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/", "/v1/embeddings"])
def test_openai_base_url_with_or_without_v1(fake: FakeProvider, suffix: str) -> None:
    embedder = OpenAIEmbedder("embed-small", options(fake.url + suffix))
    embedder.close()
    assert [r["path"] for r in fake.requests] == ["/v1/embeddings"]


def test_openai_base_url_with_another_api_root_is_kept() -> None:
    embedder = OpenAIEmbedder.__new__(OpenAIEmbedder)
    base = OpenAIEmbedder.parse_base_url("https://example.com/v1beta/openai/")
    assert str(embedder.endpoint_url(base)) == "https://example.com/v1beta/openai/embeddings"


# Retries.


def test_429_is_retried_after_retry_after_then_succeeds(fake: FakeProvider) -> None:
    embedder = openai(fake, dimension=48, retries=3, backoff=5.0)
    embedder.sleep = sleeps = Sleeps()  # type: ignore[method-assign]
    fake.fail_next(429, times=2, headers={"Retry-After": "2"})
    try:
        vectors = embedder.embed_documents(["alpha", "beta"])
    finally:
        embedder.close()
    assert vectors.shape == (2, 48)
    assert len(fake.requests) == 3
    assert sleeps.delays == [2.0, 2.0]  # the server's wish, not the 5 s backoff


def test_5xx_backs_off_exponentially(fake: FakeProvider) -> None:
    embedder = openai(fake, dimension=48, retries=3, backoff=0.5)
    embedder.sleep = sleeps = Sleeps()  # type: ignore[method-assign]
    fake.fail_next(503, times=3)
    try:
        embedder.embed_query("alpha")
    finally:
        embedder.close()
    assert len(fake.requests) == 4
    for delay, full in zip(sleeps.delays, [0.5, 1.0, 2.0], strict=True):
        assert full / 2 <= delay <= full


def test_retries_exhausted_is_a_clear_error(fake: FakeProvider) -> None:
    embedder = openai(fake, dimension=48, retries=2)
    fake.fail_next(503, times=10, body={"error": {"message": "engine overloaded"}})
    try:
        with pytest.raises(EmbeddingProviderError) as info:
            embedder.embed_query("alpha")
    finally:
        embedder.close()
    assert info.value.status == 503
    message = str(info.value)
    assert "HTTP 503" in message and "engine overloaded" in message
    assert "after 3 attempts" in message and fake.url in message
    assert len(fake.requests) == 3


def test_a_long_retry_after_fails_at_once(fake: FakeProvider) -> None:
    embedder = openai(fake, dimension=48, retries=5)
    embedder.sleep = sleeps = Sleeps()  # type: ignore[method-assign]
    fake.fail_next(429, headers={"Retry-After": "3600"},
                   body={"error": {"message": "daily quota exceeded"}})
    try:
        with pytest.raises(EmbeddingProviderError, match=r"retry after 3600 s.*quota"):
            embedder.embed_query("alpha")
    finally:
        embedder.close()
    assert sleeps.delays == [] and len(fake.requests) == 1


def test_timeout_is_retried_then_a_clear_error(fake: FakeProvider) -> None:
    embedder = openai(fake, dimension=48, retries=1, timeout=0.2)
    fake.delay = 1.0
    try:
        started = time.perf_counter()
        with pytest.raises(EmbeddingProviderError) as info:
            embedder.embed_query("alpha")
        elapsed = time.perf_counter() - started
    finally:
        embedder.close()
    assert "no answer within 0.2 s" in str(info.value)
    assert "after 2 attempts" in str(info.value)
    assert info.value.status is None
    assert len(fake.requests) == 2
    assert elapsed < 1.5


def test_unreachable_server_is_a_clear_error() -> None:
    port = closed_port()
    started = time.perf_counter()
    with pytest.raises(EmbeddingProviderError) as info:
        OpenAIEmbedder("embed-small", options(f"http://127.0.0.1:{port}", retries=1))
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "cannot be reached" in message
    assert "after 2 attempts" in message and "Is it running?" in message
    assert "SURREALDOCS_EMBED_BASE_URL" in message and "OPENAI_BASE_URL" in message
    assert info.value.status is None
    assert time.perf_counter() - started < 5


# Refusals: not retried.


def test_wrong_key_is_a_clear_error_without_the_key(fake: FakeProvider) -> None:
    wrong = "sk-wrong-secret-key-42"
    with pytest.raises(EmbeddingProviderError) as info:
        openai(fake, api_key=wrong)
    message = str(info.value)
    assert info.value.status == 401
    assert "refused the API key" in message and "OPENAI_API_KEY" in message
    assert "Incorrect API key provided: ***" in message  # the server's words, scrubbed
    assert wrong not in message and wrong not in repr(info.value)
    assert len(fake.requests) == 1


def test_missing_key_says_so(fake: FakeProvider) -> None:
    with pytest.raises(EmbeddingProviderError, match="wants an API key, and none was set"):
        openai(fake, api_key=None)


def test_openai_com_without_a_key_fails_before_any_request() -> None:
    settings = Settings(model="openai:text-embedding-3-small")
    opts = OpenAIEmbedder.options_from(settings, env={})
    assert opts.base_url == "https://api.openai.com/v1" and opts.api_key is None
    with pytest.raises(ConfigurationError, match="needs an API key"):
        OpenAIEmbedder("text-embedding-3-small", opts)


def test_unknown_model_is_a_clear_error(fake: FakeProvider) -> None:
    with pytest.raises(EmbeddingProviderError) as info:
        openai(fake, model="no-such-model")
    message = str(info.value)
    assert info.value.status == 404
    assert "does not know the model 'no-such-model'" in message
    assert "The model `no-such-model` does not exist" in message
    assert len(fake.requests) == 1


def test_ollama_unknown_model_says_pull(fake: FakeProvider) -> None:
    with pytest.raises(EmbeddingProviderError) as info:
        OllamaEmbedder("mxbai-embed-large", options(fake.url))
    message = str(info.value)
    assert info.value.status == 404
    assert 'model "mxbai-embed-large" not found' in message
    assert "ollama pull mxbai-embed-large" in message


def test_other_4xx_is_not_retried(fake: FakeProvider) -> None:
    embedder = openai(fake, dimension=48, retries=3)
    fake.fail_next(400, body={"error": {"message": "input is too long for this model"}})
    try:
        with pytest.raises(EmbeddingProviderError, match="input is too long") as info:
            embedder.embed_documents(["alpha"])
    finally:
        embedder.close()
    assert info.value.status == 400 and len(fake.requests) == 1


# Answers of the wrong shape.


def test_a_vector_of_another_dimension_is_an_error(fake: FakeProvider) -> None:
    embedder = openai(fake)
    try:
        assert embedder.dimension == 48
        fake.models["embed-small"] = 24  # the model behind the name changed
        with pytest.raises(EmbeddingProviderError,
                           match="returned vectors of 24 dimensions, but the model's have 48"):
            embedder.embed_documents(["alpha", "beta"])
    finally:
        embedder.close()


def test_a_given_dimension_is_checked_against_the_answers(fake: FakeProvider) -> None:
    embedder = openai(fake, dimension=64)
    try:
        assert fake.requests == []
        with pytest.raises(EmbeddingProviderError, match=r"48 dimensions.*64 \(from embed_dim"):
            embedder.embed_query("alpha")
    finally:
        embedder.close()


@pytest.mark.parametrize(("body", "expected"), [
    ({"data": []}, "returned 0 vectors for 2 texts"),
    ({"detail": "ok"}, "unexpected shape"),
    ({"data": [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 0, "embedding": [0.0, 1.0]}]},
     "indexes"),
    ({"data": [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 1, "embedding": [1.0]}]},
     "not lists of numbers of one length"),
    ({"data": [{"index": 0, "embedding": [0.0, 0.0]}, {"index": 1, "embedding": [1.0, 0.0]}]},
     "all-zero vector"),
])
def test_answers_of_the_wrong_shape_are_errors(fake: FakeProvider, body: Any,
                                               expected: str) -> None:
    embedder = openai(fake, dimension=2)
    fake.fail_next(200, body=body)
    try:
        with pytest.raises(EmbeddingProviderError, match=expected):
            embedder.embed_documents(["alpha", "beta"])
    finally:
        embedder.close()


def test_an_answer_that_is_not_json_is_an_error(fake: FakeProvider) -> None:
    embedder = openai(fake, dimension=48)
    fake.fail_next(200, raw=b"<html>login page</html>", headers={"Content-Type": "text/html"})
    try:
        with pytest.raises(EmbeddingProviderError, match=r"not JSON \(text/html\)"):
            embedder.embed_query("alpha")
    finally:
        embedder.close()


def test_a_failing_batch_fails_the_whole_call(fake: FakeProvider) -> None:
    embedder = openai(fake, dimension=48, batch_size=2, concurrency=1, retries=0)
    fake.failures += [None, _json(200, {"data": []})]  # the second batch is short
    try:
        with pytest.raises(EmbeddingProviderError, match="returned 0 vectors for 2 texts"):
            embedder.embed_documents(["a", "b", "c", "d", "e"])
    finally:
        embedder.close()


# Names, settings and the environment.


def test_ollama_keeps_the_model_name_and_reads_ollama_host(
        fake: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", fake.url.removeprefix("http://"))  # no scheme, as usual
    monkeypatch.delenv("SURREALDOCS_EMBED_BASE_URL", raising=False)
    embedder = get_embedder("Ollama:nomic-embed-text:latest", Settings())
    assert isinstance(embedder, OllamaEmbedder)
    assert embedder.name == "ollama:nomic-embed-text:latest"
    assert embedder.dimension == 32
    assert embedder.provenance == {"provider": "ollama", "endpoint": fake.url}
    assert fake.requests[0]["path"] == "/api/embed"
    assert fake.requests[0]["body"]["model"] == "nomic-embed-text:latest"
    assert fake.requests[0]["auth"] is None  # OPENAI_API_KEY is not Ollama's
    assert get_embedder("ollama:nomic-embed-text:latest", Settings()) is embedder
    assert len(fake.requests) == 1  # made and probed once


def test_ollama_host_without_port_means_11434() -> None:
    assert OllamaEmbedder.parse_base_url("gpu-box").port == 11434
    assert OllamaEmbedder.parse_base_url("http://gpu-box").port is None  # 80, as written


def test_openai_settings_win_over_the_conventional_variables(
        fake: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-openai-env")
    monkeypatch.setenv("SURREALDOCS_EMBED_BASE_URL", fake.url)
    monkeypatch.setenv("SURREALDOCS_EMBED_API_KEY", KEY)
    monkeypatch.setenv("SURREALDOCS_EMBED_BATCH_SIZE", "5")
    settings = Settings.from_env()
    assert settings.embed_base_url == fake.url and settings.embed_batch_size == 5
    embedder = get_embedder("openai:embed-small", settings)
    assert fake.requests[0]["auth"] == f"Bearer {KEY}"
    embedder.embed_documents([str(i) for i in range(12)])
    assert sorted(fake.batch_sizes()[1:]) == [2, 5, 5]


def test_openai_falls_back_to_the_conventional_variables(
        fake: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SURREALDOCS_EMBED_BASE_URL", raising=False)
    monkeypatch.delenv("SURREALDOCS_EMBED_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    embedder = get_embedder("openai:embed-small", Settings(embed_backoff=0))
    assert embedder.dimension == 48
    assert fake.requests[0]["auth"] == f"Bearer {KEY}"


def test_the_key_stays_out_of_repr(fake: FakeProvider) -> None:
    settings = Settings(embed_api_key=KEY, embed_base_url=fake.url)
    assert KEY not in repr(settings)
    assert KEY not in repr(OpenAIEmbedder.options_from(settings, env={}))
    embedder = openai(fake, dimension=48)
    try:
        assert KEY not in repr(embedder)
    finally:
        embedder.close()


def test_provider_settings_from_the_environment_are_checked() -> None:
    settings = Settings.from_env({"SURREALDOCS_EMBED_DIMENSION": "768",
                                  "SURREALDOCS_EMBED_TIMEOUT": "2.5",
                                  "SURREALDOCS_EMBED_RETRIES": "0",
                                  "SURREALDOCS_EMBED_CONCURRENCY": "8"})
    assert (settings.embed_dimension, settings.embed_timeout, settings.embed_retries,
            settings.embed_concurrency) == (768, 2.5, 0, 8)
    for bad in ({"embed_retries": -1}, {"embed_concurrency": 0}, {"embed_timeout": 0},
                {"embed_dimension": 0}, {"embed_backoff": -1}):
        with pytest.raises(ConfigurationError):
            Settings(**bad)


def test_provider_names_are_checked() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown embedding provider 'cohere'.*ollama"):
        get_embedder("cohere:embed-v3")
    with pytest.raises(ConfigurationError, match="names no model"):
        get_embedder("openai:")
    with pytest.raises(ConfigurationError, match="must be an http"):
        get_embedder("openai:m", Settings(embed_base_url="localhost:8000"))


# The knowledge base, end to end through the fake.


def provider_settings(fake: FakeProvider, db: str = "mem://", **changes: Any) -> Settings:
    values: dict[str, Any] = {"db": db, "model": "openai:embed-small", "embed_base_url": fake.url,
                              "embed_api_key": KEY, "embed_backoff": 0.0}
    values.update(changes)
    return Settings(**values)


async def test_knowledge_base_round_trip_through_a_provider(fake: FakeProvider) -> None:
    texts = {
        "note://cats": "Cats are small domesticated felines that purr and chase mice.",
        "note://rust": "The Rust compiler checks ownership and borrowing at compile time.",
        "note://tides": "Ocean tides rise and fall with the pull of the moon.",
    }
    async with await KnowledgeBase.open(settings=provider_settings(fake)) as kb:
        report = await kb.ingest_texts(texts)
        assert report.counts.get("ingested") == 3
        hits = await kb.search("compiler ownership borrowing", mode="vector", limit=3)
        assert hits[0].source == "note://rust"
        assert hits[0].score > hits[1].score
        hybrid = await kb.search("moon tides", mode="hybrid", limit=1)
        assert hybrid[0].source == "note://tides"
        (meta, models) = await kb.store.query(
            "SELECT * FROM ONLY $k; SELECT VALUE embedding_model FROM documents;",
            {"k": kb.store.names.embedding_key})
        stats = await kb.stats()
    assert meta["model"] == "openai:embed-small" and meta["dimension"] == 48
    assert meta["provenance"] == {"provider": "openai", "endpoint": fake.url}
    assert KEY not in json.dumps(meta, default=str)
    assert set(models) == {"openai:embed-small"}
    assert (stats.model, stats.dimension) == ("openai:embed-small", 48)
    assert all(r["path"] == "/v1/embeddings" for r in fake.requests)


async def test_store_refuses_another_provider_model(fake: FakeProvider, tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    async with await KnowledgeBase.open(settings=provider_settings(fake, db)) as kb:
        await kb.ingest_texts({"note://a": "alpha beta gamma"})
    for other in ("openai:embed-large", "ollama:nomic-embed-text:latest"):
        with pytest.raises(EmbeddingModelMismatchError) as info:
            await KnowledgeBase.open(settings=provider_settings(fake, db, model=other))
        assert "'openai:embed-small' (48 dimensions)" in str(info.value)
        assert f"surrealdocs reembed --model {other}" in str(info.value)
    # the same dimension under another name is another model too
    with pytest.raises(EmbeddingModelMismatchError):
        await KnowledgeBase.open(settings=provider_settings(fake, db, model="hashing-48"))
    async with await KnowledgeBase.open(settings=provider_settings(fake, db)) as kb:
        hits = await kb.search("alpha", mode="vector", limit=1)
        assert hits[0].source == "note://a"


async def test_local_models_never_reach_the_provider(fake: FakeProvider) -> None:
    settings = provider_settings(fake, model="hashing-64")
    async with await KnowledgeBase.open(settings=settings) as kb:
        await kb.ingest_texts({"note://a": "alpha beta gamma"})
        await kb.search("alpha", limit=1)
        (meta,) = await kb.store.query("SELECT * FROM ONLY $k;",
                                       {"k": kb.store.names.embedding_key})
    assert fake.requests == []
    assert meta.get("provenance") is None


def test_cli_with_ollama_from_the_environment(fake: FakeProvider, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from surrealdocs.faces.cli import app

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tides.md").write_text("# Tides\n\nOcean tides follow the moon.\n")
    (docs / "rust.txt").write_text("The Rust borrow checker enforces ownership.\n")
    db = str(tmp_path / "kb")
    env = {"OLLAMA_HOST": fake.url, "SURREALDOCS_EMBED_BACKOFF": "0"}
    runner = CliRunner()

    result = runner.invoke(app, ["ingest", str(docs), "--db", db,
                                 "--model", "ollama:nomic-embed-text:latest"], env=env)
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["search", "borrow checker ownership", "--db", db, "--mode",
                                 "vector", "--model", "ollama:nomic-embed-text:latest",
                                 "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["source"].endswith("rust.txt")

    result = runner.invoke(app, ["search", "moon", "--db", db,
                                 "--model", "ollama:all-minilm"], env=env)
    assert result.exit_code == 2
    assert "ollama pull all-minilm" in " ".join(result.output.split())


async def test_a_provider_failing_mid_ingest_stops_it(fake: FakeProvider,
                                                      tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    settings = provider_settings(fake, db, embed_retries=1)
    async with await KnowledgeBase.open(settings=settings) as kb:
        fake.failures += [_json(503, {"error": {"message": "down for maintenance"}})] * 2
        with pytest.raises(EmbeddingProviderError, match="down for maintenance"):
            await kb.ingest_texts({"note://a": "alpha beta gamma"})
        assert (await kb.stats()).sources == {}  # not recorded as failed: nothing to retry
        report = await kb.ingest_texts({"note://a": "alpha beta gamma"})
        assert report.counts.get("ingested") == 1


async def test_reembed_onto_a_provider_records_it(fake: FakeProvider, tmp_path: Path) -> None:
    from surrealdocs.core.reembed import reembed

    db = str(tmp_path / "db")
    async with await KnowledgeBase.open(db, model="hashing-48") as kb:
        await kb.ingest_texts({"note://a": "alpha beta gamma", "note://b": "delta epsilon"})
    settings = provider_settings(fake, db)
    assert await reembed(settings, get_embedder(settings.model, settings)) == 2
    with pytest.raises(EmbeddingModelMismatchError):
        await KnowledgeBase.open(db, model="hashing-48")
    async with await KnowledgeBase.open(settings=settings) as kb:
        (meta,) = await kb.store.query("SELECT * FROM ONLY $k;",
                                       {"k": kb.store.names.embedding_key})
        hits = await kb.search("delta epsilon", mode="vector", limit=1)
    assert meta["model"] == "openai:embed-small"
    assert meta["provenance"] == {"provider": "openai", "endpoint": fake.url}
    assert hits[0].source == "note://b"


def test_the_integration_guides_provider_examples_run(fake: FakeProvider, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """docs/integrations.md's examples for Ollama and OpenAI-compatible servers run as
    written, each in a folder of its own holding ./papers, against this fake server in
    place of the address they name (the only change made to them)."""
    guide = (Path(__file__).resolve().parents[1] / "docs" / "integrations.md").read_text()
    examples = [p for p in re.findall(r"```python\n(.*?)```", guide, re.DOTALL)
                if "ollama:" in p or "openai:" in p]
    assert len(examples) == 3
    fake.key = "token-abc"
    fake.models.update({"nomic-embed-text": 32, "nomic-embed-text:latest": 32,
                        "BAAI/bge-small-en-v1.5": 48, "text-embedding-3-small": 1536})
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url)  # what get_embedder's settings read
    monkeypatch.setenv("OPENAI_API_KEY", "token-abc")
    for n, example in enumerate(examples):
        folder = tmp_path / f"example{n}"
        shutil.copytree(SAMPLES, folder / "papers")
        monkeypatch.chdir(folder)
        program = re.sub(r"http://localhost:\d+", fake.url, example)
        exec(compile(program, "integrations.md", "exec"), {"__name__": "__main__"})
        printed = capsys.readouterr().out
        assert printed.strip() and "None" not in printed, (example, printed)
    assert {r["path"] for r in fake.requests} == {"/api/embed", "/v1/embeddings"}
