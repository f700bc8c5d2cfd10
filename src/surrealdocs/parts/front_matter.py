"""A Markdown file's YAML front matter (``---`` … ``---`` at its very start) as metadata.

kreuzberg keeps front matter in the text, rendered as Rust debug output
(``year: Number(2024)``, ``tags: Sequence [String("a")]``) and takes only a title and a date
from it. The front matter is cut off here before extraction, and its keys become the
document's metadata (filterable like the user's own: docs/filters.md).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

MAX_FRONT_MATTER_BYTES = 64 * 1024
_FRONT = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)(?:\r?\n)?^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)",
                    re.DOTALL | re.MULTILINE)


def split_front_matter(data: bytes) -> tuple[dict[str, Any], bytes] | None:
    """(the front matter's keys, the text after it), or ``None`` when the file opens with no
    front matter that is a YAML mapping (then it is extracted whole, as it is). YAML anchors
    and aliases are refused (an alias bomb grows without bound), as are front matters over
    :data:`MAX_FRONT_MATTER_BYTES`."""
    import yaml

    if not data.startswith((b"---", b"\xef\xbb\xbf---")):
        return None
    try:
        text = data[:MAX_FRONT_MATTER_BYTES + 16].decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        text = data[:exc.start].decode("utf-8")
    match = _FRONT.match(text)
    if match is None:
        return None
    head = match.group(1)
    try:
        if any(isinstance(event, yaml.AliasEvent)
               for event in yaml.parse(head, Loader=yaml.SafeLoader)):
            return None
        loaded = yaml.safe_load(head)
    except yaml.YAMLError:
        return None
    if not isinstance(loaded, dict) or not loaded:
        return None
    rest = data[len(match.group(0).encode("utf-8")):]
    return {str(k): _plain(v) for k, v in loaded.items()}, rest


def _plain(value: Any) -> Any:
    """A YAML value as JSON has values (dates as times, anything else as text)."""
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)
