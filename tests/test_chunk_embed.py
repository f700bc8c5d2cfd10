from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from surrealdocs.embed import get_embedder, token_window
from surrealdocs.embed.hashing import HashingEmbedder
from surrealdocs.embed.minilm import (
    MODEL_SHA256,
    TOKENIZER_PATH,
    TOKENIZER_SHA256,
    MiniLMEmbedder,
    file_sha256,
    model_path,
)
from surrealdocs.errors import ConfigurationError
from surrealdocs.parts.chunk import (
    Chunk,
    assign_pages,
    byte_to_char_offsets,
    chunk_text,
    fit_to_window,
)


def test_byte_offsets_become_char_offsets_for_non_ascii() -> None:
    text = "Grüße aus Köln — naïve café 😀 done"
    for char_index in range(len(text) + 1):
        byte_index = len(text[:char_index].encode("utf-8"))
        assert byte_to_char_offsets(text, [byte_index]) == [char_index]


def test_chunk_text_positions_match_the_text() -> None:
    paragraph = ("Über die Brücke gingen naïve Bäcker. " * 12).strip()
    text = "\n\n".join(f"{n}. {paragraph}" for n in range(8))
    chunks = chunk_text(text, max_chars=300, overlap=40)
    assert len(chunks) > 5
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert text[c.char_start:c.char_end] == c.content
        assert len(c.content) <= 300
    assert chunks[-1].char_end == len(text.rstrip())


def test_chunk_text_of_blank_text_is_empty() -> None:
    assert chunk_text("   \n ") == []


def test_default_model_files_are_the_pinned_ones() -> None:
    assert file_sha256(model_path()) == MODEL_SHA256
    assert file_sha256(TOKENIZER_PATH) == TOKENIZER_SHA256


def test_minilm_reference_vector() -> None:
    model = get_embedder("all-minilm-l6-v2")
    assert model.dimension == 384
    vec = model.embed_query("This is an example sentence")
    # int8 reference values, measured against the fp32 sentence-transformers model
    assert vec[:5] == pytest.approx([0.0668, 0.0612, 0.0509, 0.0790, 0.0384], abs=0.005)
    assert np.linalg.norm(vec) == pytest.approx(1.0, abs=1e-5)


def test_minilm_batches_equal_single_calls_and_truncate_at_256_tokens() -> None:
    model = get_embedder("all-minilm-l6-v2")
    texts = ["short", "a somewhat longer sentence about databases", "x " * 600]
    batch = model.embed_documents(texts)
    assert batch.shape == (3, 384) and batch.dtype == np.float32
    for text, row in zip(texts, batch):
        assert np.allclose(model.embed_query(text), row, atol=1e-4)
    # a text far past 256 tokens embeds as its first 256 tokens
    assert np.allclose(model.embed_query("x " * 600), model.embed_query("x " * 400), atol=1e-4)


def test_minilm_vectors_do_not_depend_on_the_batch_size() -> None:
    # the default batch is small for memory's sake (BENCHMARKS.md, "Ingest memory"): the
    # padding of a larger batch must not change any vector
    texts = [("word " * n).strip() for n in (1, 7, 30, 90, 200, 3, 400, 12, 55)]
    small = MiniLMEmbedder(batch_size=4).embed_documents(texts)
    large = MiniLMEmbedder(batch_size=32).embed_documents(texts)
    assert np.allclose(small, large, atol=1e-4)
    assert not np.allclose(small[0], small[1], atol=1e-2)


def test_minilm_semantics() -> None:
    model = get_embedder("all-minilm-l6-v2")
    q = model.embed_query("How do I reset my password?")
    docs = model.embed_documents([
        "To change a forgotten password, open settings and choose 'reset'.",
        "The football match ended two to one after extra time.",
    ])
    sims = docs @ q
    assert sims[0] > sims[1] + 0.3


def test_hashing_embedder_is_deterministic_and_lexical() -> None:
    model = HashingEmbedder(128)
    a, b, c = model.embed_documents(["red apple pie", "apple pie red", "blue whale song"])
    assert np.allclose(a, b)
    assert float(a @ c) < 0.5
    assert model.embed_query("") .shape == (128,)


def test_unknown_model_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="unknown embedding model"):
        get_embedder("no-such-model")


def test_assign_pages_from_page_starts() -> None:
    chunks = [Chunk(index=0, content="a" * 10, char_start=0, char_end=10),
              Chunk(index=1, content="b" * 70, char_start=190, char_end=260),
              Chunk(index=2, content="c" * 5, char_start=300, char_end=305)]
    assign_pages(chunks, [[2, 197], [1, 0], [3, 300]])  # any order
    assert [(c.first_page, c.last_page) for c in chunks] == [(1, 1), (1, 2), (3, 3)]
    untouched = [Chunk(index=0, content="a", char_start=0, char_end=1)]
    assign_pages(untouched, None)
    assert untouched[0].first_page is None


# --- chunks fit the model's window ---------------------------------------------------------


def _words(texts: Sequence[str]) -> list[int]:
    return [len(t.split()) + 2 for t in texts]  # word pieces, roughly, with [CLS] and [SEP]


def test_a_text_that_fits_the_window_is_one_chunk() -> None:
    text = "\n  " + " ".join(f"word{i}." for i in range(60)) + "  \n"
    chunks = chunk_text(text, 120, 20)
    assert len(chunks) > 1
    fitted = fit_to_window(text, chunks, 100, _words)
    assert len(fitted) == 1
    only = fitted[0]
    assert only.content == text.strip() and text[only.char_start:only.char_end] == only.content
    assert fit_to_window(text, chunks, 50, _words) == chunks  # too long for it: unchanged


def test_chunks_longer_than_the_window_are_cut_again() -> None:
    text = "Intro line.\n\n" + " ".join(f"w{i}" for i in range(400)) + "\n\nLast line."
    chunks = chunk_text(text, 5000, 100)
    assert len(chunks) == 1 and _words([chunks[0].content])[0] > 100
    fitted = fit_to_window(text, chunks, 100, _words)
    assert len(fitted) > 4
    assert all(n <= 100 for n in _words([c.content for c in fitted]))
    assert [c.index for c in fitted] == list(range(len(fitted)))
    for c in fitted:
        assert text[c.char_start:c.char_end] == c.content
    covered = {w for c in fitted for w in c.content.split()}
    assert covered == set(text.split())  # nothing lost


def test_minilm_counts_its_word_pieces() -> None:
    model = get_embedder("all-minilm-l6-v2")
    window = token_window(model)
    assert window is not None and window[0] == 256
    assert window[1](["hello world", "x " * 600]) == [4, 602]
    assert token_window(HashingEmbedder(64)) is None  # no window: chunks stay as they are
