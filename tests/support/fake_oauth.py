"""A loopback OAuth 2.0 authorization server's token endpoint (the standard library's HTTP server in a thread): it
exchanges the one code it issued for an access token when the PKCE verifier matches the challenge the authorization
URL carried, and refuses anything else with `invalid_grant`, as a real one does."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

CLIENT_ID = "ocs-test-client"
ACCESS_TOKEN = "oauth-access-token"


class FakeAuthorizationServer:
    def __init__(self) -> None:
        self.code = "good-code"
        self.challenge: str | None = None  # the code_challenge of the authorization URL the user "opened"
        self.exchanges: list[dict[str, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def oauth_config(self) -> dict[str, Any]:
        return {"authorize": self.base_url + "/authorize", "token": self.base_url + "/token", "client_id": CLIENT_ID,
                "scopes": ["models"], "label": "Sign in to Loop"}

    def open(self, url: str) -> None:
        """What a user's browser does with the authorization URL, as far as this server needs: it remembers the
        challenge it must match at the exchange."""
        self.challenge = parse_qs(urlsplit(url).query)["code_challenge"][0]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the standard library's name
                length = int(self.headers.get("content-length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                fake.exchanges.append(form)
                verifier = form.get("code_verifier", "")
                derived = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
                if (self.path == "/token" and form.get("grant_type") == "authorization_code"
                        and form.get("client_id") == CLIENT_ID and form.get("code") == fake.code
                        and derived == fake.challenge):
                    self._answer(200, {"access_token": ACCESS_TOKEN, "token_type": "bearer", "expires_in": 3600,
                                       "refresh_token": "oauth-refresh"})
                else:
                    self._answer(400, {"error": "invalid_grant", "error_description": "the code is not valid"})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    @classmethod
    @contextmanager
    def running(cls) -> Iterator[FakeAuthorizationServer]:
        server = cls()
        thread = threading.Thread(target=server._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server
        finally:
            server._server.shutdown()
            server._server.server_close()
            thread.join(10)
