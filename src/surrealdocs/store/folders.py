"""Where a store keeps its files on disk: its engine folder, the uploads waiting for their
ingest job, and the marker a server leaves beside it. Ingest and sync keep out of them;
the uploads' jobs (:mod:`surrealdocs.core.ingest_jobs`) and the server put files there."""

from __future__ import annotations

from pathlib import Path

from ..config import DEFAULT_DIR, Settings
from ..errors import ConfigurationError
from .connection import resolve_url, store_path


def uploads_dir(settings: Settings) -> Path:
    """Where uploaded files wait for their ingest job: ``settings.uploads_dir``, else next
    to a file store (``<store path>.uploads``), else ``./.surrealdocs/uploads``."""
    if settings.uploads_dir:
        return Path(settings.uploads_dir).expanduser().resolve()
    store = store_folder(settings)
    if store is not None:
        return store.with_name(store.name + ".uploads")
    return (DEFAULT_DIR / "uploads").resolve()


def store_folder(settings: Settings) -> Path | None:
    """The folder of a file store (``None`` for memory and remote stores)."""
    return store_path(resolve_url(settings.db))


def own_folders(settings: Settings) -> list[Path]:
    """The store's own files (its engine folder, its uploads waiting for their job, the
    marker a server leaves beside it), which an ingest or sync of a folder around them must
    not take in."""
    store = store_folder(settings)
    if store is None:
        return [uploads_dir(settings)] if settings.uploads_dir else []
    return [store, uploads_dir(settings), store.with_name(store.name + ".serving")]


def check_uploads_dir(settings: Settings) -> Path:
    """The uploads directory, refused when it holds the store or lies inside it (an upload
    folder there could be taken for the store's files, or the store's for an upload's)."""
    root = uploads_dir(settings)
    store = store_folder(settings)
    if store is not None and (store == root or store.is_relative_to(root)
                              or root.is_relative_to(store)):
        where = "is the store's folder" if store == root else (
            "holds the store" if store.is_relative_to(root) else "lies inside the store")
        raise ConfigurationError(
            f"the uploads directory {root} {where} ({store}): choose a folder of its own"
            " (--uploads-dir, SURREALDOCS_UPLOADS_DIR), or leave it unset for"
            f" {store.name}.uploads next to the store")
    return root
