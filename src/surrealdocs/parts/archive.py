"""The archive format of an exported knowledge base (docs/archive.md): a tar file whose first
member is ``manifest.json`` (format version, layout, model, and each part's row count, size
and SHA-256), then one gzipped JSON-lines part per table and the vectors as little-endian
float arrays. Standard tools read it: ``tar -xOf kb.tar manifest.json``,
``tar -xOf kb.tar documents.jsonl.gz | zcat | head``.

Values that JSON lacks are tagged objects: ``{"$record": [role, id]}`` (a link to a row of
another part, named by its role, not its table), ``{"$datetime": "…Z"}`` (nine fractional
digits), ``{"$vector": n}`` (row ``n`` of the vectors part), ``{"$bytes": base64}``, and
``{"$object": {...}}`` for a plain object whose only key starts with ``$``.

Writing never holds more than a batch: parts are written to a temporary folder, then the
archive is streamed. Reading checks everything (member names and types, sizes, checksums,
line lengths, row counts, tagged values) before a caller writes anything.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import numpy as np
from surrealdb import RecordID
from surrealdb.data.types.datetime import PreciseDatetime

from ..errors import ArchiveError

FORMAT = "surrealdocs-archive"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 1 << 20
MAX_PARTS = 64
MAX_LINE_BYTES = 256 << 20  # one row (a document's whole text) at most
MAX_RATIO = 1100  # gzip cannot shrink data more than about 1032:1
_PART_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}\.(jsonl\.gz|f32|f64)\Z")
_ROLE = re.compile(r"^[a-z][a-z0-9_]{0,63}\Z")
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
_COPY_CHUNK = 1 << 20


def _digest_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_COPY_CHUNK):
            digest.update(block)
    return digest.hexdigest()


# ----- values ---------------------------------------------------------------------------
class VectorRef(int):
    """A row of the vectors part, in place of the vector in a row (``{"$vector": n}``)."""


def encode(value: Any, role_of: Callable[[str], str]) -> Any:
    """A stored value as JSON (see the module); ``role_of`` names a table's role."""
    if isinstance(value, VectorRef):
        return {"$vector": int(value)}
    if isinstance(value, RecordID):
        return {"$record": [role_of(value.table_name), _plain(value.id)]}
    if isinstance(value, datetime):
        return {"$datetime": _iso(value)}
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        out = {str(k): encode(v, role_of) for k, v in value.items()}
        if len(out) == 1 and next(iter(out)).startswith("$"):
            return {"$object": out}
        return out
    if isinstance(value, (list, tuple)):
        return [encode(v, role_of) for v in value]
    return value


def _plain(key: Any) -> Any:
    if isinstance(key, (list, tuple)):
        return [_plain(k) for k in key]
    if isinstance(key, (str, int)):
        return key
    raise ArchiveError(f"a record id of an unsupported kind: {key!r}")


def _iso(value: datetime) -> str:
    moment = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
    utc = moment.astimezone(timezone.utc)
    nanos = getattr(value, "nanosecond", 0)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond:06d}{nanos:03d}Z"


def decode(value: Any, table_of: Callable[[str], str], vector: Callable[[int], Any]) -> Any:
    """The stored value of a JSON value (see :func:`encode`); ``table_of`` names a role's
    table in the target, ``vector(n)`` reads row ``n`` of the vectors part. Raises
    :class:`ArchiveError` on a tag it does not know or a malformed one."""
    if isinstance(value, list):
        return [decode(v, table_of, vector) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((tag, inner),) = value.items()
        if tag.startswith("$"):
            return _tagged(tag, inner, table_of, vector)
    return {k: decode(v, table_of, vector) for k, v in value.items()}


def _tagged(tag: str, inner: Any, table_of: Callable[[str], str],
            vector: Callable[[int], Any]) -> Any:
    if tag == "$record" and isinstance(inner, list) and len(inner) == 2 \
            and isinstance(inner[0], str) and _valid_key(inner[1]):
        return RecordID(table_of(inner[0]), inner[1])
    if tag == "$datetime" and isinstance(inner, str):
        return _datetime(inner)
    if tag == "$vector" and isinstance(inner, int) and not isinstance(inner, bool):
        return vector(inner)
    if tag == "$bytes" and isinstance(inner, str):
        try:
            return base64.b64decode(inner, validate=True)
        except ValueError as exc:
            raise ArchiveError("a $bytes value is not base64") from exc
    if tag == "$object" and isinstance(inner, dict):
        return {k: decode(v, table_of, vector) for k, v in inner.items()}
    raise ArchiveError(f"a value tagged {tag[:40]!r} that this format does not know")


def _valid_key(key: Any) -> bool:
    if isinstance(key, str):
        return 0 < len(key) <= 4096
    if isinstance(key, int) and not isinstance(key, bool):
        return True
    return isinstance(key, list) and 0 < len(key) <= 16 and all(_valid_key(k) for k in key)


_DATETIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{9})Z\Z")


