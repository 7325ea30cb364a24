"""Round four of "Safe by default": the model cannot grow `/metrics` without bound. A tool call's metrics are labelled
by its tool only when the Step offered that tool; a name the model made up is counted as `other`, so five invented
names make no new series. `ocs serve` with a scripted model (a loopback Chat Completions server), scraped with
prometheus_client's parser."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anyio
import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from opencode_session.client import OpenCodeClient
from tests.support import fake_openai as fake
from tests.support.server import ServerProcess, start_configured

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

INVENTED = ["steal_keys", "x" * 200, "ünïcode", "read ", "bash\nexport"]


@pytest.fixture(scope="module")
def ocs(tmp_path_factory, loop_provider) -> Iterator[ServerProcess]:
    config = loop_provider.serve_config({"fake-model": {}}, model="loop/fake-model")
    srv, _ = start_configured(tmp_path_factory.mktemp("metrics"), config)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


async def scrape(http: httpx2.AsyncClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = await http.get("/metrics")
    assert answer.status_code == 200
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(answer.text) for sample in family.samples}


async def test_tool_names_the_model_invents_make_no_new_series(ocs, loop_provider):
    calls = [d for i, name in enumerate([*INVENTED, "read"]) for d in fake.tool_call_deltas(
        i, f"call_{i}", name, json.dumps({"path": "missing.txt"}))]
    loop_provider.enqueue(fake.completion(calls, finish_reason="tool_calls"),
                          fake.completion(fake.text_deltas("done")))
    async with httpx2.AsyncClient(base_url=ocs.url, timeout=30) as http:
        before = await scrape(http)  # the first scrape starts counting
        async with OpenCodeClient(ocs.url) as client:
            sid = (await client.session.create()).id
            await client.session.prompt(sid, prompt={"text": "call them all"})
            with anyio.fail_after(60):
                await client.session.wait(sid)
        after = await scrape(http)
    tools = {dict(labels).get("tool") for name, labels in after if name.startswith("ocs_tool_call")}
    assert tools == {"other", "read"}
    new_series = [dict(labels)["tool"] for name, labels in after
                  if (name, labels) not in before and name.startswith("ocs_tool_call")]
    assert new_series.count("other") == new_series.count("read")  # five names made the series of one tool
    key = ("ocs_tool_calls_total", (("outcome", "error"), ("tool", "other")))
    assert after[key] - before.get(key, 0) == len(INVENTED)
    assert after[("ocs_tool_calls_total", (("outcome", "error"), ("tool", "read")))] >= 1
