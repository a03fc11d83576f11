"""Chat templates rendered the way transformers renders them."""

from .registry import DEFAULT_TEMPLATE, SHIPPED, ChatTemplate, from_source, get_template, shipped_names
from .render import render
from .render_types import Rendered, RenderLimits

__all__ = ["DEFAULT_TEMPLATE", "ChatTemplate", "get_template", "from_source", "shipped_names", "SHIPPED", "render",
           "Rendered", "RenderLimits"]
