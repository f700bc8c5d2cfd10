"""The rest of the hostile re-probe (issue 45): globs the engine would choke on are refused
first, uploads named only by RFC 2231's ``filename*`` keep their name, and a chat model's
text reaches the terminal with its control characters escaped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from chat_server import chat_server
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.errors import ConfigurationError
from surrealdocs.faces.cli import app
from surrealdocs.parts.terminal import printable


async def test_a_glob_past_the_limits_is_refused_before_the_engine_sees_it() -> None:
    async with await KnowledgeBase.open(settings=Settings(db="mem://", model="hashing-64")
                                        ) as kb:
        await kb.ingest_texts({"note://a": "herons wade"})
        for glob in ("?" * 20_000, "*" * 101 + "x", "a" * 1001):
            with pytest.raises(ConfigurationError, match="source filter"):
                await kb.search("herons", source=glob)
        assert await kb.search("herons", source="note://*", mode="text")


def test_the_cli_and_the_api_refuse_a_huge_glob(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", "--db", db, "--model", "hashing-64",
                               str(Path(__file__).parent.parent / "samples")]).exit_code in (0, 1)
    out = runner.invoke(app, ["search", "engine", "--db", db, "--model", "hashing-64",
                              "--source", "?" * 20_000])
    assert out.exit_code == 2 and "source filter" in out.output and "Traceback" not in out.output
    pytest.importorskip("fastapi")
    from server_helpers import assert_error, serve

    with serve(tmp_path / "served") as server:
        assert_error(server.client.get("/v1/search", params={
            "query": "x", "source": "?" * 20_000}), 422, "invalid_parameter")


def test_an_upload_named_by_rfc_2231_keeps_its_name(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from server_helpers import serve

    boundary = "b0undary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\";"
            f" filename*=UTF-8''r%C3%A9sum%C3%A9%20%E2%84%962.md\r\n"
            f"Content-Type: text/markdown\r\n\r\n# CV\n\nHerons and egrets.\r\n"
            f"--{boundary}--\r\n").encode()
    with serve(tmp_path) as server:
        r = server.client.post("/v1/uploads", content=body, headers={
            "Content-Type": f"multipart/form-data; boundary={boundary}"})
        assert r.status_code == 202, r.text
        assert r.json()["files"][0]["source"] == "upload://résumé №2.md"
        assert server.wait_job(r.json()["job"]["id"])["status"] == "done"


def test_model_text_is_printed_with_its_control_characters_escaped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hostile = "Fine\x1b[2J\x1b]0;pwned\x07 \u202eevil\u202c \x9b31m [1]."
    assert printable(hostile) == ("Fine\\x1b[2J\\x1b]0;pwned\\x07 \\u202eevil\\u202c"
                                  " \\x9b31m [1].")
    assert printable("line one\n\tline two") == "line one\n\tline two"
    db = str(tmp_path / "db")
    runner = CliRunner()
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "storks.txt").write_text("White storks build huge nests on chimneys.")
    assert runner.invoke(app, ["ingest", str(notes), "--db", db, "--model", "hashing-64"]
                         ).exit_code == 0
    with chat_server() as server:
        server.reply = hostile
        monkeypatch.setenv("SURREALDOCS_LLM_BASE_URL", server.url + "/v1")
        out: Any = runner.invoke(app, ["ask", "where do white storks build nests", "--db", db,
                                       "--model", "hashing-64", "--llm", "openai:tiny",
                                       "--mode", "text"])
    assert out.exit_code == 0, out.output
    assert "\x1b" not in out.output and "\u202e" not in out.output and "\x9b" not in out.output
    assert "\\x1b[2J" in out.output and "\\u202e" in out.output


@pytest.mark.slow
def test_server_refuses_what_is_not_a_surrealdocs_server() -> None:
    """A JSON server that says yes to everything, and one that never answers: a clear
    message and exit 2, never "deleted: x" or a hang."""
    import json
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Yes(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _yes(self) -> None:
            if self.server.server_address[1] == silent[0]:  # type: ignore[index]
                time.sleep(30)
                return
            data = json.dumps({"ok": True, "hits": "x", "documents": 3}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _yes

    silent = [0]
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), Yes) for _ in range(2)]
    servers[1].daemon_threads = True
    silent[0] = servers[1].server_address[1]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    try:
        runner = CliRunner()
        yes = f"http://127.0.0.1:{servers[0].server_address[1]}"
        for args in (["delete", "x"], ["search", "herons"], ["stats"]):
            out = runner.invoke(app, [*args, "--server", yes])
            assert out.exit_code == 2, (args, out.output)
            assert "not a surrealdocs server" in out.output and "deleted" not in out.output
        started = time.monotonic()
        out = runner.invoke(app, ["stats", "--server", f"http://127.0.0.1:{silent[0]}"])
        assert out.exit_code == 2 and "did not answer" in out.output
        assert time.monotonic() - started < 25
    finally:
        for s in servers:
            s.shutdown()
