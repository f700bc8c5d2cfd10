"""Every command, given bad options, ends with a clear message and exit code 2: never a
traceback, never a store made where it should not be."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import SAMPLES
from surrealdocs.faces.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("cli_errors") / "kb")
    result = runner.invoke(app, ["ingest", str(SAMPLES / "bm25.txt"), "--db", path,
                                 "--model", "hashing-64"])
    assert result.exit_code == 0, result.output
    return path


def run_bad(args: list[str], env: dict[str, str] | None = None) -> str:
    result = runner.invoke(app, args, env=env)
    output = result.output
    assert result.exit_code == 2, f"{args}: exit {result.exit_code}\n{output}"
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        f"{args}: {result.exception!r}"
    assert "Traceback" not in output
    return output


# (command and its own bad options) for every command; store options are added below
COMMANDS: list[tuple[str, list[str], str]] = [
    ("search empty query", ["search", "   "], "empty"),
    ("search bad mode", ["search", "x", "--mode", "fuzzy"], "mode"),
    ("search limit 0", ["search", "x", "--limit", "0"], "limit"),
    ("search negative candidates", ["search", "x", "--candidates", "-1"], "candidates"),
    ("search nan weight", ["search", "x", "--text-weight", "nan"], "text_weight"),
    ("search inf weight", ["search", "x", "--vector-weight", "inf"], "vector_weight"),
    ("search both weights 0", ["search", "x", "--text-weight", "0", "--vector-weight", "0"],
     "not both 0"),
    ("search bad fusion", ["search", "x", "--fusion", "best"], "fusion"),
    ("search unknown notebook", ["search", "x", "--notebook", "Nope"], "no notebook"),
    ("search empty source glob", ["search", "x", "--source", ""], "source"),
    ("search nan min score", ["search", "x", "--min-score", "nan"], "min_score"),
    ("search huge limit", ["search", "x", "--limit", "99999999999999999999"], "limit"),
    ("search huge candidates", ["search", "x", "--candidates", "99999999999999999999"],
     "candidates"),
    ("ingest empty glob", ["ingest", str(SAMPLES), "--glob", ""], "glob"),
    ("ingest absolute glob", ["ingest", str(SAMPLES), "--glob", "/etc/*"], "glob"),
    ("ingest glob up", ["ingest", str(SAMPLES), "--glob", "../*"], "glob"),
    ("ingest tiny chunks", ["ingest", str(SAMPLES), "--chunk-size", "10"], "chunk_size"),
    ("ingest bad chunk context", ["ingest", str(SAMPLES), "--chunk-context", "title"],
     "chunk_context"),
    ("ingest huge overlap", ["ingest", str(SAMPLES), "--chunk-overlap", "5000"],
     "chunk_overlap"),
    ("notebook show unknown", ["notebook", "show", "Nope"], "no notebook"),
    ("notebook delete unknown", ["notebook", "delete", "Nope"], "no notebook"),
    ("notebook create empty name", ["notebook", "create", " "], "name"),
    ("jobs bad status", ["jobs", "--status", "sleeping"], "status"),
    ("add empty glob", ["add", "N", str(SAMPLES), "--glob", ""], "glob"),
    ("sync empty glob", ["sync", str(SAMPLES), "--glob", ""], "glob"),
    ("sync glob up", ["sync", str(SAMPLES), "--glob", "../*"], "glob"),
    ("sync watch dry run", ["sync", str(SAMPLES), "--watch", "--dry-run"], "together"),
    ("sync watch bad settle", ["sync", str(SAMPLES), "--watch", "--settle", "-1"], "settle"),
]


@pytest.mark.parametrize("args,expected", [(a, e) for _, a, e in COMMANDS],
                         ids=[name for name, _, _ in COMMANDS])
def test_bad_command_options(db: str, args: list[str], expected: str) -> None:
    output = run_bad([*args, "--db", db, "--model", "hashing-64"])
    assert expected in output


STORE_COMMANDS = [["stats"], ["search", "x"], ["ingest", str(SAMPLES / "bm25.txt")],
                  ["notebook", "list"], ["jobs"], ["delete", "x"], ["rebuild-index"],
                  ["add", "N", str(SAMPLES / "bm25.txt")], ["notebook", "create", "N"],
                  ["sync", str(SAMPLES)]]


@pytest.mark.parametrize("command", STORE_COMMANDS, ids=[" ".join(c[:2]) for c in STORE_COMMANDS])
def test_bad_store_options_on_every_command(command: list[str], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    closed_folder(tmp_path / "closed", monkeypatch)
    papers = tmp_path / "papers"
    shutil.copytree(SAMPLES, papers)
    before = sorted(p.name for p in papers.iterdir())
    bad_dbs = {
        "wss://[::1": "invalid database URL",
        "ws://": "no host",
        # (commands that only read say there is no store there)
        "surrealkv:///proc/nope/db": "cannot create" if command[0] in (
            "ingest", "add", "sync") or command[:2] == ["notebook", "create"]
        else "there is no store at",
        str(papers): "folder of other files",
        str(papers / "bm25.txt"): "is a file",
        "ftp://example.com": "unsupported database URL",
        str(papers / "bm25.txt" / "db"): "is a file, not a folder",
        str(tmp_path / "closed" / "db"): "Permission denied",
    }
    for bad, expected in bad_dbs.items():
        output = run_bad([*command, "--db", bad, "--model", "hashing-64"])
        assert expected in output, f"{bad}: {output}"
    assert sorted(p.name for p in papers.iterdir()) == before  # no engine files among them
    db = str(tmp_path / "kb")
    assert runner.invoke(app, ["notebook", "create", "Seed", "--db", db, "--model",
                               "hashing-64"]).exit_code == 0
    for model, expected in (("hashing-0", "hashing dimension"), ("nosuch", "unknown")):
        assert expected in run_bad([*command, "--db", db, "--model", model])
    for env in ({"SURREALDOCS_CHUNK_SIZE": "abc"}, {"SURREALDOCS_EXTRACT_CONCURRENCY": "0"},
                {"SURREALDOCS_TEXT_WEIGHT": "nan"}, {"SURREALDOCS_EMBED": "maybe"}):
        name = next(iter(env))
        output = run_bad([*command, "--db", db, "--model", "hashing-64"], env=env)
        assert name in output, output


def closed_folder(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder the user cannot enter, as for a user without permission: made by refusing
    the calls that go through it, so that it works as root (whom permissions do not stop)."""
    folder.mkdir()
    folder.chmod(0)
    real = {name: getattr(os, name) for name in ("stat", "lstat", "mkdir", "scandir")}

    def refusing(name: str) -> Any:
        def call(path: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(path, (str, os.PathLike)) and \
                    str(os.fspath(path)).startswith(str(folder) + os.sep):
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            return real[name](path, *args, **kwargs)
        return call

    for name in real:
        monkeypatch.setattr(os, name, refusing(name))


def test_reembed_and_eval_errors(tmp_path: Path) -> None:
    assert "--model" in run_bad(["reembed", "--db", str(tmp_path / "kb")])
    assert "not a BEIR dataset" in run_bad(["eval", str(tmp_path), "--model", "hashing-64"])
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text('{"_id": "d1", "title": "t", "text": "otters"}\n')
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "otters"}\n')
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    assert "invalid database URL" in run_bad(["eval", str(beir), "--db", "wss://[::1"])


