"""Read the YAML sources under ``tools/data/`` for the ``make_*.py`` expanders.

Strict where YAML is lenient: a key written twice in one mapping is an error rather than the
last one silently winning, so an edit that pastes a category twice cannot drop a case unseen.
And a date or time written unquoted (``depart_date: 2026-03-14``) stays text, as the JSON the
sources become needs, instead of turning into a ``datetime.date``.

Uses libyaml's parser when PyYAML has it (on these sources, about 300 kB in all, the pure Python
parser is some twenty times slower), the pure Python one otherwise; both build the same data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class DataFileError(ValueError):
    """A source file under tools/data/ is not what its expander expects."""


class _UniqueKeyLoader(_Base):  # type: ignore[misc]
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)  # YAML merge keys (<<: *anchor) first, as SafeLoader does
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                mark = key_node.start_mark
                raise DataFileError(f"{mark.name}, line {mark.line + 1}: the key {key!r} is written twice")
            seen.add(key)
        return dict(super().construct_mapping(node, deep=deep))


_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _Base.yaml_implicit_resolvers.items()
}


def load_yaml(path: Path) -> Any:
    """The data in one YAML file (mappings keep the file's order)."""
    with path.open(encoding="utf-8") as f:
        return yaml.load(f, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
