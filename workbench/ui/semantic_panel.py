"""The semantic-cache panel, shared by both hosts (no UI library): replay the session's earlier turns
into a semantic cache (each turn's context stored with the reply that followed it), then look the
selected turn up: the decision, why, and the nearest entries with their similarity and fingerprint
comparison."""

from __future__ import annotations

import hashlib
from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..assembly import Assembler
    from ..semantic.cache import Decision, SemanticCache

SESSION = "this-session"


def _messages(asm: "Assembler", request: dict) -> list[dict]:
    conv = asm.prepare(request)[0]
    return [{"role": m.role, "content": m.content or ""} for m in conv.messages if m.role in ("user", "assistant")]


def replay(cache: "SemanticCache", asm: "Assembler", requests: list[dict], turn: int) -> "Decision":
    """Store turns 1..turn-1 (context up to the turn's user message, payload: the reply that followed)
    and look turn `turn` up. Versions: the template, the tokenizer and the system prompt."""
    conv = asm.prepare(requests[turn - 1])[0]
    system = "\n".join(m.content or "" for m in conv.messages if m.role == "system")
    versions = {"model": asm.template.name, "tokenizer": asm.tokenizer.version[:16],
                "system_prompt": hashlib.sha256(system.encode()).hexdigest()[:16], "knowledge": "-"}
    cache.invalidate_session(SESSION)
    for k in range(1, turn):
        msgs = _messages(asm, requests[k - 1])
        nxt = _messages(asm, requests[k]) if k < len(requests) else []
        reply = nxt[len(msgs)]["content"] if len(nxt) > len(msgs) and nxt[len(msgs)]["role"] == "assistant" else ""
        if msgs and msgs[-1]["role"] == "user":
            cache.observe(SESSION, msgs[-1])
            cache.put(SESSION, msgs, {"type": "answer", "text": reply[:500]}, versions)
    msgs = _messages(asm, requests[turn - 1])
    if not msgs or msgs[-1]["role"] != "user":
        from ..errors import WorkbenchError
        raise WorkbenchError(f"turn {turn} does not end with a user message: nothing to look up")
    return cache.lookup(SESSION, msgs, versions, k=5)


def semantic_html(decision: "Decision | None", cache: "SemanticCache | None" = None, note: str = "") -> str:
    if decision is None:
        prompt = "Replay the earlier turns into a semantic cache and look this turn up."
        return f'<div class="wb-semantic">{escape(note) or prompt}</div>'
    d = decision
    verdict = "HIT" if d.hit else ("SHADOW" if d.shadow else "MISS")
    th = f" (thresholds high {cache.thresholds.high}, low {cache.thresholds.low}; {cache.embedder.name}, window " \
         f"{cache.window})" if cache is not None else ""
    fp = d.fingerprint.to_json()
    rows = "".join(
        f"<tr><td>{n.similarity:.3f}</td><td>{'agree' if n.fingerprint_agrees else 'differ'}</td>"
        f"<td>{escape('; '.join(n.differences)) or '-'}</td><td>{escape(n.state)}</td>"
        f"<td>{escape(n.why)}</td><td>{escape(n.context_text[-160:])}</td></tr>" for n in d.nearest)
    return (f'<div class="wb-semantic"><p><b class="wb-semantic-verdict">{verdict}</b>: '
            f"{escape(d.reason)}{escape(th)}</p>"
            f"<p>This turn's fingerprint: action <code>{escape(fp['action'] or '-')}</code>, entities "
            f"<code>{escape(', '.join(fp['entities']) or '-')}</code>, "
            f"asks <code>{escape('/'.join(fp['asks']) or 'how')}"
            f"</code>, negated {fp['negated']}, correction "
            f"{fp['correction']}. Embedding {d.embed_ms:.1f} ms, search {d.search_ms:.2f} ms.</p>"
            f'<table class="wb-table"><tr><th>similarity</th><th>fingerprint</th><th>differences</th><th>state</th>'
            f"<th>its verdict</th><th>cached context</th></tr>{rows}</table>{escape(note)}</div>")
