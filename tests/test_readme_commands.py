"""The README's command-line examples run as written: every `surrealdocs …` line of its
CLI, sync and notebook blocks, in order, in a folder holding the files they name, on the
default store (`./.surrealdocs/db`) and the default model. Lines that start a server, watch
a folder or read a dataset outside the project are left out (the tests of `serve`, `sync
--watch`, `mcp` and `eval` run those)."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from chat_server import chat_server
from conftest import SAMPLES
from surrealdocs.faces.cli import app

pytestmark = pytest.mark.slow  # subprocesses, servers or real corpora: -m 'not slow' skips

README = Path(__file__).resolve().parents[1] / "README.md"
INTEGRATIONS = README.parent / "docs" / "integrations.md"
LEFT_OUT = ("--watch", "eval ", "mcp ", "serve")


def readme_commands() -> list[str]:
    """The `surrealdocs` lines of the README's shell blocks, comments cut, in order."""
    text = README.read_text()
    lines = []
    for block in re.findall(r"```(?:sh|bash)\n(.*?)```", text, re.DOTALL):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("surrealdocs ") and not any(s in line for s in LEFT_OUT) \
                    and not line.startswith("surrealdocs keys"):
                lines.append(line)
    return lines


def test_the_readme_lists_commands() -> None:
    commands = readme_commands()
    assert len(commands) >= 20
    assert {c.split()[1] for c in commands} >= {"ingest", "search", "stats", "list", "show",
                                                 "delete", "sync", "notebook", "add"}


def test_readme_commands_run_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    papers = tmp_path / "papers"
    papers.mkdir()
    for sample in SAMPLES.iterdir():
        shutil.copy(sample, papers / sample.name)
    shutil.copy(SAMPLES / "quarterly-report.pdf", papers / "attention.pdf")
    shutil.copy(SAMPLES / "quarterly-report.pdf", papers / "old.pdf")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.md").write_text("# Todo\n\nRead about dense retrieval.\n")
    (papers / "dmca.md").write_text(  # what the README's `ask` asks about
        "# The DMCA\n\nSection 512 of the Digital Millennium Copyright Act (DMCA) limits the"
        " liability of online service providers for copyright infringement by their users,"
        " if they remove infringing material promptly once notified.\n")
    (papers / "drafts").mkdir()  # ingested with ./papers: what `delete --glob` finds
    (papers / "drafts" / "idea.md").write_text("A draft about attention.\n")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    with chat_server() as server:  # what `ask` talks to, as the README sets it up
        server.models = ("llama3.2",)
        monkeypatch.setenv("SURREALDOCS_LLM", "ollama:llama3.2")
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        for line in readme_commands():
            result = runner.invoke(app, shlex.split(line)[1:])
            assert result.exit_code == 0, f"{line}\n{result.output}"
            assert result.output.strip(), f"{line} printed nothing"
        assert server.requests, "no `ask` line reached the model"


def readme_programs() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


def test_readme_programs_run_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Each Python example of the README, in order, in one folder (the notebook the
    LlamaIndex example searches is the one the notebook example made), as a program of
    its own, then the retriever examples of docs/integrations.md; each prints something,
    and no title or line prints as None."""
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    papers = tmp_path / "papers"
    papers.mkdir()
    for sample in SAMPLES.iterdir():
        shutil.copy(sample, papers / sample.name)
    shutil.copy(SAMPLES / "quarterly-report.pdf", papers / "attention.pdf")
    monkeypatch.chdir(tmp_path)
    programs = readme_programs()
    assert len(programs) >= 5
    # and the retriever examples of docs/integrations.md, on the store the README's made
    # (its other examples need a model server, serve forever, or are fragments)
    more = [p for p in re.findall(r"```python\n(.*?)```", INTEGRATIONS.read_text(), re.DOTALL)
            if "SurrealDocsRetriever(" in p]
    assert len(more) == 3
    programs += more
    for program in programs:
        exec(compile(program, "README.md", "exec"), {"__name__": "__main__"})
        printed = capsys.readouterr().out
        assert printed.strip(), f"printed nothing:\n{program}"
        if program in more:  # a retriever's hits name their titles and pages
            assert "None" not in printed, printed


def readme_curl_commands() -> list[str]:
    """The README's curl lines (continuations joined), in order."""
    text = README.read_text()
    block = next(b for b in re.findall(r"```(?:sh|bash)\n(.*?)```", text, re.DOTALL)
                 if "curl " in b)
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line.split("   #")[0].strip() for line in joined.splitlines()
            if line.strip().startswith("curl ")]


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl on this machine")
def test_readme_curl_lines_run_as_written(tmp_path: Path) -> None:
    """The README's HTTP examples, with curl, against `surrealdocs serve` with a key: the
    upload into a notebook by name (made on use), its job's events, both searches, and the
    document by its source."""
    import json
    import os
    import subprocess

    pytest.importorskip("fastapi")
    from server_helpers import served, wait_ready_process

    shutil.copy(SAMPLES / "quarterly-report.pdf", tmp_path / "report.pdf")
    (tmp_path / "notes.md").write_text("# Notes\n\nQuarterly revenue rose; dense retrieval.\n")
    db = str(tmp_path / "db")
    made = CliRunner().invoke(app, ["keys", "create", "--name", "laptop", "--json", "--db",
                                    db, "--model", "hashing-64"])
    assert made.exit_code == 0, made.output
    key = json.loads(made.output)["key"]
    lines = readme_curl_commands()
    assert len(lines) >= 5
    with served(tmp_path, "--db", db) as (proc, url):
        wait_ready_process(proc, url)
        outputs = []
        for line in lines:
            line = line.replace("http://127.0.0.1:8000", url)
            if "JOB_ID" in line:
                line = line.replace("JOB_ID", json.loads(outputs[0])["job"]["id"])
            done = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True,
                                  text=True, timeout=120, env={**os.environ, "KEY": key})
            assert done.returncode == 0, f"{line}\n{done.stderr}"
            outputs.append(done.stdout)
        upload = json.loads(outputs[0])
        assert upload["job"]["id"] and len(upload["files"]) == 2
        import httpx

        notebooks = httpx.get(url + "/v1/notebooks", headers={"X-API-Key": key}).json()
        assert "Research" in [nb["name"] for nb in notebooks["notebooks"]]  # made on use
        assert "event: end" in outputs[1] and '"status":"done"' in outputs[1]
        assert json.loads(outputs[2])["hits"]
        assert json.loads(outputs[3])["hits"]
        assert json.loads(outputs[4])["source"] == "upload://report.pdf"
