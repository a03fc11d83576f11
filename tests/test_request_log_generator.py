"""tools/make_request_logs.py: synthetic request logs (SPEC 7.1) with known breakers and exact ground truth.

The generator runs as a user runs it (its own process). Its lines must be SPEC 7.1 request logs in
both shapes, the same seed must write the same bytes, each injected breaker must be in the log where
the ground truth says it is, and the ground truth's per-turn figures must equal an independent
computation on the official path: the models' own chat templates rendered by transformers on the raw
requests (tests/oracles.py: Anthropic requests read as the OpenAI requests they stand for, then handed
over as transformers does) and the official tokenizers (Meta's llama-models, the Qwen2 GGUF
vocabulary), with no workbench intake, cleaning, template or tokenizer on that side.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from datetime import datetime
from itertools import groupby
from pathlib import Path

import pytest
from oracles import anthropic_to_openai, hf_chat, official_template
from test_exact_llama import BOS, L31, LLAMA3_OFFICIAL
from test_exact_qwen import gguf_tokenizer
from transformers.utils.chat_template_utils import render_jinja_template

from workbench import Assembler
from workbench.templates.registry import shipped_names

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "make_request_logs.py"
sys.path.insert(0, str(ROOT / "tools"))
from request_logs.timeline import Plan  # noqa: E402

# Small enough to generate in seconds, large enough that every breaker occurs (seed 3 has them all).
SIZE = ("--requests", "1500", "--sessions", "150", "--seed", "3")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=False)


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("logs") / "out"
    done = run(*SIZE, "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


def read_lines(folder: Path) -> list[tuple[str, dict]]:
    """(file name, parsed line) for every line of every log file."""
    out = []
    for f in sorted((folder / "logs").glob("*.jsonl")):
        out += [(f.name, json.loads(line)) for line in f.read_text(encoding="utf-8").splitlines()]
    return out


def conversations(folder: Path) -> dict[str, list[tuple[str, dict]]]:
    by: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    for name, line in read_lines(folder):
        by[line["conversation_id"]].append((name, line))
    for v in by.values():
        v.sort(key=lambda x: x[1]["timestamp"])
    return by


def turns(folder: Path) -> dict[tuple[str, int], dict]:
    rows = [json.loads(x) for x in (folder / "ground_truth_turns.jsonl").read_text().splitlines()]
    return {(r["conversation_id"], r["turn"]): r for r in rows}


def truth(folder: Path) -> dict:
    return json.loads((folder / "ground_truth.json").read_text())


def is_anthropic(req: dict) -> bool:
    return "max_tokens" in req and all(m["role"] in ("user", "assistant") for m in req["messages"])


# ----------------------------------------------------------------------------- the format
def test_lines_are_spec_request_logs_in_both_shapes(logs):
    lines = read_lines(logs)
    assert len(lines) == 1500
    shapes = {"openai": 0, "anthropic": 0}
    for _, line in lines:
        assert {"conversation_id", "timestamp", "request"} <= set(line)
        assert isinstance(line["conversation_id"], str) and line["conversation_id"]
        assert datetime.fromisoformat(line["timestamp"]).tzinfo is not None
        assert line["template"] in shipped_names()
        shapes["anthropic" if is_anthropic(line["request"]) else "openai"] += 1
    assert shapes["openai"] > 300 and shapes["anthropic"] > 150, shapes
    # Tool use in both shapes: OpenAI tool_calls and tool messages, Anthropic tool_use and tool_result blocks.
    text = "\n".join(json.dumps(x[1]) for x in lines)
    for marker in ('"tool_calls"', '"role": "tool"', '"type": "tool_use"', '"type": "tool_result"',
                   '"input_schema"', '"parameters"'):
        assert marker in text, marker
    # The workbench reads them without an error diagnostic (the first request of each client and template).
    seen: set[tuple[str, str]] = set()
    for _, line in lines:
        key = (line["client"], line["template"])
        if key in seen:
            continue
        seen.add(key)
        res = Assembler(template=line["template"], cache=None).assemble(line["request"])
        assert not [d for d in res.diagnostics if d.level == "error"], key


def test_files_are_in_time_order_and_conversations_interleave(logs):
    by_file: dict[str, list[dict]] = defaultdict(list)
    for name, line in read_lines(logs):
        by_file[name].append(line)
    assert len(by_file) >= 4 * 7          # four hosts, seven days
    interleaved: set[str] = set()
    for name, lines in by_file.items():
        stamps = [x["timestamp"] for x in lines]
        assert stamps == sorted(stamps), name
        assert all(s.startswith(name.split("-host")[0].removeprefix("requests-")) for s in stamps), name
        # A conversation whose lines in one file come in two runs or more had others' lines in between.
        runs = [cid for cid, _ in groupby(x["conversation_id"] for x in lines)]
        interleaved |= {cid for cid in runs if runs.count(cid) > 1}
    assert len(interleaved) >= 15        # a tenth of the conversations, in a sparse 150-session week
    convs = conversations(logs)
    assert len(convs) == 150
    spread = [c for c in convs.values() if len({name for name, _ in c}) > 1]
    assert len(spread) > 50               # a conversation's calls land on several hosts
    for c in convs.values():              # strictly increasing times within a conversation
        stamps = [x[1]["timestamp"] for x in c]
        assert len(set(stamps)) == len(stamps)


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    outs = []
    for i, seed in enumerate(("5", "5", "6")):
        out = tmp_path / f"o{i}"
        done = run("--requests", "300", "--sessions", "40", "--seed", seed, "--out", str(out))
        assert done.returncode == 0, done.stderr
        outs.append({p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
                     if p.is_file() and p.name != "generation.json"})
    assert outs[0] == outs[1]
    assert outs[0]["ground_truth.json"] != outs[2]["ground_truth.json"]
    assert set(outs[0]) >= {"ground_truth.json", "ground_truth_turns.jsonl"}


# ----------------------------------------------------------------------------- the breakers
def test_ground_truth_adds_up_and_every_breaker_occurs(logs):
    t, rows = truth(logs), list(turns(logs).values())
    assert (t["requests"], t["sessions"], t["turns"]) == (1500, 150, 1350)
    assert len(rows) == 1500
    assert t["unattributed_lost_tokens"] == 0 and t["unattributed_turns"] == 0
    assert t["total_lost_tokens"] == sum(r["lost_tokens"] for r in rows) > 0
    for b in t["breakers"]:
        mine = [r for r in rows if r["breaker"] == b["name"]]
        assert b["turns"] == len(mine) > 0, b["name"]
        assert b["lost_tokens"] == sum(r["lost_tokens"] for r in mine) > 0
        assert b["sessions"] == len({r["conversation_id"] for r in mine}) <= b["designated_sessions"]
        assert b["share"] == pytest.approx(b["lost_tokens"] / t["total_lost_tokens"])
    assert sum(b["share"] for b in t["breakers"]) == pytest.approx(1.0)
    for r in rows:
        assert r["held_tokens"] - r["reused_tokens"] == r["lost_tokens"] >= 0
        assert (r["turn"] == 1) == (r["held_tokens"] == 0)


def _canonical_tools(req: dict) -> str:
    return json.dumps(req.get("tools"), sort_keys=True)


def _system(req: dict) -> str | None:
    if "system" in req:
        return req["system"]
    first = req["messages"][0]
    return first["content"] if first["role"] == "system" else None


def _user_texts(req: dict) -> list[str]:
    return [m["content"] for m in req["messages"] if m["role"] == "user" and isinstance(m["content"], str)]


def test_each_breaker_is_in_the_log_where_recorded(logs):
    t, rows, convs = truth(logs), turns(logs), conversations(logs)
    plan = Plan(1500, 150, 3)
    for cid, calls in convs.items():
        for k in range(1, len(calls)):
            (_, prev), (name, line) = calls[k - 1], calls[k]
            a, b, row = prev["request"], line["request"], rows[(cid, k + 1)]
            stamped = "Current time:" in (_system(b) or "")
            assert stamped == (line["client"] == "support-bot" and
                               calls[0][1]["timestamp"] >= t["dates"]["timestamp_in_system_prompt_from"])
            if row["breaker"] == "timestamp_in_system_prompt":
                assert _system(a) != _system(b) and stamped
            elif row["breaker"] == "tool_key_order_flip":
                assert json.dumps(a["tools"]) != json.dumps(b["tools"]) and _canonical_tools(a) == _canonical_tools(b)
            elif row["breaker"] == "template_upgrade":
                assert {prev["template"], line["template"]} == {"llama3", "llama3.1"}
            elif row["breaker"] == "edited_message":
                old, new = _user_texts(a), _user_texts(b)
                assert any(x != y for x, y in zip(old, new))
            elif row["breaker"] == "history_truncation":
                assert line["template"] == "llama3"
                assert Assembler(template="llama3", cache=None).assemble(b).dropped
            else:
                # Unbroken turns repeat the previous request exactly, then append.
                assert row["lost_tokens"] == 0
                assert prev["template"] == line["template"] and json.dumps(a.get("tools")) == json.dumps(b.get("tools"))
            # The template follows the host's rollout: the file says which host served the line.
            if line["request"]["model"].startswith("llama"):
                host = int(name.split("-host")[1].split(".")[0]) - 1
                ms = (datetime.fromisoformat(line["timestamp"]) - datetime.fromisoformat("2026-11-02T00:00:00+00:00"))
                newer = ms.total_seconds() * 1000 >= plan.upgrade_at(host)
                assert line["template"] == ("llama3.1" if newer else "llama3")


# ----------------------------------------------------------------------------- the official path
@pytest.fixture(scope="module")
def official_tokenizers():
    import llama_models.llama3 as pkg
    from llama_models.llama3.tokenizer import Tokenizer
    meta = Tokenizer(Path(pkg.__file__).parent / "tokenizer.model")
    qwen = gguf_tokenizer(151664)

    def llama(text: str) -> list[int]:
        return meta.encode(text, bos=False, eos=False, allowed_special="all")

    def qwen25(text: str) -> list[int]:
        return qwen.encode(text, add_special_tokens=False).ids

    return {"llama3": llama, "llama3.1": llama, "qwen2.5": qwen25}


SOURCES = {"llama3": lambda: LLAMA3_OFFICIAL, "llama3.1": lambda: official_template(L31),
           "qwen2.5": lambda: official_template("Qwen-Qwen2.5-7B-Instruct.jinja")}
EOS = {"llama3": "<|eot_id|>", "llama3.1": "<|eot_id|>", "qwen2.5": "<|im_end|>"}


def official(template: str, msgs: list[dict], tools: list[dict] | None, agp: bool) -> str:
    return render_jinja_template(conversations=[msgs], tools=tools, chat_template=SOURCES[template](),
                                 add_generation_prompt=agp, bos_token=BOS if template.startswith("llama") else None,
                                 eos_token=EOS[template])[0][0]


def template_view(req: dict) -> tuple[list[dict], list[dict] | None]:
    """The messages and tools a chat template is handed for a raw logged request, in either shape."""
    msgs, tools, _ = hf_chat(anthropic_to_openai(req) if is_anthropic(req) else req)
    return msgs, tools


def official_lost(calls: list[dict], encode) -> list[int]:
    """Tokens not reused per turn from 2 on: the previous official prompt's ids plus the reply's, as the
    previous template writes it up to its end-of-turn token, against this official prompt's ids."""
    out = []
    for prev, line in zip(calls, calls[1:]):
        tp, tn = prev["template"], line["template"]
        pm, ptools = template_view(prev["request"])
        nm, ntools = template_view(line["request"])
        prompt = official(tp, pm, ptools, True)
        generated = ""
        if len(nm) > len(pm) and nm[len(pm)]["role"] == "assistant":
            finished = official(tp, pm + [nm[len(pm)]], ptools, False)
            assert finished.startswith(prompt)
            generated = finished[len(prompt):]
            generated = generated[: generated.index(EOS[tp]) + len(EOS[tp])]
        held = encode[tp](prompt) + (encode[tp](generated) if generated else [])
        new = encode[tn](official(tn, nm, ntools, True))
        reused = next((i for i, (x, y) in enumerate(zip(held, new)) if x != y), min(len(held), len(new)))
        out.append(len(held) - reused)
    return out


