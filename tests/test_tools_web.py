"""todowrite, question, webfetch and websearch: the web tools against a real loopback HTTP server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from opencode_session.core.config import load_config
from opencode_session.core.permission import Rule
from opencode_session.core.tools import default_registry
from opencode_session.core.tools.tool import ToolFailure
from opencode_session.schema import session_errors
from tests.support.tools import make_ctx, settle_err, settle_ok

pytestmark = pytest.mark.anyio

PAGE = b"<html><head><style>p{}</style></head><body><h1>Title</h1><p>Some <b>bold</b> <a href='/x'>link</a>" \
       b"</p><script>alert(1)</script></body></html>"


class Handler(BaseHTTPRequestHandler):
    searches: list[dict[str, Any]] = []
    release = threading.Event()

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/page":
            self._send(200, PAGE, "text/html; charset=utf-8")
        elif self.path == "/plain":
            self._send(200, "plain café\n".encode("latin-1"), "text/plain; charset=latin-1")
        elif self.path == "/redirect":
            self._send(302, b"", "text/plain", {"Location": "/page"})
        elif self.path == "/image":
            self._send(200, b"\x89PNG\r\n\x1a\n", "image/png")
        elif self.path == "/huge":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()  # no length: the tool has to count
            try:
                for _ in range(7 * 1024):
                    self.wfile.write(b"x" * 1024)
            except OSError:
                pass  # the tool hung up once it had enough
        elif self.path == "/slow":
            self.release.wait(30)
            try:
                self._send(200, b"late", "text/plain")
            except OSError:
                pass  # the tool gave up waiting, as it should
        else:
            self._send(404, b"no", "text/plain")

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.searches.append({"body": body, "auth": self.headers.get("Authorization")})
        self._send(200, f"1. Result for {body['query']} - https://example.test/\n".encode(), "text/plain")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    Handler.release.set()
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    return root


# --- todowrite and question ----------------------------------------------------------------------------------


async def test_todowrite_keeps_the_whole_list_in_its_result(project: Path):
    todos = [{"content": "Write tests", "status": "completed", "priority": "high"},
             {"content": "Fix bug", "status": "in_progress", "priority": "medium"},
             {"content": "Docs", "status": "pending", "priority": "low"}]
    out = await settle_ok("todowrite", {"todos": todos}, make_ctx(project))
    assert out.structured == {"todos": todos}
    assert out.text().splitlines() == ["[x] Write tests (high)", "[~] Fix bug (medium)", "[ ] Docs (low)"]
    assert out.title == "2 todos"
    result = await settle_err("todowrite", {"todos": [{"content": "no status"}]}, make_ctx(project))
    assert result.error.type == session_errors.TOOL_INVALID_INPUT


QUESTIONS = [{"question": "Which database?", "header": "Database",
              "options": [{"label": "SQLite", "description": "A file"},
                          {"label": "Postgres", "description": "A server"}]},
             {"question": "Which extras?", "header": "Extras", "multiple": True,
              "options": [{"label": "Docs", "description": "d"}, {"label": "CI", "description": "c"}]}]


async def test_question_asks_through_the_questioner_and_returns_the_answers(project: Path):
    asked: list[list[dict[str, Any]]] = []

    async def questioner(questions: list[dict[str, Any]]) -> list[list[str]]:
        asked.append(questions)
        return [["SQLite"], ["Docs", "CI"]]

    out = await settle_ok("question", {"questions": QUESTIONS}, make_ctx(project, questioner=questioner))
    assert asked == [QUESTIONS]
    assert out.structured == {"answers": [["SQLite"], ["Docs", "CI"]]}
    assert '"Which database?" = "SQLite"' in out.text() and '"Which extras?" = "Docs, CI"' in out.text()


async def test_question_fails_when_rejected_or_when_nobody_can_answer(project: Path):
    async def rejecting(questions: list[dict[str, Any]]) -> list[list[str]]:
        raise ToolFailure("The user dismissed the question", session_errors.PERMISSION_REJECTED)

    result = await settle_err("question", {"questions": QUESTIONS}, make_ctx(project, questioner=rejecting))
    assert result.error.message == "The user dismissed the question"
    result = await settle_err("question", {"questions": QUESTIONS}, make_ctx(project))
    assert "No one can answer" in result.error.message
    result = await settle_err("question", {"questions": [{"question": "q", "header": "h"}]}, make_ctx(project))
    assert result.error.type == session_errors.TOOL_INVALID_INPUT


# --- webfetch ------------------------------------------------------------------------------------------------


async def test_webfetch_converts_html_to_markdown_or_text_and_keeps_html(project: Path, server: str):
    ctx = make_ctx(project)
    out = await settle_ok("webfetch", {"url": f"{server}/page"}, ctx)
    assert out.text() == f"# Title\n\nSome **bold** [link]({server}/x)\n"
    assert out.structured["contentType"] == "text/html"
    out = await settle_ok("webfetch", {"url": f"{server}/page", "format": "text"}, ctx)
    assert out.text() == "# Title\n\nSome bold link\n"
    out = await settle_ok("webfetch", {"url": f"{server}/page", "format": "html"}, ctx)
    assert out.text() == PAGE.decode()
    out = await settle_ok("webfetch", {"url": f"{server}/plain"}, ctx)
    assert out.text() == "plain café\n"
    out = await settle_ok("webfetch", {"url": f"{server}/redirect"}, ctx)
    assert out.structured["url"] == f"{server}/page" and out.text().startswith("# Title")


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.test/x", "gopher://x", "javascript:alert(1)",
                                 "http://", "/relative/path"])
async def test_webfetch_refuses_anything_but_http_and_https(project: Path, url: str):
    result = await settle_err("webfetch", {"url": url}, make_ctx(project))
    assert "only http:// and https://" in result.error.message


async def test_webfetch_is_bounded_in_size_and_time_and_reports_failures(project: Path, server: str):
    ctx = make_ctx(project)
    result = await settle_err("webfetch", {"url": f"{server}/huge"}, ctx)
    assert "larger than the 5 MB limit" in result.error.message
    result = await settle_err("webfetch", {"url": f"{server}/slow", "timeout": 0.5}, ctx)
    assert "timed out after 0.5 s" in result.error.message
    result = await settle_err("webfetch", {"url": f"{server}/missing"}, ctx)
    assert "HTTP 404" in result.error.message
    result = await settle_err("webfetch", {"url": f"{server}/image"}, ctx)
    assert "image/png" in result.error.message


async def test_webfetch_follows_the_permission_rules(project: Path, server: str):
    result = await settle_err("webfetch", {"url": f"{server}/page"},
                              make_ctx(project, extra=(Rule("webfetch", "*", "deny"),)))
    assert result.error.type == session_errors.PERMISSION_REJECTED


# --- websearch -----------------------------------------------------------------------------------------------


def write_project_config(project: Path, config: dict[str, Any]) -> None:
    (project / "opencode.json").write_text(json.dumps(config))


async def test_websearch_is_offered_only_with_a_configured_backend(project: Path, server: str, monkeypatch):
    registry = default_registry()
    config = load_config(project, project)
    assert "websearch" not in registry.offered(config)
    assert "webfetch" in registry.offered(config)
    result = await settle_err("websearch", {"query": "x"}, make_ctx(project, config=config))
    assert "no search backend is configured" in result.error.message

    monkeypatch.setenv("SEARCH_KEY", "k-123")
    write_project_config(project, {"websearch": {"url": f"{server}/search",
                                                 "headers": {"Authorization": "Bearer {env:SEARCH_KEY}"}}})
    config = load_config(project, project)  # the Step's configuration, which a tool is handed on its context
    assert "websearch" in registry.offered(config)
    Handler.searches.clear()
    out = await settle_ok("websearch", {"query": "opencode tools", "numResults": 3}, make_ctx(project, config=config))
    assert out.text() == "1. Result for opencode tools - https://example.test/\n"
    assert Handler.searches == [{"body": {"query": "opencode tools", "numResults": 3, "livecrawl": "fallback",
                                          "type": "auto", "contextMaxCharacters": 10_000},
                                 "auth": "Bearer k-123"}]
    out = await settle_ok("websearch", {"query": "opencode tools", "contextMaxCharacters": 10},
                          make_ctx(project, config=config))
    assert out.text() == "1. Result \n[... results cut at contextMaxCharacters ...]"
