"""Know when nothing matches (issue 39): the score as a probability of relevance, its fit,
and the default cut-off, on the four dev collections (SciFact dev, MED, CACM, NPL).

    .venv/bin/python bench/relevance_score.py --stores /tmp/rel/stores          # the table
    .venv/bin/python bench/relevance_score.py --stores /tmp/rel/stores --fit    # + the fit
    .venv/bin/python bench/relevance_score.py --probe STORE --about "QUESTION" ...  # own files

Each collection is ingested into its own store under ``--stores`` (reused when there). The
searches run with the cut-off off, and every figure is computed from the hits' scores,
which depend on the query and the chunk alone (so cutting a list is the same as searching
with the cut-off on):

- **fit** (``--fit``): logistic models of relevance on the evidence of each of the top
  ``--depth`` hybrid hits of every judged query in its own collection (relevant: its
  document is judged relevant), fitted on three collections and checked on the fourth
  (leave one out: expected calibration error, AUROC); then on all four, the values to ship
  in ``surrealdocs/parts/relevance.py``.
- **off-topic**: SciFact dev and MED queries searched in CACM and NPL, CACM and NPL
  queries in SciFact and MED: the share for which the default search returns nothing.
- **on-topic**: of the queries whose first relevant document was in the top 10 without the
  cut-off, the share for which it still is; nDCG@10 (per document, as ``eval``) with and
  without the cut-off.
- **near misses**: a query in its own collection with its judged documents left out: the
  share that finds nothing.
- **AUROC** of the first hit's score between on-topic and off-topic queries, and the share
  of off-topic questions for which ``ask`` (its 8 passages) would call the model.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from common import DEV_COLLECTIONS, SHARED, dev_dataset
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.core.evaluate import SOURCE_PREFIX, document_text, load_beir, score_run
from surrealdocs.parts.relevance import Calibration, calibration_for

NAMES = ("scifact-dev", *DEV_COLLECTIONS)
# whose queries are off-topic in whose store (fields apart: biomedicine against computing
# and physics)
OFF_TOPIC = {"cacm": ("scifact-dev", "med"), "npl": ("scifact-dev", "med"),
             "scifact-dev": ("cacm", "npl"), "med": ("cacm", "npl")}
ASK_PASSAGES = 8


def datasets() -> dict[str, Any]:
    out = {}
    for name in NAMES:
        path, split = (dev_dataset(), "dev") if name == "scifact-dev" else (SHARED / name,
                                                                             "test")
        data = load_beir(path, split)
        data.name = name
        out[name] = data
    return out


async def collect(stores: Path, data: dict[str, Any], depth: int) -> dict[str, Any]:
    """Per store: the hits of its own queries and of the off-topic ones, with evidence."""
    out: dict[str, Any] = {}
    for name, dataset in data.items():
        settings = Settings.from_env(db=str(stores / name))
        async with await KnowledgeBase.open(settings=settings) as kb:
            report = await kb.ingest_texts(
                (SOURCE_PREFIX + did, document_text(title, text))
                for did, (title, text) in dataset.corpus.items())
            ids: dict[str, list[str]] = {}
            for r in report.results:
                if r.document_id:
                    ids.setdefault(r.document_id, []).append(r.source.removeprefix(SOURCE_PREFIX))
            await kb.warm_up(dataset.queries.values())
            own = {}
            for qid, text in dataset.queries.items():
                own[qid] = await _query(kb, text, depth, ids)
            foreign = {}
            for other in (o for o, stores_of in OFF_TOPIC.items() if name in stores_of):
                for qid, text in data[other].queries.items():
                    foreign[f"{other}/{qid}"] = await _query(kb, text, depth, ids)
            out[name] = {"own": own, "foreign": foreign, "model": kb.embedding.name
                         if kb.embedding else ""}
            print(f"{name}: {len(own)} own queries, {len(foreign)} off-topic",
                  file=sys.stderr, flush=True)
    return out


async def _query(kb: KnowledgeBase, text: str, depth: int,
                 ids: dict[str, list[str]]) -> dict[str, Any]:
    chunks = await kb.search(text, limit=depth, cutoff=False)
    documents = await kb.search(text, limit=100, cutoff=False, per_document=True)
    vector = await kb.embedding.query(text)
    assert kb.storage.legs.vector is not None
    background = await kb.storage.legs.vector.background(vector)
    sims = np.asarray(background, dtype=np.float64) if background is not None \
        else np.zeros(0)

    def row(h: Any) -> dict[str, Any]:
        return {"docs": ids.get(h.document_id, []), "s": h.similarity, "c": h.coverage,
                "score": h.score}

    return {"chunks": [row(h) for h in chunks], "documents": [row(h) for h in documents],
            "background": [float(sims.mean()), float(sims.std())] if len(sims) else None}


# ----- the model -------------------------------------------------------------------------
def features(hit: dict[str, Any], background: list[float] | None,
             against: bool) -> list[float]:
    s = float(hit["s"] if hit["s"] is not None else 0.0)
    if against and background:  # above the query's mean similarity to the store's sample
        s = s - background[0]
    c = float(hit["c"] or 0.0)
    return [s, c, s * c]


def fit_logistic(x: np.ndarray, y: np.ndarray, weight: np.ndarray | None = None,
                 l2: float = 1e-3) -> np.ndarray:
    """Weighted logistic regression by Newton's method (intercept first), lightly
    regularised."""
    design = np.hstack([np.ones((len(x), 1)), x])
    weight = np.ones(len(y)) if weight is None else weight
    w = np.zeros(design.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-design @ w))
        gradient = design.T @ (weight * (p - y)) + l2 * np.r_[0.0, w[1:]]
        hessian = (design * (weight * p * (1 - p))[:, None]).T @ design + l2 * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def training(collected: dict[str, Any], data: dict[str, Any], names: list[str],
             against: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Evidence, judgement and weight of every pair: each collection weighs the same in
    all (SciFact dev has ten times MED's pairs)."""
    xs, ys, ws = [], [], []
    for name in names:
        qrels = data[name].qrels
        first = len(ys)
        for qid, found in collected[name]["own"].items():
            judged = {d for d, rel in qrels.get(qid, {}).items() if rel > 0}
            for hit in found["chunks"]:
                xs.append(features(hit, found["background"], against))
                ys.append(1.0 if judged & set(hit["docs"]) else 0.0)
        ws += [1.0 / max(len(ys) - first, 1)] * (len(ys) - first)
    weight = np.asarray(ws)
    return np.asarray(xs), np.asarray(ys), weight * len(weight) / weight.sum()


