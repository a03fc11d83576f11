"""Session loading (issue 14, case 5): a conversation's turns are views built on access, so
loading costs memory linear in the messages (it was quadratic: 10k messages took 312 MB, 20k
908 MB, 100k about 20 GB). And a session file gets the same strict JSON as a request."""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path

import pytest

from workbench.errors import SessionFileError
from workbench.sessions import Turns, conversation_turns, load_session, parse_session

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "sample_sessions").glob("*.json"))


def write_conversation(path: Path, n: int) -> Path:
    msgs = [{"role": "system", "content": "You are a support agent."}]
    for i in range(1, n):
        role = "user" if i % 2 else "assistant"
        msgs.append({"role": role, "content": f"message {i}: " + "words and more words " * 4})
    path.write_text(json.dumps({"title": "long", "messages": msgs}), encoding="utf-8")
    return path


def load_peak(path: Path) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        s = load_session(path)
        assert len(s.turn(None)["messages"]) > 0
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def eager_turns(req: dict) -> list[dict]:
    """The old implementation (every turn a slice, built up front): the reference for equality."""
    msgs = req.get("messages")
    if not isinstance(msgs, list):
        return [req]
    base = {k: v for k, v in req.items() if k not in ("messages", "title", "description")}
    turns = [{**base, "messages": msgs[:i]} for i, m in enumerate(msgs)
             if isinstance(m, dict) and m.get("role") == "assistant" and i > 0]
    if not turns or len(turns[-1]["messages"]) != len(msgs):
        turns.append({**base, "messages": msgs})
    return turns


def test_loading_memory_grows_linearly(tmp_path: Path):
    peaks = {n: load_peak(write_conversation(tmp_path / f"s{n}.json", n)) for n in (10_000, 20_000, 40_000)}
    r1, r2 = peaks[20_000] / peaks[10_000], peaks[40_000] / peaks[20_000]
    # Linear: about 2 per doubling (quadratic was about 4). The file's text and its parse dominate.
    assert r1 < 2.6 and r2 < 2.6, f"peaks {peaks}: ratios {r1:.2f}, {r2:.2f}"
    assert peaks[40_000] < 150 * 2**20, f"40k messages took {peaks[40_000] / 2**20:.0f} MiB"


def test_100k_messages_load_in_linear_memory(tmp_path: Path):
    path = write_conversation(tmp_path / "s100k.json", 100_000)
    size = path.stat().st_size
    peak = load_peak(path)
    s = load_session(path)
    assert len(s.turns) == 50_000
    assert len(s.turns[-1]["messages"]) == 100_000
    # The old loader built 50,000 slices: about 20 GB. Linear: a small multiple of the file.
    assert peak < 12 * size, f"peak {peak / 2**20:.0f} MiB for a {size / 2**20:.0f} MiB file"


def test_turns_are_built_on_access_and_equal_the_old_ones():
    for path in SAMPLES:
        s = load_session(path)
        if "requests" in s.raw:
            continue
        req = {k: v for k, v in s.raw.items() if k not in ("title", "description")}
        req["format"] = s.format
        old = eager_turns(req)
        assert list(s.turns) == old, path.name
        assert len(s.turns) == len(old)
        assert s.turns[-1] == old[-1] and s.turns[0] == old[0]
        assert s.turns[1:3] == old[1:3] and s.turns[::-1] == old[::-1]
        assert s.turn(None) == old[-1] and s.turn(1) == old[0]


def test_a_turn_shares_the_files_messages():
    """No copy of a message: a turn's list holds the file's own message objects."""
    s = load_session(ROOT / "sample_sessions" / "support_chat.json")
    last, first = s.turns[-1], s.turns[0]
    assert last["messages"] is s.raw["messages"]
    assert all(a is b for a, b in zip(first["messages"], s.raw["messages"]))


def test_turns_map_is_lazy():
    seen: list[int] = []
    turns = conversation_turns({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                             {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]})
    mapped = turns.map(lambda r: seen.append(len(r["messages"])) or {**r, "x": 1})
    assert seen == [] and len(mapped) == 3
    assert mapped[1] == {"messages": turns[1]["messages"], "x": 1} and seen == [3]
    with pytest.raises(IndexError):
        mapped[3]
    assert isinstance(mapped, Turns) and repr(mapped) == "<3 turns>"


def test_log_sessions_keep_their_requests():
    s = load_session(ROOT / "sample_sessions" / "timestamp_system.json")
    assert len(s.turns) == len(s.raw["requests"])
    assert all(t["messages"] == r["messages"] and t["format"] for t, r in zip(s.turns, s.raw["requests"]))


# A session file is read with strict JSON: each of these used to crash the CLI or load silently.
FILES = [
    ("deep_10000", '{"messages": [{"role": "user", "content": "hi"}], "x": ' + "[" * 10_000 + "]" * 10_000 + "}",
     ["f.json", "nested more than 200 levels deep at line 1, column"]),
    ("deep_3000_in_a_log", '{"requests": [{"messages": [{"role": "user", "content": "x"}], "y": '
     + "[" * 3000 + "]" * 3000 + "}]}", ["nested more than 200"]),
    ("int_5000_digits", '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": ' + "1" * 5000 + "}",
     ["f.json", "an integer longer than 100 digits at line 1"]),
    ("nan", '{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}',
     ["f.json", "NaN is not a JSON number at line 1"]),
    ("infinity_in_tools", '{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", '
     '"function": {"name": "f", "parameters": {"maximum": Infinity}}}]}', ["Infinity is not a JSON number"]),
    ("lone_surrogate_id", '{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": null, '
     '"tool_calls": [{"id": "a\\ud800", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}',
     ["f.json", "messages[1].tool_calls[0].id", "surrogate"]),
    ("lone_surrogate_title", '{"title": "t\\udc00", "messages": [{"role": "user", "content": "x"}]}',
     ["f.json", "title", "surrogate"]),
    ("context_window_8k", '{"context_window": "8k", "messages": [{"role": "user", "content": "x"}]}',
     ["f.json", "context_window", "positive integer", "'8k'"]),
    ("context_window_true", '{"context_window": true, "messages": [{"role": "user", "content": "x"}]}',
     ["context_window", "True"]),
    ("title_a_list", '{"title": ["x"], "messages": [{"role": "user", "content": "x"}]}', ["title", "string"]),
    ("unknown_format", '{"format": "gemini", "requests": [{"messages": []}]}', ["format", "gemini"]),
    ("request_not_object", '{"requests": [{"messages": []}, 5]}', ["requests[1]", "object"]),
    ("a_list", "[1, 2]", ["JSON object", "list"]),
]


@pytest.mark.parametrize("text,fragments", [f[1:] for f in FILES], ids=[f[0] for f in FILES])
def test_bad_session_files_get_a_session_file_error(tmp_path: Path, text: str, fragments: list[str]):
    path = tmp_path / "f.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SessionFileError) as info:
        load_session(path)
    for f in fragments:
        assert f in str(info.value), f"{f!r} not in {str(info.value)!r}"


def test_parse_session_refuses_the_same_in_memory():
    with pytest.raises(SessionFileError, match=r"messages\[0\]\.content: not a finite number"):
        parse_session({"messages": [{"role": "user", "content": float("nan")}]})
    with pytest.raises(SessionFileError, match="context_window"):
        parse_session({"messages": [{"role": "user", "content": "x"}], "context_window": "8k"}, "s.json")
    assert parse_session({"messages": [{"role": "user", "content": "x"}], "context_window": 8192}).turn(None)
