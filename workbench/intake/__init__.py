"""Intake: any supported request shape -> one immutable `Conversation`."""

from .detect import detect_format, normalize
from .limits import IntakeLimits

__all__ = ["detect_format", "normalize", "IntakeLimits"]
