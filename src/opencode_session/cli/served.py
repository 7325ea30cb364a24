"""The reading commands' short way to the `ocs serve` that holds the local database (`listening.py`): plain HTTP
requests of the V2 API on loopback, without the generated client. Only the way where every answer is the expected
one: any other (no answer, a password refused or missing, an error) hands the command to the long way (`hosts.py`),
which asks again and says what is wrong as it always has."""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from .listening import ServerRecord, credentials

PROBE_TIMEOUT = 5.0  # seconds a request may take (as the long way's health probe) before the long way is taken
WAIT_TIMEOUT = 10.0  # seconds `wait?outcome=true` may take (as the long way's)
PAGE = 200


class Declined(Exception):
    """The server did not answer as expected: the command takes the long way."""


class Unreachable(Declined):
    """No answer in time, or no connection."""


class Served:
    """The server recorded for the database, reached as the command's user (the environment's credentials)."""

    def __init__(self, record: ServerRecord, env: Mapping[str, str] | None = None) -> None:
        self.record = record
        auth = credentials(os.environ if env is None else env, record.username)
        if record.password and auth is None:
            raise Declined("the server requires a password this command lacks")
        self._headers = {"Accept": "application/json"}
        if auth is not None:
            token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"

    @property
    def using(self) -> str:
        return f"using the server at {self.record.url} (pid {self.record.pid}), which has this database open"

    def answer(self, path: str, query: Mapping[str, Any] | None = None, *, timeout: float = PROBE_TIMEOUT,
               expected: tuple[int, ...] = (200,), method: str = "GET") -> tuple[int, Any]:
        """The status and decoded JSON body of `METHOD path?query` (no request body); Declined for any status not
        `expected`, or none."""
        given = {k: v for k, v in (query or {}).items() if v is not None}
        url = f"{self.record.url.rstrip('/')}{path}" + (f"?{urlencode(given)}" if given else "")
        request = urllib.request.Request(url, headers=self._headers, method=method,
                                         data=b"" if method == "POST" else None)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (the recorded http URL)
                status, text = response.status, response.read()
        except urllib.error.HTTPError as failed:
            status, text = failed.code, failed.read()
        except (OSError, ValueError) as unreachable:
            raise Unreachable(str(unreachable)) from None
        if status not in expected:
            raise Declined(f"{status} from {method} {path}")
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            raise Declined(f"not JSON from GET {path}") from None

    def get(self, path: str, query: Mapping[str, Any] | None = None) -> Any:
        return self.answer(path, query)[1]

    def data(self, path: str, query: Mapping[str, Any] | None = None) -> Any:
        """The `data` of an answer that wraps its value in `{data}`."""
        body = self.get(path, query)
        if not isinstance(body, dict) or "data" not in body:
            raise Declined(f"no data from GET {path}")
        return body["data"]

    def pages(self, path: str, query: Mapping[str, Any]) -> list[Any]:
        """Every item of a listed resource, page after page (each `{data, cursor: {previous, next}}`)."""
        items: list[Any] = []
        page = self.get(path, {**query, "limit": PAGE})
        while True:
            items += page["data"]
            after = page["cursor"]["next"]
            if after is None or not page["data"]:
                return items
            page = self.get(path, {"cursor": after})

    def session_path(self, session_id: str, rest: str = "") -> str:
        return f"/api/session/{quote(session_id, safe='')}{rest}"

    def execution_failure(self, session_id: str) -> tuple[str, str] | None:
        """How the session's latest execution failed (type, message), when it did and the session is idle."""
        if session_id in self.data("/api/session/active"):
            return None
        try:
            status, body = self.answer(self.session_path(session_id, "/wait"), {"outcome": "true"},
                                       timeout=WAIT_TIMEOUT, expected=(204, 422), method="POST")
        except Unreachable:
            return None  # as the long way: no outcome to tell yet
        if status == 422 and isinstance(body, dict) and body.get("_tag") == "SessionExecutionFailedError":
            return str(body.get("type")), str(body.get("message"))
        return None
