from __future__ import annotations

import io
import itertools
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from conftest import SAMPLES
from surrealdocs.faces import cli
from surrealdocs.faces.cli import app

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_ingest_search_stats_delete(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLES, docs)
    code, out = run("ingest", str(docs), "--db", db, "--model", "hashing-64")
    assert code == 0, out
    assert "Ingest summary" in out and "5 files" in out

    code, out = run("ingest", str(docs), "--db", db, "--model", "hashing-64", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["counts"]["unchanged"] == 5 and report["chunks_written"] == 0

    code, out = run("search", "BM25 ranking", "--db", db, "--model", "hashing-64",
                    "--mode", "text", "--json", "--limit", "2")
    assert code == 0
    hits = json.loads(out)
    assert len(hits) == 2 and hits[0]["source"].endswith("bm25.txt")
    assert {"score", "text_rank", "char_start", "char_end", "page", "title"} <= set(hits[0])

    result = runner.invoke(app, ["search", "walrus", "--db", db, "--model", "hashing-64",
                                 "--mime-type", "application/pdf", "--json", "--all"])
    assert result.exit_code == 0
    assert all(h["mime_type"] == "application/pdf" for h in json.loads(result.stdout))

    code, out = run("search", "BM25 ranking", "--db", db, "--model", "hashing-64")
    assert code == 0 and "bm25" in out.lower()

    code, out = run("stats", "--db", db, "--model", "hashing-64", "--json")
    stats = json.loads(out)
    assert stats["documents"] == 5 and stats["model"] == "hashing-64"
    text_index = stats["text_index"]
    assert text_index["kind"] == "segments" and text_index["chunks"] == stats["chunks"]
    assert text_index["segments"] >= 1 and text_index["postings"] > 0
    code, out = run("stats", "--db", db, "--model", "hashing-64")
    assert code == 0 and "text index" in out and "postings" in out

    code, out = run("rebuild-index", "--only", "text", "--db", db, "--model", "hashing-64")
    assert code == 0 and "text index rebuilt" in out, out
    code, out = run("stats", "--db", db, "--model", "hashing-64", "--json")
    assert json.loads(out)["text_index"]["segments"] == 1
    code, out = run("rebuild-index", "--only", "both", "--db", db, "--model", "hashing-64")
    assert code == 2 and "--only must be text or vector" in out

    code, out = run("delete", str(docs / "bm25.txt"), "--db", db, "--model", "hashing-64")
    assert code == 0 and "deleted" in out
    code, out = run("stats", "--db", db, "--model", "hashing-64", "--json")
    assert json.loads(out)["documents"] == 4


def test_a_terminal_is_told_the_store_is_opening(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # An open can take tens of seconds while the engine merges its files: say so.
    db = str(tmp_path / "kb")
    assert run("notebook", "create", "Seed", "--db", db, "--model", "hashing-64")[0] == 0
    terminal = io.StringIO()
    monkeypatch.setattr(cli, "err_console", Console(file=terminal, force_terminal=True))
    code, out = run("stats", "--db", db, "--model", "hashing-64", "--json")
    assert code == 0 and json.loads(out)["documents"] == 0
    assert "opening the store" in terminal.getvalue()
    piped = io.StringIO()
    monkeypatch.setattr(cli, "err_console", Console(file=piped))  # not a terminal: silent
    assert run("stats", "--db", db, "--model", "hashing-64", "--json")[0] == 0
    assert piped.getvalue() == ""


def test_failures_give_a_nonzero_exit_and_are_named(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.5 broken")
    good = tmp_path / "good.md"
    good.write_text("# fine\n\nA good file.")
    code, out = run("ingest", str(bad), str(good), str(tmp_path / "nope.docx"),
                    "--db", db, "--model", "hashing-64")
    assert code == 1
    assert "Files without a document" in out and "failed" in out
    code, out = run("ingest", str(bad), str(good), str(tmp_path / "nope.docx"),
                    "--db", db, "--model", "hashing-64", "--json", "--retry-failed")
    assert code == 1
    results = {Path(r["source"]).name: r for r in json.loads(out)["results"]}
    assert results["bad.pdf"]["status"] == "failed" and "PDF" in results["bad.pdf"]["reason"]
    assert results["nope.docx"]["reason"] == "no such file or directory"
    assert results["good.md"]["status"] == "unchanged"


def test_model_mismatch_is_a_clear_cli_error(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    good = tmp_path / "good.md"
    good.write_text("# fine\n\nA good file.")
    assert run("ingest", str(good), "--db", db, "--model", "hashing-64")[0] == 0
    code, out = run("search", "fine", "--db", db, "--model", "hashing-32")
    assert code == 2
    assert "reembed" in out


def test_a_store_opens_with_its_own_model(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    db = str(tmp_path / "kb")
    good = tmp_path / "good.md"
    good.write_text("# fine\n\nA good file about herons.")
    assert run("ingest", str(good), "--db", db, "--model", "hashing-64")[0] == 0
    for command in (("search", "herons"), ("list",), ("stats",)):
        code, out = run(*command, "--db", db)
        assert code == 0, out
    code, out = run("stats", "--db", db, "--json")
    assert json.loads(out)["model"] == "hashing-64"
    monkeypatch.setenv("SURREALDOCS_MODEL", "hashing-32")  # a model named is still checked
    code, out = run("search", "herons", "--db", db)
    assert code == 2 and "reembed" in out


def test_bad_mode_is_rejected(tmp_path: Path) -> None:
    assert run("notebook", "create", "Seed", "--db", str(tmp_path / "kb"), "--model",
               "hashing-64")[0] == 0
    code, out = run("search", "x", "--db", str(tmp_path / "kb"), "--model", "hashing-64",
                    "--mode", "nope")
    assert code == 2 and "mode must be one of" in out


def test_notebook_commands(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    common = ("--db", db, "--model", "hashing-64")
    code, out = run("notebook", "create", "Papers", "--description", "to read", *common)
    assert code == 0 and "created notebook Papers" in out
    code, out = run("add", "Papers", str(SAMPLES / "bm25.txt"), "--topic", "ir", *common)
    assert code == 0, out
    assert "notebook Papers: 1 document added" in out
    code, out = run("add", "Other", str(SAMPLES / "surrealdb.html"), *common)  # created on use
    assert code == 0 and "notebook Other: 1 document added" in out, out
    code, out = run("add", "Other", str(SAMPLES / "surrealdb.html"), *common)
    assert "notebook Other: 0 documents added, 1 already in it" in out, out
    # a stored, unchanged file joins a notebook it is not in, and says so
    assert run("ingest", str(SAMPLES / "vector-indexes.md"), *common)[0] == 0
    code, out = run("add", "Other", str(SAMPLES / "vector-indexes.md"), *common)
    assert "skipped as unchanged" in out and "notebook Other: 1 document added" in out, out
    code, out = run("notebook", "list", "--json", *common)
    listing = {n["name"]: n for n in json.loads(out)}
    assert listing["Papers"]["source_count"] == 1 and listing["Other"]["source_count"] == 2
    code, out = run("notebook", "show", "Papers", "--json", *common)
    shown = json.loads(out)
    assert [s["topics"] for s in shown["sources"]] == [["ir"]]
    for mode in ("text", "vector", "hybrid"):
        code, out = run("search", "BM25 ranking database", "--notebook", "Papers", "--mode",
                        mode, "--json", "--min-score", "0", *common)
        assert code == 0, out
        hits = json.loads(out)
        assert hits and {Path(h["source"]).name for h in hits} == {"bm25.txt"}
    code, out = run("jobs", "--json", *common)
    assert code == 0 and json.loads(out) == []
    code, out = run("notebook", "delete", "Papers", "--delete-sources", *common)
    assert code == 0
    code, out = run("stats", "--json", *common)
    assert json.loads(out)["documents"] == 2
    code, out = run("search", "x", "--notebook", "Papers", *common)
    assert code == 2 and "no notebook" in out


def test_counts_are_spelled_right(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "one.md"
    f.write_text("# One\n\nA single short paragraph about wrens.")
    db = str(tmp_path / "kb")
    code, out = run("ingest", str(f), "--db", db, "--model", "hashing-64")
    assert code == 0 and "1 file, 1 chunk written" in out, out
    code, out = run("sync", str(tmp_path), "--db", db, "--model", "hashing-64")
    assert code == 0 and "1 file in 1 folder: 0 chunks written" in out, out
    assert "1 chunks" not in out and "1 files" not in out
    # a sync says which files it added, updated, renamed and deleted
    monkeypatch.chdir(tmp_path)
    f.write_text("# One\n\nA single short paragraph about thrushes.")
    (tmp_path / "two.md").write_text("# Two\n\nAbout larks.")
    code, out = run("sync", str(tmp_path), "--db", db, "--model", "hashing-64")
    assert code == 0 and "updated  one.md" in out and "added    two.md" in out, out
    (tmp_path / "two.md").rename(tmp_path / "three.md")
    code, out = run("sync", str(tmp_path), "--db", db, "--model", "hashing-64")
    assert "renamed  two.md -> three.md" in out, out


def test_list_and_show_what_is_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nobody could see what was stored: `delete` needed the exact stored path."""
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLES, docs)
    monkeypatch.chdir(tmp_path)
    db = ["--db", str(tmp_path / "kb"), "--model", "hashing-64"]
    assert run("ingest", str(docs), *db)[0] == 0
    assert run("add", "Research", str(docs / "bm25.txt"), *db)[0] == 0
    code, out = run("list", *db, "--json")
    listed = json.loads(out)
    assert code == 0 and listed["total"] == 5 and len(listed["documents"]) == 5
    code, out = run("list", *db)
    assert code == 0 and "5 documents" in out and "docs/bm25.txt" in out  # relative here
    page = json.loads(run("list", *db, "--json", "--limit", "2", "--offset", "4")[1])
    assert page["total"] == 5 and len(page["documents"]) == 1
    md = json.loads(run("list", *db, "--json", "--source", "*.md")[1])
    assert md["total"] == 2 and all(d["source"].endswith(".md") for d in md["documents"])
    pdf = json.loads(run("list", *db, "--json", "--mime-type", "application/pdf")[1])
    assert [d["source"] for d in pdf["documents"]] == [str(docs / "quarterly-report.pdf")]
    nb = json.loads(run("list", *db, "--json", "--notebook", "Research")[1])
    assert [d["source"] for d in nb["documents"]] == [str(docs / "bm25.txt")]
    later = json.loads(run("list", *db, "--json", "--created-after", "2999-01-01")[1])
    assert later["total"] == 0
    code, out = run("show", str(docs / "bm25.txt"), *db, "--json")
    shown = json.loads(out)
    assert code == 0 and shown["source"] == str(docs / "bm25.txt") and shown["chunk_count"]
    assert shown["notebooks"]
    code, out = run("show", shown["id"], *db)
    assert code == 0 and "docs/bm25.txt" in out and "notebook:" in out, out
    code, out = run("show", "nowhere.txt", *db)
    assert code == 2 and "no document" in out


def test_delete_by_name_id_or_glob_with_a_dry_run(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`delete fake_table.docx` said only "not found"; there was no glob and no dry run."""
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLES, docs)
    monkeypatch.chdir(tmp_path)
    db = ["--db", str(tmp_path / "kb"), "--model", "hashing-64"]
    assert run("ingest", str(docs), *db)[0] == 0

    def stored() -> list[str]:
        return sorted(d["source"] for d in json.loads(run("list", *db, "--json")[1])["documents"])

    code, out = run("delete", "bm25.txt", *db)  # a name without its folder
    assert code == 1 and "not found: bm25.txt" in out and "docs/bm25.txt" in out, out
    code, out = run("delete", "--glob", "*.md", "--dry-run", *db)
    assert code == 0 and out.count("would delete:") == 2 and len(stored()) == 5, out
    code, out = run("delete", "--glob", "*.md", *db)
    assert code == 0 and out.count("deleted:") == 2
    assert sorted(Path(s).suffix for s in stored()) == [".html", ".pdf", ".txt"]
    doc = json.loads(run("show", "docs/bm25.txt", *db, "--json")[1])["id"]
    code, out = run("delete", doc, "docs/surrealdb.html", *db)
    assert code == 0 and out.count("deleted:") == 2, out
    assert stored() == [str(docs / "quarterly-report.pdf")]
    code, out = run("delete", "--glob", "*.nothing", *db)
    assert code == 1 and "nothing stored matches" in out
    assert run("delete", *db)[0] == 2


HELP_COMMANDS = [["ingest"], ["sync"], ["search"], ["list"], ["show"], ["delete"], ["serve"],
                 ["mcp"], ["reembed"], ["stats"], ["jobs"], ["add"], ["eval"],
                 ["rebuild-index"], ["notebook", "create"], ["notebook", "show"],
                 ["keys", "create"]]


@pytest.mark.parametrize("command", HELP_COMMANDS, ids=" ".join)
def test_help_wraps_whole_sentences_at_80_columns(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    text = result.output.split("Usage:", 1)[1].split("╭", 1)[0]
    lines = [line.rstrip() for line in text.splitlines()][1:]
    for line, after in itertools.pairwise(lines):
        words = line.strip()
        if words and after.strip():  # a line of a paragraph that goes on: it must be full
            assert len(line) >= 60 or words.endswith((".", ":", ")")), (line, after)


def test_a_failed_file_fails_every_run_until_it_is_fixed(tmp_path: Path) -> None:
    """Issue 43: a second ingest of a folder reported its broken files as unchanged,
    failed 0, exit 0."""
    db = str(tmp_path / "kb")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "bad.pdf").write_bytes(b"%PDF-1.5 broken")
    (folder / "good.md").write_text("# fine\n\nA good file.")
    for _ in range(2):
        code, out = run("ingest", str(folder), "--db", db, "--model", "hashing-64", "--json")
        assert code == 1
        results = {Path(r["source"]).name: r for r in json.loads(out)["results"]}
        assert results["bad.pdf"]["status"] == "failed" and "PDF" in results["bad.pdf"]["reason"]
    # listed with its reason, and shown by its path
    code, out = run("list", "--failed", "--db", db, "--model", "hashing-64", "--json")
    listed = json.loads(out)
    assert code == 0 and listed["total"] == 1
    assert listed["failures"][0]["source"] == str(folder / "bad.pdf")
    assert "PDF" in listed["failures"][0]["reason"]
    code, out = run("list", "--failed", "--db", db, "--model", "hashing-64")
    assert code == 0 and "bad.pdf" in out and "1 failed source" in out
    code, out = run("show", str(folder / "bad.pdf"), "--db", db, "--model", "hashing-64")
    assert code == 1 and "failed" in out and "PDF" in out
    (folder / "bad.pdf").unlink()
    code, _ = run("ingest", str(folder), "--db", db, "--model", "hashing-64", "--json")
    assert code == 0


def test_the_progress_bar_names_the_files_in_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43: the bar named the file that finished last (a tiny one, while a book was
    embedded for minutes); it names the files in flight, and counts chunks and their rate."""
    from io import StringIO

    from rich.console import Console

    from surrealdocs.parts.results import FileResult

    monkeypatch.setattr(cli, "err_console", Console(file=StringIO(), force_terminal=True))
    bar = cli._ingest_progress(False)
    with bar as (on_discovered, on_result):
        on_discovered(3)
        on_result.started("/docs/war-and-peace.txt")  # type: ignore[attr-defined]
        on_result.started("/docs/note.md")  # type: ignore[attr-defined]
        on_result(FileResult("/docs/note.md", "ingested", chunks=4))
        task = bar.progress.tasks[0]
        assert task.description == "war-and-peace.txt" and task.completed == 1
        assert task.fields["chunks"].startswith("4 chunks (")
        # each file's long step is named as it begins, then the store's own
        on_result.step("/docs/war-and-peace.txt", "embedding 5,226 chunks")  # type: ignore
        assert bar.progress.tasks[0].description == "war-and-peace.txt: embedding 5,226 chunks"
        on_result(FileResult("/docs/war-and-peace.txt", "ingested", chunks=5226))
        assert bar.progress.tasks[0].fields["chunks"].startswith("5,230 chunks")
        assert bar.progress.tasks[0].description == ""
        on_result.step("", "building the vector graph")  # type: ignore[attr-defined]
        assert bar.progress.tasks[0].description == "building the vector graph"


def test_the_watch_status_line_counts_what_the_last_pass_did() -> None:
    """Issue 43: the --watch status line left deletions out."""
    from surrealdocs.parts.results import FileResult, PlannedChange, SyncReport

    report = SyncReport(roots=["/d"], plan=[
        PlannedChange("add", "/d/a.md"), PlannedChange("update", "/d/b.md"),
        PlannedChange("delete", "/d/c.md"), PlannedChange("unchanged", "/d/e.md")],
        results=[FileResult("/d/a.md", "ingested"), FileResult("/d/b.md", "updated"),
                 FileResult("/d/c.md", "deleted"), FileResult("/d/e.md", "unchanged")])
    line = cli._WatchLog(1, False, None).status_line(report)
    assert "(3 files)" in line and "1 added, 1 updated, 1 deleted" in line
    quiet = SyncReport(roots=["/d"], plan=[PlannedChange("unchanged", "/d/e.md")],
                       results=[FileResult("/d/e.md", "unchanged")])
    assert "no change" in cli._WatchLog(1, False, None).status_line(quiet)


def test_native_output_waits_until_the_bar_is_gone(monkeypatch: pytest.MonkeyPatch,
                                                   capfd: pytest.CaptureFixture[str]) -> None:
    """Issue 43: a native library's writes to the process's standard error (Tesseract's
    "Estimating resolution") went into the progress bar; they are held and printed after
    it, once."""
    import os

    from rich.console import Console

    monkeypatch.setattr(cli, "err_console", Console(stderr=True, force_terminal=True))
    with cli._ingest_progress(False) as (on_discovered, on_result):
        on_discovered(1)
        os.write(2, b"Estimating resolution as 421\n")  # as C code writes: to fd 2
        on_result.started("/docs/scan.png")  # type: ignore[attr-defined]
    err = capfd.readouterr().err
    assert err.count("Estimating resolution as 421") == 1
    assert err.index("printed during the ingest") < err.index("Estimating resolution")
