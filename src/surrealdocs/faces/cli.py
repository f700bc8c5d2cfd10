"""Command line: a thin face over :class:`surrealdocs.KnowledgeBase`.

Each command parses its options, makes one library call and prints the result (a table, or
``to_dict()`` as JSON with ``--json``). A surrealdocs error (bad option, bad file, bad query,
unreachable store) ends in its message and exit code 2, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import inspect
import json
import os
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar, cast

import typer
from rich.console import Console
from rich.markup import escape as escape_markup
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from ..config import Settings
from ..core.archive import ArchiveReport
from ..core.evaluate import EVAL_MODES
from ..core.kb import KnowledgeBase
from ..core.search import search_notice
from ..core.search_request import MODES, SearchRequest
from ..errors import NotFoundError, StoreError, SurrealDocsError
from ..parts.chunk import HEADING_SEPARATOR
from ..parts.metadata import parse_meta, parse_where
from ..parts.results import FileResult, Hit, IngestReport, SyncReport, id_text, jsonable
from ..parts.snippet import Snippet, snippet
from ..parts.terminal import printable
from ..web.urls import is_url
from .served import ServedKnowledgeBase

app = typer.Typer(
    help="Turn documents into a searchable knowledge base inside SurrealDB.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
# No emoji codes (":smile:" in a file name stays as it is) and no guessing of colours for
# numbers or paths: user text is printed exactly, and markup in it is escaped.
console = Console(emoji=False, highlight=False)
err_console = Console(stderr=True, emoji=False, highlight=False)
T = TypeVar("T")

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for machines")]
RerankOption = Annotated[str | None, typer.Option(
    "--rerank", help="A second stage that reorders the first passages: rerank:MODEL (a rerank"
                     " server: SURREALDOCS_RERANK_BASE_URL), llm (the chat model), or off"
                     " [default: $SURREALDOCS_RERANK, else off]", show_default=False)]
WhereFilter = Annotated[list[str] | None, typer.Option(
    "--where", help="Only documents whose metadata passes: KEY=VALUE, KEY!=VALUE, KEY<VALUE,"
                    " <=, >, >=, 'KEY in A,B', 'KEY not in A,B', 'KEY exists' (repeatable:"
                    " all must hold)")]
MetaOption = Annotated[list[str] | None, typer.Option(
    "--meta", help="Metadata of your own, KEY=VALUE (repeatable; numbers, ISO dates and"
                   " true/false are typed; a key given twice makes a list)")]


@dataclass(frozen=True)
class StoreOptions:
    """The options every command that opens a store takes."""

    db: str | None = None
    model: str | None = None
    namespace: str | None = None
    database: str | None = None
    user: str | None = None
    password: str | None = None
    server: str | None = None
    key: str | None = None

    @property
    def served(self) -> str | None:
        """The URL of the ``surrealdocs serve`` to send the command to, if one is named."""
        return self.server or os.environ.get("SURREALDOCS_SERVER") or None

    def settings(self, **more: Any) -> Settings:
        return Settings.from_env(db=self.db, model=self.model, namespace=self.namespace,
                                 database=self.database, user=self.user,
                                 password=self.password, **more)


def _store_option(name: str, help_text: str) -> inspect.Parameter:
    """A ``--NAME`` option every store command takes (``None`` when not given)."""
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=None,
        annotation=Annotated[str | None, typer.Option(f"--{name}", help=help_text)])


_STORE_OPTIONS = [
    _store_option("db", "Store: a path, surrealkv://PATH, mem://, ws(s)://HOST:PORT or"
                        " http(s)://… [default: $SURREALDOCS_DB or ./.surrealdocs/db]"),
    _store_option("model", "Embedding model [default: $SURREALDOCS_MODEL or"
                           " all-minilm-l6-v2]"),
    _store_option("namespace", "SurrealDB namespace"),
    _store_option("database", "SurrealDB database"),
    _store_option("user", "User for a SurrealDB server"),
    _store_option("password", "Password for a SurrealDB server [default:"
                              " $SURREALDOCS_PASSWORD]"),
    _store_option("server", "Send the command to this running `surrealdocs serve`"
                            " (http://HOST:PORT), which holds the store [default:"
                            " $SURREALDOCS_SERVER]"),
    _store_option("key", "API key for --server [default: $SURREALDOCS_KEY]"),
]


def store_options(command: Callable[..., T]) -> Callable[..., T]:
    """Give a command the store options (declared once, here); it receives them as
    ``store: StoreOptions``."""
    return _with_options(command, _STORE_OPTIONS)


def own_store_options(command: Callable[..., T]) -> Callable[..., T]:
    """The store options but ``--server`` and ``--key``: for a command that is the server."""
    return _with_options(command, [p for p in _STORE_OPTIONS
                                   if p.name not in ("server", "key")])


def _with_options(command: Callable[..., T], options: list[inspect.Parameter]
                  ) -> Callable[..., T]:
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != "store"]
    names = [p.name for p in options]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        store = StoreOptions(**{name: kwargs.pop(name, None) for name in names})
        return command(*args, store=store, **kwargs)

    wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*own, *options])
    wrapper.__annotations__ = {p.name: p.annotation for p in [*own, *options]}
    return wrapper


def escape(text: str) -> str:
    """``text`` for the terminal: rich markup escaped, and control and bidirectional
    characters (which a file name may hold) shown as escapes instead of acting on the
    terminal: ``\\x1b``, ``\\u202e``. Line breaks and tabs stay."""
    return escape_markup(_CONTROLS.sub(_escape_char, text))


_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                       "\u2066-\u2069\ud800-\udfff]")


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _count(n: int, noun: str) -> str:
    """``1 file``, ``2 files``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _run(work: Callable[[], Awaitable[T]]) -> T:
    """Run a command's coroutine; a surrealdocs error becomes its message and exit code 2."""
    async def main() -> T:
        return await work()

    try:
        return asyncio.run(main())
    except SurrealDocsError as exc:
        _fail(str(exc))


def _fail(message: str) -> NoReturn:
    err_console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(2)


async def _open(settings: Settings, create: bool = False,
                load_model: bool = True) -> KnowledgeBase:
    """Open the knowledge base; on a terminal a spinner says so meanwhile.

    Why: after large writes the embedded engine merges the store's files when it next
    opens, which took 32 s for a store of 57,000 chunks (BENCHMARKS.md, "Where the growth
    comes from"); without a word the command would seem to hang.
    """
    if not err_console.is_terminal:
        return await KnowledgeBase.open(settings=settings, create=create,
                                        load_model=load_model)
    bar: Progress | None = None
    with err_console.status("opening the store") as status:
        def converting(done: int, total: int) -> None:
            nonlocal bar
            if bar is None:  # a store made with the other text index: converted now
                status.stop()
                bar = Progress(TextColumn("[bold]building the text index"), BarColumn(),
                               MofNCompleteColumn(), console=err_console)
                bar.start()
                bar.add_task("chunks", total=total)
            bar.update(bar.task_ids[0], completed=done)

        try:
            return await KnowledgeBase.open(settings=settings, create=create,
                                            load_model=load_model, on_convert=converting)
        finally:
            if bar is not None:
                bar.stop()


def _with_kb(store: StoreOptions, work: Callable[[KnowledgeBase], Awaitable[T]], *,
             create: bool = False, load_model: bool = True, **settings: Any) -> T:
    """Open the knowledge base, do ``work`` with it, close it. Only commands that put
    something in the store make it (``create``); the others say there is none."""
    async def main() -> T:
        if store.served:  # the server holds the store: the command goes through its API
            key = store.key or os.environ.get("SURREALDOCS_KEY")
            async with ServedKnowledgeBase(store.served, key) as served:
                try:
                    return await work(cast(KnowledgeBase, served))
                except SurrealDocsError:
                    raise
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    raise StoreError(f"the server at {served.url} answered in a shape this"
                                     f" surrealdocs does not know ({type(exc).__name__})"
                                     ) from exc
        async with await _open(store.settings(**settings), create, load_model) as kb:
            return await work(kb)

    return _run(main)


def _meta(pairs: list[str] | None) -> dict[str, Any] | None:
    """``--meta`` pairs as metadata (a bad pair: its message, exit 2)."""
    try:
        return parse_meta(pairs) if pairs else None
    except SurrealDocsError as exc:
        _fail(str(exc))


def _where(texts: list[str] | None) -> list[str] | None:
    """``--where`` texts, checked (a bad one: its message, exit 2); passed on as they are,
    so that a server takes them as its own API does."""
    try:
        parse_where(texts)
    except SurrealDocsError as exc:
        _fail(str(exc))
    return texts or None


def _print_json(value: Any) -> None:
    console.print_json(json.dumps(value, default=str))


