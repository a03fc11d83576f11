"""An incident investigation that overflows a 32k window: the engineer pastes log slices drawn
at random in four formats (checkout-web JSON lines, payments-adapter Java logs, edge-proxy access
logs, the Postgres slow log); the assistant's observations are computed from each slice."""

from __future__ import annotations

import datetime as dt
import json
import random
from typing import Any

from .common import FENCE, Session, args_json, pick, random_id, tool_call, wrap_join


def _ts(base: int, offset_ms: int) -> str:
    t = dt.datetime.fromtimestamp(base + offset_ms / 1000, dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _checkout(rng: random.Random, ts: str, failing: bool, pods: list[str]) -> tuple[str, int, int, str]:
    route = rng.choice(["/api/checkout/confirm", "/api/checkout/confirm", "/api/cart", "/api/checkout/quote",
                        "/api/payment-methods"])
    if failing and route in ("/api/cart", "/api/payment-methods"):
        route = "/api/checkout/confirm"
    status = rng.choice([502, 504, 504]) if failing else rng.choice([200, 200, 200, 201])
    dur = ((5000 + rng.randint(0, 12) if status == 504 else rng.randint(2000, 4300)) if status >= 500
           else rng.randint(18, 420))
    msg = {502: "upstream payments-adapter returned bad gateway",
           504: "upstream timeout after 5000ms"}.get(status, "request completed")
    line = json.dumps({"ts": ts, "level": "error" if status >= 500 else "info", "service": "checkout-web",
                       "pod": rng.choice(pods), "trace_id": _hex(rng, 32),
                       "route": route, "status": status, "duration_ms": dur, "msg": msg})
    return line, status, dur, msg


def _payments(rng: random.Random, ts: str, failing: bool) -> tuple[str, int, int, str]:
    if failing:
        waiting = rng.randint(12, 64)
        msg = ("HikariPool-1 - Connection is not available, request timed out after 2000ms "
               f"(total=10, active=10, idle=0, waiting={waiting})")
        lvl, status, dur = "WARN ", 503, 2000 + rng.randint(0, 40)
    else:
        dur = rng.randint(35, 900)
        msg = f"POST /v2/authorize provider={rng.choice(['adyen', 'adyen', 'stripe'])} result=approved duration={dur}ms"
        lvl, status = "INFO ", 200
    cls = "DbGateway" if failing else rng.choice(["AuthorizeController", "ProviderClient"])
    return f"{ts} {lvl} [http-nio-8080-exec-{rng.randint(1, 200)}] c.l.payments.{cls} - {msg}", status, dur, msg


def _edge(rng: random.Random, ts: str, failing: bool) -> tuple[str, int, int, str]:
    status = rng.choice([502, 504, 503]) if failing else rng.choice([200, 200, 200, 204, 301, 404])
    dur = rng.randint(2000, 5000) if status >= 500 else rng.randint(3, 380)
    ip = f"{rng.randint(11, 223)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    path = rng.choice(["/api/checkout/confirm", "/api/cart", "/static/app.4f2c1e.js", "/api/checkout/quote",
                       "/api/search?q=grinder", "/healthz"])
    line = (f"[{ts}] {ip} \"{rng.choice(['GET', 'POST'])} {path} HTTP/2\" {status} {rng.randint(120, 48000)} "
            f"rt={dur / 1000:.3f} uct=0.001 urt={max(0, dur - 2) / 1000:.3f} upstream=checkout-web:8080 "
            f"req_id={_hex(rng, 16)}")
    return line, status, dur, str(status)


def _postgres(rng: random.Random, ts: str, failing: bool) -> tuple[str, int, int, str]:
    status = 500 if failing else 200
    dur = rng.randint(900, 4800) if failing else rng.randint(2, 120)
    stmt = rng.choice(["SELECT * FROM payment_intents WHERE merchant_id = $1 AND status = $2 "
                       "ORDER BY created_at DESC LIMIT 50",
                       "UPDATE payment_intents SET status = $1, updated_at = now() WHERE id = $2",
                       "INSERT INTO authorization_attempts (intent_id, provider, result, latency_ms) "
                       "VALUES ($1, $2, $3, $4)",
                       "SELECT count(*) FROM payment_intents WHERE status = 'pending' "
                       "AND created_at > now() - interval '1 hour'"])
    line = (f"{ts[:-1].replace('T', ' ')} UTC [{rng.randint(20000, 39999)}] payments@payments_db LOG:  "
            f"duration: {dur}.{rng.randint(100, 999)} ms  statement: {stmt}")
    return line, status, dur, str(status)


