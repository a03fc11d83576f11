"""`previous_response_id`, resolved from what a session file or a log holds.

A Responses request may send only the new items and name the response it continues: the rest of
the conversation lives on OpenAI's servers. Alone, such a request cannot be rebuilt (intake refuses
it, naming the field). In a log or a session file that also holds the earlier request and the
response it got, the conversation is all there: the model saw the earlier request's input, then
that response's output items, then the new input. Instructions are not carried over: OpenAI
applies only the new request's own `instructions`.
"""

from __future__ import annotations

from typing import Any

from ..errors import RequestError


class ResponseChain:
    """The responses seen so far, in the order their requests came, for resolving later requests."""

    def __init__(self) -> None:
        self._items: dict[str, list[Any]] = {}    # response id -> every input item the model had, then its output

    def resolve(self, request: dict[str, Any]) -> dict[str, Any]:
        """`request` with its chain spelled out (no `previous_response_id`); unchanged when it has none."""
        prev = request.get("previous_response_id")
        if prev is None:
            return request
        if not isinstance(prev, str) or prev not in self._items:
            known = f" (this log holds {', '.join(sorted(self._items)[:3])}{'...' if len(self._items) > 3 else ''})" \
                if self._items else ""
            raise RequestError(f"response {prev!r} is not in this log{known}: the conversation before it lives on "
                               "OpenAI's servers", field="previous_response_id",
                               hint="log each request with the response it got (its id and output), in order")
        own = request.get("input")
        items = [{"role": "user", "content": own}] if isinstance(own, str) else list(own or [])
        return {**{k: v for k, v in request.items() if k != "previous_response_id"},
                "input": self._items[prev] + items}

    def record(self, resolved: dict[str, Any], response: Any) -> None:
        """Note the response a (resolved) request got, if it is a Responses API response with an id."""
        if not isinstance(response, dict) or not isinstance(response.get("id"), str):
            return
        output = response.get("output")
        if not isinstance(output, list):
            return
        own = resolved.get("input")
        items = [{"role": "user", "content": own}] if isinstance(own, str) else list(own or [])
        self._items[response["id"]] = items + [o for o in output if isinstance(o, dict)]


def resolve_log(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A session file's log: each request resolved against the responses logged before it (a
    request's `response` key holds the one it got, taken off the request)."""
    if not any(isinstance(r, dict) and ("previous_response_id" in r or "response" in r) for r in requests):
        return requests
    chain = ResponseChain()
    out = []
    for i, r in enumerate(requests):
        response = r.get("response")
        r = {k: v for k, v in r.items() if k != "response"}
        try:
            resolved = chain.resolve(r)
        except RequestError as exc:
            raise RequestError(exc.message.removeprefix("previous_response_id: "),
                               field=f"requests[{i}].previous_response_id", hint=exc.hint) from None
        chain.record(resolved, response)
        out.append(resolved)
    return out
