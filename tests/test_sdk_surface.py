"""An embedded tool written with nothing but `opencode_session.sdk`'s names: the model calls it, it reads its
context and answers text, and a ToolFailure it raises reaches the model as the call's error."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from opencode_session.sdk import OpenCode, ToolContext, ToolFailure, ToolOutput, ToolTextContent
from tests.security.conftest import write_provider_config
from tests.support import fake_openai as fake
from tests.support.server import isolated_env

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


class Shout:
    name = "shout"
    description = "Repeat a word loudly."
    parameters: dict[str, Any] = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        if input["word"] == "":
            raise ToolFailure("nothing to shout")
        return ToolOutput(content=[ToolTextContent(text=f"{input['word'].upper()} (in {ctx.directory.name})")])


async def test_a_tool_made_of_the_sdk_surface_runs_and_fails_as_the_model_sees_it(tmp_path, loop_provider):
    (tmp_path / "work").mkdir()
    write_provider_config(tmp_path, loop_provider)
    loop_provider.requests.clear()
    calls = [fake.completion(fake.tool_call_deltas(0, f"call_{n}", "shout", json.dumps({"word": word})),
                             finish_reason="tool_calls") for n, word in enumerate(("hey", ""))]
    loop_provider.enqueue(calls[0], calls[1], fake.completion(fake.text_deltas("done")))
    async with OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path / "work", env=isolated_env(tmp_path),
                        tools=[Shout()]) as oc:
        sid = (await oc.session.create()).id
        await oc.session.prompt(sid, prompt={"text": "shout"})
        with anyio.fail_after(50):
            await oc.session.wait(sid)
    offered = {tool["function"]["name"] for tool in loop_provider.requests[0].json["tools"]}
    assert "shout" in offered
    answers = [r.json["messages"][-1]["content"] for r in loop_provider.requests[1:3]]
    assert answers[0] == "HEY (in work)"
    assert "nothing to shout" in answers[1]
