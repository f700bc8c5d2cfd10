"""The vector leg's scan, alone: float32 rows with numpy against the int8 codes the text
index's segments keep (``store/segments/codes.py``: simsimd's int8 kernels, then the best
512 rows scored again against the unquantized query), on the same random vectors.

    python bench/vector_scan.py [--rows 100000] [--dimension 384] [--queries 50]

Prints p50 ms per query for each, the bytes each holds, and the recall@10 of the codes'
ranking against the exact float32 one (as a set).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from surrealdocs.store.segments.codes import VectorSet


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dimension", type=int, default=384)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((args.rows, args.dimension)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    coded = VectorSet.quantize(matrix, np.ones(args.rows, dtype=bool))
    queries = matrix[rng.choice(args.rows, args.queries, replace=False)] + 0.1 * \
        rng.standard_normal((args.queries, args.dimension)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    f32_ms, i8_ms, recall = [], [], []
    for q in queries:  # alternated, so that load on the machine weighs on both alike
        t0 = time.perf_counter()
        exact = np.einsum("ij,j->i", matrix, q)
        f32_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        approx = coded.scores(q, "COSINE")
        i8_ms.append((time.perf_counter() - t0) * 1000)
        recall.append(len(set(np.argsort(-exact)[:10]) & set(np.argsort(-approx)[:10])) / 10)
    print(json.dumps({
        "rows": args.rows, "dimension": args.dimension,
        "float32_numpy_p50_ms": round(statistics.median(f32_ms), 2),
        "int8_codes_p50_ms": round(statistics.median(i8_ms), 2),
        "float32_mb": round(matrix.nbytes / 2**20, 1),
        "int8_codes_mb": round(coded.size / 2**20, 1),
        "recall_at_10": round(float(np.mean(recall)), 4)}, indent=2))


if __name__ == "__main__":
    main()
