"""The workbench's state as a shared string, and back (no UI library here; the codec and its limits
are in `workbench/share.py`).

`shared_state(state)` is what a link or a notebook cell carries: the session's JSON object as it is
being edited (its tools, variables, context window and reserve with it), its name as a label, the
catalog model (when one is chosen), the template or custom template, its arguments (when any is
set), the tokenizer, the truncation policy and the selected turn. `apply_shared(state, shared)` puts
a decoded one into a `WorkbenchState`: a new document with no path (the link carries content, never
a file to read), the choices, the turn. A model name the catalog does not hold opens the rest of the
state without a model, its error (with the closest names) kept in `state.model_error` for the page
to show. A custom template from a link renders where a typed one does: in the isolated worker
process (`WorkbenchState.assembler`).

Template arguments are operator configuration where the user types them (the box, the command
line, the Python API), but a link's are whoever sent it: the template renders them into the prompt
outside the request fields the injection guard escapes, so a `<|im_start|>` in one would be a
control token. A link's arguments holding any of the tokenizer's control-token strings are therefore
not applied: the rest of the link opens, and `state.template_args_error` says which argument held
which token (the control shows it). Their names, values and sizes were checked when it was decoded.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from ..errors import ModelNotFoundError, WorkbenchError
from ..share import MAX_LINK_CHARS, SharedState, decode, encode, link, notebook_cell, safe_name
from ..templates.arguments import control_tokens
from .document import SessionDocument
from .state import WorkbenchState

_HOST = re.compile(r"(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")


def shared_state(state: WorkbenchState) -> SharedState:
    return SharedState(session=state.doc.data, name=state.doc.name, template=state.template,
                       tokenizer=state.tokenizer, custom_template=state.custom_source,
                       turn=state.turn if state.turn != state.doc.turn_count else None, policy=state.policy,
                       model=state.model.id if state.model is not None else "",
                       template_args=dict(state.template_args))


def share_text(state: WorkbenchState, *, max_chars: int = MAX_LINK_CHARS) -> str:
    """The state as a URL-safe string (ShareError when it does not fit in `max_chars`)."""
    return encode(shared_state(state), max_chars=max_chars)


def apply_shared(state: WorkbenchState, shared: SharedState) -> None:
    """Show the shared state: its session (a new document, no path), choices and turn."""
    # A copy: the state edits its document in place (its top-level keys), the caller keeps its own.
    doc = SessionDocument(copy.deepcopy(shared.session), None, safe_name(shared.name))
    state.restored_at = None
    state.open(doc)
    # The link's model first ("" none: a link made before models, or without one), then its template
    # and tokenizer (the model's own, or chosen by hand over it).
    try:
        state.choose(model=shared.model)
    except ModelNotFoundError as exc:
        state.choose(model="")
        state.model_error = f"this link's model: {exc}"
    state.choose(template=shared.template, tokenizer=shared.tokenizer, custom_source=shared.custom_template)
    state.set_budget(policy=shared.policy)
    state.choose(template_args={})
    if shared.template_args:
        refused = _refused_arguments(state, shared.template_args)
        if refused:
            state.template_args_error = refused
        else:
            state.choose(template_args=shared.template_args)
    if shared.turn is not None:
        state.select_turn(shared.turn)


def _refused_arguments(state: WorkbenchState, args: dict[str, Any]) -> str:
    """Why a link's template arguments are not applied ('' when they may be): a control-token string
    of the tokenizer the link's choices assemble with, in a name or a value."""
    try:
        tokenizer = state.assembler().tokenizer
    except WorkbenchError as exc:      # a link's custom template that does not load: nothing to check with
        return f"this link's template arguments were not applied: the tokenizer to check them with: {exc}"
    found = control_tokens(args, tokenizer)
    if not found:
        return ""
    said = ", ".join(f"{key} holds {token!r}" for key, token in found[:3])
    return (f"this link's template arguments were not applied: {said} (a control token of {tokenizer.name}; a "
            "link's arguments are the sender's text, not the operator's)")


def open_text(state: WorkbenchState, text: str, *, max_chars: int = MAX_LINK_CHARS) -> None:
    """Decode `text` and show it; a ShareError changes nothing."""
    apply_shared(state, decode(text, max_chars=max_chars))


def base_url(host_header: object) -> str:
    """The app's address as the browser reached it (the request's Host header), for the link it
    shows; anything that is not a plain host[:port] falls back to the loopback address."""
    host = host_header if isinstance(host_header, str) and _HOST.fullmatch(host_header) else "127.0.0.1"
    return f"http://{host}"


__all__ = ["apply_shared", "base_url", "link", "notebook_cell", "open_text", "share_text", "shared_state"]
