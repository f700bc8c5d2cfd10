"""Uploads: a multipart body streamed to disk, file by file, within the size limits.

Nothing is held in memory but the current chunk of the request: each file part is written
to the job's folder (``kb.ingest_jobs.new_folder()``) as it arrives. A file over the
per-file limit, or a body over the per-request limit, ends the upload with 413 and removes
what was written. Each file is named ``upload://`` + its name as sent (directories kept,
``..`` and empty segments dropped); on disk it is ``NNNN-<safe name>`` (the extension kept,
which extraction goes by).
"""

from __future__ import annotations

import email.message
import hashlib
import re
import shutil
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NoReturn

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

from .error_responses import ApiError

SOURCE_PREFIX = "upload://"
FIELDS = ("notebook", "topic", "topics", "force", "replace", "metadata")
MAX_FIELD_BYTES = 10_000
MAX_NAME_CHARS = 500
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class UploadedFile:
    name: str          # as sent
    source: str        # upload://name
    path: Path         # where it waits
    size: int = 0
    sha256: str = ""
    renamed_from: str | None = None  # the source it would have had, held by another file

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "source": self.source, "size": self.size}
        if self.renamed_from:
            out["renamed_from"] = self.renamed_from
        return out


@dataclass
class Upload:
    files: list[UploadedFile] = field(default_factory=list)
    fields: dict[str, list[str]] = field(default_factory=dict)


def source_name(filename: str) -> str:
    """``upload://`` + a file's name as sent, without ``..``, empty segments or control
    characters (a folder dropped in a browser sends ``folder/file.pdf``)."""
    cleaned = "".join(c for c in filename.replace("\\", "/")
                      if unicodedata.category(c)[0] != "C")
    parts = [p.strip() for p in cleaned.split("/")]
    parts = [p for p in parts if p and p not in (".", "..")]
    if not parts:
        raise ApiError(422, "invalid_parameter", f"a file has no usable name: {filename!r}")
    name = "/".join(parts)
    if len(name) > MAX_NAME_CHARS:
        raise ApiError(422, "invalid_parameter",
                       f"a file name is longer than {MAX_NAME_CHARS} characters")
    return SOURCE_PREFIX + name


def disk_name(index: int, source: str) -> str:
    base = source.rsplit("/", 1)[-1]
    stem, dot, ext = base.rpartition(".")
    if not dot:
        stem, ext = base, ""
    stem = _UNSAFE.sub("_", stem)[:80] or "file"
    ext = _UNSAFE.sub("_", ext)[:16]
    return f"{index:04d}-{stem}" + (f".{ext}" if ext else "")


async def receive(request: Request, folder: Path, *, max_file_bytes: int,
                  max_request_bytes: int, max_files: int) -> Upload:
    """Stream a ``multipart/form-data`` body into ``folder``. On any error the folder's
    files are removed (the folder too) and :class:`ApiError` is raised."""
    content_type = request.headers.get("content-type", "")
    kind, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise ApiError(415, "unsupported_media_type",
                       "send the files as multipart/form-data (curl -F file=@report.pdf)")
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_request_bytes:
        raise ApiError(413, "payload_too_large",
                       f"the request is {int(length)} bytes; the limit is {max_request_bytes}")
    state = _Parts(folder, max_file_bytes, max_files)
    parser = MultipartParser(boundary, state.callbacks())
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > max_request_bytes:
                raise ApiError(413, "payload_too_large",
                               f"the request is over the limit of {max_request_bytes} bytes")
            if chunk:
                parser.write(chunk)
            state.raise_error()
        parser.finalize()
        state.raise_error()
        if not state.ended:
            raise ApiError(422, "invalid_parameter", "the multipart body ends too early")
    except ClientDisconnect:
        state.discard()
        raise
    except MultipartParseError as exc:
        state.discard()
        raise ApiError(422, "invalid_parameter", f"malformed multipart body: {exc}") from exc
    except BaseException:
        state.discard()
        raise
    finally:
        state.close()
    if not state.upload.files:
        state.discard()
        raise ApiError(422, "invalid_parameter", "no files in the upload")
    return state.upload


