"""The options several commands share, and one checker per kind of option value.

`common_options` adds the assembly options (model, template, tokenizer, budget, truncation,
injection, variables, output) to a command; `build_assembler` turns them into an Assembler. The checkers
below (`at_least`, `port`, `mebibytes`, `non_negative`, `fraction`, `folder`, `thresholds`) are
the only place an option value is judged: each raises one WorkbenchError naming the option, so
every command words the same mistake the same way (the runner prints it as one `error:` line,
exit 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import strict_json
from ..assembly import Assembler
from ..catalog import ModelEntry, lookup
from ..errors import WorkbenchError
from ..files import MiB, check_user_file, read_user_file
from ..injection import ASSISTANT_POLICIES, POLICIES
from ..sessions import SessionFile
from ..templates import DEFAULT_TEMPLATE, SHIPPED, RenderLimits
from ..templates.arguments import parse_template_arg, template_arguments
from ..templates.control_tokens import control_token_notes
from ..truncation import STRATEGIES, TruncationPolicy
from ..variables import VariableConfig
from .output import safe

if TYPE_CHECKING:
    from ..semantic.cache import Thresholds

TIB_IN_MIB = 2**20            # option sizes are in MiB; anything from 1 TiB up is a typo
MAX_SETTINGS_BYTES = 16 * MiB  # a JSON settings file read whole: --vars, --params, a model config.json


# --- the assembly options ------------------------------------------------------------------------
def common_options(p: argparse.ArgumentParser, turn: bool = True, compare_truncation: bool = False,
                   model: bool = True) -> None:
    """`compare_truncation`: `--truncation all` is allowed too (the command runs every policy).
    `model`: add `--model NAME` (a catalog model); a command whose `--model` means something of its
    own (prefill, simulate) leaves it out and sets `args.catalog_model` itself."""
    if model:
        model_option(p)
    p.add_argument("--template", default=None, help=f"shipped name, .jinja file or HF folder (default: the "
                                                    f"model's, else {DEFAULT_TEMPLATE})")
    p.add_argument("--tokenizer", default=None, help="name, hf:DIR, tiktoken:NAME (default: the model's, else the "
                                                     "template's own)")
    if turn:
        p.add_argument("--turn", type=int, default=None, help="turn number, from 1 (default: the last)")
    p.add_argument("--context-window", type=int, default=None,
                   help="tokens in the model's window (default: the session file's, else the model's, else the "
                        "template's)")
    p.add_argument("--reserve", type=int, default=None, help="tokens reserved for the output")
    p.add_argument("--template-arg", dest="template_args", action="append", metavar="KEY=VALUE", default=None,
                   help="a chat template argument (repeatable), VALUE as JSON where it is JSON: "
                        "enable_thinking=false, reasoning_effort=high; part of the cache key")
    p.add_argument("--vars", metavar="FILE", default=None,
                   help='prompt-template variables: JSON {"constants": {...}, "request": {...}, "declare": {...}}')
    p.add_argument("--no-truncate", action="store_true", help="report an over-budget prompt instead of dropping")
    p.add_argument("--truncate-unit", choices=("turn", "message"), default="turn",
                   help="what is dropped at once, oldest first (tool calls always go with their results)")
    p.add_argument("--truncation", choices=STRATEGIES + (("all",) if compare_truncation else ()), default="sliding",
                   help="how history leaves once it overflows: sliding (the fewest turns), chunked (down to "
                        "--low-water, so the kept prefix holds for the next turns, cache-friendly), summary-slot "
                        "(chunked, a summary message in their place)"
                        + ("; all: each of them, side by side" if compare_truncation else ""))
    p.add_argument("--low-water", type=float, default=0.5,
                   help="chunked, summary-slot: the share of the budget the history falls to when turns leave")
    p.add_argument("--cut", action="store_true",
                   help="allow cutting the newest dropped message at a token boundary (marked) to fill the budget")
    p.add_argument("--injection", choices=POLICIES, default="escape",
                   help="special-token strings in request text (system, user, tool results, names, ids): "
                        "escape (default), reject, allow")
    p.add_argument("--tool-injection", choices=POLICIES, default="escape",
                   help="special-token strings in tool schemas: escape (default), reject, allow")
    p.add_argument("--assistant-injection", choices=ASSISTANT_POLICIES, default="model",
                   help="special-token strings in assistant output: model (default: keep <think>, <tool_call> "
                        "and the like, escape turn markers), escape, reject, allow")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--tokens", action="store_true", help="show token boundaries in the view")
    p.add_argument("--full", action="store_true", help="do not fold long segments in the view")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")


def model_option(p: argparse.ArgumentParser) -> None:
    """`--model NAME`: a model from the catalog (`workbench models`)."""
    p.add_argument("--model", dest="catalog_model", metavar="NAME", default=None,
                   help="a model from the catalog (`workbench models`): sets template, tokenizer, context window "
                        "(and the KV shape where one is used); --template, --tokenizer and --context-window still "
                        "override each")


def catalog_entry(args: argparse.Namespace) -> ModelEntry | None:
    """The catalog model the options name (`--model`), or None. An unknown name is a
    ModelNotFoundError listing the closest names."""
    named = getattr(args, "catalog_model", None)
    if named is None or isinstance(named, ModelEntry):
        return named
    return lookup(named)


def model_json(entry: ModelEntry | None) -> dict[str, Any] | None:
    """What a command's JSON says about the model it used (`"model": null` when none was named)."""
    if entry is None:
        return None
    return {"id": entry.id, "label": entry.label, "estimate": entry.estimate, "hosted": entry.hosted}


