"""Extraction time with language detection over the whole text (kreuzberg's own, as before)
against detection on evenly spaced windows (``extract.detect_languages``, the default).

    python bench/extract_languages.py [CORPUS_DIR] [--rounds 2]

Every file of the corpus is extracted with OCR off (OCR costs the same either way and
would drown the difference), once per way per round, alternating the order between rounds.
Prints the mean seconds per way and the files whose detected languages differ.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from kreuzberg import ExtractionConfig, LanguageDetectionConfig

from surrealdocs.config import Settings
from surrealdocs.parts.discover import discover
from surrealdocs.parts.extract import Extracted, extract_file

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "documents"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    files, _ = discover([args.corpus])
    whole = Settings(db="mem://", embed=False, ocr_language="", kreuzberg_config=ExtractionConfig(
        language_detection=LanguageDetectionConfig(enabled=True, min_confidence=0.5,
                                                   detect_multiple=True)))
    windows = Settings(db="mem://", embed=False, ocr_language="")
    ways = {"whole text": whole, "windows": windows}
    seconds = dict.fromkeys(ways, 0.0)
    languages: dict[str, dict[Path, list[str] | None]] = {name: {} for name in ways}
    for r in range(args.rounds):
        for name in (list(ways) if r % 2 == 0 else list(reversed(ways))):
            t0 = time.perf_counter()
            for path in files:
                out = asyncio.run(extract_file(path, ways[name]))
                if isinstance(out, Extracted):
                    languages[name][path] = out.detected_languages
            seconds[name] += time.perf_counter() - t0
    print(f"{len(files)} files, OCR off, mean of {args.rounds} rounds:")
    for name in ways:
        print(f"  {name}: {seconds[name] / args.rounds:.2f} s")
    differ = [p for p in languages["windows"]
              if languages["windows"][p] != languages["whole text"].get(p)]
    print(f"detected languages differ on {len(differ)} files:")
    for p in differ:
        print(f"  {p.name}: whole text {languages['whole text'].get(p)},"
              f" windows {languages['windows'][p]}")


if __name__ == "__main__":
    main()
