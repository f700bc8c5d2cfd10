"""Retrieval quality on a BEIR-layout dataset, measured as trec_eval measures it.

A BEIR dataset is a directory with ``corpus.jsonl`` (``_id``, ``title``, ``text``),
``queries.jsonl`` (``_id``, ``text``) and ``qrels/<split>.tsv`` (``query-id``, ``corpus-id``,
``score``). :func:`evaluate` ingests the corpus into a fresh store through the normal ingest
path (each document as its title and text), runs every judged query in each search mode with
one result per document (a document scores as its best chunk), and computes nDCG@10,
Recall@100 and MRR@10 with ``pytrec_eval`` (Python bindings of trec_eval itself).

The metrics library is an optional dependency: ``pip install '.[eval]'`` in a clone of
surrealdocs.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..config import Settings
from ..embed import Embedder, get_embedder
from ..errors import ConfigurationError
from ..store.connection import REMOTE_SCHEMES, resolve_url
from .kb import KnowledgeBase
from .search_request import MODES

EVAL_MODES = ("text", "vector", "hybrid")
DEPTH = 100  # documents retrieved per query: enough for Recall@100
SOURCE_PREFIX = "beir:"

# (name in reports, trec_eval measure asked for, key of its value, cutoff applied to the run)
MEASURES = (
    ("ndcg@10", "ndcg_cut.10", "ndcg_cut_10", None),
    ("recall@100", "recall.100", "recall_100", None),
    ("mrr@10", "recip_rank", "recip_rank", 10),  # recip_rank has no cutoff: cut the run
)


@dataclass
class Dataset:
    """A BEIR dataset in memory: documents, the judged queries of one split, judgements."""

    name: str
    corpus: dict[str, tuple[str, str]]  # id -> (title, text)
    queries: dict[str, str]  # id -> text, only queries with judgements in this split
    qrels: dict[str, dict[str, int]]  # query id -> {document id: relevance}
    split: str = "test"


def load_beir(path: str | Path, split: str = "test") -> Dataset:
    """Read a BEIR-layout directory. Only queries judged in ``qrels/<split>.tsv`` are kept."""
    root = Path(path).expanduser()
    corpus_file, queries_file = root / "corpus.jsonl", root / "queries.jsonl"
    qrels_file = root / "qrels" / f"{split}.tsv"
    for required in (corpus_file, queries_file, qrels_file):
        if not required.is_file():
            available = sorted(p.stem for p in (root / "qrels").glob("*.tsv")) \
                if (root / "qrels").is_dir() else []
            hint = f" (splits here: {', '.join(available)})" if available else ""
            raise ConfigurationError(f"{required} is missing: not a BEIR dataset{hint}")
    corpus: dict[str, tuple[str, str]] = {}
    for row in _jsonl(corpus_file):
        corpus[str(row["_id"])] = (str(row.get("title") or ""), str(row.get("text") or ""))
    all_queries = {str(row["_id"]): str(row.get("text") or "") for row in _jsonl(queries_file)}
    qrels: dict[str, dict[str, int]] = {}
    with qrels_file.open(encoding="utf-8") as f:
        for n, line in enumerate(f):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or (n == 0 and not parts[2].strip().lstrip("-").isdigit()):
                continue  # header or blank line
            qid, did, rel = parts[0], parts[1], int(parts[2])
            qrels.setdefault(qid, {})[did] = rel
    missing = sorted(set(qrels) - set(all_queries))
    if missing:
        raise ConfigurationError(
            f"{qrels_file} judges {len(missing)} queries absent from {queries_file}"
            f" (e.g. {missing[0]!r})")
    queries = {qid: all_queries[qid] for qid in qrels}
    return Dataset(name=root.name, corpus=corpus, queries=queries, qrels=qrels, split=split)


def _jsonl(path: Path) -> Iterable[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigurationError(f"{path}:{n}: not JSON: {exc.msg}") from exc


def document_text(title: str, text: str) -> str:
    """How a BEIR document is ingested: its title, a blank line, its text."""
    title, text = title.strip(), text.strip()
    return f"{title}\n\n{text}" if title and text else (title or text)


def _pytrec_eval() -> Any:
    try:
        import pytrec_eval
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigurationError(
            "evaluation needs pytrec_eval (trec_eval's Python bindings): "
            "pip install '.[eval]' in a clone of surrealdocs"
            " (or: pip install pytrec-eval-terrier)"
        ) from exc
    return pytrec_eval


def score_run(qrels: Mapping[str, Mapping[str, int]],
              run: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    """Per-query nDCG@10, Recall@100 and MRR@10 of ranked document lists, by trec_eval.

    ``run`` maps a query id to its documents, best first. The scores handed to trec_eval
    follow that order exactly (trec_eval would otherwise reorder ties by document id), and
    each list is cut at its measure's depth. Every judged query gets a value: one missing
    from the run, or with no hits, scores 0 (as ``trec_eval -c``).
    """
    pytrec_eval = _pytrec_eval()
    judged = {q: {d: int(r) for d, r in docs.items()} for q, docs in qrels.items()}
    out: dict[str, dict[str, float]] = {q: {} for q in judged}
    for name, measure, value_key, cutoff in MEASURES:
        trec_run: dict[str, dict[str, float]] = {}
        for qid in judged:
            docs = list(dict.fromkeys(run.get(qid, ())))  # first occurrence wins
            if cutoff is not None:
                docs = docs[:cutoff]
            if docs:
                trec_run[qid] = {d: float(len(docs) - i) for i, d in enumerate(docs)}
        evaluator = pytrec_eval.RelevanceEvaluator(judged, {measure})
        values = evaluator.evaluate(trec_run) if trec_run else {}
        for qid in judged:
            out[qid][name] = float(values.get(qid, {}).get(value_key, 0.0))
    return out


def mean_scores(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The mean of each measure over all judged queries."""
    names = [name for name, *_ in MEASURES]
    n = len(per_query)
    return {name: (sum(q[name] for q in per_query.values()) / n if n else 0.0)
            for name in names}