# ----- ingest ----------------------------------------------------------------------------
@app.command()
@store_options
def ingest(
    paths: Annotated[list[str] | None, typer.Argument(
        help="Files, directories and web pages (http:// or https:// URLs) to ingest",
        show_default=False)] = None,
    glob: Annotated[str, typer.Option(help="Pattern for files inside directories")] = "**/*",
    force: Annotated[bool, typer.Option(help="Re-extract files even if unchanged")] = False,
    retry_failed: Annotated[bool, typer.Option(
        help="Retry unchanged files that failed last time")] = False,
    urls: Annotated[Path | None, typer.Option(
        "--urls", help="A file of web page URLs, one a line (# starts a comment)",
        show_default=False)] = None,
    sitemap: Annotated[list[str] | None, typer.Option(
        "--sitemap", help="Ingest the pages this sitemap lists (repeatable)",
        show_default=False)] = None,
    follow: Annotated[int, typer.Option(
        "--follow", min=0, help="Also ingest the pages the web pages link to, this many links"
                                " deep, within the same host and path")] = 0,
    max_pages: Annotated[int, typer.Option(
        "--max-pages", min=1, help="The most web pages one ingest fetches (a crawl, a"
                                   " sitemap)")] = 1000,
    robots: Annotated[bool, typer.Option(
        "--robots/--no-robots", help="Obey the sites' robots.txt")] = True,
    chunk_size: Annotated[int | None, typer.Option(help="Characters per chunk")] = None,
    chunk_overlap: Annotated[int | None, typer.Option(help="Characters of overlap")] = None,
    chunk_context: Annotated[str | None, typer.Option(
        help="headings: embed each chunk with the section headings it lies under;"
             " none: the text alone")] = None,
    meta: MetaOption = None,
    as_json: JsonOption = False,
    *, store: StoreOptions,
) -> None:
    """Ingest files and web pages: extract, chunk, embed and store them; skip the ones
    already stored (a page asked again answers whether it changed)."""
    metadata = _meta(meta)
    given = list(paths or [])
    if urls is not None:
        try:
            given += [line.split("#", 1)[0].strip()
                      for line in urls.read_text(encoding="utf-8").splitlines()]
        except (OSError, UnicodeDecodeError) as exc:
            _fail(f"cannot read --urls {urls}: {exc}")
        given = [g for g in given if g]
    pages = [g for g in given if is_url(g)]
    files = [g for g in given if not is_url(g)]
    if not files and not pages and not sitemap:
        _fail("name files, directories or web pages to ingest (or --urls FILE, --sitemap"
              " URL)")

    async def work(kb: KnowledgeBase) -> IngestReport:
        report = IngestReport()
        if files:
            report = await kb.ingest(files, glob=glob, force=force, retry_failed=retry_failed,
                                     metadata=metadata, on_result=on_result,
                                     on_discovered=on_discovered)
        if pages or sitemap:
            fetched = await kb.ingest_urls(
                pages, sitemaps=sitemap or (), follow=follow, max_pages=max_pages,
                force=force, retry_failed=retry_failed, obey_robots=robots,
                metadata=metadata, on_result=on_result,
                on_discovered=lambda n: on_discovered(n + len(report.results)))
            report.results += fetched.results
            report.seconds += fetched.seconds
            report.index_rebuilt = report.index_rebuilt or fetched.index_rebuilt
        return report

    with _ingest_progress(as_json) as on_discovered_and_result:
        on_discovered, on_result = on_discovered_and_result
        report = _with_kb(store, work, create=True, chunk_size=chunk_size,
                          chunk_overlap=chunk_overlap, chunk_context=chunk_context)
    _show_report(report, as_json)


@app.command()
@store_options
def refresh(
    older_than: Annotated[str | None, typer.Option(
        "--older-than", help="Only pages fetched longer ago than this: 30m, 12h, 7d, 2w",
        show_default=False)] = None,
    prune: Annotated[bool, typer.Option(
        "--prune", help="Remove the pages that are gone (404, 410); without it they are"
                        " only reported")] = False,
    robots: Annotated[bool, typer.Option(
        "--robots/--no-robots", help="Obey the sites' robots.txt")] = True,
    as_json: JsonOption = False,
    *, store: StoreOptions,
) -> None:
    """Re-check every web page source: unchanged pages answer 304 and are not read again,
    changed ones are replaced (embedding only their new chunks), gone ones reported."""
    seconds = _duration(older_than) if older_than else None
    with _ingest_progress(as_json, "refresh") as (on_discovered, on_result):
        report = _with_kb(store, lambda kb: kb.refresh(
            older_than=seconds, prune=prune, obey_robots=robots, on_result=on_result,
            on_discovered=on_discovered))
    _show_report(report, as_json)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _duration(text: str) -> float:
    """``30m``, ``12h``, ``7d``, ``2w`` (or seconds) as seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text.lower())
    if match is None:
        _fail(f"--older-than takes a duration such as 30m, 12h, 7d or 2w, not {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


class _ingest_progress:
    """A progress bar over the files of one ingest (not shown for JSON or when piped): files
    done of all, chunks written and their rate, time spent and left, and the files in
    progress with the step each is in (not the last one finished: a long book shows while
    it is embedded), then the vector graph's build."""

    def __init__(self, quiet: bool, label: str = "ingest") -> None:
        self.progress = Progress(TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[chunks]}"), TimeElapsedColumn(),
                                 TextColumn("left"), TimeRemainingColumn(),
                                 TextColumn("{task.description}"), console=err_console,
                                 disable=quiet or not err_console.is_terminal)
        self.task = self.progress.add_task("", total=None, chunks="")
        self.running: dict[str, str] = {}  # source -> the step it is in
        self.chunks = 0
        self.started_at = time.monotonic()

    def __enter__(self) -> tuple[Callable[[int], None], Callable[[FileResult], None]]:
        self.native = _NativeOutput() if not self.progress.disable else None
        if self.native is not None:
            self.native.__enter__()
        self.progress.__enter__()

        def on_discovered(n: int) -> None:
            self.progress.update(self.task, total=n)

        def on_result(result: FileResult) -> None:
            self.running.pop(result.source, None)
            self.chunks += result.chunks if result.status in ("ingested", "updated") else 0
            self._show(advance=1)

        def started(source: str) -> None:
            self.running[source] = ""
            self._show()

        def step(source: str, name: str) -> None:
            if not source:  # the store's own step, once the files are in
                self.running = {"": name}
            elif source in self.running:
                self.running[source] = name
            self._show()

        on_result.started = started  # type: ignore[attr-defined]
        on_result.step = step  # type: ignore[attr-defined]
        return on_discovered, on_result

    def _show(self, advance: int = 0) -> None:
        names = [f"{Path(s).name[:30]}: {step}" if s and step else Path(s).name[:30] or step
                 for s, step in self.running.items()]
        doing = ", ".join(names[:2]) + (f" +{len(names) - 2}" if len(names) > 2 else "")
        rate = self.chunks / max(time.monotonic() - self.started_at, 1e-9)
        chunks = f"{self.chunks:,} chunks ({rate:,.0f}/s)" if self.chunks else ""
        self.progress.update(self.task, advance=advance, chunks=chunks,
                             description=escape(doing))

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)
        if self.native is not None:
            self.native.__exit__()


NATIVE_LINES_SHOWN = 20


class _NativeOutput:
    """While a progress bar shows, what is written to the process's standard error by
    others (native libraries such as Tesseract, which Python cannot silence) goes to a
    file, not into the bar; the bar itself is drawn on a copy of the terminal's stream.
    Once the bar is gone, the lines are printed (the last ``NATIVE_LINES_SHOWN``)."""

    def __enter__(self) -> None:
        sys.stderr.flush()
        self.terminal = os.dup(2)
        self.held = tempfile.TemporaryFile()
        self.console_file = err_console.file
        err_console.file = os.fdopen(os.dup(self.terminal), "w", buffering=1,
                                     encoding="utf-8", errors="replace")
        os.dup2(self.held.fileno(), 2)

    def __exit__(self) -> None:
        sys.stderr.flush()
        os.dup2(self.terminal, 2)
        os.close(self.terminal)
        err_console.file.close()
        err_console.file = self.console_file
        self.held.seek(0)
        lines = self.held.read().decode("utf-8", "replace").splitlines()
        self.held.close()
        lines = [line for line in lines if line.strip()]
        if lines:
            some = (f" (the last {NATIVE_LINES_SHOWN} of {len(lines)} lines)"
                    if len(lines) > NATIVE_LINES_SHOWN else "")
            err_console.print(f"[dim]printed during the ingest by the libraries it uses{some}:"
                              "[/dim]")
            for line in lines[-NATIVE_LINES_SHOWN:]:
                err_console.print(printable(line), markup=False, highlight=False,
                                  soft_wrap=True)


def _show_report(report: IngestReport, as_json: bool, notebook: str | None = None) -> None:
    if as_json:
        _print_json(report.to_dict())
    else:
        _print_report(report)
        if notebook is not None and report.notebook:
            already = report.in_notebook - report.linked
            console.print(f"notebook {escape(notebook)}: {_count(report.linked, 'document')}"
                          " added" + (f", {already} already in it" if already else ""))
    raise typer.Exit(1 if report.counts["failed"] else 0)


def _print_report(report: IngestReport) -> None:
    counts = report.counts
    files = len(report.results)
    table = Table(title="Ingest summary", show_header=True)
    table.add_column("result")
    table.add_column("files", justify="right")
    labels = {"ingested": "ingested", "updated": "updated (content changed)",
              "unchanged": "skipped as unchanged", "duplicate": "duplicates (content stored)",
              "empty": "no text", "failed": "failed",
              "skipped": "skipped (links out of the folder, FIFOs)"}
    for status, label in labels.items():
        style = {"failed": "red", "empty": "yellow"}.get(status, "")
        table.add_row(f"[{style}]{label}[/]" if style else label, str(counts[status]))
    console.print(table)
    rate = files / report.seconds if report.seconds else 0.0
    console.print(
        f"{_count(files, 'file')}, {_count(report.chunks_written, 'chunk')} written"
        f" ({report.chunks_embedded:,} embedded) in {report.seconds:.1f} s"
        f" ({rate:.1f} files/s)" + ("; vector index rebuilt" if report.index_rebuilt else ""))
    _print_problems(report.failures)


def _print_problems(problems: list[FileResult]) -> None:
    if problems:
        ptable = Table(title="Files without a document", show_header=True)
        ptable.add_column("file", overflow="fold")
        ptable.add_column("outcome")
        ptable.add_column("reason", overflow="fold")
        for r in sorted(problems, key=lambda r: (r.status, r.source)):
            ptable.add_row(escape(r.source), r.status, escape(r.reason or ""))
        console.print(ptable)


# ----- sync ------------------------------------------------------------------------------
_SYNC_LABELS = {
    "ingested": "added", "updated": "updated (content changed)",
    "renamed": "renamed or moved (nothing extracted)",
    "deleted": "removed (no longer in the folders)",
    "duplicate": "added, content stored already", "unchanged": "unchanged",
    "empty": "no text", "failed": "failed", "skipped": "skipped (links out of the folder, FIFOs)",
}
_SHOWN_CHANGES = 200


