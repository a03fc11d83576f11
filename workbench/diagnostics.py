"""Diagnostics: what a stage noticed or changed, reported instead of done silently."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Level = Literal["info", "warning", "error"]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    level: Level
    code: str
    message: str
    seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"level": self.level, "code": self.code, "message": self.message, "seq": self.seq}


def info(code: str, message: str, seq: int | None = None) -> Diagnostic:
    return Diagnostic("info", code, message, seq)


def warning(code: str, message: str, seq: int | None = None) -> Diagnostic:
    return Diagnostic("warning", code, message, seq)
