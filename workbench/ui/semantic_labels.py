"""The user's own semantic-cache labels (no UI library): a pair the Semantic tab showed (the selected
turn against one of its neighbours), labelled "should hit" or "should miss", appended to a JSON-lines
file in the shipped evaluation format, so `workbench semantic eval --dataset FILE` scores it:

    {"context": [...], "cached_context": [...], "category": str, "should_hit": bool, "lang": "en"|"zh", "id": str}

- The file is `semantic_labels.jsonl` in the sessions folder (the app's `--sessions DIR`; the
  notebook's WORKBENCH_HOME/sessions), found through `ConfinedFolder`: a link leading out of the
  folder is refused, and nothing of the session (its name, its text) becomes part of a path.
- Each write is the whole file written anew and renamed over the old one (`atomic_write`): a crash
  leaves the old file or the new one, never half a line. Writers in this process take a lock, other
  processes an advisory lock on the folder (where the platform has one), so no label is lost
  between a read and the rename.
- A pair's id is a digest of its two contexts: labelling the same pair again replaces its line.
- Text is data: it is written as JSON strings, with the characters `str.splitlines` (and so the
  dataset reader) would break a line at escaped, so a message holding control tokens, newlines or
  U+2028 stays one line and reads back unchanged. A lone surrogate (which a session file's JSON can
  hold) becomes U+FFFD: the dataset reader refuses such text, and one such line would make the
  whole file unreadable.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import WorkbenchError
from ..home import workbench_home
from ..semantic.evaluate import CATEGORIES, SHOULD_HIT
from .document import atomic_write
from .files import ConfinedFolder

if TYPE_CHECKING:
    from .semantic_replay import LookupPairs

try:
    import fcntl
except ImportError:      # not on Windows: the process lock alone
    fcntl = None  # type: ignore[assignment]

LABELS_FILE = "semantic_labels.jsonl"
USER_CATEGORY = "user"          # a label given no category becomes "user_hit" or "user_miss" (the report
# reads a category's direction from its cases); a shipped category (evaluate.CATEGORIES) only in its
# direction (a paraphrase should hit), so that the per-category figures keep their meaning
# Han characters (with the extensions and compatibility block): a pair holding any is Chinese.
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef]")
# What str.splitlines breaks at that JSON leaves raw (it escapes the rest, below U+0020): escaped as \\uXXXX.
_UNSAFE = re.compile("[\x85\u2028\u2029]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_LOCK = threading.Lock()


def category_options() -> list[tuple[str, str]]:
    """The label bar's categories, (label, value): none first (a label of the user's own)."""
    return [(f"no category ({USER_CATEGORY}_hit / {USER_CATEGORY}_miss)", ""),
            *((f"{c.replace('_', ' ')} ({'hit' if SHOULD_HIT[c] else 'miss'})", c) for c in CATEGORIES)]


def lang_of(*contexts: Sequence[dict]) -> str:
    """"zh" when any message of the contexts holds a Han character, else "en"."""
    return "zh" if any(_HAN.search(_text(m)) for ctx in contexts for m in ctx) else "en"


def _text(m: dict) -> str:
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return " ".join(str(b.get("text", "")) for b in c if isinstance(b, dict))
    return ""


def _clean(context: Sequence[dict], what: str) -> list[dict]:
    """The messages as the dataset holds them: role and text content only; ends with a user message."""
    msgs = [{"role": str(m.get("role")), "content": _SURROGATE.sub("\ufffd", _text(m))}
            for m in context if isinstance(m, dict)]
    if not msgs or msgs[-1]["role"] != "user":
        raise WorkbenchError(f"a label's {what} must end with a user message")
    return msgs


def pair_id(context: Sequence[dict], cached_context: Sequence[dict]) -> str:
    """The same pair, the same id (so a second label replaces the first): a digest of both contexts."""
    blob = json.dumps([list(context), list(cached_context)], ensure_ascii=True, sort_keys=True)
    return "user/" + hashlib.sha256(blob.encode("ascii")).hexdigest()[:16]


def label_record(context: Sequence[dict], cached_context: Sequence[dict], should_hit: bool,
                 category: str | None = None) -> dict[str, Any]:
    """One labelled pair in the shipped format. `category`: one of the shipped set's (in its
    direction: a paraphrase should hit), or None / "" / "user" for a label of the user's own."""
    cat = category or USER_CATEGORY
    if cat in (USER_CATEGORY, f"{USER_CATEGORY}_hit", f"{USER_CATEGORY}_miss"):
        cat = f"{USER_CATEGORY}_{'hit' if should_hit else 'miss'}"
    else:
        if cat not in CATEGORIES:
            raise WorkbenchError(f"unknown category {cat[:40]!r}",
                                 hint=f"one of {', '.join(CATEGORIES)}, or none")
        if SHOULD_HIT[cat] != bool(should_hit):
            fits = ", ".join(k for k in CATEGORIES if SHOULD_HIT[k] == bool(should_hit))
            raise WorkbenchError(f"“{cat.replace('_', ' ')}” is a category of pairs that should "
                                 f"{'' if SHOULD_HIT[cat] else 'not '}hit, but this label says the pair should "
                                 f"{'' if should_hit else 'not '}hit", hint=f"choose {fits}, or no category")
    ctx, cached = _clean(context, "context"), _clean(cached_context, "cached context")
    return {"context": ctx, "cached_context": cached, "category": cat, "should_hit": bool(should_hit),
            "lang": lang_of(ctx, cached), "id": pair_id(ctx, cached)}