@dataclass
class ModeResult:
    mode: str
    metrics: dict[str, float]
    seconds: float
    queries: int
    per_query: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)

    @property
    def ms_per_query(self) -> float:
        return 1000.0 * self.seconds / self.queries if self.queries else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, **{k: round(v, 4) for k, v in self.metrics.items()},
                "seconds": round(self.seconds, 2), "ms_per_query": round(self.ms_per_query, 1),
                "queries": self.queries,
                "per_query": {q: {k: round(v, 4) for k, v in m.items()}
                              for q, m in self.per_query.items()}}


@dataclass
class EvalReport:
    dataset: str
    split: str
    documents: int
    queries: int
    chunks: int
    ingest_seconds: float
    settings: dict[str, Any]
    reused: int = 0  # documents already in the store
    results: list[ModeResult] = field(default_factory=list)
    runs: dict[str, dict[str, list[str]]] = field(default_factory=dict, repr=False)

    def result(self, mode: str) -> ModeResult:
        for r in self.results:
            if r.mode == mode:
                return r
        raise KeyError(mode)

    def to_dict(self, include_runs: bool = False) -> dict[str, Any]:
        d = {
            "dataset": self.dataset, "split": self.split, "documents": self.documents,
            "queries": self.queries, "chunks": self.chunks,
            "ingest_seconds": round(self.ingest_seconds, 2), "reused": self.reused,
            "settings": self.settings,
            "results": [r.to_dict() for r in self.results],
        }
        if include_runs:
            d["runs"] = self.runs
        return d


ProgressHook = Callable[[str, int, int], None]  # (stage, done, total)


async def evaluate(dataset: str | Path | Dataset, *, settings: Settings | None = None,
                   embedder: Embedder | None = None, modes: Sequence[str] = EVAL_MODES,
                   split: str = "test", depth: int = DEPTH,
                   on_progress: ProgressHook | None = None,
                   search_options: Mapping[str, Any] | None = None) -> EvalReport:
    """Ingest a BEIR dataset and measure every search mode on it.

    ``settings`` default to the environment's with an in-memory store (``mem://``). A store
    given in ``settings.db`` is reused when it holds this dataset and nothing else: its
    documents are skipped as unchanged, so another split or other search options cost no
    new ingest (the chunks stay as they were first made). ``search_options`` are passed on to
    :meth:`KnowledgeBase.search` (for example ``fusion`` or ``candidates``).
    """
    data = dataset if isinstance(dataset, Dataset) else load_beir(dataset, split)
    for mode in modes:
        if mode not in MODES:
            raise ConfigurationError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    settings = settings or Settings.from_env(db="mem://")
    embedder = embedder or get_embedder(settings.model, settings)
    progress = on_progress or (lambda stage, done, total: None)
    # the ranking is measured whole: the cut-off (bench/relevance_score.py measures it)
    # would end a list before depth and count as misses
    options = {"cutoff": False, **(search_options or {})}

    async with await KnowledgeBase.open(settings=settings, embedder=embedder) as kb:
        started = time.perf_counter()
        corpus_ids, reused = await _ingested(kb, data, progress)
        ingest_seconds = time.perf_counter() - started
        stats = await kb.stats()
        if stats.documents != len(corpus_ids):
            raise ConfigurationError(
                f"the store at {kb.store.url} holds {stats.documents - len(corpus_ids)} "
                f"documents that are not in {data.name}: evaluate on a fresh store, or on one "
                "that holds this dataset only")
        await kb.warm_up(data.queries.values())  # the same results from the first query on
        results: list[ModeResult] = []
        runs: dict[str, dict[str, list[str]]] = {}
        for mode in modes:
            result, runs[mode] = await _measured(kb, data, mode, depth, corpus_ids, options,
                                                 progress)
            results.append(result)
        described = await _described(kb, embedder, options, stats)
        return EvalReport(
            dataset=data.name, split=data.split, documents=len(data.corpus),
            queries=len(data.queries), chunks=stats.chunks, ingest_seconds=ingest_seconds,
            settings=described, results=results, runs=runs, reused=reused)


