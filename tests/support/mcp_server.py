"""A real MCP server for the tests, written with the official SDK (MCPServer, FastMCP's successor), over stdio or
streamable HTTP: `python -m tests.support.mcp_server NAME [stdio | http PORT | sse PORT]`.

Its tools: `echo` answers its text, `fail` fails with a message, `hang` waits until cancelled (writing
`$MCP_TEST_MARKS/cancelled` when the client's cancellation reaches it), `work` takes a while (reporting progress or
not), `image` returns a PNG, `structured` a structured value, `resource` an embedded resource, `pid` its process id,
`roots` the client's roots, `link` a link to its resource `test://notes` (it also has `test://pixel`, a PNG, and
the template `test://tickets/{number}`), `grow` adds a tool and tells the client the list changed, `die` exits at
once. With `$MCP_TEST_LINGER` it stays alive after its stdin ends. Its instructions are `$MCP_TEST_INSTRUCTIONS`
(none when unset); with `$MCP_TEST_TOOLS` it also offers that many `t0`, `t1`, ... tools."""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import EmbeddedResource, ResourceLink, TextResourceContents

# a 1x1 transparent PNG
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5E"
                       "rkJggg==")


def mark(name: str, text: str = "") -> None:
    marks = os.environ.get("MCP_TEST_MARKS")
    if marks:
        Path(marks, name).write_text(text)


def build(name: str) -> MCPServer:
    server = MCPServer(name, instructions=os.environ.get("MCP_TEST_INSTRUCTIONS") or None, log_level="ERROR")

    @server.tool(description="Answer the text given")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="Fail with the message given")
    def fail(message: str) -> str:
        raise ToolError(message)

    @server.tool(description="Wait until cancelled")
    async def hang() -> str:
        mark("hanging", str(os.getpid()))
        try:
            await asyncio.sleep(3600)
        except BaseException:
            mark("cancelled")
            raise
        return "woke"

    @server.tool(description="Work for `seconds`, reporting progress every `every` seconds (never, when 0)")
    async def work(ctx: Context, seconds: float, every: float = 0) -> str:
        deadline = time.monotonic() + seconds
        step = 0
        while (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(every, left) if every else left)
            if every:
                step += 1
                await ctx.report_progress(step, message=f"step {step}")
        return f"worked {seconds:g} s"

    @server.tool(description="Return a small PNG image")
    def image() -> Image:
        return Image(data=PNG, format="png")

    @server.tool(description="Return a structured value")
    def structured(n: int) -> dict[str, Any]:
        return {"n": n, "square": n * n}

    @server.tool(description="Return an embedded text resource")
    def resource() -> EmbeddedResource:
        return EmbeddedResource(type="resource", resource=TextResourceContents(uri="file:///notes.txt",
                                                                               mime_type="text/plain", text="notes"))

    @server.resource("test://notes", name="notes", description="The team's notes", mime_type="text/plain")
    def notes() -> str:
        return "Ship on Friday."

    @server.resource("test://pixel", name="pixel", mime_type="image/png")
    def pixel() -> bytes:
        return PNG

    @server.resource("test://tickets/{number}", name="ticket", mime_type="text/plain")
    def ticket(number: str) -> str:
        return f"Ticket {number}: open"

    @server.tool(description="Return a link to the notes resource")
    def link() -> ResourceLink:
        return ResourceLink(type="resource_link", uri="test://notes", name="notes", mime_type="text/plain")

    @server.tool(description="The server's process id and working directory")
    def pid() -> str:
        return f"{os.getpid()} {os.getcwd()} {os.environ.get('MCP_TEST_SEEN', '')}"

    @server.tool(description="The client's roots, one URI a line")
    async def roots(ctx: Context) -> str:
        listed = await ctx.session.list_roots()
        return "\n".join(f"{root.uri} {root.name}" for root in listed.roots)

    @server.tool(description="Add a tool named `grown`")
    async def grow(ctx: Context) -> str:
        server.add_tool(lambda: "grown ran", name="grown", description="A tool added later")
        await ctx.session.send_tool_list_changed()
        return "grew"

    @server.tool(description="Exit at once")
    def die() -> str:
        os._exit(3)

    for i in range(int(os.environ.get("MCP_TEST_TOOLS", "0"))):
        server.add_tool(lambda x=i: f"t{x}", name=f"t{i}", description=f"Numbered tool {i}")
    return server


def main(argv: list[str]) -> None:
    name, transport = argv[0], (argv[1] if len(argv) > 1 else "stdio")
    server = build(name)
    mark(f"started-{os.getpid()}", str(os.getpid()))
    if transport == "stdio":
        server.run("stdio")
        if os.environ.get("MCP_TEST_LINGER"):  # a server that outlives its stdin: only a signal ends it
            mark(f"lingering-{os.getpid()}")
            while True:
                time.sleep(3600)
    elif transport == "http":
        asyncio.run(server.run_streamable_http_async(host="127.0.0.1", port=int(argv[2])))
    elif transport == "sse":
        asyncio.run(server.run_sse_async(host="127.0.0.1", port=int(argv[2])))
    else:
        raise SystemExit(f"unknown transport {transport}")


if __name__ == "__main__":
    main(sys.argv[1:])
