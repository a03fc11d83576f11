"""The Cache tab's reconciliation (issue 32, docs/logs.md section 8), for both hosts: per turn of a
session whose calls carry the provider's reported usage, "reported" beside "predicted", the class
of the difference and the advice that fixes it.

Every figure is taken as it stands from the rows `reconcile_session.reconcile_turns` returns, the
rows `workbench analyze SESSION --json` prints under `reconciliation` (nothing recomputed or
rounded here: the table groups thousands, nothing more); the advice is the classifier's own
(`reconcile.ADVICE`). A turn without usage, or with a usage that cannot be read, says so in words.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .state import Panels

NO_USAGE = "no usage logged for this call: nothing to compare"


def reconcile_rows(check: Any) -> list[dict[str, Any]]:
    """One row per turn of a SessionCheck: the CLI's row (`provider`, `class`, `cause`,
    `predicted`, `reported`, `tokens`) with `turn` and `advice` added; a turn without one has
    `usage: None` and `note` (the usage diagnostic of its request, where there is one)."""
    from ..analysis.reconcile import ADVICE  # the classifier's words, not ours
    problems = {b.line: b.problem for b in check.diagnostics}
    out: list[dict[str, Any]] = []
    for k, row in enumerate(check.per_turn, start=1):
        if row is None:
            why = problems.get(k)
            out.append({"turn": k, "usage": None,
                        "note": f"usage not usable: {why}" if why else NO_USAGE})
        else:
            out.append({"turn": k, **row, "advice": ADVICE.get(row["class"], "")})
    return out


def _n(v: Any) -> str:
    return "—" if v is None else f"{v:,}" if isinstance(v, int) else escape(str(v))


def reconcile_html(p: "Panels") -> str:
    """The table, or "" where nothing is to be reconciled (no call carries a usage) or not yet
    computed; the part's error, inline."""
    if p.reconcile_error:
        return (f'<div class="wb-reconcile wb-diag-error"><b>reported vs predicted: not computed:</b> '
                f'{escape(p.reconcile_error)}</div>')
    check = p.reconciliation
    if check is None:
        return ""
    rows = []
    for r in reconcile_rows(check):
        if r.get("usage", True) is None:
            rows.append(f'<tr class="wb-rec-none"><td>{r["turn"]}</td><td colspan="8" class="wb-rec-note">'
                        f'{escape(r["note"])}</td></tr>')
            continue
        cls = escape(r["class"]) + (f' <span class="wb-rec-cause">({escape(r["cause"])})</span>' if r["cause"] else "")
        rows.append(
            f'<tr class="wb-rec-{escape(r["class"])}"><td>{r["turn"]}</td><td>{escape(r["provider"])}</td>'
            f'<td class="wb-rec-reported">{_n(r["reported"]["cached"])}</td><td>{_n(r["reported"]["written"])}</td>'
            f'<td class="wb-rec-predicted">{_n(r["predicted"]["cached"])}</td><td>{_n(r["predicted"]["written"])}</td>'
            f'<td>{_n(r["tokens"])}</td><td class="wb-rec-class"><b>{cls}</b></td>'
            f'<td class="wb-rec-advice">{escape(r["advice"])}</td></tr>')
    diags = "".join(f"<li>request {b.line}: {escape(b.problem)}</li>" for b in check.diagnostics)
    return ('<div class="wb-reconcile"><b>Reported vs predicted cache, per call</b> (the provider&#x27;s '
            '<code>response.usage</code> beside the preset&#x27;s prediction; the same rows as '
            '<code>workbench analyze SESSION --json</code>; tokens: what the class accounts for)'
            '<table class="wb-table wb-reconcile-table"><tr><th>turn</th><th>provider</th>'
            '<th>reported cached</th><th>reported written</th><th>predicted cached</th><th>predicted written</th>'
            f'<th>tokens</th><th>class</th><th>advice</th></tr>{"".join(rows)}</table>'
            + (f'<ul class="wb-diags wb-reconcile-diags">{diags}</ul>' if diags else "") + "</div>")
