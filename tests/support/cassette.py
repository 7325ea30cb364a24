"""A record/replay httpx2 transport for provider tests: `record` forwards each request to a real server and keeps the
exchange (request body, status, headers, the streamed response body byte for byte) in a cassette file; `replay`
answers the same requests from the file, in order, without a network. Plug it in through
`RuntimeOptions.provider_transport` or `Providers(transport)`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2

# answered from the cassette as recorded, except these, which httpx2 would otherwise apply to the replayed body twice
_HOP_HEADERS = {"content-encoding", "transfer-encoding", "content-length", "connection", "date", "server"}


class CassetteTransport(httpx2.AsyncBaseTransport):
    def __init__(self, path: Path, *, record: bool = False, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self.path = path
        self.record = record
        self.inner = inner or (httpx2.AsyncHTTPTransport() if record else None)
        self.interactions: list[dict[str, Any]] = [] if record else json.loads(path.read_text())["interactions"]
        self.requests: list[dict[str, Any]] = []  # what the adapters sent, for assertions
        self._next = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        sent = {"method": request.method, "path": request.url.path, "body": json.loads(body) if body else None}
        self.requests.append(sent)
        if self.record:
            assert self.inner is not None
            response = await self.inner.handle_async_request(request)
            content = await response.aread()
            await response.aclose()
            headers = {k: v for k, v in response.headers.items() if k.lower() not in _HOP_HEADERS}
            self.interactions.append({"request": sent, "response": {
                "status": response.status_code, "headers": headers, "body": content.decode("utf-8")}})
            return httpx2.Response(response.status_code, headers=headers, content=content, request=request)
        if self._next >= len(self.interactions):
            raise AssertionError(f"the cassette {self.path.name} has no answer left for {request.url.path}")
        recorded = self.interactions[self._next]
        self._next += 1
        expected = recorded["request"]
        if (expected["method"], expected["path"]) != (sent["method"], sent["path"]):
            raise AssertionError(f"the cassette {self.path.name} expected {expected['method']} {expected['path']}, "
                                 f"got {sent['method']} {sent['path']}")
        answer = recorded["response"]
        return httpx2.Response(answer["status"], headers=answer["headers"], content=answer["body"].encode("utf-8"),
                               request=request)

    @property
    def unused(self) -> int:
        return len(self.interactions) - self._next

    def save(self) -> None:
        self.path.write_text(json.dumps({"interactions": self.interactions}, indent=1) + "\n")

    async def aclose(self) -> None:
        if self.inner is not None:
            await self.inner.aclose()


__all__ = ["CassetteTransport"]
