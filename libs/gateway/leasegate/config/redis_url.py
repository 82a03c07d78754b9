"""`LEASEGATE_REDIS_URL` for a Redis Cluster: `redis+cluster://` (or `rediss+cluster://` for
TLS) followed by one or more seed nodes, comma-separated:

    redis+cluster://[user:password@]host:port[,host:port...]

The client discovers every other node from any seed that answers, so the seeds need not list
the whole cluster; listing more than one only keeps start-up working while a seed is down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote

CLUSTER_SCHEMES = {"redis+cluster": False, "rediss+cluster": True}
"""Scheme -> whether the connections use TLS."""


@dataclass(frozen=True)
class ClusterUrl:
    nodes: tuple[tuple[str, int], ...]
    """The seed nodes, (host, port), in the URL's order."""
    tls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)


def is_cluster_url(url: str) -> bool:
    return url.partition("://")[0] in CLUSTER_SCHEMES


def parse_cluster_url(url: str) -> ClusterUrl:
    """The seeds and credentials of a cluster URL; ValueError (never echoing the password)
    when it is malformed."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in CLUSTER_SCHEMES:
        raise ValueError("a cluster URL starts with redis+cluster:// or rediss+cluster://")
    location = rest.split("/", 1)[0].split("?", 1)[0]
    userinfo, at, hosts = location.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    nodes = tuple(_node(item) for item in hosts.split(","))
    return ClusterUrl(nodes, CLUSTER_SCHEMES[scheme], username, password)


def _node(item: str) -> tuple[str, int]:
    host, colon, port = item.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"cluster seed {item.strip()!r} is not host:port")
    return host, int(port)
