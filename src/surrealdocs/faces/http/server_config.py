"""What ``surrealdocs serve`` is told: where to listen, the limits, CORS, the store."""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass, field
from functools import cached_property

from ...config import Settings
from ...errors import ConfigurationError
from ...store.folders import check_uploads_dir

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2,
          "mib": 1024**2, "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "t": 1000**4,
          "tb": 1000**4, "tib": 1024**4}


def parse_size(text: str | int) -> int:
    """Bytes from ``123``, ``50MB``, ``1.5GiB``, ``200k`` (decimal units; ``…iB`` binary)."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = _SIZE.match(str(text))
        unit = (match.group(2) or "").lower() if match else ""
        if not match or unit not in _UNITS:
            raise ConfigurationError(f"not a size: {text!r} (use e.g. 500MB, 2GiB, 1000000)")
        value = int(float(match.group(1)) * _UNITS[unit])
    if value < 1:
        raise ConfigurationError(f"a size must be at least 1 byte, got {text!r}")
    return value


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` only reaches this machine: an address, or a name every one
    of whose addresses is a loopback address (a name that resolves to nothing is not)."""
    name = host.strip().strip("[]").lower()
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        pass
    if not name:
        return False
    try:
        found = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    addresses = {str(info[4][0]).split("%", 1)[0] for info in found}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


@dataclass(frozen=True)
class ServeConfig:
    """The server's configuration.

    ``max_file_bytes`` bounds one uploaded file, ``max_request_bytes`` one request's body
    (all its files together, or a JSON body), ``max_files`` the files of one upload.
    ``cors_origins`` lists the origins whose pages may call the API (none by default).
    ``allowed_hosts`` are names the ``Host`` header may carry besides the bound address and
    loopback names, for a proxy in front (``*``: any; see :mod:`surrealdocs.faces.http.guard`).
    """

    settings: Settings = field(default_factory=Settings.from_env)
    host: str = "127.0.0.1"
    port: int = 8000
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    max_file_bytes: int = 100 * 1000**2
    max_request_bytes: int = 500 * 1000**2
    max_files: int = 1000
    # how long a key check (and the number of keys) is remembered, in seconds
    key_cache_seconds: float = 5.0
    # the MCP endpoint (/mcp/): its write tools (for keys that may write), its result size
    mcp_allow_writes: bool = False
    mcp_max_chars: int = 8000
    # chat models a request to /v1/ask may pick besides settings.llm (same provider)
    llm_allow: tuple[str, ...] = ()
    # web pages on loopback, private, link-local and reserved addresses (an intranet's);
    # refused by default: a request must not reach the server's own network
    allow_private_urls: bool = False

    def __post_init__(self) -> None:
        for name in ("max_file_bytes", "max_request_bytes", "max_files"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
        if isinstance(self.mcp_max_chars, bool) or not isinstance(self.mcp_max_chars, int) \
                or self.mcp_max_chars < 1000:
            raise ConfigurationError(
                f"mcp_max_chars must be an integer of at least 1000, got {self.mcp_max_chars!r}")
        if not 0 <= self.port <= 65535:
            raise ConfigurationError(f"port must be from 0 to 65535, got {self.port}")
        if self.settings.chunked:
            check_uploads_dir(self.settings)
        for origin in self.cors_origins:
            if origin != "*" and not re.match(r"^https?://[^/\s]+\Z", origin):
                raise ConfigurationError(
                    f"a CORS origin is scheme://host[:port] (or *), got {origin!r}")

        for name in self.allowed_hosts:
            if not isinstance(name, str) or not re.match(r"^(\*|[^/\s@]+)\Z", name):
                raise ConfigurationError(f"an allowed host is a name or address (or *), got"
                                         f" {name!r}")

    @cached_property
    def loopback(self) -> bool:
        return is_loopback(self.host)
