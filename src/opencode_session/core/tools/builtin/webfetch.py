"""The `webfetch` tool: fetches one http(s) URL, bounded in size and time, as markdown, plain text or raw HTML."""

from __future__ import annotations

import asyncio
from typing import Literal
from urllib.parse import urlsplit

import anyio.to_thread
from pydantic import BaseModel, Field

from ...own_address import is_own
from ...permission.rules import OWN_SERVER
from ..arguments import schema_of
from ..tool import ToolContext, ToolFailure, ToolOutput

MAX_BYTES = 5 * 1024 * 1024
DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 120.0
MAX_REDIRECTS = 5
_ACCEPT = "text/markdown, text/html;q=0.9, text/*;q=0.8, */*;q=0.5"
_TEXTUAL = ("text/", "application/json", "application/xml", "application/xhtml", "application/javascript",
            "application/x-javascript", "application/ld+json", "application/rss", "application/atom")


class WebFetchArguments(BaseModel):
    url: str = Field(min_length=1, description="The URL to fetch")
    format: Literal["text", "markdown", "html"] = Field(
        "markdown", description="How to return the content (default markdown)")
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, description="Timeout in seconds (at most 120)")


class WebFetchTool:
    name = "webfetch"
    changes_files = False
    idempotent = True  # no effect beyond its answer: after a lost host it may run again
    description = (
        "Fetch a web page or other text resource by URL.\n"
        "\n"
        "- Only http:// and https:// URLs.\n"
        "- `format` is markdown (default: HTML converted to markdown), text (HTML reduced to plain text) or html"
        " (the page as served).\n"
        "- `timeout` is in seconds (default 30, at most 120). Responses over 5 MB are refused."
    )
    arguments = WebFetchArguments
    parameters = schema_of(WebFetchArguments)

    async def execute(self, args: WebFetchArguments, ctx: ToolContext) -> ToolOutput:
        url = args.url.strip()
        fmt = args.format
        timeout = min(args.timeout, MAX_TIMEOUT)
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ToolFailure(f"Cannot fetch {url!r}: only http:// and https:// URLs are supported.")
        if await anyio.to_thread.run_sync(is_own, url, abandon_on_cancel=True):
            # the server's own API: whoever reaches it drives every session (denied unless configured)
            await ctx.permit(OWN_SERVER, [url])
        await ctx.permit("webfetch", [url])
        body, mime, final_url = await _fetch(url, timeout)
        if not any(mime.startswith(kind) for kind in _TEXTUAL):
            raise ToolFailure(f"Cannot use {url}: its content type is {mime or 'unknown'}, which is not text.")
        text = body
        if "html" in mime and fmt != "html":
            text = _html_to(fmt, body, final_url)
        return ToolOutput.of_text(text, {"url": final_url, "contentType": mime, "format": fmt},
                                  title=f"{final_url} ({mime})")


async def _fetch(url: str, timeout: float) -> tuple[str, str, str]:
    """The decoded body, its media type and the URL it finally came from (after redirects)."""
    import httpx2  # loaded on first use, not at start-up

    async def not_back_to_the_server(request: httpx2.Request) -> None:
        if str(request.url) != url and await anyio.to_thread.run_sync(is_own, str(request.url),
                                                                         abandon_on_cancel=True):
            raise ToolFailure(f"Fetching {url} was redirected to this server's own API, which is refused.")

    try:
        async with asyncio.timeout(timeout), httpx2.AsyncClient(
                follow_redirects=True, max_redirects=MAX_REDIRECTS, timeout=timeout, headers={"Accept": _ACCEPT},
                trust_env=False, event_hooks={"request": [not_back_to_the_server]}) as client, \
                client.stream("GET", url) as response:
            if response.status_code >= 400:
                raise ToolFailure(f"Fetching {url} failed with HTTP {response.status_code}.")
            declared = response.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > MAX_BYTES:
                raise ToolFailure(f"{url} is too large ({declared} bytes; the limit is {MAX_BYTES}).")
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > MAX_BYTES:
                    raise ToolFailure(f"{url} is larger than the {MAX_BYTES // (1024 * 1024)} MB limit.")
                chunks.append(chunk)
            mime = response.headers.get("content-type", "").split(";")[0].strip().lower()
            charset = response.charset_encoding or "utf-8"
            try:
                body = b"".join(chunks).decode(charset, "replace")
            except LookupError:  # an unknown charset name
                body = b"".join(chunks).decode("utf-8", "replace")
            return body, mime, str(response.url)
    except (httpx2.TimeoutException, TimeoutError):
        raise ToolFailure(f"Fetching {url} timed out after {timeout:g} s.") from None
    except httpx2.TooManyRedirects:
        raise ToolFailure(f"Fetching {url} followed more than {MAX_REDIRECTS} redirects.") from None
    except httpx2.HTTPError as exc:
        raise ToolFailure(f"Fetching {url} failed: {exc}") from None


def _html_to(fmt: str, html: str, base_url: str) -> str:
    import html2text  # loaded with the first page converted, not with the tools

    converter = html2text.HTML2Text(baseurl=base_url)
    converter.body_width = 0  # no hard wrapping: the model reads long lines fine
    if fmt == "text":
        converter.ignore_links = True
        converter.ignore_images = True
        converter.ignore_emphasis = True
    return converter.handle(html).strip() + "\n"
