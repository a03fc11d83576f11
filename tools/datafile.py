"""Read the YAML sources under ``tools/data/`` for the ``make_*.py`` expanders.

Strict where YAML is lenient: a key written twice in one mapping is an error rather than the
last one silently winning, so an edit that pastes a category twice cannot drop a case unseen.
Uses libyaml's parser when PyYAML has it (the sources are a few hundred kilobytes; the pure
Python parser takes seconds on them), the pure Python one otherwise; both build the same data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class DataFileError(ValueError):
    """A source file under tools/data/ is not what its expander expects."""


class _UniqueKeyLoader(_Base):  # type: ignore[misc, valid-type]
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                mark = key_node.start_mark
                raise DataFileError(f"{mark.name}, line {mark.line + 1}: the key {key!r} is written twice")
            seen.add(key)
        return dict(super().construct_mapping(node, deep=deep))


def load_yaml(path: Path) -> Any:
    """The data in one YAML file (mappings keep the file's order)."""
    with path.open(encoding="utf-8") as f:
        return yaml.load(f, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
