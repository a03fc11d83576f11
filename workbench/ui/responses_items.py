"""A Responses API request in the message editor (no UI library here).

The editor lists a Responses request (`instructions`, `input`) as rows: the `instructions` first
(when the request has them, edited like a system message), then each input item, in its own shape:

- a message item: its role (user, assistant, system, developer) and its text: a string, or each text
  part of its content (`input_text`, `output_text`, a `refusal`'s text) in its own box, images and
  files as read-only chips (content_parts.py measures them);
- a `function_call`: its name, arguments (text: arguments that are not valid JSON are kept, the
  intake warns) and call_id; a `custom_tool_call`: name, input, call_id;
- a `function_call_output` / `custom_tool_call_output`: call_id and output (text; a list of parts
  as JSON);
- a `reasoning` item: its summary text, and its reasoning text where it has some; its
  `encrypted_content` is kept and never shown as editable;
- any other item (one the intake refuses, such as a built-in tool's): the whole item as JSON.

An edit makes a new item (`{**item, field: value}`) and a new list: the fields the editor does not
edit (`id`, `status`, `annotations`, unknown keys) are kept as they were, and a request handed out
before never changes (copy on write). What each row shows and lets edit travels to the front end
as data (`editor_view`: per row, its kind, label and fields), so widgets/message_editor.js draws
a function_call's boxes without knowing what a function_call is.

Rows are counted from 0 over instructions + items; `RowMap` turns the intake's item positions
(errors' `input[k]`, where each message's items stop) into rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import EditError, RequestError
from .content_parts import is_media, is_text, part_chips, set_part_text, with_text
from .editor_input import op_index, parse_json_field

INSTRUCTIONS = "instructions"          # the row kind of the request's `instructions`
ITEM_ROLES = ("user", "assistant", "system", "developer")
# The fields the editor edits, per item kind (the rest of an item is kept as it is).
FIELDS: dict[str, tuple[str, ...]] = {
    "message": ("role", "content"),
    "function_call": ("name", "arguments", "call_id"),
    "custom_tool_call": ("name", "input", "call_id"),
    "function_call_output": ("call_id", "output"),
    "custom_tool_call_output": ("call_id", "output"),
    "reasoning": ("summary", "content"),
}
_ROLE_OF = {"function_call": "assistant", "custom_tool_call": "assistant", "reasoning": "assistant",
            "function_call_output": "tool", "custom_tool_call_output": "tool", INSTRUCTIONS: "system"}
_MISSING: Any = object()
_MEMO_MAX = 4096
_memo: dict[int, tuple[Any, tuple[Any, dict[str, Any]]]] = {}


def kind_of(item: Any) -> str:
    """An input item's kind: a type the editor knows (FIELDS), or "item" (anything else)."""
    kind = item.get("type", "message") if isinstance(item, dict) else None
    return kind if isinstance(kind, str) and kind in FIELDS else "item"


# ------------------------------------------------------------------------------------ rows
def has_instructions(target: dict[str, Any]) -> bool:
    return target.get("instructions") is not None


def offset(target: dict[str, Any]) -> int:
    """The row of input item 0 (1 when the instructions are row 0)."""
    return 1 if has_instructions(target) else 0


def rows(target: dict[str, Any]) -> list[Any]:
    """The editor's rows: the instructions (a small dict of their own), then the input items, the
    very objects the request holds. A string `input` is its one user message."""
    out: list[Any] = []
    if has_instructions(target):
        out.append({"type": INSTRUCTIONS, "role": "system", "content": target["instructions"]})
    inp = target.get("input")
    if isinstance(inp, str):
        out.append({"role": "user", "content": inp})
    elif isinstance(inp, list):
        out.extend(inp)
    return out


def item_count(target: dict[str, Any]) -> int:
    inp = target.get("input")
    return len(inp) if isinstance(inp, list) else 1 if isinstance(inp, str) else 0


