"""Command line: a thin face over :class:`surrealdocs.KnowledgeBase`."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .config import Settings
from .errors import SurrealDocsError
from .ingest import FileResult, IngestReport
from .kb import KnowledgeBase
from .notebook import Job, Note, Notebook, Notebooks, Source
from .notebook import NotFoundError as NotebookNotFound
from .search import MODES, Hit

EVAL_MODES = ("text", "vector", "hybrid")  # the order of surrealdocs.evaluate.EVAL_MODES

app = typer.Typer(
    help="Turn documents into a searchable knowledge base inside SurrealDB.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)
T = TypeVar("T")

DbOption = Annotated[str | None, typer.Option(
    "--db", help="Store: a path, surrealkv://PATH, mem://, ws(s)://HOST:PORT or http(s)://…"
                 " [default: $SURREALDOCS_DB or ./.surrealdocs/db]")]
ModelOption = Annotated[str | None, typer.Option(
    "--model", help="Embedding model [default: $SURREALDOCS_MODEL or all-minilm-l6-v2]")]
NamespaceOption = Annotated[str | None, typer.Option("--namespace", help="SurrealDB namespace")]
DatabaseOption = Annotated[str | None, typer.Option("--database", help="SurrealDB database")]
UserOption = Annotated[str | None, typer.Option("--user", help="User for a SurrealDB server")]
PasswordOption = Annotated[str | None, typer.Option(
    "--password", help="Password for a SurrealDB server [default: $SURREALDOCS_PASSWORD]")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for machines")]


def _settings(db: str | None, model: str | None, namespace: str | None, database: str | None,
              user: str | None, password: str | None, **more: Any) -> Settings:
    return Settings.from_env(db=db, model=model, namespace=namespace, database=database,
                             user=user, password=password, **more)


def _run(main: Callable[[], Awaitable[T]]) -> T:
    """Run the command's coroutine; a surrealdocs error becomes a message and exit code 2."""
    async def run() -> T:
        return await main()

    try:
        return asyncio.run(run())
    except SurrealDocsError as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from exc


