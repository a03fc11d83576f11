"""The exception tree. Every error says what was wrong, where, and how to fix it.

One root (`WorkbenchError`) so callers can catch everything the library raises on
bad input; the CLI turns any of these into a single ``error:`` line and exit 2.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class WorkbenchError(Exception):
    """Root of every error the workbench raises on bad input or configuration."""

    def __init__(self, message: str, *, hint: str | None = None):
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message} ({hint})")

    def __reduce__(self) -> tuple[Callable[..., BaseException], tuple[Any, ...]]:
        # A copy (a cached error raised again) or a pickle (an error from a worker process) is the
        # same error: rebuilt from its state, not by calling __init__ again on its formatted text.
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class RequestError(WorkbenchError):
    """A malformed request: names the field and the message index."""

    def __init__(self, message: str, *, field: str | None = None, index: int | None = None,
                 hint: str | None = None, container: str = "messages"):
        # `container`: the list `index` counts in ("messages"; "input" for a Responses request).
        self.field = field
        self.index = index
        self.container = container
        where = []
        if index is not None:
            where.append(f"{container}[{index}]")
        if field is not None:
            where.append(field if index is None else f".{field}" if not field.startswith("[") else field)
        loc = "".join(where)
        super().__init__(f"{loc}: {message}" if loc else message, hint=hint)


class FormatDetectionError(RequestError):
    """The request is neither OpenAI, Anthropic nor the internal form."""


class MediaError(RequestError):
    """An image, audio or file part that cannot be counted as sent: undecodable base64, bytes that
    are not the format they claim, a header announcing an absurd size, a payload over the cap.
    Names the part's field path (`messages[1].content[0].image_url`, `input[3].content[1]`)."""


class ModelNotFoundError(WorkbenchError):
    """A model name the catalog does not hold: the message lists the closest names."""

    def __init__(self, name: str, closest: tuple[str, ...] = (), *, hint: str | None = None):
        self.name, self.closest = name, closest
        if hint is None:
            hint = (f"did you mean {', '.join(closest)}? " if closest else "") + \
                "`workbench models` lists the catalog"
        super().__init__(f"unknown model {name!r}", hint=hint)


class CleaningError(WorkbenchError):
    """A role-cleaning policy refused the conversation (e.g. an orphan tool result)."""

    def __init__(self, message: str, *, index: int | None = None, hint: str | None = None):
        self.index = index
        super().__init__(message if index is None else f"messages[{index}]: {message}", hint=hint)


class TemplateError(WorkbenchError):
    """A chat template failed to load or render; carries the template line when known."""

    def __init__(self, message: str, *, template: str | None = None, line: int | None = None,
                 hint: str | None = None):
        self.template = template
        self.line = line
        where = template or "template"
        if line is not None:
            where += f", line {line}"
        super().__init__(f"{where}: {message}", hint=hint)


class TemplateSyntaxError(TemplateError):
    pass


class TemplateSecurityError(TemplateError):
    """The template tried to reach Python internals; the sandbox stopped it."""


class TemplateLimitError(TemplateError):
    """The template ran too long or produced more output than the cap."""


class TemplateNotFoundError(TemplateError):
    pass


class VariableError(WorkbenchError):
    """A prompt-template variable is missing, cyclic or too large, or its prompt template failed."""

    def __init__(self, message: str, *, variable: str | None = None, seq: int | None = None,
                 hint: str | None = None):
        self.variable = variable
        self.seq = seq
        where = f"messages[{seq}]" if seq is not None else ""
        if variable is not None:
            where += f"{' ' if where else ''}variable {variable!r}"
        super().__init__(f"{where}: {message}" if where else message, hint=hint)


class BudgetError(WorkbenchError):
    """The budget is impossible (bad window or reserve) or the parts that are never dropped do not fit."""

    def __init__(self, message: str, *, over_by: int | None = None, parts: dict[str, int] | None = None,
                 hint: str | None = None):
        self.over_by = over_by
        self.parts = dict(parts or {})
        super().__init__(message, hint=hint)


class TokenizerError(WorkbenchError):
    pass


class TokenizerNotFoundError(TokenizerError):
    pass


class InjectionError(WorkbenchError):
    """User text contains a special-token string and the policy is to reject it."""

    def __init__(self, message: str, *, index: int | None = None, token: str | None = None,
                 hint: str | None = None):
        self.index = index
        self.token = token
        super().__init__(message if index is None else f"messages[{index}]: {message}", hint=hint)


class SessionFileError(WorkbenchError):
    """A session file could not be read or has the wrong shape."""


class LogFileError(WorkbenchError):
    """A request log (docs/logs.md) could not be read, or (with --strict) holds a bad line."""


class MissingDependencyError(WorkbenchError, ImportError):
    """An optional extra is not installed; the message names the pip install to run."""


class EngineError(WorkbenchError):
    """The prefill engine cannot do what was asked: a model that does not exist or does not fit the
    tokenizer, a prompt longer than the model's window, the device out of memory."""


class BundleError(WorkbenchError):
    """An export bundle that cannot be loaded as it is: names the file and the field."""

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None, hint: str | None = None):
        self.file = file
        self.field = field
        super().__init__(message, hint=hint)