@app.command("sync")
@store_options
def sync_command(
    paths: Annotated[list[Path], typer.Argument(help="Folders to mirror", readable=False)],
    glob: Annotated[str, typer.Option(help="Pattern for files inside the folders")] = "**/*",
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the plan and change nothing")] = False,
    notebook: Annotated[str | None, typer.Option(
        "--notebook", help="Also put the folders' sources in this notebook (created on"
                           " use)")] = None,
    watch: Annotated[bool, typer.Option(
        "--watch", help="After the first pass, follow the folders and apply changes as"
                        " they settle (Ctrl-C stops)")] = False,
    settle: Annotated[float, typer.Option(
        help="With --watch: seconds without a new change before a batch is applied")] = 0.5,
    meta: MetaOption = None,
    as_json: JsonOption = False,
    *, store: StoreOptions,
) -> None:
    """Make the store mirror folders: add new files, replace changed ones (embedding only
    their new chunks), re-point renamed ones, remove vanished ones. Sources outside the
    folders are never touched."""
    if watch and dry_run:
        _fail("--watch and --dry-run do not go together: a dry run changes nothing to follow")
    if watch:
        _sync_and_watch(store, paths, glob, notebook, settle, as_json, _meta(meta))
    _sync_once(store, paths, glob, notebook, dry_run, as_json, _meta(meta))


async def _sync_notebook(kb: KnowledgeBase, notebook: str | None, dry_run: bool) -> Any:
    """The notebook a sync files into (made on use; a dry run makes nothing)."""
    if notebook is None:
        return None
    if not dry_run:
        return await kb.notebooks.for_writing(notebook)
    try:
        return await kb.notebooks.get_notebook(notebook)
    except NotFoundError:
        console.print(f"notebook {escape(notebook)} does not exist yet: the sync will create it")
        return None


def _sync_once(store: StoreOptions, paths: list[Path], glob: str, notebook: str | None,
               dry_run: bool, as_json: bool, metadata: dict[str, Any] | None) -> NoReturn:
    with _ingest_progress(as_json, "sync") as (on_discovered, on_result):
        async def once(kb: KnowledgeBase) -> SyncReport:
            return await kb.sync(paths, glob=glob, dry_run=dry_run,
                                 notebook=await _sync_notebook(kb, notebook, dry_run),
                                 metadata=metadata,
                                 on_result=on_result, on_discovered=on_discovered)

        report = _with_kb(store, once, create=True)
    if as_json:
        _print_json(report.to_dict())
    else:
        _print_sync(report)
    raise typer.Exit(1 if report.counts["failed"] else 0)


class _WatchLog:
    """What ``sync --watch`` prints: the first pass summed up, then each change as a line
    (a path that stays unusable once), and a status line while it waits."""

    def __init__(self, folders: int, as_json: bool, status: Any) -> None:
        self.folders, self.as_json, self.status = folders, as_json, status
        self.passes: list[float] = []
        self.problems: set[tuple[str, str | None]] = set()

    def first(self, report: SyncReport) -> None:
        if not self.passes and not self.as_json:
            _print_sync(report)
            err_console.print(f"watching {_count(self.folders, 'folder')}; Ctrl-C to stop")
        self.passes.append(report.seconds)
        self.on_pass(report)

    def on_pass(self, report: SyncReport) -> None:
        if self.as_json:
            console.print(json.dumps(report.to_dict(), default=str), soft_wrap=True,
                          markup=False, highlight=False)
        else:
            self._print_changes(report)
        if self.status is not None:
            self.status.update(self.status_line(report))

    def status_line(self, report: SyncReport) -> str:
        """The line shown while waiting: the files now in the folders and what the last
        pass did (deletions counted too)."""
        files = sum(1 for c in report.plan if c.action != "delete")
        done = Counter("added" if r.status == "ingested" else r.status for r in report.results
                       if r.status in ("ingested", "updated", "renamed", "deleted", "failed"))
        did = ", ".join(f"{n:,} {what}" for what, n in done.items()) or "no change"
        return (f"watching {_count(self.folders, 'folder')} ({_count(files, 'file')});"
                f" last pass {dt.datetime.now():%H:%M:%S} ({report.seconds:.1f} s): {did};"
                " Ctrl-C to stop")

    def _print_changes(self, report: SyncReport) -> None:
        stamp = dt.datetime.now().strftime("%H:%M:%S")
        for r in report.results:
            if r.status == "unchanged":
                continue
            if r.status in ("failed", "skipped"):  # a path that stays unusable: once
                if (r.source, r.reason) in self.problems:
                    continue
                self.problems.add((r.source, r.reason))
            if not self.passes[1:]:
                continue  # the first pass is summed up
            where = f"{escape(r.previous)} -> " if r.previous else ""
            why = f": {escape(r.reason)}" if r.reason and r.status in (
                "failed", "empty", "skipped") else ""
            console.print(f"{stamp} {r.status} {where}{escape(r.source)}{why}", soft_wrap=True)

    def on_changes(self, n: int) -> None:
        if self.status is not None:
            self.status.update(f"sync: {n} change{'s' if n != 1 else ''} settled, applying")


def _sync_and_watch(store: StoreOptions, paths: list[Path], glob: str, notebook: str | None,
                    settle: float, as_json: bool,
                    metadata: dict[str, Any] | None) -> NoReturn:
    status = err_console.status("sync: first pass") if err_console.is_terminal and \
        not as_json else None
    log = _WatchLog(len(paths), as_json, status)

    async def follow(kb: KnowledgeBase) -> None:
        nb = await _sync_notebook(kb, notebook, dry_run=False)
        # Ctrl-C and SIGTERM stop the watch once the pass at hand is done, and the store is
        # closed as after any command (an interrupt in the middle of the engine's work could
        # leave its close waiting); a second Ctrl-C interrupts at once.
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def interrupted() -> None:
            stop.set()
            loop.remove_signal_handler(signal.SIGINT)

        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGTERM, stop.set)
            loop.add_signal_handler(signal.SIGINT, interrupted)
        await kb.watch(paths, glob=glob, notebook=nb, metadata=metadata, settle=settle,
                       on_pass=log.first,
                       on_changes=log.on_changes, stop=stop)

    try:
        with status if status is not None else contextlib.nullcontext():
            _with_kb(store, follow, create=True)
    except KeyboardInterrupt:
        pass
    err_console.print("stopped")
    raise typer.Exit(0)


def _print_sync(report: SyncReport) -> None:
    if report.dry_run:
        table = Table(title="Sync plan (dry run)", caption="nothing was changed",
                      show_header=True)
        table.add_column("action")
        table.add_column("files", justify="right")
        for action, n in report.planned.items():
            table.add_row(action, str(n))
        console.print(table)
        changes = report.changes
        for c in changes[:_SHOWN_CHANGES]:
            detail = f"{escape(c.previous)} -> " if c.previous else ""
            note = f" ({escape(c.reason)})" if c.reason else ""
            console.print(f"{c.action:<7} {detail}{escape(c.source)}{note}", soft_wrap=True)
        if len(changes) > _SHOWN_CHANGES:
            console.print(f"... and {len(changes) - _SHOWN_CHANGES} more (--json lists all)")
        if report.notebook or report.linked:
            console.print(f"{report.linked} stored documents to put in the notebook")
        _print_problems(report.failures)
        return
    counts = report.counts
    table = Table(title="Sync summary", show_header=True)
    table.add_column("result")
    table.add_column("files", justify="right")
    for status, label in _SYNC_LABELS.items():
        style = {"failed": "red", "empty": "yellow"}.get(status, "")
        table.add_row(f"[{style}]{label}[/]" if style else label, str(counts[status]))
    console.print(table)
    console.print(
        f"{_count(len(report.plan), 'file')} in {_count(len(report.roots), 'folder')}:"
        f" {_count(report.chunks_written, 'chunk')} written"
        f" ({report.chunks_embedded:,} embedded) in {report.seconds:.1f} s"
        + (f"; {_count(report.linked, 'document')} put in the notebook" if report.linked
           else "")
        + ("; vector index rebuilt" if report.index_rebuilt else ""))
    changed = [r for r in report.results
               if r.status in ("ingested", "updated", "renamed", "deleted")]
    for r in changed[:_SHOWN_CHANGES]:  # what the sync did, file by file
        where = f"{escape(_shown_path(r.previous))} -> " if r.previous else ""
        label = "added" if r.status == "ingested" else r.status
        console.print(f"{label:<8} {where}{escape(_shown_path(r.source))}", soft_wrap=True)
    if len(changed) > _SHOWN_CHANGES:
        console.print(f"... and {len(changed) - _SHOWN_CHANGES} more (--json lists all)")
    _print_problems(report.failures)


# ----- search ----------------------------------------------------------------------------
# the filters of a search, as `search` and `list` take them
SourceFilter = Annotated[str | None, typer.Option(help="Only sources matching this glob")]
MimeTypeFilter = Annotated[list[str] | None, typer.Option(
    "--mime-type", help="Only these MIME types (repeatable)")]
NotebookFilter = Annotated[str | None, typer.Option(
    "--notebook", help="Only sources in this notebook (name or id)")]
TopicsFilter = Annotated[list[str] | None, typer.Option(
    "--topic", help="Only sources with one of these topics (repeatable)")]
CreatedAfter = Annotated[dt.datetime | None, typer.Option(
    "--created-after", help="Only sources ingested at or after this time (ISO 8601, UTC)")]
CreatedBefore = Annotated[dt.datetime | None, typer.Option(
    "--created-before", help="Only sources ingested before this time (ISO 8601, UTC)")]


def _vector(text: str | None) -> list[float] | None:
    """A ``--query-vector`` as numbers (a JSON list)."""
    if text is None:
        return None
    try:
        vector = json.loads(text)
    except json.JSONDecodeError:
        vector = None
    if not isinstance(vector, list) or not vector or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in vector):
        _fail("--query-vector takes a JSON list of numbers, e.g. [0.1, -0.2, ...]")
    return [float(x) for x in vector]


