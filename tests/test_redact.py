"""Credentials never echoed (issue 34, item 4): one formatter masks the user name and password of every
URL the workbench prints, however they are written (reserved characters raw or %-encoded), and the
Redis URLs' own error messages go through it.

The issue's case: a Redis URL whose password holds a literal '?' (`redis://user:pa?ss@host:6379/0`)
was echoed in the error, in the single-server and the cluster forms.
"""

from __future__ import annotations

from urllib.parse import quote

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.cache import TwoTierCache
from workbench.cache.cluster import parse_cluster_url
from workbench.errors import WorkbenchError
from workbench.redact import MASK, credentials_problem, has_credentials, redact_url

SECRET = b"redaction tests, 32 bytes long!!"
USER_MARK, PASS_MARK = "Usr7Q", "Pw9Zk"      # in no host, path or message: if they show, credentials leaked

# The characters that end or split a URL's parts, raw, around the marks.
RESERVED = st.text(alphabet="?#/@:%&=+;,$!*'()[]abc019._~-", max_size=6)


@st.composite
def credentials(draw: st.DrawFn) -> tuple[str, str, bool]:
    """(user, password, %-encoded?): each holding its mark between reserved characters."""
    user = draw(RESERVED) + USER_MARK + draw(RESERVED) if draw(st.booleans()) else ""
    password = draw(RESERVED) + PASS_MARK + draw(RESERVED)
    return user, password, draw(st.booleans())


HOSTS = st.one_of(
    st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z][a-z0-9-]{0,8}){0,2}", fullmatch=True),
    st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t))),
    st.just("[::1]"), st.just("[2001:db8::7]"))
PORTS = st.integers(1, 65535)


def userinfo(user: str, password: str, encoded: bool) -> str:
    if encoded:
        user, password = quote(user, safe=""), quote(password, safe="")
    return f"{user}:{password}@"


REACHED = {"single": 0, "cluster": 0, "text": 0}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cred=credentials(), host=HOSTS, port=PORTS, db=st.integers(0, 15))
def test_a_redis_url_error_never_shows_the_credentials(cred, host, port, db):
    user, password, encoded = cred
    url = f"redis://{userinfo(user, password, encoded)}{host}:{port}/{db}?socket_timeout=abc"
    shown = redact_url(url)
    assert USER_MARK not in shown and PASS_MARK not in shown
    assert shown == f"redis://{MASK}@{host}:{port}/{db}?socket_timeout=abc"     # all else as written
    with pytest.raises(WorkbenchError, match="the Redis URL is not valid") as e:
        TwoTierCache(redis_url=url, secret=SECRET)     # a bad option, or a password that needs escaping
    message = str(e.value)
    assert USER_MARK not in message and PASS_MARK not in message, message
    assert f"{host}:{port}" in message
    REACHED["single"] += 1


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cred=credentials(), nodes=st.lists(st.tuples(HOSTS, PORTS), min_size=1, max_size=3),
       tls=st.booleans())
def test_a_cluster_url_error_never_shows_the_credentials(cred, nodes, tls):
    user, password, encoded = cred
    hosts = ",".join(f"{h}:{p}" for h, p in nodes)
    url = f"redis{'s' if tls else ''}+cluster://{userinfo(user, password, encoded)}{hosts}/?read_from_replicas=maybe"
    with pytest.raises(WorkbenchError, match="read_from_replicas='maybe'") as e:
        TwoTierCache(redis_url=url, secret=SECRET)
    message = str(e.value)
    assert USER_MARK not in message and PASS_MARK not in message, message
    assert hosts in message
    # and the parse keeps the credentials in them (all of them when %-encoded: raw, a ':' in the user
    # name or a '%' are ambiguous), none of them in the hosts
    parsed = parse_cluster_url(url.replace("maybe", "yes"))
    if encoded:
        assert (parsed.username or "", parsed.password) == (user, password)
    assert PASS_MARK in (parsed.password or "") + (parsed.username or "")
    assert tuple((h.strip("[]"), p) for h, p in nodes) == parsed.nodes
    assert PASS_MARK not in repr(parsed) and PASS_MARK not in parsed.redacted()
    REACHED["cluster"] += 1


@settings(max_examples=200, deadline=None)
@given(cred=credentials(), host=HOSTS, port=PORTS,
       scheme=st.sampled_from(["redis", "rediss", "http", "https", "redis+cluster"]),
       before=st.sampled_from(["upstream ", "(in '", "url=", ""]), after=st.sampled_from(["", "')", " refused", "/v1"]))
def test_urls_inside_text_are_masked_and_the_rest_kept(cred, host, port, scheme, before, after):
    user, password, encoded = cred
    url = f"{scheme}://{userinfo(user, password, encoded)}{host}:{port}"
    second = f"{scheme}://{host}:{port}/plain"
    text = f"{before}{url}{after} then {second}"
    shown = redact_url(text)
    assert USER_MARK not in shown and PASS_MARK not in shown
    assert shown == f"{before}{scheme}://{MASK}@{host}:{port}{after} then {second}"
    REACHED["text"] += 1


def test_the_redaction_properties_reached_their_checks():
    print(f"redaction examples: {REACHED}")
    assert min(REACHED.values()) >= 100


# ---- the issue's cases and the forms around them ------------------------------------------------