@dataclass(frozen=True)
class RowMap:
    """Where a request's items stand among the rows. The intake counts items in one list: the
    instructions' items when they are a list (`lead`), then, in a log's request that continues a
    logged response, the earlier conversation (`chain`), then the request's own input."""

    first: int          # the row of the request's own input item 0
    lead: int = 0       # items of list-valued instructions (all on row 0)
    chain: int = 0      # items resolved from previous_response_id (on no row)
    text_instructions: bool = False   # string instructions: the intake's message 0, on row 0

    @classmethod
    def of(cls, target: dict[str, Any], chain: int = 0) -> "RowMap":
        ins = target.get("instructions")
        return cls(offset(target), len(ins) if isinstance(ins, list) else 0, chain, isinstance(ins, str))

    def row(self, k: int) -> int | None:
        """The row of the intake's item k (None: an item of the earlier conversation)."""
        if k < self.lead:
            return 0
        if k < self.lead + self.chain:
            return None
        return self.first + k - self.lead - self.chain

    def error_row(self, exc: Exception) -> int | None:
        """The row a request error names (`input[k]...`, `instructions`), None when it names none."""
        if not isinstance(exc, RequestError):
            return None
        if exc.container == "input" and exc.index is not None:
            return self.row(exc.index)
        if exc.index is None and (exc.field or "").startswith("instructions") and self.first:
            return 0
        return None

    def counts(self, stops: tuple[int, ...], per_message: list[int | None], n_rows: int) -> list[int | None]:
        """Each row's tokens: message j's (its items end at stops[j]) on the row of its first item."""
        out: list[int | None] = [None] * n_rows
        start = 0
        for j, stop in enumerate(stops):
            row = (0 if self.text_instructions else None) if stop == start else self.row(start)
            start = stop
            c = per_message[j] if j < len(per_message) else None
            if row is not None and 0 <= row < n_rows and c is not None:
                out[row] = (out[row] or 0) + c
        return out


# Undo keeps what the editor changes in a Responses request: its instructions and input, the
# very objects (copy on write).
@dataclass(frozen=True)
class Edited:
    instructions: Any
    input: Any
    order: tuple[str, ...] = ()     # the request's keys in order: a field put back goes back in its place


def edited(target: dict[str, Any]) -> Edited:
    return Edited(target.get("instructions", _MISSING), target.get("input", _MISSING), tuple(target))


def restore(target: dict[str, Any], state: Edited) -> tuple[int, bool]:
    """Put back what `edited` returned: (the first item that changed, -1 for the instructions;
    whether items came, went or changed kind)."""
    old = edited(target)
    for key, value in (("instructions", state.instructions), ("input", state.input)):
        if value is _MISSING:
            target.pop(key, None)
        else:
            target[key] = value
    if tuple(target) != state.order and set(target) == set(state.order):
        ordered = {k: target[k] for k in state.order}
        target.clear()
        target.update(ordered)
    if old.instructions is not state.instructions:
        return -1, (old.instructions is _MISSING) != (state.instructions is _MISSING) or old.input is not state.input
    a, b = _as_list(old.input), _as_list(state.input)
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x is not y), min(len(a), len(b)))
    return first, len(a) != len(b) or any(_turn_key(x) != _turn_key(y) for x, y in zip(a[first:], b[first:]))


def _turn_key(item: Any) -> tuple[Any, Any]:
    return (item.get("type"), item.get("role")) if isinstance(item, dict) else (None, None)


def _as_list(inp: Any) -> list[Any]:
    return inp if isinstance(inp, list) else [] if inp is None or inp is _MISSING else [inp]


# ------------------------------------------------------------------------------- operations
def new_item(role: str) -> dict[str, Any]:
    """A blank item the editor adds: a message of `role`, or for "tool" a function call's output
    (its call_id to fill in: until then the intake says which call it lacks, at the row)."""
    if role == "tool":
        return {"type": "function_call_output", "call_id": "", "output": ""}
    return {"role": role if role in ITEM_ROLES else "user", "content": ""}


