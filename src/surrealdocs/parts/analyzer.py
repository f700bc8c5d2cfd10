"""The text analyzer of the text index: the same words for the chunks and for the queries.

It follows the engine's analyzer (``class`` tokens, lowercase, ASCII folding, Snowball):
runs of letters and runs of digits are terms ("r2d2" is r, 2, d, 2), lower-cased, folded
to ASCII by anyascii ("crème brûlée" and "creme brulee" are the same terms, as a user
typing without accents expects), then stemmed by PyStemmer's Snowball stemmer for the
store's ``analyzer_language``. For the languages written in other scripts (Arabic, Greek,
Russian, Tamil) the stemmer comes first, since it knows only its own script.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import Stemmer
from anyascii import anyascii

from ..config import NO_STEMMING

_PIECE = re.compile(r"[^\W\d_]+|\d+", re.UNICODE)
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
OWN_SCRIPT = frozenset({"arabic", "greek", "russian", "tamil"})  # stemmed before folding
MAX_TERM_CHARS = 64  # longer runs (hashes, base64) are cut: a term is a key in the index

# Common English function words. The analyzer indexes them, and in an OR query they match
# almost every chunk (slow) while adding nothing to the ranking.
STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not of off on once only or other our ours ourselves out over
own same she should so some such than that the their theirs them themselves then there these
they this those through to too under until up very was we were what when where which while who
whom why will with would you your yours yourself yourselves
""".split())


class Analyzer:
    """Text to index terms for one language."""

    def __init__(self, language: str = "english") -> None:
        self.language = language
        self._local = threading.local()  # a PyStemmer stemmer is not thread-safe

    def words(self, text: str) -> list[str]:
        """The text's words (letter runs and digit runs), lower-cased, not yet terms."""
        return _PIECE.findall(text.lower())

    def terms(self, text: str) -> list[str]:
        """The index terms of a text, in order, repeats kept."""
        return self.terms_of_words(self.words(text))

    def terms_of_words(self, words: list[str]) -> list[str]:
        return [t for t in self.term_of_each(words) if t]

    def indexed_terms(self, text: str) -> list[str]:
        """The terms of a text that the index keeps postings of: those of its words that a
        query can hold (queries drop :data:`STOP_WORDS`)."""
        return self.terms_of_words([w for w in self.words(text) if w not in STOP_WORDS])

    def term_of_each(self, words: list[str]) -> list[str]:
        """The term of each word, in order ("" for a word that gives none: a word is
        analysed alone, so a vocabulary's words can be analysed once each)."""
        if self.language in OWN_SCRIPT:
            out = [s if s.isascii() else _fold(s) for s in self._stem(words)]
        else:
            out = self._stem([w if w.isascii() else _fold(w) for w in words])
        if out and max(map(len, out)) > MAX_TERM_CHARS:
            out = [t[:MAX_TERM_CHARS] for t in out]
        return out

    def _stem(self, words: list[str]) -> list[str]:
        if self.language == NO_STEMMING:
            return words
        stemmer = getattr(self._local, "stemmer", None)
        if stemmer is None:
            stemmer = self._local.stemmer = Stemmer.Stemmer(self.language)
        stems: list[str] = stemmer.stemWords(words)
        return stems


@lru_cache(maxsize=65536)
def _fold(term: str) -> str:
    return _NOT_ALNUM.sub("", anyascii(term).lower())


@lru_cache(maxsize=8)
def analyzer_for(language: str) -> Analyzer:
    return Analyzer(language)
