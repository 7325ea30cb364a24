"""OpenCode's own SDK against `ocs serve`: a client scoped to a directory (`createOpencodeClient({baseUrl,
directory})`) works on every operation, and the refusals it reads (an unknown agent, a route there is not) are typed
at once. The official package is installed from npm into a cache directory when node and npm are at hand."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import httpx2
import pytest

from tests.support.config import write_global_config
from tests.support.server import isolated_env, start_server

SDK_VERSION = "1.18.33"  # the OpenCode release the reference document describes
SCRIPT = Path(__file__).resolve().parents[1] / "support" / "opencode_sdk_calls.mjs"

pytestmark = pytest.mark.timeout(300)  # the first run installs the SDK


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ocs-tests"


@pytest.fixture(scope="module")
def sdk_package() -> Path:
    """The installed `@opencode-ai/sdk` package directory (installed once per version into the cache)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        reason = f"node and npm are needed to run OpenCode's SDK (node: {node}, npm: {npm})"
        print(reason)
        pytest.skip(reason)
    target = _cache_root() / f"opencode-sdk-{SDK_VERSION}"
    package = target / "node_modules" / "@opencode-ai" / "sdk"
    if not (package / "package.json").exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="opencode-sdk-", dir=target.parent))
        done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(scratch),
                               f"@opencode-ai/sdk@{SDK_VERSION}"], capture_output=True, text=True, timeout=240)
        if done.returncode != 0:
            shutil.rmtree(scratch, ignore_errors=True)
            reason = f"npm could not install @opencode-ai/sdk@{SDK_VERSION}: {done.stderr.strip()[-400:]}"
            print(reason)
            pytest.skip(reason)
        try:
            scratch.rename(target)  # whole or not at all: a half-finished install is never taken for one
        except OSError:  # another run installed it meanwhile
            shutil.rmtree(scratch, ignore_errors=True)
    return package


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("ocs-sdk")
    env = isolated_env(root)
    write_global_config(env["XDG_CONFIG_HOME"])
    proc = start_server(root, env=env)
    project = root / "project"
    project.mkdir()
    (project / "marker.txt").write_text("marker\n")
    yield proc, root / "work", project
    assert proc.stop() == 0, "".join(proc.stderr_lines)