def _datetime(text: str) -> PreciseDatetime:
    match = _DATETIME.match(text)
    if match is None:
        raise ArchiveError(f"a $datetime value that is not a UTC time: {text[:40]!r}")
    try:
        base = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S")
    except ValueError as exc:
        raise ArchiveError(f"a $datetime value that is not a time: {text[:40]!r}") from exc
    nanos = int(match.group(2))
    return PreciseDatetime(base.year, base.month, base.day, base.hour, base.minute,
                           base.second, nanos // 1000, tzinfo=timezone.utc,
                           nanosecond=nanos % 1000)


# ----- writing --------------------------------------------------------------------------
@dataclass
class Part:
    """One member of the archive, as the manifest describes it."""

    name: str
    kind: str  # "rows" or "vectors"
    role: str
    rows: int = 0
    bytes: int = 0
    raw_bytes: int = 0  # rows: the uncompressed size
    sha256: str = ""
    dimension: int | None = None  # vectors
    dtype: str | None = None  # vectors: "<f4" or "<f8"

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


class _RowsWriter:
    def __init__(self, path: Path, part: Part) -> None:
        self.path = path
        self.part = part
        self._fh = gzip.open(path, "wb", compresslevel=1)  # noqa: SIM115 (closed in close)

    def write(self, rows: list[dict[str, Any]], role_of: Callable[[str], str]) -> None:
        lines = b"".join(json.dumps(encode(r, role_of), ensure_ascii=False,
                                    separators=(",", ":")).encode("utf-8") + b"\n"
                         for r in rows)
        self._fh.write(lines)
        self.part.rows += len(rows)
        self.part.raw_bytes += len(lines)

    def close(self) -> None:
        self._fh.close()


class _VectorsWriter:
    """Vectors as float32 while every value is one exactly; a value that is not turns the
    part into float64 (rewriting what was written), so that no vector loses a bit."""

    def __init__(self, path: Path, part: Part, dimension: int) -> None:
        self.path = path
        self.part = part
        self.part.dimension = dimension
        self.part.dtype = "<f4"
        self._fh = path.open("wb")

    def add(self, vectors: list[list[float]]) -> int:
        """Append vectors; returns the row number of the first."""
        first = self.part.rows
        array = np.asarray(vectors, dtype="<f8").reshape(len(vectors), -1)
        if array.shape[1] != self.part.dimension:
            raise ArchiveError(f"a vector of {array.shape[1]} dimensions in a store of "
                               f"{self.part.dimension}")
        if self.part.dtype == "<f4":
            narrow = array.astype("<f4")
            if np.array_equal(narrow.astype("<f8"), array, equal_nan=True):
                self._fh.write(narrow.tobytes())
                self.part.rows += len(vectors)
                return first
            self._widen()
        self._fh.write(array.tobytes())
        self.part.rows += len(vectors)
        return first

    def _widen(self) -> None:
        self._fh.close()
        old = np.fromfile(self.path, dtype="<f4").astype("<f8")
        old.tofile(self.path)
        self.part.dtype = "<f8"
        self.part.name = self.part.name.rsplit(".", 1)[0] + ".f64"
        self._fh = self.path.open("ab")

    def close(self) -> None:
        self._fh.close()