def apply(target: dict[str, Any], op: dict[str, Any]) -> tuple[int, bool]:
    """Apply one editor operation (rows counted over instructions + items; see SessionDocument.apply)
    to a Responses request, copy on write. Returns (the first input item it changed, -1 for the
    instructions; whether rows came, went, moved or changed kind or role)."""
    kind = op.get("op")
    off = offset(target)
    n = off + item_count(target)

    def index(key: str = "index", limit: int = n) -> int:
        return op_index(op, key, limit, "row")

    if kind == "set":
        i = index()
        if i < off:
            _set_instructions(target, op)
            return -1, False
        k = i - off
        items = _items(target)
        items[k], structural = _set(items[k], op, k)
        _put(target, items, structural)
        return k, structural
    if kind == "insert":
        i = index(limit=n + 1)
        item = op.get("message") or new_item("user")
        if not isinstance(item, dict) or ("type" not in item and item.get("role") not in ITEM_ROLES):
            raise EditError("insert: an item is an object with a type, or a message with a role "
                            f"({', '.join(ITEM_ROLES)})")
        k = max(i - off, 0)
        items = _items(target)
        items.insert(k, item)
        target["input"] = items
        return k, True
    if kind == "delete":
        i = index()
        if i < off:
            del target["instructions"]
            return -1, True
        items = _items(target)
        del items[i - off]
        target["input"] = items
        return i - off, True
    if kind == "move":
        i, j = index(), index("to")
        if i == j:      # onto itself: nothing moves (and the instructions row has no item to pop)
            return max(i - off, -1), False
        if min(i, j) < off:
            raise EditError("move: the instructions stay first (they are the request's own field, not an item)",
                            hint="move the items below them")
        items = _items(target)
        items.insert(j - off, items.pop(i - off))
        target["input"] = items
        return min(i, j) - off, True
    raise EditError(f"unknown editor operation {kind!r}", hint="use set, insert, delete or move")


def _items(target: dict[str, Any]) -> list[Any]:
    """A copy of the input items to change (a string input becomes its one user message)."""
    inp = target.get("input")
    return list(inp) if isinstance(inp, list) else [{"role": "user", "content": inp}] if isinstance(inp, str) else []


def _put(target: dict[str, Any], items: list[Any], structural: bool) -> None:
    # A string input whose text was edited stays a string: the file keeps its shape.
    if isinstance(target.get("input"), str) and not structural and len(items) == 1 \
            and set(items[0]) == {"role", "content"} and isinstance(items[0]["content"], str):
        target["input"] = items[0]["content"]
    else:
        target["input"] = items


def _set_instructions(target: dict[str, Any], op: dict[str, Any]) -> None:
    value, where = op.get("value"), "instructions"
    if op.get("field") != "content":
        raise EditError(f"{where}: cannot edit field {op.get('field')!r}", hint="edit its text (content)")
    if op.get("json"):
        value = _json(value, where)
        if not isinstance(value, (str, list)):
            raise EditError(f"{where}: a string, or a JSON list of input items")
    elif not isinstance(value, str):
        raise EditError(f"{where}: expected text")
    target["instructions"] = value


def _set(item: Any, op: dict[str, Any], k: int) -> tuple[Any, bool]:
    """Item k with the op's field set: (the new item, whether its kind or role changed)."""
    name, value, part = op.get("field"), op.get("value"), op.get("part")
    where = f"input[{k}].{name}"
    kind = kind_of(item)
    if name == "item" and op.get("json"):          # the whole item, as JSON (an item the editor does not know)
        new = _json(value, f"input[{k}]")
        if not isinstance(new, dict):
            raise EditError(f"input[{k}]: an item is a JSON object")
        return new, True
    assert isinstance(item, dict) or kind == "item"
    if kind == "item" or name not in FIELDS[kind]:
        fields = "the whole item as JSON (field 'item')" if kind == "item" else ", ".join(FIELDS[kind])
        raise EditError(f"{where}: a {kind} item has no field {name!r} to edit", hint=f"edit {fields}")
    if kind == "message" and name == "role":
        if value not in ITEM_ROLES:
            raise EditError(f"{where}: unknown role {value!r}", hint=f"use one of {', '.join(ITEM_ROLES)}")
        return {**item, "role": value}, True
    if kind == "message":          # content: one part's text, the text as a whole, or JSON parts
        return {**item, "content": _content(item, value, part, bool(op.get("json")), where)}, False
    if kind == "reasoning":
        return {**item, name: _reasoning_text(item.get(name), name, value, part, where)}, False
    if name == "output" and (op.get("json") or isinstance(item.get("output"), list)) and part is None:
        value = _json(value, where) if op.get("json") else value
        if not isinstance(value, (str, list)):
            raise EditError(f"{where}: an output is a string or a JSON list of parts")
        return {**item, "output": value}, False
    if not isinstance(value, str):
        raise EditError(f"{where}: expected text")
    return {**item, name: value}, False      # name, arguments (text, as sent), call_id, input, output


