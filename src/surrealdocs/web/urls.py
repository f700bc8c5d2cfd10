"""A URL as a source's identity: normalised so that one page has one name."""

from __future__ import annotations

from urllib.parse import quote, unquote, urlsplit, urlunsplit

from ..errors import ConfigurationError

SCHEMES = ("http", "https")
MAX_URL_CHARS = 4096
_DEFAULT_PORTS = {"http": 80, "https": 443}
# what may stay as it is in a path and a query (RFC 3986's unreserved and sub-delims, ":@/")
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"
_QUERY_SAFE = _PATH_SAFE + "?"


def is_url(text: str) -> bool:
    """Whether ``text`` names a web page (``http://`` or ``https://``)."""
    return text[:8].lower().startswith(("http://", "https://"))


def normalise(url: str) -> str:
    """The page's name: scheme and host in lower case, the default port and the fragment
    left out, an empty path as ``/``, percent-escapes of unreserved characters decoded and
    the others in upper case. A :class:`ConfigurationError` says why a text is no URL."""
    url = url.strip()
    if len(url) > MAX_URL_CHARS:
        raise ConfigurationError(f"a URL may have at most {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigurationError(f"{url[:200]!r} is not a URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise ConfigurationError(f"{url[:200]!r}: only http and https URLs can be fetched")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise ConfigurationError(f"{url[:200]!r} names no host")
    if parts.username or parts.password:
        raise ConfigurationError(f"{url[:200]!r}: a URL with a user name or password is not"
                                 " taken (the name would keep the secret)")
    try:
        host = host.encode("idna").decode("ascii").lower() if not host.isascii() else host.lower()
    except UnicodeError:
        raise ConfigurationError(f"{url[:200]!r}: the host name is not valid") from None
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = quote(unquote(parts.path), safe=_PATH_SAFE) or "/"
    query = quote(unquote(parts.query), safe=_QUERY_SAFE)
    return urlunsplit((scheme, netloc, path, query, ""))


def within(url: str, root: str) -> bool:
    """Whether ``url`` lies under ``root``: the same scheme and host, and a path that starts
    with the root's folder (a crawl stays there)."""
    a, b = urlsplit(url), urlsplit(root)
    if (a.scheme, a.netloc) != (b.scheme, b.netloc):
        return False
    folder = b.path if b.path.endswith("/") else b.path.rsplit("/", 1)[0] + "/"
    return a.path.startswith(folder) or a.path == b.path
