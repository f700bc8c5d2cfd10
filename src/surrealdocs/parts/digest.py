"""The one content hash of the project: SHA-256 in hex, of bytes or of text as UTF-8 (files,
documents, and the text a chunk's vector is made from)."""

import hashlib


def sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()
