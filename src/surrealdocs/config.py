"""Settings: where the store lives, which model embeds, how text is chunked and indexed.

Every field can come from an argument, or from a ``SURREALDOCS_<FIELD>`` environment variable
(for example ``SURREALDOCS_DB``, ``SURREALDOCS_USER``, ``SURREALDOCS_CHUNK_SIZE``), or falls
back to its default. Arguments win over the environment.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .errors import ConfigurationError

DEFAULT_DIR = Path(".surrealdocs")
ENV_PREFIX = "SURREALDOCS_"
DISTANCES = ("COSINE", "EUCLIDEAN", "MANHATTAN")
# Languages of SurrealDB's snowball filter (the BM25 analyzer's stemmer).
SNOWBALL_LANGUAGES = (
    "arabic", "danish", "dutch", "english", "finnish", "french", "german", "greek", "hungarian",
    "italian", "norwegian", "portuguese", "romanian", "russian", "spanish", "swedish", "tamil",
    "turkish",
)
CHUNK_CONTEXTS = ("headings", "none")
NO_STEMMING = "none"  # analyzer_language without a stemmer: words are matched as written
_NOT_FROM_ENV = {"env": False}
FUSIONS = ("rrf", "minmax", "zscore")
TEXT_INDEXES = ("segments", "engine")


@dataclass(frozen=True)
class Settings:
    """Configuration of one knowledge base.

    Attributes:
        db: store URL. ``None`` means an embedded file store under ``./.surrealdocs/``;
            ``surrealkv://PATH`` a file store at PATH; ``mem://`` an in-memory store;
            ``ws://``, ``wss://``, ``http://``, ``https://`` a SurrealDB server or cluster.
        user, password: credentials for a server (root or namespace/database users).
        namespace, database: where the tables live.
        documents_table, chunks_table: table names (several knowledge bases can share a
            database under different names).
        model: embedding model name: a local model (see
            ``surrealdocs.embed.available_models``) or a hosted one, ``openai:MODEL`` or
            ``ollama:MODEL`` (the only way anything reaches the network).
        model_named: whether ``model`` was chosen (settings made by hand: always). Settings
            read by :meth:`from_env` with no model named (``SURREALDOCS_MODEL``, an
            override) open an existing store with the model it is bound to.
        chunk_size, chunk_overlap: chunk length and overlap in characters.
        derive_titles: a document without a real metadata title is titled by its e-mail
            subject, first heading, a presentation's first line, else its file name
            (``parts/titles.py``); false keeps kreuzberg's metadata title as it is (the
            kreuzberg-surrealdb facade's behaviour).
        chunk_context: ``headings`` gives each chunk the path of section headings it lies
            under, where the format has them (Markdown, HTML, DOCX, ODT, EPUB, ...): the
            embedding model reads it before the chunk's text, and search hits show it.
            It is stored apart from the text, so spans and snippets stay exact.
            ``none`` embeds the text alone.
        fit_chunks: fit chunks to the embedding model's window, for models that say what
            it is (the default one: 256 word pieces): a document that fits is stored as one
            chunk, and a chunk longer than the window is cut again, so no text is silently
            truncated by the model. ``False`` keeps kreuzberg's chunks as they are.
        strip_running_lines: keep running headers and footers (lines that open or close
            most pages) out of every chunk; they stay in the document's text and are listed
            in its metadata (``running_lines``).
        hnsw_*: HNSW index parameters. ``hnsw_ef`` is the search-time candidate list size
            (a search for k hits uses at least 2k).
        bm25_k1, bm25_b: BM25 parameters of the full-text index. The defaults are Lucene's
            and Anserini's (0.9, 0.4): chunks are short, so length normalisation is mild.
        analyzer_language: stemming language of the full-text analyzer (snowball), or
            ``none`` for no stemming.
        text_index: what ranks BM25: ``segments`` (the default), surrealdocs' own index,
            postings kept in SurrealDB records and ranked in this process; or ``engine``,
            SurrealDB's FULLTEXT index (``@@`` queries). A store opened with the other one
            is converted on open (``surrealdocs rebuild-index`` rebuilds it).
        bm25_max_df: query terms found in more than this share of the chunks are left out
            of the BM25 query (they cost the engine a scan of that share of the table while
            weighing little: inverse document frequency below ln 3); ``1`` keeps every term.
            A term's frequency is counted in the background the first time it is met.
        bm25_document_bonus: with one hit per document, a document's BM25 score is its best
            chunk's plus this share of its next two chunks' scores among those fetched (a
            document that matches in several places is more likely about the query); 0
            ranks documents by their best chunk alone.
        bm25_min_terms: the rarest this many query terms are kept whatever their frequency.
        bm25_max_df_floor: a term is left out only if it is also in more than this many
            chunks: below it a term costs the engine little (tens of milliseconds), and in a
            small collection a term in a quarter of the chunks still tells them apart.
        chunked: ``False`` stores whole documents only: no chunks table, a BM25 index on the
            documents' ``content`` and no vectors (text search over documents).
        embed: ``False`` stores chunks without vectors and creates no HNSW index (text
            search only; no embedding model is loaded).
        separate_vectors: keep the chunks' vectors (and the HNSW index) in a table of their
            own, ``<chunks>_vectors``, so that full-text search never reads them (the
            default); ``False`` keeps them in the chunks, as kreuzberg-surrealdb's layout
            does. Decided when a store is created (or upgraded to schema 8).
        insert_batch_size: chunk rows per INSERT statement. The full-text index makes
            large statements superlinear: on ``mem://``, 25 rows per statement write a
            5,226-chunk book 1.5x faster than 100 (BENCHMARKS.md, "Ingest beside
            kreuzberg-surrealdb"); on ``surrealkv://`` 25 to 200 cost the same.
        extract_concurrency: files extracted at once.
        extract_timeout: seconds after which one file's extraction is abandoned.
        ocr_language: Tesseract language for images and scanned PDFs; empty disables OCR.
        embed_batch_size: texts per model call (per request for a hosted provider).
        embed_base_url: where a hosted embedding provider (``openai:MODEL``,
            ``ollama:MODEL``) listens. Unset: ``OPENAI_BASE_URL`` or
            ``https://api.openai.com/v1`` for ``openai:``, ``OLLAMA_HOST`` or
            ``http://localhost:11434`` for ``ollama:``.
        embed_api_key: the provider's API key, sent as a bearer token. Unset:
            ``OPENAI_API_KEY`` for ``openai:``, none for ``ollama:``. Never shown in
            ``repr``, errors or logs.
        embed_dimension: the provider model's vector length. Unset, one probe request at
            open detects it; either way every answer is checked against it.
        embed_concurrency: requests in flight at once to a provider.
        embed_timeout: seconds one provider request may take.
        embed_retries: retries of a provider request after a 429, a 5xx, a timeout or a
            connection error (so ``embed_retries + 1`` attempts).
        llm: the chat model ``ask`` answers with: ``openai:MODEL`` (any OpenAI-compatible
            chat-completions server) or ``ollama:MODEL``; empty, ``ask`` says how to set it.
        rerank: a second stage that reorders a search's first ``rerank_depth`` passages:
            ``rerank:MODEL`` (a server speaking the shared rerank request at
            ``rerank_base_url``, key ``rerank_api_key``: Cohere, Jina, Voyage, Mixedbread,
            TEI, vLLM, Infinity) or ``llm`` (the chat model scores them); off when empty. A
            search that names ``rerank=off`` skips it; one that fails keeps the first
            stage's order with a notice (``rerank_timeout``: the most seconds a search with
            its rerank stage takes).
        llm_base_url, llm_api_key: where it listens and its key; unset, ``OPENAI_BASE_URL``
            or ``OLLAMA_HOST``, and ``OPENAI_API_KEY``, then the providers' defaults.
        llm_timeout, llm_retries: seconds one chat request may wait for its first token,
            and retries after a 429, a 5xx or a failed connection before it.
        ask_passages: passages retrieved for an answer (numbered in the prompt);
            ask_context_chars: the most characters of them the prompt holds.
        embed_backoff: seconds before the first retry, doubled for each next one (a
            ``Retry-After`` from the server wins).
        rebuild_threshold: vectors written since the last HNSW build after which an ingest
            rebuilds the graph (below it, new vectors are searched exactly, which is fast).
        rebuild_fraction: and the waiting vectors must also be at least this fraction of
            those in the graph, so that a large store fed in small steps is not rebuilt
            whole (minutes at 100k vectors) for every few thousand new ones; an exact scan
            costs about 5 ms per 1,000 waiting vectors. 0 rebuilds at the threshold alone.
        kreuzberg_config: a kreuzberg ``ExtractionConfig`` whose options (OCR, output format,
            quality processing, keywords, pages, ...) extraction starts from. It is copied,
            never modified; surrealdocs still sets chunking, caching, timeout and
            cancellation itself. Not read from the environment.
        hybrid_fusion: how hybrid search merges its two legs: ``zscore`` (the default) or
            ``minmax``, a weighted sum of each leg's scores normalised over its candidates,
            or ``rrf`` (reciprocal rank fusion, which ignores how far apart the scores are;
            BENCHMARKS.md has the comparison that chose the default).
        hybrid_candidates: hits each leg of a hybrid search fetches before fusion.
        rrf_k: the constant k of reciprocal rank fusion, ``1 / (k + rank)``.
        text_weight, vector_weight: weights of the BM25 and vector legs in the fusion.
        relevance_cutoff, relevance_floor: the default cut-off, in every face. A search
            shows nothing unless one of its hits scores at least ``relevance_cutoff`` (a
            score is the probability that the hit is relevant, 0-1), and then shows its
            hits down to ``relevance_floor``; a search that shows nothing says so, and
            ``ask`` calls no model. ``relevance_cutoff`` 0 turns it off (as
            ``cutoff=False`` does for one search). BENCHMARKS.md has the choice.
        max_query_chars: longest query text accepted.
        max_file_bytes: largest file (or bytes) ingested; larger ones fail with the reason.
        max_chunks_per_document: most chunks one document may have (a bound on the work
            and memory one file can take); a document with more fails with the reason.
        uploads_dir: where the server keeps uploaded files until their ingest job is done.
            Unset: next to a file store (``<store path>.uploads``), else
            ``./.surrealdocs/uploads``.
        write_lease: seconds a document being written may go without progress before
            another writer on a shared server treats it as abandoned (its writer died) and
            writes it again; also the age at which such debris is cleaned up on open.
        engine_reopen_rows: an embedded file store is closed and reopened (about a second
            at 150,000 chunks; queries wait meanwhile) after this many chunk and vector rows were
            written in one session, because the embedded engine stops for good after some
            60,000 to 90,000 (BENCHMARKS.md). 0 never reopens it.
    """

    db: str | None = None
    user: str | None = None
    password: str | None = None
    namespace: str = "surrealdocs"
    database: str = "main"
    documents_table: str = "documents"
    chunks_table: str = "chunks"
    model: str = "all-minilm-l6-v2"
    chunk_size: int = 800
    chunk_overlap: int = 100
    chunk_context: str = "headings"
    derive_titles: bool = True
    fit_chunks: bool = False
    strip_running_lines: bool = True
    hnsw_distance: str = "COSINE"
    hnsw_efc: int = 150
    hnsw_m: int = 12
    hnsw_ef: int = 100
    bm25_k1: float = 0.9
    bm25_b: float = 0.4
    analyzer_language: str = "english"
    text_index: str = "segments"
    bm25_max_df: float = 0.25
    bm25_min_terms: int = 2
    bm25_document_bonus: float = 0.1
    bm25_max_df_floor: int = 2000
    chunked: bool = True
    embed: bool = True
    separate_vectors: bool = True
    insert_batch_size: int = 25
    extract_concurrency: int = 2
    extract_timeout: float = 120.0
    ocr_language: str = "eng"
    embed_batch_size: int = 32
    embed_base_url: str | None = None
    embed_api_key: str | None = field(default=None, repr=False)
    embed_dimension: int | None = None
    embed_concurrency: int = 4
    embed_timeout: float = 60.0
    embed_retries: int = 4
    embed_backoff: float = 0.5
    llm: str = ""
    llm_base_url: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)
    llm_timeout: float = 120.0
    llm_retries: int = 3
    rerank: str = ""
    rerank_base_url: str | None = None
    rerank_api_key: str | None = field(default=None, repr=False)
    rerank_depth: int = 50
    rerank_timeout: float = 10.0
    ask_passages: int = 8
    ask_context_chars: int = 12_000
    rebuild_threshold: int = 2000
    rebuild_fraction: float = 0.05
    hybrid_fusion: str = "zscore"
    hybrid_candidates: int = 100
    rrf_k: int = 60
    text_weight: float = 1.0
    vector_weight: float = 1.0
    relevance_cutoff: float = 0.2
    relevance_floor: float = 0.02
    max_query_chars: int = 10_000
    max_file_bytes: int = 512 * 1024 * 1024
    max_chunks_per_document: int = 100_000
    write_lease: float = 120.0
    engine_reopen_rows: int = 10_000
    uploads_dir: str | None = None
    kreuzberg_config: Any = field(default=None, compare=False, repr=False,
                                  metadata=_NOT_FROM_ENV)
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False,
                                  metadata=_NOT_FROM_ENV)
    model_named: bool = field(default=True, compare=False, metadata=_NOT_FROM_ENV)

    def __post_init__(self) -> None:
        self._check_types()
        self._check_bounds()
        for name, (choices, spelled) in _CHOICES.items():
            value = getattr(self, name)
            text = spelled(str(value).strip()) if isinstance(value, str) else value
            if text not in choices():
                *first, last = choices()
                raise ConfigurationError(
                    f"{name} must be one of {', '.join(first)} or {last}, got {value!r}")
            object.__setattr__(self, name, text)
        self._check_relations()

    def _check_types(self) -> None:
        """Integers are integers (not booleans); numbers are finite and stored as floats."""
        for f in fields(self):
            kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
            value = getattr(self, f.name)
            if kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigurationError(f"{f.name} must be an integer, got {value!r}")
            if kind == "float":
                if isinstance(value, bool) or not isinstance(value, (int, float)) \
                        or not math.isfinite(value):
                    raise ConfigurationError(f"{f.name} must be a finite number, got {value!r}")
                object.__setattr__(self, f.name, float(value))

    def _check_bounds(self) -> None:
        for name in _POSITIVE_INTEGERS:
            if getattr(self, name) < 1:
                raise ConfigurationError(
                    f"{name} must be a positive integer, got {getattr(self, name)!r}")
        for name in _AT_LEAST_ZERO:
            if getattr(self, name) < 0:
                raise ConfigurationError(f"{name} must be zero or positive")
        for name in _ABOVE_ZERO:
            if getattr(self, name) <= 0:
                raise ConfigurationError(f"{name} must be positive")
        for name, (low, high, meaning) in _INTERVALS.items():
            value = getattr(self, name)
            if not low(value) or not high(value):
                raise ConfigurationError(f"{name} must be {meaning}, got {value!r}")
        if self.embed_dimension is not None and (
                not isinstance(self.embed_dimension, int) or isinstance(self.embed_dimension, bool)
                or self.embed_dimension < 1):
            raise ConfigurationError(
                f"embed_dimension must be a positive integer, got {self.embed_dimension!r}")

    def _check_relations(self) -> None:
        """Rules that tie settings together."""
        if not 0 <= self.chunk_overlap < self.chunk_size:
            raise ConfigurationError(
                f"chunk_overlap must be between 0 and chunk_size ({self.chunk_size}), "
                f"got {self.chunk_overlap}")
        if self.text_weight + self.vector_weight == 0:
            raise ConfigurationError("text_weight and vector_weight must be >= 0, not both 0")
        if self.llm and not (self.llm.startswith(("openai:", "ollama:"))
                             and self.llm.split(":", 1)[1].strip()):
            raise ConfigurationError(
                f"llm must be openai:MODEL or ollama:MODEL, got {self.llm!r}")
        if self.rerank and not (self.rerank == "llm" or (
                self.rerank.startswith("rerank:") and self.rerank.split(":", 1)[1].strip())):
            raise ConfigurationError(
                f"rerank must be rerank:MODEL or llm, got {self.rerank!r}")
        if not 1 <= self.rerank_depth <= 1000:
            raise ConfigurationError(
                f"rerank_depth must be from 1 to 1000, got {self.rerank_depth}")
        if not self.rerank_timeout > 0:
            raise ConfigurationError(
                f"rerank_timeout must be a positive number of seconds, got {self.rerank_timeout}")

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``SURREALDOCS_*`` variables, then ``overrides`` (``None`` ignored)."""
        env = dict(os.environ) if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.metadata.get("env") is False:
                continue
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw is None or raw == "":
                continue
            values[f.name] = _coerce(f, raw)
        from_env = set(values)
        values.update({k: v for k, v in overrides.items() if v is not None})
        values.setdefault("model_named", "model" in values)
        try:
            return cls(**values)
        except ConfigurationError as exc:
            given = {k for k, v in overrides.items() if v is not None}
            named = [n for n in from_env - given if str(exc).startswith(n + " ")
                     or f" {n} " in str(exc)]
            if named:
                raise ConfigurationError(
                    f"{exc} (set by {ENV_PREFIX}{named[0].upper()})") from exc
            raise

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    @property
    def heading_context(self) -> bool:
        """Whether chunks carry the path of headings over them (``chunk_context``)."""
        return self.chunk_context == "headings"

    @property
    def vectors(self) -> bool:
        """Whether chunks carry embedding vectors (and the store has an HNSW index)."""
        return self.chunked and self.embed


