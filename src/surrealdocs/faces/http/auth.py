"""API keys on requests: ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``.

Without keys in the store the server runs on loopback only and every request may read and
write. With keys, every ``/v1`` request but health, readiness and info needs one: none or an
unknown one is 401, a read-only key asking to write is 403.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from ...core.key_service import ApiKey
from .error_responses import ApiError
from .state import ServerState

CHALLENGE = {"WWW-Authenticate": "Bearer"}


@dataclass(frozen=True)
class Access:
    key: ApiKey | None  # None: no keys are needed (loopback, no keys in the store)
    can_write: bool


def server_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.server
    return state


def presented_token(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header:
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise ApiError(401, "unauthorized",
                           "the Authorization header must be: Bearer KEY", CHALLENGE)
        return value.strip()
    key = request.headers.get("x-api-key")
    return key.strip() if key and key.strip() else None


async def access(request: Request) -> Access:
    """Who is asking (raises 503 until the store is open, 401 for no or a wrong key)."""
    state = server_state(request)
    state.require()
    if not await state.keys_required():  # whatever is sent
        return Access(None, True)
    token = presented_token(request)
    if token is None:
        raise ApiError(401, "unauthorized", "an API key is needed: send Authorization: "
                       "Bearer KEY (or X-API-Key: KEY)", CHALLENGE)
    key = await state.key_of(token)
    if key is None:
        raise ApiError(401, "unauthorized", "this API key is not valid (wrong, or revoked)",
                       CHALLENGE)
    return Access(key, not key.read_only)


async def reader(who: Annotated[Access, Depends(access)]) -> Access:
    return who


async def writer(who: Annotated[Access, Depends(access)]) -> Access:
    if not who.can_write:
        name = who.key.name if who.key else "?"
        raise ApiError(403, "forbidden", f"the key {name!r} is read-only: it cannot change"
                       " the store")
    return who
