"""Item 3 of "Safe by default, round three": the server's password (and the provider keys) are not in the model's
hands. They are left out of every child's environment (`bash`, terminals, local MCP servers), and `webfetch` of the
server's own address, by any loopback alias, with or without user info, or reached by a redirect, is refused unless
the user's config allows `opencode_server`."""

from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import pytest

from opencode_session.client import OpenCodeClient
from tests.security.conftest import one_tool_call, run_prompt, serve, settled, write_provider_config
from tests.support.mcp_harness import local

pytestmark = pytest.mark.anyio

PASSWORD = "pw-5e1d77c0b2"
PROVIDER_KEY = "sk-env-key-3f9a01"
CONFIG_KEY = "test-key"  # the loopback provider's `apiKey` (tests/security/conftest.py)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("child-secrets")


@pytest.fixture(scope="module")
def ocs(root, provider):
    srv = serve(root, provider=provider, OPENCODE_SERVER_PASSWORD=PASSWORD, OPENCODE_SERVER_USERNAME="opencode",
                OPENAI_API_KEY=PROVIDER_KEY, MY_KEY_VAR=CONFIG_KEY)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


@pytest.fixture
async def client(ocs, root, provider):
    write_provider_config(root, provider)
    provider.requests.clear()
    async with OpenCodeClient(ocs.url, auth=("opencode", PASSWORD)) as c:
        yield c
    assert provider.pending == 0, "a scripted provider response was never requested"


def _sent(provider) -> str:
    return json.dumps([r.json for r in provider.requests])


async def test_bash_does_not_see_the_password_or_the_keys(client, provider):
    _, log = await run_prompt(client, provider, *one_tool_call("bash", {"command": "env", "description": "env"}))
    assert settled(log).type == "session.tool.success"
    seen = provider.requests[1].json["messages"][-1]["content"]
    assert "HOME=" in seen  # the environment is there ...
    for secret in (PASSWORD, PROVIDER_KEY, CONFIG_KEY, "OPENCODE_SERVER_USERNAME"):  # ... but not these
        assert secret not in seen, secret


async def test_a_terminal_does_not_see_them(client, root):
    fifo = root / "terminal-env"
    os.mkfifo(fifo)
    script = f"import json, os; open({str(fifo)!r}, 'w').write(json.dumps(dict(os.environ)))"
    pty = (await client.pty.create(command=sys.executable, args=["-c", script])).data
    try:
        with anyio.fail_after(30):  # the read ends when the terminal's program has written its environment
            env = json.loads(await anyio.to_thread.run_sync(fifo.read_text, abandon_on_cancel=True))
    finally:
        await client.pty.remove(pty.id)
    assert "HOME" in env and "OPENCODE_SERVER_PASSWORD" not in env and "OPENAI_API_KEY" not in env
    assert PASSWORD not in json.dumps(env) and PROVIDER_KEY not in json.dumps(env)


async def test_a_local_mcp_server_does_not_see_them(client, root):
    marks = root / "mcp-marks"
    marks.mkdir(exist_ok=True)
    work = root / "mcp-project"
    work.mkdir(exist_ok=True)
    (work / "opencode.json").write_text(json.dumps({"mcp": {"srv": local("srv", MCP_TEST_MARKS=str(marks))}}))
    answer = await client.mcp.connect(location={"directory": str(work)})
    assert answer.data["srv"].status == "connected", answer.data
    [started] = [p for p in marks.iterdir() if p.name.startswith("started-")]
    environ = open(f"/proc/{int(started.read_text())}/environ", "rb").read().decode(errors="replace")
    assert "HOME=" in environ and PASSWORD not in environ and PROVIDER_KEY not in environ


class _Redirect(BaseHTTPRequestHandler):
    target = ""

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(302)
        self.send_header("Location", self.target)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.mark.parametrize("form", ["{scheme}://opencode:{pw}@127.0.0.1:{port}/api/session",
                                  "{scheme}://localhost:{port}/api/session", "{scheme}://127.0.0.2:{port}/api/session",
                                  "{scheme}://127.1:{port}/api/session", "{scheme}://[::1]:{port}/api/session",
                                  "{scheme}://0.0.0.0:{port}/api/session", "{scheme}://2130706433:{port}/",
                                  "{scheme}://LOCALHOST.:{port}/api/session", "redirect"])
async def test_webfetch_of_the_servers_own_address_is_denied(client, provider, ocs, form):
    port = ocs.url.rsplit(":", 1)[1]
    target = f"http://opencode:{PASSWORD}@127.0.0.1:{port}/api/session"
    redirector = None
    if form == "redirect":
        _Redirect.target = target
        redirector = ThreadingHTTPServer(("127.0.0.1", 0), _Redirect)
        threading.Thread(target=redirector.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{redirector.server_address[1]}/elsewhere"
    else:
        url = form.format(scheme="http", pw=PASSWORD, port=port)
    try:
        _, log = await run_prompt(client, provider, *one_tool_call("webfetch", {"url": url}))
    finally:
        if redirector is not None:
            redirector.shutdown()
            redirector.server_close()
    result = settled(log)
    assert result.type == "session.tool.failed", url
    if form != "redirect":
        assert result.data.error.type == "permission.rejected" and "opencode_server" in result.data.error.message
    assert "ses_" not in provider.requests[1].json["messages"][-1]["content"]


async def test_webfetch_of_another_local_port_still_works(client, provider):
    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = b"a local page"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    page = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=page.serve_forever, daemon=True).start()
    try:
        _, log = await run_prompt(client, provider, *one_tool_call(
            "webfetch", {"url": f"http://localhost:{page.server_address[1]}/", "format": "text"}))
    finally:
        page.shutdown()
        page.server_close()
    assert settled(log).type == "session.tool.success"
    assert "a local page" in provider.requests[1].json["messages"][-1]["content"]
