"""Assembly: a request becomes one exact prompt (text, segments, token ids, budget, key).

context.py   the build context every stage takes, and its fingerprint (the root of every key)
build.py     the stages of one exact assembly: render, lay out, tokenize, diagnose; splice
incremental.py  the next request extends the previous result
cached.py    the shared prompt cache: exact hits, prefix hits extended, single-flight misses
truncate.py  assembly under a budget
assembler.py the Assembler: composes the above; session.py: successive requests; result.py;
             assembly_metrics.py: what one Assembler counts
"""

from .assembler import AUTO_CACHE_BYTES, Assembler, AssemblerConfig
from .assembly_metrics import AssemblyMetrics
from .context import BuildContext
from .result import AssemblyResult
from .session import Session

__all__ = ["AUTO_CACHE_BYTES", "Assembler", "AssemblerConfig", "AssemblyMetrics", "AssemblyResult", "BuildContext",
           "Session"]