@pytest.mark.parametrize("url", [
    "redis://Usr7Q:Pw9?Zk@host:6379/0",    # the issue's: before, "Port could not be cast to integer value as 'Pw9'"
    "redis://:Pw9?Zk@host:6379/0",
    "rediss://Usr7Q:Pw9#Zk@host:6380/0",
    "redis://Usr7Q:6/Pw9Zk@host:6379/0",   # reads as host 'Usr7Q', port 6: the '/' is still the password's
    "redis://Usr7Q:?x=Pw9Zk@host:6379/0",  # reads as an option x: an '@' in an option only in a file's path
])
def test_the_issue_url_is_refused_naming_the_characters_not_the_password(url):
    with pytest.raises(WorkbenchError) as e:
        TwoTierCache(redis_url=url, secret=SECRET)
    message = str(e.value)
    assert "Pw9" not in message and "Zk" not in message and "Usr7Q" not in message
    assert "unescaped: write" in message and "(percent-encoding)" in message and "@host:63" in message


def test_the_issue_cluster_url_is_read_with_its_password_whole():
    u = parse_cluster_url("redis+cluster://user:pa?ss@h1:7000,h2:7000/?read_from_replicas=yes")
    assert (u.username, u.password, u.nodes, u.read_from_replicas) == ("user", "pa?ss", (("h1", 7000), ("h2", 7000)),
                                                                      True)
    assert u.redacted() == "redis+cluster://***@h1:7000,h2:7000/"
    with pytest.raises(WorkbenchError) as e:
        parse_cluster_url("redis+cluster://user:pa?ss@h1:7000,h2:x/")
    assert "pa?ss" not in str(e.value) and "'h2:x'" in str(e.value)


@pytest.mark.parametrize("text, shown", [
    ("redis://u:p@h:6379/0", "redis://***@h:6379/0"),
    ("redis://h:6379/0", "redis://h:6379/0"),                                       # nothing to mask
    ("redis://@h:6379/0", "redis://@h:6379/0"),
    ("redis://:p1@h1:26379,redis://:p2@h2:26379", "redis://***@h1:26379,redis://***@h2:26379"),   # a list
    ("unix://u:p@/run/redis.sock?db=1", "unix://***@/run/redis.sock?db=1"),
    ("redis://u:p w@h:6379/0", "redis://***@h:6379/0"),                             # a URL alone: spaces too
    ("redis://u:pw@[::1:6379/0", "redis://***@[::1:6379/0"),                        # does not parse
    ("redis://u:pw@h:port/0", "redis://***@h:port/0"),
    ("redis://u:a://b@h", "redis://***@h"),                                         # '://' in a password
    ("redis://:Pw;a://x@h:1", "redis://***@h:1"),                                   # ';a://' too
    ("redis://h1:1,redis://:p@h2:2", "redis://***@h2:2"),   # a URL without '@' runs on: h1 masked, never p
    ("https://ghp_t0ken@github.com/o/r.git", "https://***@github.com/o/r.git"),      # a token as the user
    ("error at https://u:p@api.example.com/v1, retrying", "error at https://***@api.example.com/v1, retrying"),
    ("no url here: user:pw@host", "no url here: user:pw@host"),                     # no scheme, no URL
])
def test_examples(text, shown):
    assert redact_url(text) == shown
    assert has_credentials(text) == (text != shown)


def test_an_at_in_a_path_masks_more_never_less():
    # Credentials end at the last '@': a path holding one is masked with them (the host too).
    assert redact_url("http://host/models/a@b") == "http://***@b"


@pytest.mark.parametrize("url, problem", [
    ("redis://u:pa?ss@h:6379/0", "'?' unescaped: write ? as %3F"),
    ("redis://u:p/a#b@h:6379/0", "'#' and '/' unescaped"),
    ("redis://u:pa%3Fss@h:6379/0", None),                   # escaped: read as written
    ("redis://u:p@ss@h:6379/0", None),                      # '@' raw: urllib takes the last one too
    ("rediss://h:6380/0?ssl_ca_certs=/a@b/ca.pem", None),   # an '@' in the query, after a host and port
    ("redis://h:6379/0", None),
])
def test_credentials_problem(url, problem):
    got = credentials_problem(url, numeric_path=True)
    assert (got is None) if problem is None else (problem in (got or "")), got


def test_a_socket_path_may_hold_an_at():
    assert credentials_problem("unix:///run/r@x.sock", numeric_path=False) is None


# --------------------------------------------------------------- outside the cache: every URL a message names
SECRET_PW = "s3cret?pw"


def test_the_recorder_never_echoes_its_upstreams_credentials(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from workbench.capture.record import RecordConfig, RecordError
    with pytest.raises(RecordError) as caught:
        RecordConfig(upstream=f"ftp://user:{SECRET_PW}@example.com", log=tmp_path / "calls.jsonl")
    assert "s3cret" not in str(caught.value) and "example.com" in str(caught.value)


def test_a_remote_engine_never_echoes_its_urls_credentials() -> None:
    from workbench.engine.remote import RemoteEngine
    from workbench.errors import EngineError
    with pytest.raises(EngineError) as caught:    # nothing listens on port 1 here
        RemoteEngine(f"http://user:{quote(SECRET_PW, safe='')}@127.0.0.1:1", model="m").prefill(np.asarray([1]))
    text = str(caught.value)
    assert "s3cret" not in text and "127.0.0.1:1" in text


@pytest.mark.parametrize("url", [f"redis://user:{SECRET_PW}@cache.internal:6379/0",
                                 f"redis://user:{quote(SECRET_PW, safe='')}@cache.internal:99999/0"])
def test_the_semantic_caches_redis_url_never_echoes_its_password(url: str) -> None:
    from workbench.semantic.store import RedisSemanticStore
    with pytest.raises(WorkbenchError) as caught:
        RedisSemanticStore(url)
    text = f"{caught.value} {caught.value.hint or ''}"
    assert "s3cret" not in text and "cache.internal" in text
