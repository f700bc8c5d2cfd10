"""A document's metadata of the user's own, and filters on it.

Metadata is a flat object: each key holds a value or a list of values. A value is a string,
a number, a boolean or a time (ISO 8601 text is read as a time in every face, so that a
filter written in any face compares times with times). Only *filterable* values take part
in a filter (:func:`filterable_values`): scalars, strings of at most
:data:`MAX_FILTER_CHARS` characters, and lists of them; a nested object is kept and shown,
never matched.

A filter is a tree (:class:`Condition`, :class:`AllOf`, :class:`AnyOf`) written as
``--where`` text (:func:`parse_where`) or as one JSON object (:func:`parse_filter`, the
MongoDB-style form LangChain's vector stores take). :func:`matches` is its meaning, over a
document's metadata; the store answers the same question from an index
(:mod:`surrealdocs.store.documents`), and the tests hold the two to each other.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError

MAX_FILTER_CHARS = 512  # a longer string is kept, but no filter matches it
MAX_KEYS = 200
MAX_KEY_CHARS = 128
MAX_LIST_ITEMS = 1000
MAX_VALUE_CHARS = 65_536
MAX_FILTER_NODES = 200

OPERATORS = ("eq", "ne", "lt", "lte", "gt", "gte", "in", "nin", "exists")
# --where text: the longest operator first, so "<=" is not read as "<"
_WHERE = re.compile(r"^\s*(?P<key>[^\s=!<>]+?)\s*(?P<op>!=|<=|>=|=|<|>)\s*(?P<value>.*?)\s*$",
                    re.DOTALL)
_WORD_OP = re.compile(r"^\s*(?P<key>\S+)\s+(?P<op>not\s+in|in|exists|not\s+exists)\b\s*"
                      r"(?P<value>.*?)\s*$", re.DOTALL | re.IGNORECASE)
_INT = re.compile(r"^[+-]?\d{1,18}$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?"
                       r"(Z|[+-]\d{2}:?\d{2})?$")
_SYMBOL = {"=": "eq", "!=": "ne", "<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}
_MONGO = {f"${op}": op for op in OPERATORS}


# ----- values -----------------------------------------------------------------------------
def time_of(text: str) -> dt.datetime | None:
    """ISO 8601 text (a date, or a date and time) as an aware time (UTC when it names no
    zone), else ``None``."""
    text = text.strip()
    if not (_DATE.match(text) or _DATETIME.match(text)):
        return None
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def typed(text: str) -> Any:
    """A ``KEY=VALUE`` value as typed text: ``true``/``false``, an integer, a decimal
    number, an ISO date or time, a JSON string in double quotes (kept as it is), else the
    text itself."""
    stripped = text.strip()
    lowered = stripped.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if len(stripped) >= 2 and stripped[0] == stripped[-1] == '"':
        try:
            value = json.loads(stripped)
        except ValueError:
            return stripped
        return value if isinstance(value, str) else stripped
    if _INT.match(stripped):
        return int(stripped)
    if _FLOAT.match(stripped):
        number = float(stripped)
        if math.isfinite(number):
            return number
    return time_of(stripped) or stripped


def normalised(value: Any, where: str = "a metadata value") -> Any:
    """A value as stored: ISO text as a time, lists checked, everything else as JSON has
    it (a :class:`ConfigurationError` names what cannot be stored)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if abs(value) >= 2 ** 63:
            raise ConfigurationError(f"{where} is out of range: {value}")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigurationError(f"{where} must be a finite number, got {value!r}")
        return value
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)
    if isinstance(value, str):
        if len(value) > MAX_VALUE_CHARS:
            raise ConfigurationError(
                f"{where} has {len(value)} characters; at most {MAX_VALUE_CHARS}")
        return time_of(value) or value
    if isinstance(value, (list, tuple)):
        if len(value) > MAX_LIST_ITEMS:
            raise ConfigurationError(f"{where} has {len(value)} items; at most"
                                     f" {MAX_LIST_ITEMS}")
        return [normalised(v, where) for v in value]
    if isinstance(value, Mapping):
        return {str(k): normalised(v, where) for k, v in value.items()}
    raise ConfigurationError(f"{where} must be a string, number, boolean, time or a list of"
                             f" them, got {type(value).__name__}")