@app.command()
@store_options
def search(
    query: Annotated[str, typer.Argument(help="What to look for")],
    mode: Annotated[str, typer.Option(help=f"One of {', '.join(MODES)}")] = "hybrid",
    limit: Annotated[int, typer.Option(
        "--limit", "-k", help="Number of hits, at most 10,000 (the HTTP API takes 1,000, the"
                              " MCP tool 50)")] = 10,
    min_score: Annotated[float | None, typer.Option(
        help="Drop hits scoring below this. A score is the probability that the hit is"
             " relevant (0-1): 0.5, as likely as not (the default cut-off: nothing unless a"
             " hit reaches 0.2, then hits down to 0.02)")] = None,
    source: SourceFilter = None,
    mime_type: MimeTypeFilter = None,
    notebook: NotebookFilter = None,
    topics: TopicsFilter = None,
    created_after: CreatedAfter = None,
    created_before: CreatedBefore = None,
    candidates: Annotated[int | None, typer.Option(
        help="Hits per leg before hybrid fusion [default: 100]")] = None,
    fusion: Annotated[str | None, typer.Option(
        help="Hybrid fusion: zscore, minmax or rrf [default: zscore]")] = None,
    rrf_k: Annotated[int | None, typer.Option(
        help="The k of reciprocal rank fusion (with --fusion rrf) [default: 60]")] = None,
    text_weight: Annotated[float | None, typer.Option(help="Weight of the BM25 leg")] = None,
    vector_weight: Annotated[float | None, typer.Option(help="Weight of the vector leg")] = None,
    per_document: Annotated[bool, typer.Option(
        "--per-document", help="One hit per document: its best chunk")] = False,
    query_vector: Annotated[str | None, typer.Option(
        help="Search by this vector (a JSON list of numbers, computed with the store's"
             " model), instead of or besides the query text")] = None,
    cutoff: Annotated[bool, typer.Option(
        "--cutoff/--all", help="--all: show weaker matches too, not only the hits that are"
                               " probably relevant")] = True,
    where: WhereFilter = None,
    rerank: RerankOption = None,
    as_json: JsonOption = False,
    *, store: StoreOptions,
) -> None:
    """Search the stored chunks (hybrid by default; vector or BM25 text on request)."""
    request = SearchRequest(
        query, mode=mode, limit=limit, min_score=min_score, source=source,
        mime_type=mime_type or None, notebook=notebook, topics=topics or None,
        created_after=created_after, created_before=created_before, candidates=candidates,
        fusion=fusion, rrf_k=rrf_k, text_weight=text_weight, vector_weight=vector_weight,
        per_document=per_document, query_vector=_vector(query_vector), cutoff=cutoff,
        where=_where(where), rerank=rerank)
    hits = _with_kb(store, lambda kb: kb.search(request))
    if as_json:
        _print_json([h.to_dict() for h in hits])
        notice = search_notice(query, hits, cutoff=cutoff, show_weaker="--all")
        if notice:  # the JSON stays a list of hits; why it is empty goes to stderr
            err_console.print(f"notice: {escape(notice)}")
        return
    _print_hits(hits, mode, query, cutoff=cutoff)


def _marked(shown: Snippet) -> str:
    """A snippet as rich markup, the query's words in bold."""
    out, last = [], 0
    for start, end in shown.marks:
        out.append(escape(shown.text[last:start]))
        out.append(f"[bold yellow]{escape(shown.text[start:end])}[/bold yellow]")
        last = end
    out.append(escape(shown.text[last:]))
    return "".join(out)


def _print_hits(hits: list[Hit], mode: str, query: str, *, cutoff: bool = True) -> None:
    notice = search_notice(query, hits, cutoff=cutoff, show_weaker="--all")
    if not hits:
        console.print("no hits" + (f": {escape(notice)}" if notice else ""))
        return
    if notice:
        err_console.print(f"notice: {escape(notice)}")
    table = Table(title=f"{mode} search: {escape(query)}", show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("source", overflow="fold", max_width=40)
    table.add_column("page", justify="right")
    table.add_column("text", overflow="fold")
    for n, hit in enumerate(hits, 1):
        ranks = ""
        if mode == "hybrid":
            ranks = f"\n[dim]text {hit.text_rank or '-'} · vector {hit.vector_rank or '-'}[/dim]"
        if hit.rerank_score is not None:
            ranks += f"\n[dim]reranked {hit.rerank_score:.3f}, was #{hit.first_rank}[/dim]"
        shown = snippet(hit.content, query)
        title = hit.title or Path(hit.source).name
        # the heading path, unless it says again what the title or the text's start says
        heading = (hit.context or "").split(HEADING_SEPARATOR)[-1].strip()
        repeated = hit.context == title or (
            bool(heading) and shown.text.lstrip("#… ").startswith(heading))
        context = f"[dim]{escape(hit.context)}[/dim]\n" if hit.context and not repeated else ""
        table.add_row(str(n), f"{hit.score:.4f}{ranks}", escape(title)
                      + f"\n[dim]{escape(_shown_path(hit.source))}"
                      f" [{hit.char_start}:{hit.char_end}][/dim]",
                      str(hit.page or ""), context + _marked(shown))
    console.print(table)


# ----- notebooks -------------------------------------------------------------------------
notebook_app = typer.Typer(help="Notebooks: named collections of sources, searchable alone.",
                           no_args_is_help=True)
app.add_typer(notebook_app, name="notebook")


@notebook_app.command("create")
@store_options
def notebook_create(
    name: Annotated[str, typer.Argument(help="Notebook name (unique)")],
    description: Annotated[str, typer.Option(help="What it is for")] = "",
    as_json: JsonOption = False,
    *, store: StoreOptions,
) -> None:
    """Create a notebook."""
    nb = _with_kb(store, lambda kb: kb.notebooks.create_notebook(name, description),
                  create=True)
    if as_json:
        _print_json(nb.to_dict())
        return
    console.print(f"created notebook {escape(nb.name)} ({nb.id})")


@notebook_app.command("list")
@store_options
def notebook_list(as_json: JsonOption = False, *, store: StoreOptions) -> None:
    """List notebooks with their number of sources."""
    notebooks = _with_kb(store, lambda kb: kb.notebooks.list_notebooks())
    if as_json:
        _print_json([nb.to_dict() for nb in notebooks])
        return
    table = Table(title="Notebooks")
    for column in ("name", "sources", "description", "id"):
        table.add_column(column)
    for nb in notebooks:
        table.add_row(escape(nb.name) + (" [dim](archived)[/dim]" if nb.archived else ""),
                      str(nb.source_count or 0), escape(nb.description), id_text(nb.id))
    console.print(table)


@notebook_app.command("show")
@store_options
def notebook_show(
    name: Annotated[str, typer.Argument(help="Notebook name or id")],
    as_json: JsonOption = False,
    *, store: StoreOptions,
) -> None:
    """Show a notebook's sources and notes."""
    async def work(kb: KnowledgeBase) -> tuple[Any, list[Any], list[Any]]:
        nb = await kb.notebooks.get_notebook(name)
        return nb, await kb.notebooks.sources(nb), await kb.notebooks.notes(nb)

    nb, sources, notes = _with_kb(store, work)
    if as_json:
        _print_json({**nb.to_dict(), "sources": [s.to_dict(text=False) for s in sources],
                     "notes": [n.to_dict() for n in notes]})
        return
    console.print(f"[bold]{escape(nb.name)}[/bold] {escape(nb.description)} ({nb.id})")
    table = Table(title=_count(len(sources), "source"))
    for column in ("title", "chunks", "topics", "id"):
        table.add_column(column, overflow="fold")
    for src in sources:
        table.add_row(escape(src.title or src.source or ""), str(src.chunk_count),
                      escape(", ".join(src.topics)), id_text(src.id))
    console.print(table)
    for note in notes:
        console.print(f"note: {escape(note.title)}")


@notebook_app.command("delete")
@store_options
def notebook_delete(
    name: Annotated[str, typer.Argument(help="Notebook name or id")],
    delete_sources: Annotated[bool, typer.Option(
        help="Also delete the sources that no other notebook references")] = False,
    *, store: StoreOptions,
) -> None:
    """Delete a notebook, its edges and notes (and, on request, its own sources)."""
    _with_kb(store, lambda kb: kb.notebooks.delete_notebook(
        name, delete_exclusive_sources=delete_sources))
    console.print(f"deleted notebook {escape(name)}")


@app.command("add")
@store_options
def add(
    notebook: Annotated[str, typer.Argument(help="Notebook name or id")],
    paths: Annotated[list[Path], typer.Argument(
        help="Files and directories to add", readable=False)],
    glob: Annotated[str, typer.Option(help="Pattern for files inside directories")] = "**/*",
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", help="Topic to tag the sources with (repeatable)")] = None,
    meta: MetaOption = None,
    as_json: JsonOption = False,
    *, store: StoreOptions,
) -> None:
    """Ingest files into a notebook (creating the notebook if it does not exist)."""
    metadata = _meta(meta)

    async def work(kb: KnowledgeBase) -> IngestReport:
        nb = await kb.notebooks.for_writing(notebook)
        report = await kb.notebooks.add_paths(nb, paths, topics=topic or (), glob=glob)
        await kb.metadata.file_documents(report, metadata)
        return report

    _show_report(_with_kb(store, work, create=True), as_json, notebook=notebook)


@app.command()
@store_options
def jobs(
    status: Annotated[str | None, typer.Option(help="Only jobs with this status")] = None,
    run: Annotated[bool, typer.Option(help="Run the queued jobs now, then list")] = False,
    as_json: JsonOption = False,
    *, store: StoreOptions,
) -> None:
    """List background jobs with their status, progress and error."""
    async def work(kb: KnowledgeBase) -> list[Any]:
        if run:
            await kb.jobs.run_pending()
        return await kb.jobs.list(status=status)

    rows = _with_kb(store, work)
    if as_json:
        _print_json([j.to_dict() for j in rows])
        return
    table = Table(title="Jobs")
    for column in ("id", "kind", "target", "status", "progress", "error"):
        table.add_column(column, overflow="fold")
    for j in rows:
        table.add_row(id_text(j.id), j.kind, str(j.target or ""), escape(j.outcome),
                      f"{j.progress:.0%}", escape(j.error or ""))
    console.print(table)


# ----- store maintenance -----------------------------------------------------------------
@app.command()
@store_options
def stats(as_json: JsonOption = False, *, store: StoreOptions) -> None:
    """Show what the store holds."""
    result = _with_kb(store, lambda kb: kb.stats())
    if as_json:
        _print_json(result.to_dict())
        return
    table = Table(title="surrealdocs store", show_header=False)
    table.add_column("what")
    table.add_column("value", overflow="fold")
    table.add_row("store", escape(result.url))
    table.add_row("schema version", str(result.schema_version))
    table.add_row("embedding model", f"{escape(result.model)} ({result.dimension} dimensions)")
    table.add_row("documents", str(result.documents))
    table.add_row("chunks", str(result.chunks))
    table.add_row("notebooks", str(result.notebooks))
    for status, n in sorted(result.sources.items()):
        table.add_row(f"sources {status}", str(n))
    for mime, n in sorted(result.mime_types.items(), key=lambda kv: -kv[1]):
        table.add_row(f"  {escape(mime)}", str(n))
    table.add_row("vectors not yet in the HNSW graph", str(result.vectors_outside_graph))
    text = result.text_index
    if text.get("kind") == "segments":
        table.add_row("text index", f"{_count(text['segments'], 'segment')},"
                      f" {text['postings']:,} postings, {text['dead']:,} deleted chunks"
                      f" ({text['dead_ratio']:.1%}) not yet merged away")
    elif text:
        table.add_row("text index", "the engine's FULLTEXT index")
    console.print(table)


@app.command("list")
@store_options
def list_documents(
    source: SourceFilter = None,
    mime_type: MimeTypeFilter = None,
    notebook: NotebookFilter = None,
    topics: TopicsFilter = None,
    created_after: CreatedAfter = None,
    created_before: CreatedBefore = None,
    where: WhereFilter = None,
    limit: Annotated[int, typer.Option("--limit", "-k", help="Documents per page")] = 50,
    offset: Annotated[int, typer.Option(help="Documents to skip (the page's start)")] = 0,
    failed: Annotated[bool, typer.Option(
        "--failed", help="List the sources whose last ingest failed, with the reason, instead"
                         " (--retry-failed on ingest tries them again)")] = False,
    as_json: JsonOption = False,
    *, store: StoreOptions,
) -> None:
    """List the stored documents, oldest first, with the filters a search takes."""
    if failed:
        _list_failures(store, source, limit, offset, as_json)
        return
    filters: dict[str, Any] = {"source": source, "mime_type": mime_type or None,
                               "notebook": notebook, "topics": topics or None,
                               "created_after": created_after,
                               "created_before": created_before, "where": _where(where)}

    async def work(kb: KnowledgeBase) -> tuple[list[Any], int]:
        return (await kb.documents(offset=offset, limit=limit, **filters),
                await kb.count_documents(**filters))

    docs, total = _with_kb(store, work)
    if as_json:
        _print_json({"documents": [d.to_dict() for d in docs], "offset": offset,
                     "limit": limit, "total": total})
        return
    if not docs:
        console.print("no documents" + (f" (of {total:,})" if total else ""))
        return
    table = Table(title=_page_title(total, offset, len(docs), "document"))
    table.add_column("source", overflow="fold", ratio=3)
    table.add_column("title", overflow="fold", ratio=2)
    table.add_column("type", overflow="fold", ratio=1)
    table.add_column("chunks", justify="right")
    table.add_column("ingested", no_wrap=True)
    for doc in docs:
        more = f" (+{len(doc.sources) - 1})" if len(doc.sources) > 1 else ""
        table.add_row(escape(_shown_path(doc.source or "")) + more,
                      escape(doc.title or ""), escape(doc.mime_type), str(doc.chunk_count),
                      _when(doc.ingested_at)[:10])
    console.print(table)
    err_console.print("ids: --json; one document: surrealdocs show SOURCE")


def _page_title(total: int, offset: int, shown: int, noun: str) -> str:
    """``12 documents, 1–10 shown`` (the range only when it is not all of them)."""
    return _count(total, noun) + (f", {offset + 1}–{offset + shown} shown"
                                  if total > shown else "")


def _list_failures(store: StoreOptions, source: str | None, limit: int, offset: int,
                   as_json: bool) -> None:
    found, total = _with_kb(store, lambda kb: kb.failures(offset=offset, limit=limit,
                                                            source=source))
    if as_json:
        _print_json({"failures": [f.to_dict() for f in found], "offset": offset,
                     "limit": limit, "total": total})
        return
    if not found:
        console.print("no failed sources" + (f" (of {total:,})" if total else ""))
        return
    table = Table(title=_page_title(total, offset, len(found), "failed source"))
    table.add_column("source", overflow="fold", ratio=2)
    table.add_column("reason", overflow="fold", ratio=3)
    for f in found:
        table.add_row(escape(_shown_path(f.source)), escape(f.reason or ""))
    console.print(table)
    err_console.print("try them again: surrealdocs ingest PATHS --retry-failed")


@app.command()
@store_options
def show(
    document: Annotated[str, typer.Argument(help="A document's id, or one of its sources")],
    as_json: JsonOption = False,
    *, store: StoreOptions,
) -> None:
    """Show one stored document: what it is, its sources, notebooks, topics and chunks (or,
    for a source whose ingest failed, why)."""
    async def work(kb: KnowledgeBase) -> Any:
        try:
            return await kb.document(document, text=False)
        except NotFoundError:
            failed = await kb.failure(document)
            if failed is None:
                raise
            return failed

    doc = _with_kb(store, work)
    if isinstance(doc, FileResult):  # no document: its last ingest failed
        if as_json:
            _print_json(doc.to_dict())
        else:
            console.print(f"{escape(_shown_path(doc.source))}: failed, {escape(doc.reason or '')}")
            err_console.print("no document; ingest it again with --retry-failed once fixed")
        raise typer.Exit(1)
    if as_json:
        _print_json(doc.to_dict())
        return
    table = Table(show_header=False, title=escape(doc.title or _shown_path(doc.source or "")))
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    pages = f", {_count(doc.page_count, 'page')}" if doc.page_count else ""
    rows = [("id", doc.id), ("type", escape(doc.mime_type)),
            ("size", f"{_count(doc.characters, 'character')}{pages},"
                     f" {_count(doc.chunk_count, 'chunk')}"),
            ("sources", "\n".join(escape(_shown_path(s)) for s in doc.sources)),
            ("notebooks", escape(", ".join(doc.notebooks)) or "-"),
            ("topics", escape(", ".join(doc.topics)) or "-"),
            ("ingested", _when(doc.ingested_at)), ("updated", _when(doc.updated_at)),
            ("model", escape(doc.embedding_model or "-")),
            ("metadata", _metadata_lines(doc.metadata))]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)


