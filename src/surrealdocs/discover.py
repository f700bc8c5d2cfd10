"""Finding the files to ingest: paths given by the user, directories expanded with a glob."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def discover(paths: Iterable[str | Path], glob: str = "**/*",
             include_hidden: bool = False) -> tuple[list[Path], list[tuple[str, str]]]:
    """Files named by ``paths`` (directories expanded with ``glob``), and the paths that
    could not be used, each with its reason."""
    found: list[Path] = []
    missing: list[tuple[str, str]] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            candidates = sorted(p for p in path.glob(glob) if p.is_file())
            if not include_hidden:
                candidates = [p for p in candidates
                              if not any(part.startswith(".") for part in
                                         p.relative_to(path).parts)]
        elif path.is_file():
            candidates = [path]
        else:
            reason = "no such file or directory" if not path.exists() else "not a regular file"
            missing.append((str(raw), reason))
            continue
        for p in candidates:
            resolved = p.resolve()
            if resolved not in seen:
                seen.add(resolved)
                found.append(resolved)
    return found, missing