class ArchiveWriter:
    """Builds an archive: rows and vectors go to parts in a temporary folder;
    :meth:`write_to` streams the manifest and the parts into a binary file."""

    def __init__(self, header: dict[str, Any], role_of: Callable[[str], str]) -> None:
        self.header = header
        self.role_of = role_of
        self._dir = Path(tempfile.mkdtemp(prefix="surrealdocs-export-"))
        self._rows: dict[str, _RowsWriter] = {}
        self._vectors: dict[str, _VectorsWriter] = {}
        self._order: list[Part] = []

    def rows(self, role: str, rows: list[dict[str, Any]]) -> None:
        writer = self._rows.get(role)
        if writer is None:
            part = Part(f"{role}.jsonl.gz", "rows", role)
            writer = self._rows[role] = _RowsWriter(self._dir / part.name, part)
            self._order.append(part)
        writer.write(rows, self.role_of)

    def vectors(self, role: str, dimension: int, vectors: list[list[float]]) -> int:
        """Append vectors to ``role``'s vectors part; the row number of the first."""
        writer = self._vectors.get(role)
        if writer is None:
            part = Part(f"{role}_vectors.f32", "vectors", role)
            writer = self._vectors[role] = _VectorsWriter(
                self._dir / f"{role}_vectors.bin", part, dimension)
            self._order.append(part)
        return writer.add(vectors)

    def write_to(self, out: IO[bytes]) -> dict[str, Any]:
        """Close the parts and stream the archive into ``out``; returns the manifest."""
        files: list[tuple[Part, Path]] = []
        for rows in self._rows.values():
            rows.close()
            files.append((rows.part, rows.path))
        for vectors in self._vectors.values():
            vectors.close()
            files.append((vectors.part, vectors.path))
        for part, path in files:
            part.bytes = path.stat().st_size
            part.sha256 = _digest_file(path)
        manifest = {"format": FORMAT, "version": FORMAT_VERSION, **self.header,
                    "parts": [p.to_dict() for p in self._order]}
        data = json.dumps(manifest, indent=1, ensure_ascii=False).encode("utf-8")
        paths = {p.name: path for p, path in files}
        with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mtime, info.mode = len(data), _now_seconds(), 0o644
            tar.addfile(info, io.BytesIO(data))
            for part in self._order:
                info = tarfile.TarInfo(part.name)
                info.size, info.mtime, info.mode = part.bytes, _now_seconds(), 0o644
                with paths[part.name].open("rb") as fh:
                    tar.addfile(info, fh)
        return manifest

    def discard(self) -> None:
        for rows in self._rows.values():
            rows.close()
        for vectors in self._vectors.values():
            vectors.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def _now_seconds() -> int:
    return int(datetime.now(timezone.utc).timestamp())


