"""Images in the prompt: each image part becomes its model's image tokens, in an `image` segment.

A vision chat template writes one placeholder per image (Qwen2.5-VL: `<|image_pad|>` between
`<|vision_start|>` and `<|vision_end|>`; Gemma 3: `<start_of_image>`). The model's processor then
replaces each one with that image's tokens — how many depends on the image's size and the
model's rule (workbench/media/vision.py) — and the tokenizer reads the result. This stage does the
processor's part on the rendered text: the k-th placeholder the template wrote is the k-th image
of the conversation, as transformers' processors and vLLM pair them. Every position the render
noted (message starts, the tools block, the generation prompt, escaped spans) moves with it, and
each image's range becomes a span of kind `image` carrying the image's digest.

A template that renders no images (no rule) gets the text of the message alone, and a warning per
message says what is missing from the prompt: nothing is dropped in silence.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple, Protocol

from ..conversation import Conversation, MediaPart
from ..diagnostics import Diagnostic, warning
from ..errors import TemplateError, TemplateLimitError, WorkbenchError
from ..segments import Span
from ..templates import Rendered


class ImageRule(Protocol):
    """What placing images needs of a model's rule (workbench/media/vision.py)."""

    @property
    def name(self) -> str: ...
    @property
    def replaced(self) -> str: ...          # the string in the template's output the processor replaces
    def expansion(self, width: int, height: int, *, where: str = ...) -> str: ...


class Placed(NamedTuple):
    render: Rendered
    escaped: list[tuple[int, int]]
    gen_start: int | None
    images: list[tuple[int, int, MediaPart]]   # (start, end) in the new text, and the image there


@dataclass(frozen=True)
class HostedImages:
    """A hosted model's images (OpenAI, Anthropic): each counted by the provider's published estimate
    (workbench/media/hosted.py), in the prompt as that many copies of a stand-in token — a special
    token of the tokenizer that no template writes — where the image is among the message's text.
    The tokens are an estimate of the count, not the provider's ids (its tokenizer and its image
    encoding are not public): `images()` and the views label them so."""

    name: str            # openai:<model> | anthropic
    standin: str         # the special token each image's run is made of
    estimate: Any        # an OpenAITileEstimate, OpenAIPatchEstimate or AnthropicEstimate

    @property
    def replaced(self) -> str:
        return self.standin

    def tokens_of(self, img: MediaPart) -> int:
        assert img.width is not None and img.height is not None
        if self.name.startswith("openai"):
            return int(self.estimate.tokens(img.width, img.height, detail=img.detail or "auto", where=img.where))
        return int(self.estimate.tokens(img.width, img.height, where=img.where))

    def expansion(self, width: int, height: int, *, where: str = "image") -> str:
        return self.standin * self.tokens_of(MediaPart("image", "", where, width=width, height=height))


def image_rule(spec: Any, template_vision: str | None, tokenizer: Any = None) -> Any:
    """The rule a configuration asks for: `spec` None takes the template's own (none for a text-only
    template), False none at all, a name that rule with its defaults, a mapping {"rule": name, ...}
    that rule with those options. The hosted estimates: "anthropic", and "openai" with the model
    ({"rule": "openai", "model": "gpt-4o"}), need the tokenizer for their stand-in token."""
    if spec is False:
        return None
    if spec is None:
        spec = template_vision
        if spec is None:
            return None
    name, options = (spec, {}) if isinstance(spec, str) else \
        (spec.get("rule"), {k: v for k, v in spec.items() if k != "rule"}) if isinstance(spec, dict) else (None, {})
    if not isinstance(name, str):
        raise WorkbenchError(f"vision must be a rule name or {{'rule': name, ...options}}, got {spec!r}",
                             hint="e.g. vision='qwen2-vl' or {'rule': 'qwen2-vl', 'max_pixels': 1003520}")
    if name in ("openai", "anthropic"):
        return _hosted(name, options, tokenizer)
    from ..media import vision_rule
    return vision_rule(name, **options)


def _hosted(name: str, options: dict[str, Any], tokenizer: Any) -> HostedImages:
    from ..media import ANTHROPIC_ESTIMATE, openai_estimate
    standin = _standin(tokenizer)
    if name == "anthropic":
        if options:
            raise WorkbenchError(f"the anthropic image estimate takes no options, got {sorted(options)}")
        return HostedImages("anthropic", standin, ANTHROPIC_ESTIMATE)
    model = options.get("model")
    if not isinstance(model, str) or set(options) != {"model"}:
        raise WorkbenchError("the openai image estimate needs the model: {'rule': 'openai', 'model': 'gpt-4o'}")
    return HostedImages(f"openai:{model}", standin, openai_estimate(model))


def _standin(tokenizer: Any) -> str:
    specials = getattr(tokenizer, "specials", {}) or {}
    if "<|image_pad|>" in specials:
        return "<|image_pad|>"
    reserved = sorted((v, k) for k, v in specials.items() if k.startswith("<|reserved_"))
    if reserved:
        return str(reserved[0][1])
    raise WorkbenchError(f"tokenizer {getattr(tokenizer, 'name', '?')!r} has no spare special token to stand for "
                         "an image's tokens", hint="use a tokenizer with one (qwen2.5, gpt-oss), or vision=False")


def rule_spec(rule: Any) -> dict[str, Any] | None:
    """The configuration value that builds `rule` again (export bundles carry it)."""
    if rule is None:
        return None
    if isinstance(rule, HostedImages):
        return {"rule": "anthropic"} if rule.name == "anthropic" else {"rule": "openai",
                                                                       "model": rule.name.split(":", 1)[1]}
    from ..media import VISION_RULES
    preset = VISION_RULES[rule.name]
    return {"rule": rule.name, **{f.name: getattr(rule, f.name) for f in fields(rule)
                                  if f.name != "name" and getattr(rule, f.name) != getattr(preset, f.name)}}