METADATA_VALUE_CHARS = 80  # a longer value is cut in the table (--json has it whole)


def _metadata_lines(metadata: dict[str, Any] | None) -> str:
    """A document's metadata as ``key: value`` lines."""
    if not metadata:
        return "-"
    lines = []
    for key, value in sorted(metadata.items()):
        shown = json.dumps(jsonable(value), ensure_ascii=False) \
            if not isinstance(value, str) else value
        if len(shown) > METADATA_VALUE_CHARS:
            shown = shown[:METADATA_VALUE_CHARS - 1] + "…"
        lines.append(f"{escape(printable(key))}: {escape(printable(shown))}")
    return "\n".join(lines)


@app.command()
@store_options
def meta(
    document: Annotated[str, typer.Argument(help="A document's id, or one of its sources")],
    pairs: Annotated[list[str] | None, typer.Argument(
        help="KEY=VALUE pairs to set (typed as --meta types them)", show_default=False)
    ] = None,
    unset: Annotated[list[str] | None, typer.Option(
        "--unset", help="A key to remove (repeatable)")] = None,
    as_json: JsonOption = False,
    *, store: StoreOptions,
) -> None:
    """Set or remove metadata of your own on a document; nothing is re-extracted or
    re-embedded. Filter on it with --where."""
    changes = _meta(pairs) or {}
    if not changes and not unset:
        _fail("give KEY=VALUE pairs to set, or --unset KEY")
    metadata = _with_kb(store, lambda kb: kb.metadata.set(document, changes,
                                                          unset=unset or ()),
                        load_model=False)
    if as_json:
        _print_json(jsonable(metadata))
        return
    console.print(_metadata_lines(metadata), soft_wrap=True)


def _shown_path(source: str) -> str:
    """A source as the terminal shows it: relative to the current folder when inside it."""
    try:
        here = Path.cwd()
        path = Path(source)
        if path.is_absolute() and path.is_relative_to(here):
            return str(path.relative_to(here))
    except (OSError, ValueError):
        pass
    return source


