"""A polite, safe HTTP fetcher (httpx).

Polite: robots.txt is obeyed (RFC 9309: a 4xx robots.txt allows everything, an unreachable
one or a 5xx forbids everything for the run), requests name surrealdocs in their user agent,
and at most :data:`PER_HOST` requests are in flight per host. Safe: only ``http`` and
``https``; redirects are followed by hand (at most :data:`MAX_REDIRECTS`), each hop checked
again; a body is read as a stream and stopped past ``max_bytes`` once decompressed (a
compression bomb stops there too) or past the deadline (a server that trickles); and with
``allow_private=False`` (the HTTP API and MCP) every host is resolved and checked by
:mod:`.guard`, and the connection goes to the very address that was checked, the host name
kept for the ``Host`` header, TLS's SNI and the certificate's check.

A page asked with its ETag / Last-Modified that has not changed answers 304:
:attr:`Fetched.not_modified`, no body read.
"""

from __future__ import annotations

import asyncio
import ipaddress
import urllib.robotparser
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

from ..errors import ConfigurationError
from ..version import __version__
from .guard import BlockedAddress, resolve
from .urls import SCHEMES, normalise

USER_AGENT = f"surrealdocs/{__version__} (+https://pypi.org/project/surrealdocs/)"
ROBOTS_AGENT = "surrealdocs"
PER_HOST = 2
MAX_REDIRECTS = 5
DEFAULT_MAX_BYTES = 50 * 1024 * 1024
DEFAULT_TIMEOUT = 30.0  # seconds to connect, and between two reads of a body
DEFAULT_DEADLINE = 120.0  # seconds for one fetch, body included
ROBOTS_MAX_BYTES = 512 * 1024
REDIRECTS = (301, 302, 303, 307, 308)


