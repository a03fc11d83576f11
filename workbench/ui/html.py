"""Small HTML views shared by both hosts (plain strings, every value escaped): the summary line,
diagnostics, the cache panel's table and the prefix diff."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

from .reconcile_view import reconcile_html

if TYPE_CHECKING:
    from ..analysis.providers import Simulation
    from ..assembly.result import AssemblyResult
    from .state import Panels

CSS = """
.wb-app-header { font-family: system-ui, sans-serif; font-size: 13px; padding: 4px 0; }
.wb-diags { font-size: 12.5px; margin: 0; padding-left: 18px; }
.wb-diag-warning { color: #9a6700; } .wb-diag-error { color: #b42318; }
.wb-table { border-collapse: collapse; font-size: 12.5px; margin: 4px 0 8px 0; }
.wb-table td, .wb-table th { border: 1px solid #d0d7de; padding: 2px 8px; text-align: right; }
.wb-table th { background: #f6f8fa; } .wb-table td:first-child, .wb-table th:first-child { text-align: left; }
.wb-diff { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }
.wb-diff-row { margin: 4px 0; white-space: pre-wrap; word-break: break-word; }
.wb-diff-tok { border: 1px solid #d0d7de; border-radius: 3px; padding: 0 2px; margin: 0 1px; display: inline-block; }
.wb-diff-first { background: #ffebe9; border-color: #b42318; font-weight: 700; }
.wb-diff-after { background: #fff8c5; }
.wb-causes { font-family: system-ui, sans-serif; font-size: 12.5px; }
.wb-not-computed { font-family: system-ui, sans-serif; font-size: 13px; color: #b42318; padding: 6px 0; }
.wb-model-note { font-family: system-ui, sans-serif; font-size: 12px; line-height: 1.4; }
.wb-estimate { font-family: system-ui, sans-serif; font-size: 12px; color: #9a6700; background: #fff8c5;
  border: 1px solid #d4a72c; border-radius: 4px; padding: 1px 6px; margin: 2px 0; }
.wb-estimate summary { cursor: pointer; }
.wb-reconcile-table td.wb-rec-advice, .wb-reconcile-table td.wb-rec-note { text-align: left; max-width: 32em; }
.wb-rec-none td.wb-rec-note { color: #57606a; font-style: italic; }
/* issue 33: why a cache figure is 0, under the figure (the simulation's own reason) */
.wb-why { font-size: 11.5px; line-height: 1.3; color: #57606a; font-style: italic; text-align: left;
  white-space: normal; max-width: 26em; margin-top: 1px; }
"""


SUMMARY_CODES = ("empty_render", "no_messages")   # diagnostics the summary line repeats


def header_html(h: dict[str, Any], estimate: str = "") -> str:
    """The one-line summary, from a token-view patch's header; `estimate`: the chosen model's
    estimate label below it (model_choice.estimate_html), for models whose counts are not exact."""
    b = h["budget"]
    over = f" · <b>over by {-b['free']}</b>" if b["free"] < 0 else f" · {b['free']} free"
    dropped = f" · truncation dropped {len(h['dropped'])} message(s)" if h["dropped"] else ""
    # Warnings that no segment carries and no other part of the line says (0 tokens looks like a result).
    said = "".join(f' · <span class="wb-diag-warning">{escape(d["message"])}</span>'
                   for d in h["diagnostics"] if d.get("code") in SUMMARY_CODES)
    return (f'<div class="wb-app-header"><b class="wb-total">{h["total_tokens"]} tokens</b> · '
            f'{h["reused_segments"]} of {h["segments"]} segments reused · budget {b["used"]}/{b["input_budget"]}'
            f'{over}{dropped}{said} · {escape(h["template"])} / {escape(h["tokenizer"])} · '
            f'{h["timings_ms"].get("total", 0.0):.1f} ms</div>{estimate}')


def not_computed_html(error: str) -> str:
    """What the Cache, Prefix diff and Teach tabs show when the turns cannot be assembled (no
    messages left, a template that fails): the reason, not the figures of a prompt that is gone."""
    return (f'<div class="wb-not-computed">Not computed: {escape(error)}. This view comes back once the '
            f'prompt assembles again.</div>')


def diagnostics_html(result: "AssemblyResult") -> str:
    if not result.diagnostics:
        return '<div class="wb-diags">no diagnostics</div>'
    rows = "".join(f'<li class="wb-diag-{d.level}"><b>{d.level}</b> {escape(d.code)}'
                   f'{"" if d.seq is None else f" (seq {d.seq})"}: {escape(d.message)}</li>'
                   for d in result.diagnostics)
    return f'<ul class="wb-diags">{rows}</ul>'


SOURCES = {"local": "local (reused in this process)", "redis": "redis (reused via Redis)",
           "fresh": "fresh (rendered and tokenized now)"}


def cache_html(p: "Panels") -> str:
    """This turn's segments by source, the prompt cache's hit rates, and each provider's totals."""
    src = "".join(f"<tr><td>{escape(SOURCES.get(k, k))}</td><td>{v['segments']}</td><td>{v['tokens']:,}</td></tr>"
                  for k, v in sorted(p.sources.items()))
    # Reused segments mostly come from the live session's previous assembly, not from the prompt
    # cache's lookups: the two are counted apart, each with its counts (a bare "local 0%" beside
    # "local: 220 segments" read as a contradiction).
    rates = ", ".join(f"{escape(k)} {hits:,} hit(s) of {n:,} ({hits / n:.0%})" if n else f"{escape(k)} no lookups"
                      for k, (hits, n) in p.lookups.items()) or "no lookups yet"
    # A 0 says why under it, in the simulation's own words (TurnResult.why, Simulation.why: what
    # `simulate --json` prints as "why" and "hit_ratio_why"); a figure that is not 0 keeps its reason
    # (read less than shared) as a tooltip.
    prov = "".join(
        f'<tr><td>{escape(s.provider)}<div class="wb-muted wb-preset">{escape(s.preset_note)}</div></td>'
        f"{_cached_now(s)}<td>{s.hit_ratio:.1%}{_why(s.why)}</td><td>${s.total_cost:.4f}</td></tr>"
        for s in p.simulations)
    turns = len(p.simulations[0].turns) if p.simulations else 0
    # Reported vs predicted first: what a session with the provider's usage is opened for.
    return (f'<div class="wb-cache">{reconcile_html(p)}<b>This turn&#x27;s segments by source</b>'
            f'<table class="wb-table wb-sources"><tr><th>source</th><th>segments</th><th>tokens</th></tr>{src}</table>'
            f'<div class="wb-lookups">prompt cache lookups (whole prompts; byte-capped LRU, then Redis): {rates}</div>'
            f'<b>Provider prefix caches over the {turns} turns</b> '
            f'(<span class="wb-cache-template">{escape(p.assembler.template.name)}</span>; example prices)'
            f'<table class="wb-table wb-providers"><tr><th>provider</th><th>cached now</th><th>hit ratio</th>'
            f'<th>session cost</th></tr>{prov}</table>'
            f'{policies_html(p)}'
            f'<div class="wb-muted">this update re-assembled {p.turns_assembled} turn(s) in {p.turns_ms:.0f} ms; '
            f'the selected turn comes from the live view, the others had not changed</div></div>')


def _why(text: str) -> str:
    return f'<div class="wb-why">{escape(text)}</div>' if text else ""


def _cached_now(s: "Simulation") -> str:
    """The "cached now" cell: the last turn's cached tokens, and its reason when it is 0."""
    last = s.turns[-1] if s.turns else None
    n = last.cached_tokens if last is not None else 0
    if last is None:
        return f"<td>0{_why('no turns')}</td>"
    if n == 0:
        return f'<td class="wb-cached-zero">0{_why(last.why)}</td>'
    return f'<td title="{escape(last.why)}">{n:,}</td>' if last.why else f"<td>{n:,}</td>"


def policies_html(p: "Panels") -> str:
    """The truncation policies side by side over the session (only when it truncates): per policy,
    the turns truncated and prefix-stable, tokens sent, and each provider's cached tokens and cost."""
    if not p.policies:
        return ""
    names = [s.provider for s in p.policies[0].simulations]
    head = "".join(f"<th>{escape(n)} cached</th><th>{escape(n)} cost</th>" for n in names)
    own = p.policies[0].policy
    rows = "".join(
        f'<tr class="wb-policy-{escape(r.policy)}"><td>{escape(r.policy)}{" (this session)" if r.policy == own else ""}'
        f"</td><td>{r.truncated_turns}</td><td>{r.prefix_stable_turns}</td><td>{r.tokens:,}</td>"
        + "".join(f"<td>{sum(t.cached_tokens for t in s.turns):,}{_why(s.why)}</td><td>${s.total_cost:.4f}</td>"
                  for s in r.simulations) + "</tr>"
        for r in p.policies)
    return (f'<b>Truncation policies over the {len(p.policies[0].prompts)} turns</b> (the session truncates; '
            f"stable: turns whose prompt starts with the whole previous prompt)"
            f'<table class="wb-table wb-policies"><tr><th>truncation</th><th>truncated</th><th>stable</th>'
            f"<th>tokens sent</th>{head}</tr>{rows}</table>")


def prefix_diff_html(diff: dict[str, Any] | None, turn: int) -> str:
    """The first diverging token between what the engine holds after the previous turn and this
    turn's prompt, highlighted in both, with the causes and advice."""
    if turn <= 1:
        return '<div class="wb-diff wb-diff-none">Turn 1: no previous turn to compare with.</div>'
    if diff is None:
        return (f'<div class="wb-diff wb-diff-none">Turn {turn} extends what the engine holds after turn '
                f'{turn - 1}: the whole previous prompt (and the reply) is a reusable prefix.</div>')
    d = diff["first_divergence"]

    def row(label: str, toks: list[dict[str, Any]]) -> str:
        cells = "".join(
            f'<span class="wb-diff-tok'
            f'{" wb-diff-first" if t["index"] == d else " wb-diff-after" if t["diverges"] else ""}"'
            f' title="token {t["index"]} · id {t["id"]}">{escape(t["text"]) or "&nbsp;"}</span>' for t in toks)
        return f'<div class="wb-diff-row"><b>{label}</b> {cells}</div>'

    causes = "".join(f'<li><b>{escape(c["code"])}</b>: {escape(c["message"])}<br><i>{escape(c["advice"])}</i></li>'
                     for c in diff["causes"])
    where = f'{escape(str(diff["segment"]))}' + ("" if diff["seq"] is None else f', seq {diff["seq"]}')
    return (f'<div class="wb-diff"><div>Turn {turn} diverges from turn {turn - 1} at token '
            f'<b class="wb-diff-at">{d}</b>'
            f' ({where}): the engine reuses {d} tokens and prefills the rest.</div>'
            f'{row("previous", diff["previous"])}{row("this turn", diff["current"])}'
            f'<ul class="wb-causes">{causes}</ul></div>')


def export_html(result: Any, error: str) -> str:
    """What an Export did: the folder and the verify result (drift named), or the error."""
    if error:
        return f'<div class="wb-export wb-diag-error"><b>export failed:</b> {escape(error)}</div>'
    folder, report = result
    checked = ", ".join(f"{escape(str(c['session']))}: {c['turns']} turn(s), {c['tokens']:,} tokens"
                        for c in report.checked)
    if report.ok:
        return (f'<div class="wb-export wb-export-ok">exported to <code>{escape(str(folder))}</code>; verified from '
                f'disk: identical ids ({checked}). Load it with <code>workbench.load_bundle(DIR)</code>; check '
                f'instances with <code>workbench verify DIR</code>.</div>')
    items = "".join(f"<li>{escape(m['file'])} ({escape(m['field'])}): {escape(m['message'])}</li>"
                    for m in report.mismatches)
    items += "".join(f"<li>{escape(d.describe())}</li>" for d in report.drift[:5])
    return f'<div class="wb-export wb-diag-error">exported to <code>{escape(str(folder))}</code>, but it does not ' \
           f'verify:<ul>{items}</ul></div>'
