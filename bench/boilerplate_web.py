"""What a web page's extraction keeps of its article and leaves of its frame.

    python bench/boilerplate_web.py [--pages DIR ...]

Pages: the HTML files of ../shared/data/documents, and real pages saved from two sites as
their Debian packages ship them (fetched once with ``apt-get download python3.11-doc
debian-reference-en`` and unpacked with ``dpkg-deb -x``: the Python 3.11 library reference,
a Sphinx site with a sidebar, navigation bars and a footer; the Debian Reference, DocBook
with navigation header and footer). Give their unpacked folders with ``--pages``.

Each page's article and frame are marked by its own structure: for the Python pages the
``role=main`` body is the article and the related-links bars, the sidebar and the footer
are the frame; for the Debian Reference the navigation header and footer are the frame; for
the shared files (no common template) the frame is what sits in ``header``, ``nav``,
``footer`` and ``aside`` elements or in elements whose class or id names a menu, navigation,
header, footer, sidebar, cookie notice or banner. Words are counted as a multiset: *article
lost* is the share of the article's words missing from the extraction; *frame left* the
share of the frame's words (those beyond the article's own counts) still in it.

Extractors: trafilatura (what surrealdocs uses: ``web.content.main_content``), jusText
(the alternative), and kreuzberg on the whole page (what a page gave before: no main
content extraction).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections import Counter
from pathlib import Path

from common import SHARED
from surrealdocs.web.content import main_content

WORD = re.compile(r"\w+", re.UNICODE)
FRAME_NAMES = re.compile(r"nav|menu|footer|header|sidebar|cookie|banner|breadcrumb",
                         re.IGNORECASE)


def words(text: str) -> Counter[str]:
    return Counter(w.lower() for w in WORD.findall(text))


def marked(html: bytes, kind: str) -> tuple[Counter[str], Counter[str]]:
    """(article words, frame words) of a page by its own structure."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    for node in tree.css("script, style, noscript, template"):
        node.decompose()
    frame_text: list[str] = []
    if kind == "python":
        main = tree.css_first("div[role=main]") or tree.css_first("div.body")
        for sel in ("div.related", "div.sphinxsidebar", "div.footer"):
            frame_text += [n.text(separator=" ") for n in tree.css(sel)]
        article = main.text(separator=" ") if main is not None else ""
        return words(article), words(" ".join(frame_text))
    selectors = ["div.navheader", "div.navfooter"] if kind == "debref" else [
        "header", "nav", "footer", "aside", "[role=navigation]", "[role=banner]",
        "[role=contentinfo]"]
    frame_nodes = [n for sel in selectors for n in tree.css(sel)]
    if kind == "shared":
        frame_nodes += [n for n in tree.css("[class], [id]")
                        if FRAME_NAMES.search((n.attributes.get("class") or "") + " "
                                              + (n.attributes.get("id") or ""))
                        and n.tag not in ("body", "html", "main", "article")]
    for node in frame_nodes:
        try:
            frame_text.append(node.text(separator=" "))
            node.decompose()
        except Exception:  # inside a node already taken out
            continue
    body = tree.body
    article = body.text(separator=" ") if body is not None else ""
    return words(article), words(" ".join(frame_text))


def with_trafilatura(html: bytes, url: str) -> str:
    found = main_content(html, url)
    return found.text if found is not None else ""


def with_justext(html: bytes, url: str) -> str:
    import justext

    paragraphs = justext.justext(html, justext.get_stoplist("English"))
    return "\n".join(p.text for p in paragraphs if not p.is_boilerplate)


def with_kreuzberg(html: bytes, url: str) -> str:
    from kreuzberg import extract_bytes_sync

    return str(extract_bytes_sync(html, "text/html").content)


EXTRACTORS = {"trafilatura": with_trafilatura, "justext": with_justext,
              "kreuzberg whole page": with_kreuzberg}


def pages(extra: list[Path]) -> list[tuple[str, Path]]:
    found = [("shared", p) for p in sorted((SHARED / "documents" / "html").glob("*.htm*"))]
    for folder in extra:
        library = sorted(folder.rglob("library/*.html"))
        found += [("python", p) for p in library[::max(1, len(library) // 30)][:30]]
        found += [("debref", p) for p in sorted(folder.rglob("*.en.html"))]
    return found


def measure(found: list[tuple[str, Path]]) -> None:
    totals: dict[tuple[str, str], list[int]] = {}
    counted: Counter[str] = Counter()
    for kind, path in found:
        html = path.read_bytes()
        article, frame = marked(html, kind)
        frame_only = frame - article
        if not article:
            continue
        counted[kind] += 1
        for name, extract in EXTRACTORS.items():
            try:
                out = words(extract(html, f"https://example.org/{path.name}"))
            except Exception as exc:  # an extractor that fails loses the whole page
                print(f"{name} failed on {path.name}: {exc}", file=sys.stderr)
                out = Counter()
            lost = sum((article - out).values())
            left = sum(((out - article) & frame_only).values())
            row = totals.setdefault((kind, name), [0, 0, 0, 0])
            row[0] += lost
            row[1] += sum(article.values())
            row[2] += left
            row[3] += sum(frame_only.values())
    print("| pages | extractor | article lost | frame left |")
    print("|---|---|---|---|")
    for (kind, name), (lost, article_words, left, frame_words) in totals.items():
        print(f"| {kind} ({counted[kind]}) | {name} | {lost / max(article_words, 1):.1%}"
              f" of {article_words:,} words | {left / max(frame_words, 1):.1%} of"
              f" {frame_words:,} words |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=Path, nargs="*", default=[])
    args = parser.parse_args()
    measure(pages(args.pages))


if __name__ == "__main__":
    asyncio.run(asyncio.to_thread(main))
