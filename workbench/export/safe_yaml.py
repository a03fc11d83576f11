"""The bundle's YAML, read as data and nothing more: no anchors or aliases (an alias bomb expands a
few hundred bytes into gigabytes once anything walks the result), a bounded size, depth and node
count, and only JSON's types (no dates, sets or binary). The exporter writes nothing else, so
anything else is a file that was not written by it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..errors import BundleError
from .paths import read_bytes

# A real workbench.yaml is a few kilobytes; prompt-template constants can make it larger. Beyond
# these the file was not written by the exporter, and reading it would cost time and memory.
MAX_BYTES = 2 << 20
MAX_DEPTH = 64
MAX_NODES = 50_000


class _Refused(Exception):
    def __init__(self, message: str, mark: Any):
        self.message, self.mark = message, mark


class _BundleLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors and aliases and bounds depth and node count while composing
    (the composer recurses, so depth is bounded before Python's recursion limit is reached)."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(f"YAML alias *{event.anchor} refused: a bundle holds plain data, and an alias can "
                           "expand to gigabytes", event.start_mark)
        if getattr(event, "anchor", None) is not None:
            raise _Refused(f"YAML anchor &{event.anchor} refused: a bundle holds plain data (no anchors or "
                           "aliases)", event.start_mark)
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise _Refused(f"more than {MAX_NODES:,} YAML nodes", event.start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _BundleDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:   # the same object twice is written twice, never aliased
        return True


def _str(dumper: yaml.SafeDumper, data: str) -> Any:
    # PyYAML writes NEL and the Unicode line separators inside single quotes, where reading folds
    # them into other characters: double quotes escape them, so the text reads back as written.
    style = '"' if any(ch in data for ch in "\x85\u2028\u2029") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_BundleDumper.add_representer(str, _str)


def dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_BundleDumper, sort_keys=False, allow_unicode=True, width=100)


def loads(text: str, file: str) -> Any:
    """Parse bundle YAML; any refusal is a BundleError naming `file` and the line."""
    if len(text) > MAX_BYTES:
        raise BundleError(f"{file}: {len(text):,} characters, more than a bundle's {MAX_BYTES:,}", file=file,
                          hint="re-export the bundle")
    try:
        data = yaml.load(text, Loader=_BundleLoader)   # noqa: S506 - a SafeLoader subclass
    except _Refused as exc:
        raise BundleError(f"{file}, line {exc.mark.line + 1}: {exc.message}", file=file,
                          hint="re-export the bundle; write repeated values out in full") from None
    except yaml.YAMLError as exc:                      # yaml's message carries the line: pass it on
        raise BundleError(f"{file}: not valid YAML: {exc}", file=file) from None
    except ValueError as exc:
        # The constructors' own refusals, which are not YAMLErrors: an integer of more digits than
        # Python converts (4,300), a malformed timestamp or base64 value.
        raise BundleError(f"{file}: a value YAML cannot read ({exc})", file=file,
                          hint="re-export the bundle") from None
    _json_only(data, file, "")
    return data


def read(path: Path, file: str) -> Any:
    raw = read_bytes(path, MAX_BYTES, file, None)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BundleError(f"{file}: not UTF-8 ({exc})", file=file) from None
    return loads(text, file)


def _json_only(x: Any, file: str, path: str) -> None:
    """Only what JSON can hold: YAML's dates, sets and binary would hash and compare differently."""
    if isinstance(x, dict):
        for k, v in x.items():
            if not isinstance(k, str):
                raise BundleError(f"{file}: {path or '(top level)'} has a key {k!r} that is not a string",
                                  file=file, field=path or None)
            _json_only(v, file, f"{path}.{k}" if path else k)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            _json_only(v, file, f"{path}[{i}]")
    elif x is not None and not isinstance(x, (str, bool, int, float)):
        raise BundleError(f"{file}: {path or '(top level)'} is a YAML {type(x).__name__}, not a JSON value",
                          file=file, field=path or None, hint="quote it")
