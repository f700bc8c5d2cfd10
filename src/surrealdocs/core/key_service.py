"""API keys for the HTTP server (``kb.keys``): made, listed, revoked and checked here.

A key's token is ``sd_`` + 43 URL-safe characters (256 random bits from :mod:`secrets`). It
is shown once, when made; the store keeps its SHA-256 (:mod:`surrealdocs.store.api_keys`). A
token is checked by hashing it, finding that hash, and comparing the hashes in constant
time. A token this random needs no slow password hash: nobody can guess one, and the hash
of a leaked database does not give it back.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Any

from ..errors import AlreadyExistsError, ConfigurationError, NotFoundError
from ..parts.results import jsonable
from ..store.api_keys import KeyStorage

TOKEN_PREFIX = "sd_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}\Z")
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{16,128}\Z")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass
class ApiKey:
    """A key as listed: never its token or its hash. ``prefix`` is the token's start."""

    name: str
    prefix: str
    read_only: bool
    id: Any = None
    created: Any = None
    last_used: Any = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonable(self)
        return out


class ApiKeyService:
    """The API keys of one knowledge base's store."""

    def __init__(self, storage: KeyStorage) -> None:
        self.storage = storage

    async def create(self, name: str, *, read_only: bool = False) -> tuple[ApiKey, str]:
        """Make a key; returns it and its token (shown this once, stored only hashed)."""
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigurationError(
                f"invalid key name {name!r}: 1 to 64 letters, digits and _ . @ -, starting "
                "with a letter or digit")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        row = await self.storage.create(name, token_hash(token), token[:len(TOKEN_PREFIX) + 6],
                                        bool(read_only))
        if row is None:
            raise AlreadyExistsError(f"a key named {name!r} exists already")
        return _key(row), token

    async def list(self) -> list[ApiKey]:
        return [_key(r) for r in await self.storage.select()]

    async def count(self) -> int:
        return await self.storage.count()

    async def revoke(self, name: str) -> None:
        """Delete a key: its token is refused from now on."""
        if not await self.storage.delete(name):
            raise NotFoundError(f"no key named {name!r}")

    async def verify(self, token: str) -> ApiKey | None:
        """The key whose token this is, or ``None``."""
        if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX) or \
                not _TOKEN.match(token[len(TOKEN_PREFIX):]):
            return None
        digest = token_hash(token)
        row = await self.storage.find_hash(digest)
        if row is None or not hmac.compare_digest(str(row.get("hash", "")), digest):
            return None
        return _key(row)

    async def touch(self, key: ApiKey) -> None:
        """Record that a key was used now."""
        if key.id is not None:
            await self.storage.touch(key.id)


def _key(row: dict[str, Any]) -> ApiKey:
    return ApiKey(name=str(row["name"]), prefix=str(row.get("prefix") or ""),
                  read_only=bool(row.get("read_only")), id=row.get("id"),
                  created=row.get("created"), last_used=row.get("last_used"))