def _content(item: dict[str, Any], value: Any, part: Any, as_json: bool, where: str) -> Any:
    content = item.get("content")
    if part is not None:
        if isinstance(content, list) and isinstance(part, int) and not isinstance(part, bool) \
                and 0 <= part < len(content) and _is_refusal(content[part]):
            if not isinstance(value, str):
                raise EditError(f"{where}[{part}]: expected text")
            out = list(content)
            out[part] = {**content[part], "refusal": value}
            return out
        return set_part_text(content, part, value, f"{where}[{part!r}]")
    if as_json:
        parsed = _json(value, where) if isinstance(value, str) and value.strip() else ""
        if not isinstance(parsed, (str, list)):
            raise EditError(f"{where}: content is a string or a JSON list of parts")
        return parsed
    if not isinstance(value, str):
        raise EditError(f"{where}: expected text")
    if isinstance(content, list) and content and all(is_text(b) or is_media(b) for b in content):
        # Text for the item as a whole: into its one text part, images and files kept.
        text_type = "output_text" if item.get("role") == "assistant" else "input_text"
        return with_text(content, value, where, text_type)
    if isinstance(content, list) and content:
        raise EditError(f"{where}: the content is a list of parts: edit one part (part=k) or the list as JSON",
                        hint=f"parts: {[b.get('type') if isinstance(b, dict) else b for b in content]}")
    return value