class ServeRequestError(WorkbenchError):
    """`workbench serve-engine` refuses a request: carries the HTTP status, the OpenAI error type,
    the field at fault (`param`: "prompt[3]", "max_tokens", "Content-Length") and, for the
    overload answers (503), how many seconds to wait before a retry."""

    TYPES = {404: "not_found_error", 408: "timeout_error", 500: "server_error", 503: "overloaded_error"}

    def __init__(self, message: str, *, status: int = 400, param: str | None = None,
                 retry_after: int | None = None, hint: str | None = None):
        self.status = status
        self.param = param
        self.type = self.TYPES.get(status, "invalid_request_error")
        self.retry_after = retry_after
        super().__init__(f"{param}: {message}" if param else message, hint=hint)


class MissingAssetError(WorkbenchError):
    """A file the package ships is not there: the front end (`widgets/`) or a sample session. The
    install is incomplete (or a checkout lost its `workbench/assets/` links); the hint says how to
    get it back."""


class ProviderParamsError(WorkbenchError):
    """Provider parameters are wrong: names the file, the preset and the field."""

    def __init__(self, message: str, *, preset: str | None = None, field: str | None = None,
                 source: str | None = None, hint: str | None = None):
        self.preset, self.field, self.source = preset, field, source
        where = [w for w in (source, preset and f"preset {preset!r}", field and f"field {field!r}") if w]
        super().__init__(f"{', '.join(where)}: {message}" if where else message, hint=hint)


class UnknownProviderError(ProviderParamsError):
    """No preset of that name in the shipped file nor in the user's file."""


class SimulationError(WorkbenchError):
    """A malformed turn, or a request the provider would refuse (too many breakpoints)."""

    def __init__(self, message: str, *, turn: int | None = None, field: str | None = None,
                 hint: str | None = None):
        self.turn, self.field = turn, field
        where = " ".join(w for w in (turn is not None and f"turn {turn}" or "", field or "") if w)
        super().__init__(f"{where}: {message}" if where else message, hint=hint)


# --- raised by one module each; defined here so that the whole tree reads in one file ------------
class VariableLimitError(VariableError):
    """A prompt template hit a cap: loop iterations, steps, collection size or output size."""


class EditError(WorkbenchError):
    """An editor operation that cannot apply: names the message and field, and what to write."""


class BudgetSettingError(BudgetError):
    """A budget control's value that cannot apply (the workbench's window, reserve or truncation
    policy): `control` names the box ("context_window", "reserve", "policy") it is shown beside."""

    def __init__(self, control: str, message: str, *, hint: str | None = None):
        self.control = control
        super().__init__(message, hint=hint)


class ChannelError(WorkbenchError):
    """A frame the app's keystroke channel refuses. `code` names the kind for the page to show and act
    on: bad-frame, too-large, unauthorized, unknown-message, out-of-sync."""

    def __init__(self, code: str, message: str, *, hint: str | None = None):
        self.code = code
        super().__init__(message, hint=hint)


class FileAccessError(WorkbenchError):
    """A name or a pick the app refuses: outside its folders, not a plain name, not one of its options."""


class OverwriteNeeded(FileAccessError):
    """The name is taken: the file (or bundle) is replaced only once the user confirms."""

    def __init__(self, message: str, *, name: str, hint: str | None = None):
        self.name = name
        super().__init__(message, hint=hint)


class ShareError(WorkbenchError):
    """A shared state (a link's `?state=`, a notebook cell's string) that cannot be opened: too long,
    not base64url, damaged, inflating past its cap, not strict JSON, or naming an unknown template,
    tokenizer or turn. The page shows it inline and opens the default session."""


class CacheError(WorkbenchError):
    """The prompt cache was handed something it cannot hold (an entry, a key, a size, a tier)."""


class CacheTypeError(CacheError, TypeError):
    """A value of the wrong type for the cache; still a TypeError for callers that catch that."""


class CacheValueError(CacheError, ValueError):
    """A value of the right type the cache refuses; still a ValueError for callers that catch that."""


class Cancelled(WorkbenchError):
    """Work given up because what it was for changed or is no longer shown (a newer edit, a closed
    tab, a Cancel button). Not the user's mistake: hosts drop it quietly, nothing half-done is shown."""


class FixError(WorkbenchError):
    """A one-click fix (workbench/analysis/fixes.py) that cannot be used as asked."""


class UnknownFixError(FixError):
    """No fix of that name: the message lists the known ones."""

    def __init__(self, name: str, known: tuple[str, ...]):
        self.name, self.known = name, known
        super().__init__(f"unknown fix {name!r}", hint=f"use one of {', '.join(known)}")


class FixNotApplicable(FixError):
    """A fix that cannot apply to this session or template (its input is malformed for it, or what
    it needs is not there): names the fix and why."""

    def __init__(self, fix: str, message: str, *, hint: str | None = None):
        self.fix = fix
        super().__init__(f"fix {fix!r}: {message}", hint=hint)


class ProjectionUnavailable(FixNotApplicable):
    """The `projection` fix, in a build whose prefix-stable projection module is not there (yet)."""
