"""The shared corpus of 356 real files (about 30 broken on purpose), when it is present."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from conftest import shared_docs
from surrealdocs import KnowledgeBase, Settings

pytestmark = pytest.mark.slow  # subprocesses, servers or real corpora: -m 'not slow' skips

MAX_BYTES = 1_000_000  # the few big files are the benchmark's job, not the test suite's
# OOXML files named .doc / .ppt (MANIFEST: magic-mismatch): extracted as what they are
MISNAMED_OFFICE = {"doc/eng_spa_mult.doc", "ppt/eng_spa_mult.ppt"}


def expected_outcomes(root: Path) -> dict[str, tuple[str, int]]:
    with open(root / "RESULTS.tsv", newline="") as f:
        return {row["path"]: (row["outcome"], int(row["chars"] or 0))
                for row in csv.DictReader(f, delimiter="\t")}


# binary files whose bytes went through a text conversion (U+FFFD where their data was)
MANGLED = {"pdf/patchelf.pdf"}


async def test_corpus_lands_with_every_failure_named(tmp_path: Path) -> None:
    root = shared_docs()
    expected = expected_outcomes(root)
    small = sorted(p for p in root.rglob("*") if p.is_file() and p.parent != root
                   and p.stat().st_size <= MAX_BYTES)
    settings = Settings(db=str(tmp_path / "kb"), model="hashing-64", extract_timeout=60)
    async with await KnowledgeBase.open(settings=settings) as kb:
        report = await kb.ingest(small)
        assert len(report.results) == len(small)
        outcome = {str(Path(r.source).relative_to(root)): r for r in report.results}
        for rel, (kz_outcome, chars) in expected.items():
            if rel not in outcome:
                continue
            ours = outcome[rel]
            if rel in MISNAMED_OFFICE:  # kreuzberg trusts the name; we read the content
                assert ours.status == "ingested", (rel, ours)
            elif rel in MANGLED:  # kreuzberg finds no text; we say why
                assert ours.status == "failed" and "U+FFFD" in (ours.reason or ""), (rel, ours)
            elif kz_outcome == "error":
                assert ours.status == "failed", (rel, ours)
                assert ours.reason and len(ours.reason) > 10, (rel, ours)
            elif chars > 0:
                assert ours.status in ("ingested", "duplicate", "empty"), (rel, ours)
            else:  # no text for kreuzberg alone: we report it, or OCR found some
                assert ours.status in ("empty", "ingested", "duplicate"), (rel, ours)
                if ours.status == "empty":
                    assert ours.reason == "no text could be extracted"
        counts = report.counts
        assert counts["failed"] >= 15 - len(MISNAMED_OFFICE) and counts["empty"] >= 20
        assert counts["ingested"] >= 250
        stats = await kb.stats()
        assert stats.documents == counts["ingested"]
        (bad,) = await kb.store.query(
            "SELECT VALUE id FROM documents WHERE complete = false OR chunk_count = 0"
            " OR string::len(string::trim(content)) = 0;")
        assert bad == []

        again = await kb.ingest(small)  # nothing extracted again; failures said again
        assert again.counts["unchanged"] + again.counts["failed"] == len(small)
        assert again.counts["failed"] == counts["failed"]
        assert all(r.last_status == "failed" for r in again.results if r.status == "failed")
        assert again.chunks_written == 0
