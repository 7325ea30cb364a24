"""How the inspector's pages are made: the Jinja2 templates with their filters (loaded with the first page served),
an HTML answer with the page's security headers, and an SSE frame of HTML."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from markupsafe import Markup
from starlette.responses import HTMLResponse

from ..sse import text_frame
from . import reading

if TYPE_CHECKING:
    from jinja2 import Environment
    from markdown_it import MarkdownIt

MARKDOWN_KEPT = 4096  # rendered answers kept: a settled answer's text never changes, and every re-render shows it


@lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    return reading.markdown()  # CommonMark with tables; raw HTML is escaped, javascript: links refused


@lru_cache(maxsize=MARKDOWN_KEPT)
def _markdown_html(text: str) -> Markup:
    return Markup(_markdown().render(text))


@lru_cache(maxsize=1)
def _templates() -> Environment:
    """The pages' templates with their filters, made with the first page served (Jinja2 and the filters' Pygments and
    markdown-it are not loaded by a server nobody browses)."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    templates = Environment(loader=PackageLoader(__package__, "templates"), autoescape=select_autoescape(),
                            trim_blocks=True, lstrip_blocks=True)
    templates.filters["markdown"] = _markdown_html
    # JSON to read (a tool's input): as written, not with `'` and `<` as \u escapes; autoescape makes it safe in HTML
    templates.filters["pretty_json"] = lambda value: json.dumps(value, indent=2, ensure_ascii=False)
    templates.filters["thousands"] = reading.thousands
    templates.filters["tool_label"] = reading.tool_label
    templates.filters["tool_output"] = reading.tool_output
    templates.globals["code_block"] = reading.code_block
    return templates


def render(name: str, **values: Any) -> str:
    return _templates().get_template(name).render(**values)


def html(text: str, status: int = 200) -> HTMLResponse:
    # the page's scripts are its own files: nothing inline runs, nothing is fetched from elsewhere
    return HTMLResponse(text, status_code=status, headers={
        "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'",
        "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"})


def sse(event: str, fragment: str) -> bytes:
    return text_frame(event, fragment)
