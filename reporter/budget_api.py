"""What the worker asks the API about its own threads: the 6.3 detail, a handoff package, consuming one.

Hooks call it while the agent tool waits for them, so every request has a short timeout and no retry: an API that
does not answer at once is `ApiUnavailable`, and the hook lets the tool go on (fail open). A worker token sees only
the threads it reports (the routes answer 404 for any other, as for an unknown one).
Plain urllib, as in reporter/delivery/http.py: one blocking request at a time is all a hook needs.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from schemas import HandoffPackage

CONTEXT_BUDGET_PATH = "/api/v1/threads/{thread_id}/context-budget"  # spec 6.3
PACKAGE_PATH = "/api/v1/handoff-packages/{package_id}"
CONSUME_PATH = "/api/v1/handoff-packages/{package_id}/consume"
HOOK_TIMEOUT_SECONDS = 3.0


class ApiUnavailable(Exception):
    """No usable answer: unreachable, timed out, refused the token, or broken."""


class BudgetApi:
    def __init__(self, base_url: str, token: str | None, timeout_seconds: float = HOOK_TIMEOUT_SECONDS) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout_seconds = timeout_seconds

    def thread_detail(self, thread_id: str) -> dict[str, Any] | None:
        """The thread's 6.3 detail as JSON; None when the API does not know the thread (or it is not ours)."""
        body = self._call("GET", CONTEXT_BUDGET_PATH.format(thread_id=_quoted(thread_id)))
        return None if body is None else _json_object(body)

    def package(self, package_id: str) -> HandoffPackage | None:
        body = self._call("GET", PACKAGE_PATH.format(package_id=_quoted(package_id)))
        return None if body is None else _package(body)

    def thread_package(self, thread_id: str) -> HandoffPackage | None:
        """The thread's current package (the one its 6.3 detail names), whatever its status; None without one."""
        detail = self.thread_detail(thread_id)
        package_id = detail and detail.get("handoff_package_id")
        return self.package(package_id) if package_id else None

    def consume(self, package_id: str, to_thread_id: str) -> HandoffPackage:
        body = self._call("POST", CONSUME_PATH.format(package_id=_quoted(package_id)), {"to_thread_id": to_thread_id})
        if body is None:
            raise ApiUnavailable(f"handoff package {package_id} not found")
        return _package(body)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> bytes | None:
        """The answer's body; None for a 404."""
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_seconds) as answer:
                return answer.read()
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            detail = error.read()[:300].decode(errors="replace")
            raise ApiUnavailable(f"{method} {path}: {error.code} {detail}") from error
        except OSError as error:  # refused, reset, timed out
            raise ApiUnavailable(f"{method} {path}: {error!r}") from error


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError as error:
        raise ApiUnavailable(f"not JSON: {body[:200]!r}") from error
    if not isinstance(data, dict):
        raise ApiUnavailable(f"not a JSON object: {body[:200]!r}")
    return data


def _package(body: bytes) -> HandoffPackage:
    try:
        return HandoffPackage.model_validate_json(body)
    except ValueError as error:  # pydantic's ValidationError is one
        raise ApiUnavailable(f"not a handoff package: {error}") from error


def _quoted(value: str) -> str:
    return urllib.parse.quote(value, safe="")