def test_markup_and_emoji_in_names_are_printed_as_they_are(db: str, tmp_path: Path) -> None:
    name = "notes :smile: [bold]x[/bold]"
    result = runner.invoke(app, ["notebook", "create", name, "--db", db,
                                 "--model", "hashing-64"])
    assert result.exit_code == 0 and name in result.output and "😄" not in result.output
    f = tmp_path / ":smile: [red]file.md"
    f.write_text("# Emoji\n\nA file whose name has an emoji code.")
    result = runner.invoke(app, ["ingest", str(f), "--db", db, "--model", "hashing-64"])
    assert result.exit_code == 0
    result = runner.invoke(app, ["search", "emoji code", "--mode", "text", "--db", db,
                                 "--model", "hashing-64"], env={"COLUMNS": "300"})
    out = result.output
    assert ":smile:" in out and "[red]file.md" in out and "😄" not in out, out


def test_control_characters_in_names_are_escaped(db: str, tmp_path: Path) -> None:
    f = tmp_path / "evil\x1b[2Jname\u202etxt.md"
    f.write_text("# Bidi\n\nA file whose name would clear the terminal and reverse text.")
    result = runner.invoke(app, ["ingest", str(f), "--db", db, "--model", "hashing-64"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["search", "reverse terminal", "--mode", "text", "--db", db,
                                 "--model", "hashing-64"], env={"COLUMNS": "300"})
    for out in (result.output, runner.invoke(app, ["delete", str(f), "--db", db,
                                                   "--model", "hashing-64"]).output):
        assert "\x1b" not in out and "\u202e" not in out, repr(out)
        assert "\\x1b[2Jname" in out, out  # shown, escaped


def test_an_unreadable_file_argument_fails_alone(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    good, locked = tmp_path / "good.md", tmp_path / "locked.md"
    good.write_text("# Good\n\nAbout kingfishers.")
    locked.write_text("# Locked\n\nAbout herons.")
    locked.chmod(0)
    real_open, real_access = os.open, os.access

    def os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(path) == locked:  # as for a user without permission, root included
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    def access(path: Any, mode: int, *args: Any, **kwargs: Any) -> bool:
        return False if Path(path) == locked else real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(os, "access", access)
    for command in (["ingest"], ["add", "Birds"]):
        result = runner.invoke(app, [*command, str(good), str(locked), "--db",
                                     str(tmp_path / "kb"), "--model", "hashing-64"])
        assert result.exit_code == 1, result.output  # a file failed; the rest landed
        assert "Permission denied" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["search", "kingfishers", "--db", str(tmp_path / "kb"),
                                 "--model", "hashing-64", "--mode", "text"])
    assert "good.md" in result.output


READING_COMMANDS = [["stats"], ["search", "x"], ["notebook", "list"], ["notebook", "show", "N"],
                    ["jobs"], ["delete", "x"], ["rebuild-index"], ["keys", "list"],
                    ["reembed", "--model", "hashing-32"]]


@pytest.mark.parametrize("command", READING_COMMANDS,
                         ids=[" ".join(c[:2]) for c in READING_COMMANDS])
def test_a_command_that_reads_a_store_that_is_not_there_says_so(
        command: list[str], tmp_path: Path) -> None:
    """Run from another folder, a search used to make an empty store there and answer "no
    hits", which looks like "nothing matched"."""
    where = tmp_path / "elsewhere" / "db"
    args = [*command, "--db", str(where)]
    if "--model" not in command:
        args += ["--model", "hashing-64"]
    assert "there is no store at" in run_bad(args)
    assert not where.exists() and not where.parent.exists()
