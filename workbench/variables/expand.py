"""Expanding prompt templates: each ``template=True`` message becomes plain text, with a record of
every variable it used, the scope it came from, and whether it is volatile (see the package's
docstring for the scopes)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jinja2

from ..conversation import Message
from ..diagnostics import Diagnostic, info, warning
from ..errors import VariableError, VariableLimitError
from .config import BUILTINS, Binding, VariableConfig, jsonable
from .sandbox import MAX_TEMPLATE_TAGS, Caps, compile_prompt, environment, run


def _is_template(v: Any) -> bool:
    return isinstance(v, str) and ("{{" in v or "{%" in v)


def _items(v: Any, limit: int) -> int:
    """Items in a nested list/dict value, counting stops once past `limit`."""
    n, todo = 0, [v]
    while todo and n <= limit:
        x = todo.pop()
        if isinstance(x, Mapping):
            n += len(x)
            todo.extend(x.values())
        elif isinstance(x, (list, tuple)):
            n += len(x)
            todo.extend(x)
    return n


# ---- expansion --------------------------------------------------------------------------------

@dataclass
class _Res:
    value: Any
    scope: str
    volatile: bool


_EMPTY = object()  # an optional variable defined nowhere: left out of the context (renders empty)


class _Expander:
    def __init__(self, request_vars: Mapping[str, Any], config: VariableConfig):
        self.request, self.config = dict(request_vars), config
        self.decl = config.declarations
        self._builtins: dict[str, Any] = {}
        self.deadline = time.monotonic() + config.max_seconds

    def builtin(self, name: str) -> Any:
        # Computed once per call: every message of one request sees the same time and id.
        if not self._builtins:
            now = (self.config.clock or (lambda: datetime.now(UTC)))()
            now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
            self._builtins = {"now": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "today": now.date().isoformat(),
                              "request_id": (self.config.new_request_id or (lambda: uuid.uuid4().hex))(),
                              "strftime_now": now.strftime}
        return self._builtins[name]

    def expand(self, m: Message) -> tuple[Message, dict[str, _Res]]:
        try:
            local = json.loads(m.variables) if m.variables else {}
        except ValueError as e:
            raise VariableError(f"template-local variables are not valid JSON: {e}", seq=m.sequence) from None
        if not isinstance(local, dict):
            raise VariableError("template-local variables must be an object of name: value", seq=m.sequence)
        if m.content is None:
            return m.with_(template=False), {}
        self.local, self.seq = local, m.sequence
        self.memo: dict[str, _Res | None] = {}
        self.used: dict[str, _Res | None] = {}  # insertion order = order of first use
        text, _ = self.render(m.content, ())
        used = {k: v for k, v in self.used.items() if v is not None}
        return m.with_(content=text, template=False), used

    def lookup(self, name: str, chain: tuple[str, ...]) -> _Res | None:
        self.used.setdefault(name, None)
        if name in self.memo:
            return self.memo[name]
        if name in chain:
            path = " -> ".join(chain[chain.index(name):] + (name,))
            raise VariableError(f"cyclic definition {path}", variable=name, seq=self.seq,
                                hint="a definition cannot use itself, directly or through others")
        spec = self.decl.get(name)
        declared_volatile = bool(spec and spec.volatile)
        res = None
        for scope, table in (("local", self.local), ("request", self.request), ("system", self.config.constants)):
            if name in table:
                value, volatile = table[name], declared_volatile
                if isinstance(value, (Mapping, list, tuple)) and _items(value, self.config.max_collection_items) \
                        > self.config.max_collection_items:
                    raise VariableLimitError(f"{scope} value has more than {self.config.max_collection_items} items",
                                             variable=name, seq=self.seq, hint="pass a shorter list")
                if scope != "request" and _is_template(value):  # request values are data, never code
                    value, dep_volatile = self.render(value, chain + (name,))
                    volatile = volatile or dep_volatile
                res = _Res(value, scope, volatile)
                break
        else:
            if self.config.builtins and name in BUILTINS:
                res = _Res(self.builtin(name), "builtin", True)
            elif spec is not None and spec.default is not None:
                res = _Res(spec.default, "default", declared_volatile)
        self.memo[name] = self.used[name] = res
        return res

    def render(self, source: str, chain: tuple[str, ...]) -> tuple[str, bool]:
        """Render one template (the message, or a derived definition when `chain` is non-empty)."""
        variable = chain[-1] if chain else None
        what = f"the definition of {variable!r}" if variable else "the prompt template"
        tags = source.count("{{") + source.count("{%") + source.count("{#")
        if tags > MAX_TEMPLATE_TAGS:  # compiling costs ~0.2 ms a tag, before any limit can run
            raise VariableLimitError(f"{what} has {tags:,} tags ({{{{ }}}}, {{% %}}, {{# #}}), more than "
                                     f"{MAX_TEMPLATE_TAGS:,}", variable=variable, seq=self.seq,
                                     hint="a prompt template needs a few variables; pass long text as plain text")
        try:
            compiled = compile_prompt(source)
        except jinja2.TemplateSyntaxError as e:
            raise VariableError(f"syntax error in {what} on line {e.lineno}: {e.message}",
                                variable=variable, seq=self.seq) from None
        except RecursionError:
            raise VariableError(f"{what} nests expressions or blocks too deeply to compile", variable=variable,
                                seq=self.seq) from None
        except (jinja2.TemplateError, SyntaxError, ValueError, OverflowError, MemoryError) as e:
            raise VariableError(f"{what} cannot be compiled: {type(e).__name__}: {e}", variable=variable,
                                seq=self.seq) from None
        ctx, volatile = {}, False
        for name in compiled.names:
            res = self.lookup(name, chain)
            if res is None:
                if name in environment().globals:  # range, namespace, dict, ...: not variables
                    self.used.pop(name, None)
                    continue
                spec = self.decl.get(name)
                if not (spec and not spec.required) and name not in compiled.defaulted:
                    raise VariableError(
                        f"is not defined in any scope (used by {what})", variable=name, seq=self.seq,
                        hint="define it in the request variables or the constants, declare it optional "
                             f"(required: false), or write {{{{ {name} | default('...') }}}}")
                res = self.used[name] = _Res(_EMPTY, "empty", bool(spec and spec.volatile))
            if res.value is not _EMPTY:
                ctx[name] = res.value
            volatile = volatile or res.volatile
        cfg = self.config
        caps = Caps(cfg.max_loop_iterations, cfg.max_steps, cfg.max_output_chars, self.deadline)
        return run(compiled, ctx, caps, what, variable, self.seq), volatile



def expand_messages(messages: Sequence[Message], request_vars: Mapping[str, Any] | None,
                    config: VariableConfig) -> tuple[list[Message], list[Binding], list[Diagnostic]]:
    """Expand every ``template=True`` message; returns (messages, bindings, diagnostics)."""
    if not any(m.template for m in messages):  # the hot path: no Jinja work at all
        return list(messages), [], []
    if request_vars is not None and not isinstance(request_vars, Mapping):
        raise VariableError("request variables must be an object of name: value")
    ex = _Expander(request_vars or {}, config)
    for scope, table in (("request variable", ex.request), ("constant", config.constants)):
        bad = next((k for k in table if not isinstance(k, str)), None)
        if bad is not None:
            raise VariableError(f"{scope} names must be strings, not {bad!r}")
    out: list[Message] = []
    rows: dict[tuple[str, str, str], tuple[_Res, list[int | None]]] = {}  # (name, scope, value) -> first res, seqs
    diags: list[Diagnostic] = []
    for i, m in enumerate(messages):
        if not m.template:
            out.append(m)
            continue
        new, used = ex.expand(m)
        out.append(new)
        for name, res in used.items():
            value = None if res.value is _EMPTY else "strftime_now(format)" if name == "strftime_now" \
                else jsonable(res.value, config.max_output_chars)
            # One row per name; a name bound to different values (locals differ) gets one row each.
            key = (name, res.scope, json.dumps(value, sort_keys=True))
            rows.setdefault(key, (_Res(value, res.scope, res.volatile), []))[1].append(m.sequence)
        volatile = sorted(n for n, r in used.items() if r.volatile)
        if volatile and i < len(messages) - 1:
            diags.append(warning(
                "volatile_in_prefix",
                f"message {m.sequence} uses volatile variable(s) {', '.join(volatile)}: the value changes "
                "on every request, so the cacheable prefix ends here; move it to the last user message "
                "or make it a constant", m.sequence))
    bindings = [Binding(k[0], r.value, r.scope, r.volatile, tuple(s)) for k, (r, s) in rows.items()]
    for scope, label, table in (("request", "request variable", ex.request),
                                ("system", "constant", config.constants)):
        unused = sorted(set(table) - {b.name for b in bindings if b.scope == scope})
        if unused:
            diags.append(info("unused_variable",
                              f"{label}(s) not used by any prompt template: {', '.join(unused)}"))
    return out, bindings, diags