CONTROLS = {"anthropic tools"}   # picked for its shape, whatever breaker it has (or none)


def test_ground_truth_equals_the_official_path(logs, official_tokenizers):
    rows, convs = turns(logs), conversations(logs)
    picked: dict[str, list[str]] = defaultdict(list)
    for (cid, _), r in rows.items():
        kind = r["breaker"]
        if kind and kind != "history_truncation" and cid not in picked[kind] and len(picked[kind]) < 2:
            picked[kind].append(cid)
    # A clean conversation of each served template as well (the official path has no truncation: the
    # truncated sessions are checked above by the workbench's own assembly dropping messages).
    for cid, calls in convs.items():
        tpl = calls[0][1]["template"]
        if len(calls) > 3 and all(rows[(cid, k)]["breaker"] is None for k in range(1, len(calls) + 1)) \
                and tpl in SOURCES and len(picked[f"clean {tpl}"]) < 1:
            picked[f"clean {tpl}"].append(cid)
    # And an Anthropic conversation with a tool round, so tool_use / tool_result blocks go through the
    # oracle's own conversion (none of the above may have one).
    for cid, calls in convs.items():
        reqs = [line["request"] for _, line in calls]
        if is_anthropic(reqs[0]) and calls[0][1]["template"] in SOURCES and '"tool_use"' in json.dumps(reqs[-1]) \
                and all(rows[(cid, k)]["breaker"] != "history_truncation" for k in range(1, len(calls) + 1)):
            picked["anthropic tools"].append(cid)
            break
    assert len([k for k in picked if k not in CONTROLS and not k.startswith("clean")]) == 4 and len(picked) >= 7, \
        dict(picked)
    checked = defaultdict(int)   # requests compared, by shape and whether they carry a tool round
    for kind, cids in picked.items():
        for cid in cids:
            calls = [line for _, line in convs[cid]]
            expected = [rows[(cid, k)]["lost_tokens"] for k in range(2, len(calls) + 1)]
            assert official_lost(calls, official_tokenizers) == expected, (kind, cid)
            if kind not in CONTROLS and not kind.startswith("clean"):
                assert any(expected)
            for c in calls:
                shape = "anthropic" if is_anthropic(c["request"]) else "openai"
                checked[shape, any(tc in json.dumps(c["request"]) for tc in ('"tool_calls"', '"tool_use"'))] += 1
    print(f"official path, requests checked by (shape, has a tool round): {dict(checked)}")
    # Both request shapes went through the oracle's own conversion, tool rounds included.
    assert all(checked[shape, tools] > 0 for shape in ("openai", "anthropic") for tools in (False, True)), checked


