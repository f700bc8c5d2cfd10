"""What a web page must not make a browser do to the server: DNS rebinding and cross-site
writes.

- **Host.** A page whose name an attacker rebinds to 127.0.0.1 reaches a loopback server
  with its own name in ``Host``. Every request's ``Host`` must be the name the server is
  bound to, a loopback name (``localhost``, ``127.0.0.1``, ``[::1]``), or one of
  ``allowed_hosts`` (for a proxy in front); anything else is ``421``. A server bound to
  every address (``0.0.0.0``, ``::``) needs keys anyway and takes any ``Host`` unless
  ``allowed_hosts`` is given.
- **Cross-site writes.** A plain HTML form on any page can POST ``multipart/form-data``
  without CORS. A request that changes something (any method but GET, HEAD and OPTIONS)
  is refused with ``403`` when its ``Origin`` is neither the server's own nor one of the
  CORS origins, or when the browser says it comes from another site (``Sec-Fetch-Site``).
  Clients that are not browsers send neither header and are not affected.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from .error_responses import error_response

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})


def host_name(host: str) -> str:
    """The name part of a ``Host`` value or a bind address, lower case, without port or
    IPv6 brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host[1:]
    if host.count(":") == 1:
        return host.split(":", 1)[0]
    return host  # a bare IPv6 address, or a name


def accepted_hosts(bound: str, allowed: tuple[str, ...]) -> frozenset[str] | None:
    """The names a ``Host`` header may carry (``None``: any)."""
    if "*" in allowed or (host_name(bound) in WILDCARD_HOSTS and not allowed):
        return None
    return LOOPBACK_NAMES | {host_name(bound)} | {host_name(h) for h in allowed}


class RequestGuard:
    """ASGI middleware: ``421`` for a foreign ``Host``, ``403`` for a cross-site write."""

    def __init__(self, app: ASGIApp, *, hosts: frozenset[str] | None,
                 cors_origins: tuple[str, ...]) -> None:
        self.app, self.hosts = app, hosts
        self.any_origin = "*" in cors_origins
        self.origins = frozenset(o.lower().rstrip("/") for o in cors_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers") or []}
        host = headers.get("host", "")
        problem = self._foreign_host(host) or (
            None if scope.get("method", "GET") in SAFE_METHODS
            else self._cross_site(host, headers.get("origin"), headers.get("sec-fetch-site")))
        if problem is None:
            await self.app(scope, receive, send)
            return
        status, code, message = problem
        await error_response(status, code, message)(scope, receive, send)

    def _foreign_host(self, host: str) -> tuple[int, str, str] | None:
        if self.hosts is None or host_name(host) in self.hosts:
            return None
        return (421, "misdirected_request",
                f"this server does not answer to the host {host!r}: use one of "
                f"{', '.join(sorted(self.hosts))} (a proxy's name is allowed with"
                " --allowed-host)")

    def _cross_site(self, host: str, origin: str | None,
                    fetch_site: str | None) -> tuple[int, str, str] | None:
        if origin is not None:
            if self._origin_allowed(origin, host):
                return None
            return (403, "cross_site", f"a page of {origin!r} may not change this store"
                    " (allow its origin with --cors-origin)")
        if fetch_site is not None and fetch_site.lower() in ("cross-site", "same-site"):
            return (403, "cross_site", "a page of another site may not change this store")
        return None

    def _origin_allowed(self, origin: str, host: str) -> bool:
        origin = origin.strip().lower().rstrip("/")
        if self.any_origin or origin in self.origins:
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        default = ":443" if parts.scheme == "https" else ":80"
        return parts.netloc.removesuffix(default) == host.strip().lower().removesuffix(default)