def _log_block(rng: random.Random, kind: str, start: int, n: int, bad: float) -> tuple[str, dict[str, Any]]:
    """n log lines of one kind, a share *bad* of them failing; (text, figures for the reply)."""
    lines, statuses, durations = [], [], []
    off = 0
    first = None
    pods = [f"checkout-web-7d9f{_hex(rng, 5)}-{_hex(rng, 5)}" for _ in range(4)]  # drawn for every kind
    for _ in range(n):
        off += rng.randint(150, 4200)
        ts = _ts(start, off)
        first = first if first is not None else off
        failing = rng.random() < bad
        if kind == "checkout":
            line, status, dur, _ = _checkout(rng, ts, failing, pods)
        else:
            line, status, dur, _ = {"payments": _payments, "edge": _edge, "postgres": _postgres}[kind](rng, ts, failing)
        lines.append(line)
        statuses.append(status)
        durations.append(dur)
    d = sorted(durations)
    stats = {"n": n, "first": _ts(start, first or 0)[11:19], "last": _ts(start, off)[11:19],
             "errors": sum(1 for s in statuses if s >= 500), "p50": d[len(d) // 2],
             "p99": d[min(len(d) - 1, int(len(d) * 0.99))], "max": d[-1]}
    return "\n".join(lines), stats


def _metrics_exchange(rng: random.Random, step: dict[str, Any]) -> list[dict[str, Any]]:
    """The query_metrics call, its drawn series (pending connections per pod, one point a
    minute from 13:45, high while the small pool was live) and the written reading of it."""
    m = step["metrics"]
    cid = random_id(rng)
    series = []
    for _ in range(6):
        pod = f"payments-adapter-5c8b{_hex(rng, 5)}-{_hex(rng, 5)}"
        vals = []
        for k in range(61):
            minute = 45 + k  # minutes after 13:00
            if 53 <= minute < 88:
                v = rng.randint(8, 60) if minute > 55 else rng.randint(0, 6)
            else:
                v = rng.choice([0, 0, 0, 1])
            vals.append([1781185500 + 60 * k, str(v)])
        series.append({"metric": {"pod": pod, "service": "payments-adapter"}, "values": vals})
    result = {"status": "success", "data": {"resultType": "matrix", "result": series}}
    return [{"role": "user", "content": step["user"]},
            {"role": "assistant", "content": m["assistant"], "tool_calls": [tool_call(cid, m["tool"], m["args"])]},
            {"role": "tool", "tool_call_id": cid, "content": args_json(result)},
            {"role": "assistant", "content": m["reading"]}]


def incident_logs(session: Session, spec: dict[str, Any], rng: random.Random) -> Session:
    messages: list[dict[str, Any]] = [{"role": "system", "content": spec["system"]}]
    for step in spec["steps"]:
        if "metrics" in step:
            messages += _metrics_exchange(rng, step)
            continue
        kind = step["logs"]
        block, st = _log_block(rng, kind, spec["start"] + step["offset"],
                               spec["lines_per_block"] + rng.randint(-4, 6), step["bad"])
        messages.append({"role": "user", "content": f"{step['user']}\n\n{FENCE}\n{block}\n{FENCE}"})
        obs = spec["observations"][kind].format(pct=round(100 * st["errors"] / st["n"]), **st)
        extra = pick(rng, spec["hypotheses"], rng.randint(1, 2))
        messages.append({"role": "assistant", "content": f"{obs}\n\n{step['takeaway']}\n\n{wrap_join(extra)}"})
    messages.append({"role": "user", "content": spec["last_user"]})
    return {"messages": messages}
