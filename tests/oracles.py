"""Test oracles: official chat templates and vocab test vectors, extracted at test time.

The llama-cpp-python source distribution vendors llama.cpp, which carries 70
chat templates copied from the models' own repositories and vocab-only GGUF
tokenizers with test vectors. We download it once into `.oracles/` (or
$WORKBENCH_ORACLES) and extract just those folders. Nothing from it is shipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from functools import cache
from pathlib import Path

SDIST = "llama-cpp-python==0.3.36"
ROOT = Path(os.environ.get("WORKBENCH_ORACLES", Path(__file__).resolve().parent.parent / ".oracles"))


def ensure() -> Path:
    """Download and extract the oracle files if they are not there yet; return the folder."""
    marker = ROOT / "templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"
    if marker.exists():
        return ROOT
    ROOT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        SDIST, "-d", tmp], check=True)
        archive = next(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                parts = member.name.split("/")
                if "models" not in parts or not member.isfile():
                    continue
                tail = parts[parts.index("models") + 1:]
                if tail[0] == "templates" and len(tail) == 2:
                    dest = ROOT / "templates" / tail[1]
                elif len(tail) == 1 and tail[0].startswith("ggml-vocab-"):
                    dest = ROOT / "vocab" / tail[0]
                else:
                    continue
                dest.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(member)
                assert src is not None
                dest.write_bytes(src.read())
    return ROOT


@cache
def official_template(filename: str) -> str:
    return (ensure() / "templates" / filename).read_text(encoding="utf-8")


def vocab_vectors(name: str) -> list[tuple[str, list[int]]]:
    """(input text, expected ids) pairs of ggml-vocab-NAME.gguf.inp/.out."""
    d = ensure() / "vocab"
    # Inputs are separated by a marker line; expected ids come one line per input.
    inp = (d / f"ggml-vocab-{name}.gguf.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")[:-1]
    out = (d / f"ggml-vocab-{name}.gguf.out").read_text(encoding="utf-8").split("\n")[:len(inp)]
    assert len(inp) == len(out), f"{name}: {len(inp)} inputs, {len(out)} outputs"
    return [(text, [int(x) for x in ids.split()]) for text, ids in zip(inp, out)]


if __name__ == "__main__":
    print(ensure())
