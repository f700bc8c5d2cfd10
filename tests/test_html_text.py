"""HTML whose text kreuzberg drops: detected, and rendered with selectolax instead."""

from __future__ import annotations

from pathlib import Path

from conftest import SAMPLES
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.parts.extract import Extracted, extract_bytes, extract_file
from surrealdocs.parts.htmltext import html_to_text, lost_share

SETTINGS = Settings(db="mem://", chunk_size=300, chunk_overlap=30)

ARTICLE = """<!DOCTYPE html>
<html><head><title>Tides</title><style>p { color: red }</style></head>
<body>
  <nav><a href="/">Home</a> <a href="/about">About</a></nav>
  <article>
    <h1>How tides work</h1>
    <p>An introduction to the moon and the sea.</p>
    <div>The gravitational pull of the moon raises a bulge of water on the near side of
      the earth, and inertia raises another on the far side.</div>
    <div>Most coasts therefore see two high tides a day, about
      <span>twelve hours and twenty-five minutes</span> apart.</div>
    <h2>Spring and neap tides</h2>
    <div>When sun and moon line up, their pulls add: <b>spring tides</b>.</div>
    <script>var tracking = "do not index me";</script>
  </article>
</body></html>"""


async def test_text_in_a_div_next_to_a_p_is_kept() -> None:
    out = await extract_bytes(b"<p>Intro</p><div>Body</div>", "text/html", "upload://x",
                              SETTINGS)
    assert isinstance(out, Extracted), out
    assert out.content == "Intro\n\nBody"
    assert any("selectolax" in w for w in out.warnings), out.warnings
    assert [c.content for c in out.chunks] == ["Intro\n\nBody"]


async def test_an_article_keeps_its_body_and_structure(tmp_path: Path) -> None:
    f = tmp_path / "tides.html"
    f.write_text(ARTICLE, encoding="utf-8")
    out = await extract_file(f, SETTINGS)
    assert isinstance(out, Extracted), out
    assert out.title == "Tides"  # kreuzberg's metadata stays
    paragraphs = out.content.split("\n\n")
    assert paragraphs[0] == "How tides work"
    assert paragraphs[1] == "An introduction to the moon and the sea."
    assert "Spring and neap tides" in paragraphs
    assert paragraphs[-1] == "When sun and moon line up, their pulls add: spring tides."
    assert "inertia raises another on the far side." in out.content
    assert "twelve hours and twenty-five minutes apart." in out.content
    assert "tracking" not in out.content and "color" not in out.content
    assert "Home" not in out.content  # navigation, as kreuzberg leaves it out too
    assert out.chunks
    for c in out.chunks:
        assert out.content[c.char_start:c.char_end] == c.content


async def test_html_that_kreuzberg_reads_whole_keeps_its_text() -> None:
    from kreuzberg import ExtractionConfig, extract_file_sync

    path = SAMPLES / "surrealdb.html"
    direct = extract_file_sync(str(path), config=ExtractionConfig(use_cache=False)).content
    out = await extract_file(path, SETTINGS)
    assert isinstance(out, Extracted), out
    assert out.content == direct
    assert not any(w.startswith("html:") for w in out.warnings)


async def test_ingested_article_is_found_by_its_body(kb: KnowledgeBase, tmp_path: Path) -> None:
    f = tmp_path / "tides.html"
    f.write_text(ARTICLE, encoding="utf-8")
    report = await kb.ingest([f])
    assert report.counts["ingested"] == 1
    hits = await kb.search("inertia bulge", mode="text")
    assert hits and "inertia" in hits[0].content


def test_html_to_text_renders_what_a_reader_sees() -> None:
    html = ("<h1>Title</h1><p>One <b>bold</b>\n   word<br>next line</p>"
            "<ul><li>first</li><li>second</li></ul>"
            "<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>"
            "<div hidden>secret</div><div style='display: none'>also secret</div>"
            "<noscript>enable js</noscript><p>End</p>")
    assert html_to_text(html) == (
        "Title\n\nOne bold word\nnext line\n\n- first\n\n- second\n\n"
        "k | v\n\na | 1\n\nEnd")
    assert html_to_text(b"") == ""


def test_lost_share_counts_missing_words() -> None:
    assert lost_share("Intro", "Intro\n\nBody") == (0.5, 1, 2)
    assert lost_share("a b c plus extra", "a b c") == (0.0, 0, 3)
    assert lost_share("anything", "") == (0.0, 0, 0)
