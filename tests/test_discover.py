"""Which files a folder yields: symbolic links, unreadable entries, FIFOs, globs."""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from surrealdocs import KnowledgeBase
from surrealdocs.parts.discover import discover, glob_regex


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def linked_folder(tmp_path: Path) -> tuple[Path, Path]:
    """``folder`` with links to files and directories inside and outside it."""
    folder, outside = tmp_path / "folder", tmp_path / "outside"
    write(folder / "a.md", "# A\n\nAbout albatrosses.")
    write(folder / "sub" / "b.md", "# B\n\nAbout bitterns.")
    write(outside / "secret.md", "# Secret\n\nAbout the neighbour's passwords.")
    write(outside / "more" / "c.md", "# C\n\nAbout cormorants.")
    (folder / "to-a.md").symlink_to(folder / "a.md")                 # inside: same file
    (folder / "sub" / "to-b.md").symlink_to("b.md")                  # relative, inside
    (folder / "secret.md").symlink_to(outside / "secret.md")         # outside
    (folder / "sub" / "escape.md").symlink_to("../../outside/secret.md")  # outside, relative
    (folder / "more").symlink_to(outside / "more")                   # a directory outside
    (folder / "again").symlink_to(folder / "sub")                    # a directory inside
    (folder / "loop").symlink_to(folder)                             # a loop up to the root
    (folder / "gone.md").symlink_to(tmp_path / "nowhere.md")         # broken
    return folder, outside


def test_links_out_of_the_folder_are_skipped_with_a_reason(
        linked_folder: tuple[Path, Path]) -> None:
    folder, outside = linked_folder
    files, problems = discover([folder])
    real = folder.resolve()
    assert files == [real / "a.md", real / "sub" / "b.md"]  # once each, under the real path
    assert all(f.is_relative_to(real) for f in files)
    by_name = {Path(p.source).name: p for p in problems}
    assert set(by_name) == {"secret.md", "escape.md", "more", "gone.md"}
    assert {p.status for p in problems} == {"skipped"}
    assert "outside" in by_name["secret.md"].reason
    assert str(outside.resolve() / "secret.md") in by_name["secret.md"].reason
    assert "outside" in by_name["escape.md"].reason
    assert "directory outside" in by_name["more"].reason
    assert "broken symbolic link" in by_name["gone.md"].reason


def test_a_link_named_by_the_user_is_followed(linked_folder: tuple[Path, Path]) -> None:
    folder, outside = linked_folder
    files, problems = discover([folder / "secret.md", folder / "more"])
    assert problems == []
    assert files == [(outside / "secret.md").resolve(), (outside / "more" / "c.md").resolve()]


async def test_ingesting_a_folder_stores_nothing_from_outside(
        kb: KnowledgeBase, linked_folder: tuple[Path, Path]) -> None:
    folder, _ = linked_folder
    report = await kb.ingest([folder])
    assert report.counts["ingested"] == 2 and report.counts["skipped"] == 4
    assert report.counts["failed"] == 0
    (sources,) = await kb.store.query("SELECT VALUE sources FROM documents;")
    flat = sorted(s for group in sources for s in group)
    assert flat == sorted(str(folder.resolve() / n) for n in ("a.md", "sub/b.md"))
    assert await kb.search("passwords", mode="text") == []


def test_fifos_are_never_opened(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    write(folder / "a.md", "# A\n\nText.")
    os.mkfifo(folder / "pipe.md")
    os.mkfifo(tmp_path / "named.md")
    files, problems = discover([folder, tmp_path / "named.md"])
    assert files == [(folder / "a.md").resolve()]
    by_name = {Path(p.source).name: p for p in problems}
    assert by_name["pipe.md"].status == "skipped" and "FIFO" in by_name["pipe.md"].reason
    assert by_name["named.md"].status == "failed" and "FIFO" in by_name["named.md"].reason


def test_a_path_through_a_file_fails_alone(tmp_path: Path) -> None:
    f = write(tmp_path / "a.md", "# A\n\nText.")
    files, problems = discover([tmp_path / "a.md" / "x.md", f])
    assert files == [f.resolve()]
    assert [(p.status, p.reason) for p in problems] == [
        ("failed", "no such file or directory (a part of the path is not a directory)")]


@pytest.fixture
def denied(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, Path]]:
    """A folder where one directory cannot be listed and one file cannot be examined, as
    for a user without permission; made by refusing those calls, so that it works as root
    (which permissions do not stop) too."""
    folder = tmp_path / "folder"
    paths = {
        "good": write(folder / "good.md", "# Good\n\nAbout kingfishers."),
        "locked_dir": folder / "locked",
        "hidden_from_stat": write(folder / "nostat.md", "# No stat\n\nAbout herons."),
        "other": write(tmp_path / "other.md", "# Other\n\nAbout puffins."),
        "folder": folder,
    }
    write(paths["locked_dir"] / "inside.md", "# Inside\n\nAbout grebes.")
    real_scandir, real_stat = os.scandir, Path.stat

    def scandir(path: Any = ".") -> Any:
        if Path(path) == paths["locked_dir"]:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_scandir(path)

    def path_stat(self: Path, *, follow_symlinks: bool = True) -> os.stat_result:
        if self.name == "nostat.md":
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_stat(self, follow_symlinks=follow_symlinks)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(Path, "stat", path_stat)
    yield paths