def test_the_official_sdk_scoped_to_a_directory_is_answered_on_every_operation(sdk_package, served):
    proc, _work, project = served
    done = subprocess.run(["node", str(SCRIPT), str(sdk_package), proc.url, str(project)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    calls = result["calls"]
    assert len(calls) >= 20
    refused = [c for c in calls if not 200 <= c["status"] < 300]
    assert refused == [], refused
    facts = result["facts"]
    # the client's directory is the Location of what it creates and reads, unless a call names another
    assert facts["location"] == str(project) and facts["sessionDirectory"] == str(project)
    assert facts["elsewhereDirectory"] == str(project.parent)
    assert facts["firstEvent"] == "server.connected" and facts["admitted"]
    assert facts["unknownAgent"]["status"] == 400
    assert facts["unknownAgent"]["error"]["_tag"] == "InvalidRequestError"
    assert facts["unknownAgent"]["error"]["field"] == "agent"
    assert facts["missingRoute"]["status"] == 404
    assert facts["missingRoute"]["error"]["_tag"] == "NotFoundError"
    assert facts["missingRouteMessage"] == "No route for GET /api/no-such-route"


# --- the same over plain HTTP (no node needed) ----------------------------------------------------


@pytest.fixture
def http(served):
    proc, _work, _project = served
    with httpx2.Client(base_url=proc.url, timeout=10) as client:
        yield client


def test_directory_query_and_header_name_the_location(http, served):
    _proc, work, project = served
    assert http.get("/api/location").json()["directory"] == str(work)
    assert http.get("/api/location", params={"directory": str(project)}).json()["directory"] == str(project)
    encoded = str(project).replace("/", "%2F")  # as the SDK sends it
    assert http.get("/api/location", headers={"x-opencode-directory": encoded}).json()["directory"] == str(project)
    both = {"directory": str(project), "location[directory]": str(project)}
    assert http.get("/api/agent", params=both, headers={"x-opencode-directory": encoded}).status_code == 200
    created = http.post("/api/session", json={}, headers={"x-opencode-directory": encoded})
    assert created.status_code == 200 and created.json()["data"]["location"]["directory"] == str(project)
    # an explicit location in the body is the call's own choice
    there = http.post("/api/session", json={"location": {"directory": str(work)}},
                      headers={"x-opencode-directory": encoded})
    assert there.json()["data"]["location"]["directory"] == str(work)


def test_differing_directories_are_refused_naming_both(http, served):
    _proc, work, project = served
    answer = http.get("/api/agent", params={"directory": str(work), "location[directory]": str(project)})
    assert answer.status_code == 400
    body = answer.json()
    assert body["_tag"] == "InvalidRequestError" and body["field"] == "location.directory"
    assert "directory" in body["message"] and "location[directory]" in body["message"]
    assert str(work) in body["message"] and str(project) in body["message"]
    answer = http.post("/api/session", json={}, params={"directory": str(work)},
                       headers={"x-opencode-directory": str(project)})
    assert answer.status_code == 400 and "x-opencode-directory" in answer.json()["message"]
    # a directory that does not exist is the Location's usual refusal
    missing = http.get("/api/agent", params={"directory": str(project / "nope")})
    assert missing.status_code == 400 and missing.json()["field"] == "location.directory"


def test_where_there_is_no_location_the_scope_is_accepted_and_ignored(http, served):
    _proc, work, project = served
    sid = http.post("/api/session", json={}).json()["data"]["id"]
    nowhere = {"directory": "/no/such/dir", "location[directory]": "/elsewhere", "location[workspace]": "wrk_x"}
    for path in (f"/api/session/{sid}/message", f"/api/session/{sid}", "/api/health", "/api/permission/saved"):
        assert http.get(path, params=nowhere).status_code == 200, path
    # the session list keeps its own `directory` filter
    http.post("/api/session", json={"location": {"directory": str(project)}})
    listed = http.get("/api/session", params={"directory": str(project), "location[directory]": str(project)})
    assert listed.status_code == 200
    assert {s["location"]["directory"] for s in listed.json()["data"]} == {str(project)}
    # other unknown parameters are still refused
    assert http.get(f"/api/session/{sid}/message", params={"bogus": "1"}).status_code == 400


def test_switching_to_an_unknown_agent_is_refused_at_once(http):
    sid = http.post("/api/session", json={}).json()["data"]["id"]
    answer = http.post(f"/api/session/{sid}/agent", json={"agent": "no-such-agent"})
    assert answer.status_code == 400
    assert answer.json() == {"_tag": "InvalidRequestError", "message": "Agent not found: no-such-agent",
                             "kind": "body", "field": "agent"}
    assert http.get(f"/api/session/{sid}/message").json()["data"] == []  # nothing was switched
    assert http.post(f"/api/session/{sid}/agent", json={"agent": "plan"}).status_code == 204
    assert http.get(f"/api/session/{sid}").json()["data"]["agent"] == "plan"
    assert http.post("/api/session/ses_none/agent", json={"agent": "plan"}).status_code == 404


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_a_route_there_is_not_answers_404_not_found(http, method):
    answer = http.request(method, "/api/no-such-route")
    assert answer.status_code == 404 and answer.headers["content-type"].startswith("application/json")
    assert answer.json() == {"_tag": "NotFoundError", "message": f"No route for {method} /api/no-such-route",
                             "method": method, "path": "/api/no-such-route"}
    # a known path with a method it lacks is still a 405 naming the methods it has
    assert http.request("PUT", "/api/health").status_code == 405