_POSITIVE_INTEGERS = (
    "hnsw_efc", "hnsw_m", "hnsw_ef", "extract_concurrency", "embed_batch_size",
    "insert_batch_size", "hybrid_candidates", "max_query_chars", "max_file_bytes",
    "max_chunks_per_document", "embed_concurrency", "bm25_min_terms")
_AT_LEAST_ZERO = ("rrf_k", "rebuild_threshold", "rebuild_fraction", "engine_reopen_rows",
                  "bm25_max_df_floor", "bm25_k1", "embed_retries", "embed_backoff",
                  "llm_retries", "text_weight", "vector_weight")
_ABOVE_ZERO = ("extract_timeout", "write_lease", "embed_timeout", "llm_timeout")
# name -> (lowest passes, highest passes, what the value must be)
_INTERVALS: dict[str, tuple[Callable[[Any], bool], Callable[[Any], bool], str]] = {
    "chunk_size": (lambda v: v >= 50, lambda v: True, "at least 50 characters"),
    "bm25_b": (lambda v: v >= 0, lambda v: v <= 1, "from 0 to 1"),
    "bm25_max_df": (lambda v: v > 0, lambda v: v <= 1, "in (0, 1]"),
    "bm25_document_bonus": (lambda v: v >= 0, lambda v: v <= 1, "in [0, 1]"),
    "relevance_cutoff": (lambda v: v >= 0, lambda v: v < 1,
                         "a number from 0 to 1 (a probability of relevance)"),
    "relevance_floor": (lambda v: v >= 0, lambda v: v < 1, "a number from 0 to 1"),
    "ask_passages": (lambda v: v >= 1, lambda v: v <= 50, "an integer from 1 to 50"),
    "ask_context_chars": (lambda v: v >= 500, lambda v: True, "an integer >= 500"),
}
# name -> (the values it may take, how a value is spelled)
_CHOICES: dict[str, tuple[Callable[[], tuple[str, ...]], Callable[[str], str]]] = {
    "chunk_context": (lambda: CHUNK_CONTEXTS, str.lower),
    "hnsw_distance": (lambda: DISTANCES, str.upper),
    "analyzer_language": (lambda: (*SNOWBALL_LANGUAGES, NO_STEMMING), str.lower),
    "text_index": (lambda: TEXT_INDEXES, str.lower),
    "hybrid_fusion": (lambda: FUSIONS, str.lower),
}


def _coerce(f: dataclasses.Field[Any], raw: str) -> Any:
    kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "str")
    if kind.startswith("bool"):
        if raw.strip().lower() in ("1", "true", "yes", "on"):
            return True
        if raw.strip().lower() in ("0", "false", "no", "off"):
            return False
        raise ConfigurationError(f"{ENV_PREFIX}{f.name.upper()} must be true or false, got {raw!r}")
    try:
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
    except ValueError as exc:
        raise ConfigurationError(
            f"{ENV_PREFIX}{f.name.upper()} must be a number, got {raw!r}"
        ) from exc
    return raw