def pair_label(pairs: "LookupPairs | None", entry: Any, should_hit: bool, category: str | None, *,
               generation: int, turn: int) -> dict[str, Any]:
    """The label of the pair the tab showed: turn `pairs.turn` against neighbour `entry` (an entry id,
    as the tab's choice sends it). Refused, saying why, when that pair is no longer what the
    session holds: no lookup yet, another turn selected or the session edited since (the document's
    `generation` and selected `turn` now), or no such neighbour."""
    again = "look this turn up again, then label"
    if pairs is None:
        raise WorkbenchError("nothing to label: look this turn up first", hint="press the lookup button")
    if generation != pairs.generation or turn != pairs.turn:
        what = "another turn is selected" if turn != pairs.turn else "the session changed"
        raise WorkbenchError(f"{what} since the lookup of turn {pairs.turn}: its neighbours are gone", hint=again)
    try:
        found = pairs.neighbours.get(int(entry))
    except (TypeError, ValueError):
        found = None
    if found is None:
        raise WorkbenchError("that neighbour is not among this lookup's neighbours", hint=again)
    return label_record(pairs.messages, found.messages, should_hit, category)


def dumps_line(record: dict[str, Any]) -> str:
    """One JSON line, whatever the text holds (module docstring)."""
    text = json.dumps(record, ensure_ascii=False)
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


@dataclass(frozen=True)
class Added:
    path: Path
    replaced: bool          # the pair was labelled before: its line replaced
    count: int              # labels in the file now


class LabelsFile:
    """The labels file in `folder` (a ConfinedFolder: the sessions folder)."""

    def __init__(self, folder: ConfinedFolder, name: str = LABELS_FILE):
        self.folder, self.name = folder, name

    @classmethod
    def default(cls) -> "LabelsFile":
        """WORKBENCH_HOME/sessions/semantic_labels.jsonl: the app's default sessions folder (the notebook's)."""
        return cls(ConfinedFolder(workbench_home() / "sessions", "the sessions folder"))

    def path(self, *, create: bool = False) -> Path:
        """Where the file is (links resolved); refused when that is outside the folder."""
        return self.folder.locate(self.name, "semantic labels", suffix=".jsonl", create=create)

    def lines(self) -> list[str]:
        try:
            return self.path().read_text("utf-8").splitlines()
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as exc:
            raise WorkbenchError(f"cannot read the labels file {self.name}: {getattr(exc, 'strerror', None) or exc}",
                                 hint="check the file in the sessions folder") from None

    def records(self) -> list[dict[str, Any]]:
        """The labels that parse (a line that does not is left to the dataset reader to name)."""
        out = []
        for line in self.lines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
        return out

    def add(self, record: dict[str, Any]) -> Added:
        """Append `record` (label_record's), replacing the line of the same pair id. Lines that do
        not parse are kept as they are: the file is the user's."""
        new = dumps_line(record)
        with self._locked() as target:
            kept, replaced = [], False
            for line in self.lines():
                if _id_of(line) == record["id"]:
                    replaced = True
                    continue
                if line.strip():
                    kept.append(line)
            kept.append(new)
            atomic_write(target, "\n".join(kept) + "\n", make_folder=False)
        return Added(target, replaced, len(kept))

    @contextmanager
    def _locked(self) -> Iterator[Path]:
        target = self.path(create=True)
        with _LOCK:
            if fcntl is None:
                yield target
                return
            fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield target
            finally:
                os.close(fd)        # releases the lock


def _id_of(line: str) -> Any:
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    return rec.get("id") if isinstance(rec, dict) else None