def _with_kb(settings: Settings, work: Callable[[KnowledgeBase], Awaitable[T]]) -> T:
    async def main() -> T:
        async with await KnowledgeBase.open(settings=settings) as kb:
            return await work(kb)

    return _run(main)


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files and directories to ingest")],
    glob: Annotated[str, typer.Option(help="Pattern for files inside directories")] = "**/*",
    force: Annotated[bool, typer.Option(help="Re-extract files even if unchanged")] = False,
    retry_failed: Annotated[bool, typer.Option(
        help="Retry unchanged files that failed last time")] = False,
    chunk_size: Annotated[int | None, typer.Option(help="Characters per chunk")] = None,
    chunk_overlap: Annotated[int | None, typer.Option(help="Characters of overlap")] = None,
    as_json: JsonOption = False,
    db: DbOption = None, model: ModelOption = None, namespace: NamespaceOption = None,
    database: DatabaseOption = None, user: UserOption = None, password: PasswordOption = None,
) -> None:
    """Ingest files: extract, chunk, embed and store them; skip the ones already stored."""
    settings = _settings(db, model, namespace, database, user, password,
                         chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    progress = Progress(TextColumn("[bold]ingest"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("{task.description}"),
                        console=err_console, disable=as_json or not err_console.is_terminal)
    task = progress.add_task("", total=None)

    def on_result(result: FileResult) -> None:
        progress.update(task, advance=1, description=escape(Path(result.source).name[:40]))

    def on_discovered(n: int) -> None:
        progress.update(task, total=n)

    with progress:
        report = _with_kb(settings, lambda kb: kb.ingest(
            paths, glob=glob, force=force, retry_failed=retry_failed, on_result=on_result,
            on_discovered=on_discovered))
    if as_json:
        console.print_json(json.dumps(report.to_dict(), default=str))
    else:
        _print_report(report)
    raise typer.Exit(1 if report.counts["failed"] else 0)


def _print_report(report: IngestReport) -> None:
    counts = report.counts
    files = len(report.results)
    table = Table(title="Ingest summary", show_header=True)
    table.add_column("result")
    table.add_column("files", justify="right")
    labels = {"ingested": "ingested", "updated": "updated (content changed)",
              "unchanged": "skipped as unchanged", "duplicate": "duplicates (content stored)",
              "empty": "no text", "failed": "failed"}
    for status, label in labels.items():
        style = {"failed": "red", "empty": "yellow"}.get(status, "")
        table.add_row(f"[{style}]{label}[/]" if style else label, str(counts[status]))
    console.print(table)
    rate = files / report.seconds if report.seconds else 0.0
    console.print(
        f"{files} files, {report.chunks_written} chunks written in {report.seconds:.1f} s"
        f" ({rate:.1f} files/s)" + ("; vector index rebuilt" if report.index_rebuilt else ""))
    problems = report.failures
    if problems:
        ptable = Table(title="Files without a document", show_header=True)
        ptable.add_column("file", overflow="fold")
        ptable.add_column("outcome")
        ptable.add_column("reason", overflow="fold")
        for r in sorted(problems, key=lambda r: (r.status, r.source)):
            ptable.add_row(escape(r.source), r.status, escape(r.reason or ""))
        console.print(ptable)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for")],
    mode: Annotated[str, typer.Option(help=f"One of {', '.join(MODES)}")] = "hybrid",
    limit: Annotated[int, typer.Option("--limit", "-k", help="Number of hits")] = 10,
    min_score: Annotated[float | None, typer.Option(help="Drop hits scoring below this")] = None,
    source: Annotated[str | None, typer.Option(help="Only sources matching this glob")] = None,
    mime_type: Annotated[list[str] | None, typer.Option(
        "--mime-type", help="Only these MIME types (repeatable)")] = None,
    notebook: Annotated[str | None, typer.Option(
        "--notebook", help="Only sources in this notebook (name or id)")] = None,
    per_document: Annotated[bool, typer.Option(
        "--per-document", help="One hit per document: its best chunk")] = False,
    fusion: Annotated[str | None, typer.Option(
        help="Hybrid fusion: zscore, minmax or rrf [default: zscore]")] = None,
    candidates: Annotated[int | None, typer.Option(
        help="Hits per leg before hybrid fusion [default: 100]")] = None,
    text_weight: Annotated[float | None, typer.Option(help="Weight of the BM25 leg")] = None,
    vector_weight: Annotated[float | None, typer.Option(help="Weight of the vector leg")] = None,
    as_json: JsonOption = False,
    db: DbOption = None, model: ModelOption = None, namespace: NamespaceOption = None,
    database: DatabaseOption = None, user: UserOption = None, password: PasswordOption = None,
) -> None:
    """Search the stored chunks (hybrid by default; vector or BM25 text on request)."""
    settings = _settings(db, model, namespace, database, user, password)
    if notebook is not None:
        if source or mime_type:
            err_console.print("[red]error:[/red] --notebook cannot be combined with --source"
                              " or --mime-type")
            raise typer.Exit(2)

        async def scoped(nbs: Notebooks) -> list[Hit]:
            nb = await nbs.get_notebook(notebook)
            return await nbs.search(query, mode=mode, notebook_id=nb.id, limit=limit,
                                    min_score=min_score)

        hits = _with_notebooks(settings, scoped)
    else:
        hits = _with_kb(settings, lambda kb: kb.search(
            query, mode=mode, limit=limit, min_score=min_score, source=source,
            mime_type=mime_type or None, per_document=per_document, fusion=fusion,
            candidates=candidates, text_weight=text_weight, vector_weight=vector_weight))
    if as_json:
        console.print_json(json.dumps([h.to_dict() for h in hits], default=str))
        return
    if not hits:
        console.print("no hits")
        return
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
        snippet = " ".join(hit.content.split())[:200]
        table.add_row(str(n), f"{hit.score:.4f}{ranks}",
                      escape(hit.title or Path(hit.source).name) + f"\n[dim]{escape(hit.source)}"
                      f" [{hit.char_start}:{hit.char_end}][/dim]",
                      str(hit.page or ""), escape(snippet))
    console.print(table)


def _with_notebooks(settings: Settings, work: Callable[[Notebooks], Awaitable[T]]) -> T:
    async def main() -> T:
        async with await Notebooks.open(settings=settings, run_jobs=False) as nbs:
            return await work(nbs)

    return _run(main)


notebook_app = typer.Typer(help="Notebooks: named collections of sources, searchable alone.",
                           no_args_is_help=True)
app.add_typer(notebook_app, name="notebook")


@notebook_app.command("create")
def notebook_create(
    name: Annotated[str, typer.Argument(help="Notebook name (unique)")],
    description: Annotated[str, typer.Option(help="What it is for")] = "",
    db: DbOption = None, model: ModelOption = None, namespace: NamespaceOption = None,
    database: DatabaseOption = None, user: UserOption = None, password: PasswordOption = None,
) -> None:
    """Create a notebook."""
    settings = _settings(db, model, namespace, database, user, password)
    nb = _with_notebooks(settings, lambda nbs: nbs.create_notebook(name, description))
    console.print(f"created notebook {escape(nb.name)} ({nb.id})")


@notebook_app.command("list")
def notebook_list(
    as_json: JsonOption = False,
    db: DbOption = None, model: ModelOption = None, namespace: NamespaceOption = None,
    database: DatabaseOption = None, user: UserOption = None, password: PasswordOption = None,
) -> None:
    """List notebooks with their number of sources."""
    settings = _settings(db, model, namespace, database, user, password)

    async def work(nbs: Notebooks) -> list[tuple[Notebook, int]]:
        return [(nb, len(await nbs.sources(notebook=nb))) for nb in await nbs.list_notebooks()]

    rows = _with_notebooks(settings, work)
    if as_json:
        console.print_json(json.dumps([{"id": str(nb.id), "name": nb.name,
                                        "description": nb.description,
                                        "archived": nb.archived, "sources": n}
                                       for nb, n in rows]))
        return
    table = Table(title="Notebooks")
    for column in ("name", "sources", "description", "id"):
        table.add_column(column)
    for nb, n in rows:
        table.add_row(escape(nb.name) + (" [dim](archived)[/dim]" if nb.archived else ""),
                      str(n), escape(nb.description), str(nb.id))
    console.print(table)


@notebook_app.command("show")
def notebook_show(
    name: Annotated[str, typer.Argument(help="Notebook name or id")],
    as_json: JsonOption = False,
    db: DbOption = None, model: ModelOption = None, namespace: NamespaceOption = None,
    database: DatabaseOption = None, user: UserOption = None, password: PasswordOption = None,
) -> None:
    """Show a notebook's sources and notes."""
    settings = _settings(db, model, namespace, database, user, password)

    async def work(nbs: Notebooks) -> tuple[Notebook, list[Source], list[Note]]:
        nb = await nbs.get_notebook(name)
        return nb, await nbs.sources(notebook=nb), await nbs.notes(nb)

    nb, sources, notes = _with_notebooks(settings, work)
    if as_json:
        console.print_json(json.dumps({
            "id": str(nb.id), "name": nb.name, "description": nb.description,
            "sources": [{"id": str(s.id), "title": s.title, "chunks": s.chunk_count,
                         "topics": s.topics, "asset": s.asset} for s in sources],
            "notes": [{"id": str(n.id), "title": n.title} for n in notes]}, default=str))
        return
    console.print(f"[bold]{escape(nb.name)}[/bold] {escape(nb.description)} ({nb.id})")
    table = Table(title=f"{len(sources)} sources")
    for column in ("title", "chunks", "topics", "id"):
        table.add_column(column, overflow="fold")
    for src in sources:
        table.add_row(escape(src.title or ""), str(src.chunk_count),
                      escape(", ".join(src.topics)), str(src.id))
    console.print(table)
    for note in notes:
        console.print(f"note: {escape(note.title)}")


@notebook_app.command("delete")
def notebook_delete(
    name: Annotated[str, typer.Argument(help="Notebook name or id")],
    delete_sources: Annotated[bool, typer.Option(
        help="Also delete the sources that no other notebook references")] = False,
    db: DbOption = None, model: ModelOption = None, namespace: NamespaceOption = None,
    database: DatabaseOption = None, user: UserOption = None, password: PasswordOption = None,
) -> None:
    """Delete a notebook, its edges and notes (and, on request, its own sources)."""
    settings = _settings(db, model, namespace, database, user, password)
    _with_notebooks(settings, lambda nbs: nbs.delete_notebook(
        name, delete_exclusive_sources=delete_sources))
    console.print(f"deleted notebook {escape(name)}")


@app.command("add")
def add(
    notebook: Annotated[str, typer.Argument(help="Notebook name or id")],
    paths: Annotated[list[Path], typer.Argument(help="Files and directories to add")],
    glob: Annotated[str, typer.Option(help="Pattern for files inside directories")] = "**/*",
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", help="Topic to tag the sources with (repeatable)")] = None,
    as_json: JsonOption = False,
    db: DbOption = None, model: ModelOption = None, namespace: NamespaceOption = None,
    database: DatabaseOption = None, user: UserOption = None, password: PasswordOption = None,
) -> None:
    """Ingest files into a notebook (creating the notebook if it does not exist)."""
    settings = _settings(db, model, namespace, database, user, password)

    async def work(nbs: Notebooks) -> IngestReport:
        try:
            nb = await nbs.get_notebook(notebook)
        except NotebookNotFound:
            nb = await nbs.create_notebook(notebook)
        return await nbs.add_paths(nb, paths, topics=topic or (), glob=glob)

    report = _with_notebooks(settings, work)
    if as_json:
        console.print_json(json.dumps(report.to_dict(), default=str))
    else:
        _print_report(report)
    raise typer.Exit(1 if report.counts["failed"] else 0)


@app.command()
def jobs(
    status: Annotated[str | None, typer.Option(help="Only jobs with this status")] = None,
    run: Annotated[bool, typer.Option(help="Run the queued jobs now, then list")] = False,
    as_json: JsonOption = False,
    db: DbOption = None, model: ModelOption = None, namespace: NamespaceOption = None,
    database: DatabaseOption = None, user: UserOption = None, password: PasswordOption = None,
) -> None:
    """List background jobs (vectorize) with their status, progress and error."""
    settings = _settings(db, model, namespace, database, user, password)

    async def work(nbs: Notebooks) -> list[Job]:
        if run:
            await nbs.run_pending_jobs()
        return await nbs.jobs(status)

    rows = _with_notebooks(settings, work)
    if as_json:
        console.print_json(json.dumps([{"id": str(j.id), "kind": j.kind,
                                        "target": str(j.target), "status": j.status,
                                        "progress": j.progress, "error": j.error,
                                        "attempts": j.attempts} for j in rows]))
        return
    table = Table(title="Jobs")
    for column in ("id", "kind", "source", "status", "progress", "error"):
        table.add_column(column, overflow="fold")
    for j in rows:
        table.add_row(str(j.id), j.kind, str(j.target), j.status, f"{j.progress:.0%}",
                      escape(j.error or ""))
    console.print(table)


@app.command()
def stats(
    as_json: JsonOption = False,
    db: DbOption = None, model: ModelOption = None, namespace: NamespaceOption = None,
    database: DatabaseOption = None, user: UserOption = None, password: PasswordOption = None,
) -> None:
    """Show what the store holds."""
    settings = _settings(db, model, namespace, database, user, password)
    result = _with_kb(settings, lambda kb: kb.stats())
    if as_json:
        console.print_json(json.dumps(result.to_dict(), default=str))
        return
    table = Table(title="surrealdocs store", show_header=False)
    table.add_column("what")
    table.add_column("value", overflow="fold")
    table.add_row("store", result.url)
    table.add_row("schema version", str(result.schema_version))
    table.add_row("embedding model", f"{result.model} ({result.dimension} dimensions)")
    table.add_row("documents", str(result.documents))
    table.add_row("chunks", str(result.chunks))
    for status, n in sorted(result.sources.items()):
        table.add_row(f"sources {status}", str(n))
    for mime, n in sorted(result.mime_types.items(), key=lambda kv: -kv[1]):
        table.add_row(f"  {mime}", str(n))
    table.add_row("vectors not yet in the HNSW graph", str(result.vectors_outside_graph))
    console.print(table)


@app.command()
def delete(
    sources: Annotated[list[str], typer.Argument(help="Sources (paths or names) to forget")],
    db: DbOption = None, model: ModelOption = None, namespace: NamespaceOption = None,
    database: DatabaseOption = None, user: UserOption = None, password: PasswordOption = None,
) -> None:
    """Forget sources; a document goes when no source refers to it any more."""
    settings = _settings(db, model, namespace, database, user, password)

    async def work(kb: KnowledgeBase) -> list[bool]:
        return [await kb.delete(s) for s in sources]

    found = _with_kb(settings, work)
    for source, ok in zip(sources, found):
        console.print(f"{'deleted' if ok else 'not found'}: {escape(source)}")
    raise typer.Exit(0 if all(found) else 1)


@app.command("rebuild-index")
def rebuild_index(
    db: DbOption = None, model: ModelOption = None, namespace: NamespaceOption = None,
    database: DatabaseOption = None, user: UserOption = None, password: PasswordOption = None,
) -> None:
    """Build the HNSW graph over every stored vector (ingest does it after big loads)."""
    settings = _settings(db, model, namespace, database, user, password)
    _with_kb(settings, lambda kb: kb.rebuild_index())
    console.print("vector index rebuilt")


@app.command()
def reembed(
    model: Annotated[str, typer.Option("--model", help="The new embedding model")],
    db: DbOption = None, namespace: NamespaceOption = None,
    database: DatabaseOption = None, user: UserOption = None, password: PasswordOption = None,
) -> None:
    """Re-embed every chunk with another model and rebuild the vector index for it."""
    from .embed import get_embedder
    from .reembed import reembed as reembed_store

    settings = _settings(db, model, namespace, database, user, password)
    progress = Progress(TextColumn("[bold]reembed"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err_console,
                        disable=not err_console.is_terminal)
    task = progress.add_task("", total=None)
    with progress:
        n = _run(lambda: reembed_store(
            settings, get_embedder(model, settings),
            lambda done, total: progress.update(task, completed=done, total=total)))
    console.print(f"{n} chunks re-embedded with {model}")


@app.command("eval")
def eval_command(
    dataset: Annotated[Path, typer.Argument(
        help="A BEIR-layout directory: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv")],
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
    as_json: JsonOption = False,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Also write the figures as JSON to this file")] = None,
    db: Annotated[str | None, typer.Option(
        "--db", help="Store for the corpus; must be empty [default: mem://]")] = None,
    model: ModelOption = None,
) -> None:
    """Measure retrieval quality on a BEIR dataset: nDCG@10, Recall@100, MRR@10 per mode.

    The corpus is ingested into a fresh store through the normal ingest path (title + text
    per document); every judged query runs in each mode, one result per document.
    """
    from .evaluate import evaluate

    settings = Settings.from_env(
        db=db or "mem://", model=model, chunk_size=chunk_size, hybrid_fusion=fusion,
        hybrid_candidates=candidates, text_weight=text_weight, vector_weight=vector_weight)
    progress = Progress(TextColumn("[bold]{task.fields[stage]}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                        disable=as_json or not err_console.is_terminal)
    task = progress.add_task("", total=None, stage="eval")

    def on_progress(stage: str, done: int, total: int) -> None:
        progress.update(task, completed=done, total=total, stage=stage)

    try:
        with progress:
            report = asyncio.run(evaluate(dataset, settings=settings, modes=mode or EVAL_MODES,
                                          split=split, on_progress=on_progress))
    except SurrealDocsError as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from exc
    figures = report.to_dict()
    if output:
        output.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    if as_json:
        console.print_json(json.dumps(figures))
        return
    table = Table(title=f"{report.dataset} ({report.split}): {report.queries} queries, "
                        f"{report.documents} documents, {report.chunks} chunks")
    for column in ("mode", "nDCG@10", "Recall@100", "MRR@10", "time", "per query"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    for r in report.results:
        table.add_row(r.mode, f"{r.metrics['ndcg@10']:.4f}", f"{r.metrics['recall@100']:.4f}",
                      f"{r.metrics['mrr@10']:.4f}", f"{r.seconds:.1f} s",
                      f"{r.ms_per_query:.0f} ms")
    console.print(table)
    s = report.settings
    console.print(
        f"ingest {report.ingest_seconds:.1f} s · model {s['model']} · chunks {s['chunk_size']}"
        f" chars · BM25({s['bm25_k1']}, {s['bm25_b']}) · HNSW M {s['hnsw_m']} EFC"
        f" {s['hnsw_efc']} ef {s['hnsw_ef']} ({s['vector_index']}) · hybrid"
        f" {s['hybrid_fusion']} over {s['hybrid_candidates']} per leg")


def main() -> None:
    """Entry point. Exits with ``os._exit`` once output is flushed: the embedded engine's
    runtime can abort while the interpreter tears down, which would turn a finished,
    successful command into exit code 134."""
    code: int = 0
    try:
        app()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
