"""Credentials out of every URL the workbench prints: one formatter for errors, logs, CLI text and
metrics.

    >>> redact_url("redis://app:pa?ss#w/rd@cache.internal:6379/0")
    'redis://***@cache.internal:6379/0'
    >>> redact_url("redis+cluster://:s3cret@10.0.0.1:7000,10.0.0.2:7000/?read_from_replicas=yes")
    'redis+cluster://***@10.0.0.1:7000,10.0.0.2:7000/?read_from_replicas=yes'
    >>> redact_url("upstream https://u:p@api.example.com/v1 refused the request")
    'upstream https://***@api.example.com/v1 refused the request'

Why not urllib: a URL is split into user, password and host at the first '/', '?' or '#', so a
password holding one of them unescaped (`pa?ss`) is read as part of the host or the query, and a
formatter built on that parse prints it. Here the credentials of a URL are everything between
`scheme://` and the LAST '@' of the URL: a host list can hold no '@', a password may hold any
character, raw or %-encoded, and a URL that does not parse at all is still masked. The user name
goes with the password ("***@"): in `https://TOKEN@host` and `https://TOKEN:x-oauth-basic@host` the
secret is in the user's place.

Where a URL ends: a string that starts with a scheme is URLs only (a configured value: whatever
follows, spaces included, may be password), cut where the next URL of a list starts
(`redis://:a@h1,redis://:b@h2`; a URL without an '@' runs on into the next, since what looked
like a scheme may be part of a password); in other text a URL ends at whitespace (not at a quote or a
bracket: a password may hold those). The cost of masking up to the last '@' is that a path or query
holding an '@' (`/a@b`) is masked too, host included: nothing secret is ever shown, at the price of
showing less. A password holding whitespace is only known to be one in a string that is the URL:
build messages from the URL passed through here (`f"... {redact_url(url)!r}"`).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

MASK = "***"

# A scheme that starts a URL: at the start, or after whitespace or a separator a list or a message
# puts before one (not after ':' or a letter: `user:x://` inside a password starts nothing).
_SCHEME = re.compile(r"(?:^|(?<=[\s,;'\"(<\[={]))[A-Za-z][A-Za-z0-9+.\-]*://")
_TEXT_END = re.compile(r"\s")


def redact_url(text: str) -> str:
    """`text` (a URL, a list of URLs, or a message holding some) with every URL's credentials
    replaced by `***`. Anything else in it is kept as it is."""
    if not isinstance(text, str):
        text = str(text)
    found = list(_SCHEME.finditer(text))
    if not found:
        return text
    url_only = not text[:found[0].start()].strip()
    out: list[str] = []
    pos = i = 0
    while i < len(found):
        start = found[i].end()
        while True:
            i += 1
            end = found[i].start() if i < len(found) else len(text)
            cut = None if url_only else _TEXT_END.search(text, start, end)
            if cut is not None:
                end = cut.start()
                break
            # A piece without an '@' runs on into the next one: a password may hold ',a://' itself.
            if i == len(found) or text.rfind("@", start, end) >= 0:
                break
        at = text.rfind("@", start, end)
        if at > start:
            out.append(text[pos:start])
            out.append(MASK)
            pos = at
    out.append(text[pos:])
    return "".join(out)


def has_credentials(url: str) -> bool:
    """Whether redact_url would mask something in `url`."""
    return redact_url(url) != url


def leaks_credentials(text: str, url: str) -> bool:
    """Whether `text` (say, a client library's error about `url`) quotes any part of `url`'s
    credentials: any 3 characters in a row of them (raw or %-decoded), or all of shorter ones. A
    library quotes what it failed to read, and with a reserved character in a password that is a
    fragment of it (`'pw@[::1' does not appear to be an IPv4 or IPv6 address`), which no URL
    redaction of the text can find: such a message is replaced, not shown."""
    m = _SCHEME.match(url)
    if m is None:
        return False
    at = url.rfind("@", m.end())
    if at < 0:
        return False
    secret = url[m.end():at]
    for form in {secret, unquote(secret)}:
        n = min(3, len(form))
        if n and any(form[i:i + n] in text for i in range(len(form) - n + 1)):
            return True
    return False


# What urllib reads as the host part when it ends early: a host name or [IPv6] and a numeric port.
_HOST_PORT = re.compile(r"(?:\[[0-9A-Fa-f:.]*\]|[A-Za-z0-9._~%!$&'()*+,;=-]*)(?::\d*)?")


_DB_QUERY = re.compile(r"(?:/\d*)?(?:\?.*)?", re.DOTALL)
_FILE_OPTIONS = frozenset({"ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_ca_path"})


def credentials_problem(url: str, *, numeric_path: bool = False) -> str | None:
    """Why urllib (and the clients built on it: redis-py, httpx) would misread `url`'s user name or
    password, or None. They end the host part at the first '/', '?' or '#': a password holding one
    unescaped puts the rest of it, and the '@', in the path or the query, and what is left before it
    (`user:pa` of `user:pa?ss@host`) is taken for a host and a port that are not one. Such a URL is
    refused with this reason (which names the characters, never the password) instead of reaching a
    client whose error message would quote the fragment.

    `numeric_path`: a Redis URL, whose path can only be a number (a database): an '@' anywhere but
    in a file option's value is a password's (`redis://user:6/ss@host`, `redis://u:?x=1@host`)."""
    m = _SCHEME.match(url)
    if m is None:
        return None
    rest = url[m.end():]
    cut = re.search(r"[/?#]", rest)
    authority_end = cut.start() if cut else len(rest)
    if rest.rfind("@") < authority_end:
        return None      # every '@' is in the host part (the credentials whole), or there is none
    # An '@' after where urllib ends the host part: a password's, unless it sits where the URL may hold one.
    authority, after = rest[:authority_end], rest[authority_end:]
    host = authority.rpartition("@")[2]      # what urllib takes for the host and port
    plain = True
    if numeric_path:
        # A host, a database number, then options: an '@' belongs to the URL only in the value of an
        # option naming a file (`ssl_ca_certs=/home/me@corp/ca.pem`).
        query = after.partition("?")[2]
        plain = (bool(host.split(":", 1)[0]) and _DB_QUERY.fullmatch(after) is not None
                 and all("@" not in pair or pair.partition("=")[0] in _FILE_OPTIONS for pair in query.split("&")))
    if plain and _HOST_PORT.fullmatch(host):
        return None      # a host and port, then an '@' in the path or query: read as written
    found = sorted({c for c in rest[:rest.rfind("@")] if c in "/?#"})
    codes = {"/": "%2F", "?": "%3F", "#": "%23"}
    return ("the user name or password holds " + " and ".join(repr(c) for c in found) + " unescaped: write "
            + ", ".join(f"{c} as {codes[c]}" for c in found) + " (percent-encoding)")