def _is_refusal(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "refusal" and isinstance(block.get("refusal"), str)


def _reasoning_text(blocks: Any, name: str, value: Any, part: Any, where: str) -> list[Any]:
    """A reasoning item's summary (or content) with part k's text set; part len(blocks) (or no part,
    on an empty list) adds the first."""
    part_type = "summary_text" if name == "summary" else "reasoning_text"
    blocks = blocks if isinstance(blocks, list) else []
    if part is None:
        if len(blocks) > 1:
            raise EditError(f"{where}: {len(blocks)} parts: name the one to edit (part=k)")
        part = 0
    if not isinstance(part, int) or isinstance(part, bool) or not 0 <= part <= len(blocks) or \
            (part < len(blocks) and not isinstance(blocks[part], dict)):
        raise EditError(f"{where}[{part!r}]: not a part of this reasoning item (0..{len(blocks)})")
    if not isinstance(value, str):
        raise EditError(f"{where}[{part}]: expected text")
    out = list(blocks)
    if part == len(blocks):
        out.append({"type": part_type, "text": value})
    else:
        out[part] = {**blocks[part], "text": value}
    return out


def _json(text: Any, where: str) -> Any:
    if not isinstance(text, str):
        raise EditError(f"{where}: expected JSON text")
    return parse_json_field(text, where)


# ---------------------------------------------------------------------------- the front end
def editor_view(rows: list[Any], instructions: bool) -> tuple[list[Any], list[dict[str, Any]]]:
    """What the editor gets for these rows (`instructions`: row 0 is the request's instructions):
    each row as the page holds it (the item, less what it
    must not show: `encrypted_content`; arguments sent as an object shown as text), and each row's
    shape: its kind, label, the role for its colour (and the roles to pick from, for a message), and
    its fields in order: a box ({"field", "label", "part"?, "key"?, "input"?, "json"?, "rows"?}, the
    value read from the row) or a read-only chip ({"chip", "kind", "title"})."""
    shown: list[Any] = []
    shapes: list[dict[str, Any]] = []
    if instructions and rows:
        shown.append(rows[0])
        shapes.append(_instructions_shape(rows[0]["content"]))
        rows = rows[1:]
    for row in rows:
        got = _memo.get(id(row))
        if got is not None and got[0] is row:
            shown_row, shape = got[1]
        else:
            shown_row, shape = _shown(row), _shape(row)
            if len(_memo) >= _MEMO_MAX:
                _memo.clear()
            _memo[id(row)] = (row, (shown_row, shape))
        shown.append(shown_row)
        shapes.append(shape)
    return shown, shapes


def _instructions_shape(content: Any) -> dict[str, Any]:
    box = _box("content", "instructions") if isinstance(content, str) else \
        _box("content", "instructions (JSON items)", json=True, rows=6)
    return {"kind": INSTRUCTIONS, "label": "instructions", "role": "system", "fields": [box]}


def _shown(row: Any) -> Any:
    kind = kind_of(row)
    if kind == "item":
        return {"item": row}
    assert isinstance(row, dict)
    if "encrypted_content" in row:
        row = {k: v for k, v in row.items() if k != "encrypted_content"}
    if kind == "function_call" and not isinstance(row.get("arguments"), str) and "arguments" in row:
        row = {**row, "arguments": json.dumps(row["arguments"], ensure_ascii=False)}
    return row


def _box(field: str, label: str, **more: Any) -> dict[str, Any]:
    return {"field": field, "label": label, **more}


def _shape(row: Any) -> dict[str, Any]:
    kind = kind_of(row)
    if kind == "item":
        what = row.get("type") if isinstance(row, dict) else type(row).__name__
        return {"kind": "item", "label": f"{what} (JSON)", "role": None,
                "fields": [_box("item", "the whole item (JSON)", json=True, rows=6)]}
    fields: list[dict[str, Any]]
    if kind == "message":
        role = row.get("role") if isinstance(row.get("role"), str) else "user"
        return {"kind": kind, "label": "message", "role": role, "roles": list(ITEM_ROLES),
                "fields": _content_fields(row.get("content"), role), "notes": _kept(row, kind)}
    if kind in ("function_call", "custom_tool_call"):
        body = "arguments" if kind == "function_call" else "input"
        fields = [_box("name", "name", input=True),
                  _box(body, "arguments (JSON text, as sent)" if body == "arguments" else "input", rows=4),
                  _box("call_id", "call_id", input=True)]
    elif kind in ("function_call_output", "custom_tool_call_output"):
        out = row.get("output")
        fields = [_box("call_id", "call_id", input=True),
                  _box("output", "output (JSON parts)", json=True, rows=6) if isinstance(out, list) else
                  _box("output", "output", rows=3)]
    else:                                  # reasoning
        fields = _reasoning_fields(row)
    return {"kind": kind, "label": kind, "role": _ROLE_OF[kind], "fields": fields, "notes": _kept(row, kind)}


def _content_fields(content: Any, role: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [_box("content", "content")]
    parts_ok = isinstance(content, list) and content and all(is_text(b) or is_media(b) or _is_refusal(b)
                                                              for b in content)
    if not parts_ok:
        return [_box("content", "content (JSON parts)", json=True, rows=4)]
    assert isinstance(content, list)
    chips = {p["k"]: p for p in part_chips(content, role, "responses") if "label" in p}
    out: list[dict[str, Any]] = []
    for k, b in enumerate(content):
        if is_text(b):
            out.append(_box("content", f"{b['type']} (part {k})", part=k))
        elif _is_refusal(b):
            out.append(_box("content", f"refusal (part {k})", part=k, key="refusal"))
        else:
            chip = chips.get(k, {"kind": str(b.get("type")), "label": str(b.get("type")), "title": ""})
            out.append({"chip": chip["label"], "kind": chip["kind"], "title": chip["title"]})
    return out


def _reasoning_fields(row: dict[str, Any]) -> list[dict[str, Any]]:
    # The intake renders the reasoning text where there is some, else the summary (intake/responses.py).
    generated = isinstance(row.get("content"), list) and any(
        isinstance(b, dict) and isinstance(b.get("text"), str) for b in row["content"])
    out: list[dict[str, Any]] = []
    for name, label in (("summary", "summary" + (" (not in the prompt: the reasoning text is)" if generated else "")),
                        ("content", "reasoning text")):
        blocks = row.get(name)
        blocks = blocks if isinstance(blocks, list) else []
        for k, b in enumerate(blocks):
            if isinstance(b, dict) and isinstance(b.get("text"), str):
                out.append(_box(name, f"{label} (part {k})", part=k))
        if name == "summary" and not blocks:
            out.append(_box(name, "summary (none yet: text typed here adds one)", part=0))
    return out


def _kept(row: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """One read-only chip naming what the item keeps that the editor does not edit."""
    bits = []
    for key, value in row.items():
        if key in FIELDS[kind] or key == "type":
            continue
        if key == "encrypted_content" and isinstance(value, str):
            bits.append(f"encrypted_content ({len(value):,} characters, not in the prompt)")
        elif isinstance(value, (str, int, float, bool)) and len(str(value)) <= 40:
            bits.append(f"{key} {value}")
        else:
            bits.append(key)
    if not bits:
        return []
    return [{"chip": "kept as is: " + " · ".join(bits), "kind": "kept",
             "title": "not edited here: saved exactly as it was"}]


__all__ = ["FIELDS", "INSTRUCTIONS", "ITEM_ROLES", "Edited", "RowMap", "apply", "edited", "editor_view",
           "kind_of", "new_item", "restore", "rows"]
