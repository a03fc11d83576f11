"""What commands print: with --json one JSON object on one line (non-ASCII text kept as is);
without it, text in which nothing from the data can drive the terminal (`safe`).

Text from data (a message, a title, a log's `client`, a file name, an error quoting a value) may
hold control characters: ESC starts the sequences that retitle the window, clear the screen, move
the cursor or rewrite what was printed before; CR and BS overwrite a line. Every text-mode command
passes such text through `safe`, which shows each control character as a `\\x1b`-style escape.
"""

from __future__ import annotations

import json
import sys
from typing import Any

# C0 controls, DEL and the C1 controls (U+0080..U+009F: U+009B is CSI on terminals that read C1).
_CONTROLS = [*range(0x00, 0x20), *range(0x7F, 0xA0)]
_ESCAPES = {c: f"\\x{c:02x}" for c in _CONTROLS}
_INLINE = str.maketrans(_ESCAPES)
# Multi-line text (a rendered prompt, a metrics page): its line breaks and tabs are its layout.
_LAYOUT = str.maketrans({c: e for c, e in _ESCAPES.items() if chr(c) not in "\n\t"})
# JSON escapes the C0 controls itself; DEL and the C1 controls it writes as they are (ensure_ascii
# off), so they are written as \\u escapes: the same JSON value, nothing a terminal acts on.
_JSON = str.maketrans({c: f"\\u{c:04x}" for c in range(0x7F, 0xA0)})


def safe(text: object, *, layout: bool = False) -> str:
    """`text` (str() of it) with every control character shown as an escape: ESC as `\\x1b`, CR as
    `\\x0d`. `layout`: keep line breaks and tabs (multi-line text); otherwise they are escaped too,
    so that a value from the data stays on its line of a table.

        >>> safe("\\x1b]0;pwned\\x07title\\r")
        '\\\\x1b]0;pwned\\\\x07title\\\\x0d'
        >>> safe("a\\n\\tb\\x1b[2J", layout=True)
        'a\\n\\tb\\\\x1b[2J'
    """
    return str(text).translate(_LAYOUT if layout else _INLINE)


class SafeText:
    """A text stream whose every write goes through `safe(..., layout=True)`: a report whose lines
    carry text from the data (a turn's message, a generated reply) cannot drive the terminal."""

    def __init__(self, out: Any):
        self._out = out

    def write(self, text: str) -> int:
        return int(self._out.write(safe(text, layout=True)))


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False).translate(_JSON))
    sys.stdout.write("\n")