def calibration_of(both: np.ndarray, text: np.ndarray, vector: np.ndarray,
                   against: bool) -> Calibration:
    return Calibration(intercept=round(float(both[0]), 4), similarity=round(float(both[1]), 4),
                       coverage=round(float(both[2]), 4), both=round(float(both[3]), 4),
                       text=(round(float(text[0]), 4), round(float(text[1]), 4)),
                       vector=(round(float(vector[0]), 4), round(float(vector[1]), 4)),
                       against_background=against)


def fit(collected: dict[str, Any], data: dict[str, Any], names: list[str],
        against: bool) -> Calibration:
    x, y, w = training(collected, data, names, against)
    words = x[:, 1] > 0  # text alone judges hits that hold a query word (a text search's)
    return calibration_of(fit_logistic(x, y, w), fit_logistic(x[words][:, 1:2], y[words],
                                                              w[words]),
                          fit_logistic(x[:, 0:1], y, w), against)


def probability(cal: Calibration, hit: dict[str, Any], background: list[float] | None) -> float:
    s, c, _ = features(hit, background, cal.against_background)
    return cal.probability(s, c)


def ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error over equal-width bins of the probability."""
    edges = np.linspace(0, 1, bins + 1)
    total = 0.0
    for lo, hi in itertools.pairwise(edges):
        inside = (p >= lo) & (p < hi if hi < 1 else p <= hi)
        if inside.any():
            total += inside.sum() / len(p) * abs(p[inside].mean() - y[inside].mean())
    return total


def auroc(positive: list[float], negative: list[float]) -> float:
    """The chance that a positive scores above a negative (ties: half)."""
    if not positive or not negative:
        return float("nan")
    neg = np.sort(np.asarray(negative))
    wins = sum(np.searchsorted(neg, p, side="left") + 0.5 * (
        np.searchsorted(neg, p, side="right") - np.searchsorted(neg, p, side="left"))
        for p in positive)
    return float(wins / (len(positive) * len(negative)))


# ----- the figures -----------------------------------------------------------------------
def first_score(cal: Calibration, found: dict[str, Any], limit: int = 10) -> float:
    hits = found["documents"][:limit]
    return max((probability(cal, h, found["background"]) for h in hits), default=0.0)


def shown(cal: Calibration, hits: list[dict[str, Any]], background: list[float] | None,
          gate: float, floor: float, limit: int = 10) -> list[dict[str, Any]]:
    """The hits a search shows (:func:`surrealdocs.parts.relevance.kept`): none unless one
    of its first ``limit`` reaches ``gate``; then those down to ``floor``."""
    scores = [probability(cal, h, background) for h in hits]
    if not any(p >= gate for p in scores[:limit]):
        return []
    return [h for h, p in zip(hits, scores) if p >= floor]


def figures(collected: dict[str, Any], data: dict[str, Any], cal: Calibration,
            gate: float, floor: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    off_first, on_first = [], []
    for name in NAMES:
        qrels = data[name].qrels
        own = collected[name]["own"]
        run_all, run_cut = {}, {}
        kept, had, near_empty = 0, 0, 0
        for qid, found in own.items():
            bg = found["background"]
            docs = found["documents"]
            judged = {d for d, rel in qrels.get(qid, {}).items() if rel > 0}
            run_all[qid] = [d for h in docs for d in h["docs"]]
            passing = shown(cal, docs, bg, gate, floor)
            run_cut[qid] = [d for h in passing for d in h["docs"]]
            first = next((h for h in docs[:10] if judged & set(h["docs"])), None)
            if first is not None:
                had += 1
                kept += any(h is first for h in passing)
            others = [h for h in docs if not judged & set(h["docs"])]
            near_empty += not shown(cal, others, bg, gate, floor)
            on_first.append(first_score(cal, found))
        ndcg_all = np.mean([q["ndcg@10"] for q in score_run(qrels, run_all).values()])
        ndcg_cut = np.mean([q["ndcg@10"] for q in score_run(qrels, run_cut).values()])
        foreign = collected[name]["foreign"]
        empty = sum(not shown(cal, f["documents"], f["background"], gate, floor)
                    for f in foreign.values())
        ask_calls = sum(bool(shown(cal, f["chunks"][:ASK_PASSAGES], f["background"], gate,
                                   floor)) for f in foreign.values())
        off_first += [first_score(cal, f) for f in foreign.values()]
        out[name] = {"queries": len(own), "kept": kept, "had": had,
                     "ndcg_all": float(ndcg_all), "ndcg_cut": float(ndcg_cut),
                     "near_empty": near_empty, "off_topic": len(foreign),
                     "off_empty": empty, "ask_calls": ask_calls}
    out["auroc"] = auroc(on_first, off_first)
    return out


def ranking_by_score(collected: dict[str, Any], data: dict[str, Any],
                     cal: Calibration) -> dict[str, tuple[float, float]]:
    """nDCG@10 of the fused order against the same top 100 ordered by the score."""
    out = {}
    for name in NAMES:
        qrels = data[name].qrels
        fused, learned = {}, {}
        for qid, found in collected[name]["own"].items():
            docs = found["documents"]
            fused[qid] = [d for h in docs for d in h["docs"]]
            order = sorted(docs, key=lambda h: -probability(cal, h, found["background"]))
            learned[qid] = [d for h in order for d in h["docs"]]
        a = np.mean([q["ndcg@10"] for q in score_run(qrels, fused).values()])
        b = np.mean([q["ndcg@10"] for q in score_run(qrels, learned).values()])
        out[name] = (float(a), float(b))
    return out


def leave_one_out(collected: dict[str, Any], data: dict[str, Any],
                  against: bool) -> dict[str, dict[str, float]]:
    out = {}
    for held in NAMES:
        cal = fit(collected, data, [n for n in NAMES if n != held], against)
        x, y, _ = training(collected, data, [held], against)
        p = np.array([cal.probability(s, c) for s, c, _ in x])
        on = [first_score(cal, f) for f in collected[held]["own"].values()]
        off = [first_score(cal, f) for f in collected[held]["foreign"].values()]
        out[held] = {"ece": ece(p, y), "auroc": auroc(on, off), "pairs": len(y),
                     "relevant": int(y.sum())}
    return out


def table(fig: dict[str, Any], gate: float, floor: float) -> str:
    lines = [f"| collection | queries | off-topic: nothing found | first relevant hit kept"
             f" | nDCG@10 without → with the cut-off ({gate:g}, then {floor:g})"
             f" | near misses: nothing found"
             f" | off-topic `ask`: model called |",
             "|---|---|---|---|---|---|---|"]
    for name in NAMES:
        f = fig[name]
        lines.append(
            f"| {name} | {f['queries']} | {f['off_empty']}/{f['off_topic']}"
            f" ({f['off_empty'] / max(f['off_topic'], 1):.1%}) | {f['kept']}/{f['had']}"
            f" ({f['kept'] / max(f['had'], 1):.1%}) | {f['ndcg_all']:.4f} → {f['ndcg_cut']:.4f}"
            f" ({f['ndcg_cut'] - f['ndcg_all']:+.4f}) | {f['near_empty']}/{f['queries']}"
            f" ({f['near_empty'] / max(f['queries'], 1):.1%}) | {f['ask_calls']}/{f['off_topic']}"
            f" ({f['ask_calls'] / max(f['off_topic'], 1):.1%}) |")
    off = sum(fig[n]["off_empty"] for n in NAMES) / sum(fig[n]["off_topic"] for n in NAMES)
    kept = sum(fig[n]["kept"] for n in NAMES) / sum(fig[n]["had"] for n in NAMES)
    calls = sum(fig[n]["ask_calls"] for n in NAMES) / sum(fig[n]["off_topic"] for n in NAMES)
    lines.append(f"| all | {sum(fig[n]['queries'] for n in NAMES)} | {off:.1%} | {kept:.1%}"
                 f" | | | {calls:.1%} |")
    lines.append(f"\nAUROC of the first hit's score, on-topic against off-topic: "
                 f"{fig['auroc']:.3f}")
    return "\n".join(lines)


# questions about nothing a store of one's own files is likely to hold (the issue's, and
# the earlier cut-off's probe)
PROBE_OFF_TOPIC = [
    "recipe for banana bread", "how to repair a bicycle chain",
    "symptoms of feline kidney disease", "recipe for chocolate cake",
    "how do I renew my passport", "stock price of apple today",
    "best hiking trails in the alps", "guitar chord progressions for beginners",
    "who won the oscars", "asdkjh qwe zxcv", "symptoms of the flu",
    "train timetable from Paris to Berlin"]


async def probe(db: str, about: list[str], limit: int) -> None:
    """On a store of one's own files: the hits each question keeps at the default cut-off
    (of ``limit``), questions about the files against off-topic ones."""
    async with await KnowledgeBase.open(settings=Settings.from_env(db=db)) as kb:
        for label, questions in (("about the files", about), ("off-topic", PROBE_OFF_TOPIC)):
            kept_total, empty = 0, 0
            for question in questions:
                hits = await kb.search(question, limit=limit, cutoff=False)
                kept = await kb.search(question, limit=limit)  # the default cut-off
                kept_total += len(kept)
                empty += not kept
                top = hits[0] if hits else None
                print(f"{label:15} {question[:44]:44} kept {len(kept):2}/{len(hits)}"
                      + (f"  first {top.score:.3f} (similarity {top.similarity or 0:.3f},"
                         f" coverage {top.coverage or 0:.2f}) {top.source.rsplit('/', 1)[-1]}"
                         if top else ""))
            print(f"{label:15} {len(questions)} questions: {kept_total} hits kept, {empty} found"
                  " nothing\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", type=Path)
    parser.add_argument("--probe", help="a store of one's own files to probe instead")
    parser.add_argument("--about", nargs="+", default=[], help="questions about its files")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--depth", type=int, default=20, help="hits per query in the fit")
    parser.add_argument("--cache", type=Path, help="the collected hits (JSON), reused")
    parser.add_argument("--fit", action="store_true", help="fit and print the values")
    parser.add_argument("--cutoff", type=float, default=Settings().relevance_cutoff,
                        help="what one hit must reach for a search to show anything")
    parser.add_argument("--floor", type=float, default=Settings().relevance_floor,
                        help="what the other hits must reach then")
    parser.add_argument("--sweep", action="store_true", help="the figures at other cut-offs")
    args = parser.parse_args()
    if args.probe:
        asyncio.run(probe(args.probe, args.about, args.limit))
        return
    if args.stores is None:
        parser.error("give --stores (the collections) or --probe STORE")
    data = datasets()
    cache = args.cache or args.stores / "relevance-hits.json"
    if cache.exists():
        collected = json.loads(cache.read_text())
    else:
        collected = asyncio.run(collect(args.stores, data, args.depth))
        cache.write_text(json.dumps(collected))
    model = collected[NAMES[0]]["model"]
    if args.fit:
        for against in (False, True):
            print(f"\n## fit, similarity {'against the background' if against else 'as it is'}")
            for held, f in leave_one_out(collected, data, against).items():
                print(f"left out {held}: ECE {f['ece']:.4f}, AUROC {f['auroc']:.3f}"
                      f" ({f['pairs']} pairs, {f['relevant']} relevant)")
            print("all four:", fit(collected, data, list(NAMES), against))
        print("\n## each collection with the calibration fitted on the other three")
        rows = {}
        for held in NAMES:
            cal = fit(collected, data, [n for n in NAMES if n != held], False)
            rows[held] = figures(collected, data, cal, args.cutoff, args.floor)[held]
        rows["auroc"] = float("nan")
        print(table(rows, args.cutoff, args.floor))
    cal = calibration_for(model)
    print(f"\n## shipped calibration for {model}: {cal}")
    print(table(figures(collected, data, cal, args.cutoff, args.floor), args.cutoff,
                args.floor))
    background = calibration_for("another model")
    print(f"\n## the calibration of other models (against the background): {background}")
    print(table(figures(collected, data, background, args.cutoff, args.floor), args.cutoff,
                args.floor))
    print("\n## nDCG@10: the fused order against the same hits ordered by the score")
    for name, (a, b) in ranking_by_score(collected, data, cal).items():
        print(f"{name}: {a:.4f} → {b:.4f} ({b - a:+.4f})")
    if args.sweep:
        for gate in (0.1, 0.15, 0.2, 0.25, 0.3):
            for floor in (0.01, 0.02, 0.03, 0.05, 0.1):
                if floor > gate:
                    continue
                fig = figures(collected, data, cal, gate, floor)
                off = sum(fig[n]["off_empty"] for n in NAMES) / sum(fig[n]["off_topic"]
                                                                     for n in NAMES)
                kept = sum(fig[n]["kept"] for n in NAMES) / sum(fig[n]["had"] for n in NAMES)
                drops = " ".join(f"{fig[n]['ndcg_cut'] - fig[n]['ndcg_all']:+.4f}"
                                 for n in NAMES)
                print(f"cut-off {gate:g} then {floor:g}: off-topic empty {off:.1%}, first"
                      f" relevant kept {kept:.1%}, nDCG change {drops}")

if __name__ == "__main__":
    main()
