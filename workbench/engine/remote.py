"""A remote engine: an OpenAI-compatible server (vLLM, SGLang, or `workbench serve-engine`) given
our token ids, and what it reports back.

- `prefill(ids)` sends the ids as the prompt of a one-token completion and reads
  `usage.prompt_tokens_details.cached_tokens`: how much of the prompt the server's prefix cache
  served. vLLM reports it only when started with `--enable-prompt-tokens-details`, and caches only
  with prefix caching on (`--enable-prefix-caching`, the default in recent versions). SGLang
  reports it with `--enable-cache-report`.
- `parity(result)` asks the server to tokenize our prompt text (vLLM's `/tokenize`, special tokens
  parsed, none added) and compares its ids with ours: the check that production counts what the
  workbench counts. The first difference is located to its segment.

Standard library only (urllib): nothing to install on the production side.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..difference import first_difference
from ..errors import EngineError
from ..redact import leaks_credentials, redact_url

FLAGS_HINT = ("vLLM: --enable-prefix-caching --enable-prompt-tokens-details; "
              "SGLang: --enable-cache-report (its radix cache is on by default)")


@dataclass(frozen=True)
class RemoteReport:
    tokens: int                       # the ids we sent
    prompt_tokens: int                # what the server counted
    cached_tokens: int | None         # None: the server did not report it (see FLAGS_HINT)
    ms: float                         # the request, round trip

    def to_json(self) -> dict:
        return {"tokens": self.tokens, "prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_tokens,
                "ms": round(self.ms, 3)}


@dataclass(frozen=True)
class RemoteGeneration:
    text: str                         # the reply, cut at the first stop string
    finish_reason: str                # "stop" or "length"
    prompt_tokens: int                # what the server counted
    completion_tokens: int
    cached_tokens: int | None         # None: the server did not report it (see FLAGS_HINT)
    ms: float                         # the request, round trip

    def to_json(self) -> dict:
        return {"text": self.text, "finish_reason": self.finish_reason, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cached_tokens": self.cached_tokens,
                "ms": round(self.ms, 3)}


@dataclass(frozen=True)
class Parity:
    equal: bool
    ours: int
    theirs: int
    first_difference: int | None      # token index
    segment: str | None               # "message · user · seq 3", where that index falls
    detail: str

    def to_json(self) -> dict:
        return {"equal": self.equal, "ours": self.ours, "theirs": self.theirs,
                "first_difference": self.first_difference, "segment": self.segment, "detail": self.detail}


class RemoteEngine:
    def __init__(self, base_url: str, *, model: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 timeout: float = 60.0):
        self.base = base_url.rstrip("/")
        if self.base.endswith("/v1"):
            self.base = self.base[:-3]
        self.timeout = timeout
        self.api_key = os.environ.get(api_key_env, "")
        self.model = model or self._first_model()

    def _request(self, path: str, body: dict | None = None) -> Any:
        url = self.base + path
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {})})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            text = exc.read().decode("utf-8", "replace")[:300]
            raise EngineError(f"{redact_url(url)}: the server answered {exc.code}: {text}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = str(getattr(exc, "reason", exc))
            if leaks_credentials(reason, url):      # urllib's reason can quote the URL's user:password
                reason = type(exc).__name__
            raise EngineError(f"cannot reach the server at {redact_url(url)}: {reason}",
                              hint="is it running? give its base URL, e.g. http://127.0.0.1:8000") from None
        except ValueError as exc:
            raise EngineError(f"{redact_url(url)}: the answer is not JSON: {exc}") from None

    def _first_model(self) -> str:
        data = self._request("/v1/models").get("data") or []
        if not data:
            raise EngineError(f"{redact_url(self.base)}/v1/models lists no model", hint="pass the model name")
        return str(data[0]["id"])

    def prefill(self, ids: np.ndarray) -> RemoteReport:
        ids = [int(i) for i in np.asarray(ids, dtype=np.uint32)]
        t0 = time.perf_counter()
        out = self._request("/v1/completions", {"model": self.model, "prompt": ids, "max_tokens": 1,
                                                "temperature": 0})
        ms = (time.perf_counter() - t0) * 1e3
        usage = out.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens")
        return RemoteReport(len(ids), int(usage.get("prompt_tokens", 0)), None if cached is None else int(cached), ms)

    def generate(self, ids: np.ndarray, max_new_tokens: int, *, stop: list[str] | None = None) -> RemoteGeneration:
        """The next reply to prompt `ids` (greedy, `max_tokens` = `max_new_tokens`), and how much of the
        prompt the server's prefix cache served. The text is cut at the first `stop` string too: a
        server that ignores `stop` (serve-engine) then gives the same reply as one that honours it."""
        prompt = [int(i) for i in np.asarray(ids, dtype=np.uint32)]
        body: dict[str, Any] = {"model": self.model, "prompt": prompt, "max_tokens": int(max_new_tokens),
                                "temperature": 0}
        if stop:
            body["stop"] = list(stop)
        t0 = time.perf_counter()
        out = self._request("/v1/completions", body)
        ms = (time.perf_counter() - t0) * 1e3
        choices = out.get("choices") or []
        if not choices or not isinstance(choices[0], dict) or not isinstance(choices[0].get("text"), str):
            raise EngineError(f"{redact_url(self.base)}/v1/completions answered without choices[0].text")
        text, finish = choices[0]["text"], str(choices[0].get("finish_reason") or "length")
        for s in stop or []:
            if s and s in text:
                text, finish = text[:text.index(s)], "stop"
        usage = out.get("usage") or {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        return RemoteGeneration(text, finish, int(usage.get("prompt_tokens", 0)),
                                int(usage.get("completion_tokens", 0)), None if cached is None else int(cached), ms)

    def tokenize(self, text: str) -> np.ndarray:
        out = self._request("/tokenize", {"model": self.model, "prompt": text, "add_special_tokens": False})
        if "tokens" not in out:
            raise EngineError(f"{redact_url(self.base)}/tokenize answered without 'tokens'",
                              hint="a vLLM server has it")
        return np.asarray(out["tokens"], dtype=np.uint32)

    def parity(self, result: Any) -> Parity:
        """Our ids for `result.text` against the server's tokenization of the same text."""
        ours = np.asarray(result.token_ids, dtype=np.uint32)
        theirs = self.tokenize(result.text)
        at = first_difference(ours, theirs)
        first = None if at == len(ours) == len(theirs) else at
        if first is None:
            return Parity(True, len(ours), len(theirs), None, None, "identical ids")
        seg = next((s for s in result.segments if s.start <= first < s.end), None)
        where = None if seg is None else " · ".join(str(x) for x in (seg.kind, seg.role, f"seq {seg.seq}")
                                                    if x is not None and x != "seq None")
        detail = (f"token {first}: ours {int(ours[first]) if first < len(ours) else 'end'}, "
                  f"the server's {int(theirs[first]) if first < len(theirs) else 'end'}")
        return Parity(False, len(ours), len(theirs), first, where, detail)
