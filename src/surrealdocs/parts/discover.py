"""Finding the files to ingest: paths given by the user, directories expanded with a glob.

What a directory yields, and what it does not:

- Regular files whose path relative to the directory matches the glob (``**`` matches any
  number of directories, ``*`` and ``?`` stay within one name); hidden files and directories
  (a name starting with ``.``) only with ``include_hidden``.
- A symbolic link found inside the directory is followed only when its target lies inside
  the same directory, and that file is then ingested once, under its real path. A link that
  leads outside (to a file or a directory), a broken link or a link loop is *skipped* with
  its reason: ingesting a folder never pulls in files from elsewhere. Linked directories are
  never descended into (their files inside the folder are found under their real path).
- A path named by the user is used as given, even when it is a link leading elsewhere.
- Anything that cannot be read (a directory without permission, a path whose component is a
  file, a file that cannot be examined) fails alone with its reason, and so do named paths
  that are not regular files (a FIFO, a device), which are never opened: the rest of the
  batch goes on. FIFOs, sockets and devices met inside a directory are skipped.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

OWN_FILES = "the store's own files: not ingested"


class _Own:
    """The folders whose files are never ingested (a store's own)."""

    def __init__(self, folders: Iterable[Path]) -> None:
        self.folders = [Path(os.path.realpath(f)) for f in folders]

    def holds(self, path: Path) -> bool:
        if not self.folders:
            return False
        real = Path(os.path.realpath(path))
        return any(real == f or real.is_relative_to(f) for f in self.folders)


class Problem(NamedTuple):
    """A path that yields no file to ingest. ``status`` is ``failed`` (it could not be
    used) or ``skipped`` (left out on purpose, such as a link leading out of the folder)."""

    source: str
    reason: str
    status: str = "failed"


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def failed(self) -> list[Problem]:
        return [p for p in self.problems if p.status == "failed"]

    @property
    def skipped(self) -> list[Problem]:
        return [p for p in self.problems if p.status == "skipped"]


def discover(paths: Iterable[str | Path], glob: str = "**/*", include_hidden: bool = False,
             exclude: Iterable[Path] = ()) -> tuple[list[Path], list[Problem]]:
    """Files named by ``paths`` (directories expanded with ``glob``), and the paths that gave
    no file, each with its reason and status (see :class:`Problem`). Nothing inside the
    folders ``exclude`` (the store's own files) is taken: they are skipped with a reason."""
    found = discover_paths(paths, glob, include_hidden, exclude)
    return found.files, found.problems


def discover_paths(paths: Iterable[str | Path], glob: str = "**/*",
                   include_hidden: bool = False, exclude: Iterable[Path] = ()) -> Discovery:
    out = Discovery()
    seen: set[Path] = set()
    own = _Own(exclude)
    pattern: re.Pattern[str] | None = None
    for raw in paths:
        path = Path(raw).expanduser()
        try:
            info = path.stat()  # follows a link the user named
        except OSError as exc:
            out.problems.append(Problem(str(raw), os_reason(exc)))
            continue
        if own.holds(path):
            out.problems.append(Problem(str(raw), OWN_FILES, "skipped"))
            continue
        if stat.S_ISDIR(info.st_mode):
            if pattern is None:
                try:
                    pattern = glob_regex(glob)
                except ValueError as exc:
                    out.problems.append(Problem(str(raw), str(exc)))
                    continue
            _walk(path, pattern, include_hidden, out, seen, own)
        elif stat.S_ISREG(info.st_mode):
            _add(path.resolve(), out, seen)
        else:
            out.problems.append(Problem(str(raw), f"not a regular file ({_kind(info.st_mode)})"))
    return out


def _add(resolved: Path, out: Discovery, seen: set[Path]) -> None:
    if resolved not in seen:
        seen.add(resolved)
        out.files.append(resolved)


def _walk(root: Path, pattern: re.Pattern[str], include_hidden: bool, out: Discovery,
          seen: set[Path], own: _Own) -> None:
    root = Path(os.path.abspath(root))  # entries are reported by absolute path, unresolved
    real_root = root.resolve()
    matched: list[Path] = []

    def unreadable(exc: OSError) -> None:
        where = exc.filename if exc.filename is not None else str(root)
        out.problems.append(Problem(str(where), f"cannot read directory: {os_reason(exc)}"))

    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable):
        here = Path(dirpath)
        rel_dir = here.relative_to(root)
        descend = []
        for name in sorted(dirnames):
            if not include_hidden and name.startswith("."):
                continue
            full = here / name
            if own.holds(full):
                out.problems.append(Problem(str(full), OWN_FILES, "skipped"))
                continue
            try:
                linked = full.is_symlink()
            except OSError as exc:
                out.problems.append(Problem(str(full), f"cannot read: {os_reason(exc)}"))
                continue
            if not linked:
                descend.append(name)
                continue
            target = _link_target(full)
            if isinstance(target, str):
                out.problems.append(Problem(str(full), target, "skipped"))
            elif not target.is_relative_to(real_root):
                out.problems.append(Problem(
                    str(full), f"symbolic link to a directory outside {root} ({target}): "
                    "not followed", "skipped"))
            # a link to a directory inside the folder: its files are found where they are
        dirnames[:] = descend
        for name in sorted(filenames):
            if not include_hidden and name.startswith("."):
                continue
            if not pattern.fullmatch((rel_dir / name).as_posix()):
                continue
            _consider(here / name, root, real_root, out, matched)
    for path in sorted(matched):
        _add(path, out, seen)


