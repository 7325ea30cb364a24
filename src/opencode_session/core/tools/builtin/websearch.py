"""The `websearch` tool: asks the search backend configured in opencode.json; offered only when one is configured.

The backend is any HTTP endpoint, configured as
    "websearch": {"url": "https://search.example/api", "headers": {"Authorization": "Bearer {env:SEARCH_KEY}"}}
It receives a POST with the JSON body {"query", "numResults", "livecrawl", "type", "contextMaxCharacters"} and
answers with the results as text (any text type, or JSON, which is passed on as it is)."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import BaseModel, Field

from ...config import Config
from ..arguments import schema_of
from ..tool import ToolContext, ToolFailure, ToolOutput

DEFAULT_RESULTS = 8
DEFAULT_CONTEXT_CHARS = 10_000
TIMEOUT_SECONDS = 30.0
MAX_RESPONSE_BYTES = 1024 * 1024


class WebSearchArguments(BaseModel):
    query: str = Field(min_length=1, description="What to search for")
    numResults: int = Field(DEFAULT_RESULTS, gt=0, le=20, description="How many results (default 8)")  # noqa: N815
    livecrawl: Literal["fallback", "preferred"] = Field(
        "fallback", description="Whether to fetch pages live: as a fallback or preferred")
    type: Literal["auto", "fast", "deep"] = Field("auto", description="Search depth")
    contextMaxCharacters: int = Field(DEFAULT_CONTEXT_CHARS, gt=0, le=50_000,  # noqa: N815 - OpenCode's names
                                      description="Most characters of result text (default 10000)")


class WebSearchTool:
    name = "websearch"
    changes_files = False
    description = (
        "Search the web and return the results as text.\n"
        "\n"
        "- Use it for current information or anything beyond what you know; cite the sources you use.\n"
        "- `numResults` (default 8, at most 20) and `contextMaxCharacters` (default 10000) bound the answer."
    )
    arguments = WebSearchArguments
    parameters = schema_of(WebSearchArguments)

    @staticmethod
    def offered(config: Config) -> bool:
        """Offered to the model only when a backend is configured."""
        return bool(config.websearch and config.websearch.url)

    async def execute(self, args: WebSearchArguments, ctx: ToolContext) -> ToolOutput:
        backend = ctx.config.websearch
        if backend is None or not backend.url:
            raise ToolFailure("Web search is not available: no search backend is configured.")
        query = args.query
        await ctx.permit("websearch", [query])
        limit = args.contextMaxCharacters
        body = {"query": query, "numResults": args.numResults, "livecrawl": args.livecrawl, "type": args.type,
                "contextMaxCharacters": limit}
        text = await _search(backend.url, backend.headers, body)
        if len(text) > limit:
            text = text[:limit] + "\n[... results cut at contextMaxCharacters ...]"
        return ToolOutput.of_text(text or "No results.", {"query": query}, title=f"Web search: {query}")


async def _search(url: str, headers: dict[str, str], body: dict[str, Any]) -> str:
    import httpx2  # loaded on first use, not at start-up

    try:
        async with asyncio.timeout(TIMEOUT_SECONDS), httpx2.AsyncClient(timeout=TIMEOUT_SECONDS,
                                                                        trust_env=False) as client:
            async with client.stream("POST", url, json=body, headers=headers) as response:
                if response.status_code >= 400:
                    raise ToolFailure(f"The search backend answered HTTP {response.status_code}.")
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > MAX_RESPONSE_BYTES:
                        break  # more than any answer is allowed to show
                return bytes(data[:MAX_RESPONSE_BYTES]).decode("utf-8", "replace")
    except (httpx2.TimeoutException, TimeoutError):
        raise ToolFailure(f"The search backend did not answer within {TIMEOUT_SECONDS:g} s.") from None
    except httpx2.HTTPError as exc:
        raise ToolFailure(f"The search backend could not be reached: {exc}") from None