def places_images(rule: Any, template: Any) -> bool:
    """Whether `template` can place images for `rule`: its source writes the placeholder the rule
    replaces (a hosted estimate puts its stand-in into the text itself: any template)."""
    return isinstance(rule, HostedImages) or rule.replaced in template.source


def rule_label(rule: Any) -> str | None:
    """How the prompt's images were counted, for views and JSON: the rule's name, and for a hosted
    model that it is the provider's published estimate."""
    if rule is None:
        return None
    if isinstance(rule, HostedImages):
        return f"{rule.name} (the provider's published estimate; stand-in token {rule.standin})"
    return str(rule.name)


def template_media(rule: Any) -> bool | str:
    """What the template is given for a message's media parts: nothing (False: text only), the parts
    (True: a vision template places them), or the text with a stand-in token where each image is."""
    if rule is None:
        return False
    return rule.standin if isinstance(rule, HostedImages) else True


def unrendered(conv: Conversation, template: str) -> list[Diagnostic]:
    """One warning per message whose media parts a text-only template leaves out of the prompt."""
    out = []
    for m in conv.messages:
        media = m.media if m.parts else ()
        if media:
            what = ", ".join(f"{p.kind} ({p.width}×{p.height})" if p.width else p.kind for p in media)
            out.append(warning("media_not_rendered",
                               f"template {template!r} renders text only: {what} at {media[0].where} "
                               f"{'is' if len(media) == 1 else 'are'} not in the prompt and not counted (a vision "
                               "model's template places them: --template qwen2.5-vl, or --model with a vision "
                               "model)", m.sequence))
    return out


def _expansion_chars(rule: Any, img: MediaPart) -> int:
    """How long an image's text will be, worked out before it is built."""
    assert img.width is not None and img.height is not None
    if isinstance(rule, HostedImages):
        return len(rule.standin) * rule.tokens_of(img)
    return sum(len(piece) * n for piece, n in rule.runs(img.width, img.height, where=img.where))


def place(rule: ImageRule, conv: Conversation, r: Rendered, escaped: Sequence[tuple[int, int]],
          gen_start: int | None, template: str, max_chars: int | None = None) -> Placed:
    """The render with each image placeholder replaced by that image's tokens (see the module doc).
    `max_chars`: the render's output cap, which the images' text counts against too (a request of
    many large images would otherwise build a prompt far past it)."""
    images = [p for _, p in conv.media if p.kind == "image"]
    text, key = r.text, rule.replaced
    found: list[int] = []
    pos = text.find(key)
    esc = sorted(escaped)
    while pos >= 0:
        k = bisect_left(esc, (pos + 1,)) - 1
        if k < 0 or not esc[k][0] <= pos < esc[k][1]:   # a placeholder the user typed stays text
            found.append(pos)
        pos = text.find(key, pos + len(key))
    if len(found) != len(images):
        raise TemplateError(f"the template wrote {len(found)} image placeholder(s) ({key!r}) for "
                            f"{len(images)} image(s) in the conversation", template=template,
                            hint="each image part must reach the template as {'type': 'image'}; a template that "
                                 "skips some (a system message's images, say) cannot be counted")
    if not found:
        return Placed(r, list(escaped), gen_start, [])
    if max_chars is not None:
        total = len(text) + sum(_expansion_chars(rule, img) - len(key) for img in images)
        if total > max_chars:
            raise TemplateLimitError(f"the {len(images)} image(s) would make the prompt {total:,} characters, over "
                                     f"the cap of {max_chars:,}", template=template,
                                     hint="send fewer or smaller images, or raise RenderLimits.max_output_chars")
    out: list[str] = []
    shift: list[int] = []       # characters added by the replacements up to and including each one
    placed: list[tuple[int, int, MediaPart]] = []
    prev = added = 0
    for at, img in zip(found, images):
        assert img.width is not None and img.height is not None   # intake measured it (or assumed a size)
        rep = rule.standin * rule.tokens_of(img) if isinstance(rule, HostedImages) else \
            rule.expansion(img.width, img.height, where=img.where)
        out.append(text[prev:at])
        out.append(rep)
        placed.append((at + added, at + added + len(rep), img))
        added += len(rep) - len(key)
        shift.append(added)
        prev = at + len(key)
    out.append(text[prev:])

    def moved(p: int) -> int:
        k = bisect_left(found, p)       # placeholders starting before p
        return p + (shift[k - 1] if k else 0)

    new = Rendered("".join(out), {i: moved(p) for i, p in r.starts.items()},
                   None if r.tools_start is None else moved(r.tools_start), [moved(p) for p in r.gen_reads])
    return Placed(new, [(moved(a), moved(b)) for a, b in escaped], None if gen_start is None else moved(gen_start),
                  placed)


def split_spans(spans: list[Span], images: Sequence[tuple[int, int, MediaPart]]) -> list[Span]:
    """The spans with each image's range cut out of the span that holds it, as a span of its own."""
    if not images:
        return spans
    out: list[Span] = []
    k = 0
    for sp in spans:
        start = sp.start
        while k < len(images) and images[k][0] < sp.end:
            a, b, img = images[k]
            if a > start:
                out.append(Span(sp.kind, sp.role, sp.seq, start, a))
            out.append(Span("image", sp.role, sp.seq, a, b, img.digest))
            start = b
            k += 1
        if start < sp.end or (start == sp.start and sp.end == sp.start):
            out.append(Span(sp.kind, sp.role, sp.seq, start, sp.end))
    return out