class FetchError(Exception):
    """A page that could not be fetched, and why (the source's failure reason)."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status

    @property
    def gone(self) -> bool:
        """The server says the page is not there (404, 410)."""
        return self.status in (404, 410)


@dataclass
class Fetched:
    """One page: where it ended up (``url``, normalised, after redirects), its bytes, its
    type and charset (from ``Content-Type``), and what to ask it with next time."""

    url: str
    status: int
    data: bytes = b""
    mime_type: str = ""
    charset: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    redirects: list[str] = field(default_factory=list)

    @property
    def not_modified(self) -> bool:
        return self.status == 304


class Fetcher:
    """Fetches pages for one run (an ingest, a refresh, a crawl); ``close`` when done (or
    ``async with``)."""

    def __init__(self, *, allow_private: bool = True, obey_robots: bool = True,
                 max_bytes: int = DEFAULT_MAX_BYTES, timeout: float = DEFAULT_TIMEOUT,
                 deadline: float = DEFAULT_DEADLINE,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.allow_private = allow_private
        self.obey_robots = obey_robots
        self.max_bytes = max_bytes
        self.deadline = deadline
        self._client = httpx.AsyncClient(
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": "gzip, deflate"},
            timeout=httpx.Timeout(timeout), follow_redirects=False, transport=transport,
            trust_env=allow_private)  # a server ignores the environment's proxies
        self._hosts: dict[str, asyncio.Semaphore] = {}
        self._robots: dict[str, urllib.robotparser.RobotFileParser | None] = {}
        self._robots_lock = asyncio.Lock()

    async def __aenter__(self) -> Fetcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._client.aclose()

    async def fetch(self, url: str, *, etag: str | None = None,
                    last_modified: str | None = None) -> Fetched:
        """Fetch ``url`` (following redirects), conditionally when ``etag`` or
        ``last_modified`` are given. Raises :class:`FetchError` (with the HTTP status when
        the server gave one), or :class:`BlockedAddress` for an address the fetcher may not
        reach."""
        current = normalise(url)
        conditional: dict[str, str] = {}
        if etag:
            conditional["If-None-Match"] = etag
        if last_modified:
            conditional["If-Modified-Since"] = last_modified
        hops: list[str] = []
        try:
            async with asyncio.timeout(self.deadline):
                while True:
                    if self.obey_robots and not await self._allowed(current):
                        raise FetchError(f"robots.txt of {_origin(current)} disallows it")
                    answer = await self._get(current, conditional)
                    if answer.status in REDIRECTS and answer.location:
                        if len(hops) >= MAX_REDIRECTS:
                            raise FetchError(f"more than {MAX_REDIRECTS} redirects")
                        hops.append(current)
                        try:
                            current = normalise(urljoin(current, answer.location))
                        except ConfigurationError as exc:
                            raise FetchError(f"redirected to {exc}") from None
                        if current in hops:
                            raise FetchError("redirected in a circle")
                        continue
                    answer.fetched.redirects = hops
                    answer.fetched.url = current
                    return answer.fetched
        except TimeoutError:
            raise FetchError(f"no whole answer within {self.deadline:.0f} s") from None

    async def _get(self, url: str, headers: dict[str, str],
                   max_bytes: int | None = None) -> _Answer:
        parts = urlsplit(url)
        host = parts.hostname or ""
        slot = self._hosts.setdefault(host, asyncio.Semaphore(PER_HOST))
        async with slot:
            target, extensions, more = await self._pinned(url)
            try:
                request = self._client.build_request(
                    "GET", target, headers={**headers, **more}, extensions=extensions)
                response = await self._client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise FetchError(f"cannot reach {host}: {_reason(exc)}") from None
            try:
                return await self._read(url, response, max_bytes or self.max_bytes)
            finally:
                await response.aclose()

    async def _pinned(self, url: str) -> tuple[str, dict[str, object], dict[str, str]]:
        """The URL to connect to (the checked address in place of the host, unless private
        addresses are allowed), the request's extensions and its extra headers."""
        parts = urlsplit(url)
        if parts.scheme not in SCHEMES:
            raise FetchError(f"only http and https URLs are fetched, not {parts.scheme}:")
        if self.allow_private:
            return url, {}, {}
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        address = (await resolve(host, port, allow_private=False))[0]
        shown = f"[{address}]" if isinstance(address, ipaddress.IPv6Address) else str(address)
        netloc = shown if parts.port is None else f"{shown}:{parts.port}"
        target = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
        extensions: dict[str, object] = {"sni_hostname": host} if parts.scheme == "https" \
            else {}
        return target, extensions, {"Host": parts.netloc}

    async def _read(self, url: str, response: httpx.Response, max_bytes: int) -> _Answer:
        status = response.status_code
        if status in REDIRECTS:
            return _Answer(Fetched(url, status), response.headers.get("location"))
        if status == 304:
            return _Answer(Fetched(url, status, etag=response.headers.get("etag"),
                                   last_modified=response.headers.get("last-modified")))
        if status >= 400:
            raise FetchError(f"the server answered {status} {response.reason_phrase}".strip(),
                             status)
        if status != 200:
            raise FetchError(f"the server answered {status}, not a page", status)
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > max_bytes \
                and "content-encoding" not in response.headers:
            raise FetchError(f"the page is {int(declared):,} bytes; at most {max_bytes:,}"
                             " are fetched")
        chunks, size = [], 0
        try:
            async for chunk in response.aiter_bytes():  # decompressed as it comes
                size += len(chunk)
                if size > max_bytes:
                    raise FetchError(f"the page is over {max_bytes:,} bytes (decompressed);"
                                     " at most that many are fetched")
                chunks.append(chunk)
        except httpx.HTTPError as exc:
            raise FetchError(f"the answer broke off: {_reason(exc)}") from None
        content_type = response.headers.get("content-type", "")
        mime, _, params = content_type.partition(";")
        charset = None
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.lower() == "charset" and value:
                charset = value.strip("\"' ").lower()
        return _Answer(Fetched(url, status, b"".join(chunks), mime.strip().lower(), charset,
                               response.headers.get("etag"),
                               response.headers.get("last-modified")))

    async def _allowed(self, url: str) -> bool:
        origin = _origin(url)
        async with self._robots_lock:
            if origin not in self._robots:
                self._robots[origin] = await self._robots_of(origin)
        rules = self._robots[origin]
        return rules is None or rules.can_fetch(ROBOTS_AGENT, url)

    async def _robots_of(self, origin: str) -> urllib.robotparser.RobotFileParser | None:
        """The origin's robots.txt (``None``: everything allowed)."""
        rules = urllib.robotparser.RobotFileParser()
        try:
            answer = await self._get(origin + "/robots.txt", {}, ROBOTS_MAX_BYTES)
            hops = 0
            while answer.fetched.status in REDIRECTS and answer.location and hops < 5:
                hops += 1
                answer = await self._get(normalise(urljoin(origin, answer.location)), {},
                                         ROBOTS_MAX_BYTES)
        except FetchError as exc:
            if exc.status is not None and 400 <= exc.status < 500:
                return None  # no robots.txt: everything is allowed
            rules.parse(['User-agent: *', 'Disallow: /'])  # unreachable or a 5xx: nothing
            return rules
        except BlockedAddress:
            raise
        text = answer.fetched.data.decode("utf-8", errors="replace")
        rules.parse(text.splitlines())
        rules.modified()
        return rules


@dataclass
class _Answer:
    fetched: Fetched
    location: str | None = None

    @property
    def status(self) -> int:
        return self.fetched.status


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__