def test_unreadable_entries_fail_alone(denied: dict[str, Path]) -> None:
    files, problems = discover([denied["folder"], denied["other"]])
    assert files == [denied["good"].resolve(), denied["other"].resolve()]
    by_name = {Path(p.source).name: p for p in problems}
    assert set(by_name) == {"locked", "nostat.md"}
    assert all(p.status == "failed" and "Permission denied" in p.reason
               for p in problems), problems


async def test_unreadable_entries_do_not_stop_the_batch(kb: KnowledgeBase,
                                                        denied: dict[str, Path]) -> None:
    report = await kb.ingest([denied["folder"], denied["other"]])
    by_name = {Path(r.source).name: r for r in report.results}
    assert by_name["good.md"].status == by_name["other.md"].status == "ingested"
    assert by_name["locked"].status == by_name["nostat.md"].status == "failed"
    assert "Permission denied" in (by_name["locked"].reason or "")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads anything: permissions do not apply")
def test_real_permissions(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    write(folder / "good.md", "# Good\n\nText.")
    write(folder / "locked" / "a.md", "# A\n\nText.")
    write(folder / "listable" / "b.md", "# B\n\nText.")  # listed, entries not reachable
    write(folder / "deep" / "inner" / "c.md", "# C\n\nText.")
    write(tmp_path / "closed" / "d.md", "# D\n\nText.")
    (folder / "locked").chmod(0)
    (folder / "listable").chmod(0o644)
    (folder / "deep" / "inner").chmod(0)
    (tmp_path / "closed").chmod(0)
    try:
        files, problems = discover([folder, tmp_path / "closed", tmp_path / "closed" / "d.md"])
    finally:
        for d in (folder / "locked", folder / "listable", folder / "deep" / "inner",
                  tmp_path / "closed"):
            d.chmod(0o755)
    assert files == [(folder / "good.md").resolve()]
    by_name = {Path(p.source).name: p for p in problems}
    assert set(by_name) == {"locked", "b.md", "inner", "closed", "d.md"}, problems
    assert all(p.status == "failed" and "Permission denied" in p.reason for p in problems)


async def test_many_paths_with_one_unreadable_land(kb: KnowledgeBase, tmp_path: Path) -> None:
    """A folder ingested while one of its files is a FIFO: nothing waits on it."""
    folder = tmp_path / "folder"
    write(folder / "a.md", "# A\n\nAbout avocets.")
    os.mkfifo(folder / "b.md")
    report = await asyncio.wait_for(kb.ingest([folder]), timeout=60)
    assert report.counts["ingested"] == 1 and report.counts["skipped"] == 1


@pytest.mark.parametrize("glob,matches,misses", [
    ("**/*", ["a.md", "x/y/b.pdf"], []),
    ("**/*.md", ["a.md", "x/y/a.md"], ["a.pdf", "a.md/x"]),
    ("*.md", ["a.md"], ["x/a.md"]),
    ("x/**/*.md", ["x/a.md", "x/y/a.md"], ["a.md", "y/x/a.md"]),
    ("report-?.[pt][dx][ft]", ["report-1.pdf", "report-2.txt"], ["report-10.pdf"]),
    ("[!a]*", ["b.md"], ["a.md"]),
    ("**", ["a.md", "x/y/z"], []),
])
def test_glob_has_pathlib_meaning(glob: str, matches: list[str], misses: list[str]) -> None:
    rx = glob_regex(glob)
    assert all(rx.fullmatch(m) for m in matches)
    assert not any(rx.fullmatch(m) for m in misses)


def test_glob_agrees_with_pathlib(tmp_path: Path) -> None:
    for rel in ("a.md", "b.pdf", "x/c.md", "x/y/d.md", "x/y/e.txt", "z/f.md"):
        write(tmp_path / rel, "text")
    for glob in ("**/*", "**/*.md", "*.md", "x/**/*.md", "x/*", "*/*.md", "?/*.md"):
        ours, _ = discover([tmp_path], glob)
        theirs = sorted(p.resolve() for p in tmp_path.glob(glob) if p.is_file())
        assert ours == theirs, glob


# ----- a link swapped in between discovery and the read --------------------------------
def swap_for_link(path: Path, target: Path) -> None:
    path.unlink() if not path.is_dir() else os.rename(path, path.with_name(path.name + ".old"))
    path.symlink_to(target)


@pytest.fixture
def swapped(tmp_path: Path) -> dict[str, Path]:
    folder, outside = tmp_path / "folder", tmp_path / "outside"
    write(folder / "a.md", "# A\n\nAbout avocets.")
    write(folder / "sub" / "b.md", "# B\n\nAbout bitterns.")
    write(folder / "c.md", "# C\n\nAbout cormorants.")
    write(outside / "secret.md", "# Secret\n\nThe passwords are here.")
    write(outside / "sub" / "b.md", "# Also secret\n\nMore passwords.")
    return {"folder": folder, "outside": outside}


async def test_a_file_swapped_for_a_link_after_discovery_is_not_read(
        kb: KnowledgeBase, swapped: dict[str, Path]) -> None:
    folder, outside = swapped["folder"], swapped["outside"]

    def swap(_: int) -> None:  # called after discovery, before any file is read
        swap_for_link(folder / "a.md", outside / "secret.md")
        swap_for_link(folder / "sub", outside / "sub")

    report = await kb.ingest([folder], on_discovered=swap)
    by_name = {Path(r.source).name: r for r in report.results}
    assert by_name["c.md"].status == "ingested"
    assert by_name["a.md"].status == by_name["b.md"].status == "failed", report.results
    assert "symbolic link" in (by_name["a.md"].reason or "")
    assert "link" in (by_name["b.md"].reason or "")
    assert await kb.search("passwords", mode="text") == []
    assert len(await kb.search("cormorants", mode="text")) == 1


async def test_sync_does_not_read_a_link_swapped_in(kb: KnowledgeBase,
                                                    swapped: dict[str, Path]) -> None:
    folder, outside = swapped["folder"], swapped["outside"]
    assert (await kb.sync([folder])).counts["ingested"] == 3
    write(folder / "a.md", "# A\n\nAbout avocets, edited.")
    os.utime(folder / "a.md", (1, 1))

    def swap(_: int) -> None:
        swap_for_link(folder / "a.md", outside / "secret.md")

    report = await kb.sync([folder], on_discovered=swap)
    assert [r.status for r in report.results if Path(r.source).name == "a.md"] == ["failed"]
    assert await kb.search("passwords", mode="text") == []


def test_open_found_refuses_what_discovery_did_not_see(swapped: dict[str, Path]) -> None:
    from surrealdocs.parts.discover import ReplacedFile, read_found

    folder, outside = swapped["folder"], swapped["outside"]
    (found,), _ = discover([folder / "a.md"])
    assert read_found(found, 10_000)[1] == b"# A\n\nAbout avocets."
    assert read_found(found, 5)[1] is None  # over the limit: not read
    swap_for_link(found, outside / "secret.md")
    with pytest.raises(ReplacedFile, match="symbolic link"):
        read_found(found, 10_000)
    found.unlink()
    os.mkfifo(found)  # never opened for a read that would wait
    with pytest.raises(ReplacedFile, match="regular file"):
        read_found(found, 10_000)


async def test_a_folder_holding_the_store_does_not_ingest_the_store(tmp_path: Path) -> None:
    """`surrealdocs sync .` with `--db ./kb`: the engine's own files were ingested (and
    failed, as binary) beside the user's."""
    from surrealdocs import Settings

    write(tmp_path / "notes.md", "# Notes\n\nAbout wrens.")
    settings = Settings(db=str(tmp_path / "kb"), model="hashing-64",
                        uploads_dir=str(tmp_path / "uploads"))
    (tmp_path / "uploads").mkdir()
    write(tmp_path / "uploads" / "waiting.md", "# Waiting\n\nAn upload not yet ingested.")
    async with await KnowledgeBase.open(settings=settings) as kb:
        for run in (lambda: kb.ingest([tmp_path]), lambda: kb.sync([tmp_path]),
                    lambda: kb.ingest([tmp_path / "kb"])):
            report = await run()
            taken = [r.source for r in report.results if r.status not in ("skipped",)]
            assert [Path(s).name for s in taken] == ["notes.md"] or taken == [], taken
            assert report.counts["failed"] == 0, report.results
        skipped = [r for r in report.results if r.status == "skipped"]
        assert skipped and "store's own files" in (skipped[0].reason or "")
        assert (await kb.stats()).documents == 1