async def _ingested(kb: KnowledgeBase, data: Dataset,
                    progress: ProgressHook) -> tuple[dict[str, list[str]], int]:
    """Ingest the corpus: the corpus ids each stored document stands for (one document can
    stand for several ids with identical text), and how many were stored already."""
    done = 0

    def on_result(_: Any) -> None:
        nonlocal done
        done += 1
        progress("ingest", done, len(data.corpus))

    report = await kb.ingest_texts(
        ((SOURCE_PREFIX + did, document_text(title, text))
         for did, (title, text) in data.corpus.items()), on_result=on_result)
    failed = [r for r in report.results if r.status in ("failed",)]
    if failed:
        raise ConfigurationError(
            f"{len(failed)} documents failed to ingest, e.g. {failed[0].source}: "
            f"{failed[0].reason}")
    corpus_ids: dict[str, list[str]] = {}
    for r in report.results:
        if r.document_id:
            corpus_ids.setdefault(r.document_id, []).append(
                r.source.removeprefix(SOURCE_PREFIX))
    return corpus_ids, sum(r.status == "unchanged" for r in report.results)


async def _measured(kb: KnowledgeBase, data: Dataset, mode: str, depth: int,
                    corpus_ids: dict[str, list[str]], options: Mapping[str, Any],
                    progress: ProgressHook) -> tuple[ModeResult, dict[str, list[str]]]:
    """One mode's run over every query, and its scores."""
    run: dict[str, list[str]] = {}
    t0 = time.perf_counter()
    for n, (qid, text) in enumerate(data.queries.items(), 1):
        hits = await kb.search(text, mode=mode, limit=depth, per_document=True, **options)
        run[qid] = [cid for h in hits for cid in corpus_ids.get(h.document_id, [])]
        progress(mode, n, len(data.queries))
    seconds = time.perf_counter() - t0
    per_query = score_run(data.qrels, run)
    return ModeResult(mode, mean_scores(per_query), seconds, len(data.queries),
                      per_query), run


_DESCRIBED = ("model", "chunk_size", "chunk_overlap", "bm25_k1", "bm25_b", "bm25_max_df",
              "bm25_min_terms", "bm25_max_df_floor", "analyzer_language", "fit_chunks",
              "hnsw_m", "hnsw_efc", "hnsw_ef", "hybrid_fusion", "hybrid_candidates", "rrf_k",
              "text_weight", "vector_weight", "relevance_cutoff")


async def _described(kb: KnowledgeBase, embedder: Embedder, options: Mapping[str, Any],
                     stats: Any) -> dict[str, Any]:
    """The settings a report's figures rest on, with how vectors were searched."""
    described = {k: v for k, v in asdict(kb.settings).items() if k in _DESCRIBED}
    described["model"] = embedder.name
    described.update({k: v for k, v in options.items()
                      if isinstance(v, (str, int, float, bool))})
    if kb.storage.legs.vector is not None and await kb.storage.legs.vector.scans():
        described["vector_index"] = "exact scan of int8 codes"
    else:
        described["vector_index"] = (
            "graph" if stats.vectors_outside_graph == 0
            else f"graph + {stats.vectors_outside_graph} pending (exact scan)")
    return described


def evaluate_sync(dataset: str | Path | Dataset, **kwargs: Any) -> EvalReport:
    """:func:`evaluate` for callers without an event loop."""
    return asyncio.run(evaluate(dataset, **kwargs))


