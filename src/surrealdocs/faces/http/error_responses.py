"""One error shape for every answer that is not a success, and the one place that maps
surrealdocs errors to HTTP statuses.

``{"error": {"code": "not_found", "message": "no document 'x'"}}``, with ``details`` for
validation errors. ``code`` is stable (clients switch on it); ``message`` is for people. A
response never carries a traceback: an unexpected exception is logged and answered with
``internal_error``.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from ...errors import (
    AlreadyExistsError,
    ChatModelError,
    ConfigurationError,
    DimensionMismatchError,
    EmbeddingModelMismatchError,
    EmbeddingProviderError,
    ForbiddenError,
    ModelUnavailableError,
    NotFoundError,
    SchemaMismatchError,
    SchemaVersionError,
    StoreError,
    SurrealDocsError,
)

log = logging.getLogger("surrealdocs.faces.http")

# surrealdocs errors → (status, code), most specific first
ERROR_STATUS: tuple[tuple[type[SurrealDocsError], int, str], ...] = (
    (NotFoundError, 404, "not_found"),
    (ForbiddenError, 403, "forbidden"),
    (AlreadyExistsError, 409, "conflict"),
    (DimensionMismatchError, 422, "invalid_vector"),
    (ConfigurationError, 422, "invalid_parameter"),
    (EmbeddingProviderError, 502, "embedding_provider_error"),
    (ChatModelError, 502, "chat_model_error"),
    (ModelUnavailableError, 503, "model_unavailable"),
    (EmbeddingModelMismatchError, 503, "store_unavailable"),
    (SchemaVersionError, 503, "store_unavailable"),
    (SchemaMismatchError, 503, "store_unavailable"),
    (StoreError, 503, "store_error"),
)

STATUS_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                405: "method_not_allowed", 406: "not_acceptable", 409: "conflict",
                411: "length_required", 413: "payload_too_large",
                415: "unsupported_media_type", 422: "invalid_parameter",
                429: "too_many_requests", 500: "internal_error", 503: "not_ready"}


class ApiError(Exception):
    """An error the server answers with ``status`` and ``code``."""

    def __init__(self, status: int, code: str, message: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


def error_response(status: int, code: str, message: str, *, details: Any = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        body["details"] = details
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def status_of(exc: SurrealDocsError) -> tuple[int, str]:
    for kind, status, code in ERROR_STATUS:
        if isinstance(exc, kind):
            return status, code
    return 500, "internal_error"


def install(app: FastAPI) -> None:
    """Answer every error of ``app`` in the one shape."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, headers=exc.headers)

    @app.exception_handler(SurrealDocsError)
    async def surrealdocs_error(request: Request, exc: SurrealDocsError) -> JSONResponse:
        status, code = status_of(exc)
        if status >= 500:
            log.warning("%s %s: %s: %s", request.method, request.url.path,
                        type(exc).__name__, exc)
        message = str(exc)
        if type(exc) is StoreError:  # the engine's own words (a statement quoted back): logged
            message = "the store could not answer this request (the server's log has why)"
        return error_response(status, code, message)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = [{"where": ".".join(str(p) for p in e.get("loc", ())),
                    "message": str(e.get("msg", "")), "type": str(e.get("type", ""))}
                   for e in exc.errors()]
        first = details[0] if details else {"where": "request", "message": "invalid"}
        return error_response(422, "invalid_parameter",
                              f"{first['where']}: {first['message']}", details=details)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = STATUS_CODES.get(exc.status_code, "error")
        message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
        if exc.status_code == 404 and message == "Not Found":
            message = f"no such endpoint: {request.method} {request.url.path}"
        return error_response(exc.status_code, code, message,
                              headers=getattr(exc, "headers", None))

    @app.exception_handler(ClientDisconnect)
    async def disconnected(request: Request, exc: ClientDisconnect) -> JSONResponse:
        # the client went away mid-request (an upload cut off): nobody reads this answer
        log.info("%s %s: the client disconnected", request.method, request.url.path)
        return error_response(400, "client_disconnected", "the request was cut off")

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error in %s %s", request.method, request.url.path)
        return error_response(500, "internal_error",
                              "internal error: the server's log has the details")
