"""The shell examples of docs/deploy.md run as written against a SurrealDB server (the
loopback RPC fixture of tests/remote_engine.py): its `export` lines set the environment,
with the example's host and credentials swapped for the fixture's, and its `surrealdocs`
lines run in order. `serve` is left out (its tests start it), as in the README's test."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from conftest import SAMPLES
from surrealdocs.faces.cli import app

if TYPE_CHECKING:
    from remote_engine import RemoteEngine

pytest_plugins = ["remote_engine"]
DEPLOY = Path(__file__).resolve().parents[1] / "docs" / "deploy.md"


def deploy_lines() -> list[str]:
    lines = []
    for block in re.findall(r"```(?:sh|bash)\n(.*?)```", DEPLOY.read_text(), re.DOTALL):
        for line in block.splitlines():
            line = line.split("  #")[0].split("      #")[0].strip()
            if line.startswith(("export ", "surrealdocs ")) and "serve" not in line:
                lines.append(line)
    return lines


def test_deploy_examples_run_against_a_server(remote_engine: RemoteEngine, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    lines = deploy_lines()
    assert any(line.startswith("surrealdocs ingest") for line in lines), lines
    shutil.copytree(SAMPLES, tmp_path / "papers")
    monkeypatch.chdir(tmp_path)
    swap = {"ws://db.internal:8000": remote_engine.url("ws"),
            "docs": remote_engine.user, "'…'": remote_engine.password}
    runner = CliRunner()
    for line in lines:
        if line.startswith("export "):
            for name, value in (p.split("=", 1) for p in shlex.split(line)[1:]):
                value = swap.get(value, swap.get(f"'{value}'", value))
                if name in ("SURREALDOCS_USER", "SURREALDOCS_PASSWORD"):
                    value = remote_engine.user if name.endswith("USER") else \
                        remote_engine.password
                monkeypatch.setenv(name, value)
            continue
        monkeypatch.setenv("SURREALDOCS_MODEL", "hashing-64")
        result = runner.invoke(app, shlex.split(line)[1:])
        assert result.exit_code == 0, f"{line}\n{result.output}"
        assert "ingested" in result.output
    listed = runner.invoke(app, ["list", "--json"])
    assert listed.exit_code == 0 and '"source"' in listed.output
