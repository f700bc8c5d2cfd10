"""A hit shows where the query's words are: the snippet is centred on the matches (a hit
used to show the chunk's start, which was only HTML code), and the words are marked."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from surrealdocs.faces.cli import app
from surrealdocs.parts.snippet import snippet, stems


def test_the_window_holds_the_matches() -> None:
    code = "<div class='nav'><a href='/'>home</a></div> " * 20
    text = code + "Herons wade in shallow water and spear fish with their bills. " + "x " * 200
    shown = snippet(text, "how do herons fish", width=120)
    assert shown.text.startswith("…") and "Herons wade" in shown.text
    assert len(shown.text) <= 122
    assert [shown.text[s:e] for s, e in shown.marks] == ["Herons", "fish"]
    assert stems("the herons fishing") == ["heron", "fish"]  # stop words out, rough stems
    short = snippet("A heron.", "herons")
    assert short.text == "A heron." and short.marks == [(2, 7)]
    none = snippet("word " * 100, "absent", width=50)
    assert none.marks == [] and none.text.startswith("word") and none.text.endswith("…")


def test_the_terminal_shows_the_match_and_one_heading(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text("# Wading birds\n\n" + "Navigation menu item. " * 40
                   + "Herons wade in shallow water and spear fish with their bills.\n")
    db = ["--db", str(tmp_path / "kb"), "--model", "hashing-64"]
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(doc), *db, "--chunk-size", "2000"]).exit_code == 0
    out = runner.invoke(app, ["search", "spear fish", "--mode", "text", *db],
                        env={"COLUMNS": "200"}).output
    assert "spear fish" in out and "Herons wade" in out, out
    assert out.count("Wading birds") == 1, out
