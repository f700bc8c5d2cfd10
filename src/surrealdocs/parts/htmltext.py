"""HTML to plain text with selectolax (Lexbor), to check and stand in for kreuzberg's text.

kreuzberg 4.10.4's HTML extraction drops inline text that sits directly in a container next
to block siblings: ``<p>Intro</p><div>Body</div>`` gives ``Intro``, so an article whose body
is in ``<div>``\\ s loses it silently. :func:`lost_share` measures how much of a page's
visible text kreuzberg's output misses (the words of :func:`html_to_text` that it lacks);
extraction uses :func:`html_to_text` instead when that share is significant.

:func:`html_to_text` renders what a browser shows, as paragraphs: block elements (``p``,
``div``, headings, list items, table rows, ...) are separated by a blank line, ``<br>`` is
a line break, whitespace is collapsed except in ``<pre>``, list items start with ``- ``,
table cells are separated by `` | ``. Scripts, styles, forms' controls, ``<nav>`` (which
kreuzberg leaves out too) and hidden elements (``hidden``, ``display: none``) are left out.
"""

from __future__ import annotations

import re
from collections import Counter

# Elements whose content is not text a reader sees.
_SKIP = frozenset({
    "script", "style", "noscript", "template", "head", "title", "svg", "math", "iframe",
    "object", "embed", "canvas", "select", "option", "button", "input", "textarea", "nav",
    "audio", "video", "picture", "map",
})
_BLOCK = frozenset({
    "address", "article", "aside", "blockquote", "body", "caption", "center", "dd",
    "details", "dialog", "dir", "div", "dl", "dt", "fieldset", "figcaption", "figure",
    "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "html",
    "legend", "li", "main", "menu", "ol", "p", "pre", "section", "summary", "table",
    "tbody", "thead", "tfoot", "tr", "ul",
})
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_WORD = re.compile(r"\w+")
_PARAGRAPH = "\x00"  # a paragraph break while rendering (text nodes cannot contain NUL)


def html_to_text(html: str | bytes) -> str:
    """The visible text of ``html`` as plain-text paragraphs (see the module's notes)."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    root = tree.body or tree.root
    if root is None:
        return ""
    out: list[str] = []
    in_pre = 0
    # depth-first without recursion (pages nest deeply): (node, leaving)
    stack = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        tag = node.tag or ""
        if leaving:
            if tag == "pre":
                in_pre -= 1
            if tag in _BLOCK:
                out.append(_PARAGRAPH)
            elif tag in ("td", "th"):
                out.append(" | ")
            continue
        if node.is_text_node:
            text = (node.text_content or "").replace("\x00", "")
            out.append(text if in_pre else re.sub(r"\s+", " ", text))
            continue
        if not node.is_element_node or tag in _SKIP or _hidden(node):
            continue
        if tag == "br":
            out.append("\n")
            continue
        if tag in _BLOCK:
            out.append(_PARAGRAPH)
        if tag == "pre":
            in_pre += 1
        elif tag == "li":
            out.append("- ")
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(list(node.iter(include_text=True))))
    return _tidy("".join(out))


def _hidden(node: object) -> bool:
    attrs = getattr(node, "attributes", None) or {}
    if "hidden" in attrs:
        return True
    style = attrs.get("style")
    return bool(style and _HIDDEN_STYLE.search(style))


def _tidy(text: str) -> str:
    paragraphs = []
    for block in text.split(_PARAGRAPH):
        lines = [line.strip() for line in block.split("\n")]
        block = "\n".join(line for line in lines if line).strip(" |")
        if block:
            paragraphs.append(block)
    return "\n\n".join(paragraphs)


def words(text: str) -> Counter[str]:
    return Counter(w.lower() for w in _WORD.findall(text))


def lost_share(extracted: str, reference: str) -> tuple[float, int, int]:
    """Which share of ``reference``'s words ``extracted`` lacks (counted with multiplicity),
    with the numbers: ``(share, lost, total)``."""
    ref = words(reference)
    total = sum(ref.values())
    if not total:
        return 0.0, 0, 0
    lost = sum((ref - words(extracted)).values())
    return lost / total, lost, total
