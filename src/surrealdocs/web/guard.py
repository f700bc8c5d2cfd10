"""Which addresses a server may fetch: public ones only, unless told otherwise.

A URL someone sends to the HTTP API or the MCP server must not reach the machine's own
services or its network (SSRF). A host name is resolved here and every address it has is
checked; the fetcher then connects to the address that was checked (a second resolution
could answer otherwise), and checks again after every redirect.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

from ..errors import ConfigurationError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class BlockedAddress(ConfigurationError):
    """The URL leads to an address the server may not fetch."""


def is_public(address: IPAddress) -> bool:
    """Not loopback, private, link-local, multicast, reserved, unspecified, shared (CGNAT) or
    documentation space; an IPv4 address mapped into IPv6 (or NAT64, 6to4) is judged as the
    IPv4 address it carries."""
    if isinstance(address, ipaddress.IPv6Address):
        carried = address.ipv4_mapped or address.sixtofour
        if carried is None and address in ipaddress.ip_network("64:ff9b::/96"):
            carried = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if carried is not None:
            return is_public(carried)
        if address.teredo is not None:
            return False
    return bool(address.is_global) and not (
        address.is_multicast or address.is_private or address.is_loopback
        or address.is_link_local or address.is_reserved or address.is_unspecified)


async def resolve(host: str, port: int, *, allow_private: bool) -> list[IPAddress]:
    """The addresses of ``host`` a fetch may connect to (all of them public, unless
    ``allow_private``). Raises :class:`BlockedAddress` when any is not."""
    try:
        literal: IPAddress | None = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ConfigurationError(f"{host}: the name does not resolve ({exc})") from None
        addresses = list(dict.fromkeys(
            ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos))
    if not addresses:
        raise ConfigurationError(f"{host}: the name has no address")
    if not allow_private:
        blocked = [a for a in addresses if not is_public(a)]
        if blocked:
            raise BlockedAddress(
                f"{host} resolves to {blocked[0]}, an address this server does not fetch"
                " (loopback, private, link-local or reserved; serve --allow-private-urls"
                " allows them)")
    return addresses
