"""Shared state: what the workbench shows, as one URL-safe string (a link's `?state=`, a notebook cell).

The string carries content, never paths: the session file's JSON object, the template's name (a
shipped one) or a custom template's source, the tokenizer's name, the truncation policy, the
selected turn, when one is chosen, the catalog model's id (absent otherwise, so a state without
a model is the same string as before models; a name the catalog does not hold is not refused here:
the page opens the rest and says so) and, when any is set, the chat template's arguments (absent
otherwise too). It is `base64url(zlib(JSON))`, without padding. Reading one is hostile input by
default, so every step is bounded before the next one runs:

1. the string's length (`max_chars`; a link defaults to what a browser and the app's server carry),
   and its alphabet (base64url only);
2. the decompressed size, enforced while decompressing (`zlib.decompressobj` with `max_length`):
   a small string that inflates to gigabytes stops at `MAX_JSON_BYTES` and is refused;
3. the JSON, through `strict_json` (depth, huge integers, NaN, lone surrogates);
4. the shape: the keys below and no others, each of its type and size; the template a known name;
   the tokenizer a known name or "auto"; the policy a known one; the session checked as a loaded session file is
   (`sessions.parse_session`), the turn one it has; the template arguments an object of at most
   MAX_ARGUMENTS, each checked as `--template-arg` checks one (templates/arguments.py).

What the string holds is never trusted further than an uploaded session file: the session's text
goes through the same assembly (special tokens in it are escaped or reported as for any request),
and a custom template renders in the isolated worker the app uses for a typed-in template. A
template argument is the sender's text too, rendered by the template where it likes (not where
request text goes, so the injection guard does not see it): when the link is opened
(`ui/sharing.py`), arguments holding a control-token string of the tokenizer are not applied, and
the page says so. Any failure here is a `ShareError` naming the step; nothing here touches the disk.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

from . import strict_json
from .errors import SessionFileError, ShareError, TemplateError
from .sessions import parse_session
from .templates import DEFAULT_TEMPLATE, shipped_names
from .templates.arguments import template_kwargs
from .tokenizers import names as tokenizer_names
from .truncation import POLICIES, TruncationPolicy

VERSION = 1
AUTO = "auto"                              # the tokenizer: the template's own
# A link travels in a request line: Tornado reads at most 64 KiB of headers, browsers carry ~2 MB.
MAX_LINK_CHARS = 60_000
MAX_CELL_CHARS = 16 * 1024 * 1024          # a notebook cell has no such limit; still bounded
MAX_JSON_BYTES = 32 * 1024 * 1024          # decompressed: a zip bomb stops here
MAX_NAME_CHARS = 100
MAX_TEMPLATE_CHARS = 1_000_000             # the app's template box holds as much
KEYS = frozenset({"v", "session", "name", "template", "tokenizer", "custom_template", "turn", "policy", "model",
                  "template_args"})
MAX_MODEL_CHARS = 200                      # a catalog model's name; looked up when opened, never a path
DEFAULT_POLICY = TruncationPolicy().strategy
_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")


@dataclass(frozen=True)
class SharedState:
    """What a link or a cell reproduces. `session` is the session file's JSON object (its tools,
    variables and context window included); `name` a label only (never a path)."""
    session: dict[str, Any]
    name: str = "shared.json"
    template: str = DEFAULT_TEMPLATE
    tokenizer: str = AUTO
    custom_template: str = ""
    turn: int | None = None                # None: the last turn
    policy: str = DEFAULT_POLICY           # the truncation policy (truncation.POLICIES)
    model: str = ""                        # a catalog model's id ("" none); an unknown one is said when opened
    template_args: dict[str, Any] = field(default_factory=dict)   # the chat template's arguments ({} none)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"v": VERSION, "session": self.session, "name": self.name, "template": self.template,
                               "tokenizer": self.tokenizer}
        if self.custom_template:
            out["custom_template"] = self.custom_template
        if self.turn is not None:
            out["turn"] = self.turn
        if self.policy != DEFAULT_POLICY:
            out["policy"] = self.policy
        if self.model:
            out["model"] = self.model      # absent when none: a link made before models reads the same
        if self.template_args:
            out["template_args"] = self.template_args   # absent when none, as the model
        return out


def encode(state: SharedState, *, max_chars: int = MAX_LINK_CHARS) -> str:
    """The state as a URL-safe string; ShareError when it is longer than `max_chars` (a long
    session does not fit in a link: the notebook cell takes MAX_CELL_CHARS)."""
    check(state)     # what would not read back is refused now, not when the link is opened
    raw = json.dumps(state.to_json(), ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    if len(raw) > MAX_JSON_BYTES:
        raise ShareError(f"the state is {len(raw):,} bytes of JSON, over {MAX_JSON_BYTES:,}",
                         hint="share a shorter session (save it to a file instead)")
    text = base64.urlsafe_b64encode(zlib.compress(raw, 9)).rstrip(b"=").decode("ascii")
    if len(text) > max_chars:
        raise ShareError(f"the session is too long to share this way: {len(text):,} characters, "
                         f"over {max_chars:,}", hint="share it as a notebook cell, or save the session to a file")
    return text


def decode(text: Any, *, max_chars: int = MAX_LINK_CHARS) -> SharedState:
    """A shared string back as a SharedState, checked at every step (see the module's doc)."""
    if not isinstance(text, str):
        raise ShareError("the shared state is not text")
    text = text.strip()
    if not text:
        raise ShareError("the shared state is empty")
    if len(text) > max_chars:
        raise ShareError(f"the shared state is {len(text):,} characters, over the limit of {max_chars:,}")
    if not _ALPHABET.fullmatch(text):
        raise ShareError("the shared state is not base64url text", hint="copy the whole link again")
    try:
        packed = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ShareError("the shared state is not base64url text", hint="copy the whole link again") from None
    return from_json(strict_loads(inflate(packed)))


def inflate(packed: bytes, limit: int = MAX_JSON_BYTES) -> bytes:
    """zlib data decompressed to at most `limit` bytes: more is refused, never produced."""
    d = zlib.decompressobj()
    try:
        out = d.decompress(packed, limit + 1)    # output stops here; the input left stays unread
    except zlib.error:
        raise ShareError("the shared state is damaged (not zlib data)", hint="copy the whole link again") from None
    if len(out) > limit or d.unconsumed_tail:
        raise ShareError(f"the shared state decompresses to more than {limit:,} bytes",
                         hint="this is not a state the workbench made")
    if not d.eof or d.unused_data:
        raise ShareError("the shared state is damaged (cut short, or with bytes after it)",
                         hint="copy the whole link again")
    return out


def strict_loads(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ShareError("the shared state is not UTF-8 text") from None
    try:
        return strict_json.loads(text)
    except json.JSONDecodeError as exc:    # strict_json's JSONValueError is one too
        raise ShareError(f"the shared state is not valid JSON: {exc}") from None


def from_json(data: Any) -> SharedState:
    """The decoded JSON as a SharedState, its shape and names checked."""
    if not isinstance(data, dict):
        raise ShareError("the shared state is a JSON object")
    extra = sorted(set(data) - KEYS)
    if extra:
        raise ShareError(f"the shared state has unknown fields: {', '.join(map(repr, extra[:5]))}",
                         hint="it was made by another version, or by hand")
    if data.get("v") != VERSION:
        raise ShareError(f"the shared state's version is {data.get('v')!r}, this workbench reads {VERSION}")
    turn = data.get("turn")
    state = SharedState(session=data.get("session"),  # type: ignore[arg-type]  # checked below
                        name=_text(data, "name", "shared.json", MAX_NAME_CHARS),
                        template=_text(data, "template", DEFAULT_TEMPLATE, 100),
                        tokenizer=_text(data, "tokenizer", AUTO, 100),
                        custom_template=_text(data, "custom_template", "", MAX_TEMPLATE_CHARS),
                        turn=turn, policy=_text(data, "policy", DEFAULT_POLICY, 100),
                        model=_text(data, "model", "", MAX_MODEL_CHARS),
                        template_args=_arguments(data.get("template_args", {})))
    check(state)
    return state


def _arguments(value: Any) -> dict[str, Any]:
    """The link's template arguments, checked as `--template-arg` checks them (names, plain JSON
    values, sizes, how many)."""
    try:
        return template_kwargs(value, where="template argument")
    except TemplateError as exc:
        raise ShareError(f"the shared state's {exc.message.removeprefix('template: ')}",
                         hint=exc.hint) from None


def _text(data: dict[str, Any], key: str, default: str, limit: int) -> str:
    v = data.get(key, default)
    if not isinstance(v, str):
        raise ShareError(f"the shared state's {key} is text, got {type(v).__name__}")
    if len(v) > limit:
        raise ShareError(f"the shared state's {key} is {len(v):,} characters, over {limit:,}")
    return v


def check(state: SharedState) -> None:
    """A SharedState that the workbench can open: known names, a session file, a turn it has."""
    if state.template not in shipped_names():
        raise ShareError(f"unknown template {state.template[:60]!r} in the shared state",
                         hint=f"one of {', '.join(shipped_names())}")
    if state.tokenizer != AUTO and state.tokenizer not in tokenizer_names():
        raise ShareError(f"unknown tokenizer {state.tokenizer[:60]!r} in the shared state",
                         hint=f"{AUTO} or one of {', '.join(tokenizer_names())}")
    if state.policy not in POLICIES:
        raise ShareError(f"unknown truncation policy {state.policy[:60]!r} in the shared state",
                         hint=f"one of {', '.join(POLICIES)}")
    if not isinstance(state.session, dict):
        raise ShareError("the shared state's session is a JSON object (a session file)")
    _arguments(state.template_args)
    try:
        turns = len(parse_session(state.session).turns)
    except SessionFileError as exc:
        raise ShareError(f"the shared session: {exc}") from None
    t = state.turn
    if t is not None and (not isinstance(t, int) or isinstance(t, bool) or not 1 <= t <= turns):
        raise ShareError(f"the shared state's turn {t!r} is not a turn of its session (1..{turns})")


def safe_name(name: str) -> str:
    """A label from a shared name: its last part, printable characters only, never a path."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(c for c in base if c.isprintable())[:MAX_NAME_CHARS].lstrip(".")
    return base if base.endswith(".json") else (base or "shared") + ".json"


def link(base_url: str, text: str) -> str:
    """The app's page at `base_url` opened on the shared state."""
    return f"{base_url.rstrip('/')}/?state={text}"


def notebook_cell(text: str) -> str:
    """A notebook cell that rebuilds the state (`Workbench.from_share`)."""
    return f'from workbench.ui.notebook import Workbench\nwb = Workbench.from_share("{text}")\nwb'