def announce(asm: Assembler, entry: ModelEntry | None) -> None:
    """For commands whose output has no diagnostics: the assembler's warnings that hold for every
    turn (a template's control tokens the tokenizer lacks) and the model's estimate note, on stderr."""
    for d in control_token_notes(asm.template, asm.tokenizer):
        print(safe(f"warning: {d.code}: {d.message}"), file=sys.stderr)
    if entry is not None and entry.estimate:
        print(f"note: {entry.id}: estimate: {entry.estimate}", file=sys.stderr)


def projection_option(p: argparse.ArgumentParser) -> None:
    """`--projection`: the prefix-stable projection instead of the template's own rendering (render, analyze)."""
    p.add_argument("--projection", action="store_true",
                   help="prefix-stable projection: each turn is what the engine held after the previous one (its "
                        "prompt and the reply as generated) followed by the template's rendering of the new messages")


def load_vars(path: str) -> tuple[VariableConfig, dict[str, Any]]:
    p = Path(path)
    raw = read_user_file(p, cap=MAX_SETTINGS_BYTES, what="--vars file",
                         raise_hint="prompt-template variables are small: keep large data out of them")
    try:
        data = strict_json.loads(raw.decode("utf-8"))
    except strict_json.JSONValueError as exc:   # NaN, too deep, a lone surrogate...: where, and how to fix it
        raise WorkbenchError(f"{p.name}: {exc}", hint=exc.hint or None) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WorkbenchError(f"{p.name} is not valid UTF-8 JSON: {exc}", hint="fix the variables file") from None
    if not isinstance(data, dict):
        raise WorkbenchError(f"{p.name} must hold a JSON object, got {type(data).__name__}")
    return VariableConfig.from_json(data, where=p.name)


def build_assembler(session: SessionFile, args: argparse.Namespace, cache: object = "auto"
                    ) -> tuple[Assembler, Callable[[dict[str, Any]], dict[str, Any]]]:
    """The Assembler the options describe, and how to prepare one of the session's requests for it.

    A catalog model (`--model`) sets the template, the tokenizer and the window; each option given
    wins over it. The window, highest first: `--context-window`; the session file's own
    `context_window` (it belongs to the scenario the session was written for, such as a small
    window to show truncation, whatever model plays it); the model's; the template's default. A
    request's own `"model"` field is never applied: a request naming gpt-4o leaves the template
    alone (name the model with --model)."""
    at_least(args.context_window, 1, "--context-window")
    at_least(args.reserve, 0, "--reserve")
    entry = catalog_entry(args)
    cw = args.context_window
    if cw is None and isinstance(session.raw.get("context_window"), int):
        cw = session.raw["context_window"]
    if cw is None and entry is not None:
        cw = entry.context_window
    template = args.template or (entry.template if entry is not None else None) or DEFAULT_TEMPLATE
    tokenizer = args.tokenizer or (entry.tokenizer if entry is not None else None)
    check_model_files(template, tokenizer)
    options: dict[str, Any] = {}
    if args.template and args.template not in SHIPPED:  # a file or folder nobody reviewed: its own process
        options["render_limits"] = RenderLimits(isolate=True)
    request_vars: dict[str, Any] = {}
    if args.vars:
        options["variables"], request_vars = load_vars(args.vars)
    template_kwargs = template_args(getattr(args, "template_args", None))
    if template_kwargs:
        options["template_kwargs"] = template_kwargs
    asm = Assembler(template=template, tokenizer=tokenizer,
                    context_window=cw, reserve=args.reserve, injection=args.injection,
                    tool_injection=args.tool_injection, assistant_injection=args.assistant_injection,
                    truncation=TruncationPolicy(enabled=not args.no_truncate, unit=args.truncate_unit,
                                                cut=args.cut, strategy=args.truncation, low_water=args.low_water),
                    cache=cache, model=entry.id if entry is not None else None, **options)

    if template_kwargs:
        read = template_arguments(asm.template.source)
        for key in sorted(set(template_kwargs) - set(read)):
            print(safe(f"warning: template_arg_unused: the template {asm.template.name!r} does not read {key!r} "
                       f"(it reads: {', '.join(read) or 'no arguments'})"), file=sys.stderr)

    def prepare(request: dict[str, Any]) -> dict[str, Any]:
        if not request_vars:
            return request
        # The file's request variables join the request's own; the file wins on a clash.
        own = request.get("variables")
        return {**request, "variables": {**(own if isinstance(own, dict) else {}), **request_vars}}

    return asm, prepare