# ----- reading --------------------------------------------------------------------------
@dataclass
class Archive:
    """An archive read into a temporary folder, every part's size and checksum verified
    (:func:`read_archive`). :meth:`check` then reads every row once."""

    manifest: dict[str, Any]
    folder: Path
    parts: dict[str, Part] = field(default_factory=dict)  # by name
    _files: dict[str, int] = field(default_factory=dict)  # open vectors parts, by role

    @property
    def archive_id(self) -> str:
        """The manifest's SHA-256: the same archive has the same id."""
        return str(self.manifest["_id"])

    def part(self, role: str, kind: str = "rows") -> Part | None:
        for part in self.parts.values():
            if part.role == role and part.kind == kind:
                return part
        return None

    def vector(self, role: str, n: int) -> np.ndarray:
        """Row ``n`` of ``role``'s vectors part, read from the file (not mapped: mapped
        pages would count as this process's memory)."""
        part = self._vector_part(role, n)
        fd = self._files.get(role)
        if fd is None:
            fd = self._files[role] = os.open(self.folder / part.name, os.O_RDONLY)
        width = np.dtype(str(part.dtype)).itemsize * int(part.dimension or 0)
        data = os.pread(fd, width, n * width)
        return np.frombuffer(data, dtype=str(part.dtype)).astype(np.float64)

    def _vector_part(self, role: str, n: int) -> Part:
        part = self.part(role, "vectors")
        if part is None:
            raise ArchiveError(f"a $vector value but no vectors part for {role!r}")
        if not 0 <= n < part.rows:
            raise ArchiveError(f"a $vector value {n} outside the vectors part of {role!r}")
        return part

    def lines(self, role: str) -> Iterator[dict[str, Any]]:
        """The rows of ``role`` as JSON objects (not decoded)."""
        part = self.part(role)
        if part is None:
            return
        raw = count = 0
        with gzip.open(self.folder / part.name, "rb") as fh:
            try:
                while line := fh.readline(MAX_LINE_BYTES + 1):
                    raw += len(line)
                    if len(line) > MAX_LINE_BYTES or not line.endswith(b"\n"):
                        raise ArchiveError(f"{part.name}: a line longer than "
                                           f"{MAX_LINE_BYTES >> 20} MiB, or cut short")
                    if raw > part.raw_bytes:
                        raise ArchiveError(f"{part.name} holds more than the manifest says")
                    row = json.loads(line)
                    if not isinstance(row, dict):
                        raise ArchiveError(f"{part.name}: a line that is not an object")
                    count += 1
                    yield row
            except (OSError, EOFError, ValueError, UnicodeDecodeError) as exc:
                if isinstance(exc, ArchiveError):
                    raise
                raise ArchiveError(f"{part.name} is damaged: {exc}") from exc
        if count != part.rows or raw != part.raw_bytes:
            raise ArchiveError(f"{part.name} holds {count} rows, the manifest says {part.rows}")

    def check(self, tables: dict[str, str]) -> None:
        """Read every row once: tags, record roles, field names and vector references
        must be valid (``tables`` maps each role this import knows to its table)."""
        for part in self.parts.values():
            if part.kind == "rows":
                self._check_part(part, tables)

    def _check_part(self, part: Part, tables: dict[str, str]) -> None:
        def table_of(role: str) -> str:
            if role not in tables:
                raise ArchiveError(f"{part.name}: a link to an unknown part {role[:40]!r}")
            return tables[role]

        for row in self.lines(part.role):
            bad = next((k for k in row if not _FIELD.match(k)), None)
            if bad is not None:
                raise ArchiveError(f"{part.name}: a field named {bad[:40]!r}")
            decode(row, table_of, lambda n: self._check_vector(part.role, n))

    def _check_vector(self, role: str, n: int) -> None:
        self._vector_part(role, n)

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()
        shutil.rmtree(self.folder, ignore_errors=True)


def read_archive(source: IO[bytes], *, schema_version: int) -> Archive:
    """Read an archive from a binary stream into a temporary folder, checking the manifest
    and every member's name, type, size and SHA-256. Raises :class:`ArchiveError`."""
    folder = Path(tempfile.mkdtemp(prefix="surrealdocs-import-"))
    try:
        return _read(source, folder, schema_version)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _read(source: IO[bytes], folder: Path, schema_version: int) -> Archive:
    try:
        tar = tarfile.open(fileobj=source, mode="r|")  # noqa: SIM115 (closed below)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ArchiveError(f"not a surrealdocs archive (not a tar file: {exc})") from exc
    archive: Archive | None = None
    seen: set[str] = set()
    try:
        for member in tar:
            if archive is None:
                archive = _manifest(tar, member, folder, schema_version)
                continue
            _extract(tar, member, archive, seen)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ArchiveError(f"the archive is damaged or cut short: {exc}") from exc
    finally:
        tar.close()
    if archive is None:
        raise ArchiveError("the archive is empty: no manifest.json")
    missing = sorted(set(archive.parts) - seen)
    if missing:
        raise ArchiveError(f"the archive is cut short: {', '.join(missing)} missing")
    return archive