# ----------------------------------------------------------------------------- bad arguments
@pytest.mark.parametrize("args, says", [
    (("--requests", "0", "--sessions", "1"), "--requests"),
    (("--requests", "-5"), "--requests"),
    (("--requests", "10", "--sessions", "11"), "--sessions"),
    (("--requests", "10", "--sessions", "0"), "--sessions"),
    (("--requests", "700", "--sessions", "10"), "per session"),
    (("--requests", "ten"), "invalid int"),
    (("--days", "0"), "--days"),
    (("--bogus",), "unrecognized"),
])
def test_bad_arguments_get_one_error_line(tmp_path, args, says):
    done = run(*args, "--out", str(tmp_path / "new"))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error:") and says in done.stderr, done.stderr
    assert not (tmp_path / "new").exists()


def test_out_must_be_new_or_empty(tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    for out in (full, a_file):
        done = run("--requests", "20", "--sessions", "5", "--out", str(out))
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: --out"), done.stderr
    assert sorted(p.name for p in full.iterdir()) == ["keep.txt"] and a_file.read_text() == "x"
    done = run("--requests", "20", "--sessions", "5", "--out", str(a_file / "under-a-file"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and done.stderr.startswith("error: cannot write")
    done = run("--out")
    assert done.returncode == 2 and done.stderr.startswith("error:") and done.stderr.count("\n") == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run("--requests", "20", "--sessions", "5", "--out", str(empty)).returncode == 0
    assert (empty / "ground_truth.json").exists()
