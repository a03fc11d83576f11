"""Prompt Workbench: chat messages -> prompt text -> exact, segmented token ids."""

from .assembly import Assembler, AssemblerConfig, AssemblyResult, Session
from .cleaning import CleaningPolicy
from .conversation import Conversation, Message, ToolCall
from .errors import WorkbenchError
from .export import load_bundle
from .sessions import load_session
from .truncation import TruncationPolicy
from .variables import VariableConfig, VariableSpec

__all__ = ["Assembler", "AssemblerConfig", "AssemblyResult", "CleaningPolicy", "Conversation", "Message",
           "Session", "ToolCall", "TruncationPolicy", "VariableConfig", "VariableSpec", "WorkbenchError",
           "load_bundle", "load_session"]
__version__ = "0.1.0"