# The files a template or tokenizer option names are read by their loaders (templates/,
# tokenizers/). Checked here first, as files.py checks every file a user names: a FIFO or a
# device in a model folder is an error naming it, not a read that never ends.
MAX_TEMPLATE_FILE_BYTES = 16 * MiB     # a .jinja file, a tokenizer_config.json with its chat templates
MAX_TOKENIZER_FILE_BYTES = 256 * MiB   # a tokenizer.json or .tiktoken file (the largest are tens of MiB)
# What the loaders read in a Hugging Face model folder (a template's folder gives its tokenizer too).
_FOLDER_FILES = {"chat_template.jinja": (MAX_TEMPLATE_FILE_BYTES, "template file"),
                 "tokenizer_config.json": (MAX_TEMPLATE_FILE_BYTES, "template file"),
                 "tokenizer.json": (MAX_TOKENIZER_FILE_BYTES, "tokenizer file")}


def check_model_files(template: str | None, tokenizer: str | None) -> None:
    """Refuse now a template or tokenizer file (or one in a model folder) that is not a regular file
    or is over its cap; names that are not paths are left to the loaders."""
    named: list[tuple[str, int, str]] = []
    if template and template not in SHIPPED:
        named.append((template, MAX_TEMPLATE_FILE_BYTES, "template file"))
    for prefix in ("hf:", "tiktoken:"):
        if tokenizer and tokenizer.startswith(prefix):
            named.append((tokenizer[len(prefix):], MAX_TOKENIZER_FILE_BYTES, "tokenizer file"))
    for ref, cap, what in named:
        p = Path(ref).expanduser()
        if p.is_dir():
            for name, (file_cap, file_what) in _FOLDER_FILES.items():
                if os.path.lexists(p / name):
                    check_user_file(p / name, cap=file_cap, what=file_what)
        elif os.path.lexists(p):
            check_user_file(p, cap=cap, what=what)


def template_args(given: list[str] | None) -> dict[str, Any]:
    """`--template-arg KEY=VALUE`, each given once (a key given twice with two values is a mistake)."""
    out: dict[str, Any] = {}
    for text in given or []:
        key, value = parse_template_arg(text)
        if key in out and out[key] != value:
            raise WorkbenchError(f"--template-arg {key} is given twice, with different values",
                                 hint="give each template argument once")
        out[key] = value
    return out


# --- one checker per kind of value ---------------------------------------------------------------
def at_least(value: int | None, minimum: int, flag: str) -> None:
    """A count (tokens, turns, a window): None means the option was not given."""
    if value is not None and value < minimum:
        raise WorkbenchError(f"{flag} must be at least {minimum}, got {value}")


def port(value: int, flag: str = "--port") -> None:
    if not 0 <= value <= 65535:
        raise WorkbenchError(f"{flag} must be between 0 and 65535, got {value}", hint="0 picks a free port")


def mebibytes(value: float, flag: str, *, zero: bool) -> int:
    """A size given in MiB, as bytes. `zero`: whether 0 (nothing) is allowed; nan and inf are
    refused here, where int() would fail without naming the option."""
    low_ok = value >= 0 if zero else value * 2**20 >= 1
    if not (low_ok and value < TIB_IN_MIB):   # `not (...)`: nan fails every comparison
        span = "from 0 to under 1 TiB" if zero else "more than 0 and under 1 TiB"
        raise WorkbenchError(f"{flag} must be {span}, got {value}")
    return int(value * 2**20)


def non_negative(value: float | None, flag: str) -> None:
    """A price or a cost: None means the option was not given."""
    if value is not None and not 0 <= value < float("inf"):   # also refuses nan
        raise WorkbenchError(f"{flag} must be a number of at least 0, got {value}")


def fraction(value: float, flag: str) -> None:
    if not 0 <= value <= 1:   # also refuses nan
        raise WorkbenchError(f"{flag} must be between 0 and 1, got {value}")


def folder(value: str | None, flag: str) -> None:
    """A folder option: left out is the default, given empty is a mistake."""
    if value is not None and not value.strip():
        raise WorkbenchError(f"{flag} is empty", hint="give a folder, or leave the option out for the default")


def thresholds(text: str | None, flag: str = "--thresholds") -> Thresholds | None:
    """The semantic cache's HIGH,LOW pair (None when the option was not given)."""
    if text is None:
        return None
    from ..semantic.cache import Thresholds  # the semantic cache only for the commands that use it
    try:
        high, low = (float(x) for x in text.split(","))
    except ValueError:
        raise WorkbenchError(f"{flag} takes HIGH,LOW (two numbers), got {text!r}") from None
    return Thresholds(high=high, low=low)