def _manifest(tar: tarfile.TarFile, member: tarfile.TarInfo, folder: Path,
              schema_version: int) -> Archive:
    if member.name != MANIFEST or not member.isfile() or member.size > MAX_MANIFEST_BYTES:
        raise ArchiveError("not a surrealdocs archive: its first member is not manifest.json")
    data = _read_member(tar, member)
    try:
        manifest = json.loads(data)
    except ValueError as exc:
        raise ArchiveError(f"the archive's manifest is not JSON: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArchiveError("not a surrealdocs archive: the manifest names another format")
    version = manifest.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION or version < 1:
        raise ArchiveError(f"the archive's format version is {version!r}; this surrealdocs "
                           f"reads version {FORMAT_VERSION}: upgrade surrealdocs to import it")
    schema = manifest.get("schema")
    if not isinstance(schema, int) or schema > schema_version:
        raise ArchiveError(f"the archive comes from a store of schema {schema!r}, newer than "
                           f"this surrealdocs's {schema_version}: upgrade surrealdocs")
    manifest["_id"] = hashlib.sha256(data).hexdigest()
    archive = Archive(manifest, folder)
    parts = manifest.get("parts")
    if not isinstance(parts, list) or len(parts) > MAX_PARTS:
        raise ArchiveError("the archive's manifest lists no parts, or too many")
    for entry in parts:
        part = _part(entry)
        if part.name in archive.parts:
            raise ArchiveError(f"the manifest lists {part.name} twice")
        archive.parts[part.name] = part
    return archive


def _part(entry: Any) -> Part:
    if not isinstance(entry, dict):
        raise ArchiveError("a part of the manifest is not an object")
    try:
        part = Part(**{k: entry[k] for k in entry if k in Part.__dataclass_fields__})
    except TypeError as exc:
        raise ArchiveError(f"a part of the manifest is incomplete: {exc}") from exc
    numbers = (part.rows, part.bytes, part.raw_bytes)
    if not isinstance(part.name, str) or not _PART_NAME.match(part.name) \
            or part.kind not in ("rows", "vectors") or not isinstance(part.role, str) \
            or not _ROLE.match(part.role) \
            or not all(isinstance(n, int) and n >= 0 for n in numbers) \
            or not isinstance(part.sha256, str) or len(part.sha256) != 64:
        raise ArchiveError(f"a part of the manifest is malformed: {str(entry)[:120]}")
    if part.kind == "vectors":
        if part.dtype not in ("<f4", "<f8") or not isinstance(part.dimension, int) \
                or not 0 < part.dimension <= 65536:
            raise ArchiveError(f"the vectors part {part.name} is malformed")
        width = 4 if part.dtype == "<f4" else 8
        if part.rows * part.dimension * width != part.bytes:
            raise ArchiveError(f"the vectors part {part.name} has the wrong size")
    elif part.raw_bytes > max(part.bytes, 1) * MAX_RATIO:
        raise ArchiveError(f"{part.name} claims to unpack to {part.raw_bytes} bytes from "
                           f"{part.bytes}: refused (a decompression bomb)")
    return part


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, archive: Archive,
             seen: set[str]) -> None:
    part = archive.parts.get(member.name)
    if part is None or not member.isfile():
        raise ArchiveError(f"the archive holds {member.name[:80]!r}, which its manifest does "
                           "not list (or which is not a plain file)")
    if member.name in seen:
        raise ArchiveError(f"the archive holds {member.name} twice")
    if member.size != part.bytes:
        raise ArchiveError(f"{member.name} is {member.size} bytes, the manifest says "
                           f"{part.bytes}: the archive is damaged")
    fh = tar.extractfile(member)
    if fh is None:
        raise ArchiveError(f"{member.name} cannot be read")
    digest = hashlib.sha256()
    written = 0
    with (archive.folder / part.name).open("wb") as out:
        while block := fh.read(_COPY_CHUNK):
            digest.update(block)
            out.write(block)
            written += len(block)
    if written != part.bytes:
        raise ArchiveError(f"{member.name} is cut short")
    if digest.hexdigest() != part.sha256:
        raise ArchiveError(f"{member.name} does not match its checksum: the archive is "
                           "damaged")
    seen.add(member.name)


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    fh = tar.extractfile(member)
    if fh is None:
        raise ArchiveError(f"{member.name} cannot be read")
    return fh.read()
