"""User interfaces over the pipeline's results: view models shared by both hosts, the notebook
widgets (anywidget) and, later, the Panel app. The core library never imports this package."""

from .viewmodel import Patch, TokenViewModel

__all__ = ["Patch", "TokenViewModel"]