@app.command()
@store_options
def delete(
    refs: Annotated[list[str] | None, typer.Argument(
        help="Sources (paths or names) to forget, or document ids (documents:…) to delete"
             " whatever their sources", show_default=False)] = None,
    glob: Annotated[str | None, typer.Option(
        "--glob", help="Also forget every stored source this pattern matches (as a search's"
                       " --source: a relative pattern matches at the end of the path)")] = None,
    where: Annotated[list[str] | None, typer.Option(
        "--where", help="Also delete every document whose metadata passes (as a search's"
                        " --where; repeatable: all must hold)")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Say what would be deleted, and delete nothing")] = False,
    *, store: StoreOptions,
) -> None:
    """Forget sources; a document goes when no source refers to it any more."""
    if not refs and glob is None and not where:
        _fail("name what to delete: sources, document ids, --glob PATTERN or --where FILTER")
    metadata_filter = _where(where)
    outcome = _with_kb(store, lambda kb: kb.forget(refs or (), glob=glob,
                                                   where=metadata_filter, dry_run=dry_run))
    if (glob or where) and not outcome:
        console.print("nothing stored matches "
                      + escape(glob if glob else " and ".join(where or [])))
    for f in outcome:
        near = ", ".join(escape(_shown_path(n)) for n in f.near)
        console.print(f"{f.status}: {escape(_shown_path(f.ref))}"
                      + (f" (stored: {near})" if near else ""), soft_wrap=True)
    raise typer.Exit(0 if outcome and all(f.status != "not found" for f in outcome) else 1)


@app.command("rebuild-index")
@store_options
def rebuild_index(
    only: Annotated[str | None, typer.Option(
        "--only", help="Rebuild only the text index ('text') or the HNSW graph ('vector')",
        show_default=False)] = None, *, store: StoreOptions) -> None:
    """Rebuild the text index from the chunks and the HNSW graph over every vector (ingest
    merges the one and builds the other after big loads)."""
    if only not in (None, "text", "vector"):
        _fail(f"--only must be text or vector, got {only!r}")
    progress = Progress(TextColumn("[bold]text index"), BarColumn(), MofNCompleteColumn(),
                        console=err_console, disable=not err_console.is_terminal)

    async def work(kb: KnowledgeBase) -> None:
        task = progress.add_task("chunks", total=None)
        with progress:
            await kb.rebuild_index(
                text=only != "vector", vectors=only != "text",
                progress=lambda done, total: progress.update(task, completed=done,
                                                             total=total))

    _with_kb(store, work)
    console.print({None: "text index and vector index rebuilt", "text": "text index rebuilt",
                   "vector": "vector index rebuilt"}[only])


# ----- archives: export, import, copy ----------------------------------------------------
def _archive_progress(label: str) -> tuple[Progress, Callable[[str, int, int], None]]:
    progress = Progress(TextColumn(f"[bold]{label}" + " {task.fields[what]}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                        disable=not err_console.is_terminal)
    task = progress.add_task("", total=None, what="")

    def update(what: str, done: int, total: int) -> None:
        progress.update(task, completed=done, total=total or None, what=what)
    return progress, update


def _carried(report: ArchiveReport) -> str:
    rows = report.rows
    return (f"{_count(rows.get('documents', 0), 'document')}, "
            f"{_count(rows.get('chunks', 0), 'chunk')} ({_count(report.vectors, 'vector')}), "
            f"{_count(rows.get('notebook', 0), 'notebook')}, "
            f"{_count(rows.get('chat_session', 0), 'conversation')}")


@app.command()
@store_options
def export(
    file: Annotated[str, typer.Argument(help="The archive to write (- for stdout)")],
    with_keys: Annotated[bool, typer.Option(
        "--with-keys", help="Also carry the server's API keys (their hashes)")] = False,
    *, store: StoreOptions) -> None:
    """Write the whole knowledge base to one archive (docs/archive.md): documents, chunks
    with their vectors, notebooks, notes, conversations. `surrealdocs import` reads it."""
    if file != "-" and Path(file).is_dir():
        _fail(f"{file} is a folder: name the archive file to write")
    progress, update = _archive_progress("export")

    async def work(kb: KnowledgeBase) -> ArchiveReport:
        with progress:
            if file == "-":
                return await kb.export(sys.stdout.buffer, with_keys=with_keys,
                                       progress=update)
            target = Path(file)
            partial = target.with_name(target.name + ".partial")
            try:
                with partial.open("wb") as out:
                    report = await kb.export(out, with_keys=with_keys, progress=update)
                partial.replace(target)  # never half an archive under its name
            finally:
                partial.unlink(missing_ok=True)
            return report

    try:
        report = _with_kb(store, work, load_model=False)
    except OSError as exc:
        _fail(f"cannot write {file}: {exc.strerror or exc}")
    err_console.print(f"exported {_carried(report)} to {escape(file)} in "
                      f"{report.seconds:.1f} s")


@app.command("import")
@store_options
def import_(
    file: Annotated[str, typer.Argument(help="The archive to read (- for stdin)")],
    merge: Annotated[bool, typer.Option(
        "--merge", help="Into a store that holds documents already: a document both hold"
                        " is kept once, a source both hold keeps the store's")] = False,
    *, store: StoreOptions) -> None:
    """Import an archive of `surrealdocs export` into an empty store (--db), with its
    vectors: nothing is extracted or embedded. Interrupted, run it again to finish."""
    if store.served:
        _fail("import writes into a store directly: give --db, not --server")
    progress, update = _archive_progress("import")

    async def work() -> ArchiveReport:
        with progress:
            if file == "-":
                return await KnowledgeBase.import_archive(
                    sys.stdin.buffer, settings=store.settings(), merge=merge,
                    progress=update)
            with Path(file).open("rb") as source:
                return await KnowledgeBase.import_archive(
                    source, settings=store.settings(), merge=merge, progress=update)

    try:
        report = _run(work)
    except OSError as exc:
        _fail(f"cannot read {file}: {exc.strerror or exc}")
    if report.already:
        console.print("this archive was imported into this store already: nothing to do")
        return
    done = "finished an interrupted import:" if report.resumed else "imported"
    console.print(f"{done} {_carried(report)} in {report.seconds:.1f} s")
    if merge:
        console.print(f"{_count(report.joined, 'document')} the store held already (their"
                      f" sources added), {_count(report.left_out, 'document')} left out"
                      " (every source of theirs holds other text here)")


@app.command()
@store_options
def copy(
    to: Annotated[str, typer.Option("--to", help="The empty store to copy into (a path or"
                                                 " a store URL)")],
    source: Annotated[str | None, typer.Option(
        "--from", help="The store to copy [default: --db]")] = None,
    to_namespace: Annotated[str | None, typer.Option(
        "--to-namespace", help="The target's namespace [default: --namespace]")] = None,
    to_database: Annotated[str | None, typer.Option(
        "--to-database", help="The target's database [default: --database]")] = None,
    to_user: Annotated[str | None, typer.Option(
        "--to-user", help="User for the target server")] = None,
    to_password: Annotated[str | None, typer.Option(
        "--to-password", help="Password for the target server [default:"
                              " $SURREALDOCS_TO_PASSWORD]")] = None,
    with_keys: Annotated[bool, typer.Option(
        "--with-keys", help="Also carry the server's API keys (their hashes)")] = False,
    *, store: StoreOptions) -> None:
    """Copy the whole knowledge base into another, empty store (from the embedded store to
    a SurrealDB server, or back) without re-embedding: export piped into import. The store
    options name the source; the --to options the target."""
    if store.served:
        _fail("copy reads a store directly: give --from or --db, not --server")
    progress, update = _archive_progress("copy")
    origin = StoreOptions(**{**store.__dict__, "db": source or store.db})
    settings = origin.settings()
    target = settings.replace(
        db=to, namespace=to_namespace or settings.namespace,
        database=to_database or settings.database, user=to_user,
        password=to_password or os.environ.get("SURREALDOCS_TO_PASSWORD") or None)

    async def work(kb: KnowledgeBase) -> ArchiveReport:
        with progress:
            return await kb.copy_to(to, settings=target, with_keys=with_keys,
                                    progress=update)

    report = _with_kb(origin, work, load_model=False)
    console.print(f"copied {_carried(report)} to {escape(to)} in {report.seconds:.1f} s")


@app.command()
@store_options
def reembed(*, store: StoreOptions) -> None:
    """Re-embed every chunk with another model (--model) and rebuild the vector indexes."""
    if not store.model:
        _fail("reembed needs the new model: --model NAME")
    model = str(store.model)
    progress = Progress(TextColumn("[bold]reembed"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err_console,
                        disable=not err_console.is_terminal)
    task = progress.add_task("", total=None)

    async def work() -> int:
        return await KnowledgeBase.reembed(
            model, settings=store.settings(),
            progress=lambda done, total: progress.update(task, completed=done, total=total))

    with progress:
        n = _run(work)
    console.print(f"{_count(n, 'chunk')} re-embedded with {escape(model)}")


# ----- ask -------------------------------------------------------------------------------
@app.command()
@store_options
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer")],
    llm: Annotated[str | None, typer.Option(
        help="Chat model: openai:MODEL (any OpenAI-compatible server) or ollama:MODEL"
             " [default: $SURREALDOCS_LLM]")] = None,
    passages: Annotated[int | None, typer.Option(
        help="Passages retrieved and given to the model [default: 8]")] = None,
    mode: Annotated[str, typer.Option(help=f"How they are found: one of {', '.join(MODES)}")
                    ] = "hybrid",
    source: SourceFilter = None,
    mime_type: MimeTypeFilter = None,
    notebook: NotebookFilter = None,
    topics: TopicsFilter = None,
    created_after: CreatedAfter = None,
    created_before: CreatedBefore = None,
    where: WhereFilter = None,
    rerank: RerankOption = None,
    conversation: Annotated[str | None, typer.Option(
        "--conversation", "--session",
        help="Ask within a conversation: its id, or `new` to start one (a follow-up is read"
             " with the turns before it; filters come from its notebook)")] = None,
    as_json: JsonOption = False,
    *, store: StoreOptions,
) -> None:
    """Answer a question from the stored documents with a chat model, citing the passages
    it used as \\[n]; the sources follow the answer."""
    from ..chat import chat_model

    try:
        if not store.served:  # a server has its own model
            chat_model(llm, store.settings())  # none: say how to set one, before any work
    except SurrealDocsError as exc:
        _fail(str(exc))
    request = SearchRequest(
        question, mode=mode, limit=passages or store.settings().ask_passages, source=source,
        mime_type=mime_type or None, notebook=notebook, topics=topics or None,
        created_after=created_after, created_before=created_before, where=_where(where),
        rerank=rerank)

    def show(kind: str, value: Any) -> None:
        if kind == "text" and not as_json:  # the model's words: never terminal commands
            console.print(printable(value), end="", markup=False, highlight=False,
                          soft_wrap=True)

    async def work(kb: KnowledgeBase) -> tuple[Any, str | None]:
        if conversation is None:
            return await kb.ask(request, llm=llm, on_event=show), None
        ref = conversation if conversation != "new" else \
            (await kb.conversations.create(question[:80], notebook)).id
        return await kb.conversations.ask(ref, question, llm=llm, on_event=show), ref

    result, within = _with_kb(store, work)
    if as_json:  # "session": its name until 2026-12
        _print_json({**result.to_dict(), "conversation": within, "session": within})
        return
    console.print()
    _print_sources(result)
    if result.notice:
        err_console.print(f"notice: {escape(result.notice)}")
    if within:
        err_console.print(f"conversation {escape(within)} (--conversation to go on)")


def _print_sources(result: Any) -> None:
    note = []
    if result.removed_citations:
        named = " ".join(f"[{n}]" for n in result.invented) or "citations"
        note.append(f"{named} named no passage and {'was' if len(result.invented) == 1 else 'were'}"
                    " removed; the checked answer:")
    if not result.grounded and result.passages:
        note.append("the answer cites no passage: it is not grounded")
    if note:
        err_console.print(f"[yellow]note:[/yellow] {escape('; '.join(note))}")
    if result.removed_citations:  # what streamed held them: the answer without them
        console.print(printable(result.text), markup=False, highlight=False, soft_wrap=True)
    for c in result.citations:
        pages = f", page {c.page}" if c.page else ""
        title = escape(printable(c.title or c.source))
        console.print(f"[bold]{escape(f'[{c.number}]')}[/bold] {title}"
                      f" [dim]{escape(printable(c.source))}{pages} · characters {c.char_start}-"
                      f"{c.char_end}[/dim]", soft_wrap=True)


# ----- MCP -------------------------------------------------------------------------------
@app.command("mcp")
@store_options
def mcp_command(
    allow_writes: Annotated[bool, typer.Option(
        "--allow-writes", help="Also offer the add_text and ingest_path tools (they write to"
                               " the store; ingest_path reads this machine's disk)")] = False,
    max_chars: Annotated[int, typer.Option(
        help="Most characters of one tool result; longer ones are cut and say so")] = 8000,
    *, store: StoreOptions,
) -> None:
    """Serve the knowledge base to MCP clients (Claude Desktop, IDEs, agents) over stdio."""
    try:
        from .mcp import serve_stdio
    except ImportError as exc:
        _fail("the MCP server needs the mcp extra: pip install '.[mcp]' in a clone of"
              f" surrealdocs ({exc})")
    _run(lambda: serve_stdio(store.settings(), allow_writes=allow_writes, max_chars=max_chars))


# ----- the HTTP server and its keys ------------------------------------------------------
@app.command()
@own_store_options
def serve(
    host: Annotated[str, typer.Option(
        help="Address to listen on. Without API keys only loopback is allowed")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on")] = 8000,
    cors_origin: Annotated[list[str] | None, typer.Option(
        "--cors-origin", help="An origin whose pages may call the API, e.g."
                              " https://app.example.com (repeatable; none by default)")] = None,
    allowed_host: Annotated[list[str] | None, typer.Option(
        "--allowed-host", help="A name the Host header may carry besides the address listened"
                               " on and loopback names, such as a proxy's (repeatable)")] = None,
    max_file_size: Annotated[str, typer.Option(
        help="Largest uploaded file (e.g. 100MB, 1GiB)")] = "100MB",
    max_request_size: Annotated[str, typer.Option(
        help="Largest request body: all the files of one upload together")] = "500MB",
    max_files: Annotated[int, typer.Option(help="Most files in one upload")] = 1000,
    uploads_dir: Annotated[Path | None, typer.Option(
        help="Where uploads wait for their ingest job (default: next to the store,"
             " STORE.uploads)")] = None,
    mcp_allow_writes: Annotated[bool, typer.Option(
        "--mcp-allow-writes", help="Offer the MCP endpoint's add_text and ingest_path tools"
                                   " to keys that may write")] = False,
    mcp_max_chars: Annotated[int, typer.Option(
        help="Most characters of one MCP tool result")] = 8000,
    llm_allow: Annotated[list[str] | None, typer.Option(
        "--llm-allow", help="A chat model of the same provider that a request to /v1/ask may"
                            " pick besides SURREALDOCS_LLM (repeatable; none by default)")] = None,
    allow_private_urls: Annotated[bool, typer.Option(
        "--allow-private-urls", help="Let POST /v1/urls and MCP's add_url fetch loopback,"
                                     " private and link-local addresses (an intranet)")
    ] = False,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error")] = "info",
    access_log: Annotated[bool, typer.Option(help="Log every request")] = True,
    *, store: StoreOptions,
) -> None:
    """Serve the store over HTTP: the JSON API under /v1 (OpenAPI at /docs), the MCP
    endpoint at /mcp/ (streamable HTTP) and a search page at /. Uploads are ingested by
    background jobs that survive a restart."""
    if log_level.lower() not in ("debug", "info", "warning", "error"):
        _fail(f"--log-level must be debug, info, warning or error, got {log_level!r}")
    _serve(store, log_level, access_log, uploads_dir, dict(
        host=host, port=port, cors_origins=tuple(cors_origin or ()),
        allowed_hosts=tuple(allowed_host or ()), max_file_bytes=max_file_size,
        max_request_bytes=max_request_size, max_files=max_files,
        mcp_allow_writes=mcp_allow_writes, mcp_max_chars=mcp_max_chars,
        llm_allow=tuple(llm_allow or ()), allow_private_urls=allow_private_urls))


def _serve(store: StoreOptions, log_level: str, access_log: bool, uploads_dir: Path | None,
           options: dict[str, Any]) -> None:
    """Serve with ``options`` (the server's configuration, sizes as typed) until stopped."""
    try:
        from .http import ServeConfig, parse_size
        from .http.runner import serve_until_stopped
        from .http.state import refuse_without_keys
    except ImportError as exc:
        _fail(f"the server needs its extra ({exc.name} is missing): "
              "pip install '.[serve]' in a clone of surrealdocs")
    try:
        config = ServeConfig(
            settings=store.settings(uploads_dir=str(uploads_dir) if uploads_dir else None),
            **{**options, "max_file_bytes": parse_size(options["max_file_bytes"]),
               "max_request_bytes": parse_size(options["max_request_bytes"])})
    except SurrealDocsError as exc:
        _fail(str(exc))
    host = config.host
    # off loopback, refuse before listening rather than after
    if not config.loopback and _with_kb(store, lambda kb: kb.keys.count(), create=True) == 0:
        _fail(refuse_without_keys(host))
    outcome = serve_until_stopped(config, log_level=log_level, access_log=access_log,
                                  announce=err_console.print)
    if outcome.fatal:
        _fail(outcome.fatal)
    if not outcome.started:
        raise typer.Exit(1)


conversations_app = typer.Typer(
    help="Conversations of ask --conversation: list, show, delete.", no_args_is_help=True)
app.add_typer(conversations_app, name="conversations")
app.add_typer(conversations_app, name="chats", hidden=True)  # its name until 2026-12


@conversations_app.command("list")
@store_options
def conversations_list(notebook: NotebookFilter = None, as_json: JsonOption = False, *,
                       store: StoreOptions) -> None:
    """List the conversations, the latest first."""
    found = _with_kb(store, lambda kb: kb.conversations.list_conversations(notebook))
    if as_json:
        _print_json([s.to_dict() for s in found])
        return
    if not found:
        console.print("no conversations: surrealdocs ask \"…\" --conversation new starts one")
        return
    table = Table(title="Conversations")
    for column in ("id", "title", "turns", "updated"):
        table.add_column(column)
    for s in found:
        table.add_row(escape(s.id), escape(s.title), str(s.turn_count), str(s.updated or ""))
    console.print(table)


@conversations_app.command("show")
@store_options
def conversations_show(
        conversation: Annotated[str, typer.Argument(help="The conversation's id")],
        as_json: JsonOption = False, *, store: StoreOptions) -> None:
    """One conversation, question by question, with the sources of each answer."""
    found = _with_kb(store, lambda kb: kb.conversations.get(conversation))
    if as_json:
        _print_json(found.to_dict())
        return
    console.print(f"[bold]{escape(found.title)}[/bold] · {_count(found.turn_count, 'turn')}")
    for turn in found.turns:
        console.print(f"\n[bold]Q:[/bold] {escape(turn.question)}", soft_wrap=True)
        console.print(escape(turn.answer), soft_wrap=True)
        for c in turn.citations:
            number = escape(f"[{c.get('number')}]")
            console.print(f"  {number} {escape(str(c.get('source')))}", soft_wrap=True)


@conversations_app.command("delete")
@store_options
def conversations_delete(
        conversation: Annotated[str, typer.Argument(help="The conversation's id")], *,
        store: StoreOptions) -> None:
    """Delete a conversation and its turns."""
    _with_kb(store, lambda kb: kb.conversations.delete(conversation))
    console.print(f"deleted the conversation {escape(conversation)}")


keys_app = typer.Typer(help="API keys of the HTTP server (stored hashed; shown once).",
                       no_args_is_help=True)
app.add_typer(keys_app, name="keys")


@keys_app.command("create")
@store_options
def keys_create(
    name: Annotated[str, typer.Option("--name", help="A name for the key (unique)")],
    read_only: Annotated[bool, typer.Option(
        "--read-only", help="The key may search and read, not change the store")] = False,
    as_json: JsonOption = False,
    *, store: StoreOptions,
) -> None:
    """Create an API key and print it (the only time it is shown)."""
    key, token = _with_kb(store, lambda kb: kb.keys.create(name, read_only=read_only),
                          create=True)
    if as_json:
        _print_json({**key.to_dict(), "key": token})
        return
    console.print(f"created {'read-only ' if key.read_only else ''}key {escape(key.name)}."
                  " Copy it now: it is not shown again.")
    print(token)


@keys_app.command("list")
@store_options
def keys_list(as_json: JsonOption = False, *, store: StoreOptions) -> None:
    """List the API keys (names and the start of each key, never the keys)."""
    keys = _with_kb(store, lambda kb: kb.keys.list())
    if as_json:
        _print_json([k.to_dict() for k in keys])
        return
    if not keys:
        console.print("no API keys: `surrealdocs serve` runs on loopback only")
        return
    table = Table(title="API keys")
    for column in ("name", "key starts", "access", "created", "last used"):
        table.add_column(column)
    for k in keys:
        table.add_row(escape(k.name), k.prefix + "…", "read-only" if k.read_only else
                      "read-write", _when(k.created), _when(k.last_used))
    console.print(table)


def _when(value: Any) -> str:
    iso = getattr(value, "isoformat", None)
    return str(iso(timespec="seconds")) if callable(iso) else ("-" if value is None else
                                                              str(value))


@keys_app.command("revoke")
@store_options
def keys_revoke(
    name: Annotated[str, typer.Argument(help="The key's name")],
    *, store: StoreOptions,
) -> None:
    """Revoke an API key: requests with it are refused from now on."""
    _with_kb(store, lambda kb: kb.keys.revoke(name))
    console.print(f"revoked key {escape(name)}")


# ----- evaluation ------------------------------------------------------------------------
@app.command("eval")
def eval_command(
    datasets: Annotated[list[Path] | None, typer.Argument(
        help="BEIR-layout directories: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv",
        show_default=False)] = None,
    split: Annotated[str, typer.Option(help="Which qrels/SPLIT.tsv to evaluate")] = "test",
    mode: Annotated[list[str] | None, typer.Option(
        "--mode", help=f"Modes to measure (repeatable) [default: {', '.join(EVAL_MODES)}]")
    ] = None,
    fusion: Annotated[str | None, typer.Option(
        help="Hybrid fusion: zscore, minmax or rrf [default: $SURREALDOCS_HYBRID_FUSION or zscore]")
    ] = None,
    candidates: Annotated[int | None, typer.Option(
        help="Hits per leg before hybrid fusion [default: 100]")] = None,
    text_weight: Annotated[float | None, typer.Option(help="Weight of the BM25 leg")] = None,
    vector_weight: Annotated[float | None, typer.Option(help="Weight of the vector leg")] = None,
    chunk_size: Annotated[int | None, typer.Option(help="Characters per chunk")] = None,
    where: WhereFilter = None,
    rerank: RerankOption = None,
    as_json: JsonOption = False,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Also write the figures as JSON to this file")] = None,
    db: Annotated[str | None, typer.Option(
        "--db", help="Store for the corpus, reused when it holds this dataset only; with"
                     " several datasets, a folder of one store per dataset [default: mem://]")
    ] = None,
    model: Annotated[str | None, typer.Option(
        "--model", help="Embedding model [default: $SURREALDOCS_MODEL or all-minilm-l6-v2]")
    ] = None,
    compare: Annotated[tuple[Path, Path] | None, typer.Option(
        "--compare", metavar="BEFORE.json AFTER.json",
        help="Compare two files written by eval -o (per dataset, mode and query); runs"
             " no evaluation")] = None,
    show_queries: Annotated[int, typer.Option(
        "--queries", min=0, help="With --compare: the queries that changed most, per"
                                 " dataset and mode")] = 5,
) -> None:
    """Measure retrieval quality on BEIR datasets: nDCG@10, Recall@100, MRR@10 per mode.

    Each corpus is ingested through the normal ingest path (title + text per document; a
    store given with the --db option that already holds it is reused); every judged query
    runs in each mode, one result per document. With several datasets, one table shows
    them all and their mean.
    """
    from ..core.evaluate import summary

    if compare is not None:
        _compare_figures(*compare, datasets, as_json=as_json, show_queries=show_queries)
        return
    if not datasets:
        _fail("give at least one dataset directory (or --compare BEFORE.json AFTER.json)")
    settings = Settings.from_env(
        db=db or "mem://", model=model, chunk_size=chunk_size, hybrid_fusion=fusion,
        hybrid_candidates=candidates, text_weight=text_weight, vector_weight=vector_weight)
    options: dict[str, Any] = {"where": _where(where), "rerank": rerank}
    reports = _evaluate_with_progress(datasets, settings, mode or EVAL_MODES, split, as_json,
                                      {k: v for k, v in options.items() if v is not None}
                                      or None)
    figures = reports[0].to_dict() if len(reports) == 1 else summary(reports)
    if output:
        output.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    if as_json:
        _print_json(figures)
        return
    _print_eval(reports, split)


def _evaluate_with_progress(datasets: list[Path], settings: Settings, modes: Sequence[str],
                            split: str, quiet: bool,
                            search_options: dict[str, Any] | None = None) -> list[Any]:
    from ..core.evaluate import evaluate_many

    progress = Progress(TextColumn("[bold]{task.fields[stage]}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                        disable=quiet or not err_console.is_terminal)
    task = progress.add_task("", total=None, stage="eval")
    current = ""

    def on_dataset(name: str) -> None:
        nonlocal current
        current = f"{name} " if len(datasets) > 1 else ""

    def on_progress(stage: str, done: int, total: int) -> None:
        progress.update(task, completed=done, total=total, stage=current + stage)

    async def work() -> Any:
        return await evaluate_many(datasets, settings=settings, modes=modes, split=split,
                                   on_progress=on_progress, on_dataset=on_dataset,
                                   search_options=search_options)

    with progress:
        reports: list[Any] = _run(work)
    return reports


def _print_eval(reports: list[Any], split: str) -> None:
    from ..core.evaluate import summary

    if len(reports) == 1:
        report = reports[0]
        title = (f"{escape(report.dataset)} ({escape(report.split)}): {report.queries}"
                 f" queries, {_count(report.documents, 'document')},"
                 f" {_count(report.chunks, 'chunk')}")
    else:
        title = f"{len(reports)} datasets ({escape(split)})"
    table = Table(title=title)
    several = len(reports) > 1
    columns = (["dataset"] if several else []) + [
        "mode", "nDCG@10", "Recall@100", "MRR@10", "time", "per query"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("dataset", "mode") else "right")
    for report in reports:
        for r in report.results:
            table.add_row(*([escape(report.dataset)] if several else []), r.mode,
                          f"{r.metrics['ndcg@10']:.4f}", f"{r.metrics['recall@100']:.4f}",
                          f"{r.metrics['mrr@10']:.4f}", f"{r.seconds:.1f} s",
                          f"{r.ms_per_query:.0f} ms")
        if several:
            table.add_section()
    if several:
        for m, values in summary(reports)["mean"].items():
            table.add_row("mean", m, f"{values['ndcg@10']:.4f}", f"{values['recall@100']:.4f}",
                          f"{values['mrr@10']:.4f}", "", "")
    console.print(table)
    for report in reports:
        s = report.settings
        console.print(
            f"{escape(report.dataset) + ': ' if several else ''}"
            f"ingest {report.ingest_seconds:.1f} s · model {s['model']} · chunks"
            f" {s['chunk_size']} chars · BM25({s['bm25_k1']}, {s['bm25_b']}) · vectors: "
            + (s["vector_index"] if s["vector_index"].startswith("exact") else
               f"HNSW M {s['hnsw_m']} EFC {s['hnsw_efc']} ef {s['hnsw_ef']}"
               f" ({s['vector_index']})")
            + f" · hybrid {s['hybrid_fusion']} over {s['hybrid_candidates']} per leg"
            " · ranking measured without the cut-off")


def _compare_figures(before_file: Path, after_file: Path, datasets: list[Path] | None, *,
                     as_json: bool, show_queries: int) -> None:
    from ..core.evaluate import compare, load_figures

    if datasets:
        _fail("--compare compares two figure files: give no datasets with it")

    try:
        before, after = load_figures(before_file), load_figures(after_file)
    except (OSError, ValueError) as exc:
        _fail(f"cannot read the figures: {exc}")
    except SurrealDocsError as exc:
        _fail(str(exc))
    differences = compare(before, after)
    if not differences:
        _fail(f"{before_file} and {after_file} share no dataset and mode to compare")
    if as_json:
        _print_json({"differences": [
            {"dataset": d.dataset, "mode": d.mode, "before": d.before, "after": d.after,
             "delta": {k: round(v, 4) for k, v in d.delta.items()},
             "improved": sum(new > old for _, old, new in d.queries),
             "worsened": sum(new < old for _, old, new in d.queries),
             "queries": [{"query": q, "before": old, "after": new}
                         for q, old, new in d.queries]}
            for d in differences]})
        return
    table = Table(title=f"{escape(before_file.name)} → {escape(after_file.name)}: after (change)")
    for column in ("dataset", "mode", "nDCG@10", "Recall@100", "MRR@10", "queries ±"):
        table.add_column(column, justify="left" if column in ("dataset", "mode") else "right",
                         no_wrap=column not in ("dataset", "queries ±"))
    for d in differences:
        cells = []
        for k in ("ndcg@10", "recall@100", "mrr@10"):
            delta = d.delta[k]
            colour = "green" if delta > 0 else "red" if delta < 0 else "dim"
            cells.append(f"{d.after[k]:.4f} [{colour}]{delta:+.4f}[/{colour}]")
        up = sum(new > old for _, old, new in d.queries)
        table.add_row(escape(d.dataset), d.mode, *cells, f"{up}/{len(d.queries) - up}")
    console.print(table)
    if show_queries:
        for d in differences:
            if not d.queries:
                continue
            shown = ", ".join(f"{escape(q)} {old:.2f}→{new:.2f}"
                              for q, old, new in d.queries[:show_queries])
            console.print(f"{escape(d.dataset)} {d.mode}: {shown}", soft_wrap=True)


def _reflow_help(typer_app: typer.Typer) -> None:
    """Give every command its docstring as help with each paragraph on one line: Typer keeps
    the docstring's line breaks after the first paragraph, and the terminal then breaks
    sentences mid-phrase."""
    for info in typer_app.registered_commands:
        doc = info.help or inspect.getdoc(info.callback) or ""
        info.help = "\n\n".join(" ".join(p.split()) for p in re.split(r"\n\s*\n", doc))
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _reflow_help(group.typer_instance)


_reflow_help(app)


def main() -> None:
    """Entry point. Exits with ``os._exit`` once output is flushed: the embedded engine's
    runtime can abort while the interpreter tears down, which would turn a finished,
    successful command into exit code 134."""
    code: int = 0
    try:
        app()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except SurrealDocsError as exc:  # raised outside a command's own handling
        err_console.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)
        code = 2
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