def _filename(header: bytes, options: dict[bytes, bytes]) -> bytes | None:
    """A part's file name: RFC 2231's ``filename*=charset'lang'percent-encoded`` (preferred,
    as RFC 6266 says; the multipart parser leaves it out), else ``filename``; ``None`` for
    a form field."""
    if b"filename*" in header.lower():
        message = email.message.Message()
        message["content-disposition"] = header.decode("latin-1")
        try:
            name = message.get_filename()
        except (LookupError, UnicodeError, ValueError) as exc:
            raise ApiError(422, "invalid_parameter",
                           f"a file name (filename*) cannot be decoded: {exc}") from exc
        if name:
            return name.encode("utf-8", "replace")
    return options.get(b"filename")


class _Parts:
    """The parser's callbacks: one part at a time, files written as they come."""

    def __init__(self, folder: Path, max_file_bytes: int, max_files: int) -> None:
        self.folder, self.max_file_bytes, self.max_files = folder, max_file_bytes, max_files
        self.upload = Upload()
        self.error: ApiError | None = None
        self.ended = False
        self._headers: dict[bytes, bytes] = {}
        self._field, self._value = b"", b""
        self._file: UploadedFile | None = None
        self._out: IO[bytes] | None = None
        self._name: str | None = None
        self._data = bytearray()
        self._sources: set[str] = set()
        self._digest = hashlib.sha256()

    def callbacks(self) -> Any:
        return {"on_part_begin": self._begin, "on_part_data": self._data_cb,
                "on_part_end": self._end, "on_header_field": self._header_field,
                "on_header_value": self._header_value, "on_header_end": self._header_end,
                "on_headers_finished": self._headers_done, "on_end": self._all_done}

    def raise_error(self) -> None:
        if self.error is not None:
            raise self.error

    def _fail(self, error: ApiError) -> NoReturn:
        if self.error is None:
            self.error = error
        raise error  # stops the parser

    # headers of a part
    def _begin(self) -> None:
        self._headers, self._field, self._value = {}, b"", b""
        self._file, self._name, self._data = None, None, bytearray()

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._field += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._value += data[start:end]

    def _header_end(self) -> None:
        self._headers[self._field.lower()] = self._value
        self._field, self._value = b"", b""

    def _headers_done(self) -> None:
        _, options = parse_options_header(
            self._headers.get(b"content-disposition", b""))
        name = options.get(b"name", b"").decode("utf-8", "replace")
        try:
            filename = _filename(self._headers.get(b"content-disposition", b""), options)
        except ApiError as exc:
            self._fail(exc)
        if filename is None:
            if name not in FIELDS:
                self._fail(ApiError(422, "invalid_parameter",
                                    f"unexpected form field {name!r}: send files, and"
                                    f" optionally {', '.join(FIELDS)}"))
            self._name = name
            return
        if len(self.upload.files) >= self.max_files:
            self._fail(ApiError(413, "payload_too_large",
                                f"more than {self.max_files} files in one upload"))
        sent = filename.decode("utf-8", "replace")
        try:
            source = source_name(sent)
        except ApiError as exc:
            self._fail(exc)
        if source in self._sources:
            self._fail(ApiError(422, "invalid_parameter",
                                f"two files are named {source[len(SOURCE_PREFIX):]!r}"))
        self._sources.add(source)
        path = self.folder / disk_name(len(self.upload.files), source)
        self._file = UploadedFile(name=sent, source=source, path=path)
        self._digest = hashlib.sha256()
        self.upload.files.append(self._file)
        self._out = open(path, "wb")  # noqa: SIM115 - closed in _end or close()

    # the part's body
    def _data_cb(self, data: bytes, start: int, end: int) -> None:
        if self._file is not None and self._out is not None:
            self._file.size += end - start
            if self._file.size > self.max_file_bytes:
                self._fail(ApiError(413, "payload_too_large",
                                    f"{self._file.name!r} is over the limit of"
                                    f" {self.max_file_bytes} bytes per file"))
            self._out.write(data[start:end])
            self._digest.update(data[start:end])
        elif self._name is not None:
            self._data += data[start:end]
            if len(self._data) > MAX_FIELD_BYTES:
                self._fail(ApiError(413, "payload_too_large",
                                    f"form field {self._name!r} is over {MAX_FIELD_BYTES}"
                                    " bytes"))

    def _end(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
            if self._file is not None:
                self._file.sha256 = self._digest.hexdigest()
        elif self._name is not None:
            self.upload.fields.setdefault(self._name, []).append(
                self._data.decode("utf-8", "replace"))
        self._file, self._name = None, None

    def _all_done(self) -> None:
        self.ended = True

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def discard(self) -> None:
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)
