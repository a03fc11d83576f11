"""Prompt templates with variables (SPEC 2.3): expanded before the chat template renders.

Only messages flagged ``template=True`` are interpreted; everything else is data, so user
text can never become template code. Names resolve innermost first: template-local
(``Message.variables`` and ``{% set %}``), request, system (constants), built-ins
(``now``, ``today``, ``request_id``, ``strftime_now``), then a declared default. Author
definitions (local and constants) whose value is itself a template are expanded recursively;
request values never are. Prompt templates come with requests, so they are untrusted code: they
run in the chat-template sandbox with loops, calls, value sizes, output and time capped (see
workbench/variables/sandbox.py). After expansion a message has ``template=False`` (it is plain text now and
must not be expanded twice) and keeps ``variables`` for the record.
"""

from .config import BUILTINS, Binding, VariableConfig, VariableSpec
from .expand import expand_messages
from .sandbox import environment

__all__ = ["BUILTINS", "Binding", "VariableConfig", "VariableSpec", "environment", "expand_messages"]
