"""Redis Cluster (or Valkey cluster) URLs for the shared tiers: `redis+cluster://HOST:PORT,HOST:PORT/`.

SPEC 7.5 names a cluster by a comma-separated list of nodes after `redis+cluster://` (TLS:
`rediss+cluster://`). The nodes are startup nodes: any reachable one tells the client the whole
topology (CLUSTER SLOTS), so listing every master is not needed, but listing more than one lets
the client start while one of them is down. Options go in the query:

    redis+cluster://user:password@10.0.0.1:7000,10.0.0.2:7000/?read_from_replicas=yes

- `read_from_replicas` (yes/no, default no): reads may go to a replica of the key's shard. A
  replica that has not caught up answers "no such key", which is a miss: values are sealed for
  their key (redis_tier.py), so a read can be stale or absent, never wrong.
- `protocol` (2 only): the tiers read RESP2 through their bounded parser.
- with `rediss+cluster://`: `ssl_ca_certs`, `ssl_certfile`, `ssl_keyfile` (paths) and
  `ssl_cert_reqs` (none/optional/required).

Parsing is here, apart from the client (which is optional): a malformed URL is a WorkbenchError
saying what is wrong, where in the URL, and how to write it, whether or not redis is installed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote

from ..errors import WorkbenchError
from ..redact import redact_url

SCHEMES = ("redis+cluster", "rediss+cluster")
DEFAULT_PORT = 6379
_HINT = "write redis+cluster://HOST:PORT,HOST:PORT/ (SPEC 7.5), e.g. redis+cluster://10.0.0.1:7000,10.0.0.2:7000/"
_BOOL = {"yes": True, "true": True, "1": True, "on": True, "no": False, "false": False, "0": False, "off": False}
_TLS_OPTIONS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs")
_CERT_REQS = ("none", "optional", "required")
_HOST = re.compile(r"[A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:.]+\]")


def is_cluster_url(url: str) -> bool:
    return isinstance(url, str) and url.split("://", 1)[0].lower() in SCHEMES


@dataclass(frozen=True)
class ClusterURL:
    """A parsed cluster URL: startup nodes, credentials, TLS and the options the tiers honour."""

    nodes: tuple[tuple[str, int], ...]
    tls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    read_from_replicas: bool = False
    ssl: dict[str, str] = field(default_factory=dict)

    def redacted(self) -> str:
        """The URL without its credentials, for messages and logs (as workbench.redact writes them)."""
        auth = "***@" if self.password is not None or self.username is not None else ""
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.nodes)
        return f"{SCHEMES[self.tls]}://{auth}{hosts}/"


def _bad(message: str, url: str) -> WorkbenchError:
    return WorkbenchError(f"the Redis Cluster URL is not valid: {message} (in {redact_url(url)!r})", hint=_HINT)


def _credentials_end(rest: str) -> int:
    """Where the credentials of `rest` (the URL after '://') end: at its last '@', -1 when there are
    none. A password may hold any character unescaped ('@', '/', '?', '#'): the host list holds no
    '@', so the last one ends the credentials, and every part a message quotes (a node, the path,
    an option) comes after it. workbench.redact masks the same span. (An '@' in an option value
    must be written %40.)"""
    return rest.rfind("@")


def _node(part: str, url: str, i: int) -> tuple[str, int]:
    where = f"node {i + 1} {part!r}"
    if not part:
        raise _bad(f"node {i + 1} is empty (a stray comma?)", url)
    port_s: str | None
    if part.startswith("["):
        end = part.find("]")
        host, rest = part[:end + 1], part[end + 1:]
        if end < 0 or (rest and not rest.startswith(":")):
            raise _bad(f"{where} is not [IPv6]:PORT", url)
        port_s = rest[1:] if rest else None
    else:
        if part.count(":") > 1:
            raise _bad(f"{where}: an IPv6 address goes in brackets, [::1]:7000", url)
        host, colon, port_s = part.partition(":")
        port_s = port_s if colon else None
    if not _HOST.fullmatch(host):
        raise _bad(f"{where} has no valid host name", url)
    if port_s is None:
        return host.strip("[]"), DEFAULT_PORT
    if not port_s.isdigit() or not 0 < int(port_s) < 65536:
        raise _bad(f"{where} has port {port_s!r}: a port is a number from 1 to 65535", url)
    return host.strip("[]"), int(port_s)


def parse_cluster_url(url: str) -> ClusterURL:
    if not is_cluster_url(url):
        raise _bad(f"the scheme must be one of {', '.join(s + '://' for s in SCHEMES)}", url)
    scheme, rest = url.split("://", 1)
    tls = scheme.lower() == SCHEMES[1]
    username = password = None
    at = _credentials_end(rest)
    if at >= 0:
        user, colon, pw = rest[:at].partition(":")
        username, password = (unquote(user) or None), (unquote(pw) if colon else None)
        rest = rest[at + 1:]
    netloc, _, tail = rest.partition("/")
    path, _, query = tail.partition("?")
    if "?" in netloc:
        netloc, _, query = netloc.partition("?")
    if path not in ("", "0"):
        raise _bad(f"a cluster has only database 0, got the path /{path}", url)
    nodes = tuple(_node(p.strip(), url, i) for i, p in enumerate(netloc.split(",")))
    opts = _options(query, url, tls)
    return ClusterURL(nodes, tls, username, password, opts.pop("read_from_replicas", False) is True,
                      {k: str(v) for k, v in opts.items()})


def _options(query: str, url: str, tls: bool) -> dict[str, str | bool]:
    out: dict[str, str | bool] = {}
    known = ("read_from_replicas", "protocol") + (_TLS_OPTIONS if tls else ())
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == "read_from_replicas":
            if value.lower() not in _BOOL:
                raise _bad(f"read_from_replicas={value!r}: use yes or no", url)
            out[name] = _BOOL[value.lower()]
        elif name == "protocol":
            if value != "2":
                raise _bad(f"protocol={value!r}: the cache tiers read RESP2 only (remove it, or write 2)", url)
        elif name in known:
            if name == "ssl_cert_reqs" and value not in _CERT_REQS:
                raise _bad(f"ssl_cert_reqs={value!r}: use one of {', '.join(_CERT_REQS)}", url)
            out[name] = value
        else:
            raise _bad(f"unknown option {name!r}; known: {', '.join(known)}"
                       + ("" if tls else " (TLS options need rediss+cluster://)"), url)
    return out