def _consider(full: Path, root: Path, real_root: Path, out: Discovery,
              matched: list[Path]) -> None:
    """One entry of a directory listing that matched the glob."""
    try:
        info = full.lstat()
    except OSError as exc:
        out.problems.append(Problem(str(full), f"cannot read: {os_reason(exc)}"))
        return
    if stat.S_ISLNK(info.st_mode):
        target = _link_target(full)
        if isinstance(target, str):
            out.problems.append(Problem(str(full), target, "skipped"))
            return
        if not target.is_relative_to(real_root):
            out.problems.append(Problem(
                str(full), f"symbolic link to {target}, outside {root}: not followed",
                "skipped"))
            return
        try:
            info = target.stat()
        except OSError as exc:
            out.problems.append(Problem(str(full), f"cannot read: {os_reason(exc)}"))
            return
        if stat.S_ISDIR(info.st_mode):
            return  # a link to a directory inside the folder: found where it is
        full = target
    if not stat.S_ISREG(info.st_mode):
        out.problems.append(Problem(str(full), f"not a regular file ({_kind(info.st_mode)})",
                                    "skipped"))
        return
    matched.append(full.resolve())


def _link_target(link: Path) -> Path | str:
    """Where a symbolic link leads, or why it leads nowhere."""
    try:
        return link.resolve(strict=True)
    except FileNotFoundError:
        return f"broken symbolic link (to {os.readlink(link)})"
    except RuntimeError:  # Python < 3.13 reports a loop this way
        return "symbolic link loop"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symbolic link loop"
        return f"cannot read: {os_reason(exc)}"


def os_reason(exc: OSError) -> str:
    """A short reason for an error of the operating system, for a person."""
    if exc.errno == errno.ENOENT:
        return "no such file or directory"
    if exc.errno == errno.ENOTDIR:
        return "no such file or directory (a part of the path is not a directory)"
    return exc.strerror or str(exc)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a file"


def glob_regex(glob: str) -> re.Pattern[str]:
    """A regular expression matching the relative POSIX paths that ``glob`` matches, with
    :meth:`pathlib.Path.glob`'s meaning: ``**`` is any number of directories (a final ``**``
    anything below), ``*`` any characters within one name, ``?`` one, ``[...]`` a set."""
    if not glob or glob.startswith("/"):
        raise ValueError(f"the glob must be a relative pattern, got {glob!r}")
    parts = [p for p in glob.split("/") if p not in ("", ".")]
    regex = ""
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            regex += ".*" if last else "(?:[^/]+/)*"
        else:
            regex += _name_regex(part) + ("" if last else "/")
    return re.compile(regex, re.DOTALL)


def _name_regex(part: str) -> str:
    out, i = "", 0
    while i < len(part):
        ch = part[i]
        if ch == "*":
            out += "[^/]*"
        elif ch == "?":
            out += "[^/]"
        elif ch == "[":
            j = i + 1
            j += part[j:j + 1] == "!"
            j += part[j:j + 1] == "]"  # a "]" first is a member of the set
            end = part.find("]", j)
            if end < 0:
                out += re.escape(ch)
            else:
                body = part[i + 1:end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out += "[" + body.replace("\\", "\\\\") + "]"
                i = end
        else:
            out += re.escape(ch)
        i += 1
    return out


class ReplacedFile(OSError):
    """The path no longer names the file that was found there (a link swapped in)."""


def open_found(path: Path) -> int:
    """Open a found file (an absolute path without links) for reading, without following a
    link that was put in its place since, and check that what was opened is that path: a
    file swapped for a link (or a folder on its way swapped for a link to elsewhere) is
    refused with :class:`ReplacedFile`, never read. Returns the descriptor."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ReplacedFile(errno.ELOOP, "replaced by a symbolic link after it was found:"
                               " not read", str(path)) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ReplacedFile(errno.EINVAL, f"no longer a regular file ({_kind(info.st_mode)})"
                               ": not read", str(path))
        if _opened_path(fd, path) != os.path.abspath(path):
            raise ReplacedFile(errno.EXDEV, "a folder on its path was replaced by a link after"
                               " it was found: not read", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _opened_path(fd: int, path: Path) -> str:
    """The path of what ``fd`` is open on (``/proc`` on Linux; elsewhere the path's own
    real path, checked to be the same file)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = os.path.realpath(path)
        same = os.path.samestat(os.fstat(fd), os.stat(real))
        return real if same else ""


def read_found(path: Path, max_bytes: int) -> tuple[os.stat_result, bytes | None]:
    """A found file's status and bytes, read through :func:`open_found` (``None`` for the
    bytes when the file is over ``max_bytes``: it is not read)."""
    fd = open_found(path)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if info.st_size > max_bytes:
            return info, None
        return info, f.read(max_bytes + 1)
