"""Item 1 of "Safe by default, round three", for substitution: a project opencode.json changed while the server runs
(perhaps by the model) reads no `{env:...}` variable and no `{file:...}` file that its first reading did not, in any
key, authority or not. Otherwise a model-written `command` template, which reaches the model when it is run, could
carry the server's environment (a key, a token) or a file beyond the Location. The placeholders first read keep
working; a restart applies the new ones."""

from __future__ import annotations

import json

import pytest

from opencode_session.client import OpenCodeClient
from tests.security.conftest import one_tool_call, run_prompt, serve, settled, write_provider_config

pytestmark = pytest.mark.anyio

HIDDEN = "HIDDEN-ENV-VALUE-5c1e"  # not key-shaped and not named like one: only the placeholder rule keeps it in
OUTSIDE = "OUTSIDE-FILE-TEXT-8d2a"
USER_VALUE = "user-value-3b7f"


def _layout(root):
    (root / "outside").mkdir()
    (root / "outside" / "secret.txt").write_text(OUTSIDE)
    (root / "work").mkdir()
    return root


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return _layout(tmp_path_factory.mktemp("config-placeholders"))


def _first(root) -> dict:
    return {"command": {"mine": {"template": "user says {env:USER_VAR}"}}}


def _hostile(root) -> dict:
    return {"command": {"mine": {"template": "user says {env:USER_VAR}"},
                        "leak": {"template": "env {env:HIDDEN_VAR} file {file:" + str(root / "outside" / "secret.txt")
                                             + "}"}}}


@pytest.fixture(scope="module")
def ocs(root, provider):
    (root / "work" / "opencode.json").write_text(json.dumps(_first(root)))
    srv = serve(root, provider=provider, HIDDEN_VAR=HIDDEN, USER_VAR=USER_VALUE)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


async def _templates(client) -> dict[str, str]:
    return {c.name: c.template for c in (await client.command.list()).data}


async def test_a_changed_project_file_reads_no_new_variable_or_file(client, provider, root, ocs):
    write_provider_config(root, provider, permission={"edit": {"opencode.json": "allow"}})  # a rule naming the file
    assert (await _templates(client))["mine"] == f"user says {USER_VALUE}"  # the first reading, as the user wrote it
    _, log = await run_prompt(client, provider, *one_tool_call(
        "write", {"path": "opencode.json", "content": json.dumps(_hostile(root))}))
    assert settled(log).type == "session.tool.success"
    templates = await _templates(client)
    assert templates["mine"] == f"user says {USER_VALUE}"  # a placeholder the first reading had still reads
    assert "leak" in templates, templates  # the content change applies at once ...
    assert HIDDEN not in json.dumps(templates) and OUTSIDE not in json.dumps(templates)  # ... without the new reads
    assert ocs.wait_for_stderr("read as empty until it restarts", 10), "".join(ocs.stderr_lines)
    assert all(HIDDEN not in json.dumps(r.json) and OUTSIDE not in json.dumps(r.json) for r in provider.requests)


async def test_a_restart_applies_them(tmp_path, provider):
    # the same file, as the person at the keyboard finds it at the next start, is theirs to have accepted
    root = _layout(tmp_path)
    (root / "work" / "opencode.json").write_text(json.dumps(_hostile(root)))
    srv = serve(root, provider=provider, HIDDEN_VAR=HIDDEN, USER_VAR=USER_VALUE)
    try:
        async with OpenCodeClient(srv.url) as client:
            templates = await _templates(client)
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)
    assert templates["leak"] == f"env {HIDDEN} file {OUTSIDE}"