def with_times(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """An extractor's metadata with its ISO texts as times (at the top and in lists), so
    that filters compare its dates as they compare the user's."""
    out: dict[str, Any] = {}
    for key, value in (metadata or {}).items():
        if isinstance(value, str):
            out[key] = time_of(value) or value if len(value) <= 40 else value
        elif isinstance(value, list):
            out[key] = [time_of(v) or v if isinstance(v, str) and len(v) <= 40 else v
                        for v in value]
        else:
            out[key] = value
    return out


def check_key(key: Any) -> str:
    if not isinstance(key, str) or not key.strip():
        raise ConfigurationError("a metadata key must be non-empty text")
    if len(key) > MAX_KEY_CHARS or key.startswith("$") or any(
            c.isspace() or c in "=<>!" for c in key):
        raise ConfigurationError(
            f"metadata key {key[:40]!r} is not allowed: at most {MAX_KEY_CHARS} characters,"
            " no spaces, no '=<>!', not starting with '$'")
    return key


def user_metadata(given: Mapping[str, Any] | None) -> dict[str, Any]:
    """Metadata a user gives (``--meta``, the API's ``metadata``), checked and normalised."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise ConfigurationError("metadata must be an object of keys and values")
    if len(given) > MAX_KEYS:
        raise ConfigurationError(f"metadata has {len(given)} keys; at most {MAX_KEYS}")
    return {check_key(k): normalised(v, f"metadata {k!r}") for k, v in given.items()}


def parse_meta(pairs: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` texts as metadata: each value typed (:func:`typed`); a key given again
    makes a list; ``KEY=`` is an empty string."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigurationError(f"--meta takes KEY=VALUE, got {pair!r}")
        key = check_key(key.strip())
        item = typed(value)
        if key in out:
            held = out[key]
            out[key] = [*held, item] if isinstance(held, list) else [held, item]
        else:
            out[key] = item
    return user_metadata(out)


def filterable_values(value: Any) -> list[Any]:
    """The values of one key a filter sees: a scalar, or a list's scalars; strings longer
    than :data:`MAX_FILTER_CHARS` and nested objects are left out."""
    items = value if isinstance(value, list) else [value]
    return [v for v in items if _filterable(v)]


def _filterable(v: Any) -> bool:
    if isinstance(v, str):
        return len(v) <= MAX_FILTER_CHARS
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, (bool, int, dt.datetime))


def kind(value: Any) -> str:
    """The family a value compares within: bool, number, string or time."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, dt.datetime):
        return "time"
    return "string"


# ----- filters ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Condition:
    """One test on one key: ``op`` is one of :data:`OPERATORS`; ``value`` a scalar, a list
    (``in``, ``nin``) or a boolean (``exists``)."""

    key: str
    op: str
    value: Any = True

    def __post_init__(self) -> None:
        check_key(self.key)
        if self.op not in OPERATORS:
            raise ConfigurationError(f"unknown filter operator {self.op!r}; the operators are"
                                     f" {', '.join(OPERATORS)}")
        if self.op in ("in", "nin"):
            if not isinstance(self.value, (list, tuple)) or not self.value:
                raise ConfigurationError(f"{self.key} {self.op} needs a non-empty list")
            for v in self.value:
                _check_operand(self.key, v)
        elif self.op == "exists":
            if not isinstance(self.value, bool):
                raise ConfigurationError(f"{self.key} exists takes true or false")
        else:
            _check_operand(self.key, self.value)

    def to_json(self) -> dict[str, Any]:
        return {self.key: {f"${self.op}": _json_value(self.value)}}


@dataclass(frozen=True)
class AllOf:
    items: tuple[MetaFilter, ...]

    def to_json(self) -> dict[str, Any]:
        return {"$and": [i.to_json() for i in self.items]}


@dataclass(frozen=True)
class AnyOf:
    items: tuple[MetaFilter, ...]

    def to_json(self) -> dict[str, Any]:
        return {"$or": [i.to_json() for i in self.items]}


MetaFilter = Condition | AllOf | AnyOf


def _check_operand(key: str, value: Any) -> None:
    if not _filterable(value) or (isinstance(value, str) and not value):
        raise ConfigurationError(
            f"the filter on {key!r} compares with {value!r}: give a non-empty string (at most"
            f" {MAX_FILTER_CHARS} characters), a number, a boolean or an ISO time")


def _json_value(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return value


def parse_where(texts: Sequence[str] | str | None) -> MetaFilter | None:
    """``--where`` texts (all must hold): ``KEY=VALUE``, ``KEY!=VALUE``, ``KEY<VALUE``,
    ``<=``, ``>``, ``>=``, ``KEY in A,B``, ``KEY not in A,B``, ``KEY exists``,
    ``KEY not exists``. Values are typed as ``--meta`` types them."""
    if texts is None:
        return None
    if isinstance(texts, str):
        texts = [texts]
    conditions = [_where_one(t) for t in texts if t.strip()]
    return _joined(conditions)


def _where_one(text: str) -> Condition:
    word = _WORD_OP.match(text)
    if word:
        op = " ".join(word["op"].lower().split())
        key, value = word["key"], word["value"]
        if op in ("exists", "not exists"):
            if value:
                raise ConfigurationError(f"--where {text!r}: nothing may follow 'exists'")
            return Condition(key, "exists", op == "exists")
        items = [typed(v) for v in _split_list(value)]
        return Condition(key, "nin" if op == "not in" else "in", items)
    match = _WHERE.match(text)
    if not match or not match["value"]:
        raise ConfigurationError(
            f"--where {text!r} is not a filter; write KEY=VALUE, KEY!=VALUE, KEY<VALUE,"
            " KEY<=VALUE, KEY>VALUE, KEY>=VALUE, 'KEY in A,B', 'KEY not in A,B' or"
            " 'KEY exists'")
    return Condition(match["key"], _SYMBOL[match["op"]], typed(match["value"]))


def _split_list(text: str) -> list[str]:
    items = [v.strip() for v in text.split(",")]
    if not text.strip() or any(not v for v in items):
        raise ConfigurationError(f"'in' takes a comma-separated list of values, got {text!r}")
    return items


def parse_filter(obj: Any) -> MetaFilter | None:
    """The JSON filter object (API, MCP, LangChain's ``filter``): ``{"team": "a"}``,
    ``{"year": {"$gte": 2020}}``, ``{"tags": {"$in": ["x", "y"]}}``,
    ``{"team": {"$exists": true}}``, ``{"$and": [...]}``, ``{"$or": [...]}``; several keys
    in one object must all hold. Operators: ``$eq $ne $lt $lte $gt $gte $in $nin
    $exists``."""
    if obj is None or obj == {}:
        return None
    nodes = [0]
    return _node(obj, nodes)


def _node(obj: Any, nodes: list[int]) -> MetaFilter:
    nodes[0] += 1
    if nodes[0] > MAX_FILTER_NODES:
        raise ConfigurationError(f"the filter has more than {MAX_FILTER_NODES} parts")
    if not isinstance(obj, Mapping) or not obj:
        raise ConfigurationError(f"a filter must be a non-empty JSON object, got {obj!r}")
    parts: list[MetaFilter] = []
    for key, value in obj.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise ConfigurationError(f"{key} takes a non-empty list of filters")
            items = tuple(_node(v, nodes) for v in value)
            parts.append(AllOf(items) if key == "$and" else AnyOf(items))
        elif isinstance(key, str) and key.startswith("$"):
            raise ConfigurationError(f"unknown filter operator {key!r} at the top of a filter;"
                                     " there: $and, $or, or a metadata key")
        elif isinstance(value, Mapping):
            if not value:
                raise ConfigurationError(f"the filter on {key!r} is an empty object")
            for op, operand in value.items():
                name = _MONGO.get(op)
                if name is None:
                    raise ConfigurationError(
                        f"unknown filter operator {op!r} on {key!r}; the operators are"
                        f" {', '.join(_MONGO)}")
                parts.append(Condition(key, name, _operand(name, operand)))
        else:
            parts.append(Condition(key, "eq", _operand("eq", value)))
    joined = _joined(parts)
    assert joined is not None
    return joined


def _operand(op: str, value: Any) -> Any:
    if op in ("in", "nin"):
        if not isinstance(value, list):
            raise ConfigurationError(f"${op} takes a list, got {value!r}")
        return [_scalar(v) for v in value]
    return value if op == "exists" else _scalar(value)


def _scalar(value: Any) -> Any:
    return time_of(value) or value if isinstance(value, str) else value


def _joined(parts: Sequence[MetaFilter]) -> MetaFilter | None:
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def both(a: MetaFilter | None, b: MetaFilter | None) -> MetaFilter | None:
    """Filters that must both hold."""
    return _joined([f for f in (a, b) if f is not None])


# ----- meaning ----------------------------------------------------------------------------
def matches(metadata: Mapping[str, Any] | None, where: MetaFilter) -> bool:
    """Whether a document with ``metadata`` passes ``where`` (the filters' meaning)."""
    if isinstance(where, AllOf):
        return all(matches(metadata, w) for w in where.items)
    if isinstance(where, AnyOf):
        return any(matches(metadata, w) for w in where.items)
    held = filterable_values((metadata or {}).get(where.key, []))
    op, value = where.op, where.value
    if op == "exists":
        return bool(held) is bool(value)
    if op in ("ne", "nin"):
        return not matches(metadata, Condition(where.key, "eq" if op == "ne" else "in", value))
    if op == "in":
        return any(same(h, v) for h in held for v in value)
    if op == "eq":
        return any(same(h, value) for h in held)
    family = kind(value)
    return any(kind(h) == family and _compare(op, h, value) for h in held)


def _compare(op: str, a: Any, b: Any) -> bool:
    if op == "lt":
        return bool(a < b)
    if op == "lte":
        return bool(a <= b)
    if op == "gt":
        return bool(a > b)
    return bool(a >= b)


def same(a: Any, b: Any) -> bool:
    """Equal and of one family (``1 = 1.0``, ``true != 1``)."""
    return kind(a) == kind(b) and a == b
