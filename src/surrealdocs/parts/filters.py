"""What a search may be restricted to: sources, MIME types, a notebook, topics, a time window,
the documents' metadata.

Filters are plain data. The store turns them into conditions inside its queries
(:mod:`surrealdocs.store.conditions`), so a filtered search returns ``limit`` hits from the
filtered set, not fewer.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from .metadata import AllOf, AnyOf, Condition, MetaFilter


@dataclass(frozen=True)
class DocumentSet:
    """Documents by key: those in ``keys``, or (``exclude``) all but those, of ``table``."""

    keys: frozenset[Any]
    exclude: bool = False
    table: str = "documents"

    @property
    def nothing(self) -> bool:
        return not self.exclude and not self.keys

    def __contains__(self, key: Any) -> bool:
        return (key in self.keys) != self.exclude

    @staticmethod
    def all_of(sets: Sequence[DocumentSet]) -> DocumentSet:
        table = sets[0].table
        ins = [s.keys for s in sets if not s.exclude]
        outs = frozenset().union(*(s.keys for s in sets if s.exclude))
        if ins:
            return DocumentSet(frozenset.intersection(*ins) - outs, table=table)
        return DocumentSet(outs, exclude=True, table=table)

    @staticmethod
    def any_of(sets: Sequence[DocumentSet]) -> DocumentSet:
        table = sets[0].table
        ins = frozenset().union(*(s.keys for s in sets if not s.exclude))
        outs = [s.keys for s in sets if s.exclude]
        if outs:
            return DocumentSet(frozenset.intersection(*outs) - ins, exclude=True, table=table)
        return DocumentSet(ins, table=table)

# Characters with a meaning in the engine's (Rust) regular expressions, outside and inside
# a character class. Everything else stands for itself.
_REGEX_META = frozenset("\\^$.|?*+()[]{}")
_CLASS_META = frozenset("\\^[]-&~")


@dataclass(frozen=True)
class Filters:
    """Restrict a search.

    Attributes:
        source: a glob over document sources (``*.pdf``, ``reports/*``). ``*`` and ``**``
            match any run of characters (``/`` included), ``?`` one character, ``[abc]``,
            ``[a-z]`` and ``[!a]`` a set (fnmatch's rules). A pattern that is not absolute
            matches at the end of the path.
        mime_type: one MIME type or a list of them.
        notebook: a notebook's record id: only sources in that notebook.
        created_after, created_before: when the source was ingested (naive times are UTC).
        topics: only sources tagged with at least one of these topics.
        where: a filter on the documents' metadata (:mod:`surrealdocs.parts.metadata`).
        documents: the documents ``where`` lets through, once the store has answered it
            (:meth:`resolved`); the legs apply it.
    """

    source: str | None = None
    mime_type: str | Sequence[str] | None = None
    notebook: Any = None
    created_after: dt.datetime | None = None
    created_before: dt.datetime | None = None
    topics: Sequence[str] | None = None
    where: MetaFilter | None = None
    documents: DocumentSet | None = None

    def __post_init__(self) -> None:
        if self.where is not None and not isinstance(self.where, (Condition, AllOf, AnyOf)):
            raise ConfigurationError("where must be a metadata filter (parse_where or"
                                     " parse_filter makes one)")
        if self.source is not None:
            if not isinstance(self.source, str) or not self.source.strip():
                raise ConfigurationError("the source filter must be a non-empty glob")
            if len(self.source) > MAX_GLOB_CHARS:
                raise ConfigurationError(
                    f"the source filter is {len(self.source)} characters long; a glob may have"
                    f" at most {MAX_GLOB_CHARS}")
            wild = sum(self.source.count(c) for c in "*?[")
            if wild > MAX_GLOB_WILDCARDS:
                raise ConfigurationError(
                    f"the source filter has {wild} wildcards; a glob may have at most"
                    f" {MAX_GLOB_WILDCARDS}")
            glob_to_regex(self.source)  # refuses what cannot be a pattern
        if self.mime_type is not None:
            mimes = [self.mime_type] if isinstance(self.mime_type, str) else list(self.mime_type)
            if not all(isinstance(m, str) and m.strip() for m in mimes):
                raise ConfigurationError("MIME type filters must be non-empty strings")
        if self.topics is not None and (
                isinstance(self.topics, str)
                or not all(isinstance(t, str) for t in self.topics)):
            raise ConfigurationError("topics must be a list of strings")
        for name in ("created_after", "created_before"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, dt.datetime):
                raise ConfigurationError(f"{name} must be a datetime, got {value!r}")

    @property
    def mime_types(self) -> list[str]:
        if not self.mime_type:
            return []
        return [self.mime_type] if isinstance(self.mime_type, str) else list(self.mime_type)

    @property
    def empty(self) -> bool:
        return not (self.source or self.mime_type or self.notebook is not None
                    or self.created_after or self.created_before or self.topics
                    or self.where is not None)

    def resolved(self, documents: DocumentSet) -> Filters:
        """These filters with their metadata filter answered by ``documents``."""
        return dataclasses.replace(self, documents=documents)


def aware(value: dt.datetime) -> dt.datetime:
    """``value`` with a time zone (UTC when it had none)."""
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


# what a source glob may be: past these the engine's regex compiler refuses it (or takes
# long); no source path needs more
MAX_GLOB_CHARS = 1000
MAX_GLOB_WILDCARDS = 100


def glob_to_regex(pattern: str) -> str:
    """A glob as an anchored regular expression in the engine's (Rust) syntax.

    ``*`` and ``**`` match any run of characters, ``/`` included; ``?`` matches one
    character; brackets follow fnmatch: ``[!a]`` is negation, ``]`` first in a set is
    literal, ``^`` is an ordinary character, a reversed range (``[z-a]``) matches nothing,
    and an unclosed ``[`` is literal. A relative pattern matches at the end of the path
    (``name.pdf`` matches ``/any/dir/name.pdf`` and a bare ``name.pdf``).
    """
    relative = "://" not in pattern and not pattern.startswith(("/", "*"))
    if relative:
        pattern = "*/" + pattern
    out = ["^"]
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "*":
            while i + 1 < n and pattern[i + 1] == "*":
                i += 1
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            end = _bracket_end(pattern, i)
            if end < 0:
                out.append(_escape(ch))
            else:
                out.append(_char_class(pattern[i + 1:end]))
                i = end
        else:
            out.append(_escape(ch))
        i += 1
    out.append("$")
    regex = "".join(out)
    # a relative "name" also matches a bare "name" at the root
    return "^(?:.*/)?" + regex[len("^.*/"):] if relative else regex


def _bracket_end(pattern: str, start: int) -> int:
    """Index of the ``]`` closing the set opened at ``start``, or -1 (fnmatch's rules)."""
    j = start + 1
    if j < len(pattern) and pattern[j] == "!":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 1
    return j if j < len(pattern) else -1


def _char_class(body: str) -> str:
    negate = body.startswith("!")
    if negate:
        body = body[1:]
    items: list[str] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            low, high = body[i], body[i + 2]
            if low <= high:
                items.append(f"{_escape_in_class(low)}-{_escape_in_class(high)}")
            i += 3
        else:
            items.append(_escape_in_class(body[i]))
            i += 1
    if not items:  # only reversed ranges: nothing, or with "!" anything
        return r"[\s\S]" if negate else r"\b\B"
    # a backslash last: the engine reads "\/" in a pattern as "/" (see _escape)
    items.sort(key=lambda item: item.endswith("\\\\"))
    return "[" + ("^" if negate else "") + "".join(items) + "]"


def _escape(ch: str) -> str:
    if ch == "\\":
        # The engine turns "\/" in a pattern into "/" (regex-literal syntax) before
        # compiling it, so an escaped backslash followed by "/" would lose its backslash.
        return r"[\\]"
    return "\\" + ch if ch in _REGEX_META else ch


def _escape_in_class(ch: str) -> str:
    return "\\" + ch if ch in _CLASS_META else ch
