"""The outbound guard: every URL the server calls on a caller's behalf (MCP servers, documents)
is resolved and checked before a byte is sent.

A caller who can name a URL could otherwise make the server call what only the server can reach:
the instance metadata service (169.254.169.254, fd00:ec2::254), services on loopback, the VPC's
private addresses. So a URL must be http(s), and every address its host resolves to must be a
public one, unless the deployment's allow-list (`OUTBOUND_ALLOW`: CIDRs and host names) permits
it. The local server allows loopback, so local MCP servers work under `make run`.

    guard = OutboundGuard(["127.0.0.0/8", "localhost"])
    await guard.check("http://169.254.169.254/latest/meta-data")   # raises OutboundRefused

`resolve()` returns the checked addresses, so the HTTP transport (`_http.py`) connects to one of
them instead of resolving the name again: a name that answered a public address to the check
cannot answer a private one to the connection (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import urlsplit

from ..errors import InvalidRequest

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: `resolve(host, port)` -> the host's addresses (tests hand in their own).
Resolver = Callable[[str, int], Awaitable[list[str]]]

#: IPv6 prefixes that carry an IPv4 address in their last 32 bits: NAT64 (RFC 6052, RFC 8215).
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}


class OutboundRefused(InvalidRequest):
    """A URL the server will not call: a scheme other than http(s), or a host that resolves to
    an address that is not public (and not allow-listed), or one that does not resolve."""


class OutboundGuard:
    def __init__(
        self,
        allow: Sequence[str] = (),
        *,
        resolve: Resolver | None = None,
        dns_timeout: float = 5.0,
    ) -> None:
        """`allow`: CIDRs ("127.0.0.0/8", "10.1.0.0/16") whose addresses may be called, and host
        names ("localhost", "mcp.internal") called whatever they resolve to."""
        self._networks = []
        self._hosts = set()
        for entry in (item.strip() for item in allow):
            if not entry:
                continue
            if _looks_like_address(entry):
                try:
                    self._networks.append(ipaddress.ip_network(entry, strict=False))
                except ValueError:
                    raise ValueError(f"OUTBOUND_ALLOW: {entry!r} is not a valid CIDR") from None
            else:
                self._hosts.add(entry.lower().rstrip("."))
        self._resolve = resolve or _getaddrinfo
        self._dns_timeout = dns_timeout

    async def check(self, url: str) -> None:
        """Raise OutboundRefused unless `url` may be called."""
        await self.resolve(url)

    async def resolve(self, url: str) -> list[str]:
        """The addresses `url`'s host resolves to, all of them checked; OutboundRefused if the
        URL may not be called."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise OutboundRefused(
                f"refused to call {_shown(url)}: only http and https URLs can be called"
            )
        host = (parts.hostname or "").rstrip(".")
        if not host:
            raise OutboundRefused(f"refused to call {_shown(url)}: the URL has no host")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise OutboundRefused(f"refused to call {_shown(url)}: the port is invalid") from None
        try:
            addresses = await asyncio.wait_for(self._resolve(host, port), self._dns_timeout)
        except (OSError, TimeoutError, UnicodeError) as err:
            reason = "timed out" if isinstance(err, TimeoutError) else "failed"
            raise OutboundRefused(f"refused to call {host}: resolving it {reason}") from None
        if not addresses:
            raise OutboundRefused(f"refused to call {host}: it resolves to no address")
        if host.lower() in self._hosts:
            return addresses
        for text in addresses:
            address = ipaddress.ip_address(text.split("%", 1)[0])  # drop an IPv6 zone
            kind = self._refusal(address)
            if kind:
                said = host if host == text else f"{host} (it resolves to {text})"
                raise OutboundRefused(
                    f"refused to call {said}: {kind} addresses are not called on a caller's"
                    " behalf unless the deployment's OUTBOUND_ALLOW lists them"
                )
        return addresses

    def _refusal(self, address: IPAddress) -> str | None:
        """Why `address` may not be called (a kind of address), or None if it may."""
        for network in self._networks:
            if network.version == address.version and address in network:
                return None
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            kind = self._refusal(embedded)
            return f"IPv4-mapped {kind}" if kind else None
        if address in _METADATA:
            return "instance metadata"
        if address.is_loopback:
            return "loopback"
        if address.is_link_local:
            return "link-local"
        if address.is_unspecified:
            return "unspecified"
        if address.is_multicast:
            return "multicast"
        if address.is_reserved:
            return "reserved"
        if address.is_private:
            return "private"
        if not address.is_global:  # shared (100.64/10), documentation, benchmarking...
            return "non-public"
        return None


def _looks_like_address(entry: str) -> bool:
    """An address or CIDR (to be parsed as one) rather than a host name."""
    return "/" in entry or ":" in entry or entry.replace(".", "").isdigit()


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (IPv4-mapped, 6to4, NAT64), if any."""
    if address.version == 4:
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in network for network in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


async def _getaddrinfo(host: str, port: int) -> list[str]:
    """The system resolver (blocking), in a thread; unique addresses in its order."""
    infos = await asyncio.to_thread(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _shown(url: str) -> str:
    """The URL as an error message may show it: no user info or query (they may hold secrets)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{parts.path}" if parts.scheme else url[:100]