def settings_for_dataset(settings: Settings, name: str) -> Settings:
    """Where one of several datasets is evaluated: ``settings.db`` taken as a folder of one
    store per dataset (``DB/NAME``), or, on a server, one database per dataset
    (``DATABASE_NAME``); an in-memory store stays in memory."""
    url = resolve_url(settings.db)
    scheme, _, path = url.partition("://")
    if scheme in REMOTE_SCHEMES:
        return settings.replace(database=f"{settings.database}_{name}")
    if not path:  # in memory
        return settings
    return settings.replace(db=f"{scheme}://{Path(path) / name}")


async def evaluate_many(datasets: Sequence[str | Path], *, settings: Settings,
                        on_dataset: Callable[[str], None] | None = None,
                        **kwargs: Any) -> list[EvalReport]:
    """:func:`evaluate` on each dataset in turn; with more than one, each gets its own store
    (see :func:`settings_for_dataset`). The datasets are read first, so a mistyped path
    fails before any ingest."""
    split = kwargs.pop("split", "test")
    loaded = [load_beir(d, split) for d in datasets]
    names = [d.name for d in loaded]
    if len(set(names)) != len(names):
        raise ConfigurationError(
            f"two datasets are named {next(n for n in names if names.count(n) > 1)!r}:"
            " each needs its own directory name")
    reports = []
    for data in loaded:
        if on_dataset:
            on_dataset(data.name)
        own = settings_for_dataset(settings, data.name) if len(loaded) > 1 else settings
        reports.append(await evaluate(data, settings=own, **kwargs))
    return reports


def summary(reports: Sequence[EvalReport]) -> dict[str, Any]:
    """Several datasets' figures and their mean per mode, as ``eval -o`` writes them."""
    datasets = [r.to_dict() for r in reports]
    return {"datasets": datasets,
            "mean": {mode: {k: round(v, 4) for k, v in m.items()}
                     for mode, m in mean_over(datasets).items()}}


def mean_over(reports: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """The mean of each measure per mode over several datasets' reports (``to_dict()``
    form), each dataset counting once whatever its number of queries."""
    by_mode: dict[str, list[Mapping[str, Any]]] = {}
    for report in reports:
        for r in report["results"]:
            by_mode.setdefault(r["mode"], []).append(r)
    names = [name for name, *_ in MEASURES]
    return {mode: {name: sum(float(r[name]) for r in rows) / len(rows) for name in names}
            for mode, rows in by_mode.items() if len(rows) == len(reports)}


def load_figures(path: str | Path) -> list[dict[str, Any]]:
    """The datasets' reports in an ``eval -o`` file (one dataset, or several)."""
    figures = json.loads(Path(path).read_text(encoding="utf-8"))
    reports = figures.get("datasets", [figures]) if isinstance(figures, dict) else []
    if not reports or not all(isinstance(r, dict) and "results" in r for r in reports):
        raise ConfigurationError(f"{path} holds no figures of surrealdocs eval")
    return list(reports)


@dataclass
class Difference:
    """How one dataset and mode changed between two evaluations (``after - before``)."""

    dataset: str
    mode: str
    before: dict[str, float]
    after: dict[str, float]
    queries: list[tuple[str, float, float]]  # (query id, nDCG@10 before, after), by change

    @property
    def delta(self) -> dict[str, float]:
        return {k: self.after[k] - self.before[k] for k in self.before if k in self.after}


def compare(before: Sequence[Mapping[str, Any]],
            after: Sequence[Mapping[str, Any]]) -> list[Difference]:
    """Per dataset and mode present in both, the measures before and after, and the
    queries whose nDCG@10 changed, the largest changes first."""
    names = [name for name, *_ in MEASURES]
    first = {(r["dataset"], r.get("split")): r for r in before}
    out = []
    for report in after:
        old = first.get((report["dataset"], report.get("split")))
        if old is None:
            continue
        old_modes = {r["mode"]: r for r in old["results"]}
        for r in report["results"]:
            o = old_modes.get(r["mode"])
            if o is None:
                continue
            pq_old, pq_new = o.get("per_query") or {}, r.get("per_query") or {}
            changed = sorted(
                ((q, pq_old[q]["ndcg@10"], pq_new[q]["ndcg@10"]) for q in pq_new
                 if q in pq_old and pq_old[q]["ndcg@10"] != pq_new[q]["ndcg@10"]),
                key=lambda t: (-abs(t[2] - t[1]), t[0]))
            out.append(Difference(report["dataset"], r["mode"],
                                  {k: float(o[k]) for k in names},
                                  {k: float(r[k]) for k in names}, changed))
    return out
