"""A host process for crash tests: the server `ocs serve` runs (`server.serve`, managed, on loopback), with the built-in
tools plus two test tools that append a line to `<directory>/<name>.log` each time they run and then wait while
`<directory>/<name>.hold` exists, so a test can kill the host mid-call and count the runs. `tally` declares itself
idempotent, `ledger` does not. Run as `python -m tests.support.crash_host --db PATH --directory DIR`; it prints the
line `ocs serve` prints once it listens."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from opencode_session.core.runtime import RuntimeOptions
from opencode_session.core.tools.registry import default_registry
from opencode_session.core.tools.tool import ToolContext, ToolOutput
from opencode_session.core.wiring import make_drain_factory
from opencode_session.server.serve import ServeRefused, serve

HOLD_POLL_S = 0.02  # how often a held tool looks whether the test released it


class AppendingTool:
    """Appends one line per run to its log in the session's Location, then waits while its hold file exists."""

    description = "A test tool that records each of its runs"
    parameters: dict[str, Any] = {"type": "object", "properties": {"note": {"type": "string"}}}

    def __init__(self, name: str, idempotent: bool) -> None:
        self.name = name
        self.idempotent = idempotent

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        log = ctx.directory / f"{self.name}.log"
        with log.open("a") as out:
            out.write(f"{input.get('note', '')}\n")
        runs = len(log.read_text().splitlines())
        while (ctx.directory / f"{self.name}.hold").exists():
            await asyncio.sleep(HOLD_POLL_S)
        return ToolOutput.of_text(f"{self.name} run {runs} done")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--directory", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    tools = default_registry()
    tools.register(AppendingTool("tally", idempotent=True))
    tools.register(AppendingTool("ledger", idempotent=False))
    options = RuntimeOptions(db_path=args.db, directory=args.directory,
                             drain_factory=make_drain_factory(tools=tools, titles=False))
    try:
        asyncio.run(serve(options, port=args.port,
                          on_ready=lambda url, _rt: print(f"opencode-session listening on {url}", flush=True)))
    except ServeRefused as refused:
        print(f"crash host: {refused}", flush=True)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
